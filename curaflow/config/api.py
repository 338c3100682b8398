"""The ``[api]`` section: the HTTP job API and the pushes to a job's ``callback_url``."""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator

from curaflow.config.base import Section

#: The smallest ``api.max_body_bytes``: room for a small Task. Below it (0, a negative
#: number — loaded until 2026-12-06) every ``POST /jobs`` and every Task from Temporal,
#: Nexus or ``curaflow run`` would be refused as too large.
MIN_BODY_BYTES = 1024


class ApiSettings(Section):
    """The HTTP job API.

    Attributes:
        token: bearer token for every protected route (``CURAFLOW_API_TOKEN``). With no
            token the API refuses protected routes (fail closed) unless ``insecure``.
        insecure: serve protected routes without a token (prints a warning).
        callback_allowed_hosts: origins a ``callback_url`` may point at, each ``host``
            (the scheme's default port: 80 / 443), ``host:port`` or ``host:*`` (any port);
            empty refuses all. Port 0 is never allowed, and the address the host resolves
            to is checked when connecting (``outbound.private_networks``).
        callback_secret: ``whsec_<base64>`` secret every push is signed with (Standard
            Webhooks, as the webhook route); a ``callback_url`` is refused while it is
            unset.
        callback_timeout_ms: total time of one callback POST (connect, send, answer).
        callback_max_attempts: sends of one event before it is dead-lettered (1..8).
        callback_retry_initial_interval_ms / callback_retry_max_interval_ms: backoff of
            the ``push_events`` activity's retries (doubling, capped; the first above the
            second is refused at load: :data:`curaflow.config.checks.ORDERED_SETTINGS`).
        callback_max_concurrency: pushes one worker process sends at once — the activity
            slots of the pushes' own task queue (``<temporal.task_queue>-pushes``), which no
            job step shares: a receiver that never answers holds at most these, each for
            ``callback_timeout_ms``, and every job's steps keep the main queue's slots.
        port: the API's TCP port, 1 … 65535.
        max_body_bytes: largest accepted request body (413 beyond); at least
            :data:`MIN_BODY_BYTES`.
        cancel_wait_ms: how long ``POST /jobs/{id}/cancel`` waits for in-flight work
            to stop before answering.
        start_concurrency: workflow starts in flight at once; an admission answers once
            the job is durable and its workflow is started in the background.
        body_timeout_ms: longest time to receive a request body once its headers
            arrived; a body shorter than its ``Content-Length`` is answered 408 and the
            connection closed instead of holding a coroutine for ever.
        head_timeout_ms: longest time to receive a request's head (request line and
            headers) on a connection waiting for one — a new connection, or one kept
            alive after an answer once the next request's first byte came; a head begun
            and late is answered 408, a connection with none is closed
            (:func:`curaflow.process.httpserver.bounded_http`). A worker's metrics and
            health endpoint reads its requests by the same bound
            (:func:`curaflow.process.health_server.health_server`).
        ledger_timeout_ms: the API's bound on each wait on PostgreSQL (connect, pool
            acquire, statement; each ``database.*_timeout_ms`` capped at it). A ledger
            that does not answer within it is answered ``503`` ``ledger_unavailable``
            with ``Retry-After``.
    """

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=1, le=65_535)
    token: SecretStr | None = None
    insecure: bool = False
    callback_allowed_hosts: list[str] = Field(default_factory=list)
    callback_secret: SecretStr | None = None
    callback_timeout_ms: int = Field(default=30_000, ge=100)
    callback_max_attempts: int = Field(default=8, ge=1, le=8)
    callback_retry_initial_interval_ms: int = Field(default=1_000, ge=10)
    callback_retry_max_interval_ms: int = Field(default=60_000, ge=10)
    callback_max_concurrency: int = Field(default=50, ge=1, le=1000)
    max_body_bytes: int = Field(default=65_536, ge=MIN_BODY_BYTES)
    cancel_wait_ms: int = Field(default=10_000, ge=0)
    start_concurrency: int = Field(default=8, ge=1)
    body_timeout_ms: int = Field(default=30_000, ge=100)
    head_timeout_ms: int = Field(default=30_000, ge=100)
    ledger_timeout_ms: int = Field(default=2_000, ge=100)

    @field_validator("callback_allowed_hosts")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        from curaflow.outbound.destinations import parse_origin

        for entry in value:
            parse_origin(entry)
        return value

    @field_validator("callback_secret")
    @classmethod
    def _callback_secret_shape(cls, value: SecretStr | None) -> SecretStr | None:
        from standardwebhooks.webhooks import Webhook

        if value is None:
            return None
        try:
            Webhook(value.get_secret_value())
        # Whatever the library raises means the secret cannot sign: its classes are not all
        # ValueErrors (an empty secret raised EmptyWebhookSecretError, an Exception: a
        # traceback instead of a configuration error, until 2026-12-06).
        except Exception:  # noqa: BLE001 - any refusal of the library is this refusal
            raise ValueError("callback secret must be 'whsec_' followed by base64") from None
        return value

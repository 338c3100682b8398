"""Configuration: a TOML file validated by pydantic, overridable from the environment.

Sources, highest priority first:

1. explicit keyword arguments to :func:`load_settings`;
2. conventional environment variables: ``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``,
   ``DATABASE_URL``, ``CURAFLOW_API_TOKEN``, ``PIXIV_REFRESH_TOKEN``;
3. ``CURAFLOW_<SECTION>__<FIELD>`` environment variables (``CURAFLOW_API__PORT=9000``);
4. the TOML file named by ``--config`` or ``CURAFLOW_CONFIG``;
5. built-in defaults: one target ``demo`` searching ``オリジナル`` and delivering to the
   directory ``./curaflow-out``.

Relative paths are resolved against the current directory when the settings load, so
every process of one stack sees the same absolute paths. Budgets resolve as in the
original (reference §8): a value is used only when it is a number ≥ the 60 s floor,
anything else falls back to the default, and — as the original's config validation
does — every process that uses the budgets logs one ``config.budget_fallback`` warning
per such field, naming the field, the value given and the value used
(:func:`warn_budget_fallbacks`); :attr:`BudgetSettings.test_only_floor_ms` lowers the
floor for tests and logs a warning.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypedDict
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    SerializeAsAny,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NestedSecretsSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from curaflow.domain.messages import Budgets, CallbackPolicy, RouteRef, TargetFilters, TargetQuery
from curaflow.outbound.settings import OutboundSettings
from curaflow.routes import DirectoryRouteConfig, RouteSettings, import_route_modules, parse_route_configs
from curaflow.sources.base import SourceConfig
from curaflow.sources.pixiv.config import PixivAccount, PixivSettings
from curaflow.sources.registry import import_source_modules, parse_source_config

if TYPE_CHECKING:
    from curaflow.temporal.profile import TemporalConnection

BUDGET_FLOOR_MS = 60_000
DEFAULT_QUEUED_MS = 1_800_000
DEFAULT_STALL_MS = 900_000
DEFAULT_HEARTBEAT_MS = 30_000
#: Shortest heartbeat timeout of a source step, ms: five of its heartbeats (at most 1 s
#: apart, ``activities.heartbeat.CANCEL_PROBE_S``) must be missed before it is timed out.
SOURCE_HEARTBEAT_FLOOR_MS = 5_000
DEFAULT_DEADLINE_MS = 1_800_000
ID_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TemporalSettings(_Section):
    """Where the Temporal service is. ``address`` None → the embedded dev server.

    The connection is the SDK's environment configuration (:mod:`curaflow.temporal.profile`):
    ``TEMPORAL_*`` variables over these keys over a ``temporal.toml`` profile. After loading,
    ``address`` and ``namespace`` hold the resolved values and :attr:`connection` the TLS,
    API key and gRPC metadata every client of the process uses.

    Attributes:
        profile: the ``temporal.toml`` profile to read when ``TEMPORAL_PROFILE`` is not set.
        config_file: the ``temporal.toml`` file when ``TEMPORAL_CONFIG_FILE`` is not set
            (else the SDK's default location, when it exists).
        graceful_shutdown_ms: on SIGTERM, how long a worker lets its running activities
            (a send in flight) finish before the SDK cancels them; the ledger pool closes
            only after they all ended. Keep it below the supervisor's stop timeout
            (compose: ``stop_grace_period`` 60 s).
        namespace: the Temporal namespace; workers (and ``curaflow temporal-setup``)
            register it when it does not exist and add curaflow's search attributes.
        namespace_retention_days: retention of closed executions in a namespace curaflow
            registers (an existing namespace keeps its own).
        setup_timeout_ms: how long a worker waits for Temporal to accept the namespace
            and search attributes before it exits with an error.
        sticky_schedule_to_start_ms: how long a workflow task waits on a worker's sticky
            queue before any worker may take it; after a worker dies, its jobs' workflows
            stall this long, so keep it short.
        max_cached_workflows: job executions a worker keeps in memory between their
            workflow tasks; the rest are replayed from history when they next wake. This
            bounds a worker's memory whatever the number of jobs in flight (docs/performance.md:
            about 0.25 MiB per cached job).
        nexus_endpoint: the Nexus endpoint of the jobs' service (callers in other
            namespaces reach ``start_job`` / ``cancel_job`` through it), created by
            ``curaflow temporal-setup`` and ``curaflow dev`` targeting this namespace and
            ``task_queue``; empty: none is created (docs/temporal.md "From another namespace").
        deployment_name / build_id: both set → Temporal Worker Versioning: the main and
            route task queues' workers poll as Worker Deployment Version
            ``<deployment_name>.<build_id>`` and every workflow they start is PINNED to it
            (finishes on the workers of the build that started it). The source-queue
            owner stays unversioned, so its activities serve every version. Neither set
            (default) → unversioned workers (``workflow.patched`` alone). One set without
            the other is refused. docs/operations.md "Upgrading".
    """

    address: str | None = None
    namespace: str = "default"
    namespace_retention_days: int = Field(default=7, ge=1, le=3650)
    setup_timeout_ms: int = Field(default=60_000, ge=1_000)
    task_queue: str = "curaflow"
    nexus_endpoint: str = Field(default="curaflow-jobs", pattern=r"^$|^[A-Za-z_][A-Za-z0-9_-]*$")
    sticky_schedule_to_start_ms: int = Field(default=5_000, ge=100)
    max_cached_workflows: int = Field(default=1000, ge=0)
    profile: str | None = None
    config_file: Path | None = None
    graceful_shutdown_ms: int = Field(default=30_000, ge=0)
    deployment_name: str | None = Field(default=None, min_length=1)
    build_id: str | None = Field(default=None, min_length=1)

    _connection: Any = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _versioning_complete(self) -> TemporalSettings:
        if (self.deployment_name is None) != (self.build_id is None):
            raise ValueError("temporal.deployment_name and temporal.build_id go together (Worker Versioning)")
        return self

    @model_validator(mode="after")
    def _resolve_connection(self) -> TemporalSettings:
        from curaflow.temporal.profile import resolve_connection

        connection = resolve_connection(
            self.address,
            self.namespace if "namespace" in self.model_fields_set else None,
            profile=self.profile,
            config_file=self.config_file,
        )
        self.address, self.namespace = connection.address, connection.namespace
        self._connection = connection
        return self

    @property
    def connection(self) -> TemporalConnection:
        """The resolved :class:`curaflow.temporal.profile.TemporalConnection`, at the
        current ``address`` (a copy of the settings may point at another server)."""
        from dataclasses import replace

        return replace(self._connection, address=self.address, namespace=self.namespace)


class DatabaseSettings(_Section):
    """The ledger's PostgreSQL. ``url`` None → embedded PostgreSQL (pgserver) in the state dir.

    Every wait on it is bounded (:class:`curaflow.ledger.db.LedgerPool`), so a PostgreSQL
    that stops answering fails calls instead of holding them:

    Attributes:
        connect_timeout_ms: one connection attempt.
        acquire_timeout_ms: waiting for a pooled connection (a connect included).
        statement_timeout_ms: one statement (client side, and the server's
            ``statement_timeout``). The API bounds its own waits tighter
            (``api.ledger_timeout_ms``).
    """

    url: str | None = None
    pool_min_size: int = 1
    pool_max_size: int = 10
    connect_timeout_ms: int = Field(default=5_000, ge=100)
    acquire_timeout_ms: int = Field(default=30_000, ge=100)
    statement_timeout_ms: int = Field(default=30_000, ge=100)

    def pool_bounds(self, cap_ms: int | None = None) -> PoolBounds:
        """The timeouts of :func:`curaflow.ledger.db.create_pool`, seconds, each at most ``cap_ms``."""

        def bound(ms: int) -> float:
            return min(ms, cap_ms) / 1000 if cap_ms is not None else ms / 1000

        return {
            "connect_timeout_s": bound(self.connect_timeout_ms),
            "acquire_timeout_s": bound(self.acquire_timeout_ms),
            "statement_timeout_s": bound(self.statement_timeout_ms),
        }


class PoolBounds(TypedDict):
    """The timeouts of :func:`curaflow.ledger.db.create_pool`, seconds."""

    connect_timeout_s: float
    acquire_timeout_s: float
    statement_timeout_s: float


class ApiSettings(_Section):
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
            the ``push_events`` activity's retries (doubling, capped).
        max_body_bytes: largest accepted request body (413 beyond).
        cancel_wait_ms: how long ``POST /jobs/{id}/cancel`` waits for in-flight work
            to stop before answering.
        start_concurrency: workflow starts in flight at once; an admission answers once
            the job is durable and its workflow is started in the background.
        body_timeout_ms: longest time to receive a request body once its headers
            arrived; a body shorter than its ``Content-Length`` is answered 408 and the
            connection closed instead of holding a coroutine for ever.
        ledger_timeout_ms: the API's bound on each wait on PostgreSQL (connect, pool
            acquire, statement; each ``database.*_timeout_ms`` capped at it). A ledger
            that does not answer within it is answered ``503`` ``ledger_unavailable``
            with ``Retry-After``.
    """

    host: str = "127.0.0.1"
    port: int = 8080
    token: SecretStr | None = None
    insecure: bool = False
    callback_allowed_hosts: list[str] = Field(default_factory=list)
    callback_secret: SecretStr | None = None
    callback_timeout_ms: int = Field(default=30_000, ge=100)
    callback_max_attempts: int = Field(default=8, ge=1, le=8)
    callback_retry_initial_interval_ms: int = Field(default=1_000, ge=10)
    callback_retry_max_interval_ms: int = Field(default=60_000, ge=10)
    max_body_bytes: int = 65_536
    cancel_wait_ms: int = Field(default=10_000, ge=0)
    start_concurrency: int = Field(default=8, ge=1)
    body_timeout_ms: int = Field(default=30_000, ge=100)
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
        except (ValueError, TypeError, RuntimeError):
            raise ValueError("callback secret must be 'whsec_' followed by base64") from None
        return value


def resolve_budget(value: Any, default: int, floor: int = BUDGET_FLOOR_MS) -> int:
    """Resolve a budget as the original's stall sweep does (reference §8).

    Args:
        value: configured value (anything).
        default: the default in ms.
        floor: the smallest accepted value in ms.

    Returns:
        ``int(value)`` when it is a finite number ≥ ``floor``; otherwise ``default``
        (not the floor).
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    if not math.isfinite(value) or value < floor:
        return default
    return int(value)


@dataclass(frozen=True)
class BudgetFallback:
    """A budget whose configured value is not used as given.

    Attributes:
        field: the setting's dotted name (``budgets.queued_timeout_ms``).
        value: the configured value, as configured.
        used_ms: the value in effect, ms.
        why: ``below_floor`` (the default is used), ``not_a_number`` (the default is
            used) or ``not_an_integer`` (truncated).
    """

    field: str
    value: Any
    used_ms: int
    why: str


def budget_fallback(field: str, value: Any, default: int, floor: int = BUDGET_FLOOR_MS) -> BudgetFallback | None:
    """How :func:`resolve_budget` treats ``value``, or None when it is used as given."""
    used = resolve_budget(value, default, floor)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return BudgetFallback(field, value, used, "not_a_number")
    if value < floor:
        return BudgetFallback(field, value, used, "below_floor")
    if value != used:
        return BudgetFallback(field, value, used, "not_an_integer")
    return None


class BudgetSettings(_Section):
    """Time budgets in ms (DESIGN.md decision 8). Raw values; use :meth:`resolved`.

    Attributes:
        test_only_floor_ms: TEST ONLY. Lowers the 60 s floor so tests can use budgets
            of seconds. Never set this in production; the worker and API log a warning
            when it is set.
    """

    queued_timeout_ms: Any = DEFAULT_QUEUED_MS
    stall_timeout_ms: Any = DEFAULT_STALL_MS
    heartbeat_interval_ms: int = Field(default=DEFAULT_HEARTBEAT_MS, ge=100)
    default_deadline_ms: int = Field(default=DEFAULT_DEADLINE_MS, ge=1000)
    test_only_floor_ms: int | None = None

    @property
    def floor_ms(self) -> int:
        """The effective floor (60 000 unless the test-only override is set)."""
        return self.test_only_floor_ms if self.test_only_floor_ms is not None else BUDGET_FLOOR_MS

    @property
    def queued_ms(self) -> int:
        """Resolved queued budget."""
        return resolve_budget(self.queued_timeout_ms, DEFAULT_QUEUED_MS, self.floor_ms)

    @property
    def stall_ms(self) -> int:
        """Resolved stall budget."""
        return resolve_budget(self.stall_timeout_ms, DEFAULT_STALL_MS, self.floor_ms)

    def fallbacks(self) -> list[BudgetFallback]:
        """The budgets whose configured value is not used as given (see :func:`budget_fallback`)."""
        found = [
            budget_fallback("budgets.queued_timeout_ms", self.queued_timeout_ms, DEFAULT_QUEUED_MS, self.floor_ms),
            budget_fallback("budgets.stall_timeout_ms", self.stall_timeout_ms, DEFAULT_STALL_MS, self.floor_ms),
        ]
        return [f for f in found if f is not None]


class DeliverySettings(_Section):
    """Retry budget of a delivery and of source calls (Temporal retry policies), and what
    a route's refusals cost (:mod:`curaflow.ledger.route_gates`).

    Attributes:
        max_connections: connection pool size of each route's HTTP client (and of the
            callback pushes'); every route has its own pool, apart from the source's.
        refusal_streak: different works a route may refuse in a row with the same
            answer before curaflow pauses it as broken (and lifts those refusals).
        route_pause_ms: how long such a pause lasts (``curaflow routes resume`` lifts it
            sooner).
        route_hold_ms: how long a work is held back from a route after the route
            refused the request (twice as long for each hold in a row, at most 24 h);
            0: never held.
    """

    max_attempts: int = Field(default=12, ge=1)
    retry_initial_interval_ms: int = Field(default=2_000, ge=10)
    retry_max_interval_ms: int = Field(default=300_000, ge=10)
    source_max_attempts: int = Field(default=10, ge=1)
    max_connections: int = Field(default=100, ge=1)
    refusal_streak: int = Field(default=3, ge=2)
    route_pause_ms: int = Field(default=3_600_000, ge=1_000)
    route_hold_ms: int = Field(default=3_600_000, ge=0)


class TargetConfig(_Section):
    """A configured target: what to find and where to send it.

    Attributes:
        id: ``[A-Za-z0-9_-]{1,64}``.
        routes: names of entries of ``[routes]``.
        accept_jobs: may serve protocol ``candidate_search`` jobs (an eligible target).
    """

    id: str
    account: str = "default"
    work_type: Literal["illustration"] = "illustration"
    query: TargetQuery = Field(default_factory=TargetQuery)
    filters: TargetFilters = Field(default_factory=TargetFilters)
    limit: int = Field(default=1, ge=1, le=100)
    scan_limit: int = Field(default=30, ge=1, le=100)
    storage_mode: Literal["persistent", "cache"] = "persistent"
    routes: list[str] = Field(default_factory=list)
    accept_jobs: bool = True

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not ID_PATTERN.match(value):
            raise ValueError("target id must match [A-Za-z0-9_-]{1,64}")
        return value


CRON_DESCRIPTORS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly", "@every")
CRON_FIELD = re.compile(r"^[0-9A-Za-z*?/,#-]+$")


class ScheduleConfig(_Section):
    """A recurring plan (Temporal Schedule): one job per occurrence."""

    id: str
    cron: list[str]
    timezone: str = "UTC"
    target_ids: list[str] = Field(default_factory=list)
    jitter_ms: int = Field(default=0, ge=0)
    paused: bool = False

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not ID_PATTERN.match(value):
            raise ValueError("schedule id must match [A-Za-z0-9_-]{1,64}")
        return value

    @field_validator("cron", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("cron")
    @classmethod
    def _cron_shape(cls, value: list[str]) -> list[str]:
        # The shapes Temporal's ScheduleSpec.cron_expressions accepts: 5 fields, or 6-7
        # with seconds first / year last, or a descriptor (@daily, @every 1h). The server
        # checks the field values when the schedule is created; this catches the typos
        # (a missing field, a stray word) when the configuration is loaded.
        if not value:
            raise ValueError("cron needs at least one expression")
        for expression in value:
            text = expression.strip()
            fields = text.split()
            if text.startswith("@"):
                if (
                    fields[0] not in CRON_DESCRIPTORS
                    or (fields[0] == "@every") != (len(fields) == 2)
                    or len(fields) > 2
                ):
                    raise ValueError(
                        f"cron {expression!r}: unknown descriptor (use one of {', '.join(CRON_DESCRIPTORS)})"
                    )
            elif not 5 <= len(fields) <= 7 or not all(CRON_FIELD.match(f) for f in fields):
                raise ValueError(f"cron {expression!r}: expected 5 fields (minute hour day month weekday)")
        return value

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown timezone {value!r} (an IANA name such as 'Asia/Tokyo' or 'UTC')") from None
        return value


class ObservabilitySettings(_Section):
    """Logs, metrics and tracing.

    Attributes:
        metrics_port: a worker serves curaflow's Prometheus metrics on this port
            (``/metrics``); None → not served. The API serves them on its own port.
        temporal_metrics_port: a worker's Temporal SDK runtime serves its own Prometheus
            metrics (``temporal_*``) on this port; None → not exported.
        metrics_host: bind address of both metrics endpoints.
        otlp_endpoint: OTLP/HTTP base URL of the trace collector (``http://otel:4318``);
            None → ``OTEL_EXPORTER_OTLP_ENDPOINT`` or the exporter's default.
        tracing: enable OpenTelemetry tracing (FastAPI + Temporal interceptor).
        ledger_gauges_interval_ms: how often each process re-reads the ledger gauges
            (:mod:`curaflow.ledger.gauges`).
        ledger_gauges_window_ms: the window of ``curaflow_deliveries`` (24 h).
        ledger_statement_metrics: a worker counts every ledger statement and transaction
            by the step that sent it (``curaflow_ledger_statements_total`` /
            ``curaflow_ledger_transactions_total``, :mod:`curaflow.ledger.statements`);
            a few microseconds per statement, so off by default (``curaflow bench`` turns
            it on).
    """

    log_level: str = "INFO"
    log_json: bool = True
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    temporal_metrics_port: int | None = Field(default=None, ge=1, le=65535)
    metrics_host: str = "0.0.0.0"
    otlp_endpoint: str | None = None
    tracing: bool = False
    ledger_gauges_interval_ms: int = Field(default=15_000, ge=100)
    ledger_gauges_window_ms: int = Field(default=86_400_000, ge=60_000)
    ledger_statement_metrics: bool = False


class SupervisionSettings(_Section):
    """Supervision of every background loop of a process (:mod:`curaflow.observability.supervision`).

    Attributes:
        initial_backoff_ms / max_backoff_ms: a failed loop restarts after a backoff that
            doubles from the first to the second.
        fatal_after_ms: a loop that has not recovered for this long fails the process,
            which exits with status 3 so its supervisor restarts it.
    """

    initial_backoff_ms: int = Field(default=500, ge=10)
    max_backoff_ms: int = Field(default=30_000, ge=10)
    fatal_after_ms: int = Field(default=300_000, ge=100)


class RetentionSettings(_Section):
    """How long a finished job's bulky records are kept (:mod:`curaflow.ledger.retention`).

    Attributes:
        days: prune what finished more than this many days ago — every worker does it
            every ``interval_ms``, and it is ``curaflow prune``'s default age; None (the
            default, as in the reference) keeps everything.
        interval_ms: how often a worker prunes when ``days`` is set.
    """

    days: int | None = Field(default=None, ge=1)
    interval_ms: int = Field(default=3_600_000, ge=1000)


def _default_routes() -> dict[str, Any]:
    return {"out": DirectoryRouteConfig(path=Path("curaflow-out"))}


def _default_targets() -> list[TargetConfig]:
    return [TargetConfig(id="demo", query=TargetQuery(tags=["オリジナル"]), routes=["out"])]


class _ConventionalEnv(PydanticBaseSettingsSource):
    """Map the conventional, un-prefixed environment variables onto settings fields."""

    MAP: ClassVar[dict[str, tuple[str, str]]] = {
        "TEMPORAL_ADDRESS": ("temporal", "address"),
        "TEMPORAL_NAMESPACE": ("temporal", "namespace"),
        "DATABASE_URL": ("database", "url"),
        "CURAFLOW_API_TOKEN": ("api", "token"),
        "PIXIV_REFRESH_TOKEN": ("pixiv", "refresh_token"),
    }

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:  # pragma: no cover
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for env, (section, key) in self.MAP.items():
            value = os.environ.get(env)
            if value is not None and value.strip():
                data.setdefault(section, {})[key] = value.strip()
        return data


def _numbers_where_any(model: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with the numbers the environment carries as text made numbers, for the
    fields typed ``Any`` (the budgets: resolved, not validated, reference §8).

    A typed field is converted by pydantic whatever the source; an ``Any`` field keeps
    what it is given, so ``"20000"`` from the environment would be "not a number" where
    ``20000`` in the TOML file is a budget. Text that is not a JSON number stays text.
    """
    out = dict(data)
    for key, value in data.items():
        info = model.model_fields.get(key)
        if info is None:
            continue
        annotation = info.annotation
        if isinstance(value, dict) and isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out[key] = _numbers_where_any(annotation, value)
        elif annotation is Any and isinstance(value, str):
            try:
                number = json.loads(value)
            except ValueError:
                continue
            if isinstance(number, int | float) and not isinstance(number, bool):
                out[key] = number
    return out


class _CuraflowEnv(EnvSettingsSource):
    """``CURAFLOW_<SECTION>__<FIELD>`` variables, with the same result as the TOML file's
    values (:func:`_numbers_where_any`)."""

    def __call__(self) -> dict[str, Any]:
        return _numbers_where_any(self.settings_cls, super().__call__())


#: How every secret of the env example begins (``deploy/curaflow.env.example``): a process
#: refuses to start with one, so a copied example never runs as a production secret.
EXAMPLE_SECRET_PREFIX = "change-me"

#: The directory of secret files (``/run/secrets`` of Docker/Compose secrets, a mounted
#: Kubernetes Secret): one file per setting, named as its ``CURAFLOW_*`` variable.
SECRETS_DIR_ENV = "CURAFLOW_SECRETS_DIR"


def _secret_files(file_secret_settings: PydanticBaseSettingsSource) -> tuple[PydanticBaseSettingsSource, ...]:
    """The secret-files source when ``CURAFLOW_SECRETS_DIR`` names a directory.

    A file ``CURAFLOW_ROUTES__TG__BOT_TOKEN`` holding the token sets ``routes.tg.bot_token``,
    exactly as the environment variable of that name would (trailing newline stripped);
    the environment wins over a file, a file over the TOML. A directory that does not
    exist is a configuration error.
    """
    directory = os.environ.get(SECRETS_DIR_ENV, "").strip()
    if not directory:
        return ()
    if not Path(directory).is_dir():
        raise ValueError(f"{SECRETS_DIR_ENV}={directory}: not a directory")

    class _Files(NestedSecretsSettingsSource):
        def __call__(self) -> dict[str, Any]:
            return _numbers_where_any(self.settings_cls, _stripped(super().__call__()))

    return (_Files(file_secret_settings, secrets_dir=directory, secrets_dir_missing="error"),)


def _stripped(data: dict[str, Any]) -> dict[str, Any]:
    """Text values without the trailing newline an editor or ``echo`` leaves in a file."""
    return {
        k: _stripped(v) if isinstance(v, dict) else v.rstrip("\r\n") if isinstance(v, str) else v
        for k, v in data.items()
    }


class Settings(BaseSettings):
    """All of curaflow's configuration (see the module doc for sources and precedence).

    ``max_fallback_passes``: search passes per cell of a scheduled job (reference §5.5's
    "fallback stages"; the former key ``max_fallback_stages`` is still read).
    """

    model_config = SettingsConfigDict(
        env_prefix="CURAFLOW_",
        env_nested_delimiter="__",
        extra="forbid",
        toml_file=None,
    )

    state_dir: Path = Path(".curaflow")
    artifacts_dir: Path | None = None
    temporal: TemporalSettings = Field(default_factory=TemporalSettings)
    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    budgets: BudgetSettings = Field(default_factory=BudgetSettings)
    delivery: DeliverySettings = Field(default_factory=DeliverySettings)
    pixiv: PixivSettings = Field(default_factory=PixivSettings)
    observability: ObservabilitySettings = Field(default_factory=ObservabilitySettings)
    supervision: SupervisionSettings = Field(default_factory=SupervisionSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    outbound: OutboundSettings = Field(default_factory=OutboundSettings)
    max_fallback_passes: int = Field(default=3, ge=0, le=10)
    reconcile_interval_ms: int = Field(default=30_000, ge=100)
    route_modules: list[str] = Field(default_factory=list)
    routes: dict[str, SerializeAsAny[RouteSettings]] = Field(default_factory=_default_routes)
    source_modules: list[str] = Field(default_factory=list)
    sources: dict[str, SerializeAsAny[SourceConfig]] = Field(default_factory=dict)
    targets: list[TargetConfig] = Field(default_factory=_default_targets)
    schedules: list[ScheduleConfig] = Field(default_factory=list)

    _toml_path: Path | None = None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Order: init kwargs, conventional env, ``CURAFLOW_*`` env, secret files, the TOML file."""
        return (
            init_settings,
            _ConventionalEnv(settings_cls),
            _CuraflowEnv(settings_cls),
            *_secret_files(file_secret_settings),
            TomlConfigSettingsSource(settings_cls),  # the file of load_settings' subclass
        )

    @model_validator(mode="before")
    @classmethod
    def _former_keys(cls, data: Any) -> Any:
        if isinstance(data, dict) and "max_fallback_stages" in data:
            data = dict(data)
            value = data.pop("max_fallback_stages")
            data.setdefault("max_fallback_passes", value)
        return data

    @model_validator(mode="before")
    @classmethod
    def _register_kind_modules(cls, data: Any) -> Any:
        """Import the ``route_modules`` and ``source_modules`` (each registers its kinds)
        before ``[routes]`` and ``[sources]`` are validated with the registered models."""
        if not isinstance(data, dict):
            return data
        for setting, register in (("route_modules", import_route_modules), ("source_modules", import_source_modules)):
            modules = data.get(setting)
            if not (isinstance(modules, list) and all(isinstance(m, str) for m in modules)):
                continue  # the field's own validation says what is wrong
            for module in modules:
                # Whatever the module raises while it is imported (a missing dependency, a
                # syntax error, a kind its registry refuses, its own failure) is a
                # configuration error naming it.
                try:
                    register([module])
                except Exception as err:  # noqa: BLE001 - any failure of the module is reported, named
                    raise ValueError(f"{setting}: cannot import {module!r} ({type(err).__name__}: {err})") from None
        return data

    @field_validator("routes", mode="before")
    @classmethod
    def _route_kinds(cls, value: Any) -> Any:
        """Each ``[routes.<name>]`` table validated by the model registered for its ``kind``
        (:func:`curaflow.routes.registry.parse_route_configs`; an unknown kind lists the
        known ones)."""
        if not isinstance(value, dict) or all(isinstance(v, RouteSettings) for v in value.values()):
            return value
        return parse_route_configs(value)

    @field_validator("sources", mode="before")
    @classmethod
    def _source_kinds(cls, value: Any) -> Any:
        """Each ``[sources.<name>]`` table validated by the model registered for its ``kind``
        (:func:`curaflow.sources.registry.parse_source_config`)."""
        from pydantic import ValidationError

        if not isinstance(value, dict):
            return value
        parsed: dict[str, Any] = {}
        for name, entry in value.items():
            try:
                parsed[name] = parse_source_config(entry)
            except ValidationError as err:
                problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors())
                raise ValueError(f"sources.{name}: {problems}") from None
            except ValueError as err:
                raise ValueError(f"sources.{name}: {err}") from None
        return parsed

    @model_validator(mode="after")
    def _no_example_secrets(self) -> Settings:
        found = [name for name, value in self.secrets() if value.strip().lower().startswith(EXAMPLE_SECRET_PREFIX)]
        if found:
            raise ValueError(
                f"{', '.join(found)} still hold the example value '{EXAMPLE_SECRET_PREFIX}…' of the env example: "
                "set real secrets (in the env file, the environment or CURAFLOW_SECRETS_DIR)"
            )
        return self

    def secrets(self) -> list[tuple[str, str]]:
        """Every secret setting that is set, as ``(dotted name, value)``: the API token, the
        Pixiv refresh tokens, the database URL's password and each route's secrets."""
        from urllib.parse import urlsplit

        found: list[tuple[str, SecretStr | str | None]] = [
            ("api.token", self.api.token),
            ("pixiv.refresh_token", self.pixiv.refresh_token),
        ]
        found += [(f"pixiv.accounts.{a}.refresh_token", acc.refresh_token) for a, acc in self.pixiv.accounts.items()]
        if self.database.url:
            with contextlib.suppress(ValueError):
                found.append(("database.url (password)", urlsplit(self.database.url).password))
        for section, entries in (("routes", self.routes), ("sources", self.sources)):
            for name, entry in entries.items():
                for key in type(entry).model_fields:
                    value = getattr(entry, key)
                    if isinstance(value, SecretStr):
                        found.append((f"{section}.{name}.{key}", value))
        return [
            (name, value.get_secret_value() if isinstance(value, SecretStr) else value)
            for name, value in found
            if value is not None
        ]

    @model_validator(mode="after")
    def _check_references(self) -> Settings:
        ids = [t.id for t in self.targets]
        dupes = {i for i in ids if ids.count(i) > 1}
        if dupes:
            raise ValueError(f"duplicate target ids: {sorted(dupes)}")
        pixiv_accounts = self.accounts()
        for name in self.sources:
            if not ID_PATTERN.match(name):
                raise ValueError(f"source name {name!r} must match [A-Za-z0-9_-]{{1,64}}")
            if name in pixiv_accounts:
                raise ValueError(f"source {name!r} has the name of a pixiv account: a target could not tell them apart")
        accounts = self.source_configs()
        for target in self.targets:
            if target.account not in accounts:
                raise ValueError(
                    f"target {target.id!r} uses pixiv account {target.account!r}, which is not configured "
                    f"(accounts: {sorted(pixiv_accounts)}"
                    + (f"; sources: {sorted(self.sources)})" if self.sources else ")")
                )
            if not target.routes:
                raise ValueError(f"target {target.id!r} has no routes")
            twice = sorted({r for r in target.routes if target.routes.count(r) > 1})
            if twice:
                raise ValueError(f"target {target.id!r} names route(s) {twice} more than once")
            for route in target.routes:
                if route not in self.routes:
                    raise ValueError(
                        f"target {target.id!r} names unknown route {route!r} (configured routes: {sorted(self.routes)})"
                    )
        for schedule in self.schedules:
            for tid in schedule.target_ids:
                if tid not in ids:
                    raise ValueError(f"schedule {schedule.id!r} names unknown target {tid!r}")
        for name in self.routes:
            if not ID_PATTERN.match(name):
                raise ValueError(f"route name {name!r} must match [A-Za-z0-9_-]{{1,64}}")
        self.state_dir = self.state_dir.expanduser().resolve()
        if self.artifacts_dir is None:
            self.artifacts_dir = self.state_dir / "artifacts"
        self.artifacts_dir = self.artifacts_dir.expanduser().resolve()
        self._read_stored_tokens()
        return self

    def _read_stored_tokens(self) -> None:
        """Give each Pixiv account its refresh token as it will be sent: one set explicitly
        (the file, the environment) always wins; else the one ``curaflow pixiv login``
        stored (``<state_dir>/pixiv/<account>.refresh-token``,
        :mod:`curaflow.sources.pixiv.login`).

        Every token is used without the whitespace (and byte-order mark) around it: a
        token pasted with a newline is curaflow's formatting, never sent to Pixiv to be
        refused as the account's ``invalid_grant``. A token with whitespace or a control
        character *inside* it is refused here, naming its setting.

        Raises:
            ValueError: a token holds whitespace or an unprintable character inside.
        """
        from curaflow.sources.pixiv.login import stored_token

        def cleaned(token: SecretStr | None, field: str) -> SecretStr | None:
            if token is None:
                return None
            value = token.get_secret_value().strip().lstrip("\ufeff").strip()
            if not value:
                return None
            if not value.isprintable() or any(c.isspace() for c in value):
                raise ValueError(f"{field} holds whitespace or an unprintable character inside the token")
            return SecretStr(value)

        self.pixiv.refresh_token = cleaned(self.pixiv.refresh_token, "pixiv.refresh_token")
        if self.pixiv.refresh_token is None and (found := stored_token(self.state_dir, "default")):
            self.pixiv.refresh_token = cleaned(SecretStr(found), "the stored token of account 'default'")
        for name, account in self.pixiv.accounts.items():
            account.refresh_token = cleaned(account.refresh_token, f"pixiv.accounts.{name}.refresh_token")
            if account.refresh_token is None and (found := stored_token(self.state_dir, name)):
                account.refresh_token = cleaned(SecretStr(found), f"the stored token of account {name!r}")

    # ---- derived views -------------------------------------------------------

    def target(self, target_id: str) -> TargetConfig | None:
        """The configured target with ``target_id``, or None."""
        return next((t for t in self.targets if t.id == target_id), None)

    def route_refs(self, target: TargetConfig) -> list[RouteRef]:
        """The target's routes as workflow-safe references (no secrets)."""
        return [RouteRef(name=r, kind=self.routes[r].kind, task_queue=self.routes[r].task_queue) for r in target.routes]

    def budgets_model(self) -> Budgets:
        """The resolved :class:`~curaflow.domain.messages.Budgets` passed to workflows."""
        return Budgets(
            queued_timeout_ms=self.budgets.queued_ms,
            stall_timeout_ms=self.budgets.stall_ms,
            heartbeat_interval_ms=self.budgets.heartbeat_interval_ms,
            delivery_max_attempts=self.delivery.max_attempts,
            retry_initial_interval_ms=self.delivery.retry_initial_interval_ms,
            retry_max_interval_ms=self.delivery.retry_max_interval_ms,
            source_max_attempts=self.delivery.source_max_attempts,
            source_heartbeat_timeout_ms=max(self.pixiv.source_lease_ms, SOURCE_HEARTBEAT_FLOOR_MS),
        )

    def push_policy(self) -> CallbackPolicy:
        """The policy of pushes to ``callback_url`` (``api.callback_*``), frozen into each
        job's workflow input."""
        return CallbackPolicy(
            max_attempts=self.api.callback_max_attempts,
            timeout_ms=self.api.callback_timeout_ms,
            initial_interval_ms=self.api.callback_retry_initial_interval_ms,
            max_interval_ms=self.api.callback_retry_max_interval_ms,
        )

    def accounts(self) -> dict[str, PixivAccount]:
        """Every Pixiv account by id; ``default`` comes from the top-level settings."""
        return self.pixiv.all_accounts()

    def source_configs(self) -> dict[str, SourceConfig]:
        """Every source instance by name: each Pixiv account (kind ``pixiv``) and each
        entry of ``[sources]``. A target's ``account`` names one of them."""
        found: dict[str, SourceConfig] = dict(self.pixiv.sources())
        found.update(self.sources)
        return found

    def source_task_queue(self, account: str) -> str:
        """Task queue of an account's rate gate: ``<task_queue>-source-<account>``."""
        return f"{self.temporal.task_queue}-source-{account}"

    def source_task_queues(self) -> dict[str, str]:
        """source instance (Pixiv account or ``[sources]`` entry) → its task queue."""
        return {a: self.source_task_queue(a) for a in self.source_configs()}

    @property
    def embedded(self) -> bool:
        """True when neither Temporal nor the database is configured: run the embedded stack."""
        return self.temporal.address is None and self.database.url is None


_WHY = {
    "below_floor": "is below the {floor} ms floor: the default {used} ms is used",
    "not_a_number": "is not a number: the default {used} ms is used",
    "not_an_integer": "is not an integer: {used} ms is used",
}


def warn_budget_fallbacks(settings: Settings, log: Any) -> list[BudgetFallback]:
    """Log one ``config.budget_fallback`` warning per budget not used as configured.

    Called where a process starts using the budgets (worker, API, ``curaflow run``).
    Startup never fails on a budget (reference §8: the original only warns).

    Args:
        settings: the loaded settings.
        log: a structlog logger.

    Returns:
        The fallbacks that were logged.
    """
    found = settings.budgets.fallbacks()
    for fb in found:
        message = _WHY[fb.why].format(floor=settings.budgets.floor_ms, used=fb.used_ms)
        log.warning(
            "config.budget_fallback",
            field=fb.field,
            value=repr(fb.value),
            used_ms=fb.used_ms,
            why=fb.why,
            message=f"{fb.field} = {fb.value!r} {message}",
        )
    return found


@functools.lru_cache(maxsize=16)
def settings_class(toml_path: Path | None) -> type[Settings]:
    """:class:`Settings` reading ``toml_path`` as its lowest source (itself for None).

    The file is part of the class's ``model_config`` (what pydantic-settings' TOML source
    reads), so two loads of different files never share state.
    """
    if toml_path is None:
        return Settings
    return type(
        "Settings", (Settings,), {"model_config": SettingsConfigDict(toml_file=toml_path), "__module__": __name__}
    )


def _holds(data: Any, loc: tuple[Any, ...]) -> bool:
    """Whether nested ``data`` has a value at ``loc`` (pydantic's error location; a key of
    it that the data lacks — a union's tag — is skipped)."""
    for key in loc:
        if isinstance(data, dict) and str(key) in data:
            data = data[str(key)]
        elif isinstance(data, list) and isinstance(key, int) and key < len(data):
            data = data[key]
        elif not isinstance(data, dict | list):
            return False
    return True


def _variable(prefix: str, loc: tuple[Any, ...], names: Iterable[str]) -> str:
    """The name, as set, of the ``CURAFLOW_*`` variable (or secret file) of ``loc``."""
    fields = [str(k) for k in loc if not isinstance(k, int)]
    names = list(names)
    full = (prefix + "__".join(fields)).lower()
    below = sorted(name for name in names if name.lower().startswith(full + "__"))
    if below:  # the value at loc is a table the variables below it set (a route's kind …)
        return ", ".join(below)
    for depth in range(len(fields), 0, -1):
        wanted = (prefix + "__".join(fields[:depth])).lower()
        for name in names:
            if name.lower() == wanted:
                return name
    return full.upper()


def origin_of(loc: tuple[Any, ...], toml_path: Path | None, overrides: dict[str, Any] | None = None) -> str:
    """Where the value at ``loc`` came from, in the precedence order of the sources
    (:meth:`Settings.settings_customise_sources`): ``environment variable
    CURAFLOW_RETENTION__DAYS``, ``environment variable DATABASE_URL``, ``secret file …``,
    ``in <file>``, or ``default`` — so an error names what the operator must change."""
    if overrides and _holds(overrides, loc):
        return "given by the command"
    for name, (section, key) in _ConventionalEnv.MAP.items():
        if loc[:2] == (section, key) and (os.environ.get(name) or "").strip():
            return f"environment variable {name}"
    prefixed = {k: v for k, v in os.environ.items() if k.upper().startswith("CURAFLOW_")}
    if prefixed and _holds(_CuraflowEnv(Settings)(), loc):
        return f"environment variable {_variable('CURAFLOW_', loc, prefixed)}"
    directory = os.environ.get(SECRETS_DIR_ENV, "").strip()
    if directory and Path(directory).is_dir():
        files = [f.name for f in Path(directory).iterdir()]
        name = _variable("CURAFLOW_", loc, files)
        if name in files:
            return f"secret file {Path(directory) / name}"
    if toml_path is not None:
        return f"in {toml_path}"
    return "default"


class ConfigError(Exception):
    """The configuration file or environment is invalid; ``str()`` is a readable report."""


def load_settings(config: str | Path | None = None, **overrides: Any) -> Settings:
    """Load and validate settings.

    Args:
        config: TOML file path; defaults to ``$CURAFLOW_CONFIG``; None → defaults only.
        overrides: top-level fields taking precedence over every source.

    Returns:
        The validated :class:`Settings`.

    Raises:
        ConfigError: the file is missing or unreadable, or a value is invalid; the
            message names each offending field.
    """
    from pydantic import ValidationError

    path = config or os.environ.get("CURAFLOW_CONFIG") or None
    toml_path: Path | None = None
    if path:
        toml_path = Path(path).expanduser()
        if not toml_path.is_file():
            raise ConfigError(f"config file not found: {toml_path}")
    try:
        settings = settings_class(toml_path)(**overrides)
    except ValidationError as err:
        lines = ["invalid configuration:"]
        for e in err.errors():
            loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
            origin = f" ({origin_of(tuple(e['loc']), toml_path, overrides)})" if e["loc"] else ""
            lines.append(f"  - {loc}: {e['msg']}{origin}")
        raise ConfigError("\n".join(lines)) from None
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot read config {toml_path}: {err}") from None
    settings._toml_path = toml_path
    return settings

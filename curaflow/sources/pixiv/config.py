"""Pixiv's settings: the ``[pixiv]`` section (shared by every account) and its accounts.

The TOML users write is unchanged: ``[pixiv]`` with ``[pixiv.accounts.<name>]``; each
account is one instance of the ``pixiv`` source kind (:class:`PixivSourceConfig`,
:meth:`PixivSettings.sources`), whose task queue, gate and lease are its own.
:class:`curaflow.config.Settings` holds the section as ``settings.pixiv``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, SecretStr

from curaflow.domain.config_numbers import BooleansAreNoNumbers
from curaflow.domain.messages import TargetQuery
from curaflow.domain.ratelimit import LADDER_BASE_MS, LADDER_CAP_MS
from curaflow.sources.base import GateConcurrency, GateIntervalMs, QueryWordProblem, SourceConfig, SourcePolicy
from curaflow.sources.pixiv.query_words import query_problems


class _Section(BooleansAreNoNumbers):
    model_config = ConfigDict(extra="forbid")


class PixivAccount(_Section):
    """One Pixiv account: its credentials and its rate gate."""

    refresh_token: SecretStr | None = None
    min_interval_ms: GateIntervalMs = 1000
    max_concurrency: GateConcurrency = 1


class PixivSettings(_Section):
    """The Pixiv app-api source.

    With no refresh token the stack serves the replay of the recorded responses
    (``api_url``/``auth_url`` pointing at the replay server); the client code is the same.

    Attributes:
        refresh_token: refresh token of the ``default`` account (``PIXIV_REFRESH_TOKEN``).
        api_url / auth_url: base URLs; None → Pixiv's own when a token is set, else the
            embedded replay server.
        image_url: where Pixiv's image host ``https://i.pximg.net`` is reached; None →
            itself when a token is set, ``<replay server>/i`` in replay mode. Works keep
            the canonical image URLs; only the request goes there, so a fetch resumes on
            any worker.
        accounts: further accounts by id; ``default`` is always present.
        min_interval_ms: spacing of the ``default`` account's requests (every account's
            gate: at least this long between two requests, across all worker processes);
            at most a minute (:data:`~curaflow.sources.base.MIN_INTERVAL_CEILING_MS`), as
            an account's ``min_interval_ms``; an account's ``max_concurrency`` and
            ``replay_max_concurrency`` 1 … 64 (:data:`~curaflow.sources.base.CONCURRENCY_CEILING`).
        rate_limit_base_ms / rate_limit_cap_ms: first step and cap of the rate-limit
            cooldown ladder (60 s doubling per consecutive rate limit up to 15 min;
            ``Retry-After`` is the floor up to the cap). Shared by every job of the
            account. A cooldown in the ledger further ahead than the cap (written before
            it, or under a larger one) holds at most the cap from the next request's slot
            (:func:`curaflow.ledger.gates.reserve`).
        rate_limit_decay_after: consecutive successful requests after which the ladder
            starts again at its first step.
        max_examined: most works one scan looks at (deep scans page past the 5000
            offset by moving the date window).
        request_timeout_ms: total time of one API or auth request (connect, send, the
            whole answer).
        replay_min_interval_ms / replay_max_concurrency: the gate used in replay mode.
        source_standby_poll_ms: how often a standby worker process tries to take over an
            account's source task queue (one process serves it at a time).
        source_lease_ms: how long the owner's lease on an account's source task queue
            lasts without a renewal (renewed every ``min(source_standby_poll_ms,
            source_lease_ms / 4)``): a hung or dead owner is replaced within this plus
            one standby poll (:mod:`curaflow.process.source_queues`).
        restriction_pause_ms: how long an account is paused after Pixiv answered "Your
            access is currently restricted." to one of its searches (default 1 h): its
            jobs end ``account_restricted`` at once instead of asking again. Lift it
            earlier with ``curaflow accounts resume ACCOUNT``.
        unavailable_ttl_ms: how long a work found unavailable when fetched (a detail
            answering the app-api's own 404 — also asked, and then only, when an image
            answers 404/410 —, a page over the decode budget …) is skipped by later jobs
            of the account without being requested (default 7 days; 0 forgets at once,
            with ``unrecognised_hold_ms`` 0).
        unrecognised_hold_ms: how long a work is held back instead when the answer says
            nothing positive about it — the image host answering 403 (what it answers a
            request it refuses), or 404/410 for a work its detail does not say is gone
            (a misconfigured ``image_url`` mirror, a CDN in a deploy), a page that is
            no image (an HTML or JSON answer): the same answer would come for every work
            while it lasts (default 1 h; above ``unavailable_ttl_ms`` refused at load:
            :data:`curaflow.config.checks.ORDERED_SETTINGS`).
    """

    refresh_token: SecretStr | None = None
    api_url: str | None = None
    auth_url: str | None = None
    image_url: str | None = None
    image_referer: str = "https://app-api.pixiv.net/"
    min_interval_ms: GateIntervalMs = 1000
    request_timeout_ms: int = Field(default=30_000, ge=100)
    rate_limit_base_ms: int = Field(default=LADDER_BASE_MS, ge=1)
    rate_limit_cap_ms: int = Field(default=LADDER_CAP_MS, ge=1)
    rate_limit_decay_after: int = Field(default=20, ge=1)
    max_examined: int = Field(default=1000, ge=1)
    accounts: dict[str, PixivAccount] = Field(default_factory=dict)
    replay_min_interval_ms: GateIntervalMs = 0
    replay_max_concurrency: GateConcurrency = 4
    source_standby_poll_ms: int = Field(default=2_000, ge=50)
    source_lease_ms: int = Field(default=10_000, ge=400)
    restriction_pause_ms: int = Field(default=3_600_000, ge=0)
    unavailable_ttl_ms: int = Field(default=7 * 86_400_000, ge=0)
    unrecognised_hold_ms: int = Field(default=3_600_000, ge=0)

    @property
    def replay(self) -> bool:
        """True when no refresh token is configured: the replay source serves searches."""
        return self.refresh_token is None or not self.refresh_token.get_secret_value().strip()

    def all_accounts(self) -> dict[str, PixivAccount]:
        """Every account by id; ``default`` comes from the top-level fields unless listed."""
        accounts = dict(self.accounts)
        if "default" not in accounts:
            accounts["default"] = PixivAccount(refresh_token=self.refresh_token, min_interval_ms=self.min_interval_ms)
        return accounts

    def sources(self) -> dict[str, PixivSourceConfig]:
        """Every account as a source instance of kind ``pixiv``: the section's shared fields
        (endpoints, limits, the ladder, ``unavailable_ttl_ms``) travel on each, so the
        source's factory needs nothing of the settings but its instance."""
        replay = self.replay
        return {
            name: PixivSourceConfig(
                refresh_token=acct.refresh_token,
                min_interval_ms=self.replay_min_interval_ms if replay else acct.min_interval_ms,
                max_concurrency=acct.max_concurrency,
                max_examined=self.max_examined,
                unavailable_ttl_ms=self.unavailable_ttl_ms,
                unrecognised_hold_ms=self.unrecognised_hold_ms,
                rate_limit_base_ms=self.rate_limit_base_ms,
                rate_limit_cap_ms=self.rate_limit_cap_ms,
                replay=replay,
                replay_max_concurrency=self.replay_max_concurrency,
                api_url=self.api_url,
                auth_url=self.auth_url,
                image_url=self.image_url,
                image_referer=self.image_referer,
                request_timeout_ms=self.request_timeout_ms,
                rate_limit_decay_after=self.rate_limit_decay_after,
                restriction_pause_ms=self.restriction_pause_ms,
            )
            for name, acct in self.all_accounts().items()
        }


class PixivSourceConfig(SourceConfig):
    """One Pixiv account as a source instance (built from ``[pixiv]``, never written as
    ``[sources.<name>]``).

    Attributes:
        refresh_token: the account's refresh token (None or blank: replay mode).
        replay: the stack serves the replay of the recorded responses.
        replay_max_concurrency: the concurrency used in replay mode.
        api_url / auth_url / image_url / image_referer / request_timeout_ms /
            rate_limit_decay_after / restriction_pause_ms: the ``[pixiv]`` fields of the
            same names (:class:`PixivSettings`).
    """

    kind: Literal["pixiv"] = "pixiv"
    refresh_token: SecretStr | None = None
    replay: bool = False
    replay_max_concurrency: GateConcurrency = 4
    api_url: str | None = None
    auth_url: str | None = None
    image_url: str | None = None
    image_referer: str = "https://app-api.pixiv.net/"
    request_timeout_ms: int = Field(default=30_000, ge=100)
    rate_limit_decay_after: int = Field(default=20, ge=1)
    restriction_pause_ms: int = Field(default=3_600_000, ge=0)

    def query_problems(self, query: TargetQuery) -> list[QueryWordProblem]:
        """The words of ``query`` Pixiv's app-api does not take
        (:func:`curaflow.sources.pixiv.query_words.query_problems`)."""
        return query_problems(query)

    def policy(self) -> SourcePolicy:
        """The account's policy: frontiers kept; ``replay_max_concurrency`` in replay mode;
        answers read cleaned (the client reads every app-api answer with ``loads_clean``)."""
        return SourcePolicy(
            concurrency=self.replay_max_concurrency if self.replay else self.max_concurrency,
            max_examined=self.max_examined,
            unavailable_ttl_ms=self.unavailable_ttl_ms,
            unrecognised_hold_ms=self.unrecognised_hold_ms,
            rate_limit_base_s=self.rate_limit_base_ms / 1000,
            rate_limit_cap_s=self.rate_limit_cap_ms / 1000,
            keeps_frontier=True,
            clean_text=True,
        )

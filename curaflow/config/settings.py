"""The Settings root: every section in one model, the order of its sources, the rules
across sections (run by :mod:`curaflow.config.checks`) and the views the processes use.

Sources and their precedence are described in :mod:`curaflow.config`; loading a file and
naming where a bad value came from is :mod:`curaflow.config.loading`.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr, SerializeAsAny, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from curaflow.config.api import ApiSettings
from curaflow.config.base import Loc, dotted
from curaflow.config.budgets import SOURCE_HEARTBEAT_FLOOR_MS, BudgetSettings
from curaflow.config.checks import (
    check_days,
    check_durations,
    check_filters,
    check_ordered,
    check_query_words,
    check_references,
    check_text,
    plain_urls,
    refuse_example_secrets,
)
from curaflow.config.database import DatabaseSettings, url_password
from curaflow.config.delivery import DeliverySettings
from curaflow.config.environment import ConventionalEnv, CuraflowEnv, secret_files
from curaflow.config.kinds import import_kind_modules, parse_routes, parse_sources
from curaflow.config.observability import ObservabilitySettings
from curaflow.config.retention import RetentionSettings
from curaflow.config.schedules import ScheduleConfig
from curaflow.config.supervision import SupervisionSettings
from curaflow.config.targets import TargetConfig
from curaflow.config.temporal import TemporalSettings
from curaflow.config.tokens import read_stored_tokens
from curaflow.domain.config_numbers import BooleansAreNoNumbers
from curaflow.domain.messages import Budgets, CallbackPolicy, RouteRef, TargetQuery
from curaflow.domain.text import setting_path
from curaflow.outbound.settings import OutboundSettings
from curaflow.routes import DirectoryRouteConfig, RouteSettings
from curaflow.sources.base import SourceConfig
from curaflow.sources.pixiv.config import PixivAccount, PixivSettings

#: What the callback pushes' task queue adds to ``temporal.task_queue``
#: (:meth:`Settings.push_task_queue`).
PUSH_QUEUE_SUFFIX = "-pushes"
#: The default of :attr:`Settings.foreign_queue_wait_ms` (20 s): how long the first workflow
#: task of a run under a job's id that held no job must have waited, on a task queue other
#: than curaflow's that no worker polls, before the reconciler takes the run for one no
#: worker will ever serve (:func:`curaflow.ledger.reconciler.executions.unserved_foreign_run`).
DEFAULT_FOREIGN_QUEUE_WAIT_MS = 20_000
#: The least :attr:`Settings.foreign_queue_wait_ms`: a run's first workflow task reaches a
#: polling worker within moments; a shorter wait would only race Temporal's poller list.
FOREIGN_QUEUE_WAIT_FLOOR_MS = 1_000


#: Keys still read under their former name: former → current (the current one wins when
#: both are given).
FORMER_KEYS: dict[str, str] = {"max_fallback_stages": "max_fallback_passes"}


def former_keys(data: Any) -> Any:
    """``data`` (the settings' raw input, or one source's) with each key of
    :data:`FORMER_KEYS` read under its current name; anything but a dict is returned
    untouched."""
    if not isinstance(data, dict) or not any(key in data for key in FORMER_KEYS):
        return data
    data = dict(data)
    for former, current in FORMER_KEYS.items():
        if former in data:
            value = data.pop(former)
            data.setdefault(current, value)
    return data


def _default_routes() -> dict[str, Any]:
    return {"out": DirectoryRouteConfig(path=Path("curaflow-out"))}


def _default_targets() -> list[TargetConfig]:
    return [TargetConfig(id="demo", query=TargetQuery(tags=["オリジナル"]), routes=["out"])]


class Settings(BaseSettings, BooleansAreNoNumbers):
    """All of curaflow's configuration (see :mod:`curaflow.config` for its sources and their precedence).

    ``max_fallback_passes``: search passes per cell of a scheduled job (reference §5.5's
    "fallback stages"; the former key ``max_fallback_stages`` is still read).

    ``foreign_queue_wait_ms``: how long (ms, at least :data:`FOREIGN_QUEUE_WAIT_FLOOR_MS`,
    default :data:`DEFAULT_FOREIGN_QUEUE_WAIT_MS`) a queued job's run on another task
    queue, which held no job and which no worker polls, waits for a worker before the
    reconciler terminates it and starts the job on ``temporal.task_queue``
    (docs/DESIGN.md "A Task run on another task queue").
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
    foreign_queue_wait_ms: int = Field(default=DEFAULT_FOREIGN_QUEUE_WAIT_MS, ge=FOREIGN_QUEUE_WAIT_FLOOR_MS)
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
            ConventionalEnv(settings_cls),
            CuraflowEnv(settings_cls),
            *secret_files(file_secret_settings),
            TomlConfigSettingsSource(settings_cls),  # the file of load_settings' subclass
        )

    @model_validator(mode="before")
    @classmethod
    def _former_keys(cls, data: Any) -> Any:
        return former_keys(data)

    @model_validator(mode="before")
    @classmethod
    def _register_kind_modules(cls, data: Any) -> Any:
        """Import the ``route_modules`` and ``source_modules`` (each registers its kinds)
        before ``[routes]`` and ``[sources]`` are validated with the registered models."""
        return import_kind_modules(data)

    @field_validator("state_dir", "artifacts_dir", mode="before")
    @classmethod
    def _path_given(cls, value: Any) -> Any:
        return setting_path(value)

    @field_validator("routes", mode="before")
    @classmethod
    def _route_kinds(cls, value: Any) -> Any:
        return parse_routes(value)

    @field_validator("sources", mode="before")
    @classmethod
    def _source_kinds(cls, value: Any) -> Any:
        return parse_sources(value)

    @model_validator(mode="after")
    def _no_example_secrets(self) -> Settings:
        urls = [(("database", "url"), "database.url (password)", self.database.url)] if self.database.url else []
        refuse_example_secrets(self.secret_settings(), urls)
        return self

    def secret_settings(self) -> list[tuple[Loc, str, str]]:
        """Every secret setting that is set, as ``(where, dotted name, value)``: the API
        token, the callback pushes' signing secret, the Pixiv refresh tokens, the database
        URL's password and each route's and source's secrets."""
        found: list[tuple[Loc, str | None, SecretStr | str | None]] = [
            (("api", "token"), None, self.api.token),
            # The key every push is signed with (Standard Webhooks): a secret as the token is
            # (until 2026-12-07 it was not held, so not masked, and its example not refused).
            (("api", "callback_secret"), None, self.api.callback_secret),
            (("pixiv", "refresh_token"), None, self.pixiv.refresh_token),
        ]
        found += [
            (("pixiv", "accounts", a, "refresh_token"), None, acc.refresh_token)
            for a, acc in self.pixiv.accounts.items()
        ]
        if self.database.url:
            with contextlib.suppress(ValueError):  # a URL no reader parses: asyncpg refuses it
                found.append((("database", "url"), "database.url (password)", url_password(self.database.url)))
        for section, entries in (("routes", self.routes), ("sources", self.sources)):
            for name, entry in entries.items():
                for key in type(entry).model_fields:
                    value = getattr(entry, key)
                    if isinstance(value, SecretStr):
                        found.append(((section, name, key), None, value))
        return [
            (loc, name or dotted(loc), value.get_secret_value() if isinstance(value, SecretStr) else value)
            for loc, name, value in found
            if value is not None
        ]

    def url_settings(self) -> list[tuple[Loc, str]]:
        """Every ``http(s)`` URL setting that is no secret, as ``(where, url)``
        (:func:`curaflow.config.checks.plain_urls`): a receiver may put its credential in
        one's query or path, so the process holds those parts
        (:func:`curaflow.observability.secrets.hold_url_parts`) while the URL stays a
        setting whose host the errors name."""
        return plain_urls(self)

    def secrets(self) -> list[tuple[str, str]]:
        """Every secret setting that is set, as ``(dotted name, value)``
        (:meth:`secret_settings` without where each sits)."""
        return [(name, value) for _, name, value in self.secret_settings()]

    @model_validator(mode="after")
    def _check_references(self) -> Settings:
        check_references(self)
        check_durations(self)
        check_days(self.targets)
        check_filters(self.targets)
        check_ordered(self)  # after check_days: it compares the days as written
        self.state_dir = self.state_dir.expanduser().resolve()
        if self.artifacts_dir is None:
            self.artifacts_dir = self.state_dir / "artifacts"
        self.artifacts_dir = self.artifacts_dir.expanduser().resolve()
        read_stored_tokens(self.pixiv, self.state_dir)
        check_text(self)  # after the refresh tokens are read without the whitespace around them
        check_query_words(self)  # after check_references (each target's account is configured), check_text (empty)
        return self

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
        """The policy of pushes to ``callback_url`` (``api.callback_*``, on
        :meth:`push_task_queue`), frozen into each job's workflow input."""
        return CallbackPolicy(
            max_attempts=self.api.callback_max_attempts,
            timeout_ms=self.api.callback_timeout_ms,
            initial_interval_ms=self.api.callback_retry_initial_interval_ms,
            max_interval_ms=self.api.callback_retry_max_interval_ms,
            task_queue=self.push_task_queue(),
        )

    def own_task_queues(self) -> dict[str, str]:
        """curaflow's own task queues — the main one, the callback pushes' and each source
        instance's — each with what it is (:func:`curaflow.config.checks.check_references`
        refuses a route's ``task_queue`` among them)."""
        own = {self.source_task_queue(name): f"source {name!r}'s task queue" for name in self.source_configs()}
        own[self.push_task_queue()] = "the callback pushes' task queue"
        own[self.temporal.task_queue] = "the main task queue (temporal.task_queue)"
        return own

    def push_task_queue(self) -> str:
        """Task queue of the callback pushes (``push_events``): ``<task_queue>-pushes``,
        served by every worker process with ``api.callback_max_concurrency`` activity slots
        of its own (:func:`curaflow.process.worker.build_workers`), so a receiver that never
        answers holds pushes only, never a job's steps (2026-12-07)."""
        return f"{self.temporal.task_queue}{PUSH_QUEUE_SUFFIX}"

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

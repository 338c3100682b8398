"""Configuration: a TOML file validated by pydantic, overridable from the environment.

Every name below is imported from here; each is defined in the module of its concern
(the package's modules: docs/DESIGN.md "Layout").

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

from curaflow.config.api import ApiSettings
from curaflow.config.base import ID_PATTERN, Section
from curaflow.config.budgets import (
    BUDGET_FLOOR_MS,
    DEFAULT_DEADLINE_MS,
    DEFAULT_HEARTBEAT_MS,
    DEFAULT_QUEUED_MS,
    DEFAULT_STALL_MS,
    SOURCE_HEARTBEAT_FLOOR_MS,
    BudgetFallback,
    BudgetSettings,
    budget_fallback,
    resolve_budget,
    warn_budget_fallbacks,
)
from curaflow.config.checks import EXAMPLE_SECRET_PREFIX
from curaflow.config.database import DatabaseSettings, PoolBounds
from curaflow.config.delivery import DeliverySettings
from curaflow.config.environment import SECRETS_DIR_ENV
from curaflow.config.loading import ConfigError, load_settings, origin_of, settings_class
from curaflow.config.observability import ObservabilitySettings
from curaflow.config.retention import RetentionSettings
from curaflow.config.schedules import CRON_DESCRIPTORS, CRON_FIELD, ScheduleConfig
from curaflow.config.settings import DEFAULT_FOREIGN_QUEUE_WAIT_MS, FOREIGN_QUEUE_WAIT_FLOOR_MS, Settings
from curaflow.config.supervision import SupervisionSettings
from curaflow.config.targets import TargetConfig
from curaflow.config.temporal import TemporalSettings
from curaflow.outbound.settings import OutboundSettings
from curaflow.routes import DirectoryRouteConfig, RouteSettings
from curaflow.sources.base import SourceConfig
from curaflow.sources.pixiv.config import PixivAccount, PixivSettings

__all__ = [
    "BUDGET_FLOOR_MS",
    "CRON_DESCRIPTORS",
    "CRON_FIELD",
    "DEFAULT_DEADLINE_MS",
    "DEFAULT_FOREIGN_QUEUE_WAIT_MS",
    "DEFAULT_HEARTBEAT_MS",
    "DEFAULT_QUEUED_MS",
    "DEFAULT_STALL_MS",
    "EXAMPLE_SECRET_PREFIX",
    "FOREIGN_QUEUE_WAIT_FLOOR_MS",
    "ID_PATTERN",
    "SECRETS_DIR_ENV",
    "SOURCE_HEARTBEAT_FLOOR_MS",
    "ApiSettings",
    "BudgetFallback",
    "BudgetSettings",
    "ConfigError",
    "DatabaseSettings",
    "DeliverySettings",
    "DirectoryRouteConfig",
    "ObservabilitySettings",
    "OutboundSettings",
    "PixivAccount",
    "PixivSettings",
    "PoolBounds",
    "RetentionSettings",
    "RouteSettings",
    "ScheduleConfig",
    "Section",
    "Settings",
    "SourceConfig",
    "SupervisionSettings",
    "TargetConfig",
    "TemporalSettings",
    "budget_fallback",
    "load_settings",
    "origin_of",
    "resolve_budget",
    "settings_class",
    "warn_budget_fallbacks",
]

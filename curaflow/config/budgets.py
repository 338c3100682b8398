"""The ``[budgets]`` section and the budget rule of the original (reference §8).

A budget is used only when it is a number ≥ the 60 s floor; anything else falls back to
the default, and — as the original's config validation does — every process that uses
the budgets logs one ``config.budget_fallback`` warning per such field, naming the field,
the value given and the value used (:func:`warn_budget_fallbacks`);
:attr:`BudgetSettings.test_only_floor_ms` lowers the floor for tests and logs a warning.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import Field

from curaflow.config.base import Section

BUDGET_FLOOR_MS = 60_000
DEFAULT_QUEUED_MS = 1_800_000
DEFAULT_STALL_MS = 900_000
DEFAULT_HEARTBEAT_MS = 30_000
#: Shortest heartbeat timeout of a source step, ms: five of its heartbeats (at most 1 s
#: apart, ``activities.heartbeat.CANCEL_PROBE_S``) must be missed before it is timed out.
SOURCE_HEARTBEAT_FLOOR_MS = 5_000
DEFAULT_DEADLINE_MS = 1_800_000
#: The largest budget used as given, ms (365 days, as every duration setting:
#: :data:`curaflow.config.checks.MAX_SETTING_MS`); beyond it the timers a budget sets
#: overflow, so the default is used and named in a warning, as for a value below the floor.
BUDGET_CEILING_MS = 365 * 86_400_000


def resolve_budget(value: Any, default: int, floor: int = BUDGET_FLOOR_MS) -> int:
    """Resolve a budget as the original's stall sweep does (reference §8).

    Args:
        value: configured value (anything).
        default: the default in ms.
        floor: the smallest accepted value in ms.

    Returns:
        ``int(value)`` when it is a finite number from ``floor`` to :data:`BUDGET_CEILING_MS`;
        otherwise ``default`` (not the floor, nor the ceiling).
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    if not math.isfinite(value) or value < floor or value > BUDGET_CEILING_MS:
        return default
    return int(value)


@dataclass(frozen=True)
class BudgetFallback:
    """A budget whose configured value is not used as given.

    Attributes:
        field: the setting's dotted name (``budgets.queued_timeout_ms``).
        value: the configured value, as configured.
        used_ms: the value in effect, ms.
        why: ``below_floor`` or ``above_ceiling`` (the default is used), ``not_a_number``
            (the default is used) or ``not_an_integer`` (truncated).
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
    if value > BUDGET_CEILING_MS:
        return BudgetFallback(field, value, used, "above_ceiling")
    if value != used:
        return BudgetFallback(field, value, used, "not_an_integer")
    return None


class BudgetSettings(Section):
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
    test_only_floor_ms: int | None = Field(default=None, ge=0)

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


class HasBudgets(Protocol):
    """What :func:`warn_budget_fallbacks` reads of the settings (a :class:`curaflow.config.Settings`)."""

    @property
    def budgets(self) -> BudgetSettings: ...


_WHY = {
    "below_floor": "is below the {floor} ms floor: the default {used} ms is used",
    "above_ceiling": "is beyond 365 days: the default {used} ms is used",
    "not_a_number": "is not a number: the default {used} ms is used",
    "not_an_integer": "is not an integer: {used} ms is used",
}


def warn_budget_fallbacks(settings: HasBudgets, log: Any) -> list[BudgetFallback]:
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

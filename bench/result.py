"""What a benchmark scenario reports: its parameters, its figures and its targets."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Check:
    """One target: ``value`` compared with ``limit`` (``op`` is ``<=`` or ``>=``)."""

    name: str
    value: float
    op: str
    limit: float
    unit: str = ""

    @property
    def ok(self) -> bool:
        if self.value is None or (isinstance(self.value, float) and math.isnan(self.value)):
            return False
        return self.value <= self.limit if self.op == "<=" else self.value >= self.limit


@dataclass
class Result:
    """A scenario's outcome.

    Attributes:
        params: what was run (counts, concurrency, budgets).
        metrics: every measured figure (latency summaries in ms, rates per second).
        checks: the targets of the performance issue this scenario measures.
        skipped: why the scenario could not run, if it did not.
    """

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    skipped: str | None = None
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["checks"] = [{**asdict(c), "ok": c.ok} for c in self.checks]
        return data

"""The regression guard: every figure of a benchmark run against a kept reference run.

``curaflow bench --compare REF.json`` runs the scenarios and then prints, for each
figure both runs have, the reference value, this run's, the change and whether it moved
the wrong way — so the cost of the next feature shows before it lands. With
``--current RUN.json`` it compares two kept runs without running anything.

Figures are the numeric leaves of each scenario's ``metrics`` (``throughput.cpu_ms_per_job.
curaflow.worker``, ``admission.new_latency.p99`` …) and whether each target was met. Which
way is better is told from the figure's name (:func:`direction`): rates and ratios
against a baseline up, costs (CPU, latencies, events, statements, actions, memory) down;
a figure of neither kind is shown without a verdict. A change smaller than the
threshold (5 %) is ``same``: runs on one machine vary by that much.

Counts (events, statements, actions per job) do not depend on how busy the machine is,
so their change is meaningful between any two runs; rates and CPU figures only between
runs on the same quiet machine (docs/performance.md, "Method").
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

#: A relative change below this is reported ``same`` (fraction).
THRESHOLD = 0.05

#: Name parts of figures where a larger value is better.
HIGHER_IS_BETTER = ("per_s", "ratio_vs", "succeeded")
#: Name parts of figures where a smaller value is better (costs).
LOWER_IS_BETTER = (
    "cpu",
    "_ms",
    "ms_per",
    "latency",
    "p50",
    "p95",
    "p99",
    "max",
    "mean",
    "events",
    "statements",
    "transactions",
    "actions",
    "signals",
    "upserts",
    "markers",
    "workflow_tasks",
    "timers",
    "rss",
    "mib",
    "pages",
    "seconds",
    "non_2xx",
)


@dataclass(frozen=True)
class Row:
    """One figure of the comparison.

    Attributes:
        key: ``scenario.path.to.figure`` (a target: ``scenario.target: name``).
        reference / current: the values (None where the run lacks the figure).
        change: relative change ``current / reference − 1`` (None when not computable).
        verdict: ``better``, ``worse``, ``same``, ``changed`` (no direction known),
            ``new`` (only in the current run) or ``gone`` (only in the reference).
    """

    key: str
    reference: float | None
    current: float | None
    change: float | None
    verdict: str


def direction(key: str) -> int:
    """+1 when a larger value of figure ``key`` is better, −1 when smaller is, 0 unknown.

    The last segments decide first (``…cpu_ms_per_job.same_io.worker`` is a cost), and a
    baseline engine's own figures (``bare_…``, ``same_io_…``, ``noop_engine``) are
    context, not curaflow's: no verdict.
    """
    lowered = key.lower()
    if any(part in lowered for part in ("bare_", "same_io_jobs", "noop_engine", ".same_io.")):
        return 0
    if ".target: " in lowered:
        return 1
    if any(part in lowered for part in HIGHER_IS_BETTER):
        return 1
    if any(part in lowered for part in LOWER_IS_BETTER):
        return -1
    return 0


def _leaves(prefix: str, node: Any) -> Iterator[tuple[str, float]]:
    if isinstance(node, bool):
        yield prefix, float(node)
    elif isinstance(node, int | float):
        if not (isinstance(node, float) and math.isnan(node)):
            yield prefix, float(node)
    elif isinstance(node, Mapping):
        for key, value in node.items():
            yield from _leaves(f"{prefix}.{key}", value)


def figures(document: Mapping[str, Any]) -> dict[str, float]:
    """Every numeric figure of a benchmark run (the JSON ``curaflow bench`` writes), by key.

    A target becomes ``scenario.target: name`` with 1.0 when met, 0.0 when missed; a
    skipped scenario contributes nothing.
    """
    found: dict[str, float] = {}
    for result in document.get("results", []):
        name = str(result.get("name", "?"))
        if result.get("skipped"):
            continue
        found.update(_leaves(name, result.get("metrics", {})))
        for check in result.get("checks", []):
            found[f"{name}.target: {check.get('name')}"] = 1.0 if check.get("ok") else 0.0
    return found


def compare(current: Mapping[str, Any], reference: Mapping[str, Any], *, threshold: float = THRESHOLD) -> list[Row]:
    """Each figure of ``current`` against ``reference`` (module doc), in ``current``'s
    order, then the figures only ``reference`` has."""
    now, ref = figures(current), figures(reference)
    rows = []
    for key, value in now.items():
        if key not in ref:
            rows.append(Row(key, None, value, None, "new"))
            continue
        before = ref[key]
        change = (value / before - 1) if before else (0.0 if value == before else None)
        if change is not None and abs(change) < threshold:
            verdict = "same"
        else:
            way = direction(key)
            moved = (value > before) - (value < before)
            verdict = "changed" if way == 0 else ("better" if moved == way else "worse")
        rows.append(Row(key, before, value, change, verdict))
    rows += [Row(key, value, None, None, "gone") for key, value in ref.items() if key not in now]
    return rows


def regressions(rows: list[Row]) -> list[Row]:
    """The figures that moved the wrong way (targets that were met and are not included)."""
    return [row for row in rows if row.verdict == "worse"]


def render(rows: list[Row], *, reference_name: str = "reference") -> list[str]:
    """The comparison as text lines: one per figure (``same`` ones included), worst first."""
    order = {"worse": 0, "better": 1, "changed": 2, "new": 3, "gone": 4, "same": 5}

    def fmt(value: float | None) -> str:
        return "—" if value is None else f"{value:g}"

    lines = [f"{'figure':<64} {reference_name:>12} {'this run':>12} {'change':>9}  verdict"]
    for row in sorted(rows, key=lambda r: order[r.verdict]):
        change = "" if row.change is None else f"{row.change * 100:+.1f} %"
        lines.append(f"{row.key:<64} {fmt(row.reference):>12} {fmt(row.current):>12} {change:>9}  {row.verdict}")
    return lines

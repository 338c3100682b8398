"""Run the chaos scenarios, print one table and write the results as JSON.

Full mode: every scenario on a fresh stack (its own PostgreSQL, Temporal dev server,
processes and routes), so a fault of one never shows in another. Quick mode (CI, about
2 minutes on 2 cores): one stack for every scenario, smaller sizes, each scenario still
on its own targets and routes.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from bench.chaos.harness import Scenario
from bench.chaos.plan import QUICK_PIXIV, Plan
from bench.chaos.records import ScenarioResult
from bench.chaos.scenarios import RUNNERS, plans, scenario_config
from bench.chaos.stack import ChaosStack
from bench.runner import RESULTS_DIR, machine
from curaflow.observability.console import text_console

TITLES = {
    "kills": "worker SIGKILL storm",
    "postgres": "PostgreSQL stop / kill",
    "temporal": "Temporal stop / start",
    "cancel": "cancel storm",
    "cancel_kills": "cancel storm + kills",
    "edges": "hostile parties (edges)",
}


def _secs(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f} s"


def _faults(r: ScenarioResult) -> str:
    parts = [f.kind for f in r.faults if "SIGKILLs" not in f.kind]
    if r.kills:
        parts.append(f"{r.kills} worker SIGKILLs")
    if r.cancels:
        parts.append("cancels by " + " · ".join(f"{k} {v}" for k, v in sorted(r.cancels.items())))
        parts.append("when → ended " + " · ".join(f"{k} {v}" for k, v in sorted(r.cancel_outcomes.items())))
    return "; ".join(parts) or "–"


def _recovery(r: ScenarioResult) -> str:
    parts = [
        f"{f.kind.split(' ', 1)[1]}: ready {_secs(f.ready_s)}, new job {_secs(f.first_job_s)}"
        + (f", one owner + standbys {_secs(f.owners_s)}" if f.owners or f.owners_s is not None else "")
        for f in r.faults
        if f.up_ms
    ]
    if r.kill_ready_s:
        ordered = sorted(r.kill_ready_s)
        parts.append(f"killed worker ready: p50 {_secs(ordered[len(ordered) // 2])}, max {_secs(ordered[-1])}")
    return "; ".join(parts) or "–"


def _edge_ends(r: ScenarioResult) -> str:
    ends = r.edges.get("ends") or {}
    return " · ".join(f"{case} → {e['end']} ({_secs(e['seconds'])})" for case, e in ends.items()) or "–"


def _edge_bounds(r: ScenarioResult) -> str:
    if not r.edges:
        return "–"
    rss = " · ".join(f"{n} {v['start']:.0f} → {v['peak']:.0f} MiB" for n, v in sorted(r.edges["rss_mib"].items()))
    return f"{rss}; {r.edges['internal_hits']} hits; {len(r.edge_findings.get('open_connections', []))} open"


def rows(results: list[ScenarioResult]) -> list[tuple[str, list[str]]]:
    """The table's rows: (figure, one cell per scenario)."""

    def each(fn: Any) -> list[str]:
        return [fn(r) for r in results]

    def audit(key: str) -> Any:
        return lambda r: r.audit.get(key, 0)

    return [
        ("faults", each(_faults)),
        ("jobs submitted (from a Temporal client)", each(lambda r: f"{r.submitted} ({r.via_temporal})")),
        ("terminal / stuck / lost", each(lambda r: f"{r.terminal} / {len(r.stuck)} / {len(r.lost)}")),
        ("outcomes", each(lambda r: " · ".join(f"{k} {v}" for k, v in sorted(r.statuses.items())) or "–")),
        (
            "job duration p50 / max",
            each(lambda r: f"{_secs(r.job_seconds.get('p50'))} / {_secs(r.job_seconds.get('max'))}"),
        ),
        (
            "admitted after a fault began: succeeded",
            each(
                lambda r: (
                    f"{r.after_fault - len(r.after_fault_not_succeeded)} / {r.after_fault}"
                    if r.after_fault or not r.cancels
                    else "–"
                )
            ),
        ),
        (
            "webhook: deliveries / requests (same-id re-sends)",
            each(
                lambda r: f"{audit('webhook_deliveries')(r)} / {audit('webhook_requests')(r)} ({audit('resends')(r)})"
            ),
        ),
        ("directory: deliveries", each(audit("directory_deliveries"))),
        ("cross-job duplicates", each(audit("cross_job_duplicates"))),
        (
            "ledger `delivered` → at the route",
            each(
                lambda r: (
                    f"{audit('ledger_delivered')(r) - audit('missing_at_route')(r)} / {audit('ledger_delivered')(r)}"
                )
            ),
        ),
        (
            "at the route → reported by its job (phantoms)",
            each(
                lambda r: (
                    f"{audit('at_route')(r) - audit('phantoms')(r)} / {audit('at_route')(r)} ({audit('phantoms')(r)})"
                )
            ),
        ),
        ("at the route, reported as not landed", each(audit("understated"))),
        (
            "cancelled jobs reporting a landed delivery",
            each(
                lambda r: (
                    f"{r.cancelled_landed.get('jobs', 0)} ("
                    + " · ".join(f"{k} {v}" for k, v in sorted(r.cancelled_landed.items()) if k != "jobs")
                    + ")"
                    if r.cancels
                    else "–"
                )
            ),
        ),
        (
            "sends after a recorded cancel / steps after a cancel",
            each(lambda r: f"{audit('sends_after_cancel')(r)} / {len(r.late_steps)}" if r.cancels else "–"),
        ),
        ("recovery (from the service back)", each(_recovery)),
        ("hostile parties: each job's end", each(_edge_ends)),
        ("hostile parties: worker RSS · internal service hits · connections outliving their job", each(_edge_bounds)),
        (
            "unplanned process exits",
            each(lambda r: ", ".join(f"{e['process']} ({e['code']})" for e in r.exits) or "0"),
        ),
        ("duration", each(lambda r: f"{r.seconds:.0f} s")),
        (
            "verdict",
            each(lambda r: "pass" if r.ok else "FAIL: " + ", ".join(k for k, v in r.checks().items() if v)),
        ),
    ]


def print_table(results: list[ScenarioResult], console: Console, title: str) -> None:
    table = Table(title=title, title_justify="left", show_lines=True)
    table.add_column("figure")
    for r in results:
        table.add_column(TITLES.get(r.name, r.name))
    for figure, cells in rows(results):
        styled = [Text(c, style="red" if c.startswith("FAIL") else "") for c in map(str, cells)]
        table.add_row(figure, *styled)
    console.print(table)


def markdown(results: list[ScenarioResult]) -> str:
    """The same table in Markdown (what docs/chaos.md shows)."""
    head = "| | " + " | ".join(TITLES.get(r.name, r.name) for r in results) + " |"
    lines = [head, "|---" * (len(results) + 1) + "|"]
    for figure, cells in rows(results):
        lines.append(f"| {figure} | " + " | ".join(str(c).replace("|", "/") for c in cells) + " |")
    return "\n".join(lines)


def _details(results: list[ScenarioResult], console: Console) -> None:
    """What went wrong, job by job (only when something did), on a console that reads no
    markup (:func:`curaflow.observability.console.text_console`): errors and job ids as they are."""
    for r in results:
        if r.error:
            console.print(Text.assemble((f"{r.name}: the scenario itself failed", "red"), f"\n{r.error}"))
        for key in ("lost", "stuck"):
            if getattr(r, key):
                console.print(Text.assemble((f"{r.name}: {key}", "red"), f" {getattr(r, key)[:10]}"))
        for detail in r.stuck_details:
            console.print(f"  {json.dumps(detail, default=str)[:1500]}")
        for key in ("after_fault_not_succeeded", "unexpected_status", "late_steps"):
            if getattr(r, key):
                console.print(
                    Text.assemble((f"{r.name}: {key}", "red"), f" {json.dumps(getattr(r, key)[:5], default=str)}")
                )
        for kind, examples in r.audit.get("examples", {}).items():
            console.print(Text.assemble((f"{r.name}: {kind}", "red"), f" {json.dumps(examples, default=str)}"))
        others = [n for n in r.not_succeeded if n not in r.after_fault_not_succeeded]
        if others:
            console.print(
                Text.assemble(
                    (f"{r.name}: not succeeded (admitted before the first fault)", "yellow"), f" {others[:5]}"
                )
            )


def _selected(quick: bool, only: list[str] | None) -> dict[str, Plan]:
    return {name: plan for name, plan in plans(quick).items() if not only or name in only}


async def run_scenario(stack: ChaosStack, name: str, plan: Plan, rng: random.Random) -> ScenarioResult:
    """Run one scenario on a running stack; a crash of the harness is reported, not raised."""
    began = time.monotonic()
    stack.exits.clear()
    scenario = Scenario(stack, name, plan, rng)
    try:
        await RUNNERS[name](scenario)
        await scenario.drain()
        result = await scenario.finish()
    except Exception:  # noqa: BLE001 - reported in the table; the other scenarios still run
        result = scenario.result
        result.error = traceback.format_exc()
    result.seconds = round(time.monotonic() - began, 1)
    return result


async def run_chaos(
    quick: bool,
    json_path: Path | None = None,
    *,
    seed: int | None = None,
    only: list[str] | None = None,
    keep: bool = False,
) -> list[ScenarioResult]:
    """Run the scenarios (all of the mode, or those in ``only``), print the table, write JSON.

    Args:
        keep: keep the run's folder (logs, data directories, routes) even when every
            scenario passed (it is always kept when one failed).

    Returns:
        One result per scenario; :attr:`ScenarioResult.ok` says whether it passed.
    """
    console = text_console(width=220)
    seed = seed if seed is not None else random.randrange(2**31)
    rng = random.Random(seed)
    selected = _selected(quick, only)
    root = Path(tempfile.mkdtemp(prefix="curaflow-chaos-"))
    root.chmod(0o755)  # the embedded PostgreSQL runs as its own user when we are root
    started = datetime.now(UTC)
    info = machine()
    began = time.monotonic()
    console.print(f"chaos ({'quick' if quick else 'full'}), seed {seed}, in {root}")
    results: list[ScenarioResult] = []

    def config_of(names: list[str]) -> Any:
        def build(stack: ChaosStack) -> dict[str, Any]:
            config: dict[str, Any] = {"routes": {}, "targets": []}
            if quick:
                config["pixiv"] = dict(QUICK_PIXIV)
            for name in names:
                part = scenario_config(
                    name, selected[name], stack.receiver_url, stack.root, stack.hostile_url, stack.internal_url
                )
                config["routes"].update(part.pop("routes"))
                config["targets"] += part.pop("targets")
                config.update(part)
            return config

        return build

    try:
        if quick:
            stack = ChaosStack(root / "quick", config_of(list(selected)))
            try:
                await stack.start()
                for name, plan in selected.items():
                    console.print(Text.assemble((name, "bold"), " …"))
                    await stack.wait_ready(120)
                    results.append(await run_scenario(stack, name, plan, rng))
            finally:
                await stack.stop()
        else:
            for name, plan in selected.items():
                console.print(Text.assemble((name, "bold"), " …"))
                stack = ChaosStack(root / name, config_of([name]), hostile=name == "edges")
                try:
                    await stack.start()
                    results.append(await run_scenario(stack, name, plan, rng))
                finally:
                    await stack.stop()
        keep = keep or not all(r.ok for r in results)
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    seconds = round(time.monotonic() - began, 1)
    title = f"curaflow chaos ({'quick' if quick else 'full'}, seed {seed}, {seconds:.0f} s)"
    print_table(results, console, title)
    _details(results, console)
    if keep:
        console.print(f"logs and data kept in {root}")
    document = {
        "started_at": started.isoformat(),
        "mode": "quick" if quick else "full",
        "seed": seed,
        "seconds": seconds,
        "ok": all(r.ok for r in results),
        "machine": info,
        "results": [r.as_dict() for r in results],
        "markdown": markdown(results),
        "kept": str(root) if keep else None,
    }
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    paths = [RESULTS_DIR / f"chaos-{'quick' if quick else 'full'}-{started.strftime('%Y%m%dT%H%M%SZ')}.json"]
    if json_path is not None:
        paths.append(json_path)
    for path in paths:
        path.write_text(json.dumps(document, indent=2, ensure_ascii=False, default=str))
    console.print(f"results written to {', '.join(str(p) for p in paths)}")
    return results

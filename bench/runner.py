"""Run the benchmark scenarios, print a table and write the results as JSON.

Every scenario starts from the same embedded services (PostgreSQL via pgserver, the
Temporal dev server in memory, the Pixiv replay server as its own process) in a fresh
temporary directory, with real worker and API processes. Throughput is reported as a
ratio against the bare engine measured in the same run; latencies as p50/p95/p99.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import tempfile
import time
import traceback
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from bench.env import Services
from bench.result import Result
from curaflow.observability.console import text_console

RESULTS_DIR = Path(__file__).parent / "results"
Scenario = Callable[[Services, bool], Awaitable[Result | list[Result]]]


def scenarios() -> dict[str, Scenario]:
    """Scenario name → runner, in the order they run."""
    from bench.scenarios import api, burst, history, liveness, scale, throughput

    return {
        "throughput": throughput.run,
        "api": api.run,
        "cancel": liveness.cancel,
        "stall": liveness.stall,
        "scale": scale.run,
        "history": history.run,
        "burst": burst.run,
    }


def machine() -> dict[str, Any]:
    """Facts about the machine the numbers come from."""
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem_gib = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        mem_gib = None
    import temporalio

    return {
        "cpus": os.cpu_count(),
        "cpu_model": cpu,
        "memory_gib": mem_gib,
        "python": platform.python_version(),
        "temporalio": getattr(temporalio, "__version__", "?"),
        "platform": platform.platform(),
        "load_average_at_start": os.getloadavg(),
    }


def _fmt(value: Any) -> str:
    if isinstance(value, dict) and "p99" in value:
        return f"p50 {value['p50']} / p95 {value['p95']} / p99 {value['p99']} ms (n={value['n']})"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items())
    return str(value)


def print_table(results: list[Result], console: Console) -> None:
    """The human-readable summary: parameters, figures and targets of each scenario, on a
    console that reads no markup (:func:`curaflow.observability.console.text_console`: a failed
    scenario's error is printed as it is)."""
    for result in results:
        table = Table(title=f"{result.name} ({result.seconds:.1f} s)", show_lines=False, title_justify="left")
        table.add_column("figure")
        table.add_column("value")
        if result.skipped:
            table.add_row(Text("skipped", style="yellow"), result.skipped)
        table.add_row(Text("parameters", style="dim"), Text(_fmt(result.params), style="dim"))
        for key, value in result.metrics.items():
            table.add_row(key, _fmt(value))
        for check in result.checks:
            mark = Text("met", style="green") if check.ok else Text("missed", style="red")
            figure = Text(f"{check.value} {check.op} {check.limit} {check.unit}  ").append_text(mark)
            table.add_row(f"target: {check.name}", figure)
        console.print(table)


async def run_all(
    quick: bool, json_path: Path | None, only: list[str] | None = None
) -> tuple[list[Result], dict[str, Any]]:
    """Run the scenarios (all, or those named in ``only``); returns their results and the
    document written as JSON."""
    console = text_console()
    root = Path(tempfile.mkdtemp(prefix="curaflow-bench-"))
    started = datetime.now(UTC)
    info = machine()
    results: list[Result] = []
    services = await Services(root).start()
    try:
        for name, scenario in scenarios().items():
            if only and name not in only:
                continue
            console.print(Text.assemble((f"running {name}", "bold"), f" ({'quick' if quick else 'full'})"))
            began = time.monotonic()
            try:
                outcome = await scenario(services, quick)
                batch = outcome if isinstance(outcome, list) else [outcome]
            except Exception as err:  # noqa: BLE001 - report it and go on with the others
                batch = [Result(name=name, skipped=f"failed: {type(err).__name__}: {err}")]
                console.print(traceback.format_exc())
            for result in batch:
                result.seconds = round(time.monotonic() - began, 1)
            results.extend(batch)
    finally:
        await services.stop()
        shutil.rmtree(root, ignore_errors=True)
    print_table(results, console)
    document = {
        "started_at": started.isoformat(),
        "mode": "quick" if quick else "full",
        "machine": info,
        "results": [r.as_dict() for r in results],
    }
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    paths = [RESULTS_DIR / f"bench-{'quick' if quick else 'full'}-{stamp}.json"]
    if json_path is not None:
        paths.append(json_path)
    for path in paths:
        path.write_text(json.dumps(document, indent=2, ensure_ascii=False))
    console.print(f"results written to {', '.join(str(p) for p in paths)}")
    return results, document


def print_comparison(document: dict[str, Any], reference: Path, console: Console) -> int:
    """Print every figure of ``document`` against the run kept in ``reference``
    (:mod:`bench.compare`); returns how many moved the wrong way."""
    from bench.compare import compare, regressions, render

    rows = compare(document, json.loads(reference.read_text()))
    console.print(Text.assemble((f"against {reference.name}", "bold"), " (changes under 5 % are 'same')"))
    for line in render(rows):
        print(line)
    worse = regressions(rows)
    console.print(f"{len(worse)} figure(s) moved the wrong way" if worse else "no figure moved the wrong way")
    return len(worse)

"""``curaflow bench``: run the benchmark suite (code under ``bench/``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer


def bench(
    quick: bool = typer.Option(False, "--quick", help="Small sizes; finishes in about 3 minutes on 2 cores."),
    json_path: Path | None = typer.Option(None, "--json", help="Also write the results to this file."),
    only: list[str] = typer.Option(
        [], "--only", help="Run only this scenario (repeatable): throughput, api, cancel, stall, scale, history, burst."
    ),
    compare: Path | None = typer.Option(
        None,
        "--compare",
        help="After the run, print each figure's change against this kept run (a bench/results/*.json).",
        exists=True,
        dir_okay=False,
    ),
    current: Path | None = typer.Option(
        None,
        "--current",
        help="With --compare: compare this kept run instead of running the benchmark.",
        exists=True,
        dir_okay=False,
    ),
) -> None:
    """Benchmark curaflow against the bare engine on the embedded stack; prints a table, writes JSON."""
    import json

    from bench.runner import print_comparison, run_all, scenarios
    from curaflow.cli.common import out_console
    from curaflow.observability.logs import configure_logging

    if current is not None:
        if compare is None:
            raise typer.BadParameter("--current needs --compare REF.json", param_hint="--current")
        print_comparison(json.loads(current.read_text()), compare, out_console)
        return

    unknown = sorted(set(only) - set(scenarios()))
    if unknown:
        raise typer.BadParameter(
            f"unknown scenario {', '.join(unknown)} (choose from {', '.join(scenarios())})", param_hint="--only"
        )

    configure_logging("WARNING")
    results, document = asyncio.run(run_all(quick, json_path, only or None))
    if compare is not None:
        print_comparison(document, compare, out_console)
    failed = [r.name for r in results if r.skipped and r.skipped.startswith("failed")]
    raise typer.Exit(1 if failed else 0)

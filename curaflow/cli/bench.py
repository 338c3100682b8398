"""``curaflow bench``: run the benchmark suite (code under ``bench/``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer


def bench(
    quick: bool = typer.Option(False, "--quick", help="Small sizes; finishes in about 3 minutes on 2 cores."),
    json_path: Path | None = typer.Option(None, "--json", help="Also write the results to this file."),
    only: list[str] = typer.Option(
        [], "--only", help="Run only this scenario (repeatable): throughput, api, cancel, stall, scale, history."
    ),
) -> None:
    """Benchmark curaflow against the bare engine on the embedded stack; prints a table, writes JSON."""
    from bench.runner import run_all, scenarios
    from curaflow.observability.logs import configure_logging

    unknown = sorted(set(only) - set(scenarios()))
    if unknown:
        raise typer.BadParameter(
            f"unknown scenario {', '.join(unknown)} (choose from {', '.join(scenarios())})", param_hint="--only"
        )

    configure_logging("WARNING")
    results = asyncio.run(run_all(quick, json_path, only or None))
    failed = [r.name for r in results if r.skipped and r.skipped.startswith("failed")]
    raise typer.Exit(1 if failed else 0)

"""``curaflow chaos``: run the chaos suite (code under ``bench/chaos/``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer

SCENARIOS = ("kills", "postgres", "temporal", "pg_hang", "cancel", "cancel_kills", "edges")


def chaos(
    quick: bool = typer.Option(False, "--quick", help="Small sizes, one stack; about 2 minutes on 2 cores (CI)."),
    json_path: Path | None = typer.Option(None, "--json", help="Also write the results to this file."),
    only: list[str] = typer.Option([], "--only", help=f"Run only this scenario (repeatable): {', '.join(SCENARIOS)}."),
    seed: int | None = typer.Option(None, "--seed", help="Seed of the random kills, cancel moments and paths."),
    keep: bool = typer.Option(False, "--keep", help="Keep the run's folder (logs, data) even when every check passed."),
) -> None:
    """Break the embedded stack under load (worker SIGKILLs, PostgreSQL and Temporal restarts,
    cancel storms) and audit the truth: prints one table; exits 1 when a check failed."""
    from bench.chaos.runner import run_chaos
    from curaflow.observability.logs import configure_logging

    unknown = sorted(set(only) - set(SCENARIOS))
    if unknown:
        raise typer.BadParameter(
            f"unknown scenario {', '.join(unknown)} (choose from {', '.join(SCENARIOS)})", param_hint="--only"
        )
    if quick and "edges" in only:
        raise typer.BadParameter(
            "edges runs in the full mode only, on a stack of its own: curaflow chaos --only edges", param_hint="--only"
        )
    configure_logging("WARNING")
    results = asyncio.run(run_chaos(quick, json_path, seed=seed, only=only or None, keep=keep))
    raise typer.Exit(0 if results and all(r.ok for r in results) else 1)

"""``curaflow prune``: the retention policy applied to the ledger and the artifact store.

What is pruned and what is never touched: :mod:`curaflow.ledger.retention`.
Exit status: 0 on success, 1 when an artifact folder of this host could not be deleted
(each said on stderr; it stays pending, the next prune tries it again), 2 for a usage
error (no age given and no ``retention.days``), 3 when the ledger could not be reached
(:func:`curaflow.cli.common.open_ledger`).
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from pathlib import Path
from typing import Any

import typer

from curaflow.artifacts import ArtifactStore
from curaflow.cli.common import ConfigOption, error, out_console, settings_or_exit
from curaflow.cli.remembered import ledger_pool
from curaflow.config.checks import MAX_SETTING_DAYS
from curaflow.ledger import retention
from curaflow.ledger.db import now_ms
from curaflow.observability.console import print_json
from curaflow.observability.logs import configure_logging


def prune(
    older_than_days: int | None = typer.Option(
        None,
        "--older-than-days",
        min=1,
        max=MAX_SETTING_DAYS,
        help="Prune jobs that finished more than N days ago (default: retention.days).",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Count what would be pruned; change nothing."),
    vacuum: bool = typer.Option(
        False, "--vacuum", help="VACUUM the pruned tables afterwards (space reusable at once)."
    ),
    as_json: bool = typer.Option(False, "--json", help="JSON output: the counts and the ledger's bytes before/after."),
    config: Path | None = ConfigOption,
) -> None:
    """Prune finished jobs' events, candidate reports and artifacts older than N days.

    Artifact files are deleted on every host that holds them: here at once, on each other
    worker by its own retention pass (reported as pending until then).

    Never touches an open job, nor what each route received (delivery intents:
    deduplication depends on them), nor job rows, cells' state and work, outcome records.
    """
    settings = settings_or_exit(config)
    days = older_than_days or settings.retention.days
    if days is None:
        error("give --older-than-days N, or set retention.days in the configuration")
        raise typer.Exit(2)
    configure_logging("WARNING", settings.observability.log_json)
    assert settings.artifacts_dir is not None

    async def main() -> dict[str, Any]:
        async with ledger_pool(settings) as pool:
            before = await retention.ledger_bytes(pool)
            report = await retention.prune(
                pool,
                now_ms() - days * retention.DAY_MS,
                store=ArtifactStore(settings.artifacts_dir) if settings.artifacts_dir else None,
                dry_run=dry_run,
            )
            if vacuum and not dry_run:
                for table in ("job_events", "event_pushes", "cells", "jobs", "schedule_misses", "artifact_chunks"):
                    await pool.execute(f"VACUUM {table}")
            after = await retention.ledger_bytes(pool)
        return {
            "days": days,
            **asdict(report),
            "bytes_before": sum(before.values()),
            "bytes_after": sum(after.values()),
        }

    out = asyncio.run(main())
    if as_json:
        print_json(out, indent=2)
        refused(out["errors"])
        return
    verb = "would prune" if dry_run else "pruned"
    out_console.print(
        f"{verb} {out['jobs']} job(s) finished more than {days} day(s) ago: {out['events']} event(s), "
        f"{out['pushes']} push(es), {out['candidate_reports']} candidate report(s), {out['artifacts']} artifact(s); "
        f"{out['misses']} schedule miss(es)"
        + (f", {out['chunks']} row(s) of a late artifact copy" if out["chunks"] else "")
        + f". Ledger {out['bytes_before']:,} → {out['bytes_after']:,} bytes "
        "(deleted rows' space is reused by new rows; --vacuum makes it reusable at once)",
        highlight=False,
    )
    for label, folders in out["files_removed"].items():
        out_console.print(f"removed {folders} artifact folder(s) on {label}", highlight=False)
    for held in out["files_pending"]:
        where = held["label"] or f"store {held['store_id']}"
        seen = held["seen_at_ms"]
        last = f"its worker's last retention pass {(now_ms() - seen) / 60_000:.0f} min ago" if seen else "never seen"
        out_console.print(
            f"pending: {held['folders']} artifact folder(s) on {where} ({last}); "
            "that worker's retention pass deletes them",
            highlight=False,
        )
    refused(out["errors"])


def refused(errors: list[str]) -> None:
    """Say the folders this host could not delete, one line each on stderr, and exit 1
    (the ledger's part is done; they stay pending and the next prune tries them again)."""
    for line in errors:
        error(f"not removed: {line}")
    if errors:
        raise typer.Exit(1)

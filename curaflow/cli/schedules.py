"""``curaflow schedules sync|list|trigger|pause|unpause|misses``: recurring plans on Temporal Schedules.

The plans come from ``[[schedules]]`` in the configuration; the logic is in
:mod:`curaflow.schedules`. The commands talk to the configured Temporal service
(``TEMPORAL_ADDRESS``) or to the running ``curaflow dev`` stack of the state directory;
they never start a stack of their own (a schedule on a throw-away server would be lost).
Exit status: 0 on success, 1 when Temporal refused or could not be reached, or the
schedule is unknown or not curaflow's — ``trigger``, ``pause`` and ``unpause`` act only on
a plan curaflow manages on ``temporal.task_queue``
(:func:`curaflow.schedules.sync.managed_schedule`), never on another application's
schedule or another stack's plan —, 2 for configuration or usage errors; ``misses``, which reads only the ledger, 3
when the ledger could not be reached (as the other ledger commands:
:func:`curaflow.cli.common.open_ledger`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from temporalio.client import Client

from curaflow import schedules as plans
from curaflow.cli.common import (
    ConfigOption,
    check_namespace,
    err_console,
    error,
    fail,
    operator_table,
    out_console,
    settings_or_exit,
    temporal_errors,
    temporal_service_or_exit,
)
from curaflow.cli.remembered import ledger_pool
from curaflow.config import Settings
from curaflow.observability.console import print_json
from curaflow.observability.logs import configure_logging
from curaflow.temporal.connection import connect

app = typer.Typer(
    rich_markup_mode="markdown",
    help="Recurring plans (Temporal Schedules): sync them with the config, list, trigger, pause.",
)
T = TypeVar("T")


async def _served_by_curaflow(client: Client) -> None:
    """Refuse a namespace no curaflow worker ever served: it lacks curaflow's search
    attributes, which every worker (and ``curaflow temporal-setup``) registers at start
    (:func:`curaflow.temporal.upgrades.missing_search_attributes`). Until 2026-12-05
    ``schedules list`` there answered "no schedules" (exit 0) — a mistyped
    ``TEMPORAL_NAMESPACE``, or the cluster's ``default`` while the workers run in
    ``curaflow``, read as "none configured" — and ``sync`` failed on Temporal's "no
    mapping defined for search attribute ScheduleId".

    Raises:
        plans.ScheduleError: the namespace lacks one of them (the command exits 1).
        temporalio.service.RPCError: Temporal refused the request.
    """
    from curaflow.temporal.upgrades import missing_search_attributes

    missing = await missing_search_attributes(client)
    if missing:
        raise plans.ScheduleError(
            f"namespace {client.namespace!r} lacks curaflow's search attributes {missing}: no curaflow worker "
            "serves it, so its schedules would start jobs nobody runs; set TEMPORAL_NAMESPACE "
            "(temporal.namespace) to the workers' namespace, or prepare this one with `curaflow temporal-setup`"
        )


def _run(settings: Settings, body: Callable[[Client], Awaitable[T]]) -> T:
    # the command prints its own report; log lines only for warnings, as JSON on stderr
    configure_logging("WARNING", settings.observability.log_json)

    # exits 2 when there is none (typer.Exit is a RuntimeError: resolve it first)
    service = temporal_service_or_exit(settings)

    async def main() -> T:
        # the configured service with its TLS/API key; a `curaflow dev` stack is plain
        connection = settings.temporal.connection if service.configured else None
        client = await connect(service.address, settings.temporal.namespace, connection=connection)
        await check_namespace(client)
        await _served_by_curaflow(client)
        return await body(client)

    try:
        with temporal_errors(f"{service.address} (namespace {settings.temporal.namespace})"):
            return asyncio.run(main())
    except plans.ScheduleError as err:
        fail(str(err))


@app.command()
def sync(
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the diff without changing anything."),
    allow_empty: bool = typer.Option(
        False, "--allow-empty", help="With no plan configured, delete every curaflow schedule of the task queue."
    ),
    config: Path | None = ConfigOption,
) -> None:
    """Create, update and delete schedules to match the configuration; print the diff.

    Lines: `+ id` created, `~ id: field old → new` updated, `- id` deleted (no
    longer configured), `= id` unchanged; `(never runs: …)` after a plan whose schedule,
    not paused, matches no future time (a cron's impossible date). Running it twice changes
    nothing the second time.

    A configuration without any plan (often the wrong `--config`) deletes nothing
    unless `--allow-empty` is given: the command lists what it would delete and exits 2.
    """
    settings = settings_or_exit(config)
    if not settings.schedules and not dry_run and not allow_empty:
        doomed = _run(settings, lambda c: plans.sync_schedules(c, settings, dry_run=True))
        if doomed:
            error(
                f"no schedules configured: sync would delete {len(doomed)} schedule(s) "
                f"({', '.join(c.schedule_id for c in doomed)}). Check --config / $CURAFLOW_CONFIG, "
                "or pass --allow-empty to delete them."
            )
            raise typer.Exit(2)
    changes = _run(settings, lambda c: plans.sync_schedules(c, settings, dry_run=dry_run))
    if not changes:
        out_console.print("no schedules configured and none to delete")
    for change in changes:
        out_console.print(change.render(), markup=False, highlight=False)
    changed = sum(1 for c in changes if c.action != "unchanged")
    out_console.print(f"{'would change' if dry_run else 'changed'} {changed} of {len(changes)} schedule(s)")


@app.command("list")
def list_(
    as_json: bool = typer.Option(False, "--json", help="JSON output."),
    config: Path | None = ConfigOption,
) -> None:
    """The plans: cron, zone, targets, paused, next runs, recent occurrences, misses."""
    settings = settings_or_exit(config)
    views = _run(settings, lambda c: plans.describe_schedules(c, settings))
    if as_json:
        rows: list[dict[str, Any]] = [
            {
                "schedule_id": v.schedule_id,
                "cron": v.cron,
                "timezone": v.timezone,
                "target_ids": v.target_ids,
                "paused": v.paused,
                "note": v.note,
                "next_runs": [t.isoformat() for t in v.next_runs],
                "recent": [{"scheduled_at": t.isoformat(), "workflow_id": w} for t, w in v.recent],
                "actions": v.actions,
                "missed_catchup_window": v.missed_catchup,
                "skipped_overlap": v.skipped_overlap,
                "configured": v.configured,
            }
            for v in views
        ]
        print_json(rows, indent=2)
        return
    render_schedules(views, out_console)


#: Below this width ``schedules list`` prints one block per plan instead of a table, whose
#: nine columns would each be cut to a few characters.
TABLE_MIN_WIDTH = 120


def render_schedules(views: list[plans.ScheduleView], console: Console) -> None:
    """Print the plans: a table on a wide terminal, one block of short lines per plan
    below :data:`TABLE_MIN_WIDTH` columns (every value whole, readable in 80 columns); with
    no plan at all, one line saying so and how to add one."""
    if not views:
        console.print(
            "no schedules (add [[schedules]] to the config, then `curaflow schedules sync`)",
            markup=False,
            highlight=False,
        )
        return
    rows = []
    for v in views:
        state = "paused" if v.paused else ("active" if v.next_runs else "never runs")
        if not v.configured:
            state += " (not in config)"
        next_run = v.next_runs[0].strftime("%Y-%m-%d %H:%M:%S") if v.next_runs and not v.paused else "-"
        targets = ", ".join(v.target_ids) or "(all)"
        rows.append((v, state, next_run, targets))
    if console.width >= TABLE_MIN_WIDTH:
        table = operator_table(
            "id",
            "cron",
            "zone",
            "targets",
            "state",
            "next run (UTC)",
            "runs",
            "missed",
            "skipped",
            title="curaflow schedules",
        )
        for v, state, next_run, targets in rows:
            table.add_row(
                v.schedule_id,
                " | ".join(v.cron),
                v.timezone,
                targets,
                state,
                next_run,
                str(v.actions),
                str(v.missed_catchup),
                str(v.skipped_overlap),
            )
        console.print(table)
        return
    for n, (v, state, next_run, targets) in enumerate(rows):
        if n:
            console.print()
        lines = [
            f"{v.schedule_id}  {state}",
            f"  cron     {' | '.join(v.cron)}  ({v.timezone})",
            f"  targets  {targets}",
            f"  next     {next_run}{' UTC' if next_run != '-' else ''}",
            f"  runs     {v.actions}   missed {v.missed_catchup}   skipped {v.skipped_overlap}",
        ]
        console.print("\n".join(lines), markup=False, highlight=False)


@app.command()
def trigger(
    schedule_id: str = typer.Argument(..., help="Plan id."),
    as_json: bool = typer.Option(False, "--json", help="JSON output: {schedule_id, job_id, scheduled_at}."),
    config: Path | None = ConfigOption,
) -> None:
    """Start an occurrence now and print its job id (``<id>@<today>T<HHMM><±hhmm>``: the
    plan's local time and UTC offset; a second trigger in the same minute converges on the
    same job, and one whose minute already has a job of the plan — admitted under the
    plan's former zone or a legacy id — prints that job's id)."""
    settings = settings_or_exit(config)

    async def triggered(client: Client) -> plans.Triggered | None:
        async with ledger_pool(settings) as pool:
            return await plans.trigger(client, schedule_id, task_queue=settings.temporal.task_queue, pool=pool)

    started = _run(settings, triggered)
    if started is None:
        message = (
            f"triggered {schedule_id}; Temporal started no occurrence yet "
            "(overlap policy skip: the previous occurrence may still run — see `curaflow schedules list`)"
        )
        if as_json:
            print_json({"schedule_id": schedule_id, "job_id": None, "scheduled_at": None})
            err_console.print(message)
        else:
            out_console.print(message)
        return
    if as_json:
        print_json(
            {"schedule_id": schedule_id, "job_id": started.job_id, "scheduled_at": started.scheduled_at.isoformat()}
        )
    else:
        out_console.print(f"triggered {schedule_id}: job {started.job_id}", highlight=False)


@app.command()
def pause(
    schedule_id: str = typer.Argument(..., help="Plan id."),
    note: str = typer.Option("paused by curaflow schedules pause", help="Why (shown in the UI)."),
    config: Path | None = ConfigOption,
) -> None:
    """Pause a plan (occurrences while paused are not run; `sync` restores the configured state)."""
    settings = settings_or_exit(config)
    _run(settings, lambda c: plans.pause(c, schedule_id, note, task_queue=settings.temporal.task_queue))
    out_console.print(f"paused {schedule_id}")


@app.command()
def unpause(
    schedule_id: str = typer.Argument(..., help="Plan id."),
    note: str = typer.Option("unpaused by curaflow schedules unpause", help="Why (shown in the UI)."),
    config: Path | None = ConfigOption,
) -> None:
    """Unpause a plan."""
    settings = settings_or_exit(config)
    _run(settings, lambda c: plans.unpause(c, schedule_id, note, task_queue=settings.temporal.task_queue))
    out_console.print(f"unpaused {schedule_id}")


@app.command()
def misses(
    schedule_id: str | None = typer.Argument(None, help="Plan id (omit: every plan)."),
    limit: int = typer.Option(50, "--limit", min=1, help="At most this many, newest first."),
    as_json: bool = typer.Option(False, "--json", help="JSON rows: {schedule_id, nominal_at, why, recorded_at}."),
    config: Path | None = ConfigOption,
) -> None:
    """The occurrences a plan did not run, by nominal time (UTC) and cause: `skipped_overlap`
    (a job of the plan was still running), `skipped_outage` (none was: Temporal or the
    workers were down), `missed_catchup_window` (more than 90 min late), `configuration_error`
    (started, but the worker that admitted it has none of its targets), `not_admitted`
    (started, but its occurrence closed before its job was admitted: timed out waiting for
    a worker or the ledger, terminated or cancelled by hand). Read from the
    ledger, where the workers' schedule watch records them."""
    settings = settings_or_exit(config)
    configure_logging("WARNING", settings.observability.log_json)

    async def main() -> list[plans.RecordedMiss]:
        async with ledger_pool(settings) as pool:
            return await plans.list_misses(pool, schedule_id, limit)

    rows = asyncio.run(main())
    if as_json:
        out = [
            {
                "schedule_id": r.schedule_id,
                "nominal_at": _iso(r.nominal_at),
                "why": r.why,
                "recorded_at": _iso(r.recorded_at),
            }
            for r in rows
        ]
        print_json(out, indent=2)
        return
    print_misses(rows)


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def print_misses(rows: list[plans.RecordedMiss]) -> None:
    """``schedules misses``'s table on stdout (times UTC)."""
    table = operator_table("plan", "nominal time (UTC)", "why", "recorded", title="occurrences not run")
    for r in rows:
        table.add_row(r.schedule_id, _iso(r.nominal_at), r.why, _iso(r.recorded_at))
    out_console.print(table)

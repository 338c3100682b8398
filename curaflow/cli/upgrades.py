"""``curaflow upgrade-check``: can the frozen core v1 orchestration be retired?

Lists the ``JobWorkflow`` executions whose history holds neither a ``core-v2`` nor a ``core-v3`` marker
(:mod:`curaflow.temporal.upgrades`). Exit status: 0 when there is none (``job_v1`` and the ``search``
/ ``fetch`` registrations may go), 1 when some remain (listed), 2 for a usage error
(no ``TEMPORAL_ADDRESS``, a start time that is not ISO 8601); a Temporal that is
unreachable, refuses the connection or the request (an unknown namespace) is one line on
stderr and exit status 1.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

import typer

from curaflow.cli.common import (
    ConfigOption,
    err_console,
    error,
    out_console,
    settings_or_exit,
    temporal_errors,
    temporal_where,
)
from curaflow.observability.logs import configure_logging


def upgrade_check(
    started_before: str | None = typer.Option(
        None,
        "--started-before",
        help="Only executions started before this ISO 8601 time (UTC when no offset): the core v2 rollout.",
    ),
    include_closed: bool = typer.Option(
        False, "--include-closed", help="Also closed executions still within the namespace's retention."
    ),
    as_json: bool = typer.Option(False, "--json", help="JSON output: the query and the executions found."),
    config: Path | None = ConfigOption,
) -> None:
    """Answer "can job_v1 be retired?": list executions that may still replay core v1.

    Exit 0 when none is open (nor closed, with `--include-closed`), 1 otherwise.
    """
    from curaflow.temporal.connection import connect_configured
    from curaflow.temporal.upgrades import legacy_executions, legacy_query

    settings = settings_or_exit(config)
    if not settings.temporal.address:
        err_console.print("[red]set TEMPORAL_ADDRESS (or temporal.address)[/red]")
        raise typer.Exit(2)
    before = None
    if started_before is not None:
        try:
            before = datetime.fromisoformat(started_before)
        except ValueError:
            error(f"--started-before: not an ISO 8601 time: {started_before!r}")
            raise typer.Exit(2) from None
        before = before if before.tzinfo is not None else before.replace(tzinfo=UTC)
        before = before.astimezone(UTC)
    configure_logging("WARNING", settings.observability.log_json)

    async def main() -> list[dict[str, str]]:
        client = await connect_configured(settings.temporal)
        found = await legacy_executions(client, started_before=before, include_closed=include_closed)
        return [
            {
                "workflow_id": e.workflow_id,
                "run_id": e.run_id,
                "status": e.status,
                "start_time": e.start_time.isoformat(),
            }
            for e in found
        ]

    with temporal_errors(temporal_where(settings)):
        found = asyncio.run(main())
    query = legacy_query(started_before=before, include_closed=include_closed)
    if as_json:
        print(json.dumps({"query": query, "retirable": not found, "executions": found}, indent=2))
    elif not found:
        out_console.print(
            f"job_v1 can be retired: no execution without a core-v2 or core-v3 marker ({query})", highlight=False
        )
    else:
        out_console.print(
            f"job_v1 cannot be retired: {len(found)} execution(s) may replay it ({query})", highlight=False
        )
        for e in found:
            out_console.print(
                f"  {e['workflow_id']} {e['run_id']} {e['status']} started {e['start_time']}", highlight=False
            )
    raise typer.Exit(1 if found else 0)

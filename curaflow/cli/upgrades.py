"""``curaflow upgrade-check``: can the frozen core v1 orchestration be retired?

Lists the ``JobWorkflow`` executions whose history holds neither a ``core-v2`` nor a ``core-v3`` marker
(:mod:`curaflow.temporal.upgrades`). Exit status: 0 when there is none (``job_v1`` and the ``search``
/ ``fetch`` registrations may go), 1 when some remain (listed), 2 for a usage error
(no ``TEMPORAL_ADDRESS``, a start time that is not ISO 8601); a Temporal that is
unreachable, refuses the connection or the request (an unknown namespace) is one line on
stderr and exit status 1.

The answer is only about the namespace curaflow's jobs run in: a namespace without
curaflow's search attributes, or — when the ledger is configured (``DATABASE_URL`` /
``database.url``) — one that holds no execution of the ledger's jobs while the ledger
holds a job whose execution it would still list (open, or ended within the namespace's
retention), is not answered: one line on stderr naming it, exit status 1, as for a
namespace that does not exist (until 2026-12-05 such a namespace answered "job_v1 can be
retired", exit 0). A configured ledger that cannot be reached is one line and exit 1.
Nor is a list of more executions than it examines (10 000, one history read each):
one line saying how many it examined and to narrow the list with ``--started-before``,
exit status 1 (:class:`curaflow.temporal.upgrades.ListingCut`; until 2026-12-05 the rest
went unexamined and the answer could be "can be retired").
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import typer
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client

from curaflow.cli.common import (
    LEDGER_CONFIGURED,
    ConfigOption,
    error,
    fail,
    open_ledger,
    out_console,
    running_dev_ledger,
    settings_or_exit,
    temporal_errors,
    temporal_service_or_exit,
)
from curaflow.config import Settings
from curaflow.observability.console import print_json
from curaflow.observability.logs import configure_logging
from curaflow.temporal.connection import describe_service


async def not_the_jobs_namespace(settings: Settings, client: Client, *, dev_ledger: str | None = None) -> str | None:
    """Why the client's namespace cannot be the one curaflow's jobs run in, or None.

    Two witnesses, the first always, the second when the ledger is configured — or, for
    the running ``curaflow dev``'s Temporal, its ledger (``dev_ledger``, a PostgreSQL URL):

    * curaflow's search attributes (:func:`curaflow.temporal.upgrades.missing_search_attributes`):
      every worker registers them in its namespace at start;
    * the ledger (:func:`curaflow.ledger.reconciler.namespace_holds_jobs`): while it
      holds a job whose workflow started and that is open or ended within the namespace's
      retention, the jobs' namespace lists an execution of one of its jobs.

    Raises:
        temporalio.service.RPCError: Temporal refused a request.
        typer.Exit: 1, the configured ledger could not be reached (one line).
    """
    from curaflow.ledger.db import now_ms
    from curaflow.ledger.reconciler import namespace_holds_jobs
    from curaflow.temporal.upgrades import missing_search_attributes

    namespace = client.namespace
    missing = await missing_search_attributes(client)
    if missing:
        return (
            f"namespace {namespace!r} lacks curaflow's search attributes {missing}: curaflow's jobs never ran "
            "there (a worker registers them at start), so its executions say nothing about job_v1; "
            "set TEMPORAL_NAMESPACE (temporal.namespace) to the jobs' namespace"
        )
    url, where = (settings.database.url, LEDGER_CONFIGURED) if settings.database.url else (dev_ledger, "")
    if not url:
        return None
    where = where or running_dev_ledger(settings)
    described = await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=namespace))
    ttl = described.config.workflow_execution_retention_ttl.ToTimedelta()
    since = now_ms() - int(ttl.total_seconds() * 1000)
    ledger = open_ledger(settings, url, where=where, code=1)
    async with ledger as pool, pool.acquire() as conn:
        listed = await conn.fetchval(
            """SELECT EXISTS (SELECT 1 FROM jobs
                              WHERE COALESCE(workflow_started_at, started_at) IS NOT NULL
                                AND (completed_at IS NULL OR completed_at > $1))""",
            since,
        )
        if not listed or await namespace_holds_jobs(conn, client, {}):
            return None
    return (
        f"namespace {namespace!r} holds none of the ledger's jobs ({where}), though the ledger "
        "has jobs it would list: it is not the namespace they run in, and its executions say nothing "
        "about job_v1; set TEMPORAL_NAMESPACE (temporal.namespace) to the jobs' namespace"
    )


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
    from curaflow.temporal import upgrades
    from curaflow.temporal.connection import connect, connect_configured
    from curaflow.temporal.upgrades import ListingCut, legacy_query

    settings = settings_or_exit(config)
    service = temporal_service_or_exit(settings)  # the configured service or the running `curaflow dev`'s; else exit 2
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
        if service.configured:
            client = await connect_configured(settings.temporal)
        else:  # a `curaflow dev` stack is plain
            client = await connect(service.address, settings.temporal.namespace)
        if (problem := await not_the_jobs_namespace(settings, client, dev_ledger=service.database_url)) is not None:
            fail(problem)
        try:
            found = await upgrades.legacy_executions(client, started_before=before, include_closed=include_closed)
        except ListingCut as cut:
            query = legacy_query(started_before=before, include_closed=include_closed)
            fail(
                f"job_v1: no answer — more than {cut.examined} executions match ({query}); examined "
                f"{cut.examined}, {len(cut.found)} of them may replay it: narrow the list with "
                "--started-before (when the first core v2 worker served the task queue)"
            )
        return [
            {
                "workflow_id": e.workflow_id,
                "run_id": e.run_id,
                "status": e.status,
                "start_time": e.start_time.isoformat(),
            }
            for e in found
        ]

    with temporal_errors(describe_service(service.address, settings.temporal.namespace)):
        found = asyncio.run(main())
    query = legacy_query(started_before=before, include_closed=include_closed)
    if as_json:
        print_json({"query": query, "retirable": not found, "executions": found}, indent=2)
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

"""``curaflow run``: submit one candidate_search job and follow it to its outcome.

The job goes through the same admission code as ``POST /jobs``
(:class:`curaflow.jobs.admission.Admitter`). Progress per cell is shown live on stderr; the
outcome is printed at the end (``--json``: the outcome record with the protocol job
under ``job`` and where each delivery landed under ``deliveries``, on stdout). A refusal
that needs no service (an unknown target, invalid tags; a route or source of the target
that the workers of a running ``curaflow dev`` do not know: :func:`running_dev_lacks`)
comes before the embedded stack starts or anything is admitted. Exit status: 0 when the
job succeeded, 1 otherwise, 2 for usage or configuration errors and when the embedded
stack cannot start (another command holding this state directory's among them:
:class:`~curaflow.devstack.stack.StackBusy`).
"""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import typer
from rich.console import Console, Group
from rich.live import Live
from rich.text import Text
from temporalio.api.workflowservice.v1 import DescribeWorkflowExecutionResponse
from temporalio.client import Client, RPCTimeoutOrCancelledError
from temporalio.service import RPCError

from curaflow.cli.common import (
    ConfigOption,
    err_console,
    error,
    operator_table,
    out_console,
    services,
    settings_or_exit,
    warning,
)
from curaflow.cli.pixiv import describe_source
from curaflow.config import Settings
from curaflow.config.targets import TargetConfig
from curaflow.devstack.stack import read_stack_info
from curaflow.domain.models import JobRecord
from curaflow.jobs.admission import Admitter, check_task_against, resolve_target
from curaflow.ledger.records import load_job
from curaflow.observability.console import print_json
from curaflow.observability.logs import configure_logging
from curaflow.protocol.errors import ProtocolError
from curaflow.protocol.projection import project_job
from curaflow.protocol.task import validate_task

POLL_S = 0.2
#: The fewest seconds between two questions to Temporal about the job's steps
#: (:func:`retrying_steps`): at most one per refresh of the table, and not one every
#: :data:`POLL_S` — a step's retry waits a second or more.
RETRY_ASK_S = 1.0
#: The longest wait, in seconds, for Temporal's answer about the job's steps: a
#: Temporal slow to answer delays the table's next refresh by at most this much.
RETRY_ASK_TIMEOUT_S = 2.0


@contextmanager
def live_progress(console: Console, *, transient: bool) -> Iterator[Live]:
    """The live display of the job's progress on ``console`` (``transient``: erased at the
    end, as under ``--json``), ending its line whatever ``console`` writes to.

    Rich ends a live display with a newline on a terminal only: into a file or a pipe (a CI
    log, ``2>&1 | tee``) the next line was glued to the table's last one
    (``└──┘gave up waiting after 15s``).
    """
    with Live(console=console, refresh_per_second=8, transient=transient) as live:
        yield live
    if not transient and not console.is_terminal:
        console.line()


def retrying_steps(description: DescribeWorkflowExecutionResponse) -> list[str]:
    """One line per step of the job that failed an attempt and is being retried, from
    Temporal's description of the job's workflow (``pending_activities``): ``retrying
    <step> (attempt <n>): <reason>: <message>`` — the step's activity name, the attempt
    Temporal runs or waits to run (``attempt``, 1 for the first), and the last failure as
    the activity reported it (``last_failure``: an ``ApplicationError``'s type, the reason
    code of :mod:`activities.errors`, then its message; a timeout's message alone). No
    line for a step on its first attempt or without a failure.

    Each line is one line (a message's line breaks and runs of blanks are one space) and
    plain text: the console that prints it masks the secrets the process holds and reads
    no markup (:func:`~curaflow.observability.console.text_console`). Until 2026-12-07 a
    job whose source could not be reached sat at ``queued (searching)`` with an empty
    reason column, the failure in the worker's log only (a newcomer's finding).
    """
    lines: list[str] = []
    for pending in description.pending_activities:
        if pending.attempt < 2 or not pending.HasField("last_failure"):
            continue
        failure = pending.last_failure
        reason = failure.application_failure_info.type if failure.HasField("application_failure_info") else ""
        message = " ".join(failure.message.split()) or "no message"
        step = pending.activity_type.name or pending.activity_id
        lines.append(f"retrying {step} (attempt {pending.attempt}): " + (f"{reason}: {message}" if reason else message))
    return lines


async def ask_retrying_steps(client: Client, job_id: str) -> list[str] | None:
    """:func:`retrying_steps` of the job's workflow (its id is the job's), or None when
    Temporal did not answer within :data:`RETRY_ASK_TIMEOUT_S` or refused (no execution
    yet, an outage): the table then shows what it showed before, and the run goes on."""
    try:
        described = await client.get_workflow_handle(job_id).describe(
            rpc_timeout=timedelta(seconds=RETRY_ASK_TIMEOUT_S)
        )
    except (RPCError, RPCTimeoutOrCancelledError):
        return None
    return retrying_steps(described.raw_description)


def progress_table(record: JobRecord, job: dict[str, Any], retrying: list[str] | None = None) -> Group:
    """The job's id on a line of its own (whole, never wrapped into the table's title),
    then a rich table of its cells (target, state, stage, work, reason) titled with its
    status and stage, then ``retrying``'s lines (:func:`retrying_steps`: a step failing
    and retried, why), each whole. Every value is text, never markup."""
    table = operator_table(
        "target",
        "state",
        "stage",
        "work",
        "reason",
        title=Text(f"{job['status']} ({job['progress']['stage']})"),
        expand=False,
    )
    for cell in record.cells:
        table.add_row(
            *(Text(v) for v in (cell.target_id, str(cell.state), cell.stage, cell.work_id or "", cell.reason or ""))
        )
    below = [Text(line, style="yellow", overflow="fold") for line in retrying or ()]
    return Group(Text(f"job {record.job_id}", overflow="fold"), table, *below)


def print_refusal(err: ProtocolError) -> None:
    """Print an admission refusal on stderr as one line (:func:`~curaflow.cli.common.error`):
    ``refused: <code>: <message> (key: value, …)``."""
    detail = ", ".join(
        f"{key}: {', '.join(map(str, value)) if isinstance(value, list | tuple) else value}"
        for key, value in (err.detail or {}).items()
    )
    error(f"refused: {err.code}: {err.message}" + (f" ({detail})" if detail else ""))


def print_summary(result: dict[str, Any], record: JobRecord) -> None:
    """Print the outcome for a person on stdout: the job and its status, the business
    status, each cell's work and each route's delivery and where it landed, the error.
    Every value is printed as it is, never as markup: a job id or key, a route's name, a
    directory's path or a third party's message may hold square brackets (``k[b]`` was
    printed ``k``, ``[b]`` taken for bold)."""
    job = result["job"]
    out_console.print(Text.assemble("job ", (job["job_id"], "bold"), ": ", (job["status"], "bold")), soft_wrap=True)
    lines: list[str] = []
    if "business_status" in result:
        lines.append(f"business status: {result['business_status']} — {result['user_message']['en']}")
    for cell in record.cells:
        if cell.work_id:
            lines.append(f"target {cell.target_id}: work {cell.work_id} {cell.state}")
        for landed in (d for d in result["deliveries"] if d["target_id"] == cell.target_id):
            where = f" → {landed['location']}" if landed["location"] else ""
            lines.append(f"  {landed['route']}: {landed['status']}{where}")
    if job.get("error"):
        lines.append(f"error: {job['error']['code']} — {job['error'].get('message', '')}")
    for line in lines:
        out_console.print(line, markup=False, highlight=False, soft_wrap=True)


def deliveries(settings: Settings, record: JobRecord) -> list[dict[str, Any]]:
    """Where each delivery landed: one entry per (cell, route) with its ledger status.

    ``location`` is the directory of the work for a ``directory`` route (the manifest's
    folder), else the id the destination returned (message id, receiver's id), or None.
    """
    landed: list[dict[str, Any]] = []
    for cell in record.cells:
        for delivery in cell.deliveries:
            route = settings.routes.get(delivery.route)
            kind = route.kind if route is not None else None
            location: str | None = delivery.remote_id
            if kind == "directory" and delivery.remote_id:
                location = str(Path(delivery.remote_id).parent)
            landed.append(
                {
                    "target_id": cell.target_id,
                    "work_id": cell.work_id,
                    "route": delivery.route,
                    "kind": kind,
                    "status": delivery.status,
                    "remote_id": delivery.remote_id,
                    "location": location,
                }
            )
    return landed


def pick_target(settings: Settings, target: str | None) -> str:
    """The target to run: ``--target`` or the single target that accepts jobs."""
    if target:
        return target
    eligible = [t.id for t in settings.targets if t.accept_jobs]
    if not eligible:
        error("no configured target accepts jobs: every one has accept_jobs = false")
        raise typer.Exit(2)
    if len(eligible) > 1:
        error(f"several targets accept jobs ({', '.join(eligible)}); choose one with --target")
        raise typer.Exit(2)
    return eligible[0]


def running_dev_lacks(settings: Settings, target: TargetConfig) -> str | None:
    """Why the workers of the ``curaflow dev`` running in this state directory could not run
    ``target``'s job, or None (no such stack, services configured, or nothing lacking).

    Those workers keep the configuration they started with (``stack.json``'s ``routes`` and
    ``sources``, :func:`curaflow.devstack.stack.workers_know`), and ``curaflow run`` admits
    with its own: a route of the target they do not know (or know as another kind) or its
    source instance made every step retry ``configuration_mismatch`` on them until the
    job's deadline (2026-12-07, a newcomer's finding: the README's Telegram step with the
    replay's ``curaflow dev`` still up). A ``stack.json`` that does not say (written before
    these fields) is not judged.
    """
    if not settings.embedded:
        return None
    info = read_stack_info(settings.state_dir)
    if info is None or info.routes is None or info.sources is None:
        return None
    lacking = [] if target.account in info.sources else [f"source {target.account!r}"]
    for name in target.routes:
        kind, theirs = settings.routes[name].kind, info.routes.get(name)
        if theirs is None:
            lacking.append(f"route {name!r}")
        elif theirs != kind:
            lacking.append(f"route {name!r} as a {kind} route (theirs: {theirs})")
    if not lacking:
        return None
    return (
        f"the curaflow dev running in this directory (pid {info.pid}) started without {', '.join(lacking)} "
        f"of target {target.id!r}: its workers keep the configuration they started with, so this job would "
        "retry configuration_mismatch until its deadline. Stop it (Ctrl-C) and run this again, or restart "
        "it with this configuration (curaflow dev --config FILE, the same environment)"
    )


async def run_job(
    settings: Settings, tags: list[str], target: str | None, key: str | None, as_json: bool, timeout_s: float
) -> int:
    """Admit the job, follow it and print the outcome; returns the exit status."""
    target_id = pick_target(settings, target)
    params: dict[str, Any] = {"target_id": target_id}
    if tags:
        params["query"] = {"tags": tags}
    body = {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": key or f"cli-{uuid.uuid4()}",
        "params": params,
    }
    try:  # what needs no service is refused before any service starts
        task = validate_task(body)
        resolved = resolve_target(settings, task)
        check_task_against(settings, resolved, task)
    except ProtocolError as err:
        print_refusal(err)
        if (err.detail or {}).get("reason") == "unknown_target":
            known = ", ".join(t.id for t in settings.targets) or "none"
            error(
                f"configured targets: {known} (--target takes one of them; add others as [[targets]] of --config FILE)"
            )
        return 2
    lacks = running_dev_lacks(settings, resolved)
    if lacks is not None:
        error(lacks)
        return 2
    err_console.print(describe_source(settings, resolved.account), markup=False, highlight=False, soft_wrap=True)
    async with services(settings) as svc:
        try:
            admission = await Admitter(svc.settings, svc.pool, svc.client).admit(body, trigger="cli")
        except ProtocolError as err:
            print_refusal(err)
            return 2
        deadline = time.monotonic() + timeout_s
        record: JobRecord | None = None
        retrying: list[str] = []
        asked_at = -RETRY_ASK_S
        with live_progress(err_console, transient=as_json) as live:
            while True:
                async with svc.pool.acquire() as conn:
                    record = await load_job(conn, admission.job_id)
                assert record is not None
                job = project_job(record)
                if record.completed_at is not None:
                    retrying = []
                elif time.monotonic() - asked_at >= RETRY_ASK_S:  # at most once per refresh
                    asked_at = time.monotonic()
                    answer = await ask_retrying_steps(svc.client, admission.job_id)
                    retrying = retrying if answer is None else answer
                live.update(progress_table(record, job, retrying))
                if record.completed_at is not None or time.monotonic() > deadline:
                    break
                if svc.stack is not None and not any(w.alive() for w in svc.stack.workers):
                    break  # nobody left to run the job: say so instead of waiting out --timeout
                await asyncio.sleep(POLL_S)
        assert record is not None
        job = project_job(record)
        outcome = await svc.pool.fetchval("SELECT record FROM outcomes WHERE job_id = $1", admission.job_id)
        own_stack = svc.stack is not None  # stopped on return: nothing runs the job until the next start
        dead_worker = (
            svc.stack.workers[0].log_file
            if svc.stack is not None and not any(w.alive() for w in svc.stack.workers)
            else None
        )
    result = dict(outcome or {"job_id": admission.job_id, "status": "pending"})
    result["job"] = job
    result["deliveries"] = deliveries(settings, record)
    if as_json:
        print_json(result, ensure_ascii=False, indent=2)  # as rich wrote it, never folded, masked
    else:
        print_summary(result, record)
    if record.completed_at is None:
        if dead_worker is not None:
            error(f"the embedded worker exited; its log ({dead_worker}) ends with:")
            for line in dead_worker.read_text(errors="replace").splitlines()[-15:]:
                err_console.print(line, markup=False, highlight=False, soft_wrap=True)  # a log line stays whole
            warning("the job continues on the next stack start")
            return 1
        where = " on the next stack start (`curaflow run` or `curaflow dev` here)" if own_stack else ""
        warning(f"gave up waiting after {timeout_s:g}s; the job continues{where}")
        return 1
    return 0 if job["status"] == "succeeded" else 1


def run(
    tags: list[str] = typer.Option([], "--tags", "-t", help="Tag to search for (repeat for several; AND)."),
    target: str | None = typer.Option(None, "--target", help="Configured target id (default: the only one)."),
    as_json: bool = typer.Option(False, "--json", help="Print the outcome record as JSON."),
    key: str | None = typer.Option(None, "--idempotency-key", help="Idempotency key (default: a new one)."),
    timeout: float = typer.Option(
        900.0,
        min=1.0,
        help="Seconds to wait for the job to finish (at least 1); the job itself goes on.",
    ),
    config: Path | None = ConfigOption,
) -> None:
    """Run one candidate_search job to its outcome (starts the embedded stack if needed)."""
    settings = settings_or_exit(config)
    configure_logging("WARNING", settings.observability.log_json)
    # SIGTERM behaves like Ctrl-C: the embedded stack is torn down before exiting.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        code = asyncio.run(run_job(settings, tags, target, key, as_json, timeout))
    except KeyboardInterrupt:
        warning("interrupted; the job continues on the next stack start")
        code = 130
    raise typer.Exit(code)

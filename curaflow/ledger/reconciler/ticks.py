"""The reconciler's tick: the five rules over open jobs under the advisory lock, and the
supervised loop that runs it.

See :mod:`curaflow.ledger.reconciler`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import asyncpg
from temporalio.client import Client
from temporalio.service import RPCError

from curaflow.domain.holds import HoldCaps
from curaflow.domain.verdicts import FinishCause, PendingStep, budget_cause
from curaflow.ledger.db import DB_NOW_MS, LEADER_IDLE_MS, now_ms, session_lock
from curaflow.ledger.jobs import mark_workflow_started
from curaflow.ledger.reconciler.convergence import (
    CANCEL_GRACE_MS,
    NO_LIVE_ATTEMPT,
    _finish,
    attempt_live,
    converge_unserved_cancel,
)
from curaflow.ledger.reconciler.executions import (
    FOREIGN_QUEUE_WAIT_MS,
    Execution,
    _closed_executions,
    describe_execution,
    listed_executions,
    namespace_holds_jobs,
    open_job_run,
    unheld_runs_on_other_queues,
    unserved_foreign_run,
)
from curaflow.observability import metrics
from curaflow.observability.logs import get_logger
from curaflow.observability.supervision import Supervisor
from curaflow.temporal.answers import Refusals, status_name, temporal_outage
from curaflow.temporal.job_runs import JobIdHeld

LOCK_KEY = 0x63757261726563  # "curarec"
START_GRACE_MS = 5_000
#: The trigger of the jobs whose ``workflow_started_at`` is recorded before their execution
#: exists: a scheduled occurrence's, written by the trampoline's ``admit_occurrence``
#: (:func:`curaflow.schedules.admit_occurrence`) so that rule 1 starts no second run, before
#: the trampoline starts the job as its child (:mod:`workflows.scheduled`). Until such a
#: job ran a step, Temporal's "not found" proves no deletion (:func:`_deleted_executions`).
STARTED_BEFORE_ITS_EXECUTION = "schedule"
#: After its deadline, a job no live attempt holds is the reconciler's: the workflow's own
#: timer normally ends it within moments, so this only acts when no worker runs it.
DEADLINE_GRACE_MS = 10_000


log = get_logger("curaflow.reconciler")

StartHook = Callable[[str], Awaitable[None]]
T = TypeVar("T")


@dataclass
class TickReport:
    """What one tick did (job ids per rule).

    ``recorded``: jobs whose start the ledger lacked while their run was open (rule 1: a
    schedule's occurrence), recorded as started, not started again;
    ``deleted``: jobs ended because Temporal knows no execution under their id (rule 4);
    ``unconfirmed``: jobs whose execution was not found in a namespace that holds none of
    this ledger's jobs — not ended (:func:`~curaflow.ledger.reconciler.executions.namespace_holds_jobs`);
    ``deadline``: jobs ended at their deadline, ``execution_timeout`` — or
    ``pinned_build_unserved``, their execution pinned to a build no worker of which took its
    workflow task since before the deadline (rule 5).
    """

    started: list[str] = field(default_factory=list)
    recorded: list[str] = field(default_factory=list)
    closed: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unconfirmed: list[str] = field(default_factory=list)
    queued_too_long: list[str] = field(default_factory=list)
    stalled: list[str] = field(default_factory=list)
    deadline: list[str] = field(default_factory=list)


async def served_queues(conn: asyncpg.Connection) -> set[str]:
    """Source task queues a live worker process serves now: the lease row is unexpired
    (database clock) and its owner's connection is still there (one statement)."""
    rows = await conn.fetch(
        f"""SELECT task_queue FROM source_queue_leases l WHERE l.expires_at > {DB_NOW_MS}
            AND EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = l.backend_pid)"""
    )
    return {r["task_queue"] for r in rows}


_BUDGET = "(workflow_input->'budgets'->>'{name}')::bigint"
_LIVE = NO_LIVE_ATTEMPT


async def tick(
    pool: asyncpg.Pool,
    start: StartHook | None,
    client: Client | None = None,
    *,
    limit: int = 100,
    caps: HoldCaps | None = None,
    task_queue: str | None = None,
    foreign_queue_wait_ms: int = FOREIGN_QUEUE_WAIT_MS,
) -> TickReport:
    """Run one reconciliation pass; returns an empty report if another process holds the lock.

    The lock is held for this pass only, and its session is bounded: a process that
    hangs holding it loses it after :data:`~curaflow.ledger.db.LEADER_IDLE_MS` without a
    statement (:func:`~curaflow.ledger.db.session_lock`'s ``idle_timeout_ms``).

    Args:
        pool: ledger pool.
        start: starts a job's workflow (None: rule 1 is skipped).
        client: Temporal client (None: rules 2–4 are skipped and rule 5 trusts the budgets).
        limit: most jobs per rule.
        caps: the instance's cooldown caps, for the holds a finish names
            (:func:`curaflow.ledger.finish.hold_caps`; None: cooldowns as stored).
        task_queue: curaflow's main task queue (``temporal.task_queue``), where its jobs'
            runs belong (None: a job attached to a run on another queue is not looked for,
            :func:`_foreign_queue_runs`).
        foreign_queue_wait_ms: the setting ``foreign_queue_wait_ms``: how long a run on
            another queue waits unserved before :func:`_foreign_queue_runs` takes it for
            one no worker will ever serve.

    Raises:
        asyncpg / Temporal errors: the caller's loop logs them and tries again next tick
            (a Temporal refusal of one job's request alone is not raised: that job is left
            for the tick, :func:`_asked`).
        curaflow.temporal.answers.EveryRequestRefused: Temporal refused every request of
            the tick about a job's execution, at least two jobs' and none answered — its
            outage (or its proxy's), raised once the tick's other work is done
            (:class:`curaflow.temporal.answers.Refusals`).
    """
    report = TickReport()
    async with session_lock(pool, LOCK_KEY, idle_timeout_ms=LEADER_IDLE_MS) as conn:
        if conn is None:
            return report
        refusals = Refusals()
        await _tick(conn, pool, start, client, limit, report, refusals, caps, task_queue, foreign_queue_wait_ms)
    outage = refusals.outage()
    if outage is not None:
        raise outage
    return report


async def _tick(
    conn: asyncpg.Connection,
    pool: asyncpg.Pool,
    start: StartHook | None,
    client: Client | None,
    limit: int,
    report: TickReport,
    refusals: Refusals,
    caps: HoldCaps | None = None,
    task_queue: str | None = None,
    foreign_queue_wait_ms: int = FOREIGN_QUEUE_WAIT_MS,
) -> None:
    # This process's clock, for Temporal's answers only (a close's time, a task's wait):
    # every ledger time is judged in SQL on the database's clock, the clock it was
    # written on (docs/DESIGN.md "Ledger times are the database's clock").
    now = now_ms()
    if start is not None:
        rows = await conn.fetch(
            f"""SELECT job_id FROM jobs j WHERE completed_at IS NULL AND workflow_started_at IS NULL
                AND created_at <= {DB_NOW_MS} - {START_GRACE_MS} ORDER BY created_at LIMIT {limit}"""
        )
        for r in rows:
            try:
                if client is not None and await open_job_run(client, r["job_id"]):
                    # A schedule's occurrence: its trampoline started the run and records
                    # no start (its admission is no start, schedules.admit): record it.
                    await mark_workflow_started(conn, r["job_id"])
                    report.recorded.append(r["job_id"])
                    continue
                await start(r["job_id"])
                report.started.append(r["job_id"])
                metrics.record_reconciler_start()
            except Exception as err:  # noqa: BLE001 - keep converging the others
                log.warning("reconciler.start_failed", job_id=r["job_id"], **_start_failure(err))

    seen: set[str] = set()
    if client is not None and start is not None and task_queue is not None:
        await _foreign_queue_runs(
            conn, client, start, task_queue, now, limit, report, seen, refusals, foreign_queue_wait_ms
        )
    if client is not None:
        # Visibility is asked only about jobs this rule could finish — open jobs no attempt
        # holds a live lease on —: the closed runs listed are only ever matched against
        # those. None: no list; up to `limit` of them: their ids in the query; more: every
        # run the query lists (2026-12-07; before, every tick listed every run closed within
        # CLOSED_WINDOW_MS without its job's status, whatever the ledger held: in the test
        # suite, where runs are terminated by the hundred, a tenth of a core of the dev
        # server for each process ticking every 500 ms).
        unleased = await _open_without_live_attempt(conn, limit + 1)
        closed = await _closed_executions(client, now, unleased if len(unleased) <= limit else None) if unleased else {}
        if closed:
            # Only once no attempt of the job holds a live lease: an attempt outlives a
            # terminate until its heartbeat hears of it, and a send already out finishes and
            # records what it did — converging before would report it ``unknown`` and let
            # the receipt contradict the outcome record afterwards.
            rows = await conn.fetch(
                f"""SELECT job_id, created_at, started_at FROM jobs j WHERE completed_at IS NULL
                    AND job_id = ANY($1::text[]) AND {_LIVE}""",
                list(closed),
            )
            for r in rows:
                if r["job_id"] in seen:
                    continue  # acted on this tick already (a run on another queue, terminated)
                _, closed_at = closed[r["job_id"]]
                if closed_at < r["created_at"]:
                    continue  # an earlier run under this id (a refused submission), not the job's
                # The latest run decides: a job may have been started again under its id.
                execution = await _asked(refusals, r["job_id"], "closed", describe_execution(client, r["job_id"], now))
                if execution is None:
                    continue  # Temporal refused this job's describe: next tick asks again
                if execution.no_verdict(r["created_at"], started=r["started_at"] is not None):
                    # The job's start attached to a run that then refused its own Task (or
                    # stopped before admitting it): nothing ran the job; or the run was refused
                    # as not the job's, whatever steps of the job it ran. Start it as rule 1
                    # does; the start frees the id of a run that held no job.
                    seen.add(r["job_id"])
                    if start is not None and await _start_again(start, r["job_id"]):
                        report.started.append(r["job_id"])
                    continue
                cause_now = execution.closed_cause_for(r["created_at"])
                if cause_now is None:
                    continue
                seen.add(r["job_id"])
                if await _finish(conn, r["job_id"], cause_now, caps, closed_at_ms=execution.closed_at_ms):
                    report.closed.append(r["job_id"])
        cancels = await conn.fetch(
            f"""SELECT job_id, created_at FROM jobs j WHERE completed_at IS NULL AND cancel_requested_at IS NOT NULL
                AND cancel_requested_at <= {DB_NOW_MS} - {CANCEL_GRACE_MS} AND {_LIVE}
                ORDER BY cancel_requested_at LIMIT {limit}"""
        )
        for r in cancels:
            if r["job_id"] in seen:
                continue
            seen.add(r["job_id"])
            unserved = converge_unserved_cancel(conn, client, r["job_id"], created_at=r["created_at"], caps=caps)
            if await _asked(refusals, r["job_id"], "cancel", unserved):
                report.cancelled.append(r["job_id"])
        await _deleted_executions(conn, client, now, limit, report, seen, refusals, caps)

    # The budgets are judged on the database's clock (docs/DESIGN.md "Ledger times are the
    # database's clock"): the heartbeats and the start they run from are that clock's.
    facts = (
        f"{DB_NOW_MS} AS db_now, job_id, created_at, started_at, deadline_at, "
        "COALESCE((SELECT max(heartbeat_at) FROM cells c WHERE c.job_id = j.job_id), started_at) AS last_progress, "
        f"{_BUDGET.format(name='queued_timeout_ms')} AS queued_budget, "
        f"{_BUDGET.format(name='stall_timeout_ms')} AS stall_budget"
    )
    overdue = await conn.fetch(
        f"""SELECT {facts} FROM jobs j WHERE completed_at IS NULL AND deadline_at IS NOT NULL
            AND deadline_at <= {DB_NOW_MS} - {DEADLINE_GRACE_MS} AND {_LIVE}
            ORDER BY created_at LIMIT {limit}"""
    )
    queued = await conn.fetch(
        f"""SELECT {facts} FROM jobs j WHERE completed_at IS NULL AND started_at IS NULL
            AND created_at <= {DB_NOW_MS} - {_BUDGET.format(name="queued_timeout_ms")} AND {_LIVE}
            ORDER BY created_at LIMIT {limit}"""
    )
    stalled = await conn.fetch(
        f"""SELECT {facts} FROM jobs j WHERE completed_at IS NULL AND started_at IS NOT NULL
            AND COALESCE((SELECT max(heartbeat_at) FROM cells c WHERE c.job_id = j.job_id), started_at)
                <= {DB_NOW_MS} - {_BUDGET.format(name="stall_timeout_ms")}
            AND {_LIVE} ORDER BY created_at LIMIT {limit}"""
    )
    buckets = {
        FinishCause.DEADLINE: report.deadline,
        FinishCause.PINNED_BUILD_UNSERVED: report.deadline,  # ended at its deadline, the pin named
        FinishCause.QUEUED_TOO_LONG: report.queued_too_long,
        FinishCause.STALLED: report.stalled,
    }
    served: set[str] | None = None
    for r in (*overdue, *queued, *stalled):
        job_id = r["job_id"]
        if job_id in seen:
            continue
        seen.add(job_id)
        pending: list[PendingStep] | None = None
        close_cause: FinishCause | None = None
        close_time: int | None = None
        described: Execution | None = None
        if client is not None:
            described = await _asked(refusals, job_id, "budgets", describe_execution(client, job_id, now))
            if described is None:
                continue  # Temporal refused this job's describe: nothing is inferred, next tick asks again
            never_held = described.no_verdict(r["created_at"], started=r["started_at"] is not None)
            # A run that never held the job is no verdict on it: its budgets decide.
            close_cause = None if never_held else described.closed_cause_for(r["created_at"])
            close_time = described.closed_at_ms if close_cause is not None else None
            if close_cause is None and described.exists:
                if served is None:
                    served = await served_queues(conn)
                pending = described.pending(served)
        # An open run pinned to a build whose workflow task waits for a worker of it: read from
        # the describe made above, nothing more is asked (the deadline's path is rare).
        pinned_since = described.pinned_unserved_since_ms if described is not None and close_cause is None else None
        ended = close_cause or budget_cause(
            now_ms=int(r["db_now"]),
            deadline_at_ms=r["deadline_at"],
            created_at_ms=r["created_at"],
            started_at_ms=r["started_at"],
            last_progress_ms=r["last_progress"],
            queued_budget_ms=_budget(r["queued_budget"]),
            stall_budget_ms=_budget(r["stall_budget"]),
            deadline_grace_ms=DEADLINE_GRACE_MS,
            pending=pending,
            pinned_unserved_since_ms=pinned_since,
        )
        if ended is None:
            continue  # a step is held, in its backoff or queued behind others: not stalled
        if ended == FinishCause.PINNED_BUILD_UNSERVED and described is not None and described.pinned is not None:
            # The build is the run's, not the job's: the reason's sentence cannot name it; the log does.
            log.warning(
                "reconciler.pinned_build_unserved",
                job_id=job_id,
                deployment_name=described.pinned.deployment_name,
                build_id=described.pinned.build_id,
                override=described.pinned.override,
                waiting_s=described.waiting_for_worker_ms // 1000,
            )
        if await _finish(conn, job_id, ended, caps, closed_at_ms=close_time):
            buckets.get(ended, report.closed).append(job_id)


async def _asked(refusals: Refusals, job_id: str, asking: str, call: Awaitable[T]) -> T | None:
    """``await call`` — Temporal asked about one job —, or None when Temporal refused that
    one request (:func:`curaflow.temporal.answers.refused_one_request`: an ``INTERNAL`` of an
    execution it cannot read, a ``FAILED_PRECONDITION``, a run gone between a list and a
    read): logged ``reconciler.temporal_refused`` (``asking``: the rule), the job left as it
    is this tick — nothing inferred, no state changed — and asked again next tick; the
    other jobs go on. Any other error — an outage, this process's access, the namespace's —
    is raised: the tick fails and the loop retries (2026-12-07: every error did, and one
    execution Temporal refused to describe stopped every job's reconciliation for as long
    as it lasted; ``tests/integration/test_temporal_answers.py``, failed first).

    Each answer and refusal is noted in the tick's ``refusals``
    (:class:`curaflow.temporal.answers.Refusals`), which reads a tick whose every such
    request was refused as Temporal's outage (:func:`tick` raises it)."""
    try:
        answer = await call
    except RPCError as err:
        if not refusals.refused(job_id, err):
            raise
        log.warning(
            "reconciler.temporal_refused", job_id=job_id, asking=asking, status=status_name(err), error=err.message
        )
        return None
    refusals.answered()
    return answer


async def _open_without_live_attempt(conn: asyncpg.Connection, most: int) -> list[str]:
    """Up to ``most`` open jobs (``completed_at IS NULL``) no attempt holds a live cell
    lease on (:data:`NO_LIVE_ATTEMPT`): the jobs rule 2 may finish (one statement)."""
    rows = await conn.fetch(f"SELECT job_id FROM jobs j WHERE completed_at IS NULL AND {_LIVE} LIMIT {int(most)}")
    return [r["job_id"] for r in rows]


async def _deleted_executions(
    conn: asyncpg.Connection,
    client: Client,
    now: int,
    limit: int,
    report: TickReport,
    seen: set[str],
    refusals: Refusals,
    caps: HoldCaps | None,
) -> None:
    """Rule 4: a started job whose execution Temporal does not know — an operator deleted
    it (``temporal workflow delete``, the UI) — ends ``execution_deleted``.

    Only on positive answers: the job's start was recorded (``workflow_started_at``: its
    execution existed — Temporal started it or it was already there) :data:`START_GRACE_MS`
    ago, whether or not it ran a step yet (2026-12-07: a job deleted while it waited for its
    first step — its account's queue busy — was left to its queued budget, which ended it
    ``queued_too_long``, alertable, blaming curaflow's workers), no consumer cancel is recorded
    (rule 3 owns those), visibility does not list any run under its id and a describe of
    the id answers Temporal's own ``NOT_FOUND`` of the execution
    (:func:`curaflow.temporal.answers.execution_not_found`; any other error — a namespace's
    ``NOT_FOUND`` among them — fails the tick: nothing is inferred from an outage, a timeout
    or a refusal), and the namespace holds this ledger's jobs at all
    (:func:`~curaflow.ledger.reconciler.executions.namespace_holds_jobs`: a process
    configured with another namespace ends nothing, its jobs go to
    ``report.unconfirmed``). And, as every convergence, once no attempt of the job holds
    a live lease (:data:`NO_LIVE_ATTEMPT`): a send out at the deletion lands and is
    recorded first. Two batches, each of at most ``limit`` jobs a tick (one
    ``ListWorkflowExecutions`` each, one describe per job it leaves out, at most one more
    list for the namespace's witness): the jobs that ran a step, whose last progress is
    oldest first, then the jobs that did not, whose start is oldest first — a backlog of
    queued jobs never takes the turn of the running ones.

    A scheduled occurrence that did not run a step is never a candidate
    (:data:`STARTED_BEFORE_ITS_EXECUTION`): its start is recorded by the trampoline's
    ``admit_occurrence`` before the trampoline starts its execution, so "not found" there
    is no deletion — the trampoline may be about to start it (2026-12-07: a trampoline
    whose worker stopped after the admit's commit had its job ended ``execution_deleted``
    :data:`START_GRACE_MS` later, and the job it then started found itself ended). Its
    queued budget decides, as before.
    """
    ran = await conn.fetch(
        f"""SELECT job_id FROM jobs j WHERE completed_at IS NULL AND started_at IS NOT NULL
            AND workflow_started_at IS NOT NULL AND workflow_started_at <= {DB_NOW_MS} - {START_GRACE_MS}
            AND cancel_requested_at IS NULL AND {_LIVE}
            ORDER BY COALESCE((SELECT max(heartbeat_at) FROM cells c WHERE c.job_id = j.job_id), started_at)
            LIMIT {limit}"""
    )
    waiting = await conn.fetch(
        f"""SELECT job_id FROM jobs j WHERE completed_at IS NULL AND started_at IS NULL
            AND workflow_started_at IS NOT NULL AND workflow_started_at <= {DB_NOW_MS} - {START_GRACE_MS}
            AND trigger <> '{STARTED_BEFORE_ITS_EXECUTION}'
            AND cancel_requested_at IS NULL AND {_LIVE}
            ORDER BY workflow_started_at LIMIT {limit}"""
    )
    for rows in (ran, waiting):
        await _deleted_among(
            conn, client, now, [r["job_id"] for r in rows if r["job_id"] not in seen], report, seen, refusals, caps
        )


async def _deleted_among(
    conn: asyncpg.Connection,
    client: Client,
    now: int,
    candidates: list[str],
    report: TickReport,
    seen: set[str],
    refusals: Refusals,
    caps: HoldCaps | None,
) -> None:
    """Rule 4 over one batch of candidates (:func:`_deleted_executions`)."""
    if not candidates:
        return
    listed = await listed_executions(client, candidates)
    missing: list[str] = []
    for job_id in candidates:
        if job_id in listed:
            continue
        described = await _asked(refusals, job_id, "deleted", describe_execution(client, job_id, now))
        if described is not None and not described.exists:
            missing.append(job_id)
    if not missing:
        return
    if not await namespace_holds_jobs(conn, client, listed):
        log.warning("reconciler.namespace_unconfirmed", namespace=client.namespace, not_found=len(missing))
        report.unconfirmed.extend(missing)
        return
    for job_id in missing:
        seen.add(job_id)
        if await attempt_live(conn, job_id):
            continue  # an attempt took a lease since: it is recorded first
        if await _finish(conn, job_id, FinishCause.DELETED, caps):
            report.deleted.append(job_id)


async def _foreign_queue_runs(
    conn: asyncpg.Connection,
    client: Client,
    start: StartHook,
    task_queue: str,
    now: int,
    limit: int,
    report: TickReport,
    seen: set[str],
    refusals: Refusals,
    wait_ms: int = FOREIGN_QUEUE_WAIT_MS,
) -> None:
    """A job whose start attached to a run no worker of curaflow will ever run is started
    on curaflow's own queue.

    A Temporal client's Task started under the job id on another task queue (a mistyped
    ``--task-queue``) holds the id while its first workflow task waits for a worker that
    never comes; a curaflow start of the same job — ``POST /jobs`` with the key — attaches
    to it (conflict policy ``USE_EXISTING``), and the job stayed ``queued`` until its queued
    budget ended it ``queued_too_long`` (2026-12-06). Recognised positively
    (:func:`~curaflow.ledger.reconciler.executions.unserved_foreign_run`: another queue, no
    job held, the workflow task waiting ``wait_ms`` — the setting ``foreign_queue_wait_ms``,
    default :data:`FOREIGN_QUEUE_WAIT_MS` —, no poller listed for
    its queue — a queue some worker polls is served, however slowly), that run — and only
    it, by its run id — is terminated with a reason naming both queues (what its starter
    reads in ``temporal workflow describe`` / the UI), and the job is started through rule
    1's start path, which frees the id of a run that held no job.

    Visibility is asked first, the ledger second, so that a backlog of queued jobs on
    curaflow's own queue hides none (2026-12-06; before, only the ``limit`` oldest queued
    jobs were asked about, and behind more of them — a burst, workers scaled down — a job
    attached to such a run stayed ``queued`` until the backlog drained or its queued
    budget ended it). When the ledger holds a candidate at all — a queued job (never
    started, its workflow start recorded, ``wait_ms`` old; one
    ``EXISTS``) — one ``ListWorkflowExecutions`` page lists the open job executions on
    other queues that hold no job
    (:func:`~curaflow.ledger.reconciler.executions.unheld_runs_on_other_queues`); of those,
    only ids the ledger holds as such queued jobs are kept (one statement, at most
    ``limit``, oldest first) and described, one describe each (and one
    ``DescribeTaskQueue`` for a run that waited long enough). A run of another workflow
    type, or under an id the ledger does not hold queued, is never touched.
    """
    if not await conn.fetchval(
        f"""SELECT EXISTS (SELECT 1 FROM jobs j WHERE completed_at IS NULL AND started_at IS NULL
            AND workflow_started_at IS NOT NULL AND created_at <= {DB_NOW_MS} - {int(wait_ms)})"""
    ):
        return
    listed = await unheld_runs_on_other_queues(client, task_queue)
    if not listed:
        return
    rows = await conn.fetch(
        f"""SELECT job_id FROM jobs j WHERE job_id = ANY($1::text[]) AND completed_at IS NULL
            AND started_at IS NULL AND workflow_started_at IS NOT NULL
            AND created_at <= {DB_NOW_MS} - {int(wait_ms)} ORDER BY created_at LIMIT {limit}""",
        listed,
    )
    for job_id in (r["job_id"] for r in rows):
        run = await _asked(
            refusals, job_id, "foreign_queue", unserved_foreign_run(client, job_id, task_queue, now, wait_ms=wait_ms)
        )
        if run is None:
            continue
        seen.add(job_id)
        reason = (
            f"curaflow: this run waited {run.waiting_ms // 1000} s on task queue {run.task_queue!r}, which no "
            f"worker polls, and held no job; job {job_id} runs on {task_queue!r} "
            "(docs/temporal.md, 'Starting jobs from a Temporal client')"
        )
        try:
            await client.get_workflow_handle(job_id, run_id=run.run_id).terminate(reason=reason)
        except Exception as err:  # noqa: BLE001 - closed meanwhile, or refused: next tick decides
            log.warning("reconciler.foreign_run_not_terminated", job_id=job_id, error=type(err).__name__)
            continue
        log.warning("reconciler.foreign_queue_run", job_id=job_id, task_queue=run.task_queue, run_id=run.run_id)
        if await _start_again(start, job_id, reason="run_on_another_queue"):
            report.started.append(job_id)


async def _start_again(start: StartHook, job_id: str, reason: str = "run_held_no_job") -> bool:
    """Start ``job_id`` through the start path of rule 1 (its stored ``JobInput``); a
    failure is logged and tried again next tick (the closed run stays listed for
    :data:`~curaflow.ledger.reconciler.executions.CLOSED_WINDOW_MS`)."""
    try:
        await start(job_id)
    except Exception as err:  # noqa: BLE001 - keep converging the others
        log.warning("reconciler.start_failed", job_id=job_id, **_start_failure(err))
        return False
    log.warning("reconciler.started_again", job_id=job_id, reason=reason)
    metrics.record_reconciler_start()
    return True


def _start_failure(err: Exception) -> dict[str, str]:
    """What ``reconciler.start_failed`` says of a start's failure: its type, and for a job
    id an open run of another workflow type holds (:class:`~curaflow.temporal.job_runs.JobIdHeld`)
    that run's type and id — the job starts once it closes."""
    if isinstance(err, JobIdHeld):
        return {"error": type(err).__name__, "held_by": err.workflow_type, "run_id": err.run_id}
    return {"error": type(err).__name__}


def _budget(value: int | None) -> int:
    """A job's stored budget (ms); a job stored without one never runs out of it."""
    return value if value is not None else 2**62


async def run_forever(
    pool: asyncpg.Pool,
    start: StartHook | None,
    interval_s: float,
    stop: asyncio.Event,
    client: Client | Callable[[], Client | None] | None = None,
    *,
    supervisor: Supervisor | None = None,
    caps: HoldCaps | None = None,
    task_queue: str | None = None,
    foreign_queue_wait_ms: int = FOREIGN_QUEUE_WAIT_MS,
) -> None:
    """Tick every ``interval_s`` seconds until ``stop`` is set, as the supervised loop ``reconciler``.

    Any exception of a tick — a PostgreSQL outage, asyncpg's ``InterfaceError``, a
    Temporal ``RPCError``, a bug — is logged, counted in
    ``curaflow_background_errors_total{loop="reconciler"}`` and followed by a restart with
    backoff (:mod:`curaflow.observability.supervision`); a reconciler that cannot recover fails the
    process through ``supervisor``. A tick that failed on Temporal's outage
    (:func:`curaflow.temporal.answers.temporal_outage`: an outage status, or every request
    about a job's execution refused) also sets
    ``curaflow_temporal_unavailable_last_seconds{where="reconciler"}``, which
    ``CuraflowTemporalUnavailable`` reads.

    Args:
        client: the Temporal client, or a callable returning it (None while the process
            has no connection yet).
        supervisor: the process's supervisor (None: a private one with the default
            policy, which never fails a process).
        caps: the instance's cooldown caps (:func:`curaflow.ledger.finish.hold_caps`).
        task_queue: curaflow's main task queue (:func:`tick`).
        foreign_queue_wait_ms: the setting ``foreign_queue_wait_ms`` (:func:`tick`).
    """

    async def one_tick() -> None:
        current = client() if callable(client) else client
        try:
            await tick(
                pool, start, current, caps=caps, task_queue=task_queue, foreign_queue_wait_ms=foreign_queue_wait_ms
            )
        except Exception as err:
            if temporal_outage(err):
                metrics.record_temporal_unavailable("reconciler")
            raise

    sup = supervisor or Supervisor(stop)
    await sup.run_every("reconciler", interval_s, one_tick)

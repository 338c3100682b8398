"""The reconciler: nothing admitted is ever lost, no job stays open forever.

The second (and last) writer of terminal state (DESIGN.md decision 13): it finishes
only jobs no workflow can finish — never started, execution closed, no worker. It runs
in the API process and in every worker; each tick runs under a PostgreSQL advisory lock
held for the whole tick, so one process ticks at a time. It asks Temporal what happened
(visibility and describe), it does not infer it from budgets. Each tick, over open jobs
(``completed_at IS NULL``), using each job's own budgets (stored with its workflow
input):

1. **unstarted workflow**: admitted in the ledger but ``workflow_started_at`` is null
   for more than a few seconds (a crash between insert and start) → start it;
2. **closed execution**: Temporal lists the job's execution as terminated, timed out or
   failed (closed within the last :data:`CLOSED_WINDOW_MS`) → finish with that cause
   (``execution_terminated`` / ``execution_timeout`` / ``internal_error``) once no
   attempt of the job holds a live lease (a send already out lands and is recorded
   first, so the outcome record reports it); an operator's terminate converges within
   a tick of its attempts ending, not after the stall budget;
3. **cancel with no worker**: a consumer cancel recorded more than
   :data:`CANCEL_GRACE_MS` ago, no live lease, and Temporal says no workflow can act on
   it (the execution does not exist or is closed, or its workflow task has waited for a
   worker longer than the grace) → finish ``cancelled``;
4. **budgets**, each checked with Temporal first (a closed execution converges with its
   close cause): past ``deadline_at`` (plus :data:`DEADLINE_GRACE_MS`) with no live
   lease → ``execution_timeout``; never started, older than the queued budget →
   ``queued_too_long``; started, no progress within the stall budget →
   ``stalled_no_heartbeat`` (a cell whose work was handed to its routes:
   ``delivery_abandoned``). Which budget ended the job is decided by
   :func:`curaflow.domain.verdicts.budget_cause`: the one that ran out first, the
   deadline owning any that ran out after it passed; the stall budget counts only time a
   step was held by a worker or waited in a queue no live worker serves — a step Temporal
   reports held and beating, in its retry backoff, or queued behind others on a served
   queue (:func:`served_queues`) is not stalled.

The reasons come from :func:`curaflow.domain.verdicts.cell_verdict` (a cancel recorded
in the ledger makes a stopped cell ``cancelled_by_consumer``). When a worker later runs
the workflow, its steps find the job terminal and it adopts that verdict.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import asyncpg
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from curaflow.domain.execution import job_workflow_types
from curaflow.domain.projection import job_status
from curaflow.domain.verdicts import FinishCause, PendingStep, budget_cause
from curaflow.ledger.db import LEADER_IDLE_MS, now_ms, session_lock
from curaflow.ledger.finish import FinishedJob, finish_job
from curaflow.ledger.gates import DB_NOW_MS
from curaflow.observability import metrics
from curaflow.observability.logs import get_logger
from curaflow.observability.supervision import Supervisor

LOCK_KEY = 0x63757261726563  # "curarec"
START_GRACE_MS = 5_000
#: After its deadline, a job no live attempt holds is the reconciler's: the workflow's own
#: timer normally ends it within moments, so this only acts when no worker runs it.
DEADLINE_GRACE_MS = 10_000
#: A recorded cancel a live workflow has not acted on within this long, with no worker to
#: act on it, is converged here.
CANCEL_GRACE_MS = 3_000
#: How far back a tick looks for closed executions.
CLOSED_WINDOW_MS = 3_600_000
log = get_logger("curaflow.reconciler")

StartHook = Callable[[str], Awaitable[None]]

#: Close status of an execution → why its job finishes.
CLOSE_CAUSES: dict[WorkflowExecutionStatus, FinishCause] = {
    WorkflowExecutionStatus.TERMINATED: FinishCause.TERMINATED,
    WorkflowExecutionStatus.TIMED_OUT: FinishCause.TIMED_OUT,
    WorkflowExecutionStatus.FAILED: FinishCause.WORKFLOW_FAILED,
    WorkflowExecutionStatus.CANCELED: FinishCause.CANCELLED,
    WorkflowExecutionStatus.COMPLETED: FinishCause.WORKFLOW_FAILED,  # closed without finishing its job
    WorkflowExecutionStatus.CONTINUED_AS_NEW: FinishCause.WORKFLOW_FAILED,
}


@dataclass
class TickReport:
    """What one tick did (job ids per rule)."""

    started: list[str] = field(default_factory=list)
    closed: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    queued_too_long: list[str] = field(default_factory=list)
    stalled: list[str] = field(default_factory=list)
    deadline: list[str] = field(default_factory=list)


@dataclass
class Execution:
    """What Temporal says of a job's execution (:func:`describe_execution`).

    Attributes:
        exists: Temporal knows the execution.
        close_cause: why its job must finish when it is closed, else None.
        closed_at_ms: when it closed (epoch ms), else None.
        waiting_for_worker_ms: how long its pending workflow task has waited for a worker
            (0 when none waits or a worker holds it).
    """

    exists: bool
    close_cause: FinishCause | None = None
    closed_at_ms: int | None = None
    waiting_for_worker_ms: int = 0
    steps: list[PendingActivity] = field(default_factory=list)

    def pending(self, served: set[str]) -> list[PendingStep]:
        """Its pending steps as :func:`~curaflow.domain.verdicts.budget_cause` reads them,
        given the task queues a live worker serves (:func:`served_queues`)."""
        return [step.liveness(served) for step in self.steps]

    def closed_cause_for(self, created_at_ms: int) -> FinishCause | None:
        """The close cause, if this execution closed after a job created at
        ``created_at_ms`` (an earlier run under the same id — say a refused submission —
        is not the job's)."""
        if self.close_cause is None or self.closed_at_ms is None or self.closed_at_ms < created_at_ms:
            return None
        return self.close_cause


#: The ``task_queue`` word of a source queue (``<task_queue>-source-<account>``).
SOURCE_QUEUE_MARK = "-source-"
#: Activities that run on a source queue (by type, when Temporal does not say the queue).
SOURCE_ACTIVITIES = frozenset({"acquire", "search", "fetch"})


@dataclass
class PendingActivity:
    """One pending activity of a running execution, as its describe reports it.

    Attributes:
        held: a worker holds an attempt (``STARTED`` / ``CANCEL_REQUESTED``).
        last_beat_ms: the held attempt's last heartbeat, else its start (epoch ms).
        backoff_until_ms: the next attempt's scheduled time while in retry backoff (or
            paused: waiting on purpose), else None.
        task_queue: its task queue ("" when Temporal does not say).
        activity_type: its type (``acquire``, ``deliver`` …).
    """

    held: bool
    last_beat_ms: int | None
    backoff_until_ms: int | None
    task_queue: str
    activity_type: str

    def liveness(self, served: set[str]) -> PendingStep:
        """As a :class:`~curaflow.domain.verdicts.PendingStep`: a source queue is served
        when its lease has a live owner; any other queue when any worker process is alive
        (every worker process serves the main and route queues and stands by for every
        source queue, so a live lease owner is a live worker)."""
        source = SOURCE_QUEUE_MARK in self.task_queue or (
            not self.task_queue and self.activity_type in SOURCE_ACTIVITIES
        )
        queue_served = self.task_queue in served if source and self.task_queue else bool(served)
        return PendingStep(
            held=self.held,
            last_beat_ms=self.last_beat_ms,
            backoff_until_ms=self.backoff_until_ms,
            queue_served=queue_served,
        )


def _ms(ts: object) -> int | None:
    """Epoch ms of a protobuf ``Timestamp`` field that is set (seconds > 0), else None."""
    seconds = getattr(ts, "seconds", 0)
    if not seconds:
        return None
    return int(seconds * 1000 + getattr(ts, "nanos", 0) // 1_000_000)


def _pending_activities(raw: object) -> list[PendingActivity]:
    found: list[PendingActivity] = []
    for info in getattr(raw, "pending_activities", []):
        state = PendingActivityState.Name(info.state)
        held = state in ("PENDING_ACTIVITY_STATE_STARTED", "PENDING_ACTIVITY_STATE_CANCEL_REQUESTED")
        beats = [t for t in (_ms(info.last_heartbeat_time), _ms(info.last_started_time)) if t is not None]
        backoff = _ms(info.next_attempt_schedule_time)
        if info.paused or state in ("PENDING_ACTIVITY_STATE_PAUSED", "PENDING_ACTIVITY_STATE_PAUSE_REQUESTED"):
            backoff = 2**62  # paused by an operator: waiting on purpose
        queue = info.activity_options.task_queue.name if info.HasField("activity_options") else ""
        found.append(
            PendingActivity(
                held=held,
                last_beat_ms=max(beats) if beats else None,
                backoff_until_ms=None if held else backoff,
                task_queue=queue,
                activity_type=info.activity_type.name,
            )
        )
    return found


async def describe_execution(client: Client, job_id: str, now: int) -> Execution:
    """Ask Temporal about ``job_id``'s execution (one ``DescribeWorkflowExecution``)."""
    try:
        desc = await client.get_workflow_handle(job_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return Execution(exists=False)
        raise
    if desc.status is not None and desc.status != WorkflowExecutionStatus.RUNNING:
        closed_at = int(desc.close_time.timestamp() * 1000) if desc.close_time else now
        cause = CLOSE_CAUSES.get(desc.status, FinishCause.WORKFLOW_FAILED)
        return Execution(exists=True, close_cause=cause, closed_at_ms=closed_at)
    task = desc.raw_description.pending_workflow_task
    waiting = 0
    if task.HasField("scheduled_time") and not task.HasField("started_time"):
        since = task.original_scheduled_time if task.HasField("original_scheduled_time") else task.scheduled_time
        waiting = max(0, now - int(since.ToMilliseconds()))
    return Execution(exists=True, waiting_for_worker_ms=waiting, steps=_pending_activities(desc.raw_description))


async def served_queues(conn: asyncpg.Connection) -> set[str]:
    """Source task queues a live worker process serves now: the lease row is unexpired
    (database clock) and its owner's connection is still there (one statement)."""
    rows = await conn.fetch(
        f"""SELECT task_queue FROM source_queue_leases l WHERE l.expires_at > {DB_NOW_MS}
            AND EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = l.backend_pid)"""
    )
    return {r["task_queue"] for r in rows}


async def converge(pool: asyncpg.Pool | asyncpg.Connection, job_id: str, cause: FinishCause) -> FinishedJob | None:
    """Finish ``job_id`` for ``cause`` on behalf of no workflow (logs and counts the first time).

    Returns:
        The finished job (``outcome`` None when it was already terminal), or None when the
        job is unknown.
    """
    if isinstance(pool, asyncpg.Pool):
        async with pool.acquire() as conn:
            finished = await finish_job(conn, job_id, cause=cause)
    else:
        finished = await finish_job(pool, job_id, cause=cause)
    if finished is not None and finished.outcome is not None:
        rec = finished.record
        log.warning("reconciler.converged", job_id=job_id, cause=str(cause))
        fields = {k: v for k, v in finished.outcome.items() if k != "event"}
        log.info("schedule.outcome", **fields)
        metrics.record_reconciled(str(cause))
        metrics.record_terminal(
            status=str(job_status(rec.cells)),
            business_status=rec.business_status,
            trigger=rec.trigger,
            created_at_ms=rec.created_at,
            completed_at_ms=rec.completed_at,
            cells=rec.cells,
        )
    return finished


_BUDGET = "(workflow_input->'budgets'->>'{name}')::bigint"
_LIVE = "NOT EXISTS (SELECT 1 FROM cells c WHERE c.job_id = j.job_id AND c.lease_until > $1::bigint)"


def closed_executions_query(since: str) -> str:
    """The visibility query of jobs' executions that closed without their job's finish
    (terminated, timed out, failed) after ``since`` (``YYYY-MM-DDTHH:MM:SSZ``, UTC): every
    workflow type that runs jobs (:func:`curaflow.domain.execution.job_workflow_types`)."""
    types = " OR ".join(f"WorkflowType = '{name}'" for name in job_workflow_types())
    return f"({types}) AND ExecutionStatus IN ('Terminated', 'TimedOut', 'Failed') AND CloseTime > '{since}'"


async def _closed_executions(client: Client, now: int) -> dict[str, tuple[FinishCause, int]]:
    since = datetime.fromtimestamp((now - CLOSED_WINDOW_MS) / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    query = closed_executions_query(since)
    found: dict[str, tuple[FinishCause, int]] = {}
    async for execution in client.list_workflows(query):
        if execution.status is not None and execution.close_time is not None:
            closed_at = int(execution.close_time.timestamp() * 1000)
            cause = CLOSE_CAUSES.get(execution.status, FinishCause.WORKFLOW_FAILED)
            if execution.id not in found or found[execution.id][1] < closed_at:
                found[execution.id] = (cause, closed_at)
    return found


async def tick(
    pool: asyncpg.Pool, start: StartHook | None, client: Client | None = None, *, limit: int = 100
) -> TickReport:
    """Run one reconciliation pass; returns an empty report if another process holds the lock.

    The lock is held for this pass only, and its session is bounded: a process that
    hangs holding it loses it after :data:`~curaflow.ledger.db.LEADER_IDLE_MS` without a
    statement (:func:`~curaflow.ledger.db.session_lock`'s ``idle_timeout_ms``).

    Args:
        pool: ledger pool.
        start: starts a job's workflow (None: rule 1 is skipped).
        client: Temporal client (None: rules 2–3 are skipped and rule 4 trusts the budgets).
        limit: most jobs per rule.

    Raises:
        asyncpg / Temporal errors: the caller's loop logs them and tries again next tick.
    """
    report = TickReport()
    async with session_lock(pool, LOCK_KEY, idle_timeout_ms=LEADER_IDLE_MS) as conn:
        if conn is None:
            return report
        await _tick(conn, pool, start, client, limit, report)
    return report


async def _tick(
    conn: asyncpg.Connection,
    pool: asyncpg.Pool,
    start: StartHook | None,
    client: Client | None,
    limit: int,
    report: TickReport,
) -> None:
    now = now_ms()
    if start is not None:
        rows = await conn.fetch(
            f"""SELECT job_id FROM jobs j WHERE completed_at IS NULL AND workflow_started_at IS NULL
                AND created_at <= $1::bigint - {START_GRACE_MS} ORDER BY created_at LIMIT {limit}""",
            now,
        )
        for r in rows:
            try:
                await start(r["job_id"])
                report.started.append(r["job_id"])
                metrics.record_reconciler_start()
            except Exception as err:  # noqa: BLE001 - keep converging the others
                log.warning("reconciler.start_failed", job_id=r["job_id"], error=type(err).__name__)

    seen: set[str] = set()
    if client is not None:
        closed = await _closed_executions(client, now)
        if closed:
            # Only once no attempt of the job holds a live lease: an attempt outlives a
            # terminate until its heartbeat hears of it, and a send already out finishes and
            # records what it did — converging before would report it ``unknown`` and let
            # the receipt contradict the outcome record afterwards.
            rows = await conn.fetch(
                f"""SELECT job_id, created_at FROM jobs j WHERE completed_at IS NULL
                    AND job_id = ANY($2::text[]) AND {_LIVE}""",
                now,
                list(closed),
            )
            for r in rows:
                _, closed_at = closed[r["job_id"]]
                if closed_at < r["created_at"]:
                    continue  # an earlier run under this id (a refused submission), not the job's
                # The latest run decides: a job may have been started again under its id.
                execution = await describe_execution(client, r["job_id"], now)
                cause_now = execution.closed_cause_for(r["created_at"])
                if cause_now is None:
                    continue
                seen.add(r["job_id"])
                if await _finish(conn, r["job_id"], cause_now):
                    report.closed.append(r["job_id"])
        cancels = await conn.fetch(
            f"""SELECT job_id, created_at FROM jobs j WHERE completed_at IS NULL AND cancel_requested_at IS NOT NULL
                AND cancel_requested_at <= $1::bigint - {CANCEL_GRACE_MS} AND {_LIVE}
                ORDER BY cancel_requested_at LIMIT {limit}""",
            now,
        )
        for r in cancels:
            if r["job_id"] in seen:
                continue
            seen.add(r["job_id"])
            if await converge_unserved_cancel(conn, client, r["job_id"], created_at=r["created_at"]):
                report.cancelled.append(r["job_id"])

    facts = (
        "job_id, created_at, started_at, deadline_at, "
        "COALESCE((SELECT max(heartbeat_at) FROM cells c WHERE c.job_id = j.job_id), started_at) AS last_progress, "
        f"{_BUDGET.format(name='queued_timeout_ms')} AS queued_budget, "
        f"{_BUDGET.format(name='stall_timeout_ms')} AS stall_budget"
    )
    overdue = await conn.fetch(
        f"""SELECT {facts} FROM jobs j WHERE completed_at IS NULL AND deadline_at IS NOT NULL
            AND deadline_at <= $1::bigint - {DEADLINE_GRACE_MS} AND {_LIVE}
            ORDER BY created_at LIMIT {limit}""",
        now,
    )
    queued = await conn.fetch(
        f"""SELECT {facts} FROM jobs j WHERE completed_at IS NULL AND started_at IS NULL
            AND created_at <= $1::bigint - {_BUDGET.format(name="queued_timeout_ms")} AND {_LIVE}
            ORDER BY created_at LIMIT {limit}""",
        now,
    )
    stalled = await conn.fetch(
        f"""SELECT {facts} FROM jobs j WHERE completed_at IS NULL AND started_at IS NOT NULL
            AND COALESCE((SELECT max(heartbeat_at) FROM cells c WHERE c.job_id = j.job_id), started_at)
                <= $1::bigint - {_BUDGET.format(name="stall_timeout_ms")}
            AND {_LIVE} ORDER BY created_at LIMIT {limit}""",
        now,
    )
    buckets = {
        FinishCause.DEADLINE: report.deadline,
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
        if client is not None:
            execution = await describe_execution(client, job_id, now)
            close_cause = execution.closed_cause_for(r["created_at"])
            if close_cause is None and execution.exists:
                if served is None:
                    served = await served_queues(conn)
                pending = execution.pending(served)
        ended = close_cause or budget_cause(
            now_ms=now,
            deadline_at_ms=r["deadline_at"],
            created_at_ms=r["created_at"],
            started_at_ms=r["started_at"],
            last_progress_ms=r["last_progress"],
            queued_budget_ms=_budget(r["queued_budget"]),
            stall_budget_ms=_budget(r["stall_budget"]),
            deadline_grace_ms=DEADLINE_GRACE_MS,
            pending=pending,
        )
        if ended is None:
            continue  # a step is held, in its backoff or queued behind others: not stalled
        if await _finish(conn, job_id, ended):
            buckets.get(ended, report.closed).append(job_id)


def _budget(value: int | None) -> int:
    """A job's stored budget (ms); a job stored without one never runs out of it."""
    return value if value is not None else 2**62


async def converge_unserved_cancel(
    pool: asyncpg.Pool | asyncpg.Connection, client: Client, job_id: str, *, created_at: int = 0
) -> bool:
    """Rule 3 for one job with a recorded cancel: finish it when no workflow can act on it.

    No workflow can act when Temporal says the execution does not exist or is closed, or
    its workflow task has waited for a worker for :data:`CANCEL_GRACE_MS` or more. The
    HTTP cancel calls this while it waits, so a consumer's cancel of a job no worker
    serves is answered ``cancelled`` within the grace instead of after a reconcile
    interval.

    Returns:
        True when this call finished the job.
    """
    execution = await describe_execution(client, job_id, now_ms())
    closed = execution.closed_cause_for(created_at)
    running = execution.exists and execution.close_cause is None
    if running and execution.waiting_for_worker_ms < CANCEL_GRACE_MS:
        return False  # a workflow is acting on the cancel (or will, once its worker picks it up)
    if execution.close_cause is not None and closed is None:
        return False  # an earlier run under this id closed; the job's own run is not started yet
    finished = await converge(pool, job_id, closed or FinishCause.CANCELLED)
    return finished is not None and finished.outcome is not None


async def _finish(conn: asyncpg.Connection, job_id: str, cause: FinishCause) -> bool:
    finished = await converge(conn, job_id, cause)
    return finished is not None and finished.outcome is not None


async def run_forever(
    pool: asyncpg.Pool,
    start: StartHook | None,
    interval_s: float,
    stop: asyncio.Event,
    client: Client | Callable[[], Client | None] | None = None,
    *,
    supervisor: Supervisor | None = None,
) -> None:
    """Tick every ``interval_s`` seconds until ``stop`` is set, as the supervised loop ``reconciler``.

    Any exception of a tick — a PostgreSQL outage, asyncpg's ``InterfaceError``, a
    Temporal ``RPCError``, a bug — is logged, counted in
    ``curaflow_background_errors_total{loop="reconciler"}`` and followed by a restart with
    backoff (:mod:`curaflow.observability.supervision`); a reconciler that cannot recover fails the
    process through ``supervisor``.

    Args:
        client: the Temporal client, or a callable returning it (None while the process
            has no connection yet).
        supervisor: the process's supervisor (None: a private one with the default
            policy, which never fails a process).
    """

    async def one_tick() -> None:
        current = client() if callable(client) else client
        await tick(pool, start, current)

    sup = supervisor or Supervisor(stop)
    await sup.run_every("reconciler", interval_s, one_tick)

"""Finishing a job on behalf of no workflow: :func:`converge` (a cause given), and rule 3 for
one job with a recorded cancel (:func:`converge_unserved_cancel`).

See :mod:`curaflow.ledger.reconciler`.
"""

from __future__ import annotations

import asyncpg
from temporalio.client import Client

from curaflow.domain.holds import HoldCaps
from curaflow.domain.projection import job_status
from curaflow.domain.text import clipped_within
from curaflow.domain.verdicts import FinishCause
from curaflow.ledger.db import DB_NOW_MS, now_ms, refused_statement
from curaflow.ledger.finish import FinishedJob, FinishNotStorable, finish_job
from curaflow.ledger.reconciler.executions import describe_execution
from curaflow.observability import metrics
from curaflow.observability.logs import get_logger

#: A recorded cancel a live workflow has not acted on within this long, with no worker to
#: act on it, is converged here.
CANCEL_GRACE_MS = 3_000


log = get_logger("curaflow.reconciler")

#: Jobs whose end the ledger refused even degraded (:class:`FinishNotStorable`) in this
#: process: :func:`converge` tries each once per process life, never again each tick (the
#: same values come again; the job stays open for an operator, ``CuraflowJobsStuck`` and
#: ``CuraflowFinishDegraded`` page). At most :data:`NOT_STORED_KEPT` ids.
NOT_STORED: set[str] = set()
NOT_STORED_KEPT = 10_000


async def converge(
    pool: asyncpg.Pool | asyncpg.Connection,
    job_id: str,
    cause: FinishCause,
    *,
    caps: HoldCaps | None = None,
    closed_at_ms: int | None = None,
) -> FinishedJob | None:
    """Finish ``job_id`` for ``cause`` on behalf of no workflow (logs and counts the first time).

    ``caps``: the instance's cooldown caps (:func:`curaflow.ledger.finish.hold_caps`), so a
    hold the finish names is the gate's (None: cooldowns as stored). ``closed_at_ms``: when
    Temporal closed the execution, for a cause read from that close (epoch ms UTC; a
    consumer cancel recorded after it stopped nothing,
    :func:`curaflow.domain.verdicts.cancel_stopped`); None for any other cause.

    The finish is :func:`~curaflow.ledger.finish.finish_job`'s, as the workflow's: a value
    the ledger refuses ends the job degraded. One it refuses even degraded
    (:class:`~curaflow.ledger.finish.FinishNotStorable`, logged and counted there) leaves the
    job open and is remembered (:data:`NOT_STORED`): never tried again by this process, and
    never a failed tick (the other jobs converge). A finish PostgreSQL refuses for this job
    alone (:func:`~curaflow.ledger.db.refused_statement`: a constraint its rows break, an
    internal error reading them, a ``RAISE``; no outage) leaves the job as it is, logged
    ``reconciler.finish_refused`` (error) and tried again next tick: never a failed tick
    either — until 2026-12-07 it failed every tick (the same job came first in each), no
    other job converged, and the process exited after ``supervision.fatal_after_ms``
    (``tests/integration/test_reconciler_refused_finish.py``). An outage is raised.

    Returns:
        The finished job (``outcome`` None when it was already terminal), or None when the
        job is unknown, its end cannot be stored or PostgreSQL refused its finish.
    """
    if job_id in NOT_STORED:
        return None
    try:
        if isinstance(pool, asyncpg.Pool):
            async with pool.acquire() as conn:
                finished = await finish_job(conn, job_id, cause=cause, caps=caps, closed_at_ms=closed_at_ms)
        else:
            finished = await finish_job(pool, job_id, cause=cause, caps=caps, closed_at_ms=closed_at_ms)
    except FinishNotStorable:
        if len(NOT_STORED) < NOT_STORED_KEPT:
            NOT_STORED.add(job_id)
        return None
    except asyncpg.PostgresError as err:
        sqlstate = refused_statement(err)
        if sqlstate is None:
            raise  # an outage: the caller's tick fails, and its loop retries it
        log.error(
            "reconciler.finish_refused",
            job_id=job_id,
            cause=str(cause),
            sqlstate=sqlstate,
            error=type(err).__name__,
            detail=clipped_within(str(err), 300),
        )
        return None
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


#: SQL predicate (the job's row aliased ``j``): no activity attempt of the job holds a cell
#: lease live now on the database's clock, the clock the lease was written on
#: (:func:`curaflow.ledger.cells.heartbeat`; docs/DESIGN.md "Ledger times are the
#: database's clock"), whatever this process's clock says. A job no workflow serves is
#: finished only then — an attempt outlives a terminate until its heartbeat hears of it,
#: and a send already out lands and is recorded first, so the outcome reports it.
NO_LIVE_ATTEMPT = f"NOT EXISTS (SELECT 1 FROM cells c WHERE c.job_id = j.job_id AND c.lease_until > {DB_NOW_MS})"


async def attempt_live(pool: asyncpg.Pool | asyncpg.Connection, job_id: str) -> bool:
    """Whether an activity attempt of ``job_id`` holds a live cell lease now (the negation
    of :data:`NO_LIVE_ATTEMPT`, for one job)."""
    held = await pool.fetchval(f"SELECT NOT ({NO_LIVE_ATTEMPT}) FROM jobs j WHERE j.job_id = $1", job_id)
    return held is True


async def never_started(pool: asyncpg.Pool | asyncpg.Connection, job_id: str) -> bool:
    """Whether ``job_id`` never ran a step (``started_at`` is null): no run held it."""
    started = await pool.fetchval("SELECT started_at IS NULL FROM jobs WHERE job_id = $1", job_id)
    return started is True


async def converge_unserved_cancel(
    pool: asyncpg.Pool | asyncpg.Connection,
    client: Client,
    job_id: str,
    *,
    created_at: int = 0,
    caps: HoldCaps | None = None,
) -> bool:
    """Rule 3 for one job with a recorded cancel: finish it when no workflow can act on it.

    No workflow can act when Temporal says the execution does not exist or is closed, or
    its workflow task has waited for a worker for :data:`CANCEL_GRACE_MS` or more. The
    HTTP cancel calls this while it waits, so a consumer's cancel of a job no worker
    serves is answered ``cancelled`` within the grace instead of after a reconcile
    interval. As every convergence, it waits for the job's attempts
    (:data:`NO_LIVE_ATTEMPT`): a send that was out when the execution closed lands and is
    recorded first; and a closed execution finishes the job with its close cause
    (``execution_terminated`` …), a missing one with the cancel. A cancel recorded after
    the execution closed stopped nothing: the close's reasons stand (a timed-out run's
    job ends expired, not cancelled; :func:`curaflow.domain.verdicts.cancel_stopped`).
    A run that closed without ever holding a job (the job's start attached to a Task run
    that refused its own Task:
    :meth:`~curaflow.ledger.reconciler.executions.Execution.closed_without_job`), or that
    was refused as not the job's (``Execution.refused``, whatever steps of the job it ran),
    is no verdict on the job: the cancel ends it ``cancelled``.

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
    if (
        closed is not None
        and execution.closed_without_job(created_at)
        and (execution.refused or await never_started(pool, job_id))
    ):
        closed = None  # the run never held the job (nothing ran it, or it was refused): the cancel ends it
    if await attempt_live(pool, job_id):
        return False  # an attempt still runs (a send out when the execution closed): it is recorded first
    closed_at = execution.closed_at_ms if closed is not None else None
    finished = await converge(pool, job_id, closed or FinishCause.CANCELLED, caps=caps, closed_at_ms=closed_at)
    return finished is not None and finished.outcome is not None


async def _finish(
    conn: asyncpg.Connection,
    job_id: str,
    cause: FinishCause,
    caps: HoldCaps | None = None,
    *,
    closed_at_ms: int | None = None,
) -> bool:
    finished = await converge(conn, job_id, cause, caps=caps, closed_at_ms=closed_at_ms)
    return finished is not None and finished.outcome is not None

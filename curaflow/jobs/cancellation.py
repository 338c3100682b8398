"""Consumer cancel of a job: the HTTP entry into the one cancellation path.

``POST /jobs/{id}/cancel`` (and ``curaflow cancel``), the Nexus ``cancel_job`` operation
and a cancelled ``follow_job`` call :func:`cancel_job`:

1. an unknown job → 404 ``invalid_params`` (``detail.reason: unknown_job``) — an id no
   job can have (a NUL character or a lone surrogate: PostgreSQL text cannot hold it) at
   once, before any ledger read, whoever asks (HTTP, the Nexus ``cancel_job`` operation,
   ``follow_job``) — unless
   Temporal runs a ``JobWorkflow`` under that id that has not admitted its Task yet (a
   job just started from a Temporal client): that execution is sent the cancel (the
   workflow admits the Task, then takes the cancel path) and the handler waits for the
   job to appear in the ledger, then goes on as below (without the wait such a cancel
   would answer 404 while the job ran on). Only Temporal's own "not found" of the
   execution is a "no" (:func:`curaflow.temporal.answers.execution_not_found`): Temporal
   unable to answer is raised — the API's ``503 temporal_unavailable``, never a 404;
2. a terminal job → no-op: the job is returned unchanged (a repeated cancel returns a
   body identical to the first);
3. otherwise the request is recorded in the ledger first (``cancel_requested_at``,
   committed before anything else: from then on no step opens and no delivery is
   claimed), then Temporal is asked to cancel the workflow with the reason
   ``cancelled_by_consumer`` — the same path the UI's cancel button and the ``cancel``
   signal take (DESIGN.md decisions 7 and 13);
4. it waits (up to ``api.cancel_wait_ms``) for the job to become terminal, woken by the
   job's terminal event (LISTEN/NOTIFY) or the end of the execution — the workflow
   stops its steps and finishes the job. A job no workflow can finish is the
   reconciler's, through its one function
   (:func:`curaflow.ledger.reconciler.converge_unserved_cancel`), asked at once when
   Temporal has no open execution to cancel and while the handler waits otherwise: an
   execution that does not exist (admitted, never started) ends the job ``cancelled``;
   one that closed (terminated, timed out) ends it with its close cause; one whose
   workflow no worker serves ends it ``cancelled`` — each only once no attempt of the
   job holds a live lease (a send out when the execution closed lands and is recorded
   first, so the report says it landed);
5. it returns the job as the ledger then holds it: ``cancelled`` (or ``succeeded``
   when a delivery landed before the cancel reached it), or still ``running`` with
   ``progress.stage = "cancelling"`` when an in-flight step has not yet stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import asyncpg
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from curaflow.domain.verdicts import FinishCause
from curaflow.ledger.jobs import request_cancel
from curaflow.ledger.listen import EventNotifier
from curaflow.ledger.reconciler import CANCEL_GRACE_MS, converge, converge_unserved_cancel
from curaflow.ledger.records import load_job
from curaflow.observability.logs import get_logger
from curaflow.protocol.errors import ProtocolError, invalid_params
from curaflow.protocol.keys import storable
from curaflow.protocol.projection import project_job
from curaflow.temporal.answers import execution_not_found, status_name

CANCEL_REASON = "cancelled_by_consumer"
log = get_logger("curaflow.cancel")


def unknown_job(job_id: str) -> ProtocolError:
    """The 404 ``invalid_params`` (``detail.reason: unknown_job``) of a cancel of a job no
    one has; ``detail.job_id`` is the id as asked, made printable (a NUL dropped, a lone
    surrogate replaced) so that the answer itself can be encoded and stored."""
    printable = job_id.encode("utf-8", "replace").decode().replace("\x00", "")
    return invalid_params("unknown job", http_status=404, reason="unknown_job", job_id=printable)


async def _completed(pool: asyncpg.Pool, job_id: str) -> bool:
    return await pool.fetchval("SELECT completed_at IS NOT NULL FROM jobs WHERE job_id = $1", job_id) is True


async def cancel_job(
    pool: asyncpg.Pool,
    client: Client | None,
    job_id: str,
    *,
    wait_s: float = 10.0,
    notifier: EventNotifier | None = None,
) -> dict[str, Any]:
    """Cancel ``job_id`` on behalf of its consumer (see the module doc).

    Args:
        pool: ledger pool.
        client: Temporal client (None: Temporal is unreachable; the job is converged in
            the ledger only if no workflow was ever started for it).
        wait_s: how long to wait for the job to become terminal, in seconds.
        notifier: the process's event notifier (wakes the wait on the terminal event);
            without one the wait follows the execution's result.

    Returns:
        The protocol ``Job`` dict after the cancel.

    Raises:
        ProtocolError: 404 ``invalid_params`` for an unknown job (:func:`unknown_job`),
            an id no job can have included — unknown to the ledger and to Temporal by its
            own "not found" (:func:`curaflow.temporal.answers.execution_not_found`).
        temporalio.service.RPCError: Temporal could not say whether a run can act on the
            cancel (any other answer of a describe it needs: the ledger holds no such job
            yet, or Temporal said no open run exists); the cancel, when the ledger holds the
            job, is recorded first.
    """
    if not storable(job_id):
        raise unknown_job(job_id)  # no ledger read could find it: it cannot be stored
    began = time.monotonic()
    async with pool.acquire() as conn:
        record = await load_job(conn, job_id)
    if record is None and client is not None and await _admitting(client, job_id):
        record = await _cancel_before_admission(pool, client, job_id, wait_s)
        wait_s = max(0.0, wait_s - (time.monotonic() - began))
    if record is None:
        raise unknown_job(job_id)
    if record.completed_at is not None:
        return project_job(record)
    async with pool.acquire() as conn:
        await request_cancel(conn, job_id, CANCEL_REASON)
    exists = record.workflow_started_at is not None
    if client is not None:
        try:
            await client.get_workflow_handle(job_id).cancel(reason=CANCEL_REASON)
            exists = True
        except RPCError as err:
            # Only Temporal's own "not found" of the execution says no run can act on the
            # cancel; any other answer (an outage, a namespace's NOT_FOUND) says nothing of
            # it: the cancel is recorded, and a run takes it from the ledger.
            exists = not execution_not_found(err)
            log.info(
                "cancel.workflow_not_cancellable",
                job_id=job_id,
                status=status_name(err),
                error=err.message,
                exists=exists,
            )
    if not exists and client is None:
        # Never started, and Temporal is unreachable: converge here (the workflow, if it is
        # started later, finds the job terminal and adopts it).
        await converge(pool, job_id, FinishCause.CANCELLED)
    elif not exists and client is not None:
        # No open execution: none that ever existed (converged here, at once), or one
        # that closed — terminated, timed out — whose job is converged with its own
        # cause once no attempt of it holds a lease (a send out at the terminate lands
        # and is recorded first): the reconciler's rule, through its one function.
        if not await converge_unserved_cancel(pool, client, job_id, created_at=record.created_at):
            await _wait_terminal(pool, client, job_id, wait_s, notifier, record.created_at)
    else:
        await _wait_terminal(pool, client, job_id, wait_s, notifier, record.created_at)
    async with pool.acquire() as conn:
        record = await load_job(conn, job_id)
    assert record is not None
    return project_job(record)


async def _admitting(client: Client, job_id: str) -> bool:
    """Whether Temporal runs a ``JobWorkflow`` execution under ``job_id`` (a job started
    from a Temporal client whose ``admit`` step has not written the ledger yet).

    No only on Temporal's own "not found" of the execution
    (:func:`curaflow.temporal.answers.execution_not_found`) or a description of another run.

    Raises:
        temporalio.service.RPCError: any other answer (2026-12-07: it was a "no", and a
            cancel Temporal could not answer — ``UNAVAILABLE``, ``RESOURCE_EXHAUSTED`` — was
            ``404 unknown job`` for a job that may run; the API answers an outage ``503
            temporal_unavailable``, :mod:`curaflow.api.errors`).
    """
    try:
        description = await client.get_workflow_handle(job_id).describe()
    except RPCError as err:
        if execution_not_found(err):
            return False
        raise
    return description.workflow_type == "JobWorkflow" and description.status == WorkflowExecutionStatus.RUNNING


async def _cancel_before_admission(pool: asyncpg.Pool, client: Client, job_id: str, wait_s: float) -> Any:
    """Send the not-yet-admitted execution the cancel, then wait up to ``wait_s`` for its
    job to appear in the ledger; returns the job record, or None if it did not appear (the
    workflow still takes the cancel once a worker admits the Task)."""
    with contextlib.suppress(RPCError):  # it ended meanwhile: the ledger says how
        await client.get_workflow_handle(job_id).cancel(reason=CANCEL_REASON)
    log.info("cancel.before_admission", job_id=job_id)
    deadline = time.monotonic() + wait_s
    while True:
        async with pool.acquire() as conn:
            record = await load_job(conn, job_id)
        if record is not None or time.monotonic() >= deadline:
            return record
        await asyncio.sleep(0.1)


async def _wait_terminal(
    pool: asyncpg.Pool,
    client: Client | None,
    job_id: str,
    wait_s: float,
    notifier: EventNotifier | None,
    created_at: int,
) -> None:
    """Wait up to ``wait_s`` seconds for ``job_id`` to become terminal in the ledger, or
    until the server stops (``notifier.closing``: the cancel is recorded, the job is
    answered as it is — as at the end of the wait).

    Every :data:`~curaflow.ledger.reconciler.CANCEL_GRACE_MS` without an answer, the
    reconciler is asked whether a workflow can act on the cancel at all.
    """
    deadline = time.monotonic() + wait_s
    grace_s = CANCEL_GRACE_MS / 1000
    if notifier is None:
        if client is not None:
            with contextlib.suppress(Exception):  # cancelled / failed: the ledger tells the rest
                await asyncio.wait_for(client.get_workflow_handle(job_id).result(), wait_s)
        return
    with notifier.watch(job_id) as woken:
        while not await _completed(pool, job_id):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or notifier.closing:  # a stopping server answers the job as it is
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), min(remaining, grace_s))
            if not woken.is_set() and client is not None and time.monotonic() < deadline:
                with contextlib.suppress(Exception):  # the reconciler's own tick tries again
                    await converge_unserved_cancel(pool, client, job_id, created_at=created_at)
            woken.clear()

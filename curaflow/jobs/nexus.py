"""The Nexus service of jobs, as curaflow's workers handle it (the contract:
:mod:`curaflow.temporal.nexus_service`).

Registered by every worker on its main task queue (:func:`curaflow.process.worker.build_workers`),
the queue the Nexus endpoint targets.

Every operation's input is its caller's JSON text, read before the handler as ``POST /jobs``
reads a body: one with no one meaning (a member twice, ``NaN``, ``1e400``) is refused
there with that refusal (:class:`curaflow.temporal.connection.InputPayloadConverter`).

``start_job`` (a Temporal workflow-run operation):

1. admits the Task with the one admission (:class:`curaflow.jobs.admission.Admitter`,
   trigger ``temporal``): validation, target, identity — a refusal is a non-retryable
   ``OperationError`` (state ``failed``) whose cause is the protocol's failure
   (:func:`curaflow.temporal.refusals.as_failure`), answered at once;
2. a job that already ended answers at once from the ledger, as its execution ended:
   ``succeeded`` → its final state; ``failed`` / ``expired`` → an ``OperationError``
   caused by the job's failure (``job_failed`` / ``job_expired``); ``cancelled`` → a
   cancelled operation;
3. otherwise the job's workflow is started with its admitted ``JobInput`` — or, when its
   run is already open (HTTP, a schedule, another caller started it), attached to
   (conflict policy ``USE_EXISTING`` attaches the operation's completion callback to it)
   — under the rule of :mod:`curaflow.temporal.job_runs`; the operation completes when
   the job's execution does, with its result. A job whose run closed while the ledger
   still holds it open (a terminate the reconciler has not closed yet) is a retryable
   error: the caller's Nexus machinery retries, and the next attempt answers from the
   ledger. So is a job whose id an open run of another workflow type holds
   (:class:`~curaflow.temporal.job_runs.JobIdHeld`): nothing attaches to it, and an
   attempt after it closed starts the job (or finds it started by the reconciler). So is
   a job whose id an open job run holds that has not admitted its Task yet — another
   client's Task run waiting out its ``start_delay`` (:class:`~curaflow.temporal.job_runs.JobRunAdmitting`,
   2026-12-07): the operation's completion would ride on that run, which may yet refuse
   its own Task (``idempotency_conflict``) or be cancelled, and the caller was handed that
   end for a job admitted and run; an attempt after it holds the job attaches to it, one
   after it closed finds the job's own run. So is
   a start Temporal refused or did not answer, whatever its status (:func:`start_refused`:
   the job is admitted, and never failed for a caller by Temporal's answer to a start).

Cancelling the operation requests the cancel of the job's execution: the job's one
cancel path (decision 7), cells ``cancelled_by_consumer``, the execution ends
``Canceled`` and so does the operation.

``cancel_job`` (synchronous): ``POST /jobs/{id}/cancel``'s path
(:func:`curaflow.jobs.cancellation.cancel_job`), answering the job's state.
"""

from __future__ import annotations

from typing import Any

import asyncpg
from nexusrpc import HandlerError, HandlerErrorType, OperationError, OperationErrorState
from nexusrpc.handler import OperationHandler, StartOperationContext, operation_handler, service_handler, sync_operation
from temporalio import nexus
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.nexus import (
    CancelWorkflowRunOptions,
    TemporalCancelOperationContext,
    TemporalNexusClient,
    TemporalOperationHandler,
    TemporalOperationResult,
    TemporalStartOperationContext,
)
from temporalio.service import RPCError

from curaflow.config import Settings
from curaflow.domain.execution import job_workflow
from curaflow.domain.job_failure import JOB_FAILURE_TYPES, job_failure
from curaflow.domain.messages import CancelJob, JobState
from curaflow.domain.state import job_state
from curaflow.jobs.admission import Admitter
from curaflow.jobs.cancellation import CANCEL_REASON, cancel_job
from curaflow.ledger.jobs import mark_workflow_started, workflow_input
from curaflow.ledger.records import load_job
from curaflow.observability.logs import get_logger
from curaflow.protocol.errors import ProtocolError
from curaflow.temporal.answers import status_name, temporal_outage
from curaflow.temporal.connection import job_start_options
from curaflow.temporal.job_runs import JobIdHeld, JobRunAdmitting, JobRunClosed, start_run
from curaflow.temporal.nexus_service import JobService
from curaflow.temporal.refusals import as_failure

log = get_logger("curaflow.jobs.nexus")

#: How long ``cancel_job`` waits for the job to end before it answers (seconds): within a
#: Nexus request's deadline; the job goes on stopping after the answer.
CANCEL_WAIT_S = 5.0


def refused(err: ProtocolError) -> OperationError:
    """The non-retryable operation error of an admission refusal, caused by the protocol's failure."""
    error = OperationError(f"{err.code}: {err.message}", state=OperationErrorState.FAILED)
    error.__cause__ = as_failure(err)
    return error


def ended(state: JobState) -> TemporalOperationResult[JobState]:
    """The answer for a job that already ended, as its execution ended (the result contract).

    Raises:
        OperationError: the job failed or expired (caused by its failure, the state as
            details), or was cancelled (state ``canceled``).
    """
    if str(state.status) in JOB_FAILURE_TYPES:
        error = OperationError(f"job {state.job_id} {state.status}", state=OperationErrorState.FAILED)
        error.__cause__ = job_failure(state)
        raise error
    if str(state.status) == "cancelled":
        raise OperationError(f"job {state.job_id} was cancelled", state=OperationErrorState.CANCELED)
    return TemporalOperationResult.sync(state)


def start_refused(job_id: str, err: RPCError) -> HandlerError:
    """The retryable handler error of a start Temporal refused or did not answer, after the
    Task was admitted: the job is durable (the reconciler starts its run), so the caller's
    next attempt answers it — attached to its run, or from the ledger once it ended.

    ``UNAVAILABLE`` for an outage (:func:`curaflow.temporal.answers.temporal_outage`), else
    ``INTERNAL`` made retryable. 2026-12-07: the ``RPCError`` reached the SDK, which hands an
    ``INVALID_ARGUMENT`` (a search attribute the namespace does not define), a ``NOT_FOUND``
    (a namespace's), an ``ALREADY_EXISTS`` or ``FAILED_PRECONDITION`` to the caller as
    non-retryable: its operation failed for good for a job that runs
    (``tests/integration/test_temporal_answers.py``, failed first).
    """
    kind = HandlerErrorType.UNAVAILABLE if temporal_outage(err) else HandlerErrorType.INTERNAL
    return HandlerError(
        f"Temporal did not start the run of job {job_id} ({status_name(err)}: {err.message}); the job is "
        "admitted, and a next attempt answers it",
        type=kind,
        retryable_override=True,
    )


class StartJob(TemporalOperationHandler[dict[str, Any], JobState]):
    """The ``start_job`` operation (see the module doc)."""

    def __init__(self, settings: Settings, pool: asyncpg.Pool) -> None:
        self.settings = settings
        self.pool = pool

    async def start_operation(
        self, ctx: TemporalStartOperationContext, client: TemporalNexusClient, input: dict[str, Any]
    ) -> TemporalOperationResult[JobState]:
        """Admit the Task, then answer from the ledger or start/attach the job's workflow.

        Raises:
            OperationError: a refusal, or a job that ended failed, expired or cancelled.
            HandlerError: retryable — the job's run closed and the ledger has not caught up,
                an open run of another workflow type holds the id, an open job run that
                has not admitted its Task holds it, or Temporal refused or
                did not answer the start (:func:`start_refused`).
        """
        try:
            admission = await Admitter(self.settings, self.pool, None).admit(input, trigger="temporal", start=False)
        except ProtocolError as err:
            raise refused(err)  # noqa: B904 - its cause is the protocol's failure, set by refused()
        async with self.pool.acquire() as conn:
            record = await load_job(conn, admission.job_id)
            inp = admission.job_input or await workflow_input(conn, admission.job_id)
        assert record is not None and inp is not None
        if record.completed_at is not None:
            return ended(job_state(record))
        options = job_start_options(inp, self.settings.temporal.task_queue)

        async def start(
            reuse: WorkflowIDReusePolicy, conflict: WorkflowIDConflictPolicy
        ) -> TemporalOperationResult[JobState]:
            return await client.start_workflow(
                job_workflow(inp.job_type),
                inp,
                result_type=JobState,
                id_reuse_policy=reuse,
                **{**options, "id_conflict_policy": conflict},
            )

        try:
            result = await start_run(client.client, inp.job_id, start, attach_holder_only=True)
        except JobRunClosed as closed:
            raise HandlerError(
                f"the run of job {inp.job_id} closed ({closed.status.name if closed.status else 'unknown'}); "
                "its outcome is being recorded",
                type=HandlerErrorType.UNAVAILABLE,
            ) from None
        except (JobIdHeld, JobRunAdmitting) as held:
            raise HandlerError(str(held), type=HandlerErrorType.UNAVAILABLE) from None
        except RPCError as err:
            raise start_refused(inp.job_id, err) from err
        async with self.pool.acquire() as conn:
            await mark_workflow_started(conn, inp.job_id)
        return result

    async def cancel_workflow_run(self, ctx: TemporalCancelOperationContext, options: CancelWorkflowRunOptions) -> None:
        """Cancel the job: a Temporal cancel request, the job's one cancel path."""
        await nexus.client().get_workflow_handle(options.workflow_id).cancel(reason=CANCEL_REASON)


@service_handler(service=JobService)
class JobServiceHandler:
    """curaflow's handler of :class:`~curaflow.temporal.nexus_service.JobService`.

    Args:
        settings: the worker's settings (targets, task queue).
        pool: the ledger pool.
    """

    def __init__(self, settings: Settings, pool: asyncpg.Pool) -> None:
        self.settings = settings
        self.pool = pool

    @operation_handler
    def start_job(self) -> OperationHandler[dict[str, Any], JobState]:
        """Run the job of a Task; the result is its outcome (see the module doc)."""
        return StartJob(self.settings, self.pool)

    @sync_operation
    async def cancel_job(self, ctx: StartOperationContext, input: CancelJob) -> JobState:
        """Cancel a job as ``POST /jobs/{id}/cancel`` does; answers its state after the cancel.

        Raises:
            OperationError: the job is unknown (``invalid_params``, 404).
        """
        try:
            await cancel_job(self.pool, nexus.client(), input.job_id, wait_s=CANCEL_WAIT_S)
        except ProtocolError as err:
            raise refused(err)  # noqa: B904 - its cause is the protocol's failure, set by refused()
        async with self.pool.acquire() as conn:
            record = await load_job(conn, input.job_id)
        assert record is not None
        return job_state(record)

"""The ``finish`` and ``request_cancel`` activities.

``finish`` makes the job terminal in the ledger (one transaction: open cells converge
with the workflow's verdicts, the outcome record and the terminal event are written
exactly once) and logs the ``schedule.outcome`` line the first time. It returns the
ledger's final :class:`~curaflow.domain.messages.JobState`, which the workflow adopts,
so the ``status`` query and ``GET /jobs/{id}`` agree.

``request_cancel`` turns the ``cancel`` signal into a Temporal cancel request with a
reason, so every way of cancelling ends the execution ``Canceled`` (a workflow cannot
cancel itself through an external handle), and records the request in the ledger so no
delivery is sent after it.
"""

from __future__ import annotations

import json

from temporalio import activity
from temporalio.service import RPCError, RPCStatusCode

from activities.deps import ActivityDeps
from curaflow import metrics
from curaflow.domain.messages import CancelRequest, FinishInput, JobState
from curaflow.domain.models import JobRecord
from curaflow.domain.outcome import business_status, is_alertable
from curaflow.domain.projection import job_stage, job_status
from curaflow.ledger.finish import finish_job
from curaflow.ledger.jobs import request_cancel as ledger_request_cancel
from curaflow.logs import get_logger

log = get_logger("curaflow.outcome")


def job_state(record: JobRecord) -> JobState:
    """The :class:`JobState` of a ledger job (status and stage by the shared projection)."""
    status = job_status(record.cells)
    terminal = record.completed_at is not None
    verdict = business_status(record.cells) if terminal else None
    return JobState(
        job_id=record.job_id,
        job_type=record.job_type,
        status=str(status),
        stage=job_stage(record.cells, status),
        business_status=verdict.value if verdict else None,
        alertable=is_alertable(verdict) if verdict else None,
        cancel_requested=record.cancel_requested_at is not None,
        created_at_ms=record.created_at,
        deadline_at_ms=record.deadline_at,
        cells=record.cells,
    )


class FinishActivity:
    """Holds the worker's :class:`~activities.deps.ActivityDeps` for ``finish`` and ``request_cancel``."""

    def __init__(self, deps: ActivityDeps) -> None:
        self.deps = deps

    @activity.defn(name="finish")
    async def finish(self, inp: FinishInput) -> JobState:
        """Make the job terminal and return its final state.

        Raises:
            ApplicationError: (retryable) when the ledger is unreachable.
        """
        async with self.deps.pool.acquire() as conn:
            finished = await finish_job(conn, inp.job_id, verdicts=inp.verdicts, cause=inp.cause)
        if finished is None:
            raise RuntimeError(f"job {inp.job_id} is not in the ledger")
        if finished.outcome is not None:
            fields = {k: v for k, v in json.loads(json.dumps(finished.outcome)).items() if k != "event"}
            log.info("schedule.outcome", **fields)
            record = finished.record
            metrics.record_terminal(
                status=str(job_state(record).status),
                business_status=record.business_status,
                trigger=record.trigger,
                created_at_ms=record.created_at,
                completed_at_ms=record.completed_at,
                cells=record.cells,
            )
        return job_state(finished.record)

    @activity.defn(name="request_cancel")
    async def request_cancel(self, inp: CancelRequest) -> None:
        """Record the cancel in the ledger and ask Temporal to cancel this job's workflow."""
        job_id = activity.info().workflow_id
        assert job_id is not None, "request_cancel runs only inside a job's workflow"
        async with self.deps.pool.acquire() as conn:
            await ledger_request_cancel(conn, job_id, inp.reason)
        assert self.deps.client is not None
        try:
            await self.deps.client.get_workflow_handle(job_id).cancel(reason=inp.reason)
        except RPCError as err:
            if err.status not in (RPCStatusCode.ALREADY_EXISTS, RPCStatusCode.FAILED_PRECONDITION):
                raise
            # A cancel is already pending (e.g. the consumer's own, racing this one).
            log.info("request_cancel.already_requested", job_id=job_id, status=err.status.name)

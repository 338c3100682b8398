"""The ``follow_job`` activity: a workflow attaches to the job of a Task and waits for its outcome.

What another workflow uses when the job of its Task may already exist — started over
HTTP, by a schedule, by another client — so that it cannot start it as its child
(Temporal refuses a child start under an id that has a run:
``WorkflowAlreadyStartedError``). :func:`workflows.callers.run_job` falls back to it;
:func:`workflows.callers.follow_job` schedules it directly. One attempt:

1. admits the Task as ``POST /jobs`` does (:class:`curaflow.jobs.admission.Admitter`,
   trigger ``temporal``): the same Task is the same job — its workflow started if no one
   did yet (:func:`curaflow.temporal.connection.start_job_workflow`: never a second
   run) — another Task is ``idempotency_conflict`` (a non-retryable failure carrying
   the protocol code, :func:`curaflow.temporal.refusals.as_failure`);
2. waits until the ledger holds the job terminal, reading it every
   :data:`POLL_S` and heartbeating meanwhile (a cancel reaches it within a poll);
3. returns the job's final state — whatever its status (``succeeded``, ``failed``,
   ``expired``, ``cancelled``): the follower reads the outcome, it is not failed by it.

Cancelled (the follower's workflow was cancelled) with ``cancel_job``, it cancels the
job through ``POST /jobs/{id}/cancel``'s path (:func:`curaflow.jobs.cancellation.cancel_job`),
waits for the job to end, then ends cancelled.

Cost: one ledger read per :data:`POLL_S` per follower while the job runs, and one
heartbeat; nothing on the job's own path.
"""

from __future__ import annotations

import asyncio
import contextlib

from temporalio import activity

from activities.deps import ActivityDeps
from curaflow.domain.messages import FollowJob, JobState
from curaflow.domain.models import JobRecord
from curaflow.domain.state import job_state
from curaflow.jobs.admission import Admitter
from curaflow.jobs.cancellation import cancel_job
from curaflow.ledger.records import load_job
from curaflow.protocol.errors import ProtocolError
from curaflow.temporal.refusals import as_failure

#: Seconds between two reads of the followed job (and two heartbeats).
POLL_S = 1.0


class FollowActivity:
    """Holds the worker's :class:`~activities.deps.ActivityDeps` for ``follow_job``."""

    def __init__(self, deps: ActivityDeps) -> None:
        self.deps = deps

    @activity.defn(name="follow_job")
    async def follow_job(self, inp: FollowJob) -> JobState:
        """Attach to the job of ``inp.task`` and return its final state (see the module doc).

        Raises:
            ApplicationError: the Task is refused (non-retryable, ``type`` = the protocol
                code); ledger or Temporal errors are retried.
            asyncio.CancelledError: the follower was cancelled (the job too, with
                ``cancel_job``).
        """
        deps = self.deps
        try:
            admission = await Admitter(deps.settings, deps.pool, deps.client).admit(inp.task, trigger="temporal")
        except ProtocolError as err:
            raise as_failure(err) from err
        job_id = admission.job_id
        try:
            record = await self._terminal(job_id)
        except asyncio.CancelledError:
            if inp.cancel_job:
                await asyncio.shield(self._cancel(job_id))
            raise
        return job_state(record)

    async def _terminal(self, job_id: str) -> JobRecord:
        """The job once the ledger holds it terminal, heartbeating until then."""
        while True:
            async with self.deps.pool.acquire() as conn:
                record = await load_job(conn, job_id)
            assert record is not None
            if record.completed_at is not None:
                return record
            activity.heartbeat()
            await asyncio.sleep(POLL_S)

    async def _cancel(self, job_id: str) -> None:
        """Cancel the job on the follower's behalf and wait until it ended."""
        with contextlib.suppress(ProtocolError):
            await cancel_job(self.deps.pool, self.deps.client, job_id, wait_s=POLL_S)
        while True:
            async with self.deps.pool.acquire() as conn:
                record = await load_job(conn, job_id)
            if record is None or record.completed_at is not None:
                return
            activity.heartbeat("cancelling")
            await asyncio.sleep(POLL_S)

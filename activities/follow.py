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
   the protocol code, :func:`curaflow.temporal.refusals.as_failure`); a follower whose
   own workflow id is the job id is refused ``invalid_params`` before anything is
   written (:func:`curaflow.protocol.task.follower_conflict`: it would wait for itself);
2. waits until the ledger holds the job terminal, reading it every
   :data:`POLL_S` and heartbeating meanwhile with the job's id (a cancel reaches it
   within a poll); a retried attempt follows the job its heartbeat names without
   admitting the Task again (:meth:`FollowActivity._followed_before`: the admission
   answered once, whatever the configuration of the worker the retry runs on);
3. returns the job's final state — whatever its status (``succeeded``, ``failed``,
   ``expired``, ``cancelled``): the follower reads the outcome, it is not failed by it.

Cancelled by its follower — the follower's workflow was cancelled (``cancel_requested``),
or is gone (``not_found``: terminated, timed out; as a child's parent close policy
``REQUEST_CANCEL``), unless it lives on in a newer run (a reset, a continue-as-new: that
run decides, as a reset parent's child job runs on — unlike a child job, which its
parent's continue-as-new cancels; :meth:`FollowActivity._lives_on`, which takes the run
for gone only on Temporal's positive answer: the job runs on when Temporal cannot say) —
with ``cancel_job``, it cancels the job through
``POST /jobs/{id}/cancel``'s path (:func:`curaflow.jobs.cancellation.cancel_job`), waits
for the job to end, then ends cancelled. Any other cancel the SDK hands the attempt is
not the follower's wish (:func:`follower_stopped`): the worker shutting down (a deploy),
a late heartbeat, an operator's pause or reset of the activity. The job — which may be
an HTTP caller's, a schedule's or another follower's too — runs on untouched; the
attempt ends as Temporal expects (a pause or reset as the SDK reports it, else a
retryable failure) and a next attempt follows the job again (its admission a replay).

Cost: one ledger read per :data:`POLL_S` per follower while the job runs, and one
heartbeat; nothing on the job's own path.
"""

from __future__ import annotations

import asyncio
import contextlib

from temporalio import activity
from temporalio.client import WorkflowExecutionStatus
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from activities.deps import ActivityDeps
from curaflow.domain.messages import FollowJob, JobState
from curaflow.domain.models import JobRecord
from curaflow.domain.state import job_state
from curaflow.jobs.admission import Admitter
from curaflow.jobs.cancellation import cancel_job
from curaflow.ledger.records import load_job
from curaflow.observability.logs import get_logger
from curaflow.protocol.errors import ProtocolError
from curaflow.temporal.answers import execution_not_found, status_name
from curaflow.temporal.refusals import as_failure

log = get_logger("curaflow.activities")

#: Seconds between two reads of the followed job (and two heartbeats).
POLL_S = 1.0
#: The ``type`` of the retryable failure of an attempt stopped by a cancel that was not
#: the follower's (:func:`follower_stopped`).
FOLLOW_INTERRUPTED = "follow_interrupted"


def follower_stopped() -> bool:
    """Whether this attempt's cancel is its follower's: the follower's workflow asked for
    it (``cancel_requested``, which wins when others are set too) or its run no longer
    exists (``not_found``: terminated, timed out, reset — a reset's newer run is asked
    apart, :meth:`FollowActivity._lives_on`). False for a cancel the worker or an
    operator caused — the worker's shutdown, a heartbeat timeout or a failed heartbeat, a
    pause, a reset of the activity — which must not cancel a job others may wait on."""
    details = activity.cancellation_details()
    return details is not None and (details.cancel_requested or details.not_found)


class FollowActivity:
    """Holds the worker's :class:`~activities.deps.ActivityDeps` for ``follow_job``."""

    def __init__(self, deps: ActivityDeps) -> None:
        self.deps = deps

    @activity.defn(name="follow_job")
    async def follow_job(self, inp: FollowJob) -> JobState:
        """Attach to the job of ``inp.task`` and return its final state (see the module doc).

        Raises:
            ApplicationError: the Task is refused (non-retryable, ``type`` = the protocol
                code); or a cancel that was not the follower's stopped the attempt
                (retryable, ``type`` :data:`FOLLOW_INTERRUPTED`; the job untouched).
                Ledger or Temporal errors are retried.
            asyncio.CancelledError: the follower was cancelled or is gone (the job too,
                with ``cancel_job``); or an operator paused or reset the activity (the job
                untouched).
        """
        deps = self.deps
        job_id = await self._followed_before()
        if job_id is None:
            try:
                admission = await Admitter(deps.settings, deps.pool, deps.client).admit(
                    inp.task, trigger="temporal", follower_id=activity.info().workflow_id
                )
            except ProtocolError as err:
                raise as_failure(err) from err
            job_id = admission.job_id
        try:
            record = await self._terminal(job_id)
        except asyncio.CancelledError:
            if follower_stopped():
                if inp.cancel_job and not await asyncio.shield(self._lives_on()):
                    await asyncio.shield(self._cancel(job_id))
                raise
            details = activity.cancellation_details()
            if details is not None and (details.paused or details.reset):
                raise  # the SDK reports it as the pause / reset: Temporal holds or restarts the attempt
            raise ApplicationError(
                f"stopped following job {job_id} ({_why(details)}); the job runs on, a next attempt follows it",
                type=FOLLOW_INTERRUPTED,
            ) from None
        return job_state(record)

    async def _followed_before(self) -> str | None:
        """The job an earlier attempt of this activity followed — its heartbeat names it
        (:meth:`_terminal`) — when the ledger holds it; else None (a first attempt, one
        whose heartbeats an operator reset, or one stopped before its admission answered).

        A retry follows that job without admitting the Task again: the admission answered
        once, and a worker configured otherwise (a deploy that set the target's
        ``accept_jobs = false`` or dropped it restarts the worker under the attempt) would
        refuse it — the follower told "refused" of a job that runs on (until 2026-12-07).
        """
        details = activity.info().heartbeat_details
        if not details or not isinstance(details[0], str):
            return None
        async with self.deps.pool.acquire() as conn:
            record = await load_job(conn, details[0])
        return record.job_id if record is not None else None

    async def _terminal(self, job_id: str) -> JobRecord:
        """The job once the ledger holds it terminal, heartbeating (with its id) until then."""
        while True:
            async with self.deps.pool.acquire() as conn:
                record = await load_job(conn, job_id)
            assert record is not None
            if record.completed_at is not None:
                return record
            activity.heartbeat(job_id)
            await asyncio.sleep(POLL_S)

    async def _lives_on(self) -> bool:
        """Whether this attempt's workflow, gone as a run (``not_found``), may go on in a
        newer run under its id — a reset (the UI's "Reset" terminates the run and starts
        another), a continue-as-new. Asked only for ``not_found``: a cancel request is the
        workflow's own. One describe: "gone" only on Temporal's positive answer — its own
        "not found" of the id (:func:`curaflow.temporal.answers.execution_not_found`), or a
        description whose latest run is this one or closed. Any other answer (an outage, a
        refusal) says neither, and the job runs on — the Task its consumer asked for — rather
        than be cancelled on a guess (2026-12-07: it read as "gone", and cancelled the job a
        reset follower still waited for; ``tests/integration/test_temporal_answers.py``,
        failed first)."""
        details = activity.cancellation_details()
        if details is None or details.cancel_requested or not details.not_found or self.deps.client is None:
            return False
        info = activity.info()
        if info.workflow_id is None:  # a standalone activity: no workflow to live on
            return False
        try:
            described = await self.deps.client.get_workflow_handle(info.workflow_id).describe()
        except RPCError as err:
            if execution_not_found(err):
                return False
            log.warning("follow.run_unknown", job_caller=info.workflow_id, status=status_name(err), error=err.message)
            return True
        return described.status == WorkflowExecutionStatus.RUNNING and described.run_id != info.workflow_run_id

    async def _cancel(self, job_id: str) -> None:
        """Cancel the job on the follower's behalf and wait until it ended."""
        with contextlib.suppress(ProtocolError):
            await cancel_job(self.deps.pool, self.deps.client, job_id, wait_s=POLL_S)
        while True:
            async with self.deps.pool.acquire() as conn:
                record = await load_job(conn, job_id)
            if record is None or record.completed_at is not None:
                return
            activity.heartbeat(job_id, "cancelling")
            await asyncio.sleep(POLL_S)


def _why(details: activity.ActivityCancellationDetails | None) -> str:
    """What stopped the attempt, in words (the failure's message)."""
    if details is not None and details.worker_shutdown:
        return "the worker is shutting down"
    if details is not None and details.timed_out:
        return "its heartbeat timed out"
    return "its heartbeat could not be recorded"

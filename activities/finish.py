"""The ``finish`` and ``request_cancel`` activities.

``finish`` makes the job terminal in the ledger (one transaction: open cells converge
with the reasons :func:`curaflow.domain.verdicts.cell_verdict` decides from the
workflow's facts, the outcome record and the terminal event are written exactly once)
and logs the ``schedule.outcome`` line the first time. It returns the ledger's final
:class:`~curaflow.domain.messages.JobState`, which the workflow adopts, so the
``status`` query and ``GET /jobs/{id}`` agree. It heartbeats, so a worker that dies
while finishing costs a heartbeat timeout, not the step's whole time budget. A send of the
job still out from an attempt the workflow stopped waiting for (the ledger's
:class:`~curaflow.ledger.finish.SendStillOut`) makes the attempt fail retryably, its next
one due within :data:`SEND_POLL_MS` (``next_retry_delay``: the workflow's retry policy
and its code unchanged), until that send's answer is recorded or its lease lapses.

``request_cancel`` is the first thing every cancel path does in the workflow (the
``cancel`` signal, a Temporal cancel request, a cancel found in the ledger): it records
the cancel in the ledger — from then on no step opens and no delivery is claimed — and
asks Temporal to cancel the execution, so every way of cancelling ends it ``Canceled``
(a workflow cannot cancel itself through an external handle).

``paused_steps`` answers which of the calling job's steps Temporal holds paused by an
operator (``temporal activity pause``, the UI's "Pause"): the workflow asks it when the
job's deadline stops steps still in flight (``workflows.job.PAUSED_STEPS``), so a step
the pause held is reported as the operator's, not as a job that ran out of time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from datetime import timedelta

from temporalio import activity
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory
from temporalio.service import RPCError, RPCStatusCode

from activities.caller import finish_own_job, require_own_finish, require_own_job
from activities.deps import ActivityDeps
from curaflow.domain.holds import HoldCaps
from curaflow.domain.messages import (
    CancelAnswer,
    CancelRequest,
    FinishedElsewhere,
    FinishInput,
    JobInput,
    JobState,
    PausedStep,
)
from curaflow.domain.state import job_state
from curaflow.ledger.finish import FinishedJob, FinishNotStorable, SendStillOut, finish_job, hold_caps
from curaflow.ledger.jobs import job_ended
from curaflow.ledger.jobs import request_cancel as ledger_request_cancel
from curaflow.observability import metrics
from curaflow.observability.logs import get_logger
from curaflow.temporal.job_runs import held_by_another_run

log = get_logger("curaflow.outcome")


#: ``ApplicationError`` type of a ``finish`` for a job the ledger does not know.
UNKNOWN_JOB = "unknown_job"

#: ``ApplicationError`` type (retryable) of a ``finish`` attempt that found a send of the
#: job still out from a live attempt (:class:`~curaflow.ledger.finish.SendStillOut`).
SEND_STILL_OUT = "send_still_out"

#: ``ApplicationError`` type (non-retryable) of a ``finish`` whose job's end the ledger
#: refused even degraded (:class:`~curaflow.ledger.finish.FinishNotStorable`): the same
#: values would come on every attempt.
FINISH_NOT_STORABLE = "finish_not_storable"

#: Longest wait before the next ``finish`` attempt while a send of the job is out (ms):
#: the job ends within this of that send's answer being recorded. Each attempt costs the
#: ledger one short read under the job row's lock.
SEND_POLL_MS = 500

#: Log ``finish.awaiting_send`` on the first attempt that waits and on every this many
#: after it (a wait lasts at most the send's own bounds: its route's timeout, the deadline).
_LOG_EVERY = 20


class FinishActivity:
    """Holds the worker's :class:`~activities.deps.ActivityDeps` for ``finish`` and ``request_cancel``."""

    def __init__(self, deps: ActivityDeps) -> None:
        self.deps = deps
        self._caps: HoldCaps | None = None

    @property
    def caps(self) -> HoldCaps:
        """The instance's cooldown caps, for the holds a finish names (built once)."""
        if self._caps is None:
            self._caps = hold_caps(self.deps.settings)
        return self._caps

    @activity.defn(name="finish")
    async def finish(self, inp: FinishInput) -> JobState | FinishedElsewhere:
        """Make the job terminal and return its final state.

        On a repeat — the job had already ended, this finish wrote nothing — and only then,
        it asks whether another run of the job's id holds the job
        (:func:`~curaflow.temporal.job_runs.held_by_another_run`: one visibility list) and
        answers :class:`~curaflow.domain.messages.FinishedElsewhere` when one does: the
        calling run is no job's own run (a reset of the job's closed run past its first
        step's result) and only reports the job. A repeat of the job's own finish (an
        attempt after a lost worker's commit, a job the reconciler ended while its run
        waited) finds no other run holding it and answers the plain state, which that run
        publishes. A job's own first finish never asks.

        Heartbeats every half second while it works (a killed worker's attempt is retried
        after the heartbeat timeout the workflow gives it).

        Raises:
            ApplicationError: ``foreign_caller`` (non-retryable, nothing done) when the calling
                execution is not the job's own (:func:`activities.caller.require_own_job`), or
                when a step of this run was refused as not the job's — its input is not the
                job's stored input (:func:`activities.caller.require_own_finish`, judged on
                the input: no statement) —, or when the input the run holds
                (``inp.job_input``) is not the job's stored input
                (:func:`activities.caller.finish_own_job`, judged in the job's read: no
                statement added) — an earlier deadline, a target left out, other source
                queues or budgets: the run's facts and cause are no verdict on the job.
            ApplicationError: ``unknown_job`` (non-retryable) when the ledger does not know
                the job; ledger errors (connection lost …) fail the attempt and Temporal
                retries it.
            ApplicationError: ``send_still_out`` (retryable, ``next_retry_delay`` at most
                :data:`SEND_POLL_MS`) while a send of the job is out from a live attempt
                (:class:`~curaflow.ledger.finish.SendStillOut`): nothing written.
            ApplicationError: ``finish_not_storable`` (non-retryable, naming the value) when the
                ledger refused the job's end even degraded
                (:class:`~curaflow.ledger.finish.FinishNotStorable`): nothing written. A value
                refused once ends the job degraded, no error (``finish_job``).
            temporalio.service.RPCError: on a repeat, Temporal refused or did not answer the
                list (the attempt is retried; the ledger was not written).
        """
        require_own_job(inp.job_id)
        require_own_finish(inp.job_id, inp.failures)  # a run whose step was refused as not the job's
        beat = asyncio.create_task(_heartbeat_every(0.5))
        try:
            async with self.deps.pool.acquire() as conn:

                async def finish(run_input: JobInput | None) -> FinishedJob | None:
                    return await finish_job(
                        conn,
                        inp.job_id,
                        cause=inp.cause,
                        failures=inp.failures,
                        verdicts=inp.verdicts,
                        caps=self.caps,
                        by_workflow=True,
                        run_input=run_input,
                    )

                # Only the run of the job's stored input ends it (judged in the job's read).
                finished = await finish_own_job(inp.job_id, inp.job_input, finish)
        except SendStillOut as out:
            _awaiting(out)
            raise ApplicationError(
                str(out),
                type=SEND_STILL_OUT,
                next_retry_delay=timedelta(milliseconds=max(1, min(out.wait_ms, SEND_POLL_MS))),
                category=ApplicationErrorCategory.BENIGN,  # a wait, not a failure: no warning per attempt
            ) from None
        except FinishNotStorable as refused:
            raise ApplicationError(str(refused), type=FINISH_NOT_STORABLE, non_retryable=True) from None
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
        if finished is None:
            raise ApplicationError(f"job {inp.job_id} is not in the ledger", type=UNKNOWN_JOB, non_retryable=True)
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
        elif await self._ended_elsewhere(inp.job_id):
            return FinishedElsewhere(**dict(job_state(finished.record)), ended_in_another_run=True)
        return job_state(finished.record)

    async def _ended_elsewhere(self, job_id: str) -> bool:
        """Whether another run of ``job_id`` than the calling one holds the job (asked of a
        job that had already ended); False without a Temporal client or a run id."""
        own_run = activity.info().workflow_run_id
        if self.deps.client is None or not own_run:
            return False
        return await held_by_another_run(self.deps.client, job_id, own_run)

    @activity.defn(name="request_cancel")
    async def request_cancel(self, inp: CancelRequest) -> CancelAnswer | None:
        """Record the cancel in the ledger and ask Temporal to cancel this job's workflow.

        A job that had already ended records no cancel (:func:`ledger_request_cancel`);
        when another run of its id holds it, the answer says so
        (``CancelAnswer.ended_in_another_run``: one visibility list, only on this path) and
        the asking run only reports the job. None otherwise.

        The job is the calling execution's own id. With ``inp.no_job`` (a run that holds no
        job: a refused cron-scheduled start) only the asking run itself is cancelled — by
        its run id — and nothing is written: its id may be an ended job's, whose row must
        not change. A workflow cannot ask Temporal to cancel its own run (the request fails
        "not found"), hence an activity.

        Raises:
            ApplicationError: ``foreign_caller`` (non-retryable, nothing done) when the
                caller is no ``JobWorkflow`` (:func:`activities.caller.require_own_job`).
        """
        caller = activity.info().workflow_id  # None: a standalone activity, no job to name
        require_own_job(caller)  # the job is the caller's own id: only JobWorkflow names one
        assert caller is not None  # refused above: no workflow, no job
        job_id = caller
        answer: CancelAnswer | None = None
        assert self.deps.client is not None
        if not inp.no_job:
            async with self.deps.pool.acquire() as conn:
                recorded = await ledger_request_cancel(conn, job_id, inp.reason)
            own_run = activity.info().workflow_run_id
            if not recorded and own_run and await held_by_another_run(self.deps.client, job_id, own_run):
                answer = CancelAnswer(ended_in_another_run=True)
        run_id = activity.info().workflow_run_id if inp.no_job else None
        try:
            await self.deps.client.get_workflow_handle(job_id, run_id=run_id).cancel(reason=inp.reason)
        except RPCError as err:
            if err.status not in (RPCStatusCode.ALREADY_EXISTS, RPCStatusCode.FAILED_PRECONDITION):
                raise
            # A cancel is already pending (e.g. the consumer's own, racing this one).
            log.info("request_cancel.already_requested", job_id=job_id, status=err.status.name)
        return answer

    @activity.defn(name="ended_elsewhere")
    async def ended_elsewhere(self) -> bool:
        """Whether the calling execution's job had already ended in the ledger and another
        run of its id holds it (:func:`~curaflow.temporal.job_runs.held_by_another_run`: one
        visibility list, asked only for an ended job) — the question a job's first step
        asks (``CellUpdate.ended_in_another_run``), for a run stopped by its deadline before
        any step opened (``workflows.job.LATE_REPORTING_RUN``). False without a Temporal
        client.

        Raises:
            ApplicationError: ``foreign_caller`` (non-retryable) when the caller is no
                ``JobWorkflow`` (:func:`activities.caller.require_own_job`).
            temporalio.service.RPCError: Temporal refused or did not answer the list (the
                attempt is retried).
        """
        job_id = activity.info().workflow_id
        require_own_job(job_id)
        assert job_id is not None
        if self.deps.client is None or not await job_ended(self.deps.pool, job_id):
            return False
        return await self._ended_elsewhere(job_id)

    @activity.defn(name="paused_steps")
    async def paused_steps(self) -> list[PausedStep]:
        """The calling job's steps Temporal holds paused by an operator
        (:func:`paused_steps_of`).

        Raises:
            ApplicationError: ``foreign_caller`` (non-retryable) when the caller is no
                ``JobWorkflow`` (:func:`activities.caller.require_own_job`).
            RPCError: Temporal did not answer (the workflow then names no pause).
        """
        info = activity.info()
        require_own_job(info.workflow_id)
        assert info.workflow_id is not None and self.deps.client is not None
        found = await paused_steps_of(self.deps.client, info.workflow_id, info.workflow_run_id)
        if found:
            log.info("paused_steps.found", job_id=info.workflow_id, steps=[p.activity_id for p in found])
        return found


async def paused_steps_of(client: Client, workflow_id: str, run_id: str | None) -> list[PausedStep]:
    """The steps of run ``run_id`` of ``workflow_id`` that Temporal holds paused by an
    operator, each with the cell (and route) it belongs to.

    One describe of the run: a pending activity in state ``PAUSED`` — no attempt running,
    the next one held by the pause (an attempt still running when paused is
    ``PAUSE_REQUESTED``: the pause has held nothing yet, and it is not named). Only when
    one is paused, the run's history is read for the ``ActivityTaskScheduled`` events of
    those steps, whose input names the target (and the route of a ``deliver``). A paused
    step whose input names no target is left out (nothing is blamed on a guess).

    Raises:
        RPCError: Temporal did not answer.
    """
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    described = await handle.describe()
    paused = {
        p.activity_id: p
        for p in described.raw_description.pending_activities
        if p.state == PendingActivityState.PENDING_ACTIVITY_STATE_PAUSED
    }
    found: list[PausedStep] = []
    if not paused:
        return found
    async for event in handle.fetch_history_events():
        if not event.HasField("activity_task_scheduled_event_attributes"):
            continue
        scheduled = event.activity_task_scheduled_event_attributes
        pending = paused.get(scheduled.activity_id)
        if pending is None or not scheduled.input.payloads:
            continue
        [arg] = await client.data_converter.decode(scheduled.input.payloads[:1])
        target = arg.get("target") if isinstance(arg, dict) else None
        target_id = target.get("target_id") if isinstance(target, dict) else None
        if not isinstance(target_id, str):
            continue
        route = arg.get("route")
        manual = pending.pause_info.manual
        found.append(
            PausedStep(
                activity_id=scheduled.activity_id,
                target_id=target_id,
                route=route.get("name") if isinstance(route, dict) else None,
                by=manual.identity[:200],
                note=manual.reason[:200],
            )
        )
    return found


def _awaiting(out: SendStillOut) -> None:
    """Log that this finish waits for a send still out (the first waiting attempt, then
    every :data:`_LOG_EVERY`)."""
    attempt = activity.info().attempt
    if attempt == 1 or attempt % _LOG_EVERY == 0:
        log.info("finish.awaiting_send", job_id=out.job_id, attempt=attempt, lease_left_ms=out.wait_ms)


async def _heartbeat_every(interval_s: float) -> None:
    if activity.info().is_local:
        return  # run as a local activity (core v2): its workflow task is its liveness
    activity.heartbeat()
    while True:
        await asyncio.sleep(interval_s)
        activity.heartbeat()

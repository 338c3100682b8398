"""``JobWorkflow`` against fake activities under the real names (fast: seconds per test).

The real workflow code on the session's real Temporal dev server; activities follow a
script (:mod:`tests.workflow.fakes`). Covered: every barrier (deadline, the three cancel
paths) at every step, timeouts becoming facts, a bug failing the workflow task, what
landed being reported under a cancel, and a send already out being finished.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from curaflow.domain.execution import JOB_TASK_TIMEOUT
from curaflow.domain.job_failure import state_of
from curaflow.domain.messages import JobState
from curaflow.domain.occurrence import AdmitOccurrenceInput, OccurrenceAdmission, OccurrenceInput
from curaflow.domain.verdicts import FailureKind, FinishCause
from curaflow.process.worker import sandbox_runner
from tests.support import eventually
from tests.workflow.fakes import Act
from tests.workflow.harness import SOURCE, WORK_STEPS, Env, cancel_by, result_of, workers
from workflows.job import JobWorkflow
from workflows.scheduled import ScheduledJobWorkflow

pytestmark = pytest.mark.integration


# ---- the happy path --------------------------------------------------------------------


async def test_every_step_runs_then_the_job_finishes(env: Env) -> None:
    handle = await env.start(env.job({"t": ["a", "b"]}))
    state: JobState = await handle.result()
    assert sorted(env.fakes.steps()) == sorted(["search", "fetch", "deliver", "deliver"])
    assert [f.cause for f in env.fakes.finishes] == [FinishCause.COMPLETED]
    assert state.status == "succeeded"
    assert {(d.route, d.status) for d in state.deliveries} == {("a", "delivered"), ("b", "delivered")}
    assert await env.events(handle, EventType.EVENT_TYPE_TIMER_FIRED) == []


async def test_a_new_execution_records_one_patch_marker_and_leaves_its_deadline_timer(env: Env) -> None:
    """What a job costs Temporal: one patch marker for every change since core v2 (each
    marker also costs the SDK's ``TemporalChangeVersion`` upsert), and the deadline timer
    of a job that ends in time is left to expire with the execution, not cancelled."""
    handle = await env.start(env.job())
    assert (await handle.result()).status == "succeeded"
    history = await handle.fetch_history()
    patches = [
        json.loads(e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)["id"]
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
        and e.marker_recorded_event_attributes.marker_name == "core_patch"
    ]
    assert patches == ["core-v3"]
    assert await env.events(handle, EventType.EVENT_TYPE_TIMER_STARTED) != []
    assert await env.events(handle, EventType.EVENT_TYPE_TIMER_CANCELED) == []
    assert len(history.events) <= 23, "\n".join(EventType.Name(e.event_type) for e in history.events)


# ---- the deadline is a barrier ---------------------------------------------------------


@pytest.mark.parametrize("step", WORK_STEPS)
async def test_the_deadline_stops_every_step(env: Env, step: str) -> None:
    env.fakes.on(step, "t", Act("hang"), route="a" if step == "deliver" else None)
    handle = await env.start(env.job(deadline_ms=1500))

    # An expired job fails its execution (the UI lists it Failed), its state in the failure.
    assert await env.closed(handle) == WorkflowExecutionStatus.FAILED
    state = await result_of(handle)
    with pytest.raises(WorkflowFailureError) as failure:
        await handle.result()
    assert isinstance(failure.value.cause, ApplicationError) and failure.value.cause.type == "job_expired"
    assert failure.value.cause.non_retryable and state_of(failure.value) == state
    assert env.fakes.steps() == list(WORK_STEPS[: WORK_STEPS.index(step) + 1])
    (finish,) = env.fakes.finishes
    assert finish.cause == FinishCause.DEADLINE
    assert finish.failures["t"].kind == FailureKind.CANCELLED
    assert state.status == "expired"
    assert state.cells[0].reason == "execution_timeout"
    # The timer fired, then the step was cancelled; nothing was scheduled after it but the
    # question which steps an operator paused (``paused-steps``, asked before the cancel)
    # and finish.
    (fired,) = await env.events(handle, EventType.EVENT_TYPE_TIMER_FIRED)
    assert [name for event_id, name in await env.scheduled(handle) if event_id > fired] == ["paused_steps", "finish"]


# ---- every cancel path is a barrier, recorded before in-flight steps are stopped --------


@pytest.mark.parametrize("path", ["signal", "temporal", "ledger"])
@pytest.mark.parametrize("step", WORK_STEPS)
async def test_every_cancel_path_at_every_step(env: Env, path: str, step: str) -> None:
    route = "a" if step == "deliver" else None
    env.fakes.on(step, "t", Act("cancel_found" if path == "ledger" else "hang"), route=route)
    handle = await env.start(env.job())
    if path != "ledger":
        await env.called(step)
        await cancel_by(env, path, handle)

    assert await env.closed(handle) == WorkflowExecutionStatus.CANCELED
    assert env.fakes.steps() == list(WORK_STEPS[: WORK_STEPS.index(step) + 1])
    assert len(env.fakes.cancels) == 1, "request_cancel records every cancel in the ledger"
    (finish,) = env.fakes.finishes
    assert finish.cause == FinishCause.CANCELLED
    scheduled = await env.scheduled(handle)
    names = [name for _, name in scheduled]
    assert names[-2:] == ["request_cancel", "finish"]
    # The cancel is recorded before the in-flight step is asked to stop.
    recorded = next(event_id for event_id, name in scheduled if name == "request_cancel")
    stops = await env.events(handle, EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED)
    assert all(stop > recorded for stop in stops), (recorded, stops)
    state = await result_of(handle)
    assert (state.status, state.cells[0].reason) == ("cancelled", "cancelled_by_consumer")


# ---- what landed is reported; a send already out is finished ---------------------------


async def test_a_cancel_reports_the_route_that_got_the_work(env: Env) -> None:
    env.fakes.on("deliver", "t", Act("ok"), route="a").on("deliver", "t", Act("hang"), route="b")
    handle = await env.start(env.job({"t": ["a", "b"]}))
    await env.called("deliver")
    live = await env.status_until(handle, lambda s: bool(s.deliveries), "route a's delivery in the live state")
    assert [(d.route, d.status) for d in live.deliveries] == [("a", "delivered")]

    await handle.signal("cancel", {"reason": "enough"})

    assert await env.closed(handle) == WorkflowExecutionStatus.CANCELED
    state = await result_of(handle)
    assert state.status == "cancelled"
    assert state.business_status == "partial_success"
    assert [(d.route, d.status) for d in state.deliveries] == [("a", "delivered")]


async def test_a_cancel_that_stops_one_target_of_two_ends_the_job_cancelled(env: Env) -> None:
    # One target delivered, the other's send is out and never answers: the cancel stopped
    # that one, so the job is cancelled (never succeeded), the execution Canceled, and
    # the delivery that landed is reported.
    env.fakes.on("deliver", "t1", Act("ok"), route="a").on("deliver", "t2", Act("hang"), route="b")
    handle = await env.start(env.job({"t1": ["a"], "t2": ["b"]}))
    await env.status_until(handle, lambda s: bool(s.deliveries), "t1's delivery in the live state")
    await env.beating(handle, "deliver")  # t2's send is out

    await handle.signal("cancel", {"reason": "enough"})

    assert await env.closed(handle) == WorkflowExecutionStatus.CANCELED
    state = await result_of(handle)
    assert (state.status, state.business_status) == ("cancelled", "partial_success")
    reasons = {c.target_id: (c.state, c.reason) for c in state.cells}
    assert reasons == {"t1": ("submitted", None), "t2": ("failed", "cancelled_by_consumer")}
    assert ("t1", "a", "delivered") in [(d.target_id, d.route, d.status) for d in state.deliveries]


async def test_a_send_already_out_is_finished_and_the_job_reports_it(env: Env) -> None:
    env.fakes.on("deliver", "t", Act("slow", seconds=1.5), route="a")
    handle = await env.start(env.job())
    await env.called("deliver")

    await handle.cancel()

    # The delivery landed before the cancel reached it: the job succeeded, and says so.
    assert await env.closed(handle) == WorkflowExecutionStatus.COMPLETED
    state: JobState = await handle.result()
    assert state.status == "succeeded"
    assert env.fakes.finishes[0].cause == FinishCause.CANCELLED


# ---- timeouts and failures become facts; the decider names them ------------------------


async def test_a_first_search_that_never_leaves_its_queue_is_queued_too_long(
    temporal_client: Client, temporal_address: str
) -> None:
    env = Env(temporal_client, temporal_address)
    async with workers(env, sandboxed=True, source=False):  # nobody serves the source queue
        handle = await env.start(env.job())
        assert await env.closed(handle) == WorkflowExecutionStatus.FAILED
        state = await result_of(handle)
    failure = env.fakes.finishes[0].failures["t"]
    assert (failure.kind, failure.timeout_type, failure.first_step) == (FailureKind.TIMEOUT, "SCHEDULE_TO_START", True)
    assert (state.status, state.cells[0].reason) == ("expired", "queued_too_long")


@pytest.mark.parametrize(
    ("step", "act", "kind", "reason"),
    [
        # a heartbeat timeout takes seconds to happen: the full run only
        pytest.param(
            "fetch", Act("silent", seconds=3), FailureKind.TIMEOUT, "stalled_no_heartbeat", marks=pytest.mark.slow
        ),
        pytest.param(
            "deliver", Act("silent", seconds=3), FailureKind.TIMEOUT, "delivery_abandoned", marks=pytest.mark.slow
        ),
        ("deliver", Act("fail", error_type="delivery_failed"), FailureKind.APPLICATION, "delivery_abandoned"),
        ("search", Act("fail", error_type="auth_failed", non_retryable=True), FailureKind.APPLICATION, "auth_failed"),
        ("fetch", Act("fail", error_type="download_failed"), FailureKind.APPLICATION, "download_failed"),
    ],
)
async def test_step_failures_become_facts(env: Env, step: str, act: Act, kind: FailureKind, reason: str) -> None:
    env.fakes.on(step, "t", act, route="a" if step == "deliver" else None)
    handle = await env.start(env.job())
    assert (
        await env.closed(handle, timeout_s=30) == WorkflowExecutionStatus.FAILED
    )  # the job failed: so does its execution
    (finish,) = env.fakes.finishes
    assert finish.cause == FinishCause.COMPLETED
    assert finish.failures["t"].kind == kind
    state = await result_of(handle)
    assert state.cells[0].reason == reason
    attempts = [c.attempt for c in env.fakes.calls if c.step == step]
    assert attempts == ([1] if act.non_retryable else [1, 2, 3])


# ---- Temporal's contract: a bug fails the workflow task, never the job ------------------


async def test_a_bug_in_the_workflow_fails_the_task_not_the_job(
    temporal_client: Client, temporal_address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: JobWorkflow, update: Any) -> None:
        raise KeyError("a bug in _apply")

    monkeypatch.setattr(JobWorkflow, "_apply", broken)
    env = Env(temporal_client, temporal_address)
    async with workers(env, sandboxed=False):
        handle = await env.start(env.job())
        await eventually(
            lambda: env.events(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED),
            timeout_s=15,
            what="the workflow task failed",
        )
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
        assert env.fakes.finishes == []  # no verdict: the code must be fixed, then it replays
        await handle.terminate("test over")


async def test_a_finish_for_a_job_the_ledger_does_not_know_fails_fast(env: Env) -> None:
    env.fakes.finish_error = "unknown_job"
    handle = await env.start(env.job())
    started = time.monotonic()
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    assert time.monotonic() - started < 10
    assert len(env.fakes.finishes) == 1  # non-retryable: one attempt
    # The workflow's own refusal, saying how to start a job: a local activity's failure is its
    # ApplicationError, not an ActivityError, and the activity's bare error went out instead.
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "unknown_job"
    assert "start jobs with a protocol Task" in cause.message, cause.message


# ---- the status query agrees with GET /jobs while a step runs ---------------------------


async def test_the_status_query_shows_the_running_step(env: Env) -> None:
    env.fakes.on("search", "t", Act("hang"))
    handle = await env.start(env.job())
    await env.called("search")
    state = await result_of(handle)
    assert (state.status, state.stage, state.cells[0].stage) == ("queued", "searching", "searching")
    await handle.cancel()
    assert await env.closed(handle) == WorkflowExecutionStatus.CANCELED


# ---- a schedule's trampoline says how its job's execution closed ------------------------


@pytest.mark.parametrize(("how", "expected"), [("terminate", "terminated"), ("cancel", "canceled")])
async def test_the_trampoline_reports_how_the_job_execution_closed(
    temporal_client: Client, temporal_address: str, how: str, expected: str
) -> None:
    env = Env(temporal_client, temporal_address)
    env.fakes.on("search", "t", Act("hang"))
    inp = env.job()

    @activity.defn(name="admit_occurrence")
    async def admit_occurrence(_: AdmitOccurrenceInput) -> OccurrenceAdmission:
        return OccurrenceAdmission(job_id=inp.job_id, created=True, job_input=inp)

    acts = [*env.fakes.activities(lambda: env.client), admit_occurrence]
    async with (
        Worker(
            env.client,
            task_queue=env.queue,
            workflows=[JobWorkflow, ScheduledJobWorkflow],
            activities=[a for a in acts if a.__name__ not in SOURCE],
            workflow_runner=sandbox_runner(),
        ),
        Worker(env.client, task_queue=env.source_queue, activities=[a for a in acts if a.__name__ in SOURCE]),
    ):
        trampoline = await env.client.start_workflow(
            ScheduledJobWorkflow.run,
            OccurrenceInput(schedule_id="plan", cron=["0 3 * * *"], task_queue=env.queue),
            id=f"occ-{uuid.uuid4().hex[:8]}",
            task_queue=env.queue,
        )
        await env.called("search")
        job = env.client.get_workflow_handle(inp.job_id)
        # A scheduled job gets the task timeout of every job start (5 s), not Temporal's 10 s.
        config = (await job.describe()).raw_description.execution_config
        assert config.default_workflow_task_timeout.ToTimedelta() == JOB_TASK_TIMEOUT
        if how == "terminate":
            await job.terminate("operator")
        else:
            await job.cancel()
        result = await trampoline.result()
    assert result.job_id == inp.job_id
    assert result.execution == expected
    assert result.status == ("cancelled" if how == "cancel" else None)

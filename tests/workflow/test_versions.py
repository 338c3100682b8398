"""Executions started before a change keep what they did (``workflow.patched``).

A live execution that started before a patch sees ``workflow.patched(<id>)`` answer False
for it; here the answer is made False for new executions too (an unsandboxed worker, the
SDK's function replaced for the test), so the old branch of each patch runs live on the
fake activities — the frozen core v1 orchestration (``core-v2``, :mod:`workflows.job_v1`)
and the behaviours before ``failed-execution``, ``cell-progress``, ``reporting-run``,
``job-input-reporting-run``, ``cancelled-end``, ``push-bound``, ``one-meaning-input``,
``paused-steps-unanswered``, ``escaped-start-metadata`` (the schedule's trampoline and
``run_job``), ``occurrence-abandons-its-job``, ``push-one-meaning-input`` and
``occurrence-one-meaning-input``, ``reporting-run-cancel``, ``cancel-reporting-run``,
``late-reporting-run``, ``finish-reporting-run``, ``own-run-admitted-late``. The recorded histories
(``tests/unit/test_replay_histories.py``) prove the replay; these show what the old
branches do.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import temporalio.workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus

from tests.markdown_support import HOSTILE
from tests.support import eventually
from tests.workflow.fakes import Act
from tests.workflow.harness import Env, admitting, ends_as_the_job_did, temporal_activity, workers
from tests.workflow.test_paused_at_deadline import SLOW_RETRIES, retry_in_backoff
from tests.workflow.test_push_bound import record
from workflows.job import (
    CANCEL_REPORTING_RUN,
    CANCELLED_END,
    CELL_PROGRESS,
    CORE_V2,
    CORE_V3,
    EXPLICIT_SUBMISSION,
    FAILED_EXECUTION,
    FINISH_REPORTING_RUN,
    JOB_INPUT_REPORTING_RUN,
    LATE_REPORTING_RUN,
    ONE_MEANING,
    OWN_RUN_ADMITTED_LATE,
    PAUSED_STEPS,
    PAUSED_STEPS_UNANSWERED,
    PUSH_BOUND,
    REPORTING_RUN,
    REPORTING_RUN_CANCEL,
)
from workflows.presentation_frozen import ESCAPED_METADATA

pytestmark = pytest.mark.integration

Unpatched = Callable[..., AsyncIterator[Env]]


@pytest.fixture
def unpatched(temporal_client: Client, temporal_address: str, monkeypatch: pytest.MonkeyPatch) -> Callable[..., object]:
    """``unpatched(*patch_ids)``: an :class:`Env` whose executions run as if started before those patches."""

    real = temporalio.workflow.patched

    @contextlib.asynccontextmanager
    async def run(*patch_ids: str) -> AsyncIterator[Env]:
        # Before any change made after core v2, an execution did not record core-v3 either.
        unseen = {*patch_ids, CORE_V3}
        monkeypatch.setattr(temporalio.workflow, "patched", lambda patch_id: patch_id not in unseen and real(patch_id))
        env = Env(temporal_client, temporal_address)
        async with workers(env, sandboxed=False):
            yield env

    return run


async def test_a_v1_execution_runs_search_fetch_and_deliver_as_three_activities(unpatched: Unpatched) -> None:
    async with unpatched(CORE_V2) as env:
        handle = await env.start(env.job({"t": ["a", "b"]}))
        final = await handle.result()
        scheduled = [name for _, name in await env.scheduled(handle)]
        live = await env.status(handle)

    assert final.status == "succeeded" and live == final
    assert scheduled == ["search", "fetch", "deliver", "deliver", "finish"]  # no acquire, finish not local
    (finish,) = env.fakes.finishes
    assert (finish.cause, finish.verdicts, finish.failures) == ("completed", {}, {})


async def test_a_v1_failed_job_completes_with_the_reason_the_frozen_rules_gave(unpatched: Unpatched) -> None:
    async with unpatched(CORE_V2) as env:
        env.fakes.on("fetch", "t", Act("fail", error_type="download_failed", non_retryable=True))
        handle = await env.start(env.job())
        final = await handle.result()  # before core v2 (and failed-execution) a failed job completed

    assert (final.status, final.cells[0].reason) == ("failed", "download_failed")
    (finish,) = env.fakes.finishes
    assert finish.verdicts == {"t": "download_failed"} and finish.failures == {}  # v1 decided the reason


async def test_a_v1_cancel_signal_records_the_cancel_then_ends_canceled(unpatched: Unpatched) -> None:
    async with unpatched(CORE_V2) as env:
        env.fakes.on("search", "t", Act("hang"))
        handle = await env.start(env.job())
        await env.beating(handle, "search")  # v1 searches in a "search" activity
        state = await env.status(handle)
        await handle.signal("cancel", "operator stop")
        assert await env.closed(handle) == WorkflowExecutionStatus.CANCELED
        scheduled = [name for _, name in await env.scheduled(handle)]
        final = await env.status(handle)

    assert (state.status, state.stage) == ("queued", "queued")  # v1's live state follows step results only
    assert scheduled == ["search", "request_cancel", "finish"]  # request_cancel an activity, not local
    assert final.status == "cancelled" and len(env.fakes.cancels) == 1


async def test_before_failed_execution_a_failed_job_completed(unpatched: Unpatched) -> None:
    async with unpatched(FAILED_EXECUTION) as env:
        env.fakes.on("search", "t", Act("fail", error_type="auth_failed", non_retryable=True))
        handle = await env.start(env.job())
        final = await handle.result()
        markers = await env.events(handle, EventType.EVENT_TYPE_MARKER_RECORDED)

    assert (final.status, final.cells[0].reason) == ("failed", "auth_failed")
    assert len(markers) >= 2  # core-v2's marker and finish's; none of failed-execution's


async def test_before_cell_progress_the_live_state_waits_for_the_step_result(unpatched: Unpatched) -> None:
    async with unpatched(CELL_PROGRESS) as env:
        env.fakes.on("fetch", "t", Act("held"))
        handle = await env.start(env.job())
        await env.called("fetch")  # the progress signal was sent before the fetch
        state = await env.status(handle)
        env.fakes.release("fetch")
        await handle.result()

    assert (state.status, state.stage, state.cells[0].work_id) == ("queued", "searching", None)


async def test_before_reporting_run_a_run_reporting_an_ended_job_published_its_state(unpatched: Unpatched) -> None:
    from curaflow.domain.messages import JobState
    from curaflow.jobs.submit import start_job
    from curaflow.protocol.task import manual_job_id

    async with unpatched(REPORTING_RUN) as env:
        key = f"k-reporting-{env.queue}"
        ended = JobState(job_id=manual_job_id("t", key), status="succeeded", stage="done", business_status="success")
        task = admitting(env, key, final=ended)
        handle = await start_job(env.client, task, task_queue=env.queue)
        assert JobState.model_validate(await handle.result()) == ended
        attributes = await env.search_attributes(handle)
        record(env, handle.id, "job_reporting_run_before_reporting_v2")  # the patch's pre-patch shape

    assert (attributes["JobStatus"], attributes["BusinessStatus"]) == ("succeeded", "success")


async def test_before_own_run_admitted_late_the_jobs_own_run_admitting_late_only_reported_it(
    unpatched: Unpatched,
) -> None:
    """The job's own run admitting its Task after the job ended (a reset of its open run the
    reconciler ended): before ``own-run-admitted-late`` it only reported the job — no
    ``JobStatus``, so the failed jobs' list named an expired job zero times."""
    from curaflow.domain.messages import JobState
    from curaflow.jobs.submit import start_job
    from curaflow.protocol.task import manual_job_id

    async with unpatched(OWN_RUN_ADMITTED_LATE) as env:
        key = f"k-own-late-{env.queue}"
        ended = JobState(job_id=manual_job_id("t", key), status="expired", stage="done", business_status="expired")
        handle = await start_job(env.client, admitting(env, key, final=ended, own_run=True), task_queue=env.queue)
        await ends_as_the_job_did(handle, ended, "job_expired")
        attributes = await env.search_attributes(handle)

    assert "JobStatus" not in attributes and "BusinessStatus" not in attributes


async def test_before_job_input_reporting_run_a_run_added_with_the_job_input_published_its_state(
    unpatched: Unpatched,
) -> None:
    """A run started with an ended job's ``JobInput`` (a reset, a start under its id), whose
    first step found the job ended and held by another run, published ``running`` and the
    job's end before ``job-input-reporting-run``: the failed jobs' list named the job twice."""
    from temporalio.client import WorkflowFailureError

    async with unpatched(JOB_INPUT_REPORTING_RUN) as env:
        env.fakes.on("search", "t", Act("ended_in_another_run"))
        handle = await env.start(env.job())
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        attributes = await env.search_attributes(handle)

    assert (attributes["JobStatus"], attributes["BusinessStatus"]) == ("failed", "no_candidate")


async def test_before_cancelled_end_a_run_reporting_a_cancelled_job_completed(unpatched: Unpatched) -> None:
    """A run added under the id of a job that ended ``cancelled`` completed with that state
    before ``cancelled-end`` (the id read a green Completed); it now ends Canceled
    (``tests/workflow/test_admission.py``)."""
    from curaflow.domain.messages import JobState
    from curaflow.jobs.submit import start_job
    from curaflow.protocol.task import manual_job_id

    async with unpatched(CANCELLED_END) as env:
        key = f"k-cancelled-{env.queue}"
        ended = JobState(job_id=manual_job_id("t", key), status="cancelled", stage="done", business_status="cancelled")
        handle = await start_job(env.client, admitting(env, key, final=ended), task_queue=env.queue)
        assert JobState.model_validate(await handle.result()) == ended
        assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED
        assert env.fakes.cancels == []


async def test_before_reporting_run_cancel_a_reporting_run_sent_cancel_stayed_open(unpatched: Unpatched) -> None:
    """A signal-with-start of ``cancel`` under the id of a job that ended ``cancelled``: before
    ``reporting-run-cancel`` the run reported the job and then waited for a Temporal cancel
    request it never asked for — open, its last workflow task done, nothing pending
    (``tests/workflow/test_admission.py``; history
    ``job_reporting_run_cancel_signal_before_end_core_v3``)."""
    from curaflow.domain.messages import JobState
    from curaflow.protocol.task import manual_job_id

    async with unpatched(REPORTING_RUN_CANCEL) as env:
        key = f"k-cancel-{env.queue}"
        job_id = manual_job_id("t", key)
        ended = JobState(job_id=job_id, status="cancelled", stage="done", business_status="cancelled")
        handle = await env.client.start_workflow(
            "JobWorkflow", admitting(env, key, final=ended), id=job_id, task_queue=env.queue, start_signal="cancel"
        )

        async def idle() -> bool:  # the run reported the job and its last workflow task is done
            history = await handle.fetch_history()
            last = history.events[-1].event_type
            pending = (EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED)
            return bool(env.fakes.admits) and last not in pending and (await handle.query("status")) is not None

        await eventually(idle, what="the reporting run idle")
        described = await handle.describe()
        state = JobState.model_validate(await handle.query("status"))
        await handle.terminate(reason="the test ended")

    assert described.status == WorkflowExecutionStatus.RUNNING
    assert state == ended and env.fakes.cancels == []  # it never asked Temporal to cancel it


@pytest.mark.parametrize("patched", [False, True], ids=["before", "after"])
async def test_a_job_input_run_sent_cancel_under_an_ended_jobs_id_published_its_state_before_cancel_reporting_run(
    unpatched: Unpatched, patched: bool
) -> None:
    """A run added with a job's ``JobInput`` under the id of a job that ended, sent ``cancel``
    before its first step (``request_cancel`` answers ``ended_in_another_run``): before
    ``cancel-reporting-run`` it published the job's end as its own ``JobStatus``; from the
    patch on it only reports the job
    (``tests/integration/test_job_identity.py::test_a_signal_with_start_cancel_under_an_ended_jobs_id_only_reports_the_job``)."""
    from curaflow.domain.messages import CancelAnswer

    async with unpatched(*(() if patched else (CANCEL_REPORTING_RUN,))) as env:
        env.fakes.cancel_answer = CancelAnswer(ended_in_another_run=True)
        inp = env.job()
        env.fakes.jobs[inp.job_id] = inp
        handle = await env.client.start_workflow(
            "JobWorkflow", inp, id=inp.job_id, task_queue=env.queue, start_signal="cancel"
        )
        assert await env.closed(handle) == WorkflowExecutionStatus.CANCELED
        attributes = await env.search_attributes(handle)

    assert env.fakes.steps() == [] and len(env.fakes.cancels) == 1
    assert ("JobStatus" in attributes) is not patched


@pytest.mark.parametrize("patched", [False, True], ids=["before", "after"])
async def test_a_job_input_run_past_its_deadline_under_an_ended_jobs_id_published_its_state_before_late_reporting_run(
    unpatched: Unpatched, patched: bool
) -> None:
    """A run added with a job's ``JobInput`` whose deadline is behind it (a reset of an ended
    job's run past its deadline) stops before its first step: before ``late-reporting-run``
    it published the job's end as its own ``JobStatus``; from the patch on it asks
    ``ended_elsewhere`` and only reports the job
    (``tests/integration/test_job_identity.py::test_a_run_added_with_the_job_input_after_the_jobs_deadline_only_reports_the_job``)."""
    async with unpatched(*(() if patched else (LATE_REPORTING_RUN,))) as env:
        env.fakes.ended_elsewhere = True
        handle = await env.start(env.job(deadline_ms=-1_000))
        assert await env.closed(handle) == WorkflowExecutionStatus.FAILED  # the fake finish: expired
        attributes = await env.search_attributes(handle)
        scheduled = [name for _, name in await env.scheduled(handle)]

    assert env.fakes.steps() == []
    assert ("ended_elsewhere" in scheduled) is patched
    assert ("JobStatus" in attributes) is not patched


@pytest.mark.parametrize("patched", [False, True], ids=["before", "after"])
async def test_a_run_whose_finish_found_its_job_ended_elsewhere_published_its_state_before_finish_reporting_run(
    unpatched: Unpatched, patched: bool
) -> None:
    """A run whose ``finish`` answers ``FinishedElsewhere`` (a reset of an ended job's closed
    run past its first step's result): before ``finish-reporting-run`` it published the
    job's end as its own ``JobStatus``; from the patch on it only reports the job, ending
    as the job did with the job's state as its result
    (``tests/integration/test_job_identity.py::test_a_reset_of_an_ended_jobs_run_past_its_first_step_only_reports_the_job``)."""
    async with unpatched(*(() if patched else (FINISH_REPORTING_RUN,))) as env:
        env.fakes.finish_elsewhere = True
        handle = await env.start(env.job())
        final = await handle.result()
        attributes = await env.search_attributes(handle)
        live = await env.status(handle)
        history = await handle.fetch_history()

    assert final.status == "succeeded" and live == final
    [result] = history.events[-1].workflow_execution_completed_event_attributes.result.payloads
    assert b"ended_in_another_run" not in result.data  # the run's result is the job's state
    assert len(env.fakes.finishes) == 1
    assert ("JobStatus" in attributes) is not patched and ("BusinessStatus" in attributes) is not patched


async def test_before_push_bound_a_jobs_end_waited_for_every_push(unpatched: Unpatched) -> None:
    """Before ``push-bound`` a job with a callback ended only once every push settled: a
    receiver down for 8 s after ``finish`` held the run that long, past today's bound of
    6 s for a 1 s push (``tests/workflow/test_push_bound.py``), and nothing was cancelled."""
    from curaflow.domain.execution import end_push_wait
    from curaflow.domain.messages import CallbackPolicy

    policy = CallbackPolicy(timeout_ms=1_000, initial_interval_ms=100, max_interval_ms=200)
    async with unpatched(PUSH_BOUND) as env:
        env.fakes.push_acts = [Act("fail", error_type="callback_failed", seconds=1.0)] * 7 + [Act()]
        handle = await env.start(env.job(callback=True, callback_policy=policy))
        assert (await handle.result()).status == "succeeded"
        history = await handle.fetch_history()
        scheduled = await env.scheduled(handle)

    finish = next(event_id for event_id, name in scheduled if name == "finish")
    finished = next(e for e in history.events if e.event_id == finish).event_time.ToDatetime()
    waited = history.events[-1].event_time.ToDatetime() - finished
    assert waited > end_push_wait(policy.timeout_ms, None)
    assert [e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED] == []
    assert env.fakes.push_cancels == 0


async def test_before_paused_steps_a_step_paused_at_the_deadline_ended_execution_timeout(
    unpatched: Unpatched,
) -> None:
    async with unpatched(PAUSED_STEPS) as env:
        env.fakes.on("deliver", "t", Act("fail", error_type="network_error"), route="a")
        handle = await env.start(env.job(deadline_ms=8_000, budgets=SLOW_RETRIES))
        activity_id = await retry_in_backoff(env, handle.id, "deliver")
        await asyncio.to_thread(temporal_activity, env, "pause", handle.id, activity_id)

        assert await env.closed(handle) == WorkflowExecutionStatus.FAILED
        [finish] = env.fakes.finishes
        assert not finish.failures["t"].paused
        assert (await env.status(handle)).cells[0].reason == "execution_timeout"


@pytest.mark.parametrize("after", ["search", "deliver"])
async def test_a_v1_bug_after_a_step_fails_the_workflow_task_not_the_job(
    unpatched: Unpatched, monkeypatch: pytest.MonkeyPatch, after: str
) -> None:
    # Only an ActivityError is a step's failure. The frozen copy took any exception of a
    # deliver step (asyncio.gather(return_exceptions=True)) for the verdict internal_error,
    # and a bug after a search or fetch ended its cell's task unseen — the job finished
    # with the ledger's reason for the cell. A bug fails the workflow task: the job waits,
    # open, for a fixed worker. No command changes where no bug happened.
    from workflows.job_v1 import JobV1

    real = JobV1._apply
    state = "selected" if after == "search" else "submitted"

    def broken(self: JobV1, cell: Any) -> None:
        if cell.state == state:
            raise TypeError(f"a bug after the {after} step")
        real(self, cell)

    monkeypatch.setattr(JobV1, "_apply", broken)
    async with unpatched(CORE_V2) as env:
        handle = await env.start(env.job())

        async def task_failed() -> bool:
            return bool(await env.events(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED))

        await eventually(task_failed, timeout_s=20, interval_s=0.1, what="a failed workflow task")
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
        assert env.fakes.finishes == []
        await env.terminate_open()


@pytest.mark.parametrize("before", [True, False], ids=["before", "after"])
async def test_before_explicit_submission_a_job_input_with_a_task_member_ran_as_the_job(
    unpatched: Unpatched, before: bool
) -> None:
    """A start input that is a valid ``JobInput`` *and* holds a member only a Task has
    (here ``protocol_version``): an execution started before ``explicit-submission`` took
    it for the admitted job and ran it (pydantic's smart union); from the patch on it is a
    Task to admit. The old branch's history is kept (``job_mixed_input_before_explicit_submission_v2``)."""
    async with unpatched(EXPLICIT_SUBMISSION if before else "no-such-patch") as env:
        inp = env.job()
        env.fakes.jobs[inp.job_id] = inp
        body = {**inp.model_dump(mode="json"), "protocol_version": "1"}
        handle = await env.client.start_workflow("JobWorkflow", body, id=inp.job_id, task_queue=env.queue)
        await env.closed(handle, timeout_s=30)
        if before:
            final = await env.status(handle)
            assert (final.status, env.fakes.admits) == ("succeeded", []), final
            assert [name for _, name in await env.scheduled(handle)] == ["acquire", "deliver", "finish"]
            record(env, handle.id, "job_mixed_input_before_explicit_submission_v2")
        else:
            assert env.fakes.admits == [body]  # admitted as a Task (and refused: it is no valid one)
            assert env.fakes.finishes == []


async def test_before_one_meaning_input_a_task_with_a_member_twice_ran_under_its_last_reading(
    unpatched: Unpatched,
) -> None:
    """A Task whose JSON text names ``limit`` twice: an execution started before
    ``one-meaning-input`` admitted the SDK decoder's reading (the last ``limit``) and ran the
    job; from the patch on it is refused with ``POST /jobs``'s ``duplicate_member``
    (``tests/workflow/test_admission.py``). The old branch's history is kept
    (``job_ambiguous_task_before_refusal_core_v3``)."""
    from curaflow.domain.messages import JobState
    from curaflow.protocol.task import manual_job_id
    from tests.support import short_id
    from tests.workflow.test_admission import json_payload, task_text

    async with unpatched(ONE_MEANING) as env:
        key = f"k-{short_id()}"
        job_id = manual_job_id("t", key)
        env.fakes.admit_as(env.job(job_id=job_id, trigger="temporal"))
        text = task_text(key, '{"target_id":"t","constraints":{"limit":0,"limit":2}}')
        handle = await env.client.start_workflow("JobWorkflow", json_payload(text), id=job_id, task_queue=env.queue)
        final = JobState.model_validate(await handle.result())

    assert final.status == "succeeded"
    assert [admitted["params"] for admitted in env.fakes.admits] == [{"target_id": "t", "constraints": {"limit": 2}}]


async def test_before_paused_steps_unanswered_a_failed_paused_steps_failed_the_run(unpatched: Unpatched) -> None:
    """``paused_steps`` failing at the deadline (Temporal's describe unanswered): an execution
    started before ``paused-steps-unanswered`` failed with the activity's error — no step
    stopped, no finish; from the patch on it names no pause and finishes ``expired``
    (``tests/workflow/test_paused_at_deadline.py``). The old branch's history is kept
    (``job_paused_steps_unanswered_before_caught_core_v3``)."""
    from temporalio.client import WorkflowFailureError
    from temporalio.exceptions import ApplicationError

    async with unpatched(PAUSED_STEPS_UNANSWERED) as env:
        env.fakes.paused_steps_error = "Temporal did not answer"
        env.fakes.on("search", "t", Act("hang"))
        handle = await env.start(env.job(deadline_ms=3_000))
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        await env.terminate_open()

    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "RPCError", cause
    assert env.fakes.finishes == []


async def test_before_escaped_start_metadata_a_scheduled_job_was_started_with_its_tags_as_markdown(
    unpatched: Unpatched,
) -> None:
    """A trampoline started before ``escaped-start-metadata`` gives its job the summary and
    details it always gave: the tags as they are, markup and all (the UI renders them). Its
    history is kept (``scheduled_occurrence_before_escaped_metadata``)."""
    from tests.workflow.test_start_metadata import callers, hostile_job, metadata, run_trampoline

    async with unpatched(ESCAPED_METADATA) as env:
        job = hostile_job(env)
        async with callers(env, job, sandboxed=False) as queue:
            trampoline = await run_trampoline(env, queue)
        summary, details = await metadata(env, job.job_id)
        record(env, trampoline, "scheduled_occurrence_before_escaped_metadata")

    assert f"t: {' AND '.join(HOSTILE)}" in summary
    assert "**plan** `plan`" in details and "- `t` → " in details


async def test_before_escaped_start_metadata_run_job_started_its_child_with_the_tasks_text_as_markdown(
    unpatched: Unpatched,
) -> None:
    """A user's workflow that called ``run_job`` before ``escaped-start-metadata`` starts the
    child job with the summary and details it always did: the Task's tags, key and
    correlation id as they are. Its history is kept (``one_new_work_before_escaped_metadata``)."""
    from curaflow.protocol.task import manual_job_id
    from tests.workflow.test_start_metadata import callers, hostile_task, metadata, run_one_new_work

    async with unpatched(ESCAPED_METADATA) as env:
        body = hostile_task(env)
        async with callers(env, sandboxed=False) as queue:
            parent = await run_one_new_work(env, queue, body)
        job_id = manual_job_id("t", body["idempotency_key"])
        summary, details = await metadata(env, job_id)
        record(env, parent, "one_new_work_before_escaped_metadata")

    assert f"t: {' AND '.join(HOSTILE)}" in summary
    assert f"**idempotency key** `{body['idempotency_key']}`" in details
    assert f"**correlation id** `{body['correlation_id']}`" in details


async def test_before_occurrence_abandons_its_job_cancelling_an_occurrence_cancelled_its_job(
    unpatched: Unpatched,
) -> None:
    """A trampoline started before ``occurrence-abandons-its-job`` awaits its job with the
    SDK's default cancellation type: its cancel is forwarded to the job, which ends
    cancelled, and the trampoline completes reporting it. Its history is kept
    (``scheduled_occurrence_cancelled_before_abandon``)."""
    from tests.workflow.test_occurrence_cancel import cancel_mid_job
    from workflows.scheduled import ABANDON_JOB_ON_CANCEL

    async with unpatched(ABANDON_JOB_ON_CANCEL) as env:
        trampoline_id, job_id = await cancel_mid_job(env, sandboxed=False)
        record(env, trampoline_id, "scheduled_occurrence_cancelled_before_abandon")
        trampoline = await env.client.get_workflow_handle(trampoline_id).describe()
        job = await env.client.get_workflow_handle(job_id).describe()
        result = await env.client.get_workflow_handle(trampoline_id).result()

    assert (trampoline.status, job.status) == (WorkflowExecutionStatus.COMPLETED, WorkflowExecutionStatus.CANCELED)
    assert (result["status"], result["execution"]) == ("cancelled", "canceled")


async def test_before_one_meaning_input_a_push_run_pushed_the_last_job_id_of_its_text(unpatched: Unpatched) -> None:
    """A push run started by hand with ``{"job_id":"a","job_id":"b"}``: a run started before
    ``push-one-meaning-input`` pushed job ``b``'s events (the SDK decoder's reading); from
    the patch on it is refused (``tests/workflow/test_untyped_start_input.py``). Its history
    is kept (``event_push_ambiguous_input_before_refusal``)."""
    from tests.workflow.test_untyped_start_input import push_by_hand, pushers
    from workflows.event_push import PUSH_ONE_MEANING

    async with unpatched(PUSH_ONE_MEANING) as env, pushers(env, sandboxed=False) as queue:
        push_id = await push_by_hand(env, queue, b'{"job_id":"a","job_id":"b"}')
        record(env, push_id, "event_push_ambiguous_input_before_refusal")
        report = await env.client.get_workflow_handle(push_id).result()

    assert report["job_id"] == "b" and [p.job_id for p in env.fakes.pushes] == ["b"]


async def test_before_one_meaning_input_an_occurrence_admitted_the_last_plan_of_its_text(
    unpatched: Unpatched,
) -> None:
    """A trampoline whose JSON text names ``schedule_id`` twice: one started before
    ``occurrence-one-meaning-input`` admitted the last plan's job and ran it; from the patch
    on it is refused (``tests/workflow/test_untyped_start_input.py``). Its history is kept
    (``scheduled_occurrence_ambiguous_input_before_refusal``)."""
    from tests.support import short_id
    from tests.workflow.test_start_metadata import callers
    from tests.workflow.test_untyped_start_input import occurrence_by_hand, occurrence_text
    from workflows.scheduled import OCCURRENCE_ONE_MEANING

    async with unpatched(OCCURRENCE_ONE_MEANING) as env:
        job = env.job(job_id=f"other@{short_id()}", schedule_id="other", trigger="schedule")
        env.fakes.jobs[job.job_id] = job
        async with callers(env, job, sandboxed=False) as queue:
            trampoline_id = await occurrence_by_hand(env, queue, occurrence_text(env, ("plan", "other")))
            record(env, trampoline_id, "scheduled_occurrence_ambiguous_input_before_refusal")
            result = await env.client.get_workflow_handle(trampoline_id).result()

    assert (result["job_id"], result["status"]) == (job.job_id, "succeeded")
    assert env.fakes.steps() != []  # the job ran

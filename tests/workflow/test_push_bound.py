"""A job's end waits for its callback pushes only so long.

After ``finish`` the job's execution pushes the terminal event and waits for its pushes
to settle — at most :func:`curaflow.domain.pushes.end_push_wait_ms` (one push's time plus
a grace), never past what its run may still last; then it hands the rest to the sweeper
(the ledger keeps every event pending) and closes with the job's result.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle

from curaflow.domain.execution import JOB_TASK_TIMEOUT, end_push_wait
from curaflow.domain.messages import CallbackPolicy, JobState
from curaflow.protocol.task import manual_job_id
from tests.support import recorded_history, short_id, temporal_workflow
from tests.workflow.fakes import Act
from tests.workflow.harness import Env, task_for

pytestmark = pytest.mark.integration

#: A short push policy: one POST of 1 s, retried after 0.1 s … 0.2 s.
POLICY = CallbackPolicy(timeout_ms=1_000, initial_interval_ms=100, max_interval_ms=200)


@pytest.mark.parametrize(
    "receiver",
    [
        pytest.param(Act("fail", error_type="callback_failed"), id="refused"),
        pytest.param(Act("fail", error_type="callback_failed", seconds=1.0), id="hangs-until-the-timeout"),
    ],
)
async def test_a_down_receiver_holds_the_jobs_end_no_longer_than_the_bound(env: Env, receiver: Act) -> None:
    env.fakes.push_acts = [receiver]
    handle = await env.start(env.job(callback=True, callback_policy=POLICY))

    # The run closes with the job's result (before: Running until the policy's retries
    # ended — with no ledger budget here, never).
    assert await env.closed(handle, timeout_s=30) == WorkflowExecutionStatus.COMPLETED
    assert (await handle.result()).status == "succeeded"
    assert len(env.fakes.pushes) > 2  # the receiver was tried again and again

    history = await handle.fetch_history()
    scheduled = await env.scheduled(handle)
    # The first push (job.accepted) never settled: no other was scheduled after it.
    assert [name for _, name in scheduled] == ["push_events", "acquire", "deliver", "finish"], scheduled
    finished = next(e for e in history.events if e.event_id == scheduled[-1][0]).event_time.ToDatetime()
    closed = history.events[-1].event_time.ToDatetime()
    bound = end_push_wait(POLICY.timeout_ms, None)
    assert bound <= closed - finished < bound + timedelta(seconds=3)
    # The push in flight was cancelled, not waited for: the rest is the sweeper's.
    pushes = {event_id for event_id, name in scheduled if name == "push_events"}
    cancelled = [
        e.activity_task_cancel_requested_event_attributes.scheduled_event_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED
    ]
    assert len(cancelled) == 1 and cancelled[0] in pushes
    assert "push-bound" in await patches(handle)
    if receiver.seconds == 0:
        record(env, handle.id, "job_callback_handed_over_core_v3")


async def test_a_down_receiver_never_times_out_a_run_its_starter_limited(env: Env) -> None:
    # A Temporal client started the job with a run timeout shorter than the bound plus the
    # job's own time; the job delivered at once and its receiver is down: the run ends
    # with the job's result, JOB_TASK_TIMEOUT before its limit — never TimedOut.
    key = f"k-{short_id()}"
    job = env.job(job_id=manual_job_id("t", key), trigger="temporal", callback=True, callback_policy=POLICY)
    env.fakes.admit_as(job)
    env.fakes.push_acts = [Act("fail", error_type="callback_failed")]
    body = task_for(key)
    limit = timedelta(seconds=8)
    assert limit - JOB_TASK_TIMEOUT < end_push_wait(POLICY.timeout_ms, None)  # the run's limit cuts the wait
    handle: WorkflowHandle[Any, Any] = await env.client.start_workflow(
        "JobWorkflow", body, id=job.job_id, task_queue=env.queue, run_timeout=limit
    )

    assert await env.closed(handle, timeout_s=30) == WorkflowExecutionStatus.COMPLETED
    assert JobState.model_validate(await handle.result()).status == "succeeded"
    history = await handle.fetch_history()
    started, closed = (history.events[i].event_time.ToDatetime() for i in (0, -1))
    assert closed - started <= limit - JOB_TASK_TIMEOUT + timedelta(seconds=1)


async def test_a_receiver_that_answers_within_the_bound_has_every_push_before_the_end(env: Env) -> None:
    # Down for three attempts (0.1 s … 0.2 s apart), then it answers: the job waits for it.
    env.fakes.push_acts = [Act("fail", error_type="callback_failed")] * 3 + [Act()]
    handle = await env.start(env.job(callback=True, callback_policy=POLICY))

    assert (await handle.result()).status == "succeeded"
    scheduled = await env.scheduled(handle)
    assert [name for _, name in scheduled][-2:] == ["finish", "push_events"], scheduled
    pushes = {event_id for event_id, name in scheduled if name == "push_events"}
    history = await handle.fetch_history()
    completed = {
        e.activity_task_completed_event_attributes.scheduled_event_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
    }
    assert pushes <= completed  # every push settled, none was handed over
    assert env.fakes.push_cancels == 0
    assert await env.events(handle, EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED) == []
    assert "push-bound" in await patches(handle)
    record(env, handle.id, "job_callback_core_v3")


async def test_a_job_without_a_callback_keeps_its_history(env: Env) -> None:
    """The common path: a job without a callback waits for no push, and its history is the
    one it had before the bound (no marker, no timer of the pushes)."""
    handle = await env.start(env.job())

    assert (await handle.result()).status == "succeeded"
    history = await handle.fetch_history()
    assert [EventType.Name(e.event_type).removeprefix("EVENT_TYPE_") for e in history.events] == NO_CALLBACK_HISTORY


#: The history of a one-target, one-route job without a callback (the fakes' timings: the
#: ``cell_progress`` signal arrives while the fetch runs).
NO_CALLBACK_HISTORY = [
    "WORKFLOW_EXECUTION_STARTED",
    "WORKFLOW_TASK_SCHEDULED",
    "WORKFLOW_TASK_STARTED",
    "WORKFLOW_TASK_COMPLETED",
    "MARKER_RECORDED",  # core-v3
    "UPSERT_WORKFLOW_SEARCH_ATTRIBUTES",  # JobStatus running
    "ACTIVITY_TASK_SCHEDULED",  # acquire
    "TIMER_STARTED",  # the job's deadline
    "ACTIVITY_TASK_STARTED",
    "ACTIVITY_TASK_COMPLETED",
    "WORKFLOW_TASK_SCHEDULED",
    "WORKFLOW_TASK_STARTED",
    "WORKFLOW_TASK_COMPLETED",
    "UPSERT_WORKFLOW_SEARCH_ATTRIBUTES",  # JobStatus
    "ACTIVITY_TASK_SCHEDULED",  # deliver
    "ACTIVITY_TASK_STARTED",
    "ACTIVITY_TASK_COMPLETED",
    "WORKFLOW_TASK_SCHEDULED",
    "WORKFLOW_TASK_STARTED",
    "WORKFLOW_TASK_COMPLETED",
    "MARKER_RECORDED",  # finish (local)
    "UPSERT_WORKFLOW_SEARCH_ATTRIBUTES",  # JobStatus succeeded, BusinessStatus
    "WORKFLOW_EXECUTION_COMPLETED",
]


async def patches(handle: WorkflowHandle[Any, Any]) -> list[str]:
    """The ``workflow.patched`` ids the execution recorded."""
    history = await handle.fetch_history()
    return [
        json.loads(e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)["id"]
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
        and e.marker_recorded_event_attributes.marker_name == "core_patch"
    ]


def record(env: Env, workflow_id: str, name: str) -> None:
    """Write ``workflow_id``'s history to tests/histories (``CURAFLOW_RECORD_HISTORIES=1``)."""
    if os.environ.get("CURAFLOW_RECORD_HISTORIES") != "1":
        return
    done = temporal_workflow(env.address, "show", "-w", workflow_id, "-o", "json")
    assert done.returncode == 0, done.stderr
    (Path(__file__).resolve().parents[1] / "histories" / f"{name}.json").write_text(recorded_history(done.stdout))

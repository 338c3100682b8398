"""Barriers beyond the ones every step meets (``test_job_workflow.py``): a deadline already
past at start, a deadline or a cancel a step found in the ledger, a barrier in a multi-cell
job, and the push of a job's events to its callback around all of it.
"""

from __future__ import annotations

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus

from curaflow.domain.verdicts import FinishCause
from tests.workflow.fakes import Act
from tests.workflow.harness import Env

pytestmark = pytest.mark.integration


async def test_a_job_whose_deadline_passed_before_it_started_runs_no_step(env: Env) -> None:
    handle = await env.start(env.job(deadline_ms=-1000))

    assert await env.closed(handle) == WorkflowExecutionStatus.FAILED

    assert env.fakes.steps() == []
    assert [f.cause for f in env.fakes.finishes] == [FinishCause.DEADLINE]
    assert await env.events(handle, EventType.EVENT_TYPE_TIMER_STARTED) == []  # no deadline timer to wait for
    assert (await env.status(handle)).status == "expired"


@pytest.mark.parametrize("step", ["search", "fetch", "deliver"])
async def test_a_deadline_a_step_found_in_the_ledger_stops_the_job(env: Env, step: str) -> None:
    env.fakes.on(step, "t", Act("deadline_found"), route="a" if step == "deliver" else None)
    handle = await env.start(env.job())

    assert await env.closed(handle) == WorkflowExecutionStatus.FAILED

    assert env.fakes.steps() == ["search", "fetch", "deliver"][: ["search", "fetch", "deliver"].index(step) + 1]
    assert [f.cause for f in env.fakes.finishes] == [FinishCause.DEADLINE]
    assert await env.events(handle, EventType.EVENT_TYPE_TIMER_FIRED) == []  # the ledger said so first
    state = await env.status(handle)
    assert (state.status, state.cells[0].reason) == ("expired", "execution_timeout")


async def test_a_cancel_one_cell_found_stops_every_cell(env: Env) -> None:
    env.fakes.on("search", "one", Act("hang")).on("deliver", "two", Act("cancel_found"), route="a")
    handle = await env.start(env.job({"one": ["a"], "two": ["a"]}))

    assert await env.closed(handle) == WorkflowExecutionStatus.CANCELED

    assert env.fakes.steps("one") == ["search"]  # its search was stopped, nothing after it
    assert [f.cause for f in env.fakes.finishes] == [FinishCause.CANCELLED] and len(env.fakes.cancels) == 1
    cancelled = await env.events(handle, EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED)
    assert len(cancelled) == 1  # one in-flight step (cell one's search) to stop
    state = await env.status(handle)
    assert [(c.target_id, c.reason) for c in state.cells] == [
        ("one", "cancelled_by_consumer"),
        ("two", "cancelled_by_consumer"),
    ]


async def test_a_job_with_a_callback_pushes_its_events_at_start_after_each_step_and_at_the_end(env: Env) -> None:
    handle = await env.start(env.job(callback=True))

    await handle.result()

    assert env.fakes.pushes, "push_events never ran"
    assert {p.job_id for p in env.fakes.pushes} == {handle.id}
    names = [name for _, name in await env.scheduled(handle)]
    # The last push follows finish (the terminal event), and the job waited for it.
    assert names[-2:] == ["finish", "push_events"], names
    assert names.index("push_events") < names.index("acquire")  # job.accepted, before the first step


async def test_a_job_without_a_callback_pushes_nothing(env: Env) -> None:
    handle = await env.start(env.job())

    await handle.result()

    assert env.fakes.pushes == []
    assert "push_events" not in [name for _, name in await env.scheduled(handle)]

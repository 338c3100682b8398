"""An operator pauses a job's step (``temporal activity pause``, the UI's "Pause") and nobody
unpauses it before the job's deadline: the cell ends ``step_paused`` (owner ``operator``),
not ``execution_timeout`` ("retry with a longer deadline_ms", owner ``curaflow``). A pause
that held nothing yet — the attempt still running at the deadline — is not named
(DESIGN.md "Foreign input: what a Temporal client or an operator sends a running job")."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import WorkflowExecutionStatus

from curaflow.domain.messages import Budgets
from tests.support import eventually
from tests.workflow.fakes import Act
from tests.workflow.harness import Env, temporal_activity
from tests.workflow.test_push_bound import record

pytestmark = pytest.mark.integration

#: A retry of a failed attempt is due 30 s later: the step waits in Temporal's backoff.
SLOW_RETRIES = Budgets(
    heartbeat_interval_ms=500,
    queued_timeout_ms=2_000,
    stall_timeout_ms=2_000,
    retry_initial_interval_ms=30_000,
    retry_max_interval_ms=30_000,
    delivery_max_attempts=3,
    source_max_attempts=3,
)


async def pending(env: Env, job_id: str, activity_type: str) -> tuple[str, int, int] | None:
    """``(activity id, state, attempt)`` of the job's pending ``activity_type`` step."""
    described = await env.client.get_workflow_handle(job_id).describe()
    for p in described.raw_description.pending_activities:
        if p.activity_type.name == activity_type:
            return p.activity_id, p.state, p.attempt
    return None


async def retry_in_backoff(env: Env, job_id: str, activity_type: str) -> str:
    """The activity id of the job's ``activity_type`` step once its first attempt failed
    and its retry waits in Temporal's backoff."""

    async def in_backoff() -> str | None:
        found = await pending(env, job_id, activity_type)
        return found[0] if found is not None and found[2] >= 2 else None

    return await eventually(in_backoff, timeout_s=10, what=f"the {activity_type} retry in backoff")


@pytest.mark.parametrize("step", ["acquire", "deliver"])
async def test_a_step_paused_until_the_deadline_ends_step_paused_the_operators(env: Env, step: str) -> None:
    # The first attempt fails (retryable); its retry is due in 30 s. The operator pauses
    # the step meanwhile and the deadline (8 s) passes with the step still paused. It
    # ended `expired / execution_timeout` ("retry with a longer deadline_ms or a narrower
    # query", owner curaflow), naming no pause.
    source = step == "acquire"
    env.fakes.on(
        "search" if source else "deliver", "t", Act("fail", error_type="network_error"), route=None if source else "a"
    )
    handle = await env.start(env.job(deadline_ms=8_000, budgets=SLOW_RETRIES))

    activity_id = await retry_in_backoff(env, handle.id, step)
    await asyncio.to_thread(temporal_activity, env, "pause", handle.id, activity_id)

    assert await env.closed(handle) == WorkflowExecutionStatus.FAILED
    [finish] = env.fakes.finishes
    assert finish.cause == "deadline"
    assert finish.failures["t"].paused, finish.failures
    state = await env.status(handle)
    assert (state.status, state.cells[0].reason) == ("expired", "step_paused"), state.cells[0]


async def test_a_pause_of_an_attempt_still_running_at_the_deadline_is_not_named(env: Env) -> None:
    # Paused while its attempt runs on regardless (a send already out is never cut for a
    # pause), the step is only `PAUSE_REQUESTED` at the deadline: the pause held nothing
    # yet, and the job's end does not name it. (An attempt that stops at the pause — a
    # download — leaves the step `PAUSED`: the pause holds it, as in the test above.)
    env.fakes.on("deliver", "t", Act("slow", seconds=8), route="a")
    handle = await env.start(env.job(deadline_ms=5_000))
    await env.called("deliver")
    found = await pending(env, handle.id, "deliver")
    assert found is not None
    await asyncio.to_thread(temporal_activity, env, "pause", handle.id, found[0])
    after = await pending(env, handle.id, "deliver")
    assert after is not None and after[1] == PendingActivityState.PENDING_ACTIVITY_STATE_PAUSE_REQUESTED, after

    await env.closed(handle)
    [finish] = env.fakes.finishes
    assert finish.cause == "deadline"
    assert not any(f.paused for f in finish.failures.values()), finish.failures
    state = await env.status(handle)
    assert state.cells[0].reason != "step_paused", state.cells[0]


async def test_a_deadline_whose_paused_steps_question_goes_unanswered_still_ends_the_job_expired(env: Env) -> None:
    # Temporal does not answer the `paused_steps` describe at the deadline (a frontend
    # restarting, overloaded): the local activity's failure reaches the workflow as the
    # activity's own ApplicationError — not an ActivityError, which is what `_paused_steps`
    # caught to "name no pause, as before". The run failed with the RPCError itself: no
    # finish, the job still open in the ledger, the execution's failure a transport error.
    env.fakes.paused_steps_error = "Temporal did not answer: deadline exceeded"
    env.fakes.on("search", "t", Act("hang"))
    handle = await env.start(env.job(deadline_ms=3_000))
    await env.called("search")

    assert await env.closed(handle) == WorkflowExecutionStatus.FAILED
    record(env, handle.id, "job_paused_steps_unanswered_core_v3")
    [finish] = env.fakes.finishes
    assert finish.cause == "deadline"
    assert not any(f.paused for f in finish.failures.values()), finish.failures
    state = await env.status(handle)
    assert (state.status, state.cells[0].reason) == ("expired", "execution_timeout"), state.cells[0]

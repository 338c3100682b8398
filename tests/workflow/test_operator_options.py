"""An operator changes a running step's options in the Temporal UI or CLI (``temporal
activity update-options``): the job ends once, and its report does not blame a worker, the
job's deadline or the route for what the operator did (DESIGN.md "Foreign input: what a
Temporal client or an operator sends a running job")."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import WorkflowExecutionStatus

from curaflow.domain.verdicts import FailureKind
from tests.workflow.fakes import Act
from tests.workflow.harness import Env, pending_step_id, temporal_activity

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("step", ["search", "fetch", "deliver"])
async def test_a_step_an_operator_timed_out_ends_the_job_failed_step_options_changed_not_expired_or_the_routes(
    env: Env, step: str
) -> None:
    # The attempt runs on (heartbeating); the operator gives the step a 1 s start-to-close
    # timeout and one attempt: Temporal times it out, the job's deadline (60 s) far ahead.
    # It ended `expired / stalled_no_heartbeat` ("a worker died or hung") for a source step
    # and `failed / delivery_abandoned` (the route's) for a delivery, then `internal_error`
    # (curaflow's bug) for both.
    env.fakes.on(step, "t", Act("hang"), route="a" if step == "deliver" else None)
    handle = await env.start(env.job())
    await env.called(step)
    step_id = await pending_step_id(handle, step)

    await asyncio.to_thread(
        temporal_activity,
        env,
        "update-options",
        handle.id,
        step_id,
        "--start-to-close-timeout",
        "1s",
        "--retry-maximum-attempts",
        "1",
    )

    assert await env.closed(handle) == WorkflowExecutionStatus.FAILED
    [finish] = env.fakes.finishes
    assert (finish.failures["t"].kind, finish.failures["t"].timeout_type) == (FailureKind.TIMEOUT, "START_TO_CLOSE")
    state = await env.status(handle)
    assert (state.status, state.cells[0].reason) == ("failed", "step_options_changed"), state.cells[0]


@pytest.mark.parametrize(("step", "error_type"), [("deliver", "delivery_failed"), ("search", "network_error")])
async def test_a_step_whose_retries_an_operator_cut_ends_step_options_changed_not_the_routes(
    env: Env, step: str, error_type: str
) -> None:
    # The operator leaves the step one attempt (`--retry-maximum-attempts 1`, no timeout
    # changed); the running attempt then fails as a route or a source may, retryably:
    # Temporal reports MAXIMUM_ATTEMPTS_REACHED on attempt 1 of curaflow's 3 (the fakes'). A
    # delivery ended `delivery_abandoned`, owner route, "no delivery attempt was left"; a
    # source step the source's own reason — each with its retries still ahead.
    route = "a" if step == "deliver" else None
    env.fakes.on(step, "t", Act("held_fail", error_type=error_type), route=route)
    handle = await env.start(env.job())
    await env.called(step)
    step_id = await pending_step_id(handle, step)

    await asyncio.to_thread(
        temporal_activity, env, "update-options", handle.id, step_id, "--retry-maximum-attempts", "1"
    )
    env.fakes.release(step, "t", route)

    assert await env.closed(handle) == WorkflowExecutionStatus.FAILED
    [finish] = env.fakes.finishes
    seen = finish.failures["t"]
    assert (seen.kind, seen.retry_state, seen.error_type) == (
        FailureKind.APPLICATION,
        "MAXIMUM_ATTEMPTS_REACHED",
        error_type,
    )
    state = await env.status(handle)
    assert (state.status, state.cells[0].reason) == ("failed", "step_options_changed"), state.cells[0]
    assert len([c for c in env.fakes.calls if c.step == step]) == 1


async def test_a_delivery_that_used_every_attempt_of_curaflows_policy_stays_abandoned(env: Env) -> None:
    # Guard: the same failure on the last attempt curaflow's own policy gives is the route's.
    env.fakes.on("deliver", "t", Act("fail", error_type="delivery_failed"), route="a")
    handle = await env.start(env.job())  # three attempts of a delivery (the fakes' budgets)

    assert await env.closed(handle) == WorkflowExecutionStatus.FAILED
    state = await env.status(handle)
    assert (state.status, state.cells[0].reason) == ("failed", "delivery_abandoned"), state.cells[0]
    assert len([c for c in env.fakes.calls if c.step == "deliver"]) == 3


@pytest.mark.parametrize("step", ["search", "deliver"])
@pytest.mark.parametrize(
    ("verb", "extra"), [("fail", ("--reason", "operator: test")), ("complete", ("--result", '"junk"'))]
)
async def test_a_step_ended_by_hand_ends_the_job_step_ended_by_hand_not_internal_error(
    env: Env, step: str, verb: str, extra: tuple[str, ...]
) -> None:
    # `temporal activity fail` (the failure's source is `CLI`) or `temporal activity
    # complete` with junk on the running step: the cell ended `internal_error`, "An
    # internal error occurred; read the worker's log", owner curaflow — a bug of curaflow's
    # that never happened.
    env.fakes.on(step, "t", Act("hang"), route="a" if step == "deliver" else None)
    handle = await env.start(env.job())
    await env.called(step)
    step_id = await pending_step_id(handle, step)

    await asyncio.to_thread(temporal_activity, env, verb, handle.id, step_id, *extra)

    assert await env.closed(handle) == WorkflowExecutionStatus.FAILED
    [finish] = env.fakes.finishes
    assert finish.failures["t"].by_hand, finish.failures
    state = await env.status(handle)
    assert (state.status, state.cells[0].reason) == ("failed", "step_ended_by_hand"), state.cells[0]

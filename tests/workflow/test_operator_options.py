"""An operator changes a running step's options in the Temporal UI or CLI (``temporal
activity update-options``): the job ends once, and its report does not blame a worker, the
job's deadline or the route for what the operator did (DESIGN.md "Foreign input: what a
Temporal client or an operator sends a running job")."""

from __future__ import annotations

import asyncio
import subprocess

import pytest
from temporalio.client import WorkflowExecutionStatus

from curaflow.devstack.temporal import temporal_binary
from curaflow.domain.verdicts import FailureKind
from tests.workflow.fakes import Act
from tests.workflow.harness import ACTIVITY_OF, Env

pytestmark = pytest.mark.integration


def update_options(env: Env, job_id: str, activity_id: str, *options: str) -> None:
    done = subprocess.run(
        [
            temporal_binary(),
            "activity",
            "update-options",
            "--address",
            env.address,
            "-w",
            job_id,
            "-a",
            activity_id,
            *options,
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr


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
    described = await handle.describe()
    step_id = next(
        p.activity_id for p in described.raw_description.pending_activities if p.activity_type.name == ACTIVITY_OF[step]
    )

    await asyncio.to_thread(
        update_options, env, handle.id, step_id, "--start-to-close-timeout", "1s", "--retry-maximum-attempts", "1"
    )

    assert await env.closed(handle) == WorkflowExecutionStatus.FAILED
    [finish] = env.fakes.finishes
    assert (finish.failures["t"].kind, finish.failures["t"].timeout_type) == (FailureKind.TIMEOUT, "START_TO_CLOSE")
    state = await env.status(handle)
    assert (state.status, state.cells[0].reason) == ("failed", "step_options_changed"), state.cells[0]


def activity_by_hand(env: Env, verb: str, job_id: str, activity_id: str, *extra: str) -> None:
    done = subprocess.run(
        [temporal_binary(), "activity", verb, "--address", env.address, "-w", job_id, "-a", activity_id, *extra],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr


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
    described = await handle.describe()
    step_id = next(
        p.activity_id for p in described.raw_description.pending_activities if p.activity_type.name == ACTIVITY_OF[step]
    )

    await asyncio.to_thread(activity_by_hand, env, verb, handle.id, step_id, *extra)

    assert await env.closed(handle) == WorkflowExecutionStatus.FAILED
    [finish] = env.fakes.finishes
    assert finish.failures["t"].by_hand, finish.failures
    state = await env.status(handle)
    assert (state.status, state.cells[0].reason) == ("failed", "step_ended_by_hand"), state.cells[0]

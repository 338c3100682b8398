"""A step's retryable failure carries its attempt's number to the workflow.

Temporal's ``ActivityError`` says why it retried no more (``retry_state``) but not which
attempt failed; the workflow needs both to tell an operator's cut of a step's retries
(``temporal activity update-options --retry-maximum-attempts 1``) from the step's own
attempts running out (:func:`curaflow.domain.verdicts.failures.operator_changed_options`).
The worker's activity interceptors (:func:`curaflow.process.telemetry.interceptors_for_worker`,
every worker of curaflow) add it to each retryable ``ApplicationError`` of a cell's step.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput

from curaflow.domain.verdicts.failures import attempt_detail, attempt_of
from curaflow.process.telemetry import interceptors_for_worker


class _Raises(ActivityInboundInterceptor):
    """The activity itself: raises ``err``."""

    def __init__(self, err: BaseException) -> None:  # the innermost: no next
        self.err = err

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        raise self.err


async def raised(err: BaseException, *, activity_type: str = "deliver", attempt: int = 3) -> BaseException:
    """What an attempt of ``activity_type`` raising ``err`` raises through the worker's interceptors."""
    inbound: ActivityInboundInterceptor = _Raises(err)
    for interceptor in reversed(interceptors_for_worker(None)):
        inbound = interceptor.intercept_activity(inbound)
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, activity_type=activity_type, attempt=attempt)

    async def attempt_of_step() -> None:
        await inbound.execute_activity(ExecuteActivityInput(fn=attempt_of_step, args=[], executor=None, headers={}))

    with pytest.raises(BaseException) as caught:
        await env.run(attempt_of_step)
    return caught.value


@pytest.mark.parametrize("step", ["acquire", "search", "fetch", "deliver"])
async def test_a_retryable_failure_of_a_step_carries_its_attempt(step: str) -> None:
    cause = ValueError("the route answered 503")
    try:
        raise ApplicationError(
            "discord: HTTP 503", {"kept": 1}, type="delivery_failed", next_retry_delay=timedelta(seconds=7)
        ) from cause
    except ApplicationError as err:
        out = await raised(err, activity_type=step, attempt=3)
    assert isinstance(out, ApplicationError)
    assert attempt_of(out.details) == 3
    assert out.details[0] == {"kept": 1}  # the step's own details first, as they were
    assert (out.message, out.type, out.non_retryable, out.next_retry_delay) == (
        "discord: HTTP 503",
        "delivery_failed",
        False,
        timedelta(seconds=7),
    )
    assert out.__cause__ is cause


async def test_a_final_failure_and_other_activities_are_left_as_raised() -> None:
    final = ApplicationError("refused", type="delivery_rejected", non_retryable=True)
    assert await raised(final) is final  # Temporal retries it no more whatever the policy
    pushed = ApplicationError("receiver down", type="callback_failed")
    assert await raised(pushed, activity_type="push_events") is pushed
    noted = ApplicationError("noted", attempt_detail(2), type="delivery_failed")
    assert await raised(noted, attempt=2) is noted  # already carries it
    bug = RuntimeError("a bug")
    assert await raised(bug) is bug  # curaflow's own exception: Temporal names it by its class

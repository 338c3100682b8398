"""The attempt budget a step is judged against (:func:`activities.errors.attempts_granted`):
the workflow's scheduled maximum, raised — never lowered — by the retry policy Temporal
holds for the step (an operator's ``temporal activity update-options``): the one it holds
now, asked from the scheduled last attempt on, else the one the attempt started with."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.common import RetryPolicy
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import ActivityEnvironment

from activities.errors import UNLIMITED_ATTEMPTS, attempts_granted


class HeldPolicy:
    """A Temporal client whose describe of the run holds the step's retry maximum ``held``
    (None: the run holds no such step; an ``RPCError``: Temporal does not answer)."""

    def __init__(self, held: int | RPCError | None, activity_id: str = "test") -> None:
        self.held, self.activity_id, self.asked = held, activity_id, 0

    def get_workflow_handle(self, workflow_id: str, *, run_id: str | None = None) -> Any:
        return SimpleNamespace(describe=self.describe)

    async def describe(self, *, rpc_timeout: timedelta | None = None) -> Any:
        self.asked += 1
        if isinstance(self.held, RPCError):
            raise self.held
        pending = (
            [] if self.held is None else [PendingActivityInfo(activity_id=self.activity_id, maximum_attempts=self.held)]
        )
        return SimpleNamespace(raw_description=SimpleNamespace(pending_activities=pending))


def granted(scheduled: int, policy: RetryPolicy | None, *, attempt: int = 1, client: Any = None) -> int:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, retry_policy=policy, attempt=attempt)
    return asyncio.run(env.run(attempts_granted, scheduled, client))


@pytest.mark.parametrize(
    ("scheduled", "held", "expected"),
    [
        (12, 12, 12),  # as scheduled
        (2, 5, 5),  # an operator raised it: the attempts granted
        (12, 1, 12),  # lowered: the workflow names the cut (step_options_changed), not the step
        (12, 0, UNLIMITED_ATTEMPTS),  # 0 is Temporal's "unlimited"
    ],
)
def test_the_budget_is_the_larger_of_the_scheduled_and_the_held_maximum(
    scheduled: int, held: int, expected: int
) -> None:
    assert granted(scheduled, RetryPolicy(maximum_attempts=held)) == expected


def test_an_attempt_without_a_policy_keeps_the_scheduled_budget() -> None:
    assert granted(7, None) == 7


@pytest.mark.parametrize(
    ("held_now", "expected"),
    [
        (5, 5),  # raised while the scheduled last attempt ran
        (0, UNLIMITED_ATTEMPTS),  # raised to unlimited meanwhile
        (1, 2),  # lowered meanwhile: the workflow's cut, the scheduled budget stands
    ],
)
def test_from_the_scheduled_last_attempt_on_the_budget_is_the_one_temporal_holds_now(
    held_now: int, expected: int
) -> None:
    client = HeldPolicy(held_now)
    assert granted(2, RetryPolicy(maximum_attempts=2), attempt=2, client=client) == expected
    assert client.asked == 1


def test_below_the_scheduled_last_attempt_temporal_is_not_asked() -> None:
    client = HeldPolicy(5)
    assert granted(3, RetryPolicy(maximum_attempts=3), attempt=2, client=client) == 3
    assert client.asked == 0


@pytest.mark.parametrize(
    "client",
    [HeldPolicy(RPCError("unavailable", RPCStatusCode.UNAVAILABLE, b"")), HeldPolicy(None), HeldPolicy(9, "other")],
)
def test_no_answer_keeps_the_policy_the_attempt_started_with(client: HeldPolicy) -> None:
    assert granted(2, RetryPolicy(maximum_attempts=4), attempt=2, client=client) == 4

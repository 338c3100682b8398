"""The attempt budget a step is judged against (:func:`activities.errors.attempts_granted`):
the workflow's scheduled maximum, raised — never lowered — by the retry policy Temporal
holds for the attempt (an operator's ``temporal activity update-options``)."""

from __future__ import annotations

import dataclasses

import pytest
from temporalio.common import RetryPolicy
from temporalio.testing import ActivityEnvironment

from activities.errors import UNLIMITED_ATTEMPTS, attempts_granted


def granted(scheduled: int, policy: RetryPolicy | None) -> int:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, retry_policy=policy)
    return env.run(attempts_granted, scheduled)


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

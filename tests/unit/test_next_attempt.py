"""When a step's next attempt comes, as the retry policy Temporal holds for the attempt
says (:func:`activities.errors.next_attempt`), and the failure of an attempt on a worker
that does not know the job's route or account (:func:`activities.errors.config_mismatch`),
which waits that long — at any attempt number: an operator's unlimited budget (``temporal
activity update-options --retry-maximum-attempts 0``) or a large configured one lets the
attempts climb past where the backoff's power still fits a float."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.errors import NextAttempt, config_mismatch, next_attempt

#: A delivery's policy as curaflow schedules it (2 s, doubling, at most 5 min) — unlimited.
POLICY = RetryPolicy(
    initial_interval=timedelta(seconds=2),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=5),
    maximum_attempts=0,
)


def env_at(attempt: int, policy: RetryPolicy | None = POLICY) -> ActivityEnvironment:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, attempt=attempt, retry_policy=policy)
    return env


@pytest.mark.parametrize(
    ("attempt", "expected"),
    [
        (1, NextAttempt(2_000, False)),
        (3, NextAttempt(8_000, False)),
        (20, NextAttempt(300_000, False)),  # the ceiling
        (1_100, NextAttempt(300_000, False)),  # 2.0 ** 1099 is no float: still the ceiling
        (2**31 - 1, NextAttempt(300_000, False)),
    ],
)
def test_the_next_attempt_waits_the_backoff_up_to_its_ceiling_at_any_attempt(
    attempt: int, expected: NextAttempt
) -> None:
    assert env_at(attempt).run(next_attempt) == expected


def test_a_steep_coefficient_an_operator_set_waits_the_ceiling() -> None:
    steep = dataclasses.replace(POLICY, backoff_coefficient=1e6)
    assert env_at(60, steep).run(next_attempt) == NextAttempt(300_000, False)


def test_the_last_attempt_of_a_limited_policy_is_the_last() -> None:
    limited = dataclasses.replace(POLICY, maximum_attempts=1_200)
    assert env_at(1_200, limited).run(next_attempt).last


def test_a_mismatch_late_in_an_unlimited_budget_is_still_one_attempt_of_the_mismatch() -> None:
    failure = env_at(1_100).run(config_mismatch, "route", "hook", "route 'hook' is not configured on this worker")
    assert isinstance(failure, ApplicationError)
    assert (failure.type, failure.non_retryable) == ("configuration_mismatch", False)
    assert failure.next_retry_delay == timedelta(minutes=5)

"""After a job's deadline its execution must have room to end itself: the steps out are
cancelled through their heartbeats, and a step whose worker was lost hears no cancel —
Temporal gives it up only at its heartbeat timeout (``WAIT_CANCELLATION_COMPLETED``) —
then ``finish`` records the outcome. Both limits Temporal closes a job's run at leave
that room: a run or execution timeout a Temporal client set (the job's deadline is
bounded before it, :func:`curaflow.domain.execution.run_deadline_bound`) and the
execution timeout curaflow sets (the deadline plus ``EXECUTION_GRACE``, which the
heartbeat interval's ceiling keeps large enough)."""

from __future__ import annotations

import pytest

from curaflow.config import ConfigError, load_settings
from curaflow.domain.execution import EXECUTION_GRACE, RUN_END_MARGIN, run_deadline_bound, run_end_room_ms
from curaflow.domain.messages import Budgets

MARGIN_MS = int(RUN_END_MARGIN.total_seconds() * 1000)
GRACE_MS = int(EXECUTION_GRACE.total_seconds() * 1000)


@pytest.mark.parametrize("interval_ms", [100, 1_000, 30_000, 120_000])
def test_a_bounded_deadline_leaves_a_lost_workers_step_its_heartbeat_timeout_before_the_run_ends(
    interval_ms: int,
) -> None:
    budgets = Budgets(heartbeat_interval_ms=interval_ms)
    ends_at = 10_000_000
    bound = run_deadline_bound(ends_at, heartbeat_timeout_ms=budgets.heartbeat_timeout_ms)
    assert bound is not None
    # The longest heartbeat timeout of the job's steps (a source step's is never longer).
    longest = max(budgets.heartbeat_timeout_ms, budgets.source_step_heartbeat_timeout_ms())
    assert ends_at - bound >= longest + MARGIN_MS
    assert ends_at - bound == run_end_room_ms(budgets.heartbeat_timeout_ms)


def test_an_unlimited_run_bounds_nothing() -> None:
    assert run_deadline_bound(None, heartbeat_timeout_ms=60_000) is None


def test_the_execution_grace_leaves_a_lost_workers_step_its_heartbeat_timeout_at_the_longest_interval() -> None:
    settings = load_settings(budgets={"heartbeat_interval_ms": (GRACE_MS - MARGIN_MS) // 2})
    assert run_end_room_ms(settings.budgets_model().heartbeat_timeout_ms) <= GRACE_MS


def test_a_heartbeat_interval_whose_timeout_outlasts_the_execution_grace_is_refused_at_load() -> None:
    with pytest.raises(ConfigError, match=r"budgets\.heartbeat_interval_ms .*at most"):
        load_settings(budgets={"heartbeat_interval_ms": (GRACE_MS - MARGIN_MS) // 2 + 1})

"""``send_lease_ms``: a claimed send's lease outlasts the recording of its answer.

The lease is what keeps another run's ``deliver`` and the job's finish waiting while the
send's attempt may still record its answer. Two heartbeat intervals did not cover the
recording's retries (:data:`activities.deliver.recording.RECORD_RETRY_S`) with an interval
of a few seconds (until 2026-12-06): ``tests/integration/test_send_lease.py`` shows the
send taken again; here the arithmetic of the rule.
"""

from __future__ import annotations

import pytest

from activities.deliver.recording import RECORD_RETRY_S, RECORDING_HOLD_MS, send_lease_ms
from activities.heartbeat import CANCEL_PROBE_S
from curaflow.config.budgets import BudgetSettings


def test_the_hold_covers_the_recordings_waits_and_a_late_beat() -> None:
    assert (sum(RECORD_RETRY_S) + CANCEL_PROBE_S) * 1000 <= RECORDING_HOLD_MS
    assert RECORDING_HOLD_MS == 8_300


@pytest.mark.parametrize(
    ("interval_ms", "lease_ms"),
    [(30_000, 60_000), (10_000, 20_000), (5_000, 13_300), (1_000, 9_300), (100, 8_400)],
)
def test_the_send_lease_is_two_intervals_never_less_than_one_and_the_hold(interval_ms: int, lease_ms: int) -> None:
    assert send_lease_ms(interval_ms) == lease_ms


def test_every_configurable_interval_leaves_the_recording_its_whole_budget() -> None:
    # From the last beat before the answer (at most an interval ago), the lease still holds
    # for the whole recording: no interval the configuration accepts makes it shorter.
    smallest = BudgetSettings.model_fields["heartbeat_interval_ms"].metadata[0].ge
    for interval_ms in (smallest, 500, 1_000, 4_000, 8_300, 30_000, 600_000):
        assert send_lease_ms(interval_ms) - interval_ms >= RECORDING_HOLD_MS

"""``covering_beats``: a source step beats from its first second to its last, and a step
shorter than a beat costs no heartbeat call (docs/performance.md)."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.testing import ActivityEnvironment

from activities.heartbeat import covering_beats


def beats_during(body_s: float, beat_s: float = 0.1) -> list[float]:
    """Run an activity of ``body_s`` seconds under ``covering_beats(beat_s)``; the times
    (seconds after its start) of the heartbeats it sent."""
    env = ActivityEnvironment()
    times: list[float] = []
    loop_start: list[float] = []
    env.on_heartbeat = lambda *details: times.append(asyncio.get_running_loop().time() - loop_start[0])

    async def step() -> None:
        loop_start.append(asyncio.get_running_loop().time())
        async with covering_beats(beat_s):
            await asyncio.sleep(body_s)

    asyncio.run(env.run(step))
    return times


def test_a_step_shorter_than_a_beat_sends_no_heartbeat() -> None:
    assert beats_during(0.05) == []


def test_a_longer_step_beats_once_per_beat_from_the_first() -> None:
    times = beats_during(0.35)
    assert len(times) == 3, times
    assert times[0] == pytest.approx(0.1, abs=0.05), times  # one beat in, not at once

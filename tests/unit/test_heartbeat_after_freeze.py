"""A step's first beat after its process was frozen extends its ledger lease at once.

A worker stopped (SIGSTOP, a VM paused, a long GC or a blocking call on the event loop)
and thawed again: its step still works, and its lease — two heartbeat intervals, also the
send's lease the new run's ``deliver`` and the job's finish wait for — has lapsed or
nearly. Until 2026-12-05 the heartbeater counted its own sleep ticks, not the time that
passed, so the first ledger beat after the freeze came up to a whole interval later; in
that gap a finish ended the job as if the send had no owner and the late answer
contradicted it. Now the interval is measured on the monotonic clock: the first tick after
a freeze longer than an interval extends the lease.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from activities import heartbeat
from activities.heartbeat import Heartbeater


async def test_the_first_tick_after_a_freeze_extends_the_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    beats: list[float] = []

    async def ledger_beat(*args: Any, **kwargs: Any) -> None:
        beats.append(time.monotonic())

    monkeypatch.setattr(heartbeat.ledger_cells, "heartbeat", ledger_beat)

    async def step() -> float:
        # interval 0.4 s: a Temporal heartbeat every 0.2 s, the lease every 0.4 s.
        async with Heartbeater(None, "job", "target", interval_s=0.4, lease_ms=800):  # type: ignore[arg-type]
            await asyncio.sleep(0.05)
            time.sleep(1.0)  # the process frozen for 2.5 intervals: nothing runs
            thawed = time.monotonic()
            await asyncio.sleep(0.15)  # less than a tick: the step ends right after the thaw
        return thawed

    thawed = await ActivityEnvironment().run(step)

    assert beats and beats[0] >= thawed, beats  # beaten after the thaw, before the step ended

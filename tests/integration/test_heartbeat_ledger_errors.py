"""A ledger error while a step heartbeats never stops its Temporal heartbeats.

The heartbeat loop of a long step (:class:`activities.heartbeat.Heartbeater`) sends the
Temporal heartbeat and extends the cell's ledger lease. A ledger that cannot be reached
must cost only the lease extension: if the loop dies, Temporal stops hearing from a
step that is still working, times it out after the heartbeat timeout and runs a second
attempt beside it. asyncpg reports a connection that went away (a PostgreSQL restart, a
pool being closed) as ``InterfaceError``, which is neither ``OSError`` nor
``PostgresError``. The pool here is a real one to the suite's PostgreSQL, closed.
"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from temporalio.testing import ActivityEnvironment

from activities.heartbeat import Heartbeater

pytestmark = pytest.mark.integration


async def test_heartbeats_go_on_when_the_ledger_connection_is_gone(database_url: str) -> None:
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=1)
    await pool.close()  # every statement now raises asyncpg.InterfaceError("pool is closed")
    beats: list[object] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(details)

    async def step() -> None:
        # interval 0.2 s: a Temporal heartbeat every 0.1 s, the lease every 0.2 s
        async with Heartbeater(pool, "job", "target", interval_s=0.2, lease_ms=1_000):
            await asyncio.sleep(1.5)

    await env.run(step)
    # The first lease extension (after 0.2 s) failed; the heartbeats went on to the end.
    assert len(beats) >= 10, beats

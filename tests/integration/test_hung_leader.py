"""A hung leader of a per-tick lock loses it: the reconciler runs on elsewhere.

Every worker ticks the reconciler (and the schedule watcher); one process at a time does
a tick's work under a session advisory lock. A process that hangs mid-tick (SIGSTOP, a
wedged event loop) keeps its socket, so PostgreSQL sees a live session and the lock
would be held for ever: no workflow that was never started would be started again, no
job whose execution closed would converge. The holder's session is bounded instead
(``curaflow.ledger.db.LEADER_IDLE_MS``): PostgreSQL ends it once it sent nothing for that
long, and the next tick of another process leads. Real PostgreSQL, a real process
stopped with SIGSTOP.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap

import asyncpg
import pytest

from curaflow.domain.messages import TargetSpec
from curaflow.ledger import reconciler
from tests.support import eventually, ledger_job

pytestmark = pytest.mark.integration

#: The hung leader: it takes the reconciler's lock in a real tick, then stops itself
#: inside the tick (the first workflow start it attempts), holding the lock's session.
HUNG_LEADER = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    import asyncpg
    from curaflow.ledger import reconciler

    reconciler.ticks.LEADER_IDLE_MS = 1_500  # the module whose tick reads it

    async def main() -> None:
        pool = await asyncpg.create_pool(sys.argv[1], min_size=1, max_size=2)

        async def start(job_id: str) -> None:
            print("leading", flush=True)
            os.kill(os.getpid(), signal.SIGSTOP)

        await reconciler.tick(pool, start)

    asyncio.run(main())
    """
)


async def test_a_hung_reconciler_leader_is_replaced(database_url: str, ledger_pool: asyncpg.Pool) -> None:
    job_id = await ledger_job(ledger_pool, TargetSpec(target_id="demo", routes=[]), label="unstarted")
    # admitted, never started, older than the reconciler's start grace
    await ledger_pool.execute(
        "UPDATE jobs SET created_at = created_at - $2::bigint WHERE job_id = $1", job_id, reconciler.START_GRACE_MS * 2
    )
    leader = subprocess.Popen(
        [sys.executable, "-c", HUNG_LEADER, database_url], stdout=subprocess.PIPE, text=True, env=dict(os.environ)
    )
    try:
        assert leader.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(leader.stdout.readline), 30)
        assert line.strip() == "leading"
        assert leader.poll() is None  # stopped, not gone: its socket and session stay open
        started: list[str] = []

        async def start(each: str) -> None:
            started.append(each)

        async def ticked_past_the_hung_leader() -> bool:
            await reconciler.tick(ledger_pool, start)
            return job_id in started

        await eventually(
            ticked_past_the_hung_leader,
            timeout_s=15,
            interval_s=0.25,
            what="the hung leader kept the reconciler's lock",
        )
    finally:
        leader.send_signal(signal.SIGKILL)
        leader.wait(10)

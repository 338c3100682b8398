"""A cancel's recorded time is the moment the ledger serialised it (real PostgreSQL).

The case (a cancel storm with worker kills, ``curaflow chaos``): an intent's ``sent_at``
read 11 ms *after* its job's ``cancel_requested_at``, as if a send had been claimed past
the cancel barrier. It had not been: :func:`~curaflow.ledger.deliveries.claim_send`
held the job row, the cancel's ``UPDATE`` waited for it, and the cancel wrote the time it
had read *before* waiting. A timestamp that contradicts the order the ledger decided is a
lie in the report (``cancel_requested_at`` is the barrier every reader compares against):
the cancel takes its time after it holds the row.
"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from curaflow.domain.messages import TargetSpec
from curaflow.ledger.cells import lock_job
from curaflow.ledger.db import now_ms
from curaflow.ledger.jobs import request_cancel
from tests.support import eventually, ledger_job, waiting_for_a_lock

pytestmark = pytest.mark.integration


async def test_a_cancel_that_waited_for_a_send_claim_is_recorded_after_it(ledger_pool: asyncpg.Pool) -> None:
    job_id = await ledger_job(ledger_pool, TargetSpec(target_id="demo"), label="order")

    async def cancel() -> bool:
        async with ledger_pool.acquire() as conn:
            return await request_cancel(conn, job_id, "consumer")

    async with ledger_pool.acquire() as claimer, claimer.transaction():
        await lock_job(claimer, job_id)  # what claim_send holds while it decides
        waiting = asyncio.create_task(cancel())

        await waiting_for_a_lock(ledger_pool)  # the cancel waits for the job row
        seen_at = now_ms()
        # A millisecond later than any time the cancel could have read before it waited.
        await eventually(lambda: now_ms() > seen_at, interval_s=0.001, what="the next millisecond")
        assert not waiting.done()  # the cancel waits for the claim's transaction
        claimed_at = now_ms()  # the intent's sent_at, written under the lock
    assert await waiting
    cancelled_at = await ledger_pool.fetchval("SELECT cancel_requested_at FROM jobs WHERE job_id = $1", job_id)
    assert cancelled_at >= claimed_at  # read before waiting, it was earlier

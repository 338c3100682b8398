"""A push's claim (``event_pushes.claimed_by`` / ``claimed_until``) is its attempt's own.

An attempt that outlived its lease — its worker stopped (SIGSTOP, a long pause) with a
send out, or its send cut at a job's end (the push-bound wait) and its answer read late —
comes back after another attempt (the job's next one, the sweeper's ``push-events:<job_id>``
run) claimed the same event. What the late attempt settles must never undo what the
current one did nor free the event while the current one is sending it: the event would
be sent again after the events that follow it (out of order), or by two attempts at once.
"""

from __future__ import annotations

import asyncpg
import pytest

from curaflow.domain.messages import RouteRef, TargetSpec
from curaflow.ledger import event_pushes
from curaflow.ledger.events import append_event
from tests.support import ledger_job, short_id

pytestmark = pytest.mark.integration


async def _pending_pushes(pool: asyncpg.Pool, count: int) -> str:
    """A job with ``count`` events pending their push to the consumer's callback."""
    target = TargetSpec(target_id="demo", routes=[RouteRef(name=f"r-{short_id()}", kind="directory")])
    job_id = await ledger_job(pool, target, label="claims")
    async with pool.acquire() as conn, conn.transaction():
        for _ in range(count):
            seq = await append_event(conn, job_id, "job.progress")
            await event_pushes.enqueue_push(conn, job_id, seq, f"e-{short_id()}", "http://127.0.0.1:9/hook", {})
    return job_id


async def _states(pool: asyncpg.Pool, job_id: str) -> list[str]:
    return [row["status"] for row in await event_pushes.push_states(pool, job_id)]


@pytest.mark.parametrize("late", [event_pushes.PENDING, event_pushes.DEAD, event_pushes.DELIVERED])
async def test_a_late_attempt_never_undoes_what_the_current_attempt_settled(
    ledger_pool: asyncpg.Pool, late: str
) -> None:
    job_id = await _pending_pushes(ledger_pool, 2)
    stale = (await event_pushes.claim_next(ledger_pool, job_id, "stale", 0)).push  # its lease lapses at once
    assert stale is not None
    for _ in range(2):  # the current attempt sends both events, the receiver has them
        push = (await event_pushes.claim_next(ledger_pool, job_id, "current", 60_000)).push
        assert push is not None
        await event_pushes.record_push(ledger_pool, push, event_pushes.DELIVERED, http_status=200, error=None)
    settled = await event_pushes.push_states(ledger_pool, job_id)

    # The stale attempt's send comes back (a timeout, a 4xx, a late 200).
    await event_pushes.record_push(ledger_pool, stale, late, http_status=None, error="timeout")

    assert await event_pushes.push_states(ledger_pool, job_id) == settled
    assert (await event_pushes.claim_next(ledger_pool, job_id, "next", 60_000)).push is None


@pytest.mark.parametrize("late", [event_pushes.PENDING, event_pushes.DEAD, event_pushes.DELIVERED])
async def test_a_late_attempt_never_frees_an_event_another_attempt_is_sending(
    ledger_pool: asyncpg.Pool, late: str
) -> None:
    job_id = await _pending_pushes(ledger_pool, 1)
    stale = (await event_pushes.claim_next(ledger_pool, job_id, "stale", 0)).push
    assert stale is not None
    sending = (await event_pushes.claim_next(ledger_pool, job_id, "current", 60_000)).push
    assert sending is not None and sending.attempts == 2

    await event_pushes.record_push(ledger_pool, stale, late, http_status=None, error="timeout")

    # The event is still the current attempt's: no third attempt sends it alongside.
    assert await _states(ledger_pool, job_id) == [event_pushes.PENDING]
    assert (await event_pushes.claim_next(ledger_pool, job_id, "third", 60_000)).busy
    await event_pushes.record_push(ledger_pool, sending, event_pushes.DELIVERED, http_status=200, error=None)
    assert await _states(ledger_pool, job_id) == [event_pushes.DELIVERED]

"""The ledger's hot paths cost one round trip each (issue 15), with the same guarantees.

* A connection going back to the pool runs no reset query (asyncpg's default ran
  ``SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL;`` on every
  release: a quarter of the worker's statements per job); a transaction left open is
  still rolled back, and session advisory locks are only held through
  :func:`curaflow.ledger.db.session_lock`, which never lets one reach the pool.
* A rate-gate slot (every source request) is one statement, and concurrent callers
  still get slots ``interval`` apart; a paused or cooling-down gate hands out none.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from contextlib import nullcontext

import asyncpg
import pytest

from curaflow.ledger import gates
from curaflow.ledger.db import create_pool, session_lock

pytestmark = pytest.mark.integration


async def _statements_on_release(pool: asyncpg.Pool) -> list[str]:
    """The statements the pool runs on one connection around a single ``SELECT 1``."""
    seen: list[str] = []
    async with pool.acquire() as conn:
        conn.add_query_logger(lambda record: seen.append(record.query))
    async with pool.acquire() as conn:  # the same (only) connection, after a release
        await conn.fetchval("SELECT 1")
    return seen


async def test_releasing_a_connection_runs_no_reset_query(database_url: str) -> None:
    pool = await create_pool(database_url, min_size=1, max_size=1)
    try:
        seen = await _statements_on_release(pool)
    finally:
        await pool.close()
    assert seen == ["SELECT 1"], seen


async def test_a_transaction_left_open_is_rolled_back_on_release(database_url: str) -> None:
    pool = await create_pool(database_url, min_size=1, max_size=1)
    table = f"t_{uuid.uuid4().hex[:8]}"
    try:
        await pool.execute(f"CREATE TABLE {table} (x int)")
        async with pool.acquire() as conn:
            await conn.execute("BEGIN")
            await conn.execute(f"INSERT INTO {table} VALUES (1)")
        async with pool.acquire() as conn:
            assert not conn.is_in_transaction()
            assert await conn.fetchval(f"SELECT count(*) FROM {table}") == 0
    finally:
        await pool.execute(f"DROP TABLE IF EXISTS {table}")
        await pool.close()


async def _lock_holders(pool: asyncpg.Pool, key: int) -> int:
    return int(
        await pool.fetchval(
            """SELECT count(*) FROM pg_locks
               WHERE locktype = 'advisory' AND granted AND ((classid::bigint << 32) | objid::bigint) = $1""",
            key,
        )
    )


@pytest.mark.parametrize("ending", ["normal", "error", "cancelled"])
async def test_session_lock_never_reaches_the_pool(database_url: str, ending: str) -> None:
    pool = await create_pool(database_url, min_size=1, max_size=2)
    other = await asyncpg.connect(database_url)
    key = 0x51A0_0000 + hash(ending) % 1000
    entered, release = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        async with session_lock(pool, key) as conn:
            assert conn is not None
            entered.set()
            await release.wait()  # only ``cancelled`` never gets past this
            if ending == "error":
                raise RuntimeError("boom")

    try:
        task = asyncio.create_task(hold())
        await entered.wait()
        assert await _lock_holders(pool, key) == 1
        # While held, another session does not get it (and says so: None).
        async with session_lock(pool, key) as conn:
            assert conn is None
        if ending == "cancelled":
            task.cancel()
        else:
            release.set()
        expected = pytest.raises((RuntimeError, asyncio.CancelledError)) if ending != "normal" else nullcontext()
        with expected:
            await task
        assert await _lock_holders(pool, key) == 0
        assert await other.fetchval("SELECT pg_try_advisory_lock($1)", key)
    finally:
        await other.close()
        await pool.close()


async def test_reserve_is_one_statement_and_spaces_concurrent_callers(ledger_pool: asyncpg.Pool) -> None:
    gate = f"gate-{uuid.uuid4().hex[:8]}"
    seen: list[str] = []
    async with ledger_pool.acquire() as conn:
        conn.add_query_logger(lambda record: seen.append(record.query))
        slot = await gates.reserve(conn, gate, 200)  # type: ignore[arg-type]
    assert slot.wait_ms == 0
    assert len([q for q in seen if "source_gates" in q]) == 1
    assert not [q for q in seen if q.strip().upper() in ("BEGIN;", "COMMIT;", "BEGIN", "COMMIT")]

    # 20 callers at once, a 10 s interval: 20 distinct slots, exactly one interval apart
    # after the first (every call happens well inside the first interval).
    first = await gates.read_gate(ledger_pool, gate)
    assert first is not None
    slow = f"{gate}-slow"
    await gates.reserve(ledger_pool, slow, 10_000)
    opened = await gates.read_gate(ledger_pool, slow)
    assert opened is not None
    waits = sorted(
        [s.wait_ms for s in await asyncio.gather(*(gates.reserve(ledger_pool, slow, 10_000) for _ in range(20)))]
    )
    gaps = [b - a for a, b in itertools.pairwise(waits)]
    assert all(9_000 <= gap <= 10_050 for gap in gaps), gaps  # clock read rounded to the ms
    assert 9_000 <= waits[0] <= 10_050, waits
    state = await gates.read_gate(ledger_pool, slow)
    assert state is not None
    assert state.next_at == opened.next_at + 20 * 10_000
    assert state.requests == 21


async def test_reserve_hands_out_no_slot_while_paused_or_cooling(ledger_pool: asyncpg.Pool) -> None:
    gate = f"gate-{uuid.uuid4().hex[:8]}"
    await gates.reserve(ledger_pool, gate, 0)
    await gates.pause(ledger_pool, gate, pause_ms=60_000, reason="restricted")
    paused = await gates.reserve(ledger_pool, gate, 0)
    assert paused.paused_ms > 50_000 and paused.cooldown_ms == 0
    await gates.resume(ledger_pool, gate)
    await gates.penalize(ledger_pool, gate, base_ms=30_000, cap_ms=60_000)
    cooling = await gates.reserve(ledger_pool, gate, 0)
    assert cooling.cooldown_ms > 20_000 and cooling.penalty == 1
    state = await gates.read_gate(ledger_pool, gate)
    assert state is not None and state.requests == 1  # neither refusal took a slot

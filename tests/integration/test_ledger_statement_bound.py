"""A statement that outlasts the pool's bound is stopped by PostgreSQL itself, never by a
cancel request that could land on the connection's next statement.

asyncpg stops a statement whose client-side bound (``command_timeout``) ran out with a
``CancelRequest`` sent on a connection of its own; the server takes it whenever it
arrives, so when the statement had ended meanwhile the request cancelled the *next*
statement on that pooled connection — another caller's, which failed at once with
``QueryCanceledError`` (a ``POST /jobs`` answered 503 ``ledger_unavailable`` in 4 ms on a
loaded machine). The server's own ``statement_timeout`` is therefore set a little below the
client's bound (:func:`curaflow.ledger.db.server_statement_timeout_ms`): the server ends a
slow statement in its answer, and the client's bound is left for a server that does not
answer at all (``test_ledger_hang.py``).
"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from curaflow.ledger.db import create_pool, server_statement_timeout_ms
from curaflow.ledger.gauges import read_snapshot

pytestmark = pytest.mark.integration

BOUND_S = 0.2


def test_the_servers_bound_is_below_the_clients_by_a_tenth_within_20_to_250_ms() -> None:
    assert server_statement_timeout_ms(0.2) == 180
    assert server_statement_timeout_ms(0.1) == 80  # 20 ms at least
    assert server_statement_timeout_ms(30.0) == 29_750  # 250 ms at most
    assert server_statement_timeout_ms(2.0) == 1_800
    assert server_statement_timeout_ms(0.001) == 1


async def test_a_pools_connections_carry_the_servers_bound_below_the_clients(database_url: str) -> None:
    pool = await create_pool(database_url, min_size=1, max_size=1, statement_timeout_s=BOUND_S)
    try:
        async with pool.acquire() as conn:
            shown = await conn.fetchval("SHOW statement_timeout")
        assert shown == "180ms", shown
    finally:
        await pool.close()


async def test_statements_over_the_bound_never_cancel_the_connections_next_statement(database_url: str) -> None:
    # The server's bound runs out first (the statement ends in its answer); when the
    # client's still does (a starved server), the connection is closed, not pooled again.
    pool = await create_pool(database_url, min_size=1, max_size=1, statement_timeout_s=BOUND_S)
    ended: list[str] = []
    try:
        for _ in range(15):
            try:
                await pool.execute(f"SELECT pg_sleep({BOUND_S + 0.01})")
                ended.append("ran")
            except asyncpg.QueryCanceledError:
                ended.append("server")
            except TimeoutError:
                ended.append("client")
            assert await pool.fetchval("SELECT 1") == 1, ended  # the one pooled connection's next statement
    finally:
        await pool.close()
    assert "ran" not in ended, ended


@pytest.mark.parametrize("stopped", ["bound", "caller cancelled"])
async def test_a_statement_stopped_client_side_closes_its_connection(database_url: str, stopped: str) -> None:
    # A call's own bound below the server's, or a caller cancelled mid-statement: asyncpg
    # sends a cancel request, so the connection is closed and the pool opens another.
    pool = await create_pool(database_url, min_size=1, max_size=1, statement_timeout_s=5.0)
    try:
        async with pool.acquire() as conn:
            pid = await conn.fetchval("SELECT pg_backend_pid()")
            if stopped == "bound":
                with pytest.raises(TimeoutError):
                    await conn.execute("SELECT pg_sleep(2)", timeout=0.1)
            else:
                task = asyncio.ensure_future(conn.execute("SELECT pg_sleep(2)"))
                await asyncio.sleep(0.2)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
        assert await pool.fetchval("SELECT pg_backend_pid()") != pid
    finally:
        await pool.close()


@pytest.mark.parametrize(("bound_s", "shown"), [(1.0, "900ms"), (30.0, "5s")])
async def test_the_gauges_reading_never_lifts_the_servers_bound_above_the_pools(
    database_url: str, bound_s: float, shown: str
) -> None:
    # The reading bounds its transaction at 5 s: under a pool bounded lower it took 5 s,
    # above the client's bound — a slow reading was stopped by a client-side cancel.
    pool = await create_pool(database_url, min_size=1, max_size=1, statement_timeout_s=bound_s)
    try:
        async with pool.acquire() as conn, conn.transaction():
            await read_snapshot(conn, accounts={})
            assert await conn.fetchval("SHOW statement_timeout") == shown  # SET LOCAL lives to the end
    finally:
        await pool.close()

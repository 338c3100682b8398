"""The ledger's connection pool and versioned migrations (PostgreSQL via asyncpg).

One pool per process (:func:`create_pool`). A connection going back to the pool is not
reset with asyncpg's default reset query (``pg_advisory_unlock_all(); CLOSE ALL;
UNLISTEN *; RESET ALL``: one more round trip for every ledger call, a quarter of the
worker's statements in the benchmark): nothing here leaves session state on a
pooled connection except a session advisory lock, and those are taken only through
:func:`session_lock`, which releases the lock or closes the connection. A transaction
left open is rolled back (:func:`_reset_connection`).

Migrations are the numbered ``*.sql`` files
of ``curaflow/ledger/migrations``, applied in order at start-up by :func:`migrate`
under a session advisory lock, so two processes starting at once apply each version
exactly once.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator
from importlib import resources
from typing import Any

import asyncpg

MIGRATION_LOCK_KEY = 0x6375726166  # "curaf"

Pool = asyncpg.Pool
Connection = asyncpg.Connection


def now_ms() -> int:
    """Current wall-clock time in epoch milliseconds (UTC)."""
    return int(time.time() * 1000)


async def _init_connection(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec(
        "jsonb", encoder=lambda v: json.dumps(v, ensure_ascii=False), decoder=json.loads, schema="pg_catalog"
    )
    await conn.set_type_codec(
        "json", encoder=lambda v: json.dumps(v, ensure_ascii=False), decoder=json.loads, schema="pg_catalog"
    )


async def create_pool(dsn: str, *, min_size: int = 1, max_size: int = 10) -> asyncpg.Pool:
    """Open the process's connection pool with JSON codecs for ``json``/``jsonb``.

    Args:
        dsn: a ``postgresql://`` URL (a unix socket via ``?host=/dir`` works).
        min_size / max_size: pool bounds.

    Raises:
        OSError / asyncpg.PostgresError: the database is unreachable.
    """
    pool = await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        init=_init_connection,
        reset=_reset_connection,
        command_timeout=60,
    )
    assert pool is not None
    return pool


async def _reset_connection(conn: asyncpg.Connection) -> None:
    """The pool's reset: no statement (module doc: no session state is left on a pooled
    connection). asyncpg itself rolls back a transaction left open before calling this;
    the check keeps that true should it stop doing so."""
    if conn.is_in_transaction():
        await conn.execute("ROLLBACK")


@contextlib.asynccontextmanager
async def session_lock(pool: asyncpg.Pool, key: int, *, wait: bool = False) -> AsyncIterator[asyncpg.Connection | None]:
    """Hold the session advisory lock ``key`` on a pooled connection.

    Yields the connection holding the lock, or None when ``wait`` is false and another
    session holds it. On exit the lock is released; when the release cannot be confirmed
    (an error, a cancellation) the connection is terminated, so no pooled connection ever
    carries a lock (the pool does not reset session state: module doc).

    Raises:
        OSError / asyncpg.PostgresError: the ledger is unreachable.
    """
    async with pool.acquire() as conn:
        if wait:
            await conn.execute("SELECT pg_advisory_lock($1)", key)
        elif not await conn.fetchval("SELECT pg_try_advisory_lock($1)", key):
            yield None
            return
        released = False
        try:
            yield conn
            await conn.execute("SELECT pg_advisory_unlock($1)", key)
            released = True
        finally:
            if not released:
                with contextlib.suppress(Exception):
                    await conn.execute("SELECT pg_advisory_unlock($1)", key)
                    released = True
            if not released:
                conn.terminate()


def migration_files() -> list[tuple[int, str, str]]:
    """Every migration as ``(version, name, sql)``, ordered by version."""
    found = []
    root = resources.files("curaflow.ledger") / "migrations"
    for entry in root.iterdir():
        if entry.name.endswith(".sql"):
            version = int(entry.name.split("_", 1)[0])
            found.append((version, entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found)


async def migrate(pool: asyncpg.Pool) -> list[str]:
    """Apply pending migrations; safe when several processes call it at once.

    Returns:
        The names of the migrations this call applied (empty when up to date).
    """
    applied: list[str] = []
    async with session_lock(pool, MIGRATION_LOCK_KEY, wait=True) as conn:
        assert conn is not None
        await conn.execute(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                   version integer PRIMARY KEY,
                   name text NOT NULL,
                   applied_at bigint NOT NULL)"""
        )
        done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
        for version, name, sql in migration_files():
            if version in done:
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
                    version,
                    name,
                    now_ms(),
                )
            applied.append(name)
    return applied


def jsonable(value: Any) -> Any:
    """Dump a pydantic model (or pass a plain value through) for a jsonb parameter."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return value

"""The ledger's connection pool and versioned migrations (PostgreSQL via asyncpg).

One pool per process (:func:`create_pool`). Migrations are the numbered ``*.sql`` files
of ``curaflow/ledger/migrations``, applied in order at start-up by :func:`migrate`
under a session advisory lock, so two processes starting at once apply each version
exactly once.
"""

from __future__ import annotations

import json
import time
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
        dsn, min_size=min_size, max_size=max_size, init=_init_connection, command_timeout=60
    )
    assert pool is not None
    return pool


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
    async with pool.acquire() as conn:
        await conn.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_KEY)
        try:
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
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_KEY)
    return applied


def jsonable(value: Any) -> Any:
    """Dump a pydantic model (or pass a plain value through) for a jsonb parameter."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return value

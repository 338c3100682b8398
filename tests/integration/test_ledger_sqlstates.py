"""What the session's real PostgreSQL answers when it cannot serve a call now is an outage,
by its SQLSTATE — whether or not asyncpg has a class for the code.

Three answers were a bug's 500 ``internal error`` at the API (and a traceback at the CLI)
until 2026-12-06, where the same call later succeeds:

* ``25006 read_only_sql_transaction``: the ledger's address reached a server that is (now)
  a standby — a failover under way, the old primary demoted;
* ``55P03 lock_not_available``: a ``lock_timeout`` the operator set on the role or the
  database ran out behind another transaction's lock;
* a code of an outage class asyncpg does not know (a newer server's code of class 08,
  53, 57 or 58): asyncpg raises ``UnknownPostgresError``, whose class says nothing.

They are produced here for real: a session-level setting, a lock held from another
connection, a ``RAISE`` with the SQLSTATE. A code of any other class (a data error never
seen) stays a 500.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest

from curaflow.api.app import create_app
from curaflow.config import Settings
from curaflow.ledger.db import is_unavailable

pytestmark = pytest.mark.integration


@pytest.fixture
async def conn(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(database_url)
    try:
        yield connection
    finally:
        await connection.close()


async def _raised(call: object) -> BaseException:
    try:
        await call  # type: ignore[misc]
    except asyncpg.PostgresError as err:
        return err
    raise AssertionError("PostgreSQL answered")


async def _answer(err: BaseException) -> httpx.Response:
    app = create_app(Settings())

    @app.get("/probe/{job_id}")
    async def probe(job_id: str) -> None:
        raise err

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)  # no lifespan: no database needed
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
        return await http.get("/probe/j")


def _is_503_ledger_unavailable(answer: httpx.Response) -> None:
    assert answer.status_code == 503, answer.text
    assert answer.headers["retry-after"] == "5"
    assert answer.json()["error"]["detail"] == {"reason": "ledger_unavailable"}


async def test_a_write_on_a_standby_is_the_ledger_being_unavailable(conn: asyncpg.Connection) -> None:
    # What a failover to a replica answers a write: the session is read-only.
    await conn.execute("SET default_transaction_read_only = on")
    err = await _raised(conn.execute("UPDATE jobs SET updated_at = updated_at WHERE false"))
    assert err.sqlstate == "25006", err  # type: ignore[attr-defined]

    assert is_unavailable(err)
    _is_503_ledger_unavailable(await _answer(err))


async def test_a_lock_timeout_is_the_ledger_being_unavailable(database_url: str, conn: asyncpg.Connection) -> None:
    table = f"lock_probe_{uuid.uuid4().hex[:8]}"
    await conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY); INSERT INTO {table} VALUES (1)")
    holder = await asyncpg.connect(database_url)
    try:
        async with holder.transaction():
            await holder.execute(f"SELECT id FROM {table} WHERE id = 1 FOR UPDATE")
            await conn.execute("SET lock_timeout = '50ms'")
            err = await _raised(conn.execute(f"UPDATE {table} SET id = 1 WHERE id = 1"))
    finally:
        await holder.close()
        await conn.execute("RESET lock_timeout")
        await conn.execute(f"DROP TABLE {table}")
    assert err.sqlstate == "55P03", err  # type: ignore[attr-defined]

    assert is_unavailable(err)
    _is_503_ledger_unavailable(await _answer(err))


@pytest.mark.parametrize("code", ["57P99", "53999", "08999", "58999", "40999"])
async def test_an_outage_code_asyncpg_does_not_know_is_the_ledger_being_unavailable(
    conn: asyncpg.Connection, code: str
) -> None:
    err = await _raised(conn.execute(f"DO $$ BEGIN RAISE EXCEPTION 'never seen' USING ERRCODE = '{code}'; END $$"))
    assert isinstance(err, asyncpg.exceptions.UnknownPostgresError) and err.sqlstate == code, err

    assert is_unavailable(err)
    _is_503_ledger_unavailable(await _answer(err))


@pytest.mark.parametrize("code", ["22999", "XX999", "P0001", "40002", "23514"])
async def test_a_refused_statement_or_a_bug_stays_a_500(conn: asyncpg.Connection, code: str) -> None:
    # A data error never seen, an internal error, a PL/pgSQL RAISE, a deferred constraint,
    # a check violation: the same call later meets the same answer.
    err = await _raised(conn.execute(f"DO $$ BEGIN RAISE EXCEPTION 'refused' USING ERRCODE = '{code}'; END $$"))

    assert not is_unavailable(err)
    assert (await _answer(err)).status_code == 500


async def test_a_statement_a_migration_changed_under_its_cache_is_the_ledger_being_unavailable(
    database_url: str, conn: asyncpg.Connection
) -> None:
    """A new release's migration adds a column while this process runs (a rolling upgrade):
    a statement this connection prepared before answers rows of another type now.
    PostgreSQL refuses it (``cached plan must not change result type``, 0A000); asyncpg
    drops the statement from its cache and raises ``InvalidCachedStatementError``, which it
    retries by itself outside a transaction only — inside one (every ledger write) it is
    the caller's. The same call again succeeds: a 503 to try again, not a bug's 500
    (until 2026-12-07)."""
    table = f"plan_probe_{uuid.uuid4().hex[:8]}"
    await conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY); INSERT INTO {table} VALUES (1)")
    migrating = await asyncpg.connect(database_url)
    try:
        await conn.fetch(f"SELECT * FROM {table}")  # prepared and cached by this connection
        await migrating.execute(f"ALTER TABLE {table} ADD COLUMN added int")
        async with conn.transaction():
            err = await _raised(conn.fetch(f"SELECT * FROM {table}"))
        assert err.sqlstate == "0A000", err  # type: ignore[attr-defined]

        assert is_unavailable(err)
        _is_503_ledger_unavailable(await _answer(err))
        async with conn.transaction():  # the same call again: answered
            assert [dict(r) for r in await conn.fetch(f"SELECT * FROM {table}")] == [{"id": 1, "added": None}]
    finally:
        await migrating.execute(f"DROP TABLE {table}")
        await migrating.close()

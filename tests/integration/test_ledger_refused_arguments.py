"""A call asyncpg refuses before anything is sent — for its arguments — is never the ledger
being unavailable: the same call fails again for ever, whatever PostgreSQL does.

Produced for real on the session's PostgreSQL, through the process's own pool (its
``jsonb`` codec included):

* a value asyncpg cannot encode for its parameter's type (a ``str`` for an ``int``, an
  ``int`` beyond ``int4`` / ``int8``, an aware ``datetime`` for a ``timestamp``, a ``str``
  for a ``timestamptz`` or a ``uuid``, a ``set`` for a ``jsonb``, a lone surrogate in a
  ``text`` or a ``jsonb``): asyncpg 0.32 raises ``asyncpg.exceptions.DataError`` — the
  ``PostgresError`` of SQLSTATE 22000, the encoding error its ``__cause__`` — which was
  already no outage;
* asyncpg's other ``DataError`` (``asyncpg.exceptions._base.DataError``, an
  ``InterfaceError`` and a ``ValueError``: "invalid query input"), and a statement given
  another number of arguments than it has parameters, or more than 32 767: each was an
  ``InterfaceError``, read as a connection gone away (until 2026-12-06): the API answered
  ``503 ledger_unavailable`` with ``Retry-After`` for ever, logged without a traceback, and
  the ``CuraflowLedgerUnavailable`` alert counted a bug as an outage.

Each is now a bug's ``500 internal error`` with its traceback logged, never counted as the
ledger unavailable; a real outage of the client's side (a closed pool, a closed
connection, a pool's wait run out) stays one.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import asyncpg
import httpx
import pytest
from prometheus_client import REGISTRY
from structlog.testing import capture_logs
from temporalio.testing import ActivityEnvironment

from curaflow.api.app import create_app
from curaflow.config import Settings
from curaflow.ledger.db import create_pool, is_unavailable, refused_value
from curaflow.process.telemetry import _Inbound

pytestmark = pytest.mark.integration

#: (statement, arguments) asyncpg cannot encode, each raised client side.
UNENCODABLE: dict[str, tuple[str, tuple[Any, ...]]] = {
    "str-for-int": ("SELECT $1::int", ("abc",)),
    "past-int4": ("SELECT $1::int", (2**31,)),
    "past-int8": ("SELECT $1::bigint", (2**63,)),
    "aware-for-timestamp": ("SELECT $1::timestamp", (dt.datetime(2026, 12, 6, tzinfo=dt.UTC),)),
    "str-for-timestamptz": ("SELECT $1::timestamptz", ("2026-12-06",)),
    "str-for-uuid": ("SELECT $1::uuid", ("not-a-uuid",)),
    "set-for-jsonb": ("SELECT $1::jsonb", ({1, 2},)),
    "lone-surrogate-in-text": ("SELECT $1::text", ("a\udc80",)),
    "lone-surrogate-in-jsonb": ("SELECT $1::jsonb", ({"a": "\udc80"},)),
}

#: (statement, arguments) whose number asyncpg refuses before sending them.
MISCOUNTED: dict[str, tuple[str, tuple[Any, ...]]] = {
    "one-argument-too-many": ("SELECT $1::int", (1, 2)),
    "one-argument-missing": ("SELECT $1::int + $2::int", (1,)),
    "past-32767-arguments": ("SELECT $1::int", tuple(range(32_768))),
}


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    opened = await create_pool(database_url, min_size=1, max_size=1, acquire_timeout_s=0.2)
    try:
        yield opened
    finally:
        await opened.close()


async def _raised(pool: asyncpg.Pool, sql: str, args: tuple[Any, ...]) -> BaseException:
    try:
        await pool.fetchval(sql, *args)
    except (asyncpg.PostgresError, asyncpg.InterfaceError) as err:
        return err
    raise AssertionError("asyncpg sent it and PostgreSQL answered")


def _unavailable_last(where: str) -> float:
    return REGISTRY.get_sample_value("curaflow_ledger_unavailable_last_seconds", {"where": where}) or 0.0


class _Raises:
    def __init__(self, err: BaseException) -> None:
        self.err = err

    async def execute_activity(self, input: Any) -> Any:
        raise self.err


async def _not_counted_under_an_activity(err: BaseException) -> None:
    before = _unavailable_last("activity")
    inbound = _Inbound(_Raises(err), None)  # type: ignore[arg-type]
    with pytest.raises(type(err)):  # let out as it is: retried within the step's budget
        await ActivityEnvironment().run(inbound.execute_activity, SimpleNamespace(args=[]))
    assert _unavailable_last("activity") == before


async def _answer(err: BaseException) -> tuple[httpx.Response, list[dict[str, Any]]]:
    app = create_app(Settings())

    @app.get("/probe/{job_id}")
    async def probe(job_id: str) -> None:
        raise err

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)  # no lifespan: no database needed
    with capture_logs() as logs:
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
            answer = await http.get("/probe/j")
    return answer, logs


async def _is_a_bugs_500(err: BaseException) -> None:
    before = _unavailable_last("api")
    answer, logs = await _answer(err)
    assert answer.status_code == 500, answer.text
    assert "retry-after" not in answer.headers
    assert answer.json()["error"]["message"] == "internal error"
    logged = [e for e in logs if e["event"] == "api.internal_error"]
    assert len(logged) == 1 and logged[0]["exc_info"] is err, logs  # the cause, with its traceback
    assert _unavailable_last("api") == before  # never counted as the ledger unavailable


@pytest.mark.parametrize("case", list(UNENCODABLE))
async def test_a_value_asyncpg_cannot_encode_is_a_refused_value_not_an_outage(pool: asyncpg.Pool, case: str) -> None:
    err = await _raised(pool, *UNENCODABLE[case])
    assert isinstance(err, asyncpg.PostgresError) and err.__cause__ is not None, repr(err)

    assert not is_unavailable(err)
    assert refused_value(err) == "22000"
    await _is_a_bugs_500(err)
    await _not_counted_under_an_activity(err)
    assert await pool.fetchval("SELECT 1") == 1  # the connection was never touched


@pytest.mark.parametrize("case", list(MISCOUNTED))
async def test_arguments_asyncpg_refuses_to_send_are_a_bug_not_an_outage(pool: asyncpg.Pool, case: str) -> None:
    err = await _raised(pool, *MISCOUNTED[case])
    assert isinstance(err, asyncpg.InterfaceError), repr(err)

    assert not is_unavailable(err), err
    assert refused_value(err) is None  # the statement's bug, no value to degrade
    await _is_a_bugs_500(err)
    await _not_counted_under_an_activity(err)
    caused = RuntimeError("the API's call failed")
    caused.__cause__ = err
    assert not is_unavailable(caused)


async def test_asyncpgs_invalid_query_input_class_is_a_refused_value_not_an_outage(pool: asyncpg.Pool) -> None:
    # The class asyncpg documents for "invalid query input" (an InterfaceError and a
    # ValueError); 0.32 raises its PostgresError namesake instead, a later one may not.
    err = await _raised(pool, *UNENCODABLE["past-int4"])
    told = asyncpg.exceptions._base.DataError(str(err))
    told.__cause__ = err.__cause__

    assert not is_unavailable(told)
    assert refused_value(told) == "OverflowError"
    await _is_a_bugs_500(told)
    await _not_counted_under_an_activity(told)


async def test_the_clients_own_outages_stay_outages(database_url: str, pool: asyncpg.Pool) -> None:
    async with pool.acquire():
        with pytest.raises(TimeoutError) as waited:
            await pool.fetchval("SELECT 1")  # the one connection is taken: the pool's wait runs out
    assert is_unavailable(waited.value)

    conn = await asyncpg.connect(database_url)
    await conn.close()
    with pytest.raises(asyncpg.InterfaceError) as closed_connection:
        await conn.fetchval("SELECT 1")
    assert is_unavailable(closed_connection.value), closed_connection.value

    closing = await create_pool(database_url, min_size=1, max_size=1)
    await closing.close()
    with pytest.raises(asyncpg.InterfaceError) as closed_pool:
        await closing.fetchval("SELECT 1")
    assert is_unavailable(closed_pool.value), closed_pool.value
    assert refused_value(closed_pool.value) is None

"""A ledger that keeps failing pages (``CuraflowLedgerUnavailable``): every process remembers
when it last failed on the ledger being unavailable (``curaflow_ledger_unavailable_last_seconds``).

Until 2026-12-06 nothing did. A ledger that refuses writes while it answers reads — a full
disk (53100), a standby after a failover (25006) — kept the ledger gauges fresh (they are
read in a read-only transaction), so every alert stayed silent while every step failed and
retried and every admission was answered 503; the first page came from the jobs stuck past
their deadlines. A bug, a route's or a source's answer is never counted.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import asyncpg
import httpx
import pytest
from prometheus_client import REGISTRY
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from curaflow.api.app import create_app
from curaflow.config import Settings
from curaflow.ledger import gauges
from curaflow.process.telemetry import _Inbound
from curaflow.sources.gate import GateUnavailable

X = asyncpg.exceptions


def _last(where: str) -> float:
    return REGISTRY.get_sample_value("curaflow_ledger_unavailable_last_seconds", {"where": where}) or 0.0


class _Next:
    def __init__(self, err: BaseException) -> None:
        self.err = err

    async def execute_activity(self, input: Any) -> Any:
        raise self.err


def _caused(err: BaseException, cause: BaseException) -> BaseException:
    err.__cause__ = cause
    return err


LEDGER_FAILURES = [
    X.DiskFullError("could not extend file"),
    X.ReadOnlySQLTransactionError("cannot execute UPDATE in a read-only transaction"),
    X.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
    X.InternalClientError("cannot switch to state 12; another operation is in progress"),
    X.SerializationError("could not serialize access due to concurrent update"),
    _caused(GateUnavailable("the rate gate's ledger failed"), TimeoutError()),
]
NOT_THE_LEDGERS = [
    RuntimeError("a bug"),
    X.UniqueViolationError("duplicate key value violates unique constraint"),
    # a route's or a source's answer, typed by reason: its cause is a socket's
    _caused(ApplicationError("connect failed", type="delivery_failed"), ConnectionResetError(104, "reset")),
    ConnectionResetError(104, "a source's socket, or the disk's OSError"),
    TimeoutError(),
]


async def _attempt(err: BaseException) -> None:
    inbound = _Inbound(_Next(err), None)  # type: ignore[arg-type]
    with pytest.raises(type(err)):
        await ActivityEnvironment().run(inbound.execute_activity, SimpleNamespace(args=[]))


@pytest.mark.parametrize("err", LEDGER_FAILURES, ids=lambda e: type(e).__name__)
async def test_an_activity_attempt_ended_on_the_ledger_is_remembered(err: BaseException) -> None:
    before = _last("activity")
    await asyncio.sleep(0.01)
    await _attempt(err)
    assert _last("activity") > before


@pytest.mark.parametrize("err", NOT_THE_LEDGERS, ids=lambda e: type(e).__name__)
async def test_a_bug_or_an_answer_is_not_the_ledgers(err: BaseException) -> None:
    before = _last("activity")
    await asyncio.sleep(0.01)
    await _attempt(err)
    assert _last("activity") == before


async def test_an_api_answer_503_ledger_unavailable_is_remembered() -> None:
    app = create_app(Settings())

    @app.get("/probe/{job_id}")
    async def probe(job_id: str) -> None:
        raise X.DiskFullError("could not extend file")

    @app.get("/bug/{job_id}")
    async def bug(job_id: str) -> None:
        raise RuntimeError("a bug")

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
        before = _last("api")
        await asyncio.sleep(0.01)
        assert (await http.get("/bug/j")).status_code == 500
        assert _last("api") == before
        assert (await http.get("/probe/j")).status_code == 503
    assert _last("api") > before


class _DownPool:
    """A pool whose every acquire fails as a ledger that does not answer does; stops the loop."""

    def __init__(self, stop: asyncio.Event, err: BaseException) -> None:
        self.stop = stop
        self.err = err

    def acquire(self) -> Any:
        self.stop.set()
        raise self.err


@pytest.mark.parametrize(("err", "counted"), [(TimeoutError(), True), (KeyError("a bug of the query"), False)])
async def test_a_failed_refresh_of_the_ledger_gauges_is_remembered(err: BaseException, counted: bool) -> None:
    stop = asyncio.Event()
    before = _last("gauges")
    await asyncio.sleep(0.01)
    await gauges.run_ledger_gauges(_DownPool(stop, err), Settings(), stop)  # type: ignore[arg-type]
    assert (_last("gauges") > before) is counted

"""A hung PostgreSQL does not hang the API.

The API's PostgreSQL is SIGSTOPped — sockets open, nothing answers, the way a hung host or
a network partition looks. Every request that needs the ledger answers within the API's
bound (``api.ledger_timeout_ms``) with ``503`` ``ledger_unavailable`` and ``Retry-After``;
``/ready`` says not ready as fast; ``/health`` answers. When PostgreSQL wakes up, the same
process serves again.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import httpx
import pytest

from curaflow.devstack.postgres import RestartablePostgres
from curaflow.ledger.db import create_pool
from tests.services import ApiProcess, start_api_process
from tests.support import API_TOKEN, eventually, short_id

# A hung PostgreSQL: the full suite only.
pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: The API's bound in this test (``api.ledger_timeout_ms``: half the default's 2 s — each
#: request to the hung ledger waits it out, nine of them in a row; with 2 s the test took
#: 16 s) and the slack its answer may take on top (the release of an interrupted
#: connection, a busy two-core machine).
LEDGER_TIMEOUT_S = 1.0
SLACK_S = 2.0


@pytest.fixture(scope="module")
def own_pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestartablePostgres]:
    """The module's PostgreSQL (each test leaves it running: it resumes or restarts what it broke)."""
    pg = RestartablePostgres(tmp_path_factory.mktemp("pg") / "data", cleanup_mode="delete")
    pg.start()
    try:
        yield pg
    finally:
        pg.close()


@pytest.fixture(scope="module")
async def api(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, own_pg: RestartablePostgres
) -> AsyncIterator[ApiProcess]:
    """One ``curaflow api`` process on :func:`own_pg` for the module: each test starts from
    an API that already rode out the faults of the tests before it."""
    tmp_path = tmp_path_factory.mktemp("api")
    out = f"out-{short_id()}"
    config: dict[str, Any] = {
        "api": {"token": API_TOKEN, "ledger_timeout_ms": int(LEDGER_TIMEOUT_S * 1000)},
        "routes": {out: {"kind": "directory", "path": str(tmp_path / "out")}},
        "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [out]}],
    }
    process = await start_api_process(
        tmp_path, temporal_address=temporal_address, database_url=own_pg.url, token=API_TOKEN, config=config
    )
    try:
        yield process
    finally:
        process.stop()


def task() -> dict[str, Any]:
    return {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": f"k-{short_id()}",
        "params": {"target_id": "demo"},
    }


async def timed(http: httpx.AsyncClient, method: str, path: str, **kwargs: Any) -> tuple[httpx.Response, float]:
    began = time.perf_counter()
    answer = await http.request(method, path, **kwargs)
    return answer, time.perf_counter() - began


async def test_a_hung_ledger_is_answered_503_with_retry_after_within_the_bound(
    api: ApiProcess, own_pg: RestartablePostgres
) -> None:
    async with httpx.AsyncClient(
        base_url=api.url, headers={"Authorization": f"Bearer {API_TOKEN}"}, timeout=60
    ) as http:
        admitted = await http.post("/jobs", json=task())
        assert admitted.status_code == 202, admitted.text
        job_id = admitted.json()["job"]["job_id"]
        assert (await http.get("/ready")).status_code == 200

        stopped = await asyncio.to_thread(own_pg.pause)
        try:
            answers = [
                await timed(http, "GET", f"/jobs/{job_id}"),
                await timed(http, "POST", "/jobs", json=task()),
                await timed(http, "GET", "/jobs", params={"idempotency_key": "k-nothing"}),
                await timed(http, "GET", f"/jobs/{job_id}/events"),
                await timed(http, "GET", f"/jobs/{job_id}"),  # again: the interrupted connections were let go
            ]
            # the legacy refetch shim answers in its own shape, as retryable as the rest
            request_id = str(uuid.uuid4())
            legacy = [
                await timed(http, "POST", "/internal/targets/demo/refetch", json={"requestId": request_id}),
                await timed(http, "GET", f"/internal/targets/demo/refetch/{request_id}"),
            ]
            ready, ready_s = await timed(http, "GET", "/ready")
            health, health_s = await timed(http, "GET", "/health")
        finally:
            await asyncio.to_thread(own_pg.resume, stopped)

        for answer, elapsed in answers:
            where = f"{answer.request.method} {answer.request.url.path}"
            assert answer.status_code == 503, (where, answer.status_code, answer.text)
            assert answer.headers["retry-after"] == "5", where
            error = answer.json()["error"]
            assert (error["code"], error["retryable"], error["detail"]["reason"]) == (
                "internal_error",
                True,
                "ledger_unavailable",
            ), where
            assert elapsed < LEDGER_TIMEOUT_S + SLACK_S, (where, elapsed)
        for answer, elapsed in legacy:
            where = f"{answer.request.method} {answer.request.url.path}"
            assert answer.status_code == 503, (where, answer.status_code, answer.text)
            assert answer.headers["retry-after"] == "5", where
            assert answer.json() == {"status": "error", "error": "the ledger is unavailable; retry later"}, where
            assert elapsed < LEDGER_TIMEOUT_S + SLACK_S, (where, elapsed)
        assert ready.status_code == 503 and ready.json()["checks"]["ledger"]["ok"] is False
        assert ready_s < LEDGER_TIMEOUT_S + SLACK_S, ready_s
        assert health.status_code == 200 and health_s < 1.0

        async def serving() -> bool:
            return (await http.get(f"/jobs/{job_id}")).status_code == 200

        await eventually(serving, timeout_s=30, what="GET /jobs/{id} answers 200 once PostgreSQL is back")
        assert (await http.get("/ready")).status_code == 200
        again = await http.post("/jobs", json=task())
        assert again.status_code == 202, again.text


async def test_every_pool_wait_is_bounded(own_pg: RestartablePostgres) -> None:
    pool = await create_pool(own_pg.url, min_size=1, max_size=2, acquire_timeout_s=1.0, statement_timeout_s=1.0)
    try:
        assert await pool.fetchval("SELECT 1") == 1
        stopped = await asyncio.to_thread(own_pg.pause)
        try:
            for _ in range(3):  # a statement on the pooled connection, then new connections
                began = time.perf_counter()
                with pytest.raises(TimeoutError):
                    await pool.fetchval("SELECT 1")
                assert time.perf_counter() - began < 1.0 + SLACK_S
            began = time.perf_counter()
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.5), pool.acquire() as conn:  # a caller's own bound
                    await conn.fetchval("SELECT pg_sleep(10)")
            assert time.perf_counter() - began < 0.5 + SLACK_S
        finally:
            await asyncio.to_thread(own_pg.resume, stopped)
        # the server-side bound: a statement longer than statement_timeout is stopped by the server
        with pytest.raises(asyncpg.exceptions.QueryCanceledError, match="statement timeout"):
            await pool.fetchval("SELECT pg_sleep(5)", timeout=10)
        assert await pool.fetchval("SELECT 1") == 1
    finally:
        await asyncio.wait_for(pool.close(), 10)


async def hammer(http: httpx.AsyncClient, job_id: str, stop: asyncio.Event) -> list[httpx.Response]:
    """Requests that need the ledger, back to back and four at a time, until ``stop``."""
    answers: list[httpx.Response] = []

    async def one_client() -> None:
        while not stop.is_set():
            for method, path, kwargs in (
                ("GET", f"/jobs/{job_id}", {}),
                ("POST", "/jobs", {"json": task()}),
                ("GET", f"/jobs/{job_id}/events", {}),
                ("GET", "/jobs", {"params": {"idempotency_key": "k-nothing"}}),
            ):
                answers.append(await http.request(method, path, **kwargs))

    await asyncio.gather(*(one_client() for _ in range(4)))
    return answers


@pytest.mark.parametrize("fault", ["sigkill", "sigstop"])
async def test_postgresql_killed_or_stopped_mid_request_is_503_never_500(
    api: ApiProcess, own_pg: RestartablePostgres, fault: str
) -> None:
    """Whatever asyncpg raises when its server dies or freezes under a statement in flight
    (``InternalClientError`` "cannot switch to state …", ``ConnectionDoesNotExistError``, a
    reset socket, a bounded wait), the answer is 503 ``ledger_unavailable`` with
    ``Retry-After``: a client that retries only a 503 loses no submission."""
    async with httpx.AsyncClient(
        base_url=api.url, headers={"Authorization": f"Bearer {API_TOKEN}"}, timeout=60
    ) as http:
        admitted = await http.post("/jobs", json=task())
        assert admitted.status_code == 202, admitted.text
        job_id = admitted.json()["job"]["job_id"]
        for _ in range(3):  # three rounds: the fault lands at a different point of the requests each time
            stop = asyncio.Event()
            load = asyncio.create_task(hammer(http, job_id, stop))
            await asyncio.sleep(0.5)  # requests are in flight
            if fault == "sigkill":
                await asyncio.to_thread(own_pg.kill)
                await asyncio.sleep(1.0)
                await asyncio.to_thread(own_pg.start)
            else:
                stopped = await asyncio.to_thread(own_pg.pause)
                await asyncio.sleep(LEDGER_TIMEOUT_S + 1.0)
                await asyncio.to_thread(own_pg.resume, stopped)

            async def serving() -> bool:
                try:
                    return (await http.get(f"/jobs/{job_id}")).status_code == 200
                except httpx.TransportError:  # a keep-alive connection the server closed meanwhile
                    return False

            await eventually(serving, timeout_s=30, what="GET /jobs/{id} answers 200 once PostgreSQL is back")
            stop.set()
            answers = await load
            statuses = sorted({a.status_code for a in answers})
            assert 503 in statuses, statuses  # the fault was seen
            for answer in answers:
                where = f"{answer.request.method} {answer.request.url.path}"
                assert answer.status_code in (200, 202, 404, 503), (where, answer.status_code, answer.text)
                if answer.status_code == 503:
                    assert answer.headers["retry-after"] == "5", where
                    assert answer.json()["error"]["detail"]["reason"] == "ledger_unavailable", where

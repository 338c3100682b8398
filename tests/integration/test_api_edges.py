"""The API's edges: keys it cannot address, readiness, a ledger outage, broken uploads.

Real ``curaflow api`` processes (:func:`tests.services.start_api_process`) where the
socket and the log matter; raw sockets where a well-behaved HTTP client would hide the
fault (a body shorter than its ``Content-Length``, a client that leaves mid-upload, a
reply on a connection the server already closed).
"""

from __future__ import annotations

import asyncio
import time
import unicodedata
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curaflow.devstack.postgres import RestartablePostgres
from tests.conftest import StackFactory
from tests.schema import check_response, validate
from tests.services import ApiProcess, free_port, start_api_process
from tests.support import API_TOKEN, eventually, short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def config(tmp_path: Path) -> dict[str, Any]:
    out = f"out-{short_id()}"
    return {
        "api": {"cancel_wait_ms": 0},
        "routes": {out: {"kind": "directory", "path": str(tmp_path / "out")}},
        "targets": [{"id": "demo", "routes": [out]}],
    }


def task(key: str) -> dict[str, Any]:
    return {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": key,
        "params": {"query": {"tags": ["zz-none"]}},
    }


# ---- idempotency keys: refused, or reachable everywhere ------------------------------------


@pytest.mark.parametrize("key", ["line\nbreak", "crlf\r\nkey", "cr\rkey", "tab\tkey", "bell\x07k", "nel\x85key"])
async def test_keys_with_control_characters_are_refused(make_stack: StackFactory, tmp_path: Path, key: str) -> None:
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    pool = await stack.ledger()
    before = await pool.fetchval("SELECT count(*) FROM jobs")

    answer = await http.post("/jobs", json=task(f"{short_id()}-{key}"))

    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["detail"]["field"]) == ("invalid_params", "idempotency_key")
    assert await pool.fetchval("SELECT count(*) FROM jobs") == before


ANY_KEYS = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=40)  # control characters too
PRINTABLE_KEYS = st.text(st.characters(exclude_categories=("Cs", "Cc")), min_size=1, max_size=40)
#: pieces that once broke routing somewhere: separators, encodings, dot segments, sub-route names
PIECES = st.sampled_from(
    ["/", "%2F", "%", "?", "#", " ", ".", "..", "/..", "/events", "/cancel", "/events/ack", "\u2028", "İ", "ß", "+"]
)
KEYS = st.lists(st.one_of(PRINTABLE_KEYS, PIECES, PIECES, ANY_KEYS), min_size=1, max_size=4).map("".join)


def refused_key(key: str) -> bool:
    """The rule under test: a key is refused when it is blank or, trimmed, holds a control character."""
    return not key.strip() or any(unicodedata.category(c) == "Cc" for c in key.strip())


async def test_every_admitted_key_reaches_its_job_everywhere(make_stack: StackFactory, tmp_path: Path) -> None:
    # For every key admission accepts: GET by id, events_url, list by key and cancel all
    # answer that job; every key it refuses holds a control character.
    stack = make_stack(config(tmp_path))
    await stack.start_api()
    assert stack.api is not None
    url = stack.api.url
    seen = {"admitted": 0, "refused": 0}

    def run() -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {API_TOKEN}"}, timeout=30) as http:

            @settings(max_examples=80, deadline=None, derandomize=True, database=None,
                      suppress_health_check=list(HealthCheck))  # fmt: skip
            @given(head=KEYS, tail=KEYS)
            def check(head: str, tail: str) -> None:
                key = f"{head}{uuid.uuid4().hex[:8]}{tail}"  # unique, so no two keys share a job id
                answer = http.post("/jobs", json=task(key))
                if refused_key(key):
                    assert answer.status_code == 400, (key, answer.text)
                    assert answer.json()["error"]["detail"]["field"] == "idempotency_key"
                    seen["refused"] += 1
                    return
                assert answer.status_code == 202, (key, answer.text)
                job = answer.json()["job"]
                validate(job, "Job")
                job_path = job["events_url"].removesuffix("/events")
                got = http.get(httpx.URL(job_path))
                assert (got.status_code, got.json().get("job_id")) == (200, job["job_id"]), (key, job_path)
                events = http.get(httpx.URL(job["events_url"]))
                assert (events.status_code, events.json().get("job_id")) == (200, job["job_id"]), key
                for asked in (key, job["idempotency_key"], f"\u2028{job['idempotency_key']} "):
                    listed = http.get("/jobs", params={"idempotency_key": asked})
                    assert [j["job_id"] for j in listed.json()["jobs"]] == [job["job_id"]], (key, asked)
                cancelled = http.post(httpx.URL(job_path + "/cancel"))
                assert (cancelled.status_code, cancelled.json().get("job_id")) == (200, job["job_id"]), key
                seen["admitted"] += 1

            check()

    await asyncio.to_thread(run)
    assert seen["admitted"] >= 20 and seen["refused"] >= 1, seen


#: Keys whose spelling a path could change: pads of Unicode whitespace (U+2028 included),
#: letter case, and the four Unicode normal forms of the same text.
TRICKY_KEYS = [
    " lead-{u}", "trail-{u}\u2028", "\u3000both-{u}\u00a0", "\u2029\u2000mixed-{u}\t",
    "Case-{u}", "case-{u}-ß", "İ-{u}", "caf\u00e9-{u}", "cafe\u0301-{u}", "\ufb01-{u}", "fi-{u}", "\u2460-{u}",
]  # fmt: skip


async def test_a_key_reaches_its_job_by_every_path_in_every_spelling_it_was_sent(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    # Admission, the lookup, the Temporal start's job id and the legacy shim read a key
    # alike (curaflow.protocol.keys): trimmed, case and normal form kept.
    from curaflow.jobs.submit import job_id_for

    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    u = uuid.uuid4().hex[:8]
    admitted: dict[str, str] = {}
    for spelling in TRICKY_KEYS:
        key = spelling.format(u=u)
        answer = await http.post("/jobs", json=task(key))
        assert answer.status_code == 202, (key, answer.text)
        job = answer.json()["job"]
        assert job["idempotency_key"] == key.strip() and job["job_id"] == f"demo@manual-{key.strip().lower()}"
        assert job_id_for(task(key), target_id="demo") == job["job_id"]  # a Temporal client's start
        admitted[key] = job["job_id"]
        for asked in (key, key.strip(), f"\u2028 {key.strip()}\u3000"):
            listed = await http.get("/jobs", params={"idempotency_key": asked})
            assert [j["job_id"] for j in listed.json()["jobs"]] == [job["job_id"]], (key, asked)
        replay = await http.post("/jobs", json=task(f"\u2029{key.strip()} "))
        assert (replay.status_code, replay.json()["job"]["job_id"]) == (200, job["job_id"]), key
    # normal forms are distinct keys, distinct jobs (no normalisation merges them)
    assert len(set(admitted.values())) == len(TRICKY_KEYS)
    # a case variant of an admitted key is refused, never another job under the same id
    refused = await http.post("/jobs", json=task(f"case-{u}"))
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "idempotency_conflict"
    listed = await http.get("/jobs", params={"idempotency_key": f"case-{u}"})
    assert listed.json()["jobs"] == []

    # the legacy shim shares the key space: a padded requestId is the job's key
    request_id = str(uuid.uuid4())
    async with httpx.AsyncClient(
        base_url=http.base_url, headers={"Authorization": f"Bearer {API_TOKEN}"}, timeout=30
    ) as raw:
        legacy = await raw.post("/internal/targets/demo/refetch", json={"requestId": f" {request_id}\u2028"})
        assert legacy.json()["slotId"] == f"demo@manual-{request_id}", legacy.text
    for asked in (request_id, f"\u00a0{request_id}"):
        listed = await http.get("/jobs", params={"idempotency_key": asked})
        assert [j["job_id"] for j in listed.json()["jobs"]] == [f"demo@manual-{request_id}"], asked
    replay = await http.post("/jobs", json=task(f"{request_id} "))
    assert (replay.status_code, replay.json()["job"]["job_id"]) == (200, f"demo@manual-{request_id}")


# ---- readiness ------------------------------------------------------------------------------


@pytest.fixture
def own_pg(tmp_path: Path) -> Iterator[RestartablePostgres]:
    pg = RestartablePostgres(tmp_path / "pg" / "data", cleanup_mode="delete")
    pg.start()
    try:
        yield pg
    finally:
        pg.close()


@pytest.fixture
async def api_processes() -> AsyncIterator[list[ApiProcess]]:
    started: list[ApiProcess] = []
    yield started
    for api in started:
        api.stop()


def client(url: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=url,
        headers={"Authorization": f"Bearer {API_TOKEN}"},
        timeout=30,
        event_hooks={"response": [check_response]},
    )


async def test_ready_names_each_check_and_fails_while_temporal_is_unreachable(
    tmp_path: Path, database_url: str, api_processes: list[ApiProcess]
) -> None:
    nowhere = f"127.0.0.1:{free_port()}"
    api = await start_api_process(
        tmp_path, temporal_address=nowhere, database_url=database_url, token=API_TOKEN, config=config(tmp_path)
    )
    api_processes.append(api)
    async with client(api.url) as http:
        assert (await http.get("/health")).status_code == 200  # liveness: the process answers
        ready = await http.get("/ready")

    assert ready.status_code == 503
    body = ready.json()
    assert body["status"] == "not_ready"
    assert body["checks"]["ledger"]["ok"] is True
    assert body["checks"]["temporal"]["ok"] is False


async def test_a_ledger_outage_is_not_ready_and_its_500s_leave_the_connection_usable(
    tmp_path: Path, temporal_address: str, own_pg: RestartablePostgres, api_processes: list[ApiProcess]
) -> None:
    api = await start_api_process(
        tmp_path, temporal_address=temporal_address, database_url=own_pg.url, token=API_TOKEN, config=config(tmp_path)
    )
    api_processes.append(api)
    async with client(api.url) as http:
        ready = await http.get("/ready")
        assert ready.status_code == 200, ready.text
        assert {"ledger", "temporal"} <= set(ready.json()["checks"])

        await asyncio.to_thread(own_pg.stop, "fast")

        async def not_ready() -> bool:
            return (await http.get("/ready")).status_code == 503

        await eventually(not_ready, timeout_s=15, what="/ready says 503", ignore=(httpx.HTTPError,))
        body = (await http.get("/ready")).json()
        assert body["checks"]["ledger"]["ok"] is False and body["checks"]["temporal"]["ok"] is True
        assert (await http.get("/health")).status_code == 200

    # Two requests on one keep-alive connection: the 503 either says Connection: close or
    # the connection still answers the next request.
    host, port = api.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        first = await exchange(reader, writer, get("/jobs/demo@manual-outage", port))
        assert first.status == 503, first
        assert first.headers.get("retry-after") == "5", first
        assert b'"ledger_unavailable"' in first.body
        if first.headers.get("connection") != "close":
            second = await exchange(reader, writer, get("/health", port))
            assert second.status == 200, second
    finally:
        writer.close()

    await asyncio.to_thread(own_pg.start)
    async with client(api.url) as http:

        async def ready_again() -> bool:
            return (await http.get("/ready")).status_code == 200

        await eventually(ready_again, timeout_s=30, what="/ready says 200 again", ignore=(httpx.HTTPError,))


# ---- broken uploads ---------------------------------------------------------------------------


async def test_a_short_body_times_out_and_a_vanished_client_is_no_500(
    tmp_path: Path, temporal_address: str, database_url: str, api_processes: list[ApiProcess]
) -> None:
    cfg = config(tmp_path)
    cfg["api"] = {**cfg["api"], "body_timeout_ms": 1000}
    api = await start_api_process(
        tmp_path, temporal_address=temporal_address, database_url=database_url, token=API_TOKEN, config=cfg
    )
    api_processes.append(api)
    host, port = api.url.removeprefix("http://").split(":")
    head = (
        f"POST /jobs HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {API_TOKEN}\r\n"
        "Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n"
    ).encode()
    part = b'{"protocol_version": "1", "job_type": "candidate_search", "idempotency_key": "short-'

    # 1. A body shorter than its Content-Length: answered (and closed) after the timeout.
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(head + part)
        await writer.drain()
        started = time.monotonic()
        answer = await asyncio.wait_for(read_response(reader), 10)
        waited = time.monotonic() - started
    finally:
        writer.close()
    assert answer.status == 408, answer
    assert answer.headers.get("connection") == "close"
    assert b'"invalid_params"' in answer.body
    assert 0.8 <= waited < 5

    # 2. A client that leaves mid-upload: no 500, no traceback, no error line.
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(head + part)
    await writer.drain()
    await asyncio.sleep(0.3)
    writer.transport.abort()
    await asyncio.sleep(1.5)

    text = api.stop()
    lines = api.lines()
    assert "Traceback" not in text, text[-3000:]
    assert not [line for line in lines if line.get("level") == "error"], [
        line for line in lines if line.get("level") == "error"
    ]
    assert not [line for line in lines if line.get("http_status") == 500]
    gone = [line for line in lines if line.get("code") == "client_disconnected"]
    assert len(gone) == 1 and gone[0]["path"] == "/jobs", lines[-5:]


# ---- raw HTTP/1.1 -----------------------------------------------------------------------------


class Raw:
    """One HTTP/1.1 response read off a socket."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def __repr__(self) -> str:
        return f"Raw({self.status}, {self.headers}, {self.body[:300]!r})"


def get(path: str, port: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {API_TOKEN}\r\n\r\n".encode()


async def read_response(reader: asyncio.StreamReader) -> Raw:
    status_line = await reader.readline()
    if not status_line:
        raise ConnectionError("the server sent nothing (connection closed)")
    status = int(status_line.split()[1])
    headers: dict[str, str] = {}
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    body = b""
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    return Raw(status, headers, body)


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> Raw:
    writer.write(request)
    await writer.drain()
    return await asyncio.wait_for(read_response(reader), 20)

"""The API stopping while consumers wait on it: every wait a request holds ends with the server.

When ``curaflow api`` is asked to stop, a long poll (``wait_ms`` up to 30 s) held open is
answered at once with the page it has — an empty page, as at its timeout — and a request
body still trickling in (``api.body_timeout_ms``, 30 s) is answered a retryable ``503
server_stopping`` with ``Connection: close`` (on the job surface and on the legacy shim);
then the process exits. Until 2026-12-06 uvicorn's graceful shutdown waited for every
one of them to reach its own timeout, and a supervisor's stop timeout (compose's default
10 s) killed the process first: the consumer got a cut connection and the lifespan's
shutdown (queued workflow starts, the pools) never ran.
"""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.services import start_api_process
from tests.support import API_TOKEN, short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: Far beyond what the stop is allowed to take: a stop that waits for the polls' own
#: timeout cannot pass.
POLL_MS = 30_000
STOP_BOUND_S = 12


def config(tmp_path: Path) -> dict[str, Any]:
    out = f"out-{short_id()}"
    return {
        "routes": {out: {"kind": "directory", "path": str(tmp_path / "out")}},
        "targets": [{"id": "demo", "routes": [out]}],
    }


async def trickling(host: str, port: int, path: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A POST whose body has begun and is still coming (5000 bytes declared, 20 sent)."""
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(
        (
            f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {API_TOKEN}\r\n"
            'Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n{"protocol_version":'
        ).encode()
    )
    await writer.drain()
    return reader, writer


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_long_polls_and_trickling_bodies_held_at_shutdown_are_answered_and_the_api_exits(
    tmp_path: Path, temporal_address: str, database_url: str, stop: signal.Signals
) -> None:
    api = await start_api_process(
        tmp_path, temporal_address=temporal_address, database_url=database_url, token=API_TOKEN, config=config(tmp_path)
    )
    try:
        async with httpx.AsyncClient(
            base_url=api.url, headers={"Authorization": f"Bearer {API_TOKEN}"}, timeout=60
        ) as http:
            jobs = []
            for _ in range(3):
                task = {
                    "protocol_version": "1",
                    "job_type": "candidate_search",
                    "idempotency_key": f"stop-{short_id()}",
                    "params": {"query": {"tags": ["a"]}},
                }
                jobs.append((await http.post("/jobs", json=task)).json()["job"]["job_id"])
            polls = []
            for job_id in jobs:  # no worker: no event comes, each poll would wait its 30 s
                events = (await http.get(f"/jobs/{job_id}/events")).json()["events"]
                for _ in range(5):
                    params = {"wait_ms": POLL_MS, "after": events[-1]["event_id"]}
                    polls.append(asyncio.create_task(http.get(f"/jobs/{job_id}/events", params=params)))
            host, port = api.url.removeprefix("http://").split(":")
            uploads = [await trickling(host, int(port), path) for path in ("/jobs", "/internal/targets/demo/refetch")]
            await asyncio.sleep(0.5)  # the polls are in (none can answer: nothing comes)
            assert not any(p.done() for p in polls)

            api.process.send_signal(stop)
            answers = await asyncio.wait_for(asyncio.gather(*polls), STOP_BOUND_S)
            cut = [await asyncio.wait_for(reader.read(), STOP_BOUND_S) for reader, _ in uploads]
            code = await asyncio.wait_for(asyncio.to_thread(api.process.wait), STOP_BOUND_S)
    finally:
        text = api.stop()

    assert code == 0, text[-3000:]
    for answer in answers:
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["events"] == [] and "next_after" not in body, body
    for raw in cut:  # the whole answer, then the connection closed (read() reached its end)
        head, _, body = raw.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503 "), raw
        assert b"connection: close" in head.lower() and b"retry-after: 1" in head.lower(), raw
        assert b"server is stopping" in body, raw
    assert json.loads(cut[0].partition(b"\r\n\r\n")[2])["error"] == {
        "code": "internal_error",
        "message": "the server is stopping and the request body had not all arrived; send it again",
        "retryable": True,
        "detail": {"reason": "server_stopping"},
    }
    assert not [line for line in api.lines() if line.get("level") == "error"]
    assert "Traceback" not in text, text[-3000:]
    assert "timeout graceful shutdown exceeded" not in text

"""Authentication and the per-request log lines, against a real ``curaflow api`` process.

The process logs JSON lines on stderr (reference §9.2); the tests read them back and
check the event names and fields, the sanitised ``attempt_id`` / ``provider``, one line
per request, and that neither the token nor a wrong token ever appears.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.schema import check_response
from tests.services import ApiProcess, start_api_process
from tests.support import short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOKEN = "tok-" + "Zq8x" * 8
WRONG = "WRONG-" + "Yp3w" * 6


@pytest.fixture
async def api_process(tmp_path: Path, temporal_address: str, database_url: str) -> AsyncIterator[Any]:
    started: list[ApiProcess] = []

    async def start(*, token: str | None, insecure: bool = False) -> ApiProcess:
        api = await start_api_process(
            tmp_path, temporal_address=temporal_address, database_url=database_url, token=token, insecure=insecure
        )
        started.append(api)
        return api

    yield start
    for api in started:
        api.stop()


def client(url: str, token: str | None = TOKEN) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(base_url=url, headers=headers, timeout=30, event_hooks={"response": [check_response]})


def task(key: str) -> dict[str, Any]:
    return {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": key,
        "params": {"query": {"tags": ["オリジナル"]}},
    }


async def test_bearer_token_and_one_log_line_per_request(api_process: Any) -> None:
    api = await api_process(token=TOKEN)
    key = f"logs-{short_id()}"
    async with client(api.url, None) as anonymous, client(api.url) as http:
        assert (await anonymous.get("/health")).status_code == 200
        refused = await anonymous.get("/capabilities")
        assert (refused.status_code, refused.json()) == (401, {"status": "error", "error": "unauthorized"})
        for header in (f"Bearer {WRONG}", f"Bearer{TOKEN}", f"Basic {TOKEN}", TOKEN, f"Bearer {TOKEN}x"):
            answer = await anonymous.get("/capabilities", headers={"Authorization": header})
            assert answer.status_code == 401, header
        assert (await http.get("/capabilities")).status_code == 200

        attempt = "att 42/<b>:" + "x" * 100
        admitted = await http.post(
            "/jobs", json=task(key), headers={"X-Schedule-Attempt-Id": attempt, "X-Schedule-Provider": "cron.example!!"}
        )
        assert admitted.status_code == 202
        job_id = admitted.json()["job"]["job_id"]
        replay = await http.post("/jobs", json=task(key), headers={"X-Attempt-Id": "fallback:1"})
        assert replay.status_code == 200
        assert (await http.post("/jobs", json={"protocol_version": "2"})).status_code == 400
        assert (await http.get("/jobs/demo@manual-nothing-here")).status_code == 404
        assert (await http.get(f"/jobs/{job_id}/events", params={"unacked": "maybe"})).status_code == 400
        assert (await http.post(f"/jobs/{job_id}/events/ack", json={})).status_code == 400
        events = (await http.get(f"/jobs/{job_id}/events")).json()["events"]
        ack = await http.post(f"/jobs/{job_id}/events/ack", json={"ack_through": events[0]["event_id"]})
        assert ack.status_code == 200
        cancelled = await http.post(f"/jobs/{job_id}/cancel")
        assert cancelled.json()["status"] == "cancelled"

    text = api.stop()
    assert TOKEN not in text and WRONG not in text
    lines = [line for line in api.lines() if "http_status" in line]
    by_event: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        by_event.setdefault(line["event"], []).append(line)
        assert isinstance(line["elapsed_ms"], int | float) and line["elapsed_ms"] >= 0
        assert line["method"] in ("GET", "POST") and line["path"].startswith("/")
    assert len(lines) == 16  # one per request (GET /health is not logged)

    first, second = by_event["schedule.job_admitted"]
    assert {k: first[k] for k in ("job_id", "job_type", "status", "disposition", "http_status")} == {
        "job_id": job_id,
        "job_type": "candidate_search",
        "status": "queued",
        "disposition": "accepted",
        "http_status": 202,
    }
    assert first["attempt_id"] == ("att42b:" + "x" * 100)[:64] and first["provider"] == "cron.example"
    assert (second["disposition"], second["http_status"], second["attempt_id"]) == ("replayed", 200, "fallback:1")
    assert "provider" not in second
    assert all("attempt_id" not in line for line in lines if line not in (first, second))

    rejected = {(r["http_status"], r["code"], r["stage"]) for r in by_event["schedule.job_rejected"]}
    assert rejected == {(400, "unsupported_protocol_version", "job admission failed")}  # a refused admission only
    failed = {(r["http_status"], r["code"], r["stage"]) for r in by_event["api.request_failed"]}
    assert failed == {
        (401, "unauthorized", "capabilities failed"),
        (404, "invalid_params", "job lookup failed"),
        (400, "invalid_params", "job events failed"),
        (400, "invalid_params", "job ack failed"),
    }
    assert len(by_event["schedule.job_rejected"]) + len(by_event["api.request_failed"]) == 10
    [cancel_line] = by_event["schedule.job_cancelled"]
    assert (cancel_line["job_id"], cancel_line["status"], cancel_line["http_status"]) == (job_id, "cancelled", 200)
    assert {line["path"] for line in by_event["api.request"]} == {
        "/capabilities",
        f"/jobs/{job_id}/events",
        f"/jobs/{job_id}/events/ack",
    }


async def test_the_bearer_scheme_is_case_insensitive_and_the_token_is_not(api_process: Any) -> None:
    # RFC 9110 §11.1: an auth scheme name is case-insensitive; the token is compared exactly.
    api = await api_process(token=TOKEN)
    async with client(api.url, None) as anonymous, httpx.AsyncClient(base_url=api.url, timeout=30) as raw:
        for scheme in ("bearer", "BEARER", "bEaReR", "Bearer"):
            for separator in (" ", "   "):
                header = f"{scheme}{separator}{TOKEN}"
                answer = await anonymous.get("/capabilities", headers={"Authorization": header})
                assert answer.status_code == 200, header
                legacy = await raw.get(
                    f"/internal/targets/demo/refetch/{uuid.uuid4()}", headers={"Authorization": header}
                )
                assert legacy.status_code == 404, header  # past the token: an unknown request
        for header in (f"bearer {TOKEN.upper()}", f"BEARER {TOKEN.lower()}", f"bearer{TOKEN}", f"Bearerx {TOKEN}"):
            answer = await anonymous.get("/capabilities", headers={"Authorization": header})
            assert (answer.status_code, answer.json()) == (401, {"status": "error", "error": "unauthorized"}), header
    api.stop()


async def test_without_a_token_the_api_fails_closed_unless_insecure(api_process: Any) -> None:
    closed = await api_process(token=None)
    async with client(closed.url, None) as http:
        assert (await http.get("/health")).status_code == 200
        for method, path in (
            ("GET", "/capabilities"),
            ("POST", "/jobs"),
            ("GET", "/jobs/x"),
            ("GET", "/jobs/x/events"),
        ):
            answer = await http.request(method, path, json=task(f"closed-{short_id()}"))
            assert answer.status_code == 503, path
            assert answer.json() == {"status": "error", "error": "endpoint disabled: token not configured"}
    assert "api.fail_closed" in closed.stop()

    opened = await api_process(token=None, insecure=True)
    async with client(opened.url, None) as http:
        assert (await http.get("/capabilities")).status_code == 200
    output = opened.stop()
    assert "WARNING: --insecure" in output
    assert "api.insecure" in output


async def test_an_api_process_settles_its_heap_once_started_and_serves(api_process: Any) -> None:
    # curaflow.process.heap: the start-up heap frozen, young collections rarer, said once in the log.
    from curaflow.process.heap import THRESHOLDS, TUNED

    api = await api_process(token=TOKEN)
    settled = [line for line in api.lines() if line.get("event") == "process.heap_settled"]
    assert len(settled) == 1, api.lines()
    assert settled[0]["frozen_objects"] > 1_000
    if TUNED:
        assert settled[0]["thresholds"] == list(THRESHOLDS)
    async with client(api.url) as http:
        answer = await http.post("/jobs", json=task(f"settled-{short_id()}"))
        assert answer.status_code == 202, answer.text
    api.stop()

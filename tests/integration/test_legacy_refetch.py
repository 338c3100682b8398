"""The legacy refetch shim (reference §9.1–9.3) that TelePost's rollback switch talks to.

``curaflow.api.legacy`` maps ``POST/GET /internal/targets/{target}/refetch[/{requestId}]``
onto the job surface's admission and projection. Real API, real PostgreSQL, real Temporal
dev server; the last test runs a real worker. Bodies are compared byte for byte.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import StackFactory
from tests.support import API_TOKEN, Stack, short_id

pytestmark = pytest.mark.integration

PROJECTION_KEYS = [
    "requestId",
    "slotId",
    "state",
    "slotStatus",
    "createdAt",
    "startedAt",
    "updatedAt",
    "heartbeatAt",
    "leaseExpiresAt",
    "leaseActive",
    "claimed",
    "attemptCount",
    "terminalReasonCode",
    "terminalReasonMessage",
    "manualRequestId",
    "idempotencyKey",
    "correlationId",
]


def two_targets(tmp_path: Path) -> dict[str, Any]:
    out = f"out-{short_id()}"
    return {
        "routes": {out: {"kind": "directory", "path": str(tmp_path / "delivered")}},
        "targets": [
            {"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [out]},
            {"id": "other", "query": {"tags": ["風景"]}, "routes": [out]},
            {"id": "closed", "query": {"tags": ["風景"]}, "routes": [out], "accept_jobs": False},
        ],
    }


@pytest.fixture(scope="module")
async def stack(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str, ledger_pool: Any
) -> AsyncIterator[Stack]:
    """An API with no worker: admitted jobs stay open."""
    tmp = tmp_path_factory.mktemp("legacy")
    stack = Stack(tmp, temporal_address, database_url, two_targets(tmp))
    await stack.start_api()
    yield stack
    await stack.stop()


def raw_client(stack: Stack, token: str | None = API_TOKEN) -> httpx.AsyncClient:
    """A client without the protocol schema hook: these routes are outside the protocol."""
    assert stack.api is not None
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(base_url=stack.api.url, headers=headers, timeout=30)


async def test_refetch_admits_once_and_converges_with_the_job_surface(stack: Stack) -> None:
    request_id = str(uuid.uuid4()).upper()  # the key keeps its case; the job id is lowercased
    job_id = f"demo@manual-{request_id.lower()}"
    async with raw_client(stack) as http:
        first = await http.post(
            "/internal/targets/demo/refetch", json={"requestId": request_id, "correlationId": "review-7"}
        )
        assert first.status_code == 202
        assert first.headers["content-type"] == "application/json; charset=utf-8"
        assert first.content == (f'{{"status":"accepted","slotId":"{job_id}","disposition":"accepted"}}'.encode())

        again = await http.post("/internal/targets/demo/refetch", json={"requestId": request_id})
        assert again.status_code == 202
        assert again.json() == {"status": "accepted", "slotId": job_id, "disposition": "already_running"}

        # the same key space as /jobs: a Task with that key (and params of its own) is the same job
        task = {
            "protocol_version": "1",
            "job_type": "candidate_search",
            "idempotency_key": request_id,
            "params": {"target_id": "demo", "query": {"tags": ["風景"]}},
        }
        replay = await http.post("/jobs", json=task)
        assert replay.status_code == 200 and replay.json()["job"]["job_id"] == job_id
        assert replay.json()["job"]["correlation_id"] == "review-7"  # the first write wins

        status = await http.get(f"/internal/targets/demo/refetch/{request_id}")
        assert status.status_code == 200
        assert status.headers["content-type"] == "application/json; charset=utf-8"
        body = status.json()
        assert list(body) == PROJECTION_KEYS
        assert body["requestId"] == request_id and body["slotId"] == job_id
        assert (body["state"], body["slotStatus"], body["claimed"], body["attemptCount"]) == (
            "pending",
            "pending",
            False,
            0,
        )
        assert (body["manualRequestId"], body["idempotencyKey"], body["correlationId"]) == (
            request_id,
            request_id,
            "review-7",
        )
        assert body["terminalReasonCode"] is None and body["startedAt"] is None
        assert isinstance(body["createdAt"], int) and body["leaseActive"] is False
        assert status.content == json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        # the lowercase request id names the same refetch
        assert (await http.get(f"/internal/targets/demo/refetch/{request_id.lower()}")).json()["slotId"] == job_id

    pool = await stack.ledger()
    assert await pool.fetchval("SELECT count(*) FROM jobs WHERE job_id = $1", job_id) == 1


async def test_a_job_submitted_first_is_found_by_the_legacy_route(stack: Stack) -> None:
    request_id = str(uuid.uuid4())
    async with raw_client(stack) as http:
        task = {
            "protocol_version": "1",
            "job_type": "candidate_search",
            "idempotency_key": request_id,
            "params": {"target_id": "demo", "query": {"tags": ["風景"]}},
        }
        assert (await http.post("/jobs", json=task)).status_code == 202
        legacy = await http.post("/internal/targets/demo/refetch", json={"requestId": request_id})
        assert legacy.json() == {
            "status": "accepted",
            "slotId": f"demo@manual-{request_id}",
            "disposition": "already_running",
        }
        # the key belongs to demo's job: asking for it on another target is the original's conflict
        conflict = await http.post("/internal/targets/other/refetch", json={"requestId": request_id})
        assert (conflict.status_code, conflict.content) == (409, b'{"status":"error","error":"ambiguous target"}')


async def test_a_request_id_in_another_letter_case_is_the_same_refetch_on_both_routes(stack: Stack) -> None:
    # A UUID is one UUID in any case (RFC 9562 §4): POST and GET follow one rule.
    request_id = str(uuid.uuid4())
    job_id = f"demo@manual-{request_id}"
    mixed = "".join(c.upper() if n % 2 else c for n, c in enumerate(request_id))
    async with raw_client(stack) as http:
        first = await http.post("/internal/targets/demo/refetch", json={"requestId": request_id.upper()})
        assert first.json() == {"status": "accepted", "slotId": job_id, "disposition": "accepted"}
        for variant in (request_id, mixed, f" {request_id}\u2028"):
            again = await http.post("/internal/targets/demo/refetch", json={"requestId": variant})
            assert (again.status_code, again.json()) == (
                202,
                {"status": "accepted", "slotId": job_id, "disposition": "already_running"},
            ), variant
            status = await http.get(f"/internal/targets/demo/refetch/{variant.strip()}")
            assert (status.status_code, status.json()["slotId"]) == (200, job_id), variant
            assert status.json()["idempotencyKey"] == request_id.upper()  # the key as first sent
        # another target's refetch is another job id; the key space is the job surface's,
        # where a case variant is another key (the exact key would be a conflict)
        other = await http.post("/internal/targets/other/refetch", json={"requestId": mixed})
        assert other.json() == {"status": "accepted", "slotId": f"other@manual-{request_id}", "disposition": "accepted"}
        # the job surface keeps keys case-sensitive: a case variant there is refused
        task = {
            "protocol_version": "1",
            "job_type": "candidate_search",
            "idempotency_key": request_id,
            "params": {"target_id": "demo"},
        }
        refused = await http.post("/jobs", json=task)
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "idempotency_conflict"
    pool = await stack.ledger()
    assert await pool.fetchval("SELECT count(*) FROM jobs WHERE job_id = $1", job_id) == 1


async def test_a_refetch_is_found_at_the_address_it_was_admitted_at(stack: Stack) -> None:
    """``{target}`` is read one way by both routes: a target admitted as ``demo`` with
    whitespace around it (the Task's ``params.target_id`` is trimmed) has its status at the
    address the consumer posted to. Until 2026-12-07 the status read the segment as it
    came: ``404 unknown target`` for a refetch its ``POST`` had just admitted."""
    request_id = str(uuid.uuid4())
    async with raw_client(stack) as http:
        for target in ("%20demo%20", "demo%E3%80%80", "%09demo"):
            posted = await http.post(f"/internal/targets/{target}/refetch", json={"requestId": request_id})
            status = await http.get(f"/internal/targets/{target}/refetch/{request_id}")
            assert (posted.status_code, status.status_code) == (202, 200), (target, status.text)
            assert status.json()["slotId"] == posted.json()["slotId"] == f"demo@manual-{request_id}"
        unknown = await http.get(f"/internal/targets/%20/refetch/{request_id}")
        assert (unknown.status_code, unknown.json()) == (404, {"status": "error", "error": "unknown target"})


async def test_refusals_use_the_legacy_shape_and_create_nothing(stack: Stack) -> None:
    pool = await stack.ledger()
    before = await pool.fetchval("SELECT count(*) FROM jobs")
    async with raw_client(stack) as http:
        cases = [
            ("POST", "/internal/targets/demo/refetch", {"requestId": "not-a-uuid"}, 400),
            ("POST", "/internal/targets/demo/refetch", {"requestId": "00000000-0000-0000-0000-000000000000"}, 400),
            ("POST", "/internal/targets/demo/refetch", {}, 400),
            (
                "POST",
                "/internal/targets/demo/refetch",
                {"requestId": str(uuid.uuid4()), "correlationId": "x" * 201},
                400,
            ),
            ("POST", "/internal/targets/nosuch/refetch", {"requestId": str(uuid.uuid4())}, 404),
            ("GET", "/internal/targets/demo/refetch/not-a-uuid", None, 400),
            ("GET", f"/internal/targets/demo/refetch/{uuid.uuid4()}", None, 404),
            ("GET", f"/internal/targets/nosuch/refetch/{uuid.uuid4()}", None, 404),
        ]
        for method, path, body, status in cases:
            response = await http.request(method, path, json=body)
            assert response.status_code == status, (path, body, response.text)
            answer = response.json()
            assert list(answer) == ["status", "error"] and answer["status"] == "error", answer
        unknown = await http.post("/internal/targets/nosuch/refetch", json={"requestId": str(uuid.uuid4())})
        assert unknown.content == b'{"status":"error","error":"unknown target"}'
    async with raw_client(stack, token=None) as anonymous:
        denied = await anonymous.post("/internal/targets/demo/refetch", json={"requestId": str(uuid.uuid4())})
        assert (denied.status_code, denied.json()) == (401, {"status": "error", "error": "unauthorized"})
    assert await pool.fetchval("SELECT count(*) FROM jobs") == before


async def test_a_refetch_of_a_target_that_accepts_no_jobs_is_refused_as_the_v1_door_refuses_it(stack: Stack) -> None:
    # The operator's configuration (accept_jobs = false), not curaflow's failure: the v1 door
    # answers 400 invalid_params target_not_eligible; the shim answered 500 "internal error"
    # until 2026-12-08. Reference §9.1 gives 400 for a target that cannot take the request
    # (§4 "no qualifying target"), and the shim's own refusals of the request are 400.
    pool = await stack.ledger()
    before = await pool.fetchval("SELECT count(*) FROM jobs")
    async with raw_client(stack) as http:
        response = await http.post("/internal/targets/closed/refetch", json={"requestId": str(uuid.uuid4())})
    assert response.status_code == 400, response.text
    assert response.json() == {
        "status": "error",
        "error": "target 'closed' does not accept jobs",
        "detail": {"reason": "target_not_eligible", "target_id": "closed"},
    }
    assert await pool.fetchval("SELECT count(*) FROM jobs") == before


@pytest.mark.parametrize(
    ("raw", "detail"),
    [
        (b"[]", {"reason": "not_an_object", "received": "array"}),
        (b'[{"requestId": "0b7f5a52-3c1e-4d8a-9f2b-6e1d0c9a8b7f"}]', {"reason": "not_an_object", "received": "array"}),
        (b'"0b7f5a52-3c1e-4d8a-9f2b-6e1d0c9a8b7f"', {"reason": "not_an_object", "received": "string"}),
        (b"3", {"reason": "not_an_object", "received": "number"}),
        (b"null", {"reason": "not_an_object", "received": "null"}),
        (b"true", {"reason": "not_an_object", "received": "boolean"}),
        (b"", {"reason": "empty_body"}),
        (b" \n", {"reason": "empty_body"}),
    ],
)
async def test_a_body_that_is_no_object_is_told_so_not_the_request_id(
    stack: Stack, raw: bytes, detail: dict[str, Any]
) -> None:
    # The v1 door's answer to such a body, in the legacy shape with its detail: until
    # 2026-12-08 an array, a string, a number was told "requestId must be a UUID" — not what
    # was wrong (a UUID sent as a bare string, or wrapped in an array, was told it was none).
    pool = await stack.ledger()
    before = await pool.fetchval("SELECT count(*) FROM jobs")
    async with raw_client(stack) as http:
        response = await http.post(
            "/internal/targets/demo/refetch", content=raw, headers={"content-type": "application/json"}
        )
    assert response.status_code == 400, response.text
    assert response.json() == {"status": "error", "error": "request body must be a JSON object", "detail": detail}
    assert await pool.fetchval("SELECT count(*) FROM jobs") == before


async def test_a_body_refusal_says_what_was_wrong_in_its_detail(stack: Stack) -> None:
    # every refusal of the body itself (curaflow's words: the original's were its framework's)
    # carries the v1 door's detail; the refusals of the original's rules keep its two members
    async with raw_client(stack) as http:
        response = await http.post(
            "/internal/targets/demo/refetch", content=b'{"requestId": 1,}', headers={"content-type": "application/json"}
        )
        assert response.status_code == 400, response.text
        answer = response.json()
        assert list(answer) == ["status", "error", "detail"], answer
        assert answer["detail"]["reason"] == "invalid_json", answer
        kept = await http.post("/internal/targets/demo/refetch", json={"requestId": "x"})
        assert kept.content == b'{"status":"error","error":"requestId must be a UUID"}'


@pytest.mark.parametrize("raw", ['"a\\u0000b"', '"a\\ud800b"', "7"])
async def test_a_correlation_id_the_ledger_cannot_store_is_refused_naming_correlationId(stack: Stack, raw: str) -> None:
    # One rule of a correlation id (curaflow.protocol.models.rules.check_correlation_id:
    # storable, at most 200): a NUL or a lone surrogate passed the shim's own check of its
    # length and met the protocol's, whose refusal named `correlation_id` and said "at most
    # 200 characters" of a 3-character value (until 2026-12-07).
    pool = await stack.ledger()
    before = await pool.fetchval("SELECT count(*) FROM jobs")
    body = f'{{"requestId": "{uuid.uuid4()}", "correlationId": {raw}}}'
    async with raw_client(stack) as http:
        response = await http.post(
            "/internal/targets/demo/refetch", content=body, headers={"content-type": "application/json"}
        )
    assert response.status_code == 400, response.text
    answer = response.json()
    assert list(answer) == ["status", "error"] and answer["status"] == "error", answer
    assert answer["error"].startswith("correlationId must be "), answer
    assert "NUL" in answer["error"], answer
    assert await pool.fetchval("SELECT count(*) FROM jobs") == before


@pytest.mark.slow  # a whole job in a worker process: the full suite only
async def test_a_refetch_runs_to_its_outcome_and_reports_it(make_stack: StackFactory, tmp_path: Path) -> None:
    stack = make_stack(two_targets(tmp_path))
    await stack.start_worker()
    await stack.start_api()
    request_id = str(uuid.uuid4())
    async with raw_client(stack) as http:
        admitted = await http.post("/internal/targets/demo/refetch", json={"requestId": request_id})
        assert admitted.status_code == 202
        record = await stack.wait_terminal(admitted.json()["slotId"])
        assert record.business_status == "success"
        body = (await http.get(f"/internal/targets/demo/refetch/{request_id}")).json()
        assert (body["state"], body["slotStatus"], body["claimed"]) == ("submitted", "success", True)
        assert body["terminalReasonCode"] is None and isinstance(body["startedAt"], int)
        assert body["attemptCount"] >= 1
        again = await http.post("/internal/targets/demo/refetch", json={"requestId": request_id})
        assert again.json()["disposition"] == "already_completed"
        # the job surface reports the same job
        job = (await http.get(f"/jobs/{body['slotId']}")).json()
        assert job["status"] == "succeeded" and job["idempotency_key"] == request_id

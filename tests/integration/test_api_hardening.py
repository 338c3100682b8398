"""Inputs that used to get a 500, and job ids that collide with the sub-routes.

Every answer here also passes the schema check of :meth:`tests.support.Stack.start_api`.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from curaflow.api.errors import install_error_handlers
from tests.conftest import StackFactory
from tests.support import short_id, whsec

pytestmark = pytest.mark.integration


def config(tmp_path: Path) -> dict[str, object]:
    out = f"out-{short_id()}"
    return {
        "api": {"callback_allowed_hosts": ["127.0.0.1:*"], "callback_secret": whsec()},
        "routes": {out: {"kind": "directory", "path": str(tmp_path / "out")}},
        "targets": [{"id": "demo", "routes": [out]}],
    }


def raw_task(key_json: str, params_json: str = '{"query": {"tags": ["a"]}}', extra: str = "") -> bytes:
    return (
        '{"protocol_version": "1", "job_type": "candidate_search", "idempotency_key": '
        + key_json
        + ', "params": '
        + params_json
        + extra
        + "}"
    ).encode()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (raw_task('"k-\\ud800"'), "idempotency_key"),
        (raw_task('"k-1"', '{"query": {"tags": ["\\udfff"]}}'), "params.query.tags"),
        (raw_task('"k-2"', extra=', "correlation_id": "\\ud800"'), "correlation_id"),
        (raw_task('"k-3"', extra=', "labels": {"a": "\\ud800"}'), "labels"),
        (raw_task('"k-4"', '{"target_id": "\\ud800"}'), "params.target_id"),
        (raw_task('"k-5"', extra=', "callback_url": "http://127.0.0.1:99999/x"'), "callback_url"),
        (raw_task('"k-6"', extra=', "callback_url": "http://[::1/x"'), "callback_url"),
    ],
)
async def test_unstorable_or_malformed_values_are_refused(
    make_stack: StackFactory, tmp_path: Path, body: bytes, field: str
) -> None:
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    pool = await stack.ledger()
    jobs_before = await pool.fetchval("SELECT count(*) FROM jobs")

    response = await http.post("/jobs", content=body, headers={"content-type": "application/json"})

    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_params"
    assert response.json()["error"]["detail"]["field"] == field
    assert await pool.fetchval("SELECT count(*) FROM jobs") == jobs_before  # nothing written
    assert (await http.get("/health")).status_code == 200  # the connection survived


async def test_deeply_nested_json_is_refused(make_stack: StackFactory, tmp_path: Path) -> None:
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    nested = "[" * 5000 + "]" * 5000

    response = await http.post("/jobs", content=raw_task('"deep"', extra=f', "labels": {nested}'))

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_params"


async def test_job_ids_ending_like_a_sub_route_address_their_own_job(make_stack: StackFactory, tmp_path: Path) -> None:
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    base = (await http.post("/jobs", json=stack.task(key=f"evx-{short_id()}", target_id="demo"))).json()["job"]
    suffix_key = base["idempotency_key"] + "/events"
    other = (await http.post("/jobs", json=stack.task(key=suffix_key, target_id="demo"))).json()["job"]
    cancel_key = base["idempotency_key"] + "/cancel"
    victim = (await http.post("/jobs", json=stack.task(key=cancel_key, target_id="demo"))).json()["job"]
    enc = httpx.URL

    # GET /jobs/<…/events> is the job, not the events of <…>
    got = await http.get(enc(f"/jobs/{other['job_id'].replace('/', '%2F')}"))
    assert got.status_code == 200 and got.json()["job_id"] == other["job_id"]
    # POST /jobs/<…/cancel> is not a cancel of <…>
    refused = await http.post(enc(f"/jobs/{victim['job_id'].replace('/', '%2F')}"))
    assert refused.status_code == 405
    assert (await http.get(f"/jobs/{base['job_id']}")).json()["status"] != "cancelled"
    # the real sub-routes still work on the suffixed ids
    events = await http.get(enc(f"/jobs/{other['job_id'].replace('/', '%2F')}/events"))
    assert events.status_code == 200 and events.json()["job_id"] == other["job_id"]


async def test_an_unreachable_ledger_is_a_retryable_error() -> None:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/boom")
    async def boom() -> None:
        raise ConnectionRefusedError(111, "Connection refused")

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
        response = await http.get("/boom")

    assert response.status_code == 500
    error = response.json()["error"]
    assert (error["code"], error["retryable"], error["detail"]["reason"]) == (
        "internal_error",
        True,
        "ledger_unavailable",
    )

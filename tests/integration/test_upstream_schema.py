"""Every live answer validates against the published upstream v1 schema, offline.

A consumer that validates against the upstream Workflow Protocol v1 schema (vendored
unchanged as ``curaflow/protocol/schema/upstream-v1.schema.json``) must accept every
answer of a running API: ``Job`` (queued, succeeded, failed, cancelled), ``JobPage``,
``Event`` / ``EventPage`` (every event type a job emits, terminal payloads included),
``Error`` (each refusal) and ``Capabilities`` — whose closed ``features`` enum once
rejected ``target_selector`` (now declared in the extension member ``extended_features``).
Real worker process, real HTTP, the Pixiv replay; no network.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.fakes.replay import ReplayServer
from tests.schema import validate, validate_upstream
from tests.support import API_TOKEN, Stack, short_id, terminal_job

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
async def stack(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str, ledger_pool: Any
) -> AsyncIterator[Stack]:
    tmp = tmp_path_factory.mktemp("upstream")
    replay = await ReplayServer().start()
    out = f"out-{short_id()}"
    stack = Stack(
        tmp,
        temporal_address,
        database_url,
        {
            "pixiv": {"api_url": replay.url},
            "api": {"cancel_wait_ms": 15_000},
            "routes": {out: {"kind": "directory", "path": str(tmp / "out")}},
            "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [out]}],
        },
    )
    await stack.start_worker()
    await stack.start_api()
    try:
        yield stack
    finally:
        await stack.stop()
        await replay.stop()


def both(document: Any, name: str) -> None:
    """``document`` validates as curaflow's ``$defs/<name>`` and as the upstream schema reads it."""
    validate(document, name)
    validate_upstream(document, name)


async def test_every_live_answer_validates_against_the_upstream_schema(stack: Stack) -> None:
    assert stack.api is not None
    seen: set[str] = set()
    async with httpx.AsyncClient(
        base_url=stack.api.url, headers={"Authorization": f"Bearer {API_TOKEN}"}, timeout=30
    ) as http:
        caps = (await http.get("/capabilities")).json()
        both(caps, "Capabilities")
        assert "target_selector" in caps["job_types"][0]["extended_features"]  # still discoverable

        ok = await http.post("/jobs", json=stack.task(key=f"up-ok-{short_id()}", query={"tags": ["オリジナル"]}))
        both(ok.json(), "JobEnvelope")
        none = await http.post("/jobs", json=stack.task(key=f"up-none-{short_id()}", query={"tags": ["zz-none"]}))
        cancel_key = f"up-cancel-{short_id()}"
        cancelled = await http.post("/jobs", json=stack.task(key=cancel_key, query={"tags": ["オリジナル"]}))
        cancel_answer = await http.post(f"/jobs/{cancelled.json()['job']['job_id']}/cancel")
        both(cancel_answer.json(), "Job")

        job_ids = [answer.json()["job"]["job_id"] for answer in (ok, none, cancelled)]
        statuses = set()
        for job_id in job_ids:
            job = await terminal_job(http, job_id)
            both(job, "Job")
            statuses.add(job["status"])
            page = await http.get(f"/jobs/{job_id}/events")
            both(page.json(), "EventPage")
            seen.update(event["type"] for event in page.json()["events"])
            both((await http.get("/jobs", params={"idempotency_key": job["idempotency_key"]})).json(), "JobPage")
        assert {"succeeded", "failed", "cancelled"} <= statuses, statuses
        assert {"job.accepted", "job.succeeded", "job.failed", "job.cancelled"} <= seen, seen
        both((await http.get("/jobs", params={"idempotency_key": "nobody-has-this"})).json(), "JobPage")

        refusals = [
            await http.post("/jobs", json={"protocol_version": "2"}),
            await http.post("/jobs", json={"protocol_version": "1", "job_type": "candidate_search"}),
            await http.get("/jobs/demo@manual-nobody"),
            await http.post("/jobs/demo@manual-nobody/cancel"),
            await http.post("/jobs", json=stack.task(key=cancel_key, query={"tags": ["風景"]})),  # other params
            await http.get(f"/jobs/{job_ids[0]}/events", params={"unacked": "maybe"}),
            await http.get("/jobs"),
        ]
        codes = set()
        for answer in refusals:
            assert answer.status_code in (400, 404, 409), answer.text
            both(answer.json(), "ErrorResponse")
            codes.add(answer.json()["error"]["code"])
        assert codes == {"unsupported_protocol_version", "invalid_params", "idempotency_conflict"}

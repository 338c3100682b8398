"""The main job end to end: real worker process, real Temporal dev server, real PostgreSQL.

The source is the replay server of the recorded Pixiv app-api responses (served by the
worker over HTTP); deliveries go to a directory and to a signed-webhook receiver on
127.0.0.1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from curaflow.domain.messages import JobState
from tests.conftest import StackFactory
from tests.fakes.webhook import Reply, WebhookReceiver
from tests.support import Stack, short_id, whsec

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def two_routes(tmp_path: Path, webhook: WebhookReceiver, hook_path: str = "/hook") -> tuple[dict[str, Any], str, str]:
    out, hook = f"out-{short_id()}", f"hook-{short_id()}"
    config = {
        "routes": {
            out: {"kind": "directory", "path": str(tmp_path / "delivered")},
            hook: {"kind": "webhook", "url": webhook.url + hook_path, "secret": whsec()},
        },
        "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [out, hook]}],
    }
    return config, out, hook


async def test_main_job_delivers_to_directory_and_signed_webhook(
    make_stack: StackFactory, tmp_path: Path, webhook: WebhookReceiver, temporal_client: Client
) -> None:
    config, _, _ = two_routes(tmp_path, webhook)
    stack: Stack = make_stack(config)
    await stack.start_worker()
    job_id = await stack.admit(stack.task(query={"tags": ["オリジナル"]}))

    record = await stack.wait_terminal(job_id)

    cell = record.cells[0]
    assert cell.state == "submitted", record
    assert record.business_status == "success"
    work_id = cell.work_id
    assert work_id
    folder = tmp_path / "delivered" / work_id
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["work"]["work_id"] == work_id
    files = manifest["files"]
    assert files and all((folder / f["name"]).stat().st_size == f["bytes"] > 0 for f in files)
    # exactly one webhook request, correctly signed, keyed by the delivery's idempotency key
    assert len(webhook.received) == 1
    got = webhook.received[0]
    assert got.signature_ok
    assert got.headers["webhook-id"].startswith("curaflow:")
    assert got.headers["webhook-id"].endswith(f":{work_id}:{job_id}:demo")
    payload = got.json()
    assert payload["work"]["work_id"] == work_id
    assert payload["files"][0]["data_base64"]
    # the workflow's status query agrees with the ledger
    state = await temporal_client.get_workflow_handle(job_id).query("status", result_type=JobState)
    assert state.status == "succeeded"
    assert [c.state for c in state.cells] == ["submitted"]


async def test_second_job_delivers_a_different_work(
    make_stack: StackFactory, tmp_path: Path, webhook: WebhookReceiver
) -> None:
    config, _, _ = two_routes(tmp_path, webhook)
    stack = make_stack(config)
    await stack.start_worker()
    first = await stack.wait_terminal(await stack.admit(stack.task(query={"tags": ["オリジナル"]})))
    second = await stack.wait_terminal(await stack.admit(stack.task(query={"tags": ["オリジナル"]})))

    assert first.cells[0].state == second.cells[0].state == "submitted"
    assert first.cells[0].work_id != second.cells[0].work_id
    assert len(webhook.received) == 2
    delivered = [r.json()["work"]["work_id"] for r in webhook.received]
    assert len(set(delivered)) == 2
    # the second scan saw the first work as a duplicate
    report = second.cells[0].candidate_report
    assert report is not None and report.reasons.get("duplicate", 0) >= 1


async def test_tag_without_recorded_works_ends_no_candidate(make_stack: StackFactory, tmp_path: Path) -> None:
    out = f"out-{short_id()}"
    stack = make_stack(
        {
            "routes": {out: {"kind": "directory", "path": str(tmp_path / "delivered")}},
            "targets": [{"id": "demo", "routes": [out]}],
        }
    )
    await stack.start_worker()
    job_id = await stack.admit(stack.task(query={"tags": ["no-such-tag-anywhere"]}))

    record = await stack.wait_terminal(job_id)

    assert record.cells[0].state == "no_candidate"
    assert record.cells[0].reason == "no_candidate"
    assert record.business_status == "no_candidate"
    pool = await stack.ledger()
    outcome = await pool.fetchrow("SELECT alertable, record FROM outcomes WHERE job_id = $1", job_id)
    assert outcome["alertable"] is False
    assert outcome["record"]["business_status"] == "no_candidate"
    assert not (tmp_path / "delivered").exists()


async def test_webhook_400_fails_the_cell_after_one_attempt_and_never_refuses_the_work(
    make_stack: StackFactory, tmp_path: Path, webhook: WebhookReceiver
) -> None:
    hook = f"hook-{short_id()}"
    webhook.script["/reject"] = [Reply(400, {"error": "bad payload"})] * 5
    stack = make_stack(
        {
            "routes": {hook: {"kind": "webhook", "url": webhook.url + "/reject", "secret": whsec()}},
            "targets": [{"id": "demo", "routes": [hook]}],
        }
    )
    await stack.start_worker()
    record = await stack.wait_terminal(await stack.admit(stack.task(query={"tags": ["オリジナル"]})))

    assert record.cells[0].state == "failed"
    # a bare 400 names no work: the route's (its receiver must be fixed), not the work's
    assert record.cells[0].reason == "route_refused"
    assert len(webhook.at("/reject")) == 1
    assert record.business_status == "failed"
    assert [d.status for d in record.cells[0].deliveries] == ["failed"]


async def test_webhook_503_then_200_is_retried_and_delivered_once(
    make_stack: StackFactory, tmp_path: Path, webhook: WebhookReceiver
) -> None:
    hook = f"hook-{short_id()}"
    webhook.script["/flaky"] = [Reply(503, {"error": "busy"})]
    stack = make_stack(
        {
            "routes": {hook: {"kind": "webhook", "url": webhook.url + "/flaky", "secret": whsec()}},
            "targets": [{"id": "demo", "routes": [hook]}],
        }
    )
    await stack.start_worker()
    job_id = await stack.admit(stack.task(query={"tags": ["オリジナル"]}))
    record = await stack.wait_terminal(job_id)

    assert record.cells[0].state == "submitted"
    got = webhook.at("/flaky")
    assert len(got) == 2
    assert got[0].headers["webhook-id"] == got[1].headers["webhook-id"]
    pool = await stack.ledger()
    rows = await pool.fetch("SELECT status, attempts FROM delivery_intents WHERE job_id = $1", job_id)
    assert [(r["status"], r["attempts"]) for r in rows] == [("delivered", 2)]


async def test_get_job_answers_from_the_ledger_with_the_worker_stopped(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client
) -> None:
    out = f"out-{short_id()}"
    stack = make_stack(
        {
            "routes": {out: {"kind": "directory", "path": str(tmp_path / "delivered")}},
            "targets": [{"id": "demo", "routes": [out]}],
        }
    )
    await stack.start_worker()
    http = await stack.start_api()
    response = await http.post("/jobs", json=stack.task(query={"tags": ["風景"]}))
    assert response.status_code == 202
    job_id = response.json()["job"]["job_id"]
    await stack.wait_terminal(job_id)
    state = await temporal_client.get_workflow_handle(job_id).query("status", result_type=JobState)

    for worker in stack.workers:
        worker.stop()
    answer = await http.get(f"/jobs/{job_id}")

    assert answer.status_code == 200
    job = answer.json()
    assert job["status"] == state.status == "succeeded"
    assert job["result"]["candidates"][0]["work_id"] == state.cells[0].work_id

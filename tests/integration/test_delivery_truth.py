"""Deliveries are reported as they happened, and never repeated on a route.

Regressions of a stack under attack: a request in flight at the deadline, a
route whose requests time out until its retries run out, and an idempotency key outside
ASCII. The tests on the default settings share one worker process (:func:`shared`), each
on a target and webhook route of its own.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from curaflow.domain.projection import job_status
from curaflow.ledger.reconciler import ticks
from tests.conftest import StackFactory
from tests.fakes.replay import ReplayServer
from tests.fakes.webhook import Reply, WebhookReceiver
from tests.support import Stack, shared_stack, short_id, whsec

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def hook_config(replay: ReplayServer, webhook: WebhookReceiver, path: str, **route: Any) -> dict[str, Any]:
    name = f"hook-{short_id()}"
    return {
        "pixiv": {"api_url": replay.url},
        "routes": {name: {"kind": "webhook", "url": webhook.url + path, "secret": whsec(), **route}},
        "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [name]}],
    }


#: The shared tests' targets (slots) → the webhook path of each one's route.
SLOTS = {"late": "/late", "demo": "/intl"}


@dataclass
class Env:
    stack: Stack
    replay: ReplayServer
    webhook: WebhookReceiver

    def task(self, slot: str, **fields: Any) -> dict[str, Any]:
        return {**self.stack.task(target_id=slot, query={"tags": ["オリジナル"]}), **fields}


@pytest.fixture(scope="module")
async def module_env(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str, ledger_pool: Any
) -> AsyncIterator[Env]:
    replay = await ReplayServer().start()
    webhook = await WebhookReceiver(whsec()).start()
    suffix = short_id()
    routes = {
        f"{slot}-{suffix}": {"kind": "webhook", "url": webhook.url + path, "secret": whsec()}
        for slot, path in SLOTS.items()
    }
    targets = [{"id": slot, "query": {"tags": ["オリジナル"]}, "routes": [f"{slot}-{suffix}"]} for slot in SLOTS]
    config = {"pixiv": {"api_url": replay.url}, "routes": routes, "targets": targets}
    try:
        async with shared_stack(tmp_path_factory.mktemp("truth"), temporal_address, database_url, config) as stack:
            yield Env(stack, replay, webhook)
    finally:
        await replay.stop()
        await webhook.stop()


@pytest.fixture
def shared(module_env: Env) -> Env:
    """One worker process for the tests on the default settings; the fakes reset."""
    module_env.replay.reset()
    module_env.webhook.reset()
    return module_env


async def test_with_no_worker_a_job_past_its_deadline_expires_for_its_deadline(
    make_stack: StackFactory, replay: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The API in this process runs the reconciler (the only one: no worker). Its grace
    # after a deadline (10 s) is the time it leaves the workflow's own timer to end the
    # job; nothing runs the workflow here, so it is left 1 s (the test took 11.7 s).
    monkeypatch.setattr(ticks, "DEADLINE_GRACE_MS", 1_000)
    out = f"out-{short_id()}"
    stack = make_stack(
        {
            "pixiv": {"api_url": replay.url},
            "routes": {out: {"kind": "directory", "path": "out"}},
            "targets": [{"id": "demo", "routes": [out]}],
        }
    )
    http = await stack.start_api()
    body = stack.task(query={"tags": ["オリジナル"]})
    body["deadline_ms"] = 1000
    started = time.monotonic()
    job_id = (await http.post("/jobs", json=body)).json()["job"]["job_id"]

    record = await stack.wait_terminal(job_id, 40)

    assert time.monotonic() - started < 30
    job = (await http.get(f"/jobs/{job_id}")).json()
    assert (job["status"], job["error"]["code"]) == ("expired", "deadline_exceeded")
    assert record.cells[0].reason == "execution_timeout"


async def test_a_deadline_reached_mid_step_is_reported_as_the_deadline(
    make_stack: StackFactory, replay: ReplayServer, webhook: WebhookReceiver
) -> None:
    # A worker of its own: on the warm shared worker the download reached the slow image
    # sooner and the cell ended download_timeout about one run in three (the job's
    # deadline cuts the download as its timer fires).
    replay.faults.slow_images_s = 30
    stack = make_stack(hook_config(replay, webhook, "/never"))
    await stack.start_worker()
    body = stack.task(query={"tags": ["オリジナル"]})
    body["deadline_ms"] = 2500
    record = await stack.wait_terminal(await stack.admit(body), 30)

    assert (record.cells[0].state, record.cells[0].reason) == ("failed", "execution_timeout")
    assert job_status(record.cells) == "expired"
    assert webhook.at("/never") == []


async def test_a_delivery_in_flight_at_the_deadline_is_cut_and_reported_unknown(shared: Env) -> None:
    # 5 s leaves a loaded machine time to search and fetch before the send; the
    # receiver answers 7 s after it got the work, after the deadline. No exchange
    # outlives the job: the send is cut at the deadline, the job ends expired soon after
    # it, and the send — which may have landed — is reported unknown, never delivered.
    stack, webhook = shared.stack, shared.webhook
    webhook.script["/late"] = [Reply(200, {"status": "accepted"}, delay_s=7)] * 3
    job_id = await stack.admit(shared.task("late", deadline_ms=5000))

    record = await stack.wait_terminal(job_id, 30)

    assert len(webhook.at("/late")) >= 1
    assert job_status(record.cells) == "expired", record.cells[0]
    assert record.completed_at is not None and record.deadline_at is not None
    assert record.completed_at - record.deadline_at < 4000  # not the receiver's 7 s
    pool = await stack.ledger()
    assert await pool.fetchval("SELECT status FROM delivery_intents WHERE job_id = $1", job_id) == "unknown"


async def test_requests_that_timed_out_keep_the_work_off_the_route_for_good(
    make_stack: StackFactory, replay: ReplayServer, webhook: WebhookReceiver
) -> None:
    # Every request reaches the receiver, whose answer comes too late: each may have
    # landed. When the retries run out the work must stay blocked on this route.
    webhook.script["/slow"] = [Reply(200, {"status": "accepted"}, delay_s=3)] * 10
    stack = make_stack(
        {
            **hook_config(replay, webhook, "/slow", timeout_ms=500),
            "delivery": {"max_attempts": 2, "retry_initial_interval_ms": 100, "retry_max_interval_ms": 200},
        }
    )
    await stack.start_worker()
    first = await stack.wait_terminal(await stack.admit(stack.task(query={"tags": ["オリジナル"]})), 60)
    assert (first.cells[0].state, first.cells[0].reason) == ("failed", "delivery_abandoned")
    assert [d.status for d in first.cells[0].deliveries] == ["unknown"]

    second = await stack.wait_terminal(await stack.admit(stack.task(query={"tags": ["オリジナル"]})), 60)

    delivered = {r.json()["work"]["work_id"] for r in webhook.at("/slow")}
    assert first.cells[0].work_id != second.cells[0].work_id
    assert len(delivered) == 2  # two works, each sent only under its own job


async def test_a_key_outside_ascii_is_delivered_with_an_encoded_webhook_id(shared: Env) -> None:
    stack, webhook = shared.stack, shared.webhook
    job_id = await stack.admit(shared.task("demo", idempotency_key=f"café-{short_id()}"))

    record = await stack.wait_terminal(job_id, 30)

    assert record.cells[0].state == "submitted"
    (got,) = webhook.at("/intl")
    assert got.signature_ok
    assert "caf%C3%A9-" in got.headers["webhook-id"] and got.headers["webhook-id"].isascii()
    assert got.json()["idempotency_key"].endswith(f":{job_id}:demo")

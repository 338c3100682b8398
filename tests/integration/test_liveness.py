"""Liveness: no job is ever stuck. Workers are real processes killed with SIGKILL.

Budgets are shortened through the clearly marked test-only floor
(``budgets.test_only_floor_ms``); the heartbeat interval is 1 s, so the heartbeat
timeout is 2 s.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from temporalio.client import Client

from curaflow.domain.projection import job_status
from tests.conftest import StackFactory
from tests.fakes.replay import ReplayServer, work_ids_with_tag
from tests.fakes.webhook import Reply, WebhookReceiver
from tests.support import InProcessWorker, Stack, eventually, short_id, whsec

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def config(tmp_path: Path, replay: ReplayServer, routes: dict[str, Any], **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "pixiv": {"api_url": replay.url},
        "routes": routes,
        "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": list(routes)}],
    }
    base.update(extra)
    return base


def directory(tmp_path: Path) -> dict[str, Any]:
    return {f"out-{short_id()}": {"kind": "directory", "path": str(tmp_path / "out")}}


async def cell_stage(stack: Stack, job_id: str) -> str:
    return (await stack.job(job_id)).cells[0].stage


async def test_sigkill_mid_search_resumes_from_the_checkpoint(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    # Page 1 (30 works) is excluded, so the scan needs page 2; the account's gate holds
    # page 2 back for 4 s, and the worker dies in between.
    stack = make_stack(
        config(
            tmp_path, replay, directory(tmp_path), **{"pixiv": {"api_url": replay.url, "replay_min_interval_ms": 4000}}
        )
    )
    page_one = work_ids_with_tag("オリジナル")[:30]
    worker = await stack.start_worker()
    job_id = await stack.admit(
        stack.task(
            query={"tags": ["オリジナル"]}, constraints={"exclude": [{"kind": "work", "id": w} for w in page_one]}
        )
    )
    pool = await stack.ledger()

    async def checkpointed() -> bool:
        cp = await pool.fetchval("SELECT search_checkpoint FROM cells WHERE job_id = $1", job_id)
        return bool(cp) and cp["scan"]["pages"] == 1

    await eventually(checkpointed, what="first page checkpointed")
    worker.kill()
    # The next worker sends at once (the gate still holds page 2 until 4 s after page 1):
    # the rest of the job (page 2, the image) does not wait 4 s per request.
    stack.reconfigure({"pixiv": {"replay_min_interval_ms": 0}})
    await stack.start_worker()
    record = await stack.wait_terminal(job_id, 60)

    assert record.cells[0].state == "submitted"
    assert record.cells[0].work_id not in page_one
    # This job's searches only: the replay's port may be one an earlier test's stopped
    # server had, and a process of that test can still knock on it (seen in CI: a search
    # with another word).
    word = "word=" + quote("オリジナル")
    searches = [s for s in replay.searches() if word in s]
    assert len([s for s in searches if "offset=" not in s]) == 1, searches
    # Page 2 is asked one place early (its first work must be page 1's last: nothing moved
    # up unread between the two pages, docs/pixiv.md), once: the new worker resumed there.
    assert len([s for s in searches if "offset=29" in s]) == 1, searches


async def test_sigkill_mid_fetch_resumes_and_delivers_once(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer, webhook: WebhookReceiver
) -> None:
    hook = f"hook-{short_id()}"
    routes = {hook: {"kind": "webhook", "url": webhook.url + "/h", "secret": whsec()}}
    stack = make_stack(config(tmp_path, replay, routes))
    replay.faults.slow_images_s = 3
    worker = await stack.start_worker()
    job_id = await stack.admit(stack.task(query={"tags": ["オリジナル"]}))
    await eventually(lambda: cell_stage(stack, job_id), what="started")
    await eventually(lambda: any("/i/" in line for line in replay.log), what="image requested")
    worker.kill()
    replay.faults.slow_images_s = 0
    await stack.start_worker()
    record = await stack.wait_terminal(job_id, 60)

    assert record.cells[0].state == "submitted"
    assert len(webhook.at("/h")) == 1


async def test_sigkill_mid_delivery_never_delivers_twice(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    receiver = await WebhookReceiver(whsec(), dedupe=True).start()
    try:
        receiver.script["/h"] = [Reply(200, {"status": "accepted"}, delay_s=6)]
        hook = f"hook-{short_id()}"
        routes = {hook: {"kind": "webhook", "url": receiver.url + "/h", "secret": whsec()}}
        stack = make_stack(config(tmp_path, replay, routes))
        worker = await stack.start_worker()
        job_id = await stack.admit(stack.task(query={"tags": ["オリジナル"]}))
        await asyncio.wait_for(receiver.arrived.wait(), 30)
        worker.kill()
        await stack.start_worker()
        record = await stack.wait_terminal(job_id, 60)

        assert record.cells[0].state == "submitted"
        ids = [r.headers["webhook-id"] for r in receiver.received]
        assert len(ids) == 2 and len(set(ids)) == 1  # the retry re-sent the same message id
        assert len(receiver.processed) == 1  # and the receiver processed it once
        pool = await stack.ledger()
        rows = await pool.fetch("SELECT status, attempts FROM delivery_intents WHERE job_id = $1", job_id)
        assert [(r["status"], r["attempts"]) for r in rows] == [("delivered", 2)]
    finally:
        await receiver.stop()


async def test_stalled_cell_expires_even_with_no_worker_running(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer, temporal_client: Client
) -> None:
    stack = make_stack(
        config(
            tmp_path,
            replay,
            directory(tmp_path),
            budgets={"heartbeat_interval_ms": 1000, "test_only_floor_ms": 500, "stall_timeout_ms": 3000},
        )
    )
    replay.faults.slow_images_s = 60
    worker = await stack.start_worker()
    http = await stack.start_api()
    job_id = (await http.post("/jobs", json=stack.task(query={"tags": ["オリジナル"]}))).json()["job"]["job_id"]
    await eventually(lambda: any("/i/" in line for line in replay.log), what="image requested")
    worker.kill()

    record = await stack.wait_terminal(job_id, 30)

    assert (record.cells[0].state, record.cells[0].reason) == ("failed", "stalled_no_heartbeat")
    job = (await http.get(f"/jobs/{job_id}")).json()
    assert job["status"] == "expired"
    assert job["error"]["code"] == "stalled_no_progress"
    # A worker coming back converges the workflow on the ledger's verdict.
    replay.faults.slow_images_s = 0
    await stack.start_worker()
    handle = temporal_client.get_workflow_handle(job_id)
    assert await expired_execution(handle) == "expired"


async def test_zero_workers_expire_as_queued_too_long(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer, temporal_client: Client
) -> None:
    stack = make_stack(
        config(tmp_path, replay, directory(tmp_path), budgets={"test_only_floor_ms": 500, "queued_timeout_ms": 2000})
    )
    http = await stack.start_api()
    job_id = (await http.post("/jobs", json=stack.task(query={"tags": ["オリジナル"]}))).json()["job"]["job_id"]

    record = await stack.wait_terminal(job_id, 30)

    assert (record.cells[0].state, record.cells[0].reason) == ("failed", "queued_too_long")
    job = (await http.get(f"/jobs/{job_id}")).json()
    assert (job["status"], job["error"]["code"], job["started_at"]) == ("expired", "queued_too_long", None)
    await stack.start_worker()
    assert await expired_execution(temporal_client.get_workflow_handle(job_id)) == "expired"
    assert not (tmp_path / "out").exists()


async def test_unserved_source_queue_expires_as_queued_too_long(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    stack = make_stack(
        config(tmp_path, replay, directory(tmp_path), budgets={"test_only_floor_ms": 500, "queued_timeout_ms": 2000})
    )
    async with InProcessWorker(stack, source=False):
        job_id = await stack.admit(stack.task(query={"tags": ["オリジナル"]}))
        record = await stack.wait_terminal(job_id, 30)

    assert (record.cells[0].state, record.cells[0].reason) == ("failed", "queued_too_long")
    assert job_status(record.cells) == "expired"


async def test_deadline_cancels_in_flight_work_and_expires(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer, webhook: WebhookReceiver
) -> None:
    hook = f"hook-{short_id()}"
    stack = make_stack(config(tmp_path, replay, {hook: {"kind": "webhook", "url": webhook.url, "secret": whsec()}}))
    replay.faults.slow_images_s = 30
    await stack.start_worker()
    body = stack.task(query={"tags": ["オリジナル"]})
    body["deadline_ms"] = 3000
    started = time.monotonic()
    job_id = await stack.admit(body)

    record = await stack.wait_terminal(job_id, 30)

    assert time.monotonic() - started < 10
    assert (record.cells[0].state, record.cells[0].reason) == ("failed", "execution_timeout")
    assert job_status(record.cells) == "expired"
    assert webhook.received == []


async def test_exhausted_delivery_budget_ends_delivery_abandoned(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer, webhook: WebhookReceiver
) -> None:
    webhook.script["/down"] = [Reply(503, {"error": "down"})] * 10
    hook = f"hook-{short_id()}"
    stack = make_stack(
        config(
            tmp_path,
            replay,
            {hook: {"kind": "webhook", "url": webhook.url + "/down", "secret": whsec()}},
            delivery={"max_attempts": 3, "retry_initial_interval_ms": 100, "retry_max_interval_ms": 200},
        )
    )
    await stack.start_worker()
    http = await stack.start_api()
    job_id = (await http.post("/jobs", json=stack.task(query={"tags": ["オリジナル"]}))).json()["job"]["job_id"]

    record = await stack.wait_terminal(job_id, 30)

    assert (record.cells[0].state, record.cells[0].reason) == ("failed", "delivery_abandoned")
    assert len(webhook.at("/down")) == 3
    job = (await http.get(f"/jobs/{job_id}")).json()
    assert (job["status"], job["error"]["code"], job["error"]["retryable"]) == ("failed", "delivery_abandoned", True)


async def test_route_never_served_ends_queued_too_long(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    # The route delivers from its own task queue, which no worker serves: the send waited
    # in that queue and never reached the route — curaflow's (no worker), not the route's
    # delivery_abandoned, which it read until 2026-12-06 (curaflow.domain.verdicts.failures).
    routes = {
        f"out-{short_id()}": {"kind": "directory", "path": str(tmp_path / "out"), "task_queue": f"nobody-{short_id()}"}
    }
    stack = make_stack(config(tmp_path, replay, routes, budgets={"test_only_floor_ms": 500, "stall_timeout_ms": 2000}))
    async with InProcessWorker(stack):
        job_id = await stack.admit(stack.task(query={"tags": ["オリジナル"]}))
        record = await stack.wait_terminal(job_id, 30)

    assert (record.cells[0].state, record.cells[0].reason) == ("failed", "queued_too_long")


async def test_reconciler_starts_a_workflow_that_was_never_started(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    from curaflow.jobs.admission import Admitter

    stack = make_stack(config(tmp_path, replay, directory(tmp_path)))
    pool = await stack.ledger()
    # A crash between the ledger insert and the workflow start: only the row exists.
    admission = await Admitter(stack.settings, pool, None).admit(stack.task(query={"tags": ["オリジナル"]}))
    assert (await stack.job(admission.job_id)).workflow_started_at is None
    await stack.start_worker()

    record = await stack.wait_terminal(admission.job_id, 30)

    assert record.cells[0].state == "submitted"
    assert record.workflow_started_at is not None


async def test_sigkill_mid_fetch_in_replay_mode_resumes_on_the_other_worker(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    # The default mode: no pixiv.api_url, so each worker process serves the replay on a
    # port of its own. The bound work's page URLs must not name the dead worker's server.
    # A four-page work, one request per 1.5 s on the account's gate: the kill lands
    # between pages.
    routes = directory(tmp_path)
    stack = make_stack(
        {
            "pixiv": {"replay_min_interval_ms": 1500, "source_standby_poll_ms": 300},
            "routes": routes,
            "targets": [{"id": "demo", "query": {"tags": ["猫になったモフ田くんの漫画"]}, "routes": list(routes)}],
        }
    )
    first = await stack.start_worker()
    await eventually(lambda: "source_queue.owned" in stack.worker_log(1), what="the first worker owns the source queue")
    await stack.start_worker()
    job_id = await stack.admit(stack.task(target_id="demo"))

    async def fetching() -> bool:
        return await cell_stage(stack, job_id) == "fetching"

    await eventually(fetching, timeout_s=60, what="fetching")
    artifacts = stack.settings.artifacts_dir
    assert artifacts is not None

    def pages_on_disk() -> list[Path]:  # layout: <artifacts_dir>/<job>/<target>/<work>_p<N>.<ext>
        return [p for p in artifacts.glob("*/*/126860839_p*") if not p.name.startswith(".")]

    await eventually(pages_on_disk, timeout_s=60, interval_s=0.05, what="a page on disk")
    first.kill()

    record = await stack.wait_terminal(job_id, 90)

    assert (record.cells[0].state, record.cells[0].reason) == ("submitted", None), stack.worker_log(2)[-3000:]
    assert record.cells[0].work_id == "126860839"
    delivered = sorted(p.name for p in (tmp_path / "out" / "126860839").iterdir())
    assert len([name for name in delivered if name != "manifest.json"]) == 4, delivered  # every page


async def expired_execution(handle: Any) -> str:
    """The job status an expired job's execution failed with (``job_expired``, its state
    in the failure's details: ``curaflow.domain.job_failure``)."""
    from temporalio.client import WorkflowFailureError

    from curaflow.domain.job_failure import state_of

    with pytest.raises(WorkflowFailureError) as failure:
        await asyncio.wait_for(handle.result(), 30)
    state = state_of(failure.value)
    assert state is not None, failure.value.cause
    return str(state.status)

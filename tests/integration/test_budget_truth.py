"""What a job and its cells end as, and what they say: real worker processes, Temporal, PostgreSQL.

* the deadline owns every failure that happens after it passed — a download it cut, a
  worker lost while it passed;
* a stall budget counts only time a step was held by a worker (a retried step queued
  behind other jobs in a busy source queue is not stalled); a delivery stall is the
  delivery's (``delivery_abandoned``);
* the message and the reason of a cell that bound nothing come from its tally: a search
  that found nothing says so, identical state gives the identical reason, a source whose
  every answer is unusable is a source failure;
* ``Job.attempt`` never goes backwards.

Budgets are shortened through the test-only floor (``budgets.test_only_floor_ms``); the
heartbeat interval is 1 s (heartbeat timeout 2 s).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from bench.history import seed_deliveries
from curaflow.protocol.projection import project_job
from curaflow.sources.pixiv.replay.data import DeepSet
from tests.conftest import StackFactory
from tests.fakes.replay import ReplayServer, work_ids_with_tag
from tests.fakes.webhook import Reply, WebhookReceiver
from tests.support import eventually, short_id, whsec

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TAG = "オリジナル"


def config(replay: ReplayServer, routes: dict[str, Any], **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "pixiv": replay.config(),
        "routes": routes,
        "targets": [{"id": "demo", "query": {"tags": [TAG]}, "routes": list(routes)}],
    }
    base.update(extra)
    return base


def directory(tmp_path: Path) -> dict[str, Any]:
    return {f"out-{short_id()}": {"kind": "directory", "path": str(tmp_path / f"out-{short_id()}")}}


def error_of(record: Any) -> dict[str, Any]:
    job = project_job(record)
    return dict(job.get("error") or {})


def image_requested(replay: ReplayServer) -> bool:
    return any("/i/" in line for line in replay.log)


# ---- the deadline owns what happens after it passed -------------------------------------


async def test_a_deadline_reached_during_a_download_ends_deadline_exceeded(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    # Seen from outside: failed / source_error / download_timeout, "check the network to
    # the source's image host", retryable. The download was cut by the job's own deadline.
    stack = make_stack(config(replay, directory(tmp_path), delivery={"source_max_attempts": 1}))
    replay.faults.slow_images_s = 30  # the image body pauses mid-way past the deadline
    await stack.start_worker()
    body = stack.task(query={"tags": [TAG]})
    body["deadline_ms"] = 4000
    job_id = await stack.admit(body)

    record = await stack.wait_terminal(job_id, 40)

    cell = record.cells[0]
    assert (cell.state, cell.reason) == ("failed", "execution_timeout"), (cell.reason, cell.reason_message)
    error = error_of(record)
    assert (error["code"], error["retryable"]) == ("deadline_exceeded", True)
    assert "image host" not in error["message"]  # not download_timeout's message
    assert any("/i/" in line for line in replay.log)  # the deadline did reach the download


async def test_a_deadline_that_passes_while_the_only_worker_is_dead_is_the_deadlines(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    # Seen from outside: expired / stalled_no_progress. The worker died before the
    # deadline; the stall budget ran out after it: the deadline came first.
    stack = make_stack(
        config(
            replay,
            directory(tmp_path),
            budgets={"heartbeat_interval_ms": 1000, "test_only_floor_ms": 500, "stall_timeout_ms": 6000},
        )
    )
    replay.faults.slow_images_s = 60
    worker = await stack.start_worker()
    await stack.start_api()  # its reconciler converges the job: no worker will
    body = stack.task(query={"tags": [TAG]})
    body["deadline_ms"] = 6000
    admitted = time.monotonic()
    job_id = await stack.admit(body)
    await eventually(lambda: image_requested(replay), what="image requested")
    worker.kill()
    assert time.monotonic() - admitted < 5.5, "the worker must die before the deadline"

    record = await stack.wait_terminal(job_id, 40)

    assert (record.cells[0].state, record.cells[0].reason) == ("failed", "execution_timeout")
    error = error_of(record)
    assert error["code"] == "deadline_exceeded"
    job = project_job(record)
    assert job["status"] == "expired"


# ---- stalls: only time a step was held -----------------------------------------------------


async def test_a_retried_step_queued_behind_a_busy_source_queue_is_not_stalled(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    # Seen in a soak: 8 of 2,017 jobs expired "a worker died or hung" while every worker
    # was alive: a step retried after a fault waited in the account's busy source queue
    # (concurrency 1) longer than the stall budget.
    stack = make_stack(
        config(
            replay,
            directory(tmp_path),
            budgets={"heartbeat_interval_ms": 1000, "test_only_floor_ms": 500, "stall_timeout_ms": 3000},
            delivery={"retry_initial_interval_ms": 2000, "retry_max_interval_ms": 2000},
        )
    )
    await stack.start_worker()
    await stack.start_api()
    replay.faults.search = ["500"]  # the first job's first search fails: Temporal retries it after 2 s
    first = await stack.admit(stack.task(key=f"first-{short_id()}", query={"tags": [TAG]}))
    await eventually(lambda: any(e.status == 500 for e in replay.faults.of("search")), what="first search failed")
    # A second job takes the account's queue meanwhile and holds it 9 s (a slow image):
    # the first job's retry waits behind it, with no lease and no heartbeat of its own.
    replay.faults.slow_images_s = 9
    second = await stack.admit(stack.task(key=f"second-{short_id()}", query={"tags": [TAG]}))
    await eventually(lambda: image_requested(replay), what="the second job downloads")
    replay.faults.slow_images_s = 0

    record = await stack.wait_terminal(first, 60)
    assert (record.cells[0].state, record.cells[0].reason) == ("submitted", None), (
        record.cells[0].reason,
        record.cells[0].reason_message,
    )
    assert (await stack.wait_terminal(second, 60)).cells[0].state == "submitted"


async def test_a_worker_killed_mid_delivery_ends_delivery_abandoned(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    # Seen from outside: stalled_no_heartbeat, where the docs (and reference §5.4, §8)
    # say a delivery that stops is delivery_abandoned.
    receiver = await WebhookReceiver(whsec()).start()
    try:
        receiver.script["/h"] = [Reply(200, {"status": "accepted"}, delay_s=30)]
        hook = f"hook-{short_id()}"
        routes = {hook: {"kind": "webhook", "url": receiver.url + "/h", "secret": whsec()}}
        stack = make_stack(
            config(
                replay,
                routes,
                budgets={"heartbeat_interval_ms": 1000, "test_only_floor_ms": 500, "stall_timeout_ms": 3000},
            )
        )
        worker = await stack.start_worker()
        await stack.start_api()
        job_id = await stack.admit(stack.task(query={"tags": [TAG]}))
        await asyncio.wait_for(receiver.arrived.wait(), 30)
        worker.kill()

        record = await stack.wait_terminal(job_id, 40)
    finally:
        await receiver.stop()

    assert (record.cells[0].state, record.cells[0].reason) == ("failed", "delivery_abandoned")
    error = error_of(record)
    assert (error["code"], error["retryable"]) == ("delivery_abandoned", True)
    assert record.cells[0].deliveries[0].status == "unknown"  # the request was out: it may have landed


# ---- the tally --------------------------------------------------------------------------------


async def test_a_tag_that_matches_nothing_says_the_search_found_nothing(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    stack = make_stack(config(replay, directory(tmp_path)))
    await stack.start_worker()
    job_id = await stack.admit(stack.task(query={"tags": [f"nothing-{short_id()}"]}))

    record = await stack.wait_terminal(job_id, 60)

    assert (record.cells[0].state, record.cells[0].reason) == ("no_candidate", "no_candidate")
    message = error_of(record)["message"]
    assert "found no work" in message
    assert "already delivered" not in message and "works found" not in message, message
    outcome = await (await stack.ledger()).fetchval("SELECT record FROM outcomes WHERE job_id = $1", job_id)
    assert "found no work" in outcome["user_message"]["en"]


async def test_consecutive_jobs_on_identical_state_end_for_the_identical_reason(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    # Seen from outside: duplicate_exhausted, then no_candidate (the second job's scan
    # frontier skipped every work, and "examined none" was taken for "found none").
    tag = f"spent-{short_id()}"
    deep = DeepSet(tag=tag, count=40, per_day=100)
    replay.faults.deep = deep
    routes = directory(tmp_path)
    stack = make_stack(
        {
            "pixiv": replay.config(),
            "routes": routes,
            "targets": [{"id": "demo", "query": {"tags": [tag]}, "routes": list(routes)}],
        }
    )
    await seed_deliveries(
        await stack.ledger(),
        target_id="demo",
        routes={name: "directory" for name in routes},
        work_ids=[deep.work_id(r) for r in range(deep.count)],
        job_id=f"seed-{short_id()}",
    )
    await stack.start_worker()

    reasons, messages = [], []
    for n in range(3):
        job_id = await stack.admit(stack.task(key=f"k{n}-{short_id()}", query={"tags": [tag]}))
        record = await stack.wait_terminal(job_id, 60)
        reasons.append(record.cells[0].reason)
        messages.append(record.cells[0].reason_message or "")
    assert reasons == ["duplicate_exhausted"] * 3
    assert all(m.startswith("The search found 40 works: 40 already delivered") for m in messages), messages


async def test_a_source_whose_every_work_is_unusable_is_a_source_failure(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    # Seen from outside: the source answered with another image host for every work; the
    # job ended no_candidate, "no new content", not alertable.
    for work_id in work_ids_with_tag(TAG):
        replay.faults.mutate[work_id] = {
            "page_count": 1,
            "meta_pages": [],
            "meta_single_page": {"original_image_url": f"https://images.example.net/img/{work_id}_p0.jpg"},
        }
    stack = make_stack(config(replay, directory(tmp_path)))
    await stack.start_worker()
    job_id = await stack.admit(stack.task(query={"tags": [TAG]}))

    record = await stack.wait_terminal(job_id, 60)

    cell = record.cells[0]
    assert (cell.state, cell.reason) == ("failed", "source_unusable"), (
        cell.state,
        cell.reason,
        cell.candidate_report and cell.candidate_report.reasons,
        cell.candidate_report and cell.candidate_report.fetched,
    )
    assert record.business_status == "failed"
    error = error_of(record)
    assert (error["code"], error["detail"]["owner"]) == ("source_error", "source")
    assert "unusable" in error["message"] and "image host" in error["message"]
    alertable = await (await stack.ledger()).fetchval("SELECT alertable FROM outcomes WHERE job_id = $1", job_id)
    assert alertable is True
    assert not any("/i/" in line for line in replay.log)  # no image was ever requested off the host


# ---- numbers that never go backwards ------------------------------------------------------------


async def test_job_attempt_never_goes_backwards(make_stack: StackFactory, tmp_path: Path, replay: ReplayServer) -> None:
    # Seen from outside: Job.attempt 2 (a retried search) then 1 (the first delivery attempt).
    stack = make_stack(config(replay, directory(tmp_path)))
    replay.faults.search = ["500"]
    await stack.start_worker()
    http = await stack.start_api()
    job_id = await stack.admit(stack.task(query={"tags": [TAG]}))

    record = await stack.wait_terminal(job_id, 60)

    assert record.cells[0].state == "submitted"
    job = (await http.get(f"/jobs/{job_id}")).json()
    assert job["attempt"] == 2  # the highest attempt any step reached: the search's retry
    events = (await http.get(f"/jobs/{job_id}/events")).json()["events"]
    attempts = [e["payload"]["job"]["attempt"] for e in events if "job" in (e.get("payload") or {})]
    assert attempts == sorted(attempts), attempts

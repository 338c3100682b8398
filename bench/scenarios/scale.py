"""Scenario 6: how figures grow with the job — history per cell, worker memory in flight.

History: one job each of 1, 10 and 100 cells (one target per cell, each with its own
directory route) runs to its end; the workflow history's event count divided by the
cells (target ≤ 20 per cell, and not growing with the job). A job has a fixed part
(start, the first workflow task, ``finish``, completion, search-attribute upserts:
about 13 events) and about 16–18 events per cell (search, fetch and deliver, three
events each, plus the workflow tasks their results wake); the marginal cost of an added
cell is what the target is checked on, with the 100-cell figure.

Memory: N one-cell jobs are held in flight (their route is a webhook receiver that does
not answer, so every job waits in or for its ``deliver``); the worker's resident set is
read before and with them in flight, then again for N/10 jobs of 10 cells (the same
number of cells).
"""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from typing import Any

from fastapi import FastAPI

from bench.env import BenchStack, Services, worker_rss_bytes
from bench.result import Check, Result
from curaflow.config import Settings
from curaflow.domain.messages import JobInput, TargetSpec
from curaflow.httpserver import BackgroundServer
from curaflow.ledger.db import now_ms
from curaflow.ledger.jobs import NewJob, insert_job, mark_workflow_started
from curaflow.sources.replay.app import SlowReplay, create_replay_app
from curaflow.temporal import start_job_workflow

TARGETS = 100


SECRET = "whsec_" + base64.b64encode(b"curaflow-bench-secret-0123").decode()


def _config(root: str, replay_url: str, hook_url: str) -> dict[str, Any]:
    routes: dict[str, Any] = {f"out{i}": {"kind": "directory", "path": f"{root}/out{i}"} for i in range(TARGETS)}
    routes.update(
        {
            f"hook{i}": {"kind": "webhook", "url": hook_url, "secret": SECRET, "timeout_ms": 3_600_000}
            for i in range(TARGETS)
        }
    )
    targets = [{"id": f"t{i}", "query": {"mode": "ranking"}, "routes": [f"out{i}"]} for i in range(TARGETS)]
    targets += [{"id": f"h{i}", "query": {"mode": "ranking"}, "routes": [f"hook{i}"]} for i in range(TARGETS)]
    return {"pixiv": {"api_url": replay_url, "replay_max_concurrency": 8}, "routes": routes, "targets": targets}


def _silent_receiver() -> FastAPI:
    """A webhook receiver that takes every delivery and never answers (within the run)."""
    app = FastAPI()

    @app.post("/{path:path}")
    async def hold(path: str) -> dict[str, str]:
        await asyncio.sleep(3600)
        return {"status": "accepted"}

    return app


def _spec(settings: Settings, index: int) -> TargetSpec:
    target = settings.targets[index]
    return TargetSpec(
        target_id=target.id,
        query=target.query,
        filters=target.filters,
        scan_limit=target.scan_limit,
        routes=settings.route_refs(target),
    )


async def _start(stack: BenchStack, first_target: int, cells: int, held: bool = False) -> str:
    """Create and start one job of ``cells`` cells (targets from ``first_target``; the
    webhook-routed ones when ``held``)."""
    assert stack.pool is not None and stack.client is not None
    settings = stack.settings
    created = now_ms()
    inp = JobInput(
        job_id=f"scale-{cells}-{uuid.uuid4().hex[:10]}",
        plan_id="bench",
        trigger="cli",
        created_at_ms=created,
        deadline_at_ms=created + 30 * 60_000,
        targets=[_spec(settings, (first_target + i) % TARGETS + (TARGETS if held else 0)) for i in range(cells)],
        budgets=settings.budgets_model(),
        source_task_queues=settings.source_task_queues(),
    )
    async with stack.pool.acquire() as conn:
        await insert_job(conn, NewJob(job_input=inp))
    await start_job_workflow(stack.client, inp, settings.temporal.task_queue)
    async with stack.pool.acquire() as conn:
        await mark_workflow_started(conn, inp.job_id)
    return inp.job_id


async def _history_per_cell(stack: BenchStack, cells: int) -> float:
    job_id = await _start(stack, 0, cells)
    await stack.wait_terminal([job_id], 300)
    assert stack.client is not None
    handle = stack.client.get_workflow_handle(job_id)
    await handle.result()
    history = await handle.fetch_history()
    return len(history.events) / cells


async def _in_flight(stack: BenchStack, jobs: int, cells: int) -> tuple[int, int, int]:
    """Hold ``jobs`` jobs of ``cells`` cells in flight on a fresh worker process.

    Returns ``(idle_rss, in_flight_rss, cells_in_flight)`` in bytes. Afterwards the
    worker is killed and the jobs' workflows are terminated, so the next measurement
    starts clean (a held delivery would otherwise keep its activity slot).
    """
    assert stack.pool is not None and stack.client is not None
    worker = await stack.start_worker()
    warm = [await _start(stack, 90 + i, 1) for i in range(3)]  # imports, sandbox, pools
    await stack.wait_terminal(warm, 120)
    await asyncio.sleep(1)
    idle = worker_rss_bytes(worker)
    gate = asyncio.Semaphore(50)

    async def start(i: int) -> str:
        async with gate:
            return await _start(stack, i * cells, cells, held=True)

    job_ids = list(await asyncio.gather(*(start(i) for i in range(jobs))))
    deadline = time.monotonic() + 180
    held = 0
    while time.monotonic() < deadline:
        held = int(
            await stack.pool.fetchval(
                "SELECT count(*) FROM cells WHERE job_id = ANY($1::text[]) AND stage = 'delivering'", job_ids
            )
        )
        if held >= jobs * cells:
            break
        await asyncio.sleep(0.5)
    await asyncio.sleep(2)
    rss = worker_rss_bytes(worker)
    worker.kill()
    stack.workers.remove(worker)

    async def terminate(job_id: str) -> None:
        async with gate:
            await stack.client.get_workflow_handle(job_id).terminate("benchmark done")  # type: ignore[union-attr]

    await asyncio.gather(*(terminate(j) for j in job_ids))
    return idle, rss, held


async def run(services: Services, quick: bool) -> Result:
    replay = await BackgroundServer(create_replay_app(SlowReplay())).start()
    receiver = await BackgroundServer(_silent_receiver(), log_level="critical").start()
    root = str(services.root / f"scale-{uuid.uuid4().hex[:6]}")
    stack = BenchStack(services, "scale", _config(root, replay.url, receiver.url))
    await stack.open()
    in_flight = 60 if quick else 1000
    try:
        await stack.start_worker()
        history = {cells: round(await _history_per_cell(stack, cells), 2) for cells in (1, 10, 100)}
        stack.workers[0].kill()
        stack.workers.clear()
        idle, one_cell, held_one = await _in_flight(stack, in_flight, 1)
        idle_ten, ten_cells, held_ten = await _in_flight(stack, in_flight // 10, 10)
    finally:
        await stack.close()
        await replay.stop()
        await receiver.stop()
    mib = 1024 * 1024
    per_job = (one_cell - idle) / max(1, held_one)
    per_cell_10 = (ten_cells - idle_ten) / max(1, held_ten)
    marginal = round((history[100] * 100 - history[1]) / 99, 2)
    return Result(
        name="scale",
        params={"cells_per_job": [1, 10, 100], "jobs_in_flight": in_flight, "ten_cell_jobs_in_flight": in_flight // 10},
        metrics={
            "history_events_per_cell": history,
            "history_events_per_added_cell": marginal,
            "cells_held_in_flight": {"one_cell_jobs": held_one, "ten_cell_jobs": held_ten},
            "worker_rss_idle_mib": round(idle / mib, 1),
            "worker_rss_one_cell_jobs_mib": round(one_cell / mib, 1),
            "worker_rss_ten_cell_jobs_mib": round(ten_cells / mib, 1),
            "rss_per_in_flight_job_kib": round(per_job / 1024, 1),
            "rss_per_in_flight_cell_in_10_cell_jobs_kib": round(per_cell_10 / 1024, 1),
        },
        checks=[
            Check("history events per added cell", marginal, "<=", 20),
            Check("history events per cell (100 cells)", history[100], "<=", 20),
        ],
    )

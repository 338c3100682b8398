"""Scenario 6: how figures grow with the job — history per cell, worker memory in flight.

History: one job each of 1, 10 and 100 cells (one target per cell, each with its own
directory route) runs to its end; the workflow history's event count of the one-cell
job (target ≤ 24) and the marginal events of an added cell (target ≤ 12). A job has a
fixed part (start, the first workflow task, the patch marker, the deadline timer,
``finish`` as a local-activity marker, search-attribute upserts, completion) and per cell
``acquire`` and ``deliver`` (three events each) plus the workflow tasks their results
wake.

Memory: N one-cell jobs are held in flight (10 000 in the full run; the replay holds
every search answer, so each job waits in or for its ``acquire``); the worker's resident
set is read before and with them in flight, then again for N/10 jobs of 10 cells (the
same number of cells). A worker keeps at most ``temporal.max_cached_workflows`` (1000)
executions in memory; the others are replayed from history when they wake, so its
memory is bounded whatever N is. Target: RSS ≤ 1.5 GiB with 10 000 jobs in flight.

Admission with the jobs in flight: the API (its own process) takes new Tasks at an
offered rate before the jobs are started and again while they are in flight; the p99
must not grow (target: ≤ 50 ms, and within 1.5× of the idle figure).
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
from bench.stats import summarise
from curaflow.config import Settings
from curaflow.domain.messages import JobInput, TargetSpec
from curaflow.ledger.db import now_ms
from curaflow.ledger.jobs import NewJob, insert_job, mark_workflow_started
from curaflow.process.httpserver import BackgroundServer
from curaflow.sources.pixiv.replay.app import SlowReplay, create_replay_app
from curaflow.temporal.connection import start_job_workflow

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


async def _in_flight(
    stack: BenchStack, faults: SlowReplay, jobs: int, cells: int, admission: Any = None
) -> tuple[int, int, int, Any]:
    """Hold ``jobs`` jobs of ``cells`` cells in flight on a fresh worker process.

    Returns ``(idle_rss, in_flight_rss, cells_in_flight, admission_while_in_flight)``
    (bytes; the last is ``admission()``'s result measured with the jobs in flight, when
    given). Afterwards the worker is killed and the jobs' workflows are terminated, so the
    next measurement starts clean.
    """
    assert stack.pool is not None and stack.client is not None
    faults.search_delay_s = 0.0
    worker = await stack.start_worker()
    warm = [await _start(stack, 90 + i, 1) for i in range(3)]  # imports, sandbox, pools
    await stack.wait_terminal(warm, 120)
    await asyncio.sleep(1)
    idle = worker_rss_bytes(worker)
    faults.search_delay_s = 7200.0  # every search answer is held: each job waits in or for acquire
    gate = asyncio.Semaphore(50)

    async def start(i: int) -> str:
        async with gate:
            return await _start(stack, i * cells, cells, held=True)

    job_ids = list(await asyncio.gather(*(start(i) for i in range(jobs))))
    # Every execution had its first workflow task (it scheduled its acquire steps) once the
    # worker is quiet again.
    await _quiet(worker.pid, seconds=3)
    held = jobs * cells
    rss = worker_rss_bytes(worker)
    loaded = await admission() if admission is not None else None
    worker.kill()
    stack.workers.remove(worker)

    async def terminate(job_id: str) -> None:
        async with gate:
            await stack.client.get_workflow_handle(job_id).terminate("benchmark done")  # type: ignore[union-attr]

    await asyncio.gather(*(terminate(j) for j in job_ids))
    faults.search_delay_s = 0.0
    return idle, rss, held, loaded


async def _quiet(pid: int | None, seconds: float, timeout_s: float = 600) -> None:
    """Wait until process ``pid`` used under 10 % of a core for ``seconds`` in a row."""
    import psutil

    assert pid is not None
    proc = psutil.Process(pid)
    deadline = time.monotonic() + timeout_s
    calm = 0.0
    proc.cpu_percent(None)
    while calm < seconds and time.monotonic() < deadline:
        await asyncio.sleep(1)
        calm = calm + 1 if proc.cpu_percent(None) < 10 else 0.0


async def _admission_p99(stack: BenchStack, n: int) -> float:
    """p99 (ms) of new admissions offered at 100/s to the API process (open loop, from
    :mod:`bench.loadgen` in its own process). The Tasks name target ``t0``; the API
    starts their workflows on a task queue no worker polls (:func:`run`), so they do
    not join the jobs held in flight."""
    from bench.scenarios.api import OFFERED_PER_S, offer_admissions

    latencies, statuses, _ = await offer_admissions(
        stack, OFFERED_PER_S, n, f"scale-{uuid.uuid4().hex}", {"target_id": "t0"}
    )
    assert all(s == 202 for s in statuses), sorted(set(statuses))
    return summarise(latencies)["p99"]


async def run(services: Services, quick: bool) -> Result:
    faults = SlowReplay()
    replay = await BackgroundServer(create_replay_app(faults), log_level="critical").start()
    receiver = await BackgroundServer(_silent_receiver(), log_level="critical").start()
    root = str(services.root / f"scale-{uuid.uuid4().hex[:6]}")
    stack = BenchStack(services, "scale", _config(root, replay.url, receiver.url))
    await stack.open()
    in_flight = 300 if quick else 10_000
    admissions = 200 if quick else 1000
    try:
        await stack.start_worker()
        history = {cells: round(await _history_per_cell(stack, cells), 2) for cells in (1, 10, 100)}
        stack.workers[0].kill()
        stack.workers.clear()
        await stack.start_api({"temporal": {"task_queue": f"{stack.task_queue}-admitted"}})
        admission_idle = await _admission_p99(stack, admissions)

        async def admission_loaded() -> float:
            return await _admission_p99(stack, admissions)

        idle, one_cell, held_one, admission_in_flight = await _in_flight(stack, faults, in_flight, 1, admission_loaded)
        idle_ten, ten_cells, held_ten, _ = await _in_flight(stack, faults, in_flight // 10, 10)
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
            "admission_p99_ms": {
                "idle": round(admission_idle, 1),
                "with_jobs_in_flight": round(admission_in_flight, 1),
            },
        },
        checks=[
            Check("history events per one-cell job", history[1], "<=", 24),
            Check("history events per added cell", marginal, "<=", 12),
            Check(f"worker RSS with {in_flight} jobs in flight", round(one_cell / mib, 1), "<=", 1536, "MiB"),
            Check("admission p99 with the jobs in flight", round(admission_in_flight, 1), "<=", 50, "ms"),
            Check(
                "admission p99 in flight / idle",
                round(admission_in_flight / max(admission_idle, 1e-3), 2),
                "<=",
                1.5,
            ),
        ],
    )

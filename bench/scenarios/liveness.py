"""Scenarios 4 and 5: cancel latency at the default budgets, stall recovery at a 1 s interval.

Cancel: with the **default** heartbeat interval (30 s), half the jobs are held in
``search`` (the replay server answers searches slowly), half in ``fetch`` (it answers
images slowly); each is cancelled with ``POST /jobs/{id}/cancel`` and timed until the
ledger holds it terminal (the activity must hear the cancel through a heartbeat — sent
at most every second whatever the interval — and stop first). Target: p99 ≤ 2 s.

Stall recovery: two workers; a job's search waits for its second page (the replay server
holds that answer back); the worker
holding the cell's lease is killed with SIGKILL; timed until the other worker starts
the retried attempt (the cell's lease owner changes). Target: ≤ heartbeat timeout
(2 × interval) + 2 s.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid

from bench.env import BenchStack, Services
from bench.result import Check, Result
from bench.stats import summarise
from curaflow.process.httpserver import BackgroundServer
from curaflow.sources.pixiv.replay.app import SlowReplay, create_replay_app
from curaflow.sources.pixiv.replay.data import matches, recorded_works

HEARTBEAT_MS = 1000  # the stall scenario: recovery is bounded by the heartbeat timeout
DEFAULT_HEARTBEAT_MS = 30_000  # the cancel scenario runs at the production default


def _task(key: str, **params: object) -> dict[str, object]:
    return {"protocol_version": "1", "job_type": "candidate_search", "idempotency_key": key, "params": params}


async def cancel(services: Services, quick: bool) -> Result:
    n = 8 if quick else 40
    faults = SlowReplay()
    replay = await BackgroundServer(create_replay_app(faults), log_level="critical").start()
    stack = BenchStack(
        services,
        "cancel",
        {
            "pixiv": {"api_url": replay.url, "replay_max_concurrency": n},
            "budgets": {"heartbeat_interval_ms": DEFAULT_HEARTBEAT_MS},
            "api": {"cancel_wait_ms": 10_000},
            "routes": {"out": {"kind": "directory", "path": str(services.root / f"cancel-{uuid.uuid4().hex[:6]}")}},
            "targets": [{"id": "demo", "query": {"mode": "ranking"}, "routes": ["out"]}],
        },
    )
    await stack.open()
    latencies: dict[str, list[float]] = {"searching": [], "fetching": []}
    answers: list[float] = []
    statuses: list[str] = []
    try:
        await stack.start_worker()
        await stack.start_api()
        assert stack.pool is not None
        async with stack.http() as http:
            for stage in ("searching", "fetching"):
                faults.search_delay_s = 120.0 if stage == "searching" else 0.0
                faults.slow_images_s = 120.0 if stage == "fetching" else 0.0
                jobs = []
                for _ in range(n // 2):
                    response = await http.post("/jobs", json=_task(f"c-{uuid.uuid4().hex}", target_id="demo"))
                    if response.status_code != 202:
                        raise RuntimeError(f"admission refused: {response.status_code} {response.text[:300]}")
                    jobs.append(response.json()["job"]["job_id"])
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    held = await stack.pool.fetchval(
                        "SELECT count(*) FROM cells WHERE job_id = ANY($1::text[]) AND stage = $2"
                        " AND lease_until IS NOT NULL",
                        jobs,
                        stage,
                    )
                    if held == len(jobs):
                        break
                    await asyncio.sleep(0.1)
                await asyncio.sleep(1.5)  # every step is running (and has heartbeated once)
                for job_id in jobs:
                    started = time.monotonic()
                    response = await http.post(f"/jobs/{job_id}/cancel")
                    answered = time.monotonic()
                    await stack.wait_terminal([job_id], 30)
                    latencies[stage].append((time.monotonic() - started) * 1000)
                    answers.append((answered - started) * 1000)
                    statuses.append(response.json()["status"])
    finally:
        await stack.close()
        await replay.stop()
    summary = summarise(latencies["searching"] + latencies["fetching"])
    return Result(
        name="cancel",
        params={"jobs": n, "heartbeat_interval_ms": DEFAULT_HEARTBEAT_MS, "held_in": "search, fetch (slow answers)"},
        metrics={
            "cancel_to_terminal": summary,
            "while_searching": summarise(latencies["searching"]),
            "while_fetching": summarise(latencies["fetching"]),
            "http_answer": summarise(answers),
            "statuses": sorted(set(statuses)),
        },
        checks=[Check("p99 cancel → terminal, default budgets", summary.get("p99", float("nan")), "<=", 2000, "ms")],
    )


async def stall(services: Services, quick: bool) -> Result:
    reps = 3 if quick else 8
    page_one = [str(w["id"]) for w in recorded_works() if matches(w, "オリジナル", "partial_match_for_tags")][:30]
    app = create_replay_app()

    @app.middleware("http")
    async def hold_second_page(request, call_next):  # type: ignore[no-untyped-def]
        if "offset=" in request.url.query:
            await asyncio.sleep(60)
        return await call_next(request)

    replay = await BackgroundServer(app, log_level="critical").start()
    stack = BenchStack(
        services,
        "stall",
        {
            "budgets": {"heartbeat_interval_ms": HEARTBEAT_MS},
            "pixiv": {"api_url": replay.url},
            "routes": {"out": {"kind": "directory", "path": str(services.root / f"stall-{uuid.uuid4().hex[:6]}")}},
            "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": ["out"]}],
        },
    )
    await stack.open()
    recoveries: list[float] = []
    try:
        await stack.start_worker()
        await stack.start_worker()
        assert stack.pool is not None
        from curaflow.jobs.admission import Admitter

        admitter = Admitter(stack.settings, stack.pool, stack.client)
        for _ in range(reps):
            exclude = [{"kind": "work", "id": w} for w in page_one]
            admission = await admitter.admit(
                _task(f"s-{uuid.uuid4().hex}", query={"tags": ["オリジナル"]}, constraints={"exclude": exclude})
            )
            job_id = admission.job_id
            owner = None
            deadline = time.monotonic() + 30
            while owner is None and time.monotonic() < deadline:
                owner = await stack.pool.fetchval(
                    "SELECT lease_owner FROM cells WHERE job_id = $1 AND search_checkpoint IS NOT NULL", job_id
                )
                await asyncio.sleep(0.02)
            if owner is None:
                raise RuntimeError("the search never reached the gate")
            pid = int(owner.rsplit(":", 1)[1])
            victim = next(w for w in stack.workers if w.pid == pid)
            killed = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            await asyncio.to_thread(victim.kill)
            while True:
                now_owner = await stack.pool.fetchval("SELECT lease_owner FROM cells WHERE job_id = $1", job_id)
                if now_owner and now_owner != owner:
                    recoveries.append((time.monotonic() - killed) * 1000)
                    break
                if time.monotonic() - killed > 60:
                    raise RuntimeError("no worker resumed the attempt")
                await asyncio.sleep(0.02)
            stack.workers.remove(victim)
            await stack.start_worker()
            await stack.client.get_workflow_handle(job_id).terminate("benchmark done")  # type: ignore[union-attr]
    finally:
        await stack.close()
        await replay.stop()
    limit = 2 * HEARTBEAT_MS + 2000
    summary = summarise(recoveries)
    return Result(
        name="stall_recovery",
        params={"repetitions": reps, "heartbeat_interval_ms": HEARTBEAT_MS, "heartbeat_timeout_ms": 2 * HEARTBEAT_MS},
        metrics={"kill_to_resumed": summary},
        checks=[Check("max kill → resumed on another worker", summary.get("max", float("nan")), "<=", limit, "ms")],
    )

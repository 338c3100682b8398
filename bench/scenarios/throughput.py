"""Scenario 1: end-to-end throughput of one-cell jobs, against the bare engine in the same run.

curaflow: N one-cell jobs (replay source, directory route) admitted through the shared
admission code, all at once (50 admissions in flight), timed from the first admission
to the last job terminal in the ledger. Targets use the ranking (all 61 recorded works)
and at most 25 jobs share a route, so every job can get a work of its own.

Bare engine: N ``BareWorkflow`` executions with the same activity round trips (search
and fetch on a source queue with the same concurrency, deliver, finish) as no-ops, started
the same way, timed from the first start to the last result. Target: ratio ≥ 0.8.
"""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys
import time
import uuid

from bench.bare import BareSpec
from bench.env import BenchStack, Services
from bench.result import Check, Result
from curaflow.admission import Admitter
from curaflow.devstack.processes import die_with_parent

PER_TARGET = 25
SOURCE_CONCURRENCY = 4


def config(n: int, root: str) -> dict[str, object]:
    targets = math.ceil(n / PER_TARGET)
    return {
        "pixiv": {"replay_max_concurrency": SOURCE_CONCURRENCY},
        "routes": {f"out{i}": {"kind": "directory", "path": f"{root}/out{i}"} for i in range(targets)},
        "targets": [
            {"id": f"t{i}", "query": {"mode": "ranking"}, "routes": [f"out{i}"], "scan_limit": 30}
            for i in range(targets)
        ],
    }


async def run_curaflow(stack: BenchStack, n: int) -> tuple[float, int]:
    assert stack.pool is not None
    admitter = Admitter(stack.settings, stack.pool, stack.client)
    gate = asyncio.Semaphore(50)
    targets = [t.id for t in stack.settings.targets]

    async def admit(i: int) -> str:
        body = {
            "protocol_version": "1",
            "job_type": "candidate_search",
            "idempotency_key": f"bench-{uuid.uuid4().hex}",
            "params": {"target_id": targets[i % len(targets)]},
        }
        async with gate:
            return (await admitter.admit(body)).job_id

    started = time.monotonic()
    job_ids = await asyncio.gather(*(admit(i) for i in range(n)))
    finished = await stack.wait_terminal(list(job_ids))
    succeeded = await stack.pool.fetchval(
        "SELECT count(*) FROM jobs WHERE job_id = ANY($1::text[]) AND business_status = 'success'", list(job_ids)
    )
    return n / (finished - started), int(succeeded)


async def run_bare(stack: BenchStack, n: int) -> float:
    assert stack.client is not None
    queue = f"{stack.task_queue}-bare"
    source = f"{queue}-source"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.bare",
            "--address",
            stack.services.temporal.address,
            "--task-queue",
            queue,
            "--source-queue",
            source,
            "--source-concurrency",
            str(SOURCE_CONCURRENCY),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        preexec_fn=die_with_parent,
    )
    try:
        assert proc.stdout is not None
        await asyncio.to_thread(proc.stdout.readline)
        gate = asyncio.Semaphore(50)
        spec = BareSpec(cells=1, routes=1, source_queue=source)

        async def start(i: int) -> object:
            async with gate:
                return await stack.client.start_workflow(  # type: ignore[union-attr]
                    "BareWorkflow", spec, id=f"bare-{uuid.uuid4().hex}", task_queue=queue
                )

        started = time.monotonic()
        handles = await asyncio.gather(*(start(i) for i in range(n)))
        await asyncio.gather(*(h.result() for h in handles))  # type: ignore[attr-defined]
        return n / (time.monotonic() - started)
    finally:
        proc.terminate()
        proc.wait(10)


async def run(services: Services, quick: bool) -> Result:
    n = 30 if quick else 200
    stack = BenchStack(services, "throughput", config(n, str(services.root / f"routes-{uuid.uuid4().hex[:6]}")))
    await stack.open()
    try:
        await stack.start_worker()
        await run_curaflow(stack, 4)  # warm-up: imports, sandbox, connection pools
        ours, succeeded = await run_curaflow(stack, n)
        for worker in stack.workers:
            await asyncio.to_thread(worker.stop)
        stack.workers.clear()
        await run_bare(stack, 4)
        bare = await run_bare(stack, n)
    finally:
        await stack.close()
    ratio = ours / bare
    return Result(
        name="throughput",
        params={
            "jobs": n,
            "cells_per_job": 1,
            "activities_per_job": 4,
            "admissions_in_flight": 50,
            "source_concurrency": SOURCE_CONCURRENCY,
            "route": "directory",
            "source": "replay",
        },
        metrics={
            "curaflow_jobs_per_s": round(ours, 2),
            "bare_jobs_per_s": round(bare, 2),
            "ratio": round(ratio, 3),
            "succeeded": succeeded,
        },
        checks=[Check("curaflow / bare throughput", round(ratio, 3), ">=", 0.8)],
    )

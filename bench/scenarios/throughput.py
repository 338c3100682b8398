"""Scenario 1: end-to-end throughput of one-cell jobs, against two baselines in the same run.

curaflow: N one-cell jobs (replay source, directory route) admitted through the shared
admission code, all at once (50 admissions in flight), timed from the first admission
to the last job terminal in the ledger. Targets use the ranking (all 61 recorded works)
and at most 25 jobs share a route, so every job can get a work of its own.

Baselines, each with its own worker process, started the same way (50 starts in flight),
timed from the first start to the last result:

* **no-op engine** (:mod:`bench.bare`): the same activity round trips as curaflow's first
  design (search and fetch on a source queue, deliver, finish), all no-ops — what the
  whole job costs over Temporal itself;
* **same I/O** (:mod:`bench.bare_io`): a straightforward Temporal job doing curaflow's
  external work — read the ranking page, download the work's images, hash and write
  them with fsync, copy them to a route directory — with no ledger, domain rules or
  projection: what curaflow's own machinery costs.

Also measured: CPU per job (user + system) of the worker, the Temporal server and
PostgreSQL, and the history events of a job. Targets (docs/performance.md): ratio vs the no-op
engine ≥ 0.6, vs the same I/O ≥ 0.85, worker CPU ≤ 35 ms per one-cell job, ≤ 24 history
events per one-cell job.
"""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass

from bench.bare import BareSpec
from bench.bare_io import BareIOSpec
from bench.env import BenchStack, Services, cpu_seconds, postgres_pids
from bench.result import Check, Result
from curaflow.devstack.processes import die_with_parent
from curaflow.jobs.admission import Admitter

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


@dataclass
class Run:
    """One engine's run: jobs per second and CPU milliseconds per job by process group."""

    jobs_per_s: float
    worker_cpu_ms: float
    server_cpu_ms: float
    postgres_cpu_ms: float = 0.0
    succeeded: int = 0


class Meter:
    """CPU used by the worker(s), the Temporal server and PostgreSQL over a run."""

    def __init__(self, services: Services, workers: list[int]) -> None:
        self.groups = {
            "worker": lambda: workers,
            "server": lambda: [services.temporal.process.pid] if services.temporal.process else [],
            "postgres": lambda: postgres_pids(services.postgres.pgdata),
        }
        self.start = {name: cpu_seconds(pids()) for name, pids in self.groups.items()}

    def per_job_ms(self, n: int) -> dict[str, float]:
        return {
            name: round((cpu_seconds(pids()) - self.start[name]) * 1000 / n, 1) for name, pids in self.groups.items()
        }


async def run_curaflow(stack: BenchStack, n: int) -> tuple[Run, list[str]]:
    assert stack.pool is not None
    admitter = Admitter(stack.settings, stack.pool, stack.client)
    gate = asyncio.Semaphore(50)
    targets = [t.id for t in stack.settings.targets]
    meter = Meter(stack.services, [w.pid for w in stack.workers if w.pid])

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
    cpu = meter.per_job_ms(n)
    succeeded = await stack.pool.fetchval(
        "SELECT count(*) FROM jobs WHERE job_id = ANY($1::text[]) AND business_status = 'success'", list(job_ids)
    )
    run = Run(n / (finished - started), cpu["worker"], cpu["server"], cpu["postgres"], int(succeeded))
    return run, list(job_ids)


async def run_baseline(stack: BenchStack, n: int, io: bool) -> Run:
    """Run ``n`` jobs of the no-op (``io=False``) or same-I/O (``io=True``) baseline."""
    assert stack.client is not None
    queue = f"{stack.task_queue}-{'io' if io else 'bare'}-{uuid.uuid4().hex[:4]}"
    source = f"{queue}-source"
    module = "bench.bare_io" if io else "bench.bare"
    args = [sys.executable, "-m", module, "--address", stack.services.temporal.address, "--task-queue", queue,
            "--source-queue", source, "--source-concurrency", str(SOURCE_CONCURRENCY)]  # fmt: skip
    if io:
        args += ["--replay", stack.services.replay_url, "--dir", str(stack.dir / f"bare-io-{queue}")]
    log = open(stack.dir / f"{queue}.log", "ab")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, preexec_fn=die_with_parent)
    try:
        assert proc.stdout is not None
        await asyncio.to_thread(proc.stdout.readline)
        gate = asyncio.Semaphore(50)
        meter = Meter(stack.services, [proc.pid])

        async def start(i: int) -> object:
            spec = BareIOSpec(index=i, source_queue=source) if io else BareSpec(cells=1, routes=1, source_queue=source)
            async with gate:
                return await stack.client.start_workflow(  # type: ignore[union-attr]
                    "BareIOWorkflow" if io else "BareWorkflow", spec, id=f"bare-{uuid.uuid4().hex}", task_queue=queue
                )

        started = time.monotonic()
        handles = await asyncio.gather(*(start(i) for i in range(n)))
        try:
            await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 600)  # type: ignore[attr-defined]
        except TimeoutError:
            raise RuntimeError(f"{module} jobs did not finish; worker log: {stack.dir / f'{queue}.log'}") from None
        rate = n / (time.monotonic() - started)
        cpu = meter.per_job_ms(n)
        return Run(rate, cpu["worker"], cpu["server"], cpu["postgres"], n)
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


async def history_events(stack: BenchStack, job_id: str) -> int:
    assert stack.client is not None
    history = await stack.client.get_workflow_handle(job_id).fetch_history()
    return len(history.events)


async def run(services: Services, quick: bool) -> Result:
    n = 30 if quick else 200
    stack = BenchStack(services, "throughput", config(n, str(services.root / f"routes-{uuid.uuid4().hex[:6]}")))
    await stack.open()
    try:
        await stack.start_worker()
        await run_curaflow(stack, 4)  # warm-up: imports, sandbox, connection pools
        ours, job_ids = await run_curaflow(stack, n)
        events = await history_events(stack, job_ids[0])
        for worker in stack.workers:
            await asyncio.to_thread(worker.stop)
        stack.workers.clear()
        await run_baseline(stack, 4, io=False)
        bare = await run_baseline(stack, n, io=False)
        await run_baseline(stack, 4, io=True)
        same_io = await run_baseline(stack, n, io=True)
    finally:
        await stack.close()
    ratio = ours.jobs_per_s / bare.jobs_per_s
    ratio_io = ours.jobs_per_s / same_io.jobs_per_s
    return Result(
        name="throughput",
        params={
            "jobs": n,
            "cells_per_job": 1,
            "admissions_in_flight": 50,
            "source_concurrency": SOURCE_CONCURRENCY,
            "route": "directory",
            "source": "replay",
        },
        metrics={
            "curaflow_jobs_per_s": round(ours.jobs_per_s, 2),
            "bare_jobs_per_s": round(bare.jobs_per_s, 2),
            "same_io_jobs_per_s": round(same_io.jobs_per_s, 2),
            "ratio_vs_noop_engine": round(ratio, 3),
            "ratio_vs_same_io": round(ratio_io, 3),
            "cpu_ms_per_job": {
                "curaflow": {
                    "worker": ours.worker_cpu_ms,
                    "temporal": ours.server_cpu_ms,
                    "postgres": ours.postgres_cpu_ms,
                },
                "noop_engine": {"worker": bare.worker_cpu_ms, "temporal": bare.server_cpu_ms},
                "same_io": {"worker": same_io.worker_cpu_ms, "temporal": same_io.server_cpu_ms},
            },
            "history_events_per_job": events,
            "succeeded": ours.succeeded,
        },
        checks=[
            Check("curaflow / no-op engine throughput", round(ratio, 3), ">=", 0.6),
            Check("curaflow / same-I/O engine throughput", round(ratio_io, 3), ">=", 0.85),
            Check("worker CPU per one-cell job", ours.worker_cpu_ms, "<=", 35, "ms"),
            Check("history events per one-cell job", events, "<=", 24),
        ],
    )

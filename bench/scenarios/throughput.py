"""Scenario 1: end-to-end throughput of one-cell jobs, against two baselines in the same run.

curaflow: N one-cell jobs (replay source, directory route) admitted through the shared
admission code, all at once (50 admissions in flight), timed from the first admission
to the last job terminal in the ledger (counted every :data:`WAIT_POLL_S`). Targets use
the ranking (all 61 recorded works) and at most 25 jobs share a route, so every job can
get a work of its own.

Baselines, each with its own worker process, started the same way (50 starts in flight),
timed from the first start to the last job's ``finish`` activity (the worker prints a line
for each; the waiting costs neither engine's Temporal server anything, see :data:`WAIT_POLL_S`):

* **no-op engine** (:mod:`bench.bare`): the same activity round trips as curaflow's first
  design (search and fetch on a source queue, deliver, finish), all no-ops — what the
  whole job costs over Temporal itself;
* **same I/O** (:mod:`bench.bare_io`): a straightforward Temporal job doing curaflow's
  external work — read the ranking page, download the work's images, hash and write
  them with fsync, copy them to a route directory — with no ledger, domain rules or
  projection: what curaflow's own machinery costs.

A full run has :data:`ROUNDS` rounds of ``N`` jobs per engine, interleaved (curaflow, same
I/O, no-op; then no-op, same I/O, curaflow), each round's curaflow jobs on targets of their
own: the speed of a shared VM drifts within minutes, and interleaving makes every engine see
the same minutes. Rates are over the rounds' summed time; the per-round ratios are reported.

Also measured: CPU per job (user + system) of the worker, the Temporal server and
PostgreSQL; and the load-independent counts of every job of the run (the same on a busy
machine as on an idle one): its history (events by type, workflow tasks, signals,
upserts, markers, timers) and billable Temporal actions (:mod:`bench.counts`, whose doc
states the counting rule), the Temporal server's own ``action`` counter (heartbeats
included), and the ledger statements and transactions per job by step (the worker's
``curaflow_ledger_statements_total``, the admission's counted in this process). Statements
are counted on a batch of their own (:data:`STATEMENT_JOBS` jobs, after the rounds, on a
worker started with ``observability.ledger_statement_metrics``): counting hooks every
statement of the worker (asyncpg's query logger, ~14 µs a statement: ~0.6 ms of a job's
~46) — a cost production workers do not pay (the setting is off by default) and the
rounds must not charge.
Targets (docs/performance.md): vs the same I/O ≥ 0.9, total CPU per one-cell job ≤ 1.1×
the same-I/O engine's, ≤ 24 history events and ≤ 40 ledger statements per one-cell job.
"""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from typing import IO

import asyncpg
import httpx

from bench.bare import BareSpec
from bench.bare_io import BareIOSpec
from bench.counts import JobCounts, delta, history_counts, label_value, mean_counts, parse_metrics
from bench.env import BenchStack, Services, cpu_seconds, postgres_pids
from bench.result import Check, Result
from curaflow.config import Settings
from curaflow.devstack.ports import free_port
from curaflow.devstack.processes import die_with_parent
from curaflow.jobs.admission import Admitter
from curaflow.ledger.db import create_pool
from curaflow.ledger.statements import StatementCounter

#: How often the scenario counts curaflow's terminal jobs in the ledger (seconds). Waiting
#: costs the engine measured: a count every 20 ms charged curaflow's PostgreSQL ~0.8 ms
#: of CPU per job; one result long poll per workflow (how the baselines were waited
#: for) charged the Temporal server up to ~7 ms per curaflow job, and a visibility count
#: ten times a second ~4 ms per job of either engine (docs/performance.md).
WAIT_POLL_S = 0.1
PER_TARGET = 25
SOURCE_CONCURRENCY = 4


#: Histories read for the counts: every job of a run up to this many (a sample beyond).
COUNTED_JOBS = 200


#: Jobs of the batch whose ledger statements are counted (see the module doc).
STATEMENT_JOBS = 50
#: The setting that makes a worker count its statements (``CURAFLOW_*`` environment).
COUNTING_ENV = {"CURAFLOW_OBSERVABILITY__LEDGER_STATEMENT_METRICS": "true"}


def config(targets: int, root: str) -> dict[str, object]:
    """The scenario's configuration with ``targets`` ranking targets, each routed to a
    directory of its own (at most :data:`PER_TARGET` jobs per target)."""
    return {
        # The worker serves its metrics; it counts its ledger statements only when told
        # (COUNTING_ENV).
        "observability": {"metrics_port": free_port(), "metrics_host": "127.0.0.1"},
        "pixiv": {"replay_max_concurrency": SOURCE_CONCURRENCY},
        "routes": {f"out{i}": {"kind": "directory", "path": f"{root}/out{i}"} for i in range(targets)},
        "targets": [
            {"id": f"t{i}", "query": {"mode": "ranking"}, "routes": [f"out{i}"], "scan_limit": 30}
            for i in range(targets)
        ],
    }


@dataclass
class Run:
    """One engine's run: jobs per second, CPU milliseconds per job by process group, and
    the counts per job (history, actions, ledger statements)."""

    jobs_per_s: float
    worker_cpu_ms: float
    server_cpu_ms: float
    postgres_cpu_ms: float = 0.0
    succeeded: int = 0
    counts: JobCounts | None = None
    server_actions: dict[str, float] | None = None
    statements: dict[str, float] | None = None
    transactions: dict[str, float] | None = None
    gate_slots: float = 0.0
    pages: float = 0.0

    @property
    def total_cpu_ms(self) -> float:
        return round(self.worker_cpu_ms + self.server_cpu_ms + self.postgres_cpu_ms, 1)


async def scrape(url: str | None, name: str) -> dict[str, float]:
    """One counter family of a Prometheus endpoint (empty when there is none)."""
    if not url:
        return {}
    async with httpx.AsyncClient(timeout=10) as http:
        return parse_metrics((await http.get(url)).text, name)


def server_actions(after: dict[str, float], before: dict[str, float], n: int) -> dict[str, float]:
    """The Temporal server's ``action`` counter over a run in the ``default`` namespace,
    per job and by action type (``total`` included)."""
    per_type: dict[str, float] = {}
    for labels, value in delta(after, before).items():
        if label_value(labels, "namespace") != "default":
            continue
        kind = label_value(labels, "action_type")
        per_type[kind] = per_type.get(kind, 0.0) + value / n
    per_type = {k: round(v, 2) for k, v in sorted(per_type.items())}
    return {"total": round(sum(per_type.values()), 2), **per_type}


def by_step(after: dict[str, float], before: dict[str, float], n: int) -> dict[str, float]:
    """A per-step counter's increase over a run, per job, by step."""
    steps = {label_value(k, "step"): v / n for k, v in delta(after, before).items()}
    return {k: round(v, 2) for k, v in sorted(steps.items())}


async def job_counts(stack: BenchStack, workflow_ids: list[str]) -> JobCounts:
    """The mean history counts of ``workflow_ids`` (at most :data:`COUNTED_JOBS`)."""
    assert stack.client is not None
    gate = asyncio.Semaphore(8)

    async def one(workflow_id: str) -> JobCounts:
        async with gate:
            history = await stack.client.get_workflow_handle(workflow_id).fetch_history()  # type: ignore[union-attr]
        return history_counts(history.to_json_dict()["events"])

    return mean_counts(await asyncio.gather(*(one(w) for w in workflow_ids[:COUNTED_JOBS])))


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


#: Connections of the admission's pool (the API's, in production).
ADMISSION_POOL = 20


async def admission_pool(stack: BenchStack, counter: StatementCounter | None = None) -> asyncpg.Pool:
    """The admission's pool with every connection open: a round's warm-up and its measured
    jobs share it, as an API process's requests share its long-lived pool. A pool opened for
    the measured jobs alone put up to 18 fresh PostgreSQL sessions (each one's start, asyncpg's
    type introspection and its first plans) on the first jobs' bill (2026-12-07)."""
    return await create_pool(
        stack.services.database_url, min_size=ADMISSION_POOL, max_size=ADMISSION_POOL, counter=counter
    )


async def run_curaflow(
    stack: BenchStack, n: int, targets: list[str], *, pool: asyncpg.Pool | None = None, count: bool = False
) -> tuple[Run, list[str]]:
    """Admit ``n`` one-cell jobs spread over ``targets`` and wait for them all.

    Args:
        pool: the admission's pool (:func:`admission_pool`), kept open by the caller; None:
            one opened for this call and closed after it.
        count: also count the ledger statements (the worker must have been started with
            :data:`COUNTING_ENV`); else the run's ``statements`` / ``transactions`` are None.
            Counts only with a pool of this call's own (the counter is the pool's).
    """
    assert stack.pool is not None
    # Admission has a pool of its own, counted: its statements are part of a job's cost
    # (the API's, in production).
    admission = StatementCounter() if count else None
    own_pool = pool is None or count
    if own_pool:
        pool = await admission_pool(stack, admission)
    assert pool is not None
    admitter = Admitter(stack.settings, pool, stack.client)
    gate = asyncio.Semaphore(50)
    worker_metrics = f"http://127.0.0.1:{stack.settings.observability.metrics_port}/metrics"
    statements_before = await scrape(worker_metrics, "curaflow_ledger_statements_total")
    transactions_before = await scrape(worker_metrics, "curaflow_ledger_transactions_total")
    actions_before = await scrape(stack.services.temporal.metrics_url, "action")
    slots_before = await stack.pool.fetchval("SELECT COALESCE(sum(requests), 0)::bigint FROM source_gates")
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
    try:
        job_ids = await asyncio.gather(*(admit(i) for i in range(n)))
        finished = await stack.wait_terminal(list(job_ids), every_s=WAIT_POLL_S)
        cpu = meter.per_job_ms(n)
    finally:
        if own_pool:
            await pool.close()
    actions_after = await scrape(stack.services.temporal.metrics_url, "action")
    # The last transitions of a job may be counted after the ledger shows it terminal.
    await asyncio.sleep(0.5)
    statements: dict[str, float] | None = None
    transactions: dict[str, float] | None = None
    if admission is not None:
        statements = by_step(await scrape(worker_metrics, "curaflow_ledger_statements_total"), statements_before, n)
        transactions = by_step(
            await scrape(worker_metrics, "curaflow_ledger_transactions_total"), transactions_before, n
        )
        statements["admission"] = round(admission.totals()[0] / n, 2)
        transactions["admission"] = round(admission.totals()[1] / n, 2)
    succeeded = await stack.pool.fetchval(
        "SELECT count(*) FROM jobs WHERE job_id = ANY($1::text[]) AND business_status = 'success'", list(job_ids)
    )
    # Every source request takes one rate-gate slot (one statement): the scan's pages and the images.
    slots = await stack.pool.fetchval("SELECT COALESCE(sum(requests), 0)::bigint FROM source_gates") - slots_before
    pages = await stack.pool.fetchval(
        """SELECT COALESCE(sum(jsonb_array_length(artifact->'files')), 0)::bigint
           FROM cells WHERE job_id = ANY($1::text[])""",
        list(job_ids),
    )
    run = Run(
        n / (finished - started),
        cpu["worker"],
        cpu["server"],
        cpu["postgres"],
        int(succeeded),
        counts=await job_counts(stack, list(job_ids)),
        server_actions=server_actions(actions_after, actions_before, n),
        statements=statements,
        transactions=transactions,
        gate_slots=round(slots / n, 2),
        pages=round(pages / n, 2),
    )
    return run, list(job_ids)


def finished_lines(stdout: IO[bytes], n: int) -> float:
    """Read a baseline worker's stdout until ``n`` ``finished <workflow id>`` lines (its
    ``finish`` activity prints one per job); returns the monotonic time of the last.
    Blocking: run it in a thread.

    Raises:
        RuntimeError: the worker's output ended first (it exited).
    """
    seen = 0
    while seen < n:
        line = stdout.readline()
        if not line:
            raise RuntimeError(f"the baseline worker's output ended after {seen} of {n} jobs")
        seen += line.startswith(b"finished ")
    return time.monotonic()


def baseline_command(
    module: str, settings: Settings, address: str, queue: str, source: str, extra: list[str]
) -> list[str]:
    """The command of a baseline worker (``module``: ``bench.bare`` or ``bench.bare_io``) on
    ``queue`` / ``source``, with ``extra`` arguments: its workflows run as curaflow's worker
    runs its own in the same run — in the SDK's sandbox only when ``settings`` set
    ``temporal.workflow_sandbox`` (``--workflow-sandbox``). A baseline in the sandbox beside
    an unsandboxed curaflow worker paid ~8 ms of CPU a job that curaflow did not (the
    sandbox re-imports the workflow's module for every run): the ratios flattered curaflow."""
    args = [sys.executable, "-m", module, "--address", address, "--task-queue", queue,
            "--source-queue", source, "--source-concurrency", str(SOURCE_CONCURRENCY), *extra]  # fmt: skip
    if settings.temporal.workflow_sandbox:
        args.append("--workflow-sandbox")
    return args


async def run_baseline(stack: BenchStack, n: int, io: bool) -> Run:
    """Run ``n`` jobs of the no-op (``io=False``) or same-I/O (``io=True``) baseline."""
    assert stack.client is not None
    queue = f"{stack.task_queue}-{'io' if io else 'bare'}-{uuid.uuid4().hex[:4]}"
    source = f"{queue}-source"
    module = "bench.bare_io" if io else "bench.bare"
    io_args = ["--replay", stack.services.replay_url, "--dir", str(stack.dir / f"bare-io-{queue}")] if io else []
    args = baseline_command(module, stack.settings, stack.services.temporal.address, queue, source, io_args)
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

        actions_before = await scrape(stack.services.temporal.metrics_url, "action")
        started = time.monotonic()
        handles = await asyncio.gather(*(start(i) for i in range(n)))
        try:
            finished = await asyncio.wait_for(asyncio.to_thread(finished_lines, proc.stdout, n), 600)
        except TimeoutError:
            raise RuntimeError(f"{module} jobs did not finish; worker log: {stack.dir / f'{queue}.log'}") from None
        rate = n / (finished - started)
        cpu = meter.per_job_ms(n)
        await asyncio.gather(*(h.result() for h in handles))  # type: ignore[attr-defined]  # closed, or raises
        actions = server_actions(await scrape(stack.services.temporal.metrics_url, "action"), actions_before, n)
        counts = await job_counts(stack, [h.id for h in handles])  # type: ignore[attr-defined]
        return Run(rate, cpu["worker"], cpu["server"], cpu["postgres"], n, counts=counts, server_actions=actions)
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


#: Targets (docs/performance.md): in-run ratios against the same-I/O engine, and counts.
TARGET_RATIO_VS_SAME_IO = 0.9
TARGET_CPU_VS_SAME_IO = 1.1
TARGET_EVENTS = 24
TARGET_STATEMENTS = 40


def one_page(statements: float, run: Run) -> float:
    """Statements per job as for a one-page work found on the first search page: the
    measured figure less the rate-gate slots (one statement each) beyond one search
    request and one image. The scenario's works average several pages (the replay's
    ranking holds works of 1 to 88 pages), and each page costs one slot whatever else
    the job does."""
    return round(statements - max(0.0, run.gate_slots - 2), 2)


def job_path(per_step: dict[str, float]) -> float:
    """Statements (or transactions) per job on its path: every step but ``background``
    (the worker's supervised loops, which run whatever the number of jobs)."""
    return round(sum(v for k, v in per_step.items() if k != "background"), 2)


#: Rounds of a full run. Each engine runs ``n`` jobs per round, in the order curaflow,
#: same I/O, no-op in even rounds and the reverse in odd ones, so a machine that speeds up
#: or slows down through the run (a shared VM does, by up to half within minutes) moves
#: every engine alike and the in-run ratios stay comparable.
ROUNDS = 2


async def run(services: Services, quick: bool) -> Result:
    n = 30 if quick else 200
    rounds = 1 if quick else ROUNDS
    counted_jobs = n if quick else STATEMENT_JOBS
    # Each round's curaflow jobs go to targets of their own, as fresh as the first round's;
    # so do the jobs whose statements are counted.
    per_round = math.ceil(n / PER_TARGET)
    stack = BenchStack(
        services,
        "throughput",
        config(
            per_round * rounds + math.ceil(counted_jobs / PER_TARGET),
            str(services.root / f"routes-{uuid.uuid4().hex[:6]}"),
        ),
    )
    targets = [t.id for t in stack.settings.targets]
    runs: dict[str, list[Run]] = {"curaflow": [], "same_io": [], "noop": []}
    await stack.open()
    try:
        for r in range(rounds):
            order = ["curaflow", "same_io", "noop"]
            for engine in order if r % 2 == 0 else order[::-1]:
                if engine == "curaflow":
                    own = targets[r * per_round : (r + 1) * per_round]
                    await stack.start_worker()
                    pool = await admission_pool(stack)
                    try:
                        await run_curaflow(stack, 4, own, pool=pool)  # warm-up: imports, connection pools
                        runs[engine].append((await run_curaflow(stack, n, own, pool=pool))[0])
                    finally:
                        await pool.close()
                    for worker in stack.workers:
                        await asyncio.to_thread(worker.stop)
                    stack.workers.clear()
                else:
                    io = engine == "same_io"
                    await run_baseline(stack, 4, io=io)
                    runs[engine].append(await run_baseline(stack, n, io=io))
        counted = await count_statements(stack, counted_jobs, targets[per_round * rounds :])
    finally:
        await stack.close()
    report = result(n, combine(runs["curaflow"]), combine(runs["noop"]), combine(runs["same_io"]), counted)
    report.params["rounds"] = rounds
    report.params["jobs_statements_counted_on"] = counted_jobs
    report.metrics["rounds"] = [
        {
            "curaflow_jobs_per_s": round(ours.jobs_per_s, 2),
            "same_io_jobs_per_s": round(same_io.jobs_per_s, 2),
            "ratio_vs_same_io": round(ours.jobs_per_s / same_io.jobs_per_s, 3),
            "cpu_vs_same_io": round(ours.total_cpu_ms / same_io.total_cpu_ms, 3),
            "cpu_ms_per_job": {
                name: {"worker": e.worker_cpu_ms, "temporal": e.server_cpu_ms, "postgres": e.postgres_cpu_ms}
                for name, e in (("curaflow", ours), ("same_io", same_io))
            },
        }
        for ours, same_io in zip(runs["curaflow"], runs["same_io"], strict=True)
    ]
    return report


async def count_statements(stack: BenchStack, n: int, targets: list[str]) -> Run:
    """Run ``n`` jobs on a worker that counts its ledger statements (its CPU is not a
    figure of the scenario: the counting hooks every statement)."""
    await stack.start_worker(env_extra=COUNTING_ENV)
    try:
        await run_curaflow(stack, 4, targets)  # warm-up, as a round's
        return (await run_curaflow(stack, n, targets, count=True))[0]
    finally:
        for worker in stack.workers:
            await asyncio.to_thread(worker.stop)
        stack.workers.clear()


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _mean_map(maps: list[dict[str, float] | None]) -> dict[str, float] | None:
    present = [m for m in maps if m is not None]
    if not present:
        return None
    keys = sorted({k for m in present for k in m})
    return {k: round(_mean([m.get(k, 0.0) for m in present]), 2) for k in keys}


def combine(runs: list[Run]) -> Run:
    """One engine's rounds as one run: jobs per second over the rounds' summed time (each
    round runs the same number of jobs), CPU and counts per job as the rounds' means."""
    return Run(
        len(runs) / sum(1 / r.jobs_per_s for r in runs),
        round(_mean([r.worker_cpu_ms for r in runs]), 1),
        round(_mean([r.server_cpu_ms for r in runs]), 1),
        round(_mean([r.postgres_cpu_ms for r in runs]), 1),
        sum(r.succeeded for r in runs),
        counts=mean_counts(r.counts for r in runs if r.counts is not None),
        server_actions=_mean_map([r.server_actions for r in runs]),
        statements=_mean_map([r.statements for r in runs]),
        transactions=_mean_map([r.transactions for r in runs]),
        gate_slots=round(_mean([r.gate_slots for r in runs]), 2),
        pages=round(_mean([r.pages for r in runs]), 2),
    )


def result(n: int, ours: Run, bare: Run, same_io: Run, counted: Run | None = None) -> Result:
    """The scenario's report from its three runs (figures, then targets); the ledger
    statements from ``counted`` (the batch whose statements were counted; default ``ours``)."""
    counted = counted or ours
    ratio = ours.jobs_per_s / bare.jobs_per_s
    ratio_io = ours.jobs_per_s / same_io.jobs_per_s
    cpu_ratio = ours.total_cpu_ms / same_io.total_cpu_ms if same_io.total_cpu_ms else float("nan")
    counts = ours.counts or JobCounts()
    statements = counted.statements or {}
    transactions = counted.transactions or {}

    def cpu(run: Run) -> dict[str, float]:
        return {
            "worker": run.worker_cpu_ms,
            "temporal": run.server_cpu_ms,
            "postgres": run.postgres_cpu_ms,
            "total": run.total_cpu_ms,
        }

    def temporal(run: Run) -> dict[str, object]:
        c = run.counts or JobCounts()
        return {"history": c.summary(), "server_actions": run.server_actions or {}}

    return Result(
        name="throughput",
        params={
            "jobs": n,
            "cells_per_job": 1,
            "admissions_in_flight": 50,
            "source_concurrency": SOURCE_CONCURRENCY,
            "route": "directory",
            "source": "replay",
            "jobs_counted": min(n, COUNTED_JOBS),
        },
        metrics={
            "curaflow_jobs_per_s": round(ours.jobs_per_s, 2),
            "bare_jobs_per_s": round(bare.jobs_per_s, 2),
            "same_io_jobs_per_s": round(same_io.jobs_per_s, 2),
            "ratio_vs_noop_engine": round(ratio, 3),
            "ratio_vs_same_io": round(ratio_io, 3),
            "cpu_ms_per_job": {"curaflow": cpu(ours), "noop_engine": cpu(bare), "same_io": cpu(same_io)},
            "cpu_vs_same_io": round(cpu_ratio, 3),
            "history_events_per_job": round(counts.events, 2),
            "billable_actions_per_job": round(counts.actions, 2),
            "ledger_statements_per_job": job_path(statements),
            "ledger_statements_one_page_work": one_page(job_path(statements), counted),
            "ledger_transactions_per_job": job_path(transactions),
            "rate_gate_slots_per_job": counted.gate_slots,
            "pages_per_job": counted.pages,
            "ledger_statements_by_step": statements,
            "ledger_transactions_by_step": transactions,
            "temporal_per_job": {
                "curaflow": temporal(ours),
                "noop_engine": temporal(bare),
                "same_io": temporal(same_io),
            },
            "succeeded": ours.succeeded,
        },
        checks=[
            Check("curaflow / same-I/O engine throughput", round(ratio_io, 3), ">=", TARGET_RATIO_VS_SAME_IO),
            Check("total CPU per job / same-I/O engine's", round(cpu_ratio, 3), "<=", TARGET_CPU_VS_SAME_IO),
            Check("history events per one-cell job", round(counts.events, 2), "<=", TARGET_EVENTS),
            Check(
                "ledger statements per one-cell job (one-page work)",
                one_page(job_path(statements), counted),
                "<=",
                TARGET_STATEMENTS,
            ),
        ],
    )

"""Scenario ``burst``: 500 one-cell jobs admitted at once, three workers, a slow receiver.

What a burst costs end to end when deliveries are slow: every job is admitted at once
(50 admissions in flight), three worker processes serve the main queue (one of them owns
the account's source queue: an account's searches and downloads always run in one
process), and every job delivers to a webhook receiver (``bench.chaos.receiver``, its
own process) that answers after up to 1.5 s.

Reported, besides the time to the last job terminal in the ledger: what the source
queue's slots spent per job — the ``acquire`` attempt's time (from its history:
started → completed) and its wait in the queue (scheduled → started) — and the
deliveries' time, because the source queue (``SOURCE_CONCURRENCY`` slots in one process)
is what a burst waits for; and the load-independent counts of the jobs' histories
(:mod:`bench.counts`). Comparing two builds, an ``acquire`` that holds its slot longer
per job (a signal awaited before the download, a statement or a thread hop per page)
shows here as a longer queue wait for every later job.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from datetime import datetime

from bench.chaos.stack import SECRET
from bench.counts import history_counts, mean_counts
from bench.env import BenchStack, Services
from bench.result import Result
from bench.stats import summarise
from curaflow.devstack.ports import free_port
from curaflow.devstack.processes import die_with_parent
from curaflow.jobs.admission import Admitter

PER_TARGET = 25
SOURCE_CONCURRENCY = 4
WORKERS = 3
RECEIVER_MAX_DELAY_MS = 1500


def _at(event: dict[str, object]) -> float:
    return datetime.fromisoformat(str(event["eventTime"]).replace("Z", "+00:00")).timestamp()


def step_times(events: list[dict[str, object]]) -> dict[str, list[float]]:
    """Per activity type, the queue wait and the attempt's time of its last attempt (ms)."""
    scheduled: dict[str, tuple[str, float]] = {}
    started: dict[str, float] = {}
    out: dict[str, list[float]] = {}
    for event in events:
        kind = str(event.get("eventType", ""))
        if kind == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED":
            attrs = event["activityTaskScheduledEventAttributes"]
            scheduled[str(event["eventId"])] = (str(attrs["activityType"]["name"]), _at(event))  # type: ignore[index]
        elif kind == "EVENT_TYPE_ACTIVITY_TASK_STARTED":
            started[str(event["activityTaskStartedEventAttributes"]["scheduledEventId"])] = _at(event)  # type: ignore[index]
        elif kind == "EVENT_TYPE_ACTIVITY_TASK_COMPLETED":
            sched_id = str(event["activityTaskCompletedEventAttributes"]["scheduledEventId"])  # type: ignore[index]
            name, at = scheduled[sched_id]
            begun = started.get(sched_id, at)
            out.setdefault(f"{name}_wait", []).append((begun - at) * 1000)
            out.setdefault(f"{name}_run", []).append((_at(event) - begun) * 1000)
    return out


async def run(services: Services, quick: bool) -> Result:
    n = 100 if quick else 500
    root = services.root / f"burst-{uuid.uuid4().hex[:6]}"
    root.mkdir(parents=True)
    port = free_port()
    receiver = subprocess.Popen(
        [sys.executable, "-m", "bench.chaos.receiver", "--port", str(port), "--log", str(root / "received.jsonl"),
         "--secret", SECRET, "--max-delay-ms", str(RECEIVER_MAX_DELAY_MS)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent,
    )  # fmt: skip
    targets = -(-n // PER_TARGET)
    config = {
        "pixiv": {"replay_max_concurrency": SOURCE_CONCURRENCY},
        "routes": {
            f"hook{i}": {"kind": "webhook", "url": f"http://127.0.0.1:{port}/burst/{i}", "secret": SECRET}
            for i in range(targets)
        },
        "outbound": {"private_networks": ["127.0.0.0/8"]},
        "targets": [
            {"id": f"t{i}", "query": {"mode": "ranking"}, "routes": [f"hook{i}"], "scan_limit": 30}
            for i in range(targets)
        ],
    }
    stack = BenchStack(services, "burst", config)
    await stack.open()
    try:
        for _ in range(WORKERS):
            await stack.start_worker()
        assert stack.pool is not None and stack.client is not None
        admitter = Admitter(stack.settings, stack.pool, stack.client)
        gate = asyncio.Semaphore(50)

        async def admit(i: int) -> str:
            body = {
                "protocol_version": "1",
                "job_type": "candidate_search",
                "idempotency_key": f"burst-{uuid.uuid4().hex}",
                "params": {"target_id": f"t{i % targets}"},
            }
            async with gate:
                return (await admitter.admit(body)).job_id

        started = time.monotonic()
        job_ids = await asyncio.gather(*(admit(i) for i in range(n)))
        finished = await stack.wait_terminal(list(job_ids), timeout_s=1200)
        seconds = finished - started
        succeeded = await stack.pool.fetchval(
            "SELECT count(*) FROM jobs WHERE job_id = ANY($1::text[]) AND business_status = 'success'", list(job_ids)
        )
        histories = []
        fetch_gate = asyncio.Semaphore(8)

        async def history(job_id: str) -> list[dict[str, object]]:
            async with fetch_gate:
                got = await stack.client.get_workflow_handle(job_id).fetch_history()  # type: ignore[union-attr]
            return list(got.to_json_dict()["events"])

        histories = await asyncio.gather(*(history(j) for j in job_ids))
    finally:
        await stack.close()
        receiver.terminate()
        receiver.wait(10)
    times: dict[str, list[float]] = {}
    for events in histories:
        for key, values in step_times(events).items():
            times.setdefault(key, []).extend(values)
    counts = mean_counts(history_counts(events) for events in histories)
    return Result(
        name="burst",
        params={
            "jobs": n,
            "workers": WORKERS,
            "source_concurrency": SOURCE_CONCURRENCY,
            "receiver_max_delay_ms": RECEIVER_MAX_DELAY_MS,
            "route": "webhook",
        },
        metrics={
            "seconds": round(seconds, 1),
            "jobs_per_s": round(n / seconds, 2),
            "succeeded": int(succeeded),
            "acquire_run_ms": summarise(times.get("acquire_run", [])),
            "acquire_wait_ms": summarise(times.get("acquire_wait", [])),
            "deliver_run_ms": summarise(times.get("deliver_run", [])),
            "deliver_wait_ms": summarise(times.get("deliver_wait", [])),
            "history_events_per_job": round(counts.events, 2),
            "signals_per_job": round(counts.signals, 2),
            "workflow_tasks_per_job": round(counts.workflow_tasks, 2),
        },
    )

"""Scenarios 2 and 3: admission and reads over HTTP, against the API as its own process.

Two kinds of load, because a closed loop of 50 clients measures throughput but, by
Little's law, its latency is just 50 / throughput:

* **capacity** — 50 clients send back to back; requests per second is the figure;
* **latency** — an open loop offers a fixed rate (``OFFERED_PER_S``) from up to 50
  clients in flight; each latency is measured from the request's *scheduled* send time
  (no coordinated omission), p50/p95/p99 reported. Admissions and reads are offered by
  :mod:`bench.loadgen` in its own process (aiohttp): from the benchmark's process httpx
  could not offer 150/s (it measured its own backlog, seconds, not the API), and at
  100/s its own cost was most of a read's p50 and all of its p99 tail.

Admission: new Tasks (each writes the ledger and starts a workflow), then replays of
the same keys. No worker runs, so the jobs just wait: the figures are the API's.
Targets on this 2-core machine: ≥ 200 admissions/s (capacity), p99 ≤ 50 ms for new keys
and ≤ 20 ms for replays (latency at the offered rate).

Reads (latency at the offered rate): ``GET /jobs/{id}`` (p99 ≤ 10 ms); an events page
of a job while the events table holds a million rows (p99 ≤ 15 ms); long-poll wake-up:
the time from an event's commit to the return of a ``wait_ms`` long-poll (p99 ≤ 100 ms).
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from urllib.parse import urlencode

import httpx

from bench.env import BenchStack, Services
from bench.result import Check, Result
from bench.stats import summarise
from curaflow.ledger.events import append_event, event_id

CLIENTS = 50
OFFERED_PER_S = 100
#: The admission latency target is checked at this offered rate (docs/performance.md).
ADMISSION_OFFERED_PER_S = 150

#: wrk's request script: a new idempotency key per request, per thread (wrk's own Lua).
WRK_SCRIPT = """
local counter = 0
local prefix = "wrk"
function setup(thread)
  thread:set("tid", tostring(math.random(1, 1e9)))
end
function init(args)
  prefix = "wrk-" .. tid .. "-"
end
request = function()
  counter = counter + 1
  local body = '{"protocol_version":"1","job_type":"candidate_search","idempotency_key":"' .. prefix .. counter ..
    '","params":{"query":{"tags":["wrk"]}}}'
  return wrk.format("POST", "/jobs", {["Content-Type"] = "application/json",
    ["Authorization"] = "Bearer TOKEN"}, body)
end
"""


async def _wrk_capacity(stack: BenchStack, seconds: int) -> dict[str, float] | None:
    """New admissions per second from ``wrk`` (a C load generator in its own process, 50
    connections, 2 threads) — so the generator's own CPU hardly competes with the API.
    None when ``wrk`` is not installed (Debian: ``apt-get install wrk``)."""
    import re
    import shutil
    import subprocess

    from bench.env import API_TOKEN

    exe = shutil.which("wrk")
    if exe is None:
        return None
    script = stack.dir / "admit.lua"
    script.write_text(WRK_SCRIPT.replace("TOKEN", API_TOKEN))
    args = [exe, "-t2", f"-c{CLIENTS}", f"-d{seconds}s", "-s", str(script), stack.api_url]
    done = await asyncio.to_thread(subprocess.run, args, capture_output=True, text=True, timeout=seconds + 60)
    rate = re.search(r"Requests/sec:\s+([0-9.]+)", done.stdout)
    errors = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", done.stdout)
    if rate is None:
        raise RuntimeError(f"wrk gave no rate: {done.stdout[-2000:]} {done.stderr[-2000:]}")
    return {"new_per_s": float(rate.group(1)), "non_2xx": float(errors.group(1)) if errors else 0.0}


def _task_params() -> dict[str, object]:
    return dict(_task("")["params"])  # type: ignore[call-overload]


async def _loadgen(stack: BenchStack, rate: float, args: list[str], timeout_s: float) -> dict[str, object]:
    """Run :mod:`bench.loadgen` (its own process) with ``args``; returns its JSON result."""
    import json
    import subprocess
    import sys

    from bench.env import API_TOKEN

    argv = [sys.executable, "-m", "bench.loadgen", "--url", stack.api_url, "--token", API_TOKEN, "--rate", str(rate)]
    done = await asyncio.to_thread(subprocess.run, argv + args, capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"bench.loadgen failed: {done.stderr[-2000:]}")
    result: dict[str, object] = json.loads(done.stdout)
    return result


async def offer_admissions(
    stack: BenchStack, rate: float, n: int, prefix: str, params: dict[str, object] | None = None
) -> tuple[list[float], list[int], float]:
    """Offer ``n`` admissions at ``rate``/s from :mod:`bench.loadgen` (its own process).

    Returns latencies (ms, from each request's due time), statuses and the achieved rate.
    Request *i* has the idempotency key ``{prefix}-{i}``: the same prefix replays.
    """
    import json

    args = ["--n", str(n), "--prefix", prefix, "--params", json.dumps(params or _task_params())]
    result = await _loadgen(stack, rate, args, n / rate + 300)
    return result["latencies_ms"], result["statuses"], float(result["achieved_per_s"])  # type: ignore[return-value, arg-type]


async def offer_reads(stack: BenchStack, rate: float, paths: list[str]) -> tuple[list[float], list[int]]:
    """Offer ``GET`` of each path at ``rate``/s from :mod:`bench.loadgen` (its own process).

    Returns latencies (ms, from each request's due time) and statuses.
    """
    listing = stack.dir / f"reads-{uuid.uuid4().hex[:6]}.txt"
    listing.write_text("\n".join(paths) + "\n", encoding="utf-8")
    result = await _loadgen(stack, rate, ["--paths", str(listing)], len(paths) / rate + 300)
    return result["latencies_ms"], result["statuses"]  # type: ignore[return-value]


async def _timed(http: httpx.AsyncClient, method: str, url: str, **kwargs: object) -> tuple[float, httpx.Response]:
    started = time.perf_counter()
    response = await http.request(method, url, **kwargs)  # type: ignore[arg-type]
    return (time.perf_counter() - started) * 1000, response


async def _load(
    http: httpx.AsyncClient, requests: list[tuple[str, str, dict[str, object]]], clients: int
) -> tuple[list[float], list[int], float]:
    """Run ``requests`` with ``clients`` in flight; returns latencies (ms), statuses, wall (s).

    A request that failed in transport (the connection dropped) has status 0."""
    queue: asyncio.Queue[tuple[str, str, dict[str, object]]] = asyncio.Queue()
    for item in requests:
        queue.put_nowait(item)
    latencies: list[float] = []
    statuses: list[int] = []

    async def client() -> None:
        while not queue.empty():
            method, url, kwargs = queue.get_nowait()
            try:
                ms, response = await _timed(http, method, url, **kwargs)
            except httpx.TransportError:
                # Seen under saturation, a few per thousand, whatever the code under test:
                # counted as status 0 rather than ending the run.
                statuses.append(0)
                continue
            latencies.append(ms)
            statuses.append(response.status_code)

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return latencies, statuses, time.perf_counter() - started


async def _drain_starts(stack: BenchStack, timeout_s: float = 120) -> None:
    """Wait until the API's background workflow starts caught up with the admissions."""
    assert stack.pool is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not await stack.pool.fetchval("SELECT count(*) FROM jobs WHERE workflow_started_at IS NULL"):
            return
        await asyncio.sleep(0.1)


def _task(key: str) -> dict[str, object]:
    return {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": key,
        "params": {"query": {"tags": ["オリジナル"]}},
    }


async def admission(stack: BenchStack, quick: bool) -> Result:
    n = 300 if quick else 2000
    latency_n = 200 if quick else 1000
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    async with stack.http(limits=limits) as http:
        warm: list[tuple[str, str, dict[str, object]]] = [
            ("POST", "/jobs", {"json": _task(f"warm-{uuid.uuid4().hex}")}) for _ in range(20)
        ]
        await _load(http, warm, 10)
        keys = [f"bench-{uuid.uuid4().hex}" for _ in range(n)]
        _, new_status, new_wall = await _load(http, [("POST", "/jobs", {"json": _task(k)}) for k in keys], CLIENTS)
        _, replay_status, replay_wall = await _load(
            http, [("POST", "/jobs", {"json": _task(k)}) for k in keys], CLIENTS
        )
        await _drain_starts(stack)
    prefix = f"bench-open-{uuid.uuid4().hex}"
    new, lat_new_status, new_achieved = await offer_admissions(stack, ADMISSION_OFFERED_PER_S, latency_n, prefix)
    await _drain_starts(stack)
    replay, lat_replay_status, _ = await offer_admissions(stack, OFFERED_PER_S, latency_n, prefix)
    await _drain_starts(stack)
    wrk = await _wrk_capacity(stack, 5 if quick else 20)
    await _drain_starts(stack, timeout_s=300)
    new_summary, replay_summary = summarise(new), summarise(replay)
    python_rate = n / new_wall
    rate = wrk["new_per_s"] if wrk else python_rate
    return Result(
        name="admission",
        params={
            "capacity_requests": n,
            "capacity_clients": CLIENTS,
            "latency_requests": latency_n,
            "latency_offered_per_s": {"new": ADMISSION_OFFERED_PER_S, "replay": OFFERED_PER_S},
            "capacity_load_generator": "wrk (own process)" if wrk else "httpx in the bench process",
            "latency_max_in_flight": CLIENTS,
            "latency_load_generator": "bench.loadgen (own process, aiohttp)",
            "workers": 0,
        },
        metrics={
            "new_per_s": round(rate, 1),
            "new_per_s_python_client": round(python_rate, 1),
            "wrk_non_2xx": wrk["non_2xx"] if wrk else None,
            "replay_per_s": round(n / replay_wall, 1),
            "new_offered_achieved_per_s": new_achieved,
            "new_latency": new_summary,
            "replay_latency": replay_summary,
            "statuses_new": sorted(set(new_status + lat_new_status)),
            "statuses_replay": sorted(set(replay_status + lat_replay_status)),
        },
        checks=[
            Check("admissions/s (new keys, 50 clients)", round(rate, 1), ">=", 200, "/s"),
            Check(
                f"p99 new admission at {ADMISSION_OFFERED_PER_S}/s",
                new_summary.get("p99", float("nan")),
                "<=",
                50,
                "ms",
            ),
            Check(f"p99 replay at {OFFERED_PER_S}/s", replay_summary.get("p99", float("nan")), "<=", 20, "ms"),
        ],
    )


async def _fill_events(stack: BenchStack, rows: int, per_job: int) -> list[str]:
    """Insert synthetic jobs with ``per_job`` events each until the table holds ``rows``."""
    assert stack.pool is not None
    jobs = max(1, rows // per_job)
    prefix = f"fill-{uuid.uuid4().hex[:6]}"
    now = int(time.time() * 1000)
    async with stack.pool.acquire() as conn:
        await conn.execute(
            """INSERT INTO jobs (job_id, job_type, plan_id, trigger, target_ids, workflow_input, created_at,
                                 updated_at, completed_at, event_seq)
               SELECT $1 || '-' || g, 'candidate_search', 'bench', 'protocol', ARRAY['bench'], '{}'::jsonb,
                      $2, $2, $2, $3
               FROM generate_series(1, $4) g""",
            prefix,
            now,
            per_job,
            jobs,
        )
        await conn.execute(
            """INSERT INTO job_events (job_id, seq, type, at, payload)
               SELECT $1 || '-' || g, s, 'job.progress', $2::bigint + s,
                      jsonb_build_object('progress', jsonb_build_object('stage', 'searching', 'at', $2::bigint + s),
                                         'detail', jsonb_build_object('internal_kind', 'job.progressed'))
               FROM generate_series(1, $3) g, generate_series(1, $4) s""",
            prefix,
            now,
            jobs,
            per_job,
        )
        await conn.execute("ANALYZE job_events")
    return [f"{prefix}-{g}" for g in range(1, jobs + 1)]


async def reads(stack: BenchStack, quick: bool) -> Result:
    assert stack.pool is not None
    rows = 100_000 if quick else 1_000_000
    per_job = 100
    job_ids = await _fill_events(stack, rows, per_job)
    total_rows = await stack.pool.fetchval("SELECT count(*) FROM job_events")
    samples = 300 if quick else 1500
    limits = httpx.Limits(max_connections=20, max_keepalive_connections=20)
    async with stack.http(limits=limits) as http:
        probe = await http.get(f"/jobs/{job_ids[0]}/events")
        events_supported = probe.status_code == 200
        await _load(http, [("GET", f"/jobs/{random.choice(job_ids)}", {}) for _ in range(30)], 5)
        gets, get_status = await offer_reads(
            stack, OFFERED_PER_S, [f"/jobs/{random.choice(job_ids)}" for _ in range(samples)]
        )
        pages: list[float] = []
        wakeups: list[float] = []
        if events_supported:
            page_paths: list[str] = []
            for _ in range(samples):
                job = random.choice(job_ids)
                after = event_id(job, random.randint(1, per_job - 10))
                page_paths.append(f"/jobs/{job}/events?{urlencode({'after': after, 'limit': 10})}")
            pages, _ = await offer_reads(stack, OFFERED_PER_S, page_paths)
            wakeups = await _wakeups(stack, http, 20 if quick else 100)
    checks = [Check("p99 GET /jobs/{id}", summarise(gets).get("p99", float("nan")), "<=", 10, "ms")]
    metrics: dict[str, object] = {"get_job": summarise(gets), "get_statuses": sorted(set(get_status))}
    if events_supported:
        metrics["events_page"] = summarise(pages)
        metrics["long_poll_wakeup"] = summarise(wakeups)
        checks += [
            Check(
                "p99 events page (1M rows)" if not quick else "p99 events page", summarise(pages)["p99"], "<=", 15, "ms"
            ),
            Check("p99 long-poll wake-up", summarise(wakeups)["p99"], "<=", 100, "ms"),
        ]
    return Result(
        name="reads",
        params={
            "event_rows": int(total_rows),
            "events_per_job": per_job,
            "samples": samples,
            "offered_per_s": OFFERED_PER_S,
            "max_in_flight": CLIENTS,
            "load_generator": "bench.loadgen (own process, aiohttp); long-polls from the bench process",
        },
        metrics=metrics,
        checks=checks,
        skipped=None if events_supported else "the events endpoint is not available",
    )


async def _wakeups(stack: BenchStack, http: httpx.AsyncClient, n: int) -> list[float]:
    """Commit an event while a long-poll waits on an open job; time commit → response.

    A terminal job answers a long poll at once (its terminal event is its last), so the
    waits happen on a job that is still open (a synthetic row nothing else touches).
    """
    assert stack.pool is not None
    job = f"open-{uuid.uuid4().hex[:8]}"
    now = int(time.time() * 1000)
    await stack.pool.execute(
        """INSERT INTO jobs (job_id, job_type, plan_id, trigger, target_ids, workflow_input, created_at, updated_at,
                             workflow_started_at, started_at)
           VALUES ($1, 'candidate_search', 'bench', 'protocol', ARRAY['bench'], '{}'::jsonb, $2, $2, $2, $2)""",
        job,
        now,
    )
    samples: list[float] = []
    for _ in range(n):
        last = await stack.pool.fetchval("SELECT event_seq FROM jobs WHERE job_id = $1", job)
        poll = asyncio.create_task(
            http.get(f"/jobs/{job}/events", params={"after": event_id(job, last), "wait_ms": 10000})
        )
        await asyncio.sleep(0.15)
        async with stack.pool.acquire() as conn:
            async with conn.transaction():
                await append_event(conn, job, "job.progress", {"progress": {"stage": "fetching"}})
            committed = time.perf_counter()
        response = await poll
        samples.append((time.perf_counter() - committed) * 1000)
        if response.status_code != 200 or not response.json().get("events"):
            raise RuntimeError(f"long-poll returned no event: {response.status_code} {response.text[:200]}")
    return samples


async def run(services: Services, quick: bool) -> list[Result]:
    stack = BenchStack(services, "api", {})
    await stack.open()
    try:
        await stack.start_api()
        return [await admission(stack, quick), await reads(stack, quick)]
    finally:
        await stack.close()

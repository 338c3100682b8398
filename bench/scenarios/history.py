"""Scenario ``history``: what a job of a long-lived target costs the Pixiv account.

A deployment runs the same targets every hour for years; Pixiv allows about one request a
second per account, so the figure that matters is search requests per job. The replay
serves a synthetic result set of 12 000 works (100 a day over 120 days; with equal
bookmarks the popularity order is by id, the same as the date order). For each sort
(``date_desc``, ``popular_desc``) and each history (0, 1 000, 10 000 prior deliveries,
seeded straight into the ledger as the first works of the target's order,
:func:`bench.history.seed_deliveries`), a target of its own runs:

* one *first* job, which reads the history once and builds the target's frontier (what
  every job cost before the frontier: about ⌈N/30⌉ pages; ``pixiv.max_examined`` is
  raised to 20 000 here so it does that in one job);
* then K jobs one after the other (quick: 3, full: 10), each timed from admission to its
  terminal ledger row, counting the search requests the replay answered.

Target: at most 2 search pages per job (the physical limit is 1). The app-api pages a
popularity search no deeper than offset 5000, so a popularity target with 10 000
deliveries has received all 5 030 works it can reach: its jobs end ``duplicate_exhausted``
(``exhausted: true``), still within the page limit.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from fastapi import Request, Response

from bench.env import BenchStack, Services
from bench.history import seed_deliveries
from bench.result import Check, Result
from bench.stats import summarise
from curaflow.jobs.admission import Admitter
from curaflow.process.httpserver import BackgroundServer
from curaflow.sources.pixiv.replay.app import ReplayScript, create_replay_app
from curaflow.sources.pixiv.replay.data import DeepSet

TAG = "history-bench"
HISTORIES = (0, 1_000, 10_000)
SORTS = ("date_desc", "popular_desc")
PAGE_LIMIT = 2


class CountingReplay(ReplayScript):
    """The replay with a synthetic result set, counting the search requests it answers."""

    def __init__(self, deep: DeepSet) -> None:
        self.deep = deep
        self.searches = 0

    def answered(self, kind: str, request: Request, response: Response, params: dict[str, str]) -> None:
        if kind == "search":
            self.searches += 1


def _target(sort: str, prior: int) -> str:
    return f"{sort.replace('_', '-')}-{prior}"


async def _job(stack: BenchStack, admitter: Admitter, replay: CountingReplay, target: str) -> dict[str, Any]:
    """One job of ``target``: its search requests, latency (ms) and cell outcome."""
    assert stack.pool is not None
    before = replay.searches
    started = time.monotonic()
    body = {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": f"history-{uuid.uuid4().hex}",
        "params": {"target_id": target},
    }
    job_id = (await admitter.admit(body)).job_id
    await stack.wait_terminal([job_id], timeout_s=300)
    latency_ms = (time.monotonic() - started) * 1000
    row = await stack.pool.fetchrow("SELECT state, terminal_reason_code AS reason FROM cells WHERE job_id = $1", job_id)
    assert row is not None
    return {"pages": replay.searches - before, "ms": latency_ms, "state": row["state"], "reason": row["reason"]}


async def run(services: Services, quick: bool) -> Result:
    """Run the scenario (see the module doc)."""
    jobs = 3 if quick else 10
    deep = DeepSet(tag=TAG, count=12_000, per_day=100)
    replay = CountingReplay(deep)
    server = await BackgroundServer(create_replay_app(replay), log_level="critical").start()
    targets = [(sort, prior) for sort in SORTS for prior in HISTORIES]
    stack = BenchStack(
        services,
        "history",
        {
            "pixiv": {"api_url": server.url, "auth_url": server.url, "max_examined": 20_000},
            "routes": {
                _target(s, n): {"kind": "directory", "path": str(services.root / f"history-{_target(s, n)}")}
                for s, n in targets
            },
            "targets": [
                {"id": _target(s, n), "query": {"tags": [TAG], "sort": s}, "routes": [_target(s, n)], "scan_limit": 5}
                for s, n in targets
            ],
        },
    )
    await stack.open()
    metrics: dict[str, Any] = {}
    checks: list[Check] = []
    try:
        assert stack.pool is not None and stack.client is not None
        await stack.start_worker()
        admitter = Admitter(stack.settings, stack.pool, stack.client)
        for sort, prior in targets:
            name = _target(sort, prior)
            await seed_deliveries(
                stack.pool,
                target_id=name,
                routes={name: "directory"},
                work_ids=[deep.work_id(r) for r in range(prior)],
                job_id=f"history-seed-{name}-{uuid.uuid4().hex[:6]}",
            )
            first = await _job(stack, admitter, replay, name)
            runs = [await _job(stack, admitter, replay, name) for _ in range(jobs)]
            pages = [r["pages"] for r in runs]
            outcomes = sorted({f"{r['state']}/{r['reason']}" if r["reason"] else r["state"] for r in runs})
            metrics[f"{sort} @ {prior} prior"] = {
                "pages per job (max)": max(pages),
                "pages per job (mean)": round(sum(pages) / len(pages), 2),
                "job latency p50 ms": summarise([r["ms"] for r in runs])["p50"],
                "job latency max ms": round(max(r["ms"] for r in runs), 1),
                "first job pages": first["pages"],
                "first job ms": round(first["ms"], 1),
                "outcomes": ", ".join(outcomes),
            }
            checks.append(
                Check(f"search pages per job, {sort}, {prior} prior deliveries", max(pages), "<=", PAGE_LIMIT)
            )
    finally:
        await stack.close()
        await server.stop()
    return Result(
        name="history",
        params={"works": deep.count, "per_day": deep.per_day, "jobs per history": jobs, "histories": list(HISTORIES)},
        metrics=metrics,
        checks=checks,
    )

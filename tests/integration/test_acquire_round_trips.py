"""``acquire`` on the real ledger and the replay source: what one attempt costs.

The ``acquire`` activity runs here in the test process (``ActivityEnvironment``) with a
worker's real dependencies: the PostgreSQL ledger, the replay server over HTTP, the
artifact store on disk. Every statement the pool's connections send is logged.

* A work the search half binds is fetched in the same step: one step is opened per
  attempt, not two: the binding renews the lease, and the step ends with the artifact's
  write; a cancel or a deadline recorded while the search ran still stops the attempt
  before any image is downloaded, and the cell's lease is released.
* A page of the scan costs one ledger query for the works the ledger rules out.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from activities.acquire import AcquireActivity
from activities.deps import ActivityDeps, close_deps, open_deps
from activities.search import SearchActivity
from curaflow.domain.cells import CellState
from curaflow.domain.messages import AcquireInput, SearchInput, TargetQuery, TargetSpec
from curaflow.ledger.db import now_ms
from tests.conftest import StackFactory
from tests.fakes.replay import ReplayServer
from tests.support import Stack, eventually, ledger_job, run_as_job, short_id

pytestmark = pytest.mark.integration

#: The statement of :func:`curaflow.ledger.cells.start_step` that opens a step.
STEP_OPENED = "WITH j AS (SELECT job_id, started_at, completed_at,"


def _stack(make_stack: StackFactory, tmp_path: Path, replay: ReplayServer) -> Stack:
    out = f"out-{short_id()}"
    return make_stack(
        {
            "pixiv": replay.config(),
            "database": {"pool_min_size": 3, "pool_max_size": 3},
            "routes": {out: {"kind": "directory", "path": str(tmp_path / "delivered")}},
            "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [out]}],
        }
    )


async def _job(stack: Stack, deps: ActivityDeps) -> AcquireInput:
    settings = stack.settings
    target = TargetSpec(
        target_id="demo",
        query=TargetQuery(tags=["オリジナル"]),
        routes=settings.route_refs(settings.targets[0]),
    )
    job_id = await ledger_job(deps.pool, target, label="acquire")
    return AcquireInput(job_id=job_id, target=target, heartbeat_interval_ms=1000)


class Logged:
    """Every statement sent on any of the pool's connections (all of them are opened)."""

    def __init__(self, deps: ActivityDeps, size: int) -> None:
        self.deps = deps
        self.size = size
        self.queries: list[str] = []

    async def __aenter__(self) -> Logged:
        conns = [await self.deps.pool.acquire() for _ in range(self.size)]
        for conn in conns:
            conn.add_query_logger(lambda record: self.queries.append(" ".join(record.query.split())))
        for conn in conns:
            await self.deps.pool.release(conn)
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def count(self, prefix: str) -> int:
        return len([q for q in self.queries if q.startswith(prefix)])


@pytest.fixture
async def deps(make_stack: StackFactory, tmp_path: Path, replay: ReplayServer) -> AsyncIterator[tuple[Stack, Any]]:
    stack = _stack(make_stack, tmp_path, replay)
    opened = await open_deps(stack.settings, None, replay_url=replay.url)
    try:
        yield stack, opened
    finally:
        await close_deps(opened)


async def test_an_acquire_that_binds_a_work_opens_one_step(deps: tuple[Stack, ActivityDeps]) -> None:
    stack, opened = deps
    inp = await _job(stack, opened)
    async with Logged(opened, 3) as log:
        update = await run_as_job(AcquireActivity(opened).acquire, inp)
    assert update.cell.state == CellState.ARTIFACT_READY, update
    assert log.count(STEP_OPENED) == 1, [q for q in log.queries if q.startswith(STEP_OPENED)]
    # The step ends with the artifact's own write (no separate release of the lease) ...
    assert log.count("UPDATE cells SET lease_until = NULL") == 0, log.queries
    # ... and each page of the scan asks the ledger once what it rules out (live intents,
    # refusals and unavailable works together).
    duplicates = [q for q in log.queries if "FROM delivery_intents WHERE route = ANY" in q]
    assert duplicates and all("route_refusals" in q and "unavailable_works" in q for q in duplicates), duplicates
    assert [q for q in log.queries if "route_refusals" in q or "unavailable_works" in q] == duplicates
    row = await opened.pool.fetchrow(
        "SELECT stage, lease_owner, lease_until, work, artifact, candidate_report FROM cells WHERE job_id = $1",
        inp.job_id,
    )
    assert len(duplicates) <= row["candidate_report"]["pages"], (duplicates, row["candidate_report"])
    assert row["stage"] == "delivering"
    files = row["artifact"]["files"]  # every page of the bound work, on disk
    assert len(files) == len(row["work"]["pages"]) > 0 and all(Path(f["path"]).is_file() for f in files)
    assert row["lease_owner"] is None and row["lease_until"] is None  # the step ended with the attempt


async def test_the_binding_carries_the_step_on_with_a_fresh_lease(
    deps: tuple[Stack, ActivityDeps], replay: ReplayServer
) -> None:
    stack, opened = deps
    inp = (await _job(stack, opened)).model_copy(update={"heartbeat_interval_ms": 5000})  # lease: 10 s
    replay.faults.search_delay_s = 1.5  # the search takes longer than any slack below
    searched = await run_as_job(
        SearchActivity(opened).run, SearchInput.model_validate(inp.model_dump()), continues=True
    )
    after = now_ms()
    assert searched.opened is not None and searched.opened.state == CellState.SELECTED
    assert searched.opened.work is not None and searched.opened.work.pages  # the full cell, for the fetch
    row = await opened.pool.fetchrow("SELECT lease_owner, lease_until, stage FROM cells WHERE job_id = $1", inp.job_id)
    assert row["lease_owner"] == opened.identity and row["stage"] == "fetching"
    # Renewed at the binding, not left at the step's opening 1.5 s earlier.
    assert row["lease_until"] > after + 10_000 - 500, row["lease_until"] - after


@pytest.mark.parametrize("barrier", ["cancel", "deadline"])
async def test_a_barrier_recorded_while_searching_stops_before_the_fetch(
    deps: tuple[Stack, ActivityDeps], replay: ReplayServer, barrier: str
) -> None:
    stack, opened = deps
    inp = await _job(stack, opened)
    replay.faults.search_delay_s = 1.0
    column = "cancel_requested_at" if barrier == "cancel" else "deadline_at"

    async def record_meanwhile() -> None:
        await eventually(replay.searches, interval_s=0.01, what="the search sent")
        await opened.pool.execute(f"UPDATE jobs SET {column} = $2 WHERE job_id = $1", inp.job_id, now_ms())

    recorder = asyncio.create_task(record_meanwhile())
    update = await run_as_job(AcquireActivity(opened).acquire, inp)
    await recorder
    assert (update.cancel_requested, update.deadline_passed) == (barrier == "cancel", barrier == "deadline"), update
    assert not [line for line in replay.log if "/i/" in line or "img-original" in line], replay.log
    row = await opened.pool.fetchrow("SELECT state, lease_owner FROM cells WHERE job_id = $1", inp.job_id)
    assert row["lease_owner"] is None
    assert row["state"] == CellState.SELECTED  # bound: the workflow's finish releases it

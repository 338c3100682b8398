"""``search`` on the real ledger and the replay source: the statements one step sends.

The ``search`` activity runs here in the test process (``ActivityEnvironment``) with a
worker's real dependencies (the PostgreSQL ledger, the replay server over HTTP). Every
statement the pool's connections send is logged and counted by kind:

* a search step that binds on the first page of a fresh target (its scan frontier is
  read with the cell's resume point, and written with the binding);
* the next job of the same target (the frontier it read is the one the first left);
* a search that finds nothing (the cell ends ``no_candidate``);
* the search half of ``acquire``, which carries its step on into the fetch.

Heartbeats (time-driven) and the rate gate's slots (one per source request) are counted
apart: neither is the search step's own. Before the search step was split (the frontier
read with the resume point, the step's end or carry written by the binding's own
``UPDATE``, a cell that bound nothing ended in the binding's transaction) the same four
cost 18, 18, 19 and 18 statements; before the stage rule read nothing for a job of one
cell and the cell's lock took the first reservation with it, 16, 16, 15 and 16.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from activities.deps import ActivityDeps, close_deps, open_deps
from activities.search import SearchActivity
from curaflow.domain.cells import CellStage, CellState
from curaflow.domain.messages import SearchInput, TargetQuery, TargetSpec
from curaflow.ledger import cells
from tests.conftest import StackFactory
from tests.fakes.replay import ReplayServer
from tests.support import Stack, ledger_job, run_as_job, short_id

pytestmark = pytest.mark.integration

#: Statements that are not the step's own: a heartbeat's lease, a rate-gate slot.
NOT_THE_STEPS = ("UPDATE cells SET heartbeat_at", "source_gates")


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

    def steps(self) -> list[str]:
        """The step's own statements (transaction control included)."""
        return [q for q in self.queries if not any(mark in q for mark in NOT_THE_STEPS)]

    def count(self, part: str) -> int:
        return len([q for q in self.queries if part in q])


@pytest.fixture
async def deps(make_stack: StackFactory, tmp_path: Path, replay: ReplayServer) -> AsyncIterator[tuple[Stack, Any]]:
    out = f"out-{short_id()}"
    stack = make_stack(
        {
            "pixiv": replay.config(),
            "database": {"pool_min_size": 3, "pool_max_size": 3},
            "routes": {out: {"kind": "directory", "path": str(tmp_path / "delivered")}},
            "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [out]}],
        }
    )
    opened = await open_deps(stack.settings, None, replay_url=replay.url)
    try:
        yield stack, opened
    finally:
        await close_deps(opened)


def _target(stack: Stack, tags: list[str]) -> TargetSpec:
    settings = stack.settings
    return TargetSpec(
        target_id=f"rt-{short_id()}",
        query=TargetQuery(tags=tags),
        routes=settings.route_refs(settings.targets[0]),
    )


async def _search(deps: ActivityDeps, target: TargetSpec, *, continues: bool = False) -> tuple[Any, Logged]:
    job_id = await ledger_job(deps.pool, target, label="search")
    inp = SearchInput(job_id=job_id, target=target, heartbeat_interval_ms=10_000)
    async with Logged(deps, 3) as log:
        searched = await run_as_job(SearchActivity(deps).run, inp, continues=continues)
    return searched, log


#: Transaction control, then the step's statements (a page of the scan asks the ledger once).
#: A job of one cell: the step's statement holds all the stage rule needs (no stage read)
#: and writes job.started and job.progress itself.
OPEN = ["BEGIN;", "WITH j AS", "COMMIT;"]
RESUME = ["SELECT c.search_checkpoint"]  # the resume point, released works and the stored frontier
PAGE = ["SELECT DISTINCT work_id"]  # what the ledger rules out of a page
BIND = [
    "BEGIN;",
    "WITH j AS MATERIALIZED",  # the job row's lock, the cell's and the first candidate's reservation
    # the binding, with the step's end or carry, and the job's stage (one cell: it is known)
    "WITH moved AS (UPDATE cells c SET state = 'selected'",
    "WITH gone AS",  # the frontier the scan left
    "COMMIT;",
]
#: acquire's binding also records which artifact store will write the cell's folder.
CARRIED = [*BIND[:2], "WITH held AS", *BIND[3:]]
NOTHING = [
    "BEGIN;",
    "WITH j AS MATERIALIZED",  # the job row's lock and the cell's
    "UPDATE cells SET candidate_report",
    "WITH gone AS",
    "UPDATE cells SET state = $3",  # the cell ends in the same transaction
    "UPDATE delivery_intents",
    "SELECT j.last_stage",
    "COMMIT;",
]


def _shape(log: Logged) -> list[str]:
    """Each statement by its first words (as the lists above name them)."""
    names = sorted({*OPEN, *RESUME, *PAGE, *BIND, *NOTHING, *CARRIED}, key=len, reverse=True)  # the longest first
    return [next((n for n in names if q.startswith(n)), q[:60]) for q in log.steps()]


async def test_the_statements_of_a_search_step(deps: tuple[Stack, ActivityDeps]) -> None:
    stack, opened = deps
    target = _target(stack, ["オリジナル"])
    first, log = await _search(opened, target)
    assert first.update.cell.state == CellState.SELECTED, first
    assert _shape(log) == [*OPEN, *RESUME, *PAGE, *BIND], log.steps()  # 10
    assert log.count("UPDATE cells SET lease_until = NULL") == 0  # the binding ended the step ...
    lease = await opened.pool.fetchrow(
        "SELECT lease_owner, lease_until FROM cells WHERE target_id = $1", target.target_id
    )
    assert (lease["lease_owner"], lease["lease_until"]) == (None, None)  # ... in its own UPDATE

    # The next job of the target reads the frontier the first left, in the same statement.
    again, log = await _search(opened, target)
    assert again.update.cell.state == CellState.SELECTED, again
    assert _shape(log) == [*OPEN, *RESUME, *PAGE, *BIND], log.steps()  # 10

    # Nothing found: the cell ends in the transaction that stored the report.
    nothing, log = await _search(opened, _target(stack, ["zz-none"]))
    assert nothing.update.cell.state == CellState.NO_CANDIDATE, nothing
    assert _shape(log) == [*OPEN, *RESUME, *NOTHING], log.steps()  # 12

    # acquire's search half: the binding renews the lease and reads the barrier itself.
    carried, log = await _search(opened, _target(stack, ["オリジナル"]), continues=True)
    assert carried.opened is not None and carried.held, carried
    assert _shape(log) == [*OPEN, *RESUME, *PAGE, *CARRIED], log.steps()  # 10
    assert log.count("lease_until = $9") == 1


async def test_handing_a_cell_to_the_next_pass_ends_its_step_in_one_statement(
    deps: tuple[Stack, ActivityDeps],
) -> None:
    stack, opened = deps
    target = _target(stack, ["オリジナル"])
    job_id = await ledger_job(opened.pool, target, label="pass")
    async with opened.pool.acquire() as conn, conn.transaction():
        await cells.start_step(
            conn, job_id, target.target_id, stage=CellStage.SEARCHING, attempt=1, lease_ms=60_000, owner="w"
        )
    await cells.save_checkpoint(opened.pool, job_id, target.target_id, {"stage": 0, "scan": {}})
    async with Logged(opened, 3) as log, opened.pool.acquire() as conn:
        await cells.set_fallback_pass(conn, job_id, target.target_id, 1)
    assert len(log.steps()) == 1, log.steps()
    row = await opened.pool.fetchrow(
        "SELECT fallback_stage, search_checkpoint, lease_owner, lease_until FROM cells WHERE job_id = $1", job_id
    )
    assert dict(row) == {"fallback_stage": 1, "search_checkpoint": None, "lease_owner": None, "lease_until": None}

    # A cell no longer pending keeps its pass; its step ends all the same.
    async with opened.pool.acquire() as conn, conn.transaction():
        await cells.start_step(
            conn, job_id, target.target_id, stage=CellStage.SEARCHING, attempt=2, lease_ms=60_000, owner="w"
        )
        await cells.finish_cell(conn, job_id, target.target_id, CellState.NO_CANDIDATE, "no_candidate")
        await conn.execute("UPDATE cells SET lease_owner = 'w', lease_until = 1 WHERE job_id = $1", job_id)
        await cells.set_fallback_pass(conn, job_id, target.target_id, 2)
    row = await opened.pool.fetchrow("SELECT fallback_stage, lease_owner FROM cells WHERE job_id = $1", job_id)
    assert (row["fallback_stage"], row["lease_owner"]) == (1, None)

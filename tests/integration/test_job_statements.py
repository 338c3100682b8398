"""What one one-cell job costs the ledger, step by step (the steps run in this process).

The job's steps run here with a worker's real dependencies — admission, ``acquire`` on the
replay, ``deliver`` to a directory, ``finish`` — and every statement the pool's
connections send is counted by step (:class:`curaflow.ledger.statements.StatementCounter`,
what ``curaflow bench`` reports per job). A first job warms the process up (the access
token, asyncpg's type introspection); the second one is counted. Each number is the
budget of docs/performance.md ("The cost of a job, feature by feature"): a new statement
on a job's path fails here first.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from activities.acquire import AcquireActivity
from activities.deliver import DeliverActivity
from activities.deps import ActivityDeps, close_deps, open_deps
from activities.finish import FinishActivity
from curaflow.domain.cells import CellState
from curaflow.domain.messages import AcquireInput, DeliverInput, FinishInput
from curaflow.jobs.admission import Admitter
from curaflow.ledger.statements import StatementCounter
from tests.conftest import StackFactory
from tests.fakes.replay import ReplayServer
from tests.support import Stack, run_as_job, short_id

pytestmark = pytest.mark.integration

#: Statements of a one-cell job of a work of ``pages`` pages, by step (BEGIN and COMMIT
#: included): admission (the job, its cells and ``job.accepted``, one call of
#: ``curaflow_admit_job``; the start is recorded
#: separately), acquire (the step and ``job.started`` in one statement; one rate-gate slot per source
#: request — the search page and each image page; the ledger's memory of the page's
#: works; the binding that carries the step on — the job's lock, the cell's and the
#: reservation in one statement, then the binding; the artifact's copy with the move to
#: ``artifact_ready`` — the binding and the move each write the job's stage in their own
#: statement, a job of one cell), deliver (the step with the claim; the receipt — the job's
#: lock and the intent in one call of ``curaflow_record_delivered`` — that ends the
#: cell), finish (the job read — with the comparison of the run's input with the stored
#: one, 2026-12-07 —; its end and ``job.succeeded`` in one call of ``curaflow_finish_job``).
ADMISSION = 1
ACQUIRE_BEFORE_PAGES = 12
DELIVER = 9
FINISH = 5


@pytest.fixture
async def deps(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> AsyncIterator[tuple[Stack, ActivityDeps]]:
    out = f"out-{short_id()}"
    stack = make_stack(
        {
            "pixiv": replay.config(),
            "database": {"pool_min_size": 3, "pool_max_size": 3},
            "routes": {out: {"kind": "directory", "path": str(tmp_path / "delivered")}},
            "targets": [{"id": "demo", "query": {"mode": "ranking"}, "routes": [out], "scan_limit": 30}],
        }
    )
    opened = await open_deps(stack.settings, None, replay_url=replay.url)
    try:
        yield stack, opened
    finally:
        await close_deps(opened)


async def one_job(stack: Stack, deps: ActivityDeps, step: list[str]) -> int:
    """Admit and run one job through its steps; returns the pages of the work it delivered."""
    step[0] = "admission"
    task = {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": f"statements-{short_id()}",
        "params": {"target_id": "demo"},
    }
    admitted = await Admitter(stack.settings, deps.pool, None).admit(task, start=False)
    assert admitted.job_input is not None
    job_id, target = admitted.job_id, admitted.job_input.targets[0]
    step[0] = "acquire"
    acquired = await run_as_job(
        AcquireActivity(deps).acquire, AcquireInput(job_id=job_id, target=target, heartbeat_interval_ms=30_000)
    )
    assert acquired.cell.state == CellState.ARTIFACT_READY
    step[0] = "deliver"
    delivered = await run_as_job(
        DeliverActivity(deps).deliver,
        DeliverInput(job_id=job_id, target=target, route=target.routes[0], heartbeat_interval_ms=30_000),
    )
    assert delivered.cell.state == CellState.SUBMITTED
    step[0] = "finish"
    # As the workflow sends it: the run's input, compared with the stored one in the job's read.
    finish = FinishInput(job_id=job_id, job_input=admitted.job_input)
    final = await run_as_job(FinishActivity(deps).finish, finish)
    assert final.status == "succeeded"
    step[0] = "check"
    pages = await deps.pool.fetchval(
        "SELECT jsonb_array_length(artifact->'files') FROM cells WHERE job_id = $1", job_id
    )
    return int(pages)


async def test_a_one_cell_job_costs_its_budget_of_statements(deps: tuple[Stack, ActivityDeps]) -> None:
    stack, opened = deps
    step = ["warm-up"]
    counter = StatementCounter(lambda: step[0])
    conns = [await opened.pool.acquire() for _ in range(3)]  # every connection of the pool
    for conn in conns:
        counter.attach(conn)
    for conn in conns:
        await opened.pool.release(conn)

    await one_job(stack, opened, step)
    counter.statements.clear()
    counter.transactions.clear()
    pages = await one_job(stack, opened, step)
    del counter.statements["check"]

    assert dict(counter.statements) == {
        "admission": ADMISSION,
        "acquire": ACQUIRE_BEFORE_PAGES + 1 + pages,  # a slot for the search page and one per image page
        "deliver": DELIVER,
        "finish": FINISH,
    }
    # Transactions: one per BEGIN … COMMIT and one per statement outside any.
    assert counter.transactions["admission"] == 1 and counter.transactions["finish"] == 1
    assert counter.transactions["deliver"] == 2

"""A ``deliver`` scheduled for a cell whose ledger holds no fetched work is the operator's hand.

curaflow's ``acquire`` and ``fetch`` return a cell ``artifact_ready`` only from the ledger's
own move to it (:func:`curaflow.ledger.cells.artifact_ready`), in the transaction that
stores the artifact. A workflow that schedules ``deliver`` for a cell the ledger holds
unfetched was told so by a result no worker of curaflow returned: an operator's
``temporal activity complete`` with a result shaped like a step's. Until 2026-12-06 the
attempt failed ``internal_error`` ("read the worker's log", owner curaflow); now it fails
``step_ended_by_hand`` (owner operator), not retried, and claims no intent.

The ``deliver`` activity in the test process with a worker's real dependencies on the
session's PostgreSQL (a directory route on disk).
"""

from __future__ import annotations

import asyncpg
import pytest
from temporalio.exceptions import ApplicationError

from activities.deliver import DeliverActivity
from activities.deps import ActivityDeps
from curaflow.domain.messages import DeliverInput, RouteRef, TargetSpec
from curaflow.domain.models import CandidateReport, Work
from curaflow.domain.verdicts import FinishCause
from curaflow.ledger import cells
from curaflow.ledger.finish import finish_job
from tests.deps_support import deps
from tests.support import Stack, ledger_job, run_as_job, short_id

pytestmark = pytest.mark.integration

__all__ = ["deps"]  # the module's fixture (tests.deps_support)


async def _intents(pool: asyncpg.Pool, job_id: str) -> list[tuple[str, int]]:
    rows = await pool.fetch("SELECT status, attempts FROM delivery_intents WHERE job_id = $1", job_id)
    return [(r["status"], r["attempts"]) for r in rows]


@pytest.mark.parametrize("ledger", ["pending", "bound"])
async def test_a_deliver_of_a_cell_the_ledger_holds_unfetched_is_the_operators_hand(
    deps: tuple[Stack, ActivityDeps], ledger: str
) -> None:
    stack, opened = deps
    [route] = stack.settings.route_refs(stack.settings.targets[0])
    target = TargetSpec(target_id="demo", routes=[RouteRef(name=route.name, kind=route.kind)])
    job_id = await ledger_job(opened.pool, target, label="unfetched")
    if ledger == "bound":  # the step's own attempt bound a work, then was ended from outside
        async with opened.pool.acquire() as conn, conn.transaction():
            await cells.bind_work(conn, job_id, target, [Work(work_id=f"w{short_id()}")], CandidateReport())
    before = await _intents(opened.pool, job_id)
    inp = DeliverInput(job_id=job_id, target=target, route=target.routes[0], heartbeat_interval_ms=1000)

    with pytest.raises(ApplicationError) as failed:
        await run_as_job(DeliverActivity(opened).deliver, inp)

    err = failed.value
    assert (err.type, err.non_retryable) == ("step_ended_by_hand", True), err
    assert "temporal activity complete" in err.message, err.message
    assert await _intents(opened.pool, job_id) == before  # nothing claimed: nothing reads as possibly sent
    lease = await opened.pool.fetchval("SELECT lease_owner FROM cells WHERE job_id = $1", job_id)
    assert lease is None  # the attempt's lease ended with it


@pytest.mark.parametrize("ledger", ["pruned", "fetched_elsewhere"])
async def test_a_deliver_of_a_job_that_already_ended_reports_its_cell_and_blames_no_one(
    deps: tuple[Stack, ActivityDeps], ledger: str
) -> None:
    """A deliver a run schedules after its job ended — a ``temporal workflow reset`` of an
    ended job to between its acquire's completion and its deliver's, a reset run re-sending
    its steps — meets the cell terminal. Retention's pass has since removed the artifact's
    description (``pruned``), or the artifact was fetched on another host and the job's end
    removed the ledger's copy (``fetched_elsewhere``). No operator completed a step by hand
    and nothing is to be sent: the step reports the ledger's cell as it is (nothing sent,
    nothing claimed, no failure)."""
    stack, opened = deps
    [route] = stack.settings.route_refs(stack.settings.targets[0])
    target = TargetSpec(target_id="demo", routes=[RouteRef(name=route.name, kind=route.kind)])
    job_id = await ledger_job(opened.pool, target, label="ended")
    work = Work(work_id=f"w{short_id()}")
    files = (
        [] if ledger == "pruned" else [{"path": f"/nonexistent-{short_id()}/1.png", "bytes": 3, "mime": "image/png"}]
    )
    async with opened.pool.acquire() as conn, conn.transaction():
        await cells.bind_work(conn, job_id, target, [work], CandidateReport())
        await cells.artifact_ready(conn, job_id, "demo", work.work_id, {"work_id": work.work_id, "files": files})
    async with opened.pool.acquire() as conn:
        await finish_job(conn, job_id, cause=FinishCause.CANCELLED)
    if ledger == "pruned":  # retention's write to the cells of a job it prunes (curaflow.ledger.retention)
        await opened.pool.execute("UPDATE cells SET artifact = NULL WHERE job_id = $1", job_id)
    ended = await opened.pool.fetchrow(
        "SELECT state, terminal_reason_code AS reason FROM cells WHERE job_id = $1", job_id
    )
    before = await _intents(opened.pool, job_id)
    inp = DeliverInput(job_id=job_id, target=target, route=target.routes[0], heartbeat_interval_ms=1000)

    update = await run_as_job(DeliverActivity(opened).deliver, inp)

    assert (update.cell.state, update.cell.reason) == (ended["state"], ended["reason"]), update
    assert await _intents(opened.pool, job_id) == before  # nothing claimed, nothing sent

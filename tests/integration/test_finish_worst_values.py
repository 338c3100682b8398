"""The end of a job is unbreakable by data (DESIGN.md "Safe defaults at the edges: the
ledger under an activity"): each value that reaches :func:`curaflow.ledger.finish.finish_job`
from outside — a source's work (its numbers, its text), an operator's names, a reason's
sentence — at its worst, on real PostgreSQL; the job ends, its outcome recorded once."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from curaflow.domain.cells import CellStage, CellState
from curaflow.domain.holds import LATEST_HOLD_MS, HoldCaps
from curaflow.domain.messages import RouteRef, TargetSpec
from curaflow.domain.models import CandidateReport, Work, WorkPage
from curaflow.domain.verdicts import FinishCause
from curaflow.ledger import cells
from curaflow.ledger.finish import finish_job
from curaflow.protocol.models import TERMINAL_EVENT_TYPES
from curaflow.protocol.projection import project_job
from tests.support import ledger_job

pytestmark = pytest.mark.integration


async def _bound_on_account(pool: asyncpg.Pool, work: Work) -> tuple[str, str]:
    """A one-cell job past its deadline whose ``work`` is bound on an account of its own,
    never fetched; returns the job and the account."""
    account = f"acc-{uuid.uuid4().hex[:6]}"
    gate = f"worst-source-{account}"
    target = TargetSpec(target_id="demo", account=account, routes=[RouteRef(name="out", kind="directory")])
    job_id = await ledger_job(pool, target, label="worst", deadline_in_ms=-1000, source_task_queues={account: gate})
    await pool.execute("INSERT INTO source_gates (gate) VALUES ($1)", gate)  # other jobs asked the account
    async with pool.acquire() as conn, conn.transaction():
        await cells.start_step(conn, job_id, "demo", stage=CellStage.SEARCHING, attempt=1, lease_ms=1, owner="acquire")
        await cells.bind_work(conn, job_id, target, [work], CandidateReport())
        await conn.execute("UPDATE cells SET lease_until = NULL WHERE job_id = $1", job_id)
    return job_id, account


@pytest.mark.parametrize(
    "work",
    [
        # A source's page count: its account's spacing ended past any date, and the finish's
        # sentence raised OverflowError on every attempt (2026-12-06).
        Work(work_id="w1", page_count=10**30),
        Work(work_id="w1", page_count=2**63),
        Work(work_id="w1", pages=[WorkPage(index=0, url="https://i.example.org/p.png", width=10**40)]),
        Work(work_id="w1", page_count=-(10**30), total_bookmarks=10**40, width=-(2**70)),
        Work(work_id="w1", title="t" * 200_000, tags=["x" * 10_000] * 20, author="a" * 50_000),
    ],
    ids=["page-count-1e30", "page-count-2^63", "page-width-1e40", "negative-and-huge", "long-text"],
)
async def test_a_job_ends_whatever_its_sources_work_holds(ledger_pool: asyncpg.Pool, work: Work) -> None:
    work = work.model_copy(update={"work_id": f"w{uuid.uuid4().hex[:8]}"})
    job_id, account = await _bound_on_account(ledger_pool, work)
    caps = HoldCaps(account_spacing_ms={account: 1000}, account_concurrency={account: 1})
    async with ledger_pool.acquire() as conn:
        finished = await finish_job(conn, job_id, cause=FinishCause.DEADLINE, caps=caps)
    assert finished is not None and finished.outcome is not None
    assert finished.record.completed_at is not None
    cell = finished.record.cells[0]
    assert cell.state == CellState.FAILED and cell.reason is not None
    assert len(cell.reason_message or "") <= 400
    if work.page_count > 1:  # the account's spacing of its requests held it: named, at a date
        assert cell.held_by is not None and cell.held_by.kind == "spacing", cell.held_by
        assert cell.held_by.until == LATEST_HOLD_MS and "9999-12-31" in (cell.reason_message or "")
    project_job(finished.record)
    stored = await ledger_pool.fetchval("SELECT count(*) FROM outcomes WHERE job_id = $1", job_id)
    ended = await ledger_pool.fetchval(
        "SELECT count(*) FROM job_events WHERE job_id = $1 AND type = ANY($2::text[])",
        job_id,
        list(TERMINAL_EVENT_TYPES.values()),
    )
    assert (stored, ended) == (1, 1)

"""The job-level stage has one rule, in Python: what the ledger records is what the API shows.

``jobs.last_stage`` and each ``job.progress`` event carry the stage
:func:`curaflow.domain.projection.job_stage` gives the job's cells — also for a stage
this version does not know (a cell written by a newer worker during a rolling upgrade),
where a second rule in SQL used to disagree.
"""

from __future__ import annotations

import asyncpg
import pytest

from curaflow.domain.messages import JobInput, RouteRef, TargetSpec
from curaflow.domain.projection import job_stage
from curaflow.ledger import cells
from curaflow.ledger.db import now_ms
from curaflow.ledger.jobs import NewJob, insert_job
from curaflow.ledger.records import load_job
from tests.support import short_id

pytestmark = pytest.mark.integration


async def two_cell_job(pool: asyncpg.Pool) -> str:
    now = now_ms()
    route = RouteRef(name="a", kind="directory")
    inp = JobInput(
        job_id=f"demo@manual-stage-{short_id()}",
        plan_id="demo",
        created_at_ms=now,
        deadline_at_ms=now + 3_600_000,
        targets=[TargetSpec(target_id="t1", routes=[route]), TargetSpec(target_id="t2", routes=[route])],
    )
    async with pool.acquire() as conn:
        await insert_job(conn, NewJob(job_input=inp))
    return inp.job_id


@pytest.mark.parametrize(
    "stages",
    [
        ("searching", "fetching"),
        ("delivering", "fetching"),
        ("rendering", "rendering"),  # a stage this version does not know
        ("rendering", "delivering"),
        ("fetching", "rendering"),
    ],
)
async def test_the_ledger_records_the_stage_the_projection_shows(
    ledger_pool: asyncpg.Pool, stages: tuple[str, str]
) -> None:
    job_id = await two_cell_job(ledger_pool)
    async with ledger_pool.acquire() as conn, conn.transaction():
        for target_id, stage in zip(("t1", "t2"), stages, strict=True):
            await conn.execute(
                "UPDATE cells SET stage = $3 WHERE job_id = $1 AND target_id = $2", job_id, target_id, stage
            )
        await cells.lock_job(conn, job_id)
        await cells.sync_job_stage(conn, job_id)
    async with ledger_pool.acquire() as conn:
        record = await load_job(conn, job_id)
        last_stage = await conn.fetchval("SELECT last_stage FROM jobs WHERE job_id = $1", job_id)
        progress = await conn.fetch(
            "SELECT payload FROM job_events WHERE job_id = $1 AND type = 'job.progress' ORDER BY seq", job_id
        )
    assert record is not None
    shown = job_stage(record.cells)
    assert last_stage == shown
    assert [p["payload"]["progress"]["stage"] for p in progress] == [shown]

    # A sync with nothing changed appends nothing.
    async with ledger_pool.acquire() as conn, conn.transaction():
        await cells.lock_job(conn, job_id)
        await cells.sync_job_stage(conn, job_id)
    assert (
        await ledger_pool.fetchval(
            "SELECT count(*) FROM job_events WHERE job_id = $1 AND type = 'job.progress'", job_id
        )
        == 1
    )

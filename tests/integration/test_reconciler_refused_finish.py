"""A finish the ledger refuses for one job alone leaves that job for the tick; the reconciler
goes on with the others.

The reconciler ends jobs no workflow can end (past their deadline, their run closed, a
cancel no run serves). Each is one ``finish_job`` transaction. The ledger may refuse one
job's — not an outage (the same call later meets the same answer), not a value the degraded
finish takes (class 22 / 54): a constraint its rows break (23xxx), an internal error of
PostgreSQL's reading them (XX000, XX001 a damaged page), a ``RAISE`` of the ledger's own
function (P0001). Until 2026-12-07 that error failed the whole tick: the same job came first
on every tick (``ORDER BY created_at``), no other job past its deadline ended, and after
``supervision.fatal_after_ms`` the process — the API's and every worker's — exited 3, to
meet it again after its restart. The same rule as Temporal's refusal of one job's request
(``ticks._asked``, ``reconciler.temporal_refused``): the job is left as it is, logged, asked
again next tick. An outage still fails the tick (the supervised loop retries it).

Produced on the real PostgreSQL: a trigger refuses the refused job's outcome with the code.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from structlog.testing import capture_logs

from curaflow.domain.messages import RouteRef, TargetSpec
from curaflow.ledger import reconciler
from tests.support import ledger_job

pytestmark = pytest.mark.integration


@pytest.fixture
async def refusing(ledger_pool: asyncpg.Pool) -> AsyncIterator[str]:
    """The name of a trigger function refusing an outcome with the SQLSTATE its trigger names
    (dropped with its triggers when the test ends)."""
    name = f"refuse_outcome_{uuid.uuid4().hex[:8]}"
    await ledger_pool.execute(
        f"""CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION 'refused for this job' USING ERRCODE = TG_ARGV[0]; END $$"""
    )
    try:
        yield name
    finally:
        await ledger_pool.execute(f"DROP FUNCTION {name}() CASCADE")


async def _past_deadline(pool: asyncpg.Pool, label: str) -> str:
    target = TargetSpec(target_id="demo", routes=[RouteRef(name=f"r-{uuid.uuid4().hex[:6]}", kind="directory")])
    return await ledger_job(pool, target, label=label, deadline_in_ms=-60_000)


async def _refuse(pool: asyncpg.Pool, function: str, job_id: str, code: str) -> None:
    await pool.execute(
        f"""CREATE TRIGGER {function}_{code.lower()} BEFORE INSERT ON outcomes FOR EACH ROW
            WHEN (NEW.job_id = '{job_id}') EXECUTE FUNCTION {function}('{code}')"""
    )


async def _open(pool: asyncpg.Pool, job_id: str) -> bool:
    return bool(await pool.fetchval("SELECT completed_at IS NULL FROM jobs WHERE job_id = $1", job_id))


@pytest.mark.parametrize("code", ["23514", "XX000", "XX001", "P0001"])
async def test_a_finish_refused_for_one_job_leaves_it_and_ends_the_others(
    ledger_pool: asyncpg.Pool, refusing: str, code: str
) -> None:
    refused = await _past_deadline(ledger_pool, "refused")  # the older: first in every tick
    other = await _past_deadline(ledger_pool, "other")
    await _refuse(ledger_pool, refusing, refused, code)

    with capture_logs() as logs:
        report = await reconciler.tick(ledger_pool, None)

    assert other in report.deadline and not await _open(ledger_pool, other)
    assert refused not in report.deadline and await _open(ledger_pool, refused)
    said = [e for e in logs if e["event"] == "reconciler.finish_refused"]
    assert [(e["job_id"], e["sqlstate"]) for e in said] == [(refused, code)], said

    await ledger_pool.execute(f"DROP TRIGGER {refusing}_{code.lower()} ON outcomes")
    report = await reconciler.tick(ledger_pool, None)  # asked again next tick: answered now
    assert refused in report.deadline and not await _open(ledger_pool, refused)


async def test_an_outage_at_one_jobs_finish_still_fails_the_tick(ledger_pool: asyncpg.Pool, refusing: str) -> None:
    # A full disk (53100) is the ledger's, not the job's: the tick fails, the loop retries it.
    refused = await _past_deadline(ledger_pool, "outage")
    await _refuse(ledger_pool, refusing, refused, "53100")

    with pytest.raises(asyncpg.exceptions.DiskFullError):
        await reconciler.tick(ledger_pool, None)
    assert await _open(ledger_pool, refused)

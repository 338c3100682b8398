"""The ledger stores no column that can lie about a job."""

from __future__ import annotations

import asyncpg
import pytest

pytestmark = [pytest.mark.integration]


async def test_jobs_hold_no_status_column_beside_the_one_derived_from_cells(ledger_pool: asyncpg.Pool) -> None:
    """A job's status is derived from its cells (``curaflow.domain.projection``); the
    ``jobs.status`` column read ``pending`` for every job whatever it did."""
    columns = {
        r["column_name"]
        for r in await ledger_pool.fetch(
            """SELECT column_name FROM information_schema.columns
               WHERE table_name = 'jobs' AND table_schema = current_schema()"""
        )
    }
    assert {"job_id", "business_status", "completed_at", "last_stage"} <= columns
    assert "status" not in columns

"""Concurrent jobs of one target never share a work, and none gives up while works remain."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.conftest import StackFactory
from tests.support import short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def test_concurrent_jobs_get_distinct_works_and_keep_paging_when_outbid(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    out = f"out-{short_id()}"
    # Each scan keeps only 2 candidates, so jobs 3..6 find them bound by the others and
    # must keep paging instead of ending no_candidate.
    stack = make_stack(
        {
            "pixiv": {"replay_max_concurrency": 6},
            "routes": {out: {"kind": "directory", "path": str(tmp_path / "out")}},
            "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [out], "scan_limit": 2}],
        }
    )
    await stack.start_worker()
    job_ids = await asyncio.gather(*(stack.admit(stack.task(query={"tags": ["オリジナル"]})) for _ in range(6)))

    records = [await stack.wait_terminal(job_id, 60) for job_id in job_ids]

    assert [r.cells[0].state for r in records] == ["submitted"] * 6, [
        (r.cells[0].reason, r.cells[0].candidate_report) for r in records
    ]
    works = [r.cells[0].work_id for r in records]
    assert len(set(works)) == 6
    pool = await stack.ledger()
    live = await pool.fetchval("SELECT count(*) FROM delivery_intents WHERE route = $1 AND status = 'delivered'", out)
    assert live == 6

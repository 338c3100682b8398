"""A cancel's reason is recorded whatever text it carries (real PostgreSQL).

A job started before core v2 (:mod:`workflows.job_v1`) records the reason its ``cancel``
signal carried — text from any Temporal client (``temporal workflow signal --name cancel
--input '"\\u0000"'``). PostgreSQL's ``text`` holds no NUL: the ``request_cancel``
activity's write failed, was retried for as long as the execution lived, and the cancel
never landed (the job ran on to its own end). DESIGN.md "Foreign input".
"""

from __future__ import annotations

import asyncpg
import pytest

from curaflow.domain.messages import TargetSpec
from curaflow.ledger.jobs import request_cancel
from tests.support import ledger_job

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("reason", ["stop\x00now", "\x00"], ids=["inner-nul", "only-nul"])
async def test_a_cancel_whose_reason_holds_a_nul_is_recorded(ledger_pool: asyncpg.Pool, reason: str) -> None:
    job_id = await ledger_job(ledger_pool, TargetSpec(target_id="demo"), label="reason")
    async with ledger_pool.acquire() as conn:
        assert await request_cancel(conn, job_id, reason)
    row = await ledger_pool.fetchrow("SELECT cancel_requested_at, cancel_reason FROM jobs WHERE job_id = $1", job_id)
    assert row["cancel_requested_at"] is not None
    assert row["cancel_reason"] == reason.replace("\x00", "\ufffd")

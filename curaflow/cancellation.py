"""Consumer cancel of a job: the HTTP entry into the one cancellation path.

``POST /jobs/{id}/cancel`` (and ``curaflow cancel``) call :func:`cancel_job`:

1. an unknown job → 404 ``invalid_params`` (``detail.reason: unknown_job``);
2. a terminal job → no-op: the job is returned unchanged (a repeated cancel returns a
   body identical to the first);
3. otherwise the request is recorded in the ledger first (``cancel_requested_at``,
   committed before anything else, so a delivery not yet sent is never sent
   afterwards), then Temporal is asked to cancel the workflow with the reason
   ``cancelled_by_consumer`` — the same path the UI's cancel button and the ``cancel``
   signal take (DESIGN.md decision 7);
4. it waits (up to ``api.cancel_wait_ms``) for the workflow to stop its activities and
   finish the job; if no activity holds a lease (e.g. no worker is running) the ledger
   is converged directly, which is safe because every effect checks the recorded
   request under the job row lock;
5. it returns the job as the ledger then holds it: ``cancelled`` (or ``succeeded``
   when a delivery landed before the cancel reached it), or still ``running`` with
   ``progress.stage = "cancelling"`` when an in-flight activity has not yet stopped.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg
from temporalio.client import Client
from temporalio.service import RPCError

from curaflow.ledger.db import now_ms
from curaflow.ledger.finish import finish_job
from curaflow.ledger.jobs import request_cancel
from curaflow.ledger.records import load_job
from curaflow.logs import get_logger
from curaflow.protocol.errors import invalid_params
from curaflow.protocol.projection import project_job

CANCEL_REASON = "cancelled_by_consumer"
log = get_logger("curaflow.cancel")


async def _live_lease(pool: asyncpg.Pool, job_id: str) -> bool:
    return bool(
        await pool.fetchval(
            "SELECT EXISTS (SELECT 1 FROM cells WHERE job_id = $1 AND lease_until > $2)", job_id, now_ms()
        )
    )


async def _completed(pool: asyncpg.Pool, job_id: str) -> bool:
    return await pool.fetchval("SELECT completed_at IS NOT NULL FROM jobs WHERE job_id = $1", job_id) is True


async def cancel_job(pool: asyncpg.Pool, client: Client | None, job_id: str, *, wait_s: float = 10.0) -> dict[str, Any]:
    """Cancel ``job_id`` on behalf of its consumer (see the module doc).

    Args:
        pool: ledger pool.
        client: Temporal client (None: only the ledger is converged).
        wait_s: how long to wait for in-flight activities to stop, in seconds.

    Returns:
        The protocol ``Job`` dict after the cancel.

    Raises:
        ProtocolError: 404 ``invalid_params`` for an unknown job.
    """
    async with pool.acquire() as conn:
        record = await load_job(conn, job_id)
        if record is None:
            raise invalid_params("unknown job", http_status=404, reason="unknown_job", job_id=job_id)
        if record.completed_at is not None:
            return project_job(record, now_ms())
        await request_cancel(conn, job_id, CANCEL_REASON)
    if client is not None:
        try:
            await client.get_workflow_handle(job_id).cancel(reason=CANCEL_REASON)
        except RPCError as err:
            log.info("cancel.workflow_not_cancellable", job_id=job_id, error=err.message)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if await _completed(pool, job_id):
            break
        if not await _live_lease(pool, job_id) and (client is None or time.monotonic() > deadline - wait_s + 1.0):
            # Nothing is in flight (no worker, or the workflow has not reached its
            # activities): converge in the ledger; the workflow will adopt it.
            async with pool.acquire() as conn:
                await finish_job(conn, job_id, cause="cancelled")
            break
        await asyncio.sleep(0.05)
    async with pool.acquire() as conn:
        record = await load_job(conn, job_id)
    assert record is not None
    return project_job(record, now_ms())

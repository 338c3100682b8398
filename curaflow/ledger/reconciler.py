"""The reconciler: nothing admitted is ever lost, no job stays open forever.

It runs in the API process and in every worker (one tick at a time across processes,
under a PostgreSQL advisory lock), so it works even when no worker of any kind is up.
Each tick, over open jobs (``completed_at IS NULL``), using each job's own budgets
(stored with its workflow input):

1. **unstarted workflow**: admitted in the ledger but ``workflow_started_at`` is null
   for more than a few seconds (a crash between insert and start) → start the workflow;
2. **queued_too_long**: never started (``started_at`` null), older than the queued
   budget, no live lease → every open cell ``failed / queued_too_long``;
3. **stalled_no_heartbeat**: started, last progress (``heartbeat_at`` of its cells, else
   ``started_at``) older than the stall budget, no live lease → open cells
   ``failed / stalled_no_heartbeat``;
4. **deadline**: past ``deadline_at`` (plus a 10 s grace) with no live lease → open cells
   ``failed / execution_timeout``; checked first, so a job both overdue and queued or
   stalled ends for its deadline.

Rules 2–4 finish the job in the ledger (outcome record, terminal event). When a worker
later runs the workflow it finds the cells terminal and adopts that verdict; Temporal's
execution timeout closes runs no worker ever picks up.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import asyncpg

from curaflow import metrics
from curaflow.domain.projection import job_status
from curaflow.domain.reasons import TerminalReason
from curaflow.ledger.db import now_ms
from curaflow.ledger.finish import finish_job
from curaflow.logs import get_logger

LOCK_KEY = 0x63757261726563  # "curarec"
START_GRACE_MS = 5_000
#: After its deadline, a job no live attempt holds is the reconciler's: the workflow's own
#: timer normally ends it within moments, so this only acts when no worker runs it.
DEADLINE_GRACE_MS = 10_000
log = get_logger("curaflow.reconciler")

StartHook = Callable[[str], Awaitable[None]]


@dataclass
class TickReport:
    """What one tick did (job ids per rule)."""

    started: list[str] = field(default_factory=list)
    queued_too_long: list[str] = field(default_factory=list)
    stalled: list[str] = field(default_factory=list)
    deadline: list[str] = field(default_factory=list)


_BUDGET = "(workflow_input->'budgets'->>'{name}')::bigint"


async def tick(pool: asyncpg.Pool, start: StartHook | None, *, limit: int = 100) -> TickReport:
    """Run one reconciliation pass; returns an empty report if another process holds the lock.

    Args:
        pool: ledger pool.
        start: starts a job's workflow (None: rule 1 is skipped, e.g. without Temporal).
        limit: most jobs per rule.
    """
    report = TickReport()
    async with pool.acquire() as conn:
        if not await conn.fetchval("SELECT pg_try_advisory_lock($1)", LOCK_KEY):
            return report
        try:
            now = now_ms()
            live = "NOT EXISTS (SELECT 1 FROM cells c WHERE c.job_id = j.job_id AND c.lease_until > $1::bigint)"
            if start is not None:
                rows = await conn.fetch(
                    f"""SELECT job_id FROM jobs j WHERE completed_at IS NULL AND workflow_started_at IS NULL
                        AND created_at <= $1::bigint - {START_GRACE_MS} ORDER BY created_at LIMIT {limit}""",
                    now,
                )
                for r in rows:
                    try:
                        await start(r["job_id"])
                        report.started.append(r["job_id"])
                        metrics.record_reconciler_start()
                    except Exception as err:  # noqa: BLE001 - keep converging the others
                        log.warning("reconciler.start_failed", job_id=r["job_id"], error=type(err).__name__)
            queued = await conn.fetch(
                f"""SELECT job_id FROM jobs j WHERE completed_at IS NULL AND started_at IS NULL
                    AND created_at <= $1::bigint - {_BUDGET.format(name="queued_timeout_ms")} AND {live}
                    ORDER BY created_at LIMIT {limit}""",
                now,
            )
            stalled = await conn.fetch(
                f"""SELECT job_id FROM jobs j WHERE completed_at IS NULL AND started_at IS NOT NULL
                    AND COALESCE((SELECT max(heartbeat_at) FROM cells c WHERE c.job_id = j.job_id), started_at)
                        <= $1::bigint - {_BUDGET.format(name="stall_timeout_ms")}
                    AND {live} ORDER BY created_at LIMIT {limit}""",
                now,
            )
            overdue = await conn.fetch(
                f"""SELECT job_id FROM jobs j WHERE completed_at IS NULL AND deadline_at IS NOT NULL
                    AND deadline_at <= $1::bigint - {DEADLINE_GRACE_MS} AND {live}
                    ORDER BY created_at LIMIT {limit}""",
                now,
            )
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", LOCK_KEY)
        # A job past its deadline is converged as such first: when a job is both overdue
        # and queued or stalled, its deadline is what ended it.
        seen: set[str] = set()
        for rows, reason, bucket in (
            (overdue, TerminalReason.EXECUTION_TIMEOUT, report.deadline),
            (queued, TerminalReason.QUEUED_TOO_LONG, report.queued_too_long),
            (stalled, TerminalReason.STALLED_NO_HEARTBEAT, report.stalled),
        ):
            for r in rows:
                job_id = r["job_id"]
                if job_id in seen:
                    continue
                seen.add(job_id)
                cells = await conn.fetch(
                    "SELECT target_id FROM cells WHERE job_id = $1 AND state NOT IN "
                    "('submitted','no_candidate','duplicate','failed')",
                    job_id,
                )
                finished = await finish_job(
                    conn, job_id, verdicts={c["target_id"]: reason.value for c in cells}, cause="reconciled"
                )
                if finished is not None and finished.outcome is not None:
                    bucket.append(job_id)
                    log.warning(
                        "reconciler.converged",
                        job_id=job_id,
                        reason_code=reason.value,
                        cells_failed=len(cells),
                    )
                    fields = {k: v for k, v in finished.outcome.items() if k != "event"}
                    log.info("schedule.outcome", **fields)
                    rec = finished.record
                    metrics.record_reconciled(reason.value)
                    metrics.record_terminal(
                        status=str(job_status(rec.cells)),
                        business_status=rec.business_status,
                        trigger=rec.trigger,
                        created_at_ms=rec.created_at,
                        completed_at_ms=rec.completed_at,
                        cells=rec.cells,
                    )
    return report


async def run_forever(pool: asyncpg.Pool, start: StartHook | None, interval_s: float, stop: asyncio.Event) -> None:
    """Tick every ``interval_s`` seconds until ``stop`` is set (errors are logged, not fatal)."""
    while not stop.is_set():
        try:
            await tick(pool, start)
        except (OSError, asyncpg.PostgresError) as err:
            log.warning("reconciler.tick_failed", error=type(err).__name__)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval_s)

"""Finishing a job: converge open cells, write the outcome record and the terminal event.

Used by the ``finish`` activity, the HTTP cancel when no activity holds a lease, and the
reconciler — the one place a job becomes terminal in the ledger. Everything happens in
one transaction under the job row lock; the outcome record and the terminal event are
written exactly once (guarded by ``jobs.completed_at``), so a repeated finish writes
nothing and returns the same job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import asyncpg

from curaflow.domain.cells import CellState
from curaflow.domain.models import JobRecord
from curaflow.domain.outcome import build_outcome_record, business_status, is_alertable, ledger_status
from curaflow.domain.projection import JobStatus, job_status
from curaflow.domain.reasons import TerminalReason
from curaflow.ledger.cells import finish_cell, lock_job
from curaflow.ledger.db import now_ms
from curaflow.ledger.events import TERMINAL_EVENT_TYPES, append_event
from curaflow.ledger.records import load_job
from curaflow.protocol.projection import project_job

#: Reasons a cell gets when its work was stopped rather than failed; under a consumer
#: cancel they are the cancel.
STOPPED_BY_CANCEL = frozenset(
    {
        TerminalReason.QUEUED_TOO_LONG,
        TerminalReason.STALLED_NO_HEARTBEAT,
        TerminalReason.EXECUTION_TIMEOUT,
        TerminalReason.DELIVERY_ABANDONED,
        TerminalReason.INTERNAL_ERROR,
    }
)

#: default reason of a non-terminal cell when a job finishes for ``cause``.
CAUSE_REASONS = {
    "cancelled": TerminalReason.CANCELLED_BY_CONSUMER,
    "deadline": TerminalReason.EXECUTION_TIMEOUT,
}


@dataclass
class FinishedJob:
    """Result of :func:`finish_job`.

    Attributes:
        record: the job after the call.
        outcome: the outcome record if this call wrote it (None on a repeat).
    """

    record: JobRecord
    outcome: dict[str, Any] | None


def default_reason(state: str, cause: str) -> str:
    """Reason for an open cell with no verdict (reference §5.4 "the rollup")."""
    if cause in CAUSE_REASONS:
        return CAUSE_REASONS[cause]
    if state in (CellState.ARTIFACT_READY, CellState.DELIVERY_PENDING):
        return TerminalReason.DELIVERY_ABANDONED
    return TerminalReason.INTERNAL_ERROR


async def finish_job(
    conn: asyncpg.Connection,
    job_id: str,
    *,
    verdicts: dict[str, str] | None = None,
    cause: str = "completed",
) -> FinishedJob | None:
    """Make ``job_id`` terminal (own transaction).

    Args:
        verdicts: target id → reason for cells the caller knows ended without a
            transition; other open cells get :func:`default_reason`.
        cause: ``completed``, ``cancelled``, ``deadline`` or ``reconciled``.

    Returns:
        The finished job, or None when the job is unknown.
    """
    verdicts = verdicts or {}
    async with conn.transaction():
        job = await lock_job(conn, job_id)
        if job is None:
            return None
        if cause in ("completed", "reconciled") and job["cancel_requested_at"] is not None:
            # The consumer cancelled (recorded by POST /jobs/{id}/cancel) and the cells
            # still open stopped because of it, whatever path the workflow took.
            cause = "cancelled"
        open_cells = await conn.fetch(
            """SELECT target_id, state, stage FROM cells WHERE job_id = $1
               AND state NOT IN ('submitted', 'no_candidate', 'duplicate', 'failed') ORDER BY position""",
            job_id,
        )
        for cell in open_cells:
            reason = verdicts.get(cell["target_id"]) or default_reason(cell["state"], cause)
            if cause == "cancelled" and reason in STOPPED_BY_CANCEL:
                # Stopped (timed out, abandoned, converged) because of the cancel itself.
                reason = TerminalReason.CANCELLED_BY_CONSUMER
            if reason == TerminalReason.QUEUED_TOO_LONG and cell["stage"] != "queued":
                # A step of this cell already ran: its retry waited, it was not queued.
                reason = TerminalReason.STALLED_NO_HEARTBEAT
            await finish_cell(conn, job_id, cell["target_id"], CellState.FAILED, reason)
        record = await load_job(conn, job_id)
        assert record is not None
        if job["completed_at"] is not None:
            return FinishedJob(record=record, outcome=None)
        now = now_ms()
        status = job_status(record.cells)
        verdict = business_status(record.cells)
        slot_status = "expired" if status == JobStatus.EXPIRED else ledger_status(record.cells)
        outcome = build_outcome_record(
            job_id=job_id,
            schedule_id=record.schedule_id or record.plan_id,
            occurrence_at_ms=record.created_at,
            occurrence_date=record.occurrence_date,
            started_at_ms=record.started_at,
            completed_at_ms=now,
            cells=record.cells,
        )
        await conn.execute(
            """UPDATE jobs SET status = $2, business_status = $3, completed_at = $4, updated_at = $4,
                   last_stage = $5 WHERE job_id = $1""",
            job_id,
            slot_status,
            verdict.value,
            now,
            str(status),
        )
        await conn.execute("UPDATE cells SET lease_until = NULL, lease_owner = NULL WHERE job_id = $1", job_id)
        inserted = await conn.fetchval(
            """INSERT INTO outcomes (job_id, business_status, alertable, record, created_at)
               VALUES ($1, $2, $3, $4, $5) ON CONFLICT (job_id) DO NOTHING RETURNING job_id""",
            job_id,
            verdict.value,
            is_alertable(verdict),
            outcome,
            now,
        )
        # What the statements above changed, without reading the job a third time.
        record = record.model_copy(
            update={
                "status": slot_status,
                "business_status": verdict.value,
                "completed_at": now,
                "updated_at": now,
                "lease_until": None,
            }
        )
        job_body = project_job(record, now)
        payload: dict[str, Any] = {"job": job_body}
        if status == JobStatus.SUCCEEDED:
            payload["result"] = job_body.get("result")
        else:
            payload["error"] = job_body.get("error")
        await append_event(conn, job_id, TERMINAL_EVENT_TYPES[str(status)], payload, at=now)
        return FinishedJob(record=record, outcome=outcome if inserted else None)

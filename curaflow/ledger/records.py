"""Read a job and its cells from the ledger into domain models."""

from __future__ import annotations

from typing import Any

import asyncpg
from pydantic import ValidationError

from curaflow.domain.holds import Hold
from curaflow.domain.models import (
    Artifact,
    CandidateReport,
    CellSnapshot,
    JobRecord,
    RouteDelivery,
    Work,
)
from curaflow.ledger.db import DB_NOW_MS

CELL_COLUMNS = """target_id, position, state, stage, work_id, work_type, work, candidate_report,
    artifact, attempt_count, fallback_stage, terminal_reason_code, terminal_reason_message,
    heartbeat_at, lease_until, updated_at, held_by, held_by_added"""
STAGE_COLUMNS = "target_id, state, stage, updated_at"
INTENT_COLUMNS = (
    "d.route, d.status, d.idempotency_key, d.remote_id, d.attempts, d.last_error, d.work_id, "
    "CASE WHEN jsonb_typeof(d.remote_ids) = 'array' THEN jsonb_array_length(d.remote_ids) ELSE 0 END AS parts_posted"
)
#: The intents a cell reports: every live one, and the released ones of its bound work (a
#: delivery that never went out because the cell stopped); released intents of works it
#: let go as unavailable are not its deliveries.
REPORTED_INTENT = "(d.status <> 'released' OR d.work_id = c.work_id)"


def cell_from_row(
    row: asyncpg.Record | dict[str, Any],
    deliveries: list[RouteDelivery] | None = None,
    *,
    artifact: Artifact | None = None,
) -> CellSnapshot:
    """Build a :class:`CellSnapshot` from a ``cells`` row (columns of :data:`CELL_COLUMNS`);
    ``artifact``: the row's artifact as the caller holds it (it just wrote it), not read
    back from the row (a work of many pages costs a validation of every file)."""
    return CellSnapshot(
        target_id=row["target_id"],
        state=row["state"],
        stage=row["stage"],
        work_id=row["work_id"],
        work_type=row["work_type"],
        work=Work.model_validate(row["work"]) if row["work"] else None,
        reason=row["terminal_reason_code"],
        reason_message=row["terminal_reason_message"],
        attempt=row["attempt_count"],
        fallback_pass=row["fallback_stage"],  # the column keeps reference §5.5's name
        candidate_report=CandidateReport.model_validate(row["candidate_report"]) if row["candidate_report"] else None,
        artifact=artifact or (Artifact.model_validate(row["artifact"]) if row["artifact"] else None),
        deliveries=deliveries or [],
        updated_at=row["updated_at"],
        held_by=_held(row["held_by_added"]) or _held(row["held_by"]),
    )


def _held(value: Any) -> Hold | None:
    """A stored hold (``cells.held_by_added``, else ``cells.held_by``:
    :data:`curaflow.domain.holds.KINDS_OF_0046`), or None. A hold this build cannot read —
    a kind a later build added (:data:`curaflow.domain.holds.HoldKind`), read during a
    rolling upgrade — is dropped, not the cell: the cell's message, written with it, still
    says it."""
    if not value:
        return None
    try:
        return Hold.model_validate_json(value) if isinstance(value, str) else Hold.model_validate(value)
    except ValidationError:
        return None


async def load_cells(conn: asyncpg.Connection, job_id: str) -> list[CellSnapshot]:
    """Every cell of ``job_id`` in target order, with its delivery intents."""
    return (await _load_cells(conn, job_id))[0]


#: Each cell's reported intents (:data:`INTENT_COLUMNS`, :data:`REPORTED_INTENT`) as one
#: JSON array in order of creation, read with the cell in the same statement.
_CELL_INTENTS = f"""COALESCE((SELECT jsonb_agg(jsonb_build_object(
                                 'route', d.route, 'status', d.status, 'idempotency_key', d.idempotency_key,
                                 'remote_id', d.remote_id, 'attempts', d.attempts, 'last_error', d.last_error,
                                 'work_id', d.work_id,
                                 'parts_posted', CASE WHEN jsonb_typeof(d.remote_ids) = 'array'
                                                      THEN jsonb_array_length(d.remote_ids) ELSE 0 END)
                                 ORDER BY d.id)
                              FROM delivery_intents d
                              WHERE d.job_id = c.job_id AND d.target_id = c.target_id AND {REPORTED_INTENT}),
                             '[]'::jsonb) AS intents"""


async def _load_cells(conn: asyncpg.Connection, job_id: str) -> tuple[list[CellSnapshot], int | None, int | None]:
    """Cells with intents (one statement), plus the latest ``heartbeat_at`` over them and
    the latest ``lease_until`` of those live at the read — judged in the statement on the
    database's clock, the clock the lease was written on (docs/DESIGN.md "Ledger times are
    the database's clock"), not on the reading process's."""
    rows = await conn.fetch(
        f"""SELECT {CELL_COLUMNS}, c.lease_until > {DB_NOW_MS} AS lease_live, {_CELL_INTENTS}
            FROM cells c WHERE c.job_id = $1 ORDER BY c.position""",
        job_id,
    )
    heartbeats = [r["heartbeat_at"] for r in rows if r["heartbeat_at"] is not None]
    leases = [r["lease_until"] for r in rows if r["lease_live"]]
    cells = [cell_from_row(r, [RouteDelivery(**i) for i in r["intents"]]) for r in rows]
    return cells, max(heartbeats, default=None), max(leases, default=None)


async def load_cell(
    conn: asyncpg.Connection, job_id: str, target_id: str, *, with_deliveries: bool = False
) -> CellSnapshot | None:
    """One cell, or None; its delivery intents only when ``with_deliveries``."""
    row = await conn.fetchrow(
        f"SELECT {CELL_COLUMNS} FROM cells WHERE job_id = $1 AND target_id = $2", job_id, target_id
    )
    if row is None:
        return None
    if not with_deliveries:
        return cell_from_row(row)
    intents = await conn.fetch(
        f"""SELECT {INTENT_COLUMNS} FROM delivery_intents d
            JOIN cells c ON c.job_id = d.job_id AND c.target_id = d.target_id
            WHERE d.job_id = $1 AND d.target_id = $2 AND {REPORTED_INTENT} ORDER BY d.id""",
        job_id,
        target_id,
    )
    return cell_from_row(row, [RouteDelivery(**dict(i)) for i in intents])


JOB_COLUMNS = """job_id, job_type, plan_id, schedule_id, trigger, idempotency_key, correlation_id,
    callback_url, params, target_ids, business_status, created_at, started_at, updated_at,
    completed_at, deadline_at, attempt, cancel_requested_at, workflow_started_at, occurrence_date,
    occurrence_at"""

#: The query each target's cell ran (the job's ``TargetSpec`` s in its stored workflow
#: input), by target id: a candidate's recall basis (``JobRecord.queries``). Read with the
#: job row by :func:`load_job_with`, not by the admission's identity lookup (no result).
QUERIES_COLUMN = """(SELECT jsonb_object_agg(t.spec ->> 'target_id', t.spec -> 'query')
        FROM jsonb_array_elements(COALESCE(workflow_input -> 'targets', '[]'::jsonb)) AS t(spec)
        WHERE t.spec ? 'query') AS queries"""


def job_from_row(row: asyncpg.Record, cells: list[CellSnapshot]) -> JobRecord:
    """Build a :class:`JobRecord` from a ``jobs`` row and its cells (its ``queries`` when
    the row has the :data:`QUERIES_COLUMN`, else none)."""
    return JobRecord(
        job_id=row["job_id"],
        job_type=row["job_type"],
        plan_id=row["plan_id"],
        schedule_id=row["schedule_id"],
        trigger=row["trigger"],
        idempotency_key=row["idempotency_key"],
        correlation_id=row["correlation_id"],
        callback_url=row["callback_url"],
        params=row["params"],
        target_ids=list(row["target_ids"]),
        business_status=row["business_status"],
        created_at=row["created_at"],
        started_at=row["started_at"],
        updated_at=row["updated_at"],
        completed_at=row["completed_at"],
        deadline_at=row["deadline_at"],
        attempt=row["attempt"],
        cancel_requested_at=row["cancel_requested_at"],
        workflow_started_at=row["workflow_started_at"],
        occurrence_date=row["occurrence_date"],
        occurrence_at=row["occurrence_at"],
        queries=row.get("queries") or {},
        cells=cells,
    )


async def load_job(conn: asyncpg.Connection, job_id: str, *, for_update: bool = False) -> JobRecord | None:
    """The job ``job_id`` with its cells, leases and heartbeats, or None if unknown.

    Args:
        for_update: lock the job row for the rest of the caller's transaction, as
            :func:`curaflow.ledger.cells.lock_job` does (the lock order: job row first).
    """
    loaded = await load_job_with(conn, job_id, for_update=for_update)
    return loaded[0] if loaded is not None else None


async def load_job_with(
    conn: asyncpg.Connection, job_id: str, extra: str = "", *args: Any, for_update: bool = False
) -> tuple[JobRecord, asyncpg.Record] | None:
    """:func:`load_job`, with ``extra`` read in the job row's statement (no statement added).

    Args:
        extra: SQL select-list items over the job's row (aliased ``j``), each named with
            ``AS`` (e.g. a scalar subquery); empty: none.
        args: the parameters ``extra`` names, from ``$2`` on (``$1`` is ``job_id``).
        for_update: as in :func:`load_job`.

    Returns:
        The job and its ``jobs`` row (``extra``'s values by their names), or None if unknown.
    """
    lock = " FOR UPDATE" if for_update else ""
    columns = f"{JOB_COLUMNS}, {QUERIES_COLUMN}, {extra}" if extra else f"{JOB_COLUMNS}, {QUERIES_COLUMN}"
    row = await conn.fetchrow(f"SELECT {columns} FROM jobs j WHERE j.job_id = $1{lock}", job_id, *args)
    if row is None:
        return None
    cells, heartbeat_at, lease_until = await _load_cells(conn, job_id)
    record = job_from_row(row, cells)
    record.heartbeat_at = heartbeat_at
    record.lease_until = lease_until
    return record, row

"""Job rows: durable admission, lookups, cancel requests, workflow bookkeeping.

Admission is durable before it is acknowledged (DESIGN.md decision 2): the job row, its
cells and the ``job.accepted`` event are written in one transaction with an
insert-if-absent on the job id and the idempotency key; the workflow is started after
commit. The first admission's response body is frozen in ``admission_response`` so a
replay answers with an identical body.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import asyncpg

from curaflow.domain.messages import JobInput
from curaflow.domain.models import CellSnapshot, JobRecord
from curaflow.ledger.cells import lock_job
from curaflow.ledger.db import DB_NOW_MS, jsonable
from curaflow.ledger.events import append_event
from curaflow.ledger.records import JOB_COLUMNS, job_from_row, load_job
from curaflow.protocol.projection import project_job


@dataclass
class NewJob:
    """What admission asks the ledger to create.

    Attributes:
        job_input: the workflow argument; stored so the reconciler can start a workflow
            that was never started.
        params: the normalised retrieval view (compared on replay), or None.
        occurrence_at: a scheduled job's nominal time, epoch ms (UTC); None for other
            jobs (their occurrence is the admission, ``created_at``).
    """

    job_input: JobInput
    idempotency_key: str | None = None
    correlation_id: str | None = None
    callback_url: str | None = None
    labels: dict[str, str] | None = None
    params: dict[str, Any] | None = None
    occurrence_date: str | None = None
    occurrence_at: int | None = None


@dataclass
class AdmissionRow:
    """A job found or created by :func:`insert_job`."""

    record: JobRecord
    created: bool
    response: dict[str, Any]
    params: dict[str, Any] | None


def admitted_record(new: NewJob) -> JobRecord:
    """The job exactly as :func:`insert_job` writes it (queued, every cell pending)."""
    inp = new.job_input
    return JobRecord(
        job_id=inp.job_id,
        job_type=inp.job_type,
        plan_id=inp.plan_id,
        schedule_id=inp.schedule_id,
        trigger=inp.trigger,
        idempotency_key=new.idempotency_key,
        correlation_id=new.correlation_id,
        callback_url=new.callback_url,
        params=new.params,
        target_ids=[t.target_id for t in inp.targets],
        created_at=inp.created_at_ms,
        updated_at=inp.created_at_ms,
        deadline_at=inp.deadline_at_ms,
        occurrence_date=new.occurrence_date,
        occurrence_at=new.occurrence_at,
        cells=[CellSnapshot(target_id=t.target_id, updated_at=inp.created_at_ms) for t in inp.targets],
    )


async def insert_job(conn: asyncpg.Connection, new: NewJob) -> AdmissionRow:
    """Create the job if absent (by job id and by idempotency key), in one transaction.

    The first admission's answer is computed from what is written (no read-back) and
    stored with the row, so a replay answers with the identical body.

    Args:
        conn: a connection (the function opens its own transaction).
        new: the job to create.

    Returns:
        The created job (``created=True``) or, when the id or key already existed, the
        existing job with its frozen admission response.
    """
    inp = new.job_input
    record = admitted_record(new)
    response = {"job": project_job(record)}
    async with conn.transaction():
        # One statement: the job row and, only when it was created, its cells.
        inserted = await conn.fetchval(
            """WITH job AS (
                   INSERT INTO jobs (job_id, job_type, plan_id, schedule_id, trigger, idempotency_key,
                       correlation_id, callback_url, labels, params, target_ids, workflow_input,
                       created_at, updated_at, deadline_at, occurrence_date, admission_response, occurrence_at)
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13, $14, $15, $16, $17)
                   ON CONFLICT DO NOTHING RETURNING job_id),
               cell AS (
                   INSERT INTO cells (job_id, target_id, position, created_at, updated_at)
                   SELECT job.job_id, t, p - 1, $13, $13 FROM job, unnest($11::text[]) WITH ORDINALITY AS u(t, p))
               SELECT job_id FROM job""",
            inp.job_id,
            inp.job_type,
            inp.plan_id,
            inp.schedule_id,
            inp.trigger,
            new.idempotency_key,
            new.correlation_id,
            new.callback_url,
            new.labels or None,
            new.params,
            [t.target_id for t in inp.targets],
            jsonable(inp),
            inp.created_at_ms,
            inp.deadline_at_ms,
            new.occurrence_date,
            response,
            new.occurrence_at,
        )
        if inserted is None:
            existing = await find_existing(conn, inp.job_id, new.idempotency_key)
            assert existing is not None, "insert conflicted but no job found"
            return existing
        await append_event(conn, inp.job_id, "job.accepted", at=inp.created_at_ms)
        return AdmissionRow(record=record, created=True, response=response, params=new.params)


async def find_existing(conn: asyncpg.Connection, job_id: str, idempotency_key: str | None) -> AdmissionRow | None:
    """The job owning ``idempotency_key`` (exact, case-sensitive), else the job ``job_id``.

    The returned record carries the job row's identity fields (no cells): what an
    idempotency check needs.
    """
    row = await conn.fetchrow(
        f"""SELECT {JOB_COLUMNS}, admission_response FROM jobs WHERE idempotency_key = $1 OR job_id = $2
            ORDER BY (idempotency_key = $1) DESC NULLS LAST LIMIT 1""",
        idempotency_key,
        job_id,
    )
    if row is None:
        return None
    record = job_from_row(row, [])
    response = row["admission_response"]
    if response is None:  # written before admission responses were stored
        full = await load_job(conn, row["job_id"])
        assert full is not None
        response = {"job": project_job(full)}
    return AdmissionRow(record=record, created=False, response=response, params=row["params"])


async def mark_workflow_started(conn: asyncpg.Connection, job_id: str) -> None:
    """Record that the job's workflow exists (the reconciler stops looking at it), at the
    database's clock: the reconciler's start grace judges it (docs/DESIGN.md "Ledger times
    are the database's clock")."""
    await conn.execute(
        f"UPDATE jobs SET workflow_started_at = COALESCE(workflow_started_at, {DB_NOW_MS}) WHERE job_id = $1",
        job_id,
    )


async def workflow_input(conn: asyncpg.Connection, job_id: str) -> JobInput | None:
    """The stored workflow argument of ``job_id``, or None."""
    raw = await conn.fetchval("SELECT workflow_input FROM jobs WHERE job_id = $1", job_id)
    return JobInput.model_validate(raw) if raw else None


async def request_cancel(conn: asyncpg.Connection, job_id: str, reason: str) -> bool:
    """Record a consumer cancel request (first one wins). Returns False for an unknown job.

    ``cancel_requested_at`` (epoch ms, UTC, the database's clock: the reconciler's cancel
    grace judges it) is read once the job row is held, so it never
    precedes a step the ledger let through before the cancel: a
    :func:`~curaflow.ledger.deliveries.claim_send` holding the row finishes first and
    its ``sent_at`` is earlier (the barrier order every reader compares against).

    ``reason`` is recorded as given but for each NUL, written U+FFFD: PostgreSQL's
    ``text`` holds no NUL, and a reason is any client's text (a job started before core
    v2 records its ``cancel`` signal's argument) — refusing the write lost the cancel
    (DESIGN.md "Foreign input").
    """
    reason = reason.replace("\x00", "\ufffd")
    async with conn.transaction():
        if await lock_job(conn, job_id) is None:
            return False
        status = await conn.execute(
            f"""UPDATE jobs SET cancel_requested_at = COALESCE(cancel_requested_at, {DB_NOW_MS}),
                              cancel_reason = COALESCE(cancel_reason, $2)
               WHERE job_id = $1""",
            job_id,
            reason,
        )
    return status.endswith("1")


async def deadline_of(pool: asyncpg.Pool, job_id: str) -> int | None:
    """The job's deadline (``jobs.deadline_at``, epoch ms UTC), None when unknown or unset.

    The steps have it from their opening (:class:`curaflow.ledger.cells.StepOpened`); read
    here where that is not at hand (an ``acquire`` attempt that failed: the deadline
    owns a failure after it passed).
    """
    value = await pool.fetchval("SELECT deadline_at FROM jobs WHERE job_id = $1", job_id)
    return int(value) if value is not None else None

"""The job row's lock and its barrier (DESIGN.md decision 13): why a job admits no new step.

Lock order everywhere: the job row first (:func:`lock_job`), then cell and intent rows.
"""

from __future__ import annotations

from enum import StrEnum

import asyncpg

from curaflow.ledger.db import DB_NOW_MS


def barrier_sql(job: str, now: str = DB_NOW_MS) -> str:
    """The barrier rule (DESIGN.md decision 13) as a SQL expression: ``'cancelled'`` when
    a consumer cancel is recorded (``cancel_requested_at``), ``'deadline'`` when the
    job's ``deadline_at`` is at or before now on the database's clock, else NULL.

    The one place the rule is written; every reader computes it under the job row lock
    (:func:`lock_job`, :func:`start_step`, :func:`continue_step`, and the binding that carries
    a step on, :func:`bind_search`), on the database's clock: a worker whose own clock is
    behind opens no step past the deadline, one ahead does not stop a job before it
    (docs/DESIGN.md "Ledger times are the database's clock").

    Args:
        job: the SQL alias of the ``jobs`` row.
        now: the database's clock as the statement reads it: :data:`DB_NOW_MS`, or a
            column taken from it once (``clock.now``) when the statement writes the same
            instant elsewhere. Never a process's clock.
    """
    return (
        f"(CASE WHEN {job}.cancel_requested_at IS NOT NULL THEN 'cancelled'"
        f" WHEN {job}.deadline_at IS NOT NULL AND {now} >= {job}.deadline_at THEN 'deadline' END)"
    )


async def lock_job(conn: asyncpg.Connection, job_id: str) -> asyncpg.Record | None:
    """Lock the job row for the rest of the transaction; None if the job is unknown.

    The row has ``job_id``, ``started_at``, ``cancel_requested_at``, ``completed_at``,
    ``deadline_at``, the job's ``barrier`` now (:func:`barrier_sql`; read it with
    :func:`barrier_of`), and what the stage rule needs of the job row: ``last_stage`` and
    ``cells``, the number of its cells (:func:`~curaflow.ledger.cells.stage.sole_cell_stage_sql`).

    Read other rows (a cell's state) in a later statement, never in this one: under READ
    COMMITTED a statement that waited for the lock still reads other rows as they were
    when it started, before the transaction it waited for committed.
    """
    return await conn.fetchrow(
        f"""SELECT job_id, started_at, cancel_requested_at, completed_at, deadline_at,
                  {barrier_sql("jobs")} AS barrier, last_stage, cardinality(target_ids) AS cells
           FROM jobs WHERE job_id = $1 FOR UPDATE""",
        job_id,
    )


class Barrier(StrEnum):
    """Why a job admits no new step (DESIGN.md decision 13): its ledger row says so."""

    CANCELLED = "cancelled"  # a consumer cancel is recorded (``jobs.cancel_requested_at``)
    DEADLINE = "deadline"  # the job's deadline (``jobs.deadline_at``) has passed


def barrier_of(job: asyncpg.Record) -> Barrier | None:
    """The barrier of a job row read with a ``barrier`` column (:func:`lock_job`), or None."""
    return Barrier(job["barrier"]) if job["barrier"] else None

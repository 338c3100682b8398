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


def lock_job_sql(job_id: str) -> str:
    """The statement of :func:`lock_job` (its row's columns), with the job's id the SQL
    expression ``job_id`` (a parameter, ``$n``): for a statement that takes the lock as a
    common table expression and goes on (:func:`lock_job_and_cell_sql`)."""
    return f"""SELECT job_id, started_at, cancel_requested_at, completed_at, deadline_at,
                  {barrier_sql("jobs")} AS barrier, last_stage, cardinality(target_ids) AS cells
           FROM jobs WHERE job_id = {job_id} FOR UPDATE"""


def lock_job_and_cell_sql(job_id: str, target_id: str, then: str) -> str:
    """One statement: the job row locked (:func:`lock_job`'s row, its columns), then the
    cell row locked, its ``state`` and ``work_id`` read, and ``then`` — a SQL expression
    over the cell as ``c`` (``state``, ``work_id``), evaluated after both locks — as
    ``reserved``. No row when the job or the cell is unknown.

    Lock order: the cell's scan is keyed by the job's id read from the locked row (an
    init plan run before the scan), so the job row is locked first. The cell is read in
    the statement that may have waited for the job's lock, against :func:`lock_job`'s
    rule, only because it is read by its own lock (``FOR UPDATE``): a row updated by the
    transaction the statement waited for is then read again at its newest version
    (PostgreSQL's EvalPlanQual, as an ``UPDATE`` reads it), the binding that transaction
    committed included. ``then`` may read other rows only through a ``VOLATILE``
    function (each of its statements takes a new snapshot, after the locks).

    Args:
        job_id / target_id: SQL expressions (parameters, ``$n``) of the job and cell.
        then: the expression returned as ``reserved``.
    """
    return f"""WITH j AS MATERIALIZED ({lock_job_sql(job_id)}),
                c AS (SELECT state, work_id FROM cells
                      WHERE job_id = (SELECT j.job_id FROM j) AND target_id = {target_id} FOR UPDATE)
           SELECT j.*, c.state, c.work_id, {then} AS reserved FROM j, c"""


async def lock_job(conn: asyncpg.Connection, job_id: str) -> asyncpg.Record | None:
    """Lock the job row for the rest of the transaction; None if the job is unknown.

    The row has ``job_id``, ``started_at``, ``cancel_requested_at``, ``completed_at``,
    ``deadline_at``, the job's ``barrier`` now (:func:`barrier_sql`; read it with
    :func:`barrier_of`), and what the stage rule needs of the job row: ``last_stage`` and
    ``cells``, the number of its cells (:func:`~curaflow.ledger.cells.stage.sole_cell_stage_sql`).

    Read other rows (a cell's state) in a later statement, never in this one: under READ
    COMMITTED a statement that waited for the lock still reads other rows as they were
    when it started, before the transaction it waited for committed — except a row the
    statement itself locks or updates, which PostgreSQL reads again at its newest version
    (:func:`lock_job_and_cell_sql`, :func:`~curaflow.ledger.cells.steps.start_step`).
    """
    return await conn.fetchrow(lock_job_sql("$1"), job_id)


class Barrier(StrEnum):
    """Why a job admits no new step (DESIGN.md decision 13): its ledger row says so."""

    CANCELLED = "cancelled"  # a consumer cancel is recorded (``jobs.cancel_requested_at``)
    DEADLINE = "deadline"  # the job's deadline (``jobs.deadline_at``) has passed


def barrier_of(job: asyncpg.Record) -> Barrier | None:
    """The barrier of a job row read with a ``barrier`` column (:func:`lock_job`), or None."""
    return Barrier(job["barrier"]) if job["barrier"] else None

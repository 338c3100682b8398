"""Opening an activity attempt on a cell (:func:`start_step`) and carrying it on into the
next stage (:func:`continue_step`), each judged against the job's barrier."""

from __future__ import annotations

from typing import NamedTuple

import asyncpg

from curaflow.domain.cells import CellStage
from curaflow.domain.models import CellSnapshot
from curaflow.ledger.cells.barriers import Barrier, barrier_of, barrier_sql
from curaflow.ledger.cells.rows import TERMINAL_STATE_NAMES
from curaflow.ledger.cells.stage import push_staged, sole_cell_stage, sole_cell_stage_sql, sync_job_stage
from curaflow.ledger.db import DB_NOW_MS
from curaflow.ledger.events import NOTIFY_CHANNEL, event_body
from curaflow.ledger.records import CELL_COLUMNS, cell_from_row, load_cell


class StepOpened(NamedTuple):
    """What :func:`start_step` found: the cell (None when the job or cell is unknown), the
    job's barrier (set: the step must not run) and its deadline (epoch ms, UTC; None
    when unknown or unset) — the bound of the attempt's exchanges
    (:func:`curaflow.outbound.attempt_deadline`), read with the step."""

    cell: CellSnapshot | None
    barrier: Barrier | None
    deadline_at_ms: int | None = None
    #: The cell holds a saved search checkpoint (:func:`search_resume` has one to read).
    checkpointed: bool = False
    #: The job had already ended (``jobs.completed_at`` set): nothing was opened.
    ended: bool = False


async def start_step(
    conn: asyncpg.Connection,
    job_id: str,
    target_id: str,
    *,
    stage: CellStage,
    attempt: int,
    lease_ms: int,
    owner: str,
) -> StepOpened:
    """Open an activity attempt on a cell: mark the job started, take the cell's lease.

    The first step of a job sets ``started_at``, moves the job to ``running`` and appends
    ``job.started``; it records the job's run as started too (``workflow_started_at``, when
    no start recorded it: a schedule's occurrence, whose trampoline starts the run and
    records nothing — a step runs only in the job's own run). The cell's ``stage`` moves
    forward only while it is non-terminal. A job that is already terminal is left
    untouched. A job behind a barrier (a recorded consumer cancel, or its deadline passed)
    opens no step: the caller does no work.

    One statement: the job row is locked, judged (:func:`barrier_sql`) and written with
    the cell row; for a job of one cell, ``job.started`` and ``job.progress`` follow in
    the same statement, only when they are due (``curaflow_set_job_stage`` after the
    writes, given the stage facts :func:`sole_cell_stage_sql` reads of the rows the
    statement locked and wrote; the one open stage is the job's stage, the least advanced
    of one: :func:`~curaflow.domain.projection.open_stage`), their pushes enqueued after
    it (:func:`push_staged`). Only the rows the statement locks or updates are read in
    it, so they are current even when it waited for the lock (:func:`lock_job`); the
    function's own statements run after the writes, each on a snapshot of its own. A job
    of several cells reads its cells' stages in a second statement
    (:func:`sync_job_stage`).

    Args:
        stage: the stage this activity works in.
        attempt: the activity's Temporal attempt number. ``Job.attempt`` (``jobs.attempt``)
            is the highest one any step of the job reached: 0 before the first step, 1
            while no step was retried, never lower than it was (a retried search followed
            by a first delivery attempt stays 2).
        lease_ms: lease length from the database's clock (``lease_until`` and
            ``heartbeat_at`` are that clock's); the heartbeat timeout of the activity.
        owner: the worker identity holding the lease.

    Returns:
        ``(cell, barrier, deadline_at_ms)`` (:class:`StepOpened`); cell None when the job
        or cell is unknown; barrier set when the step must not run (then nothing was
        changed); ``ended`` set when the job was already terminal (nothing changed either).
    """
    # One statement: lock the job row, judge its barrier and, only without one (and while
    # the job is open), write the job row and the cell row — at one read of the database's
    # clock (the lease, the heartbeat, the start and the barrier's judgement of the deadline
    # are the clock every process judges them on: docs/DESIGN.md "Ledger times are the
    # database's clock"). A job of one cell: then its stage write (curaflow_set_job_stage,
    # job.started with it on the job's first step). The function writes the job row again,
    # after this statement's `job` wrote it: its arguments come from the rows `job` and
    # `cell` returned, so it runs once both are written, and its statements are commands
    # of their own, each on a snapshot that sees them (not a second write of one row in
    # one command, which PostgreSQL does not order).
    sole = sole_cell_stage_sql("j.cells", "cell.state", "cell.stage", "$7")
    row = await conn.fetchrow(
        f"""WITH j AS (SELECT job_id, started_at, completed_at, {barrier_sql("jobs", "clock.now")} AS barrier,
                              last_stage, cardinality(target_ids) AS cells, deadline_at, clock.now
                       FROM jobs, LATERAL (SELECT {DB_NOW_MS} AS now) clock WHERE job_id = $1 FOR UPDATE OF jobs),
                go AS (SELECT job_id, started_at, now FROM j WHERE completed_at IS NULL AND barrier IS NULL),
                job AS (UPDATE jobs t SET attempt = GREATEST(t.attempt, $2),
                               started_at = COALESCE(t.started_at, go.now),
                               workflow_started_at = COALESCE(t.workflow_started_at, go.now), updated_at = go.now
                        FROM go WHERE t.job_id = go.job_id RETURNING go.started_at AS prev_started),
                cell AS (UPDATE cells c SET stage = CASE WHEN c.state = ANY($7::text[]) THEN c.stage ELSE $4 END,
                                            lease_until = go.now + $5::bigint, lease_owner = $6,
                                            heartbeat_at = go.now, updated_at = go.now
                         FROM go WHERE c.job_id = go.job_id AND c.target_id = $3
                         RETURNING {CELL_COLUMNS}, search_checkpoint IS NOT NULL AS checkpointed),
                sole AS (SELECT {sole} AS stages FROM j JOIN job ON true JOIN cell ON true),
                staged AS (SELECT s.* FROM j, job, sole
                           CROSS JOIN LATERAL curaflow_set_job_stage(
                               j.job_id, j.now, sole.stages[1],
                               CASE WHEN job.prev_started IS NULL THEN $8::jsonb END, $9, $10) s
                           WHERE sole.stages IS NOT NULL)
           SELECT j.barrier, j.last_stage AS job_last_stage, j.cells AS job_cells, j.deadline_at AS job_deadline_at,
                  j.completed_at IS NOT NULL AS job_ended, j.now AS clock_now,
                  EXISTS (SELECT 1 FROM job) AS opened, job.prev_started, cell.*,
                  (SELECT stages FROM sole) AS sole_stages,
                  (SELECT COALESCE(jsonb_agg(to_jsonb(staged) ORDER BY staged.o_seq), '[]'::jsonb)
                   FROM staged) AS stage_events
           FROM j LEFT JOIN job ON true LEFT JOIN cell ON true""",
        job_id,
        attempt,
        target_id,
        str(stage),
        lease_ms,
        owner,
        TERMINAL_STATE_NAMES,
        event_body("job.started"),
        event_body("job.progress"),
        NOTIFY_CHANNEL,
    )
    if row is None:
        return StepOpened(None, None)
    deadline = row["job_deadline_at"]
    if not row["opened"]:
        cell = await load_cell(conn, job_id, target_id)
        return StepOpened(cell, barrier_of(row), deadline, ended=bool(row["job_ended"]))
    cell = cell_from_row(row) if row["target_id"] is not None else None
    if sole_cell_stage(row["job_last_stage"], row["sole_stages"]) is not None:
        # A job of one cell: job.started and job.progress were written by the statement.
        await push_staged(conn, job_id, row["stage_events"])
    else:  # several cells: their stages are read now (job.started is at the job's started_at)
        await sync_job_stage(conn, job_id, started=row["prev_started"] is None, at=int(row["clock_now"]))
    return StepOpened(cell, None, deadline, bool(row["checkpointed"]))


async def continue_step(
    conn: asyncpg.Connection, job_id: str, target_id: str, *, lease_ms: int, owner: str
) -> Barrier | None:
    """Carry an open step on into the next stage inside the same activity attempt.

    ``acquire`` binds a work and goes on to fetch it without opening a second step
    (:func:`start_step`): in the binding's transaction (the job row locked by
    :func:`bind_work`), this renews the cell's lease and reads the job's barrier, in one
    statement. The cell's stage already moved with the binding (``fetching``). A new
    binding does the same in its own ``UPDATE`` (:func:`bind_search`); this is for a cell
    an attempt adopts already bound.

    Returns:
        The job's barrier (a recorded cancel, its deadline passed), or None: the caller
        goes on only without one.
    """
    job = await conn.fetchrow(
        f"""WITH clock AS (SELECT {DB_NOW_MS} AS now),
                cell AS (UPDATE cells SET lease_until = clock.now + $3::bigint, lease_owner = $4,
                                          heartbeat_at = clock.now
                         FROM clock WHERE job_id = $1 AND target_id = $2 RETURNING job_id)
           SELECT {barrier_sql("j", "clock.now")} AS barrier FROM clock, jobs j WHERE j.job_id = $1""",
        job_id,
        target_id,
        lease_ms,
        owner,
    )
    return barrier_of(job) if job is not None else None

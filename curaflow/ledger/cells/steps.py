"""Opening an activity attempt on a cell (:func:`start_step`) and carrying it on into the
next stage (:func:`continue_step`), each judged against the job's barrier."""

from __future__ import annotations

from typing import Any, NamedTuple

import asyncpg

from curaflow.domain.cells import CellStage
from curaflow.domain.messages import RouteRef, TargetSpec
from curaflow.domain.models import CellSnapshot
from curaflow.ledger.cells.barriers import Barrier, barrier_of, barrier_sql
from curaflow.ledger.cells.rows import TERMINAL_STATE_NAMES
from curaflow.ledger.cells.stage import push_staged, sole_cell_stage, sole_cell_stage_sql, sync_job_stage
from curaflow.ledger.db import DB_NOW_MS
from curaflow.ledger.events import NOTIFY_CHANNEL, event_body
from curaflow.ledger.records import CELL_COLUMNS, cell_from_row, load_cell


class StepClaim(NamedTuple):
    """What a step's input asks of its job: the fields the step acts on, each of which must
    be what the job's input stored at admission (``jobs.workflow_input``) holds for it
    (docs/DESIGN.md "Who may run a job's activities": the rule is
    :func:`activities.caller.foreign_input`'s; :func:`start_step` compares them first).

    Attributes:
        target: the cell's target spec (query, filters, limits, excluded works, storage,
            routes): the stored target of the same ``target_id``, exactly.
        max_fallback_stages: a source step's stages allowed (``acquire``, ``search``,
            ``fetch``): the stored ``max_fallback_stages`` (at least 1); None for
            ``deliver``.
        route: ``deliver``'s route: one the stored target names; None for a source step.
        delivery_max_attempts: ``deliver``'s attempts before the send is abandoned: the
            stored ``budgets.delivery_max_attempts``; None for a source step.
    """

    target: TargetSpec
    max_fallback_stages: int | None = None
    route: RouteRef | None = None
    delivery_max_attempts: int | None = None

    def as_json(self) -> dict[str, Any]:
        """The claim as :func:`claim_matches_sql` compares it with the stored input: the
        fields as a job's input stores them (``model_dump(mode="json")``); ``route`` is
        not in it (a route of the claim's target, checked on the input itself, so the
        target's equality covers it)."""
        claim: dict[str, Any] = {"target": self.target.model_dump(mode="json")}
        if self.max_fallback_stages is not None:
            claim["max_fallback_stages"] = self.max_fallback_stages
        if self.delivery_max_attempts is not None:
            claim["delivery_max_attempts"] = self.delivery_max_attempts
        return claim


def claim_matches_sql(stored: str, claim: str, target_id: str) -> str:
    """SQL (boolean, never NULL) of whether the claim (:meth:`StepClaim.as_json`, the
    ``jsonb`` expression ``claim``) is exactly what the stored input (``stored``, a job's
    ``workflow_input``) holds for the cell ``target_id`` (a ``text`` expression): the same
    target spec and, when the claim names them, fallback stages and delivery attempts.
    ``jsonb`` equality (keys in any order, numbers by value). False also when the stored
    input lacks a field (a job admitted before it existed): then
    :func:`activities.caller.foreign_input` judges the stored input as a ``JobInput`` (its
    defaults filled), off the path of every job admitted since."""
    return f"""COALESCE(
        (SELECT t.spec FROM jsonb_array_elements({stored} -> 'targets') AS t(spec)
         WHERE t.spec ->> 'target_id' = {target_id} LIMIT 1) = {claim} -> 'target'
        AND (NOT {claim} ? 'max_fallback_stages'
             OR {stored} -> 'max_fallback_stages' = {claim} -> 'max_fallback_stages')
        AND (NOT {claim} ? 'delivery_max_attempts'
             OR {stored} -> 'budgets' -> 'delivery_max_attempts' = {claim} -> 'delivery_max_attempts'),
        false)"""


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
    #: The step's claim did not match the job's stored input at a glance
    #: (:func:`claim_matches_sql`): nothing was opened or read beyond the job row, and this
    #: is that stored input (``jobs.workflow_input``) for the caller to judge
    #: (:func:`activities.caller.open_own_step`); ``cell`` and ``barrier`` are None then.
    stored_input: Any = None


async def start_step(
    conn: asyncpg.Connection,
    job_id: str,
    target_id: str,
    *,
    stage: CellStage,
    attempt: int,
    lease_ms: int,
    owner: str,
    claim: StepClaim | None = None,
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
        claim: what the step's input asks of the job (:class:`StepClaim`), judged in the
            same statement against the job's stored input (:func:`claim_matches_sql`)
            before anything is written; None: not judged (the caller judged it already).

    Returns:
        ``(cell, barrier, deadline_at_ms)`` (:class:`StepOpened`); cell None when the job
        or cell is unknown; barrier set when the step must not run (then nothing was
        changed); ``ended`` set when the job was already terminal (nothing changed either);
        ``stored_input`` set when the claim did not match (nothing changed, cell None).
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
    # The claim is judged in the job row's read, before any write (no statement of its own):
    # a step whose input is not the job's opens nothing and reads no cell.
    sole = sole_cell_stage_sql("j.cells", "cell.state", "cell.stage", "$7")
    matches = claim_matches_sql("jobs.workflow_input", "$11::jsonb", "$3::text")
    row = await conn.fetchrow(
        f"""WITH j AS (SELECT job_id, started_at, completed_at, {barrier_sql("jobs", "clock.now")} AS barrier,
                              last_stage, cardinality(target_ids) AS cells, deadline_at, clock.now,
                              CASE WHEN NOT judged.ok THEN workflow_input END AS stored_input
                       FROM jobs, LATERAL (SELECT {DB_NOW_MS} AS now) clock,
                            LATERAL (SELECT $11::jsonb IS NULL OR {matches} AS ok) judged
                       WHERE job_id = $1 FOR UPDATE OF jobs),
                go AS (SELECT job_id, started_at, now FROM j
                       WHERE completed_at IS NULL AND barrier IS NULL AND stored_input IS NULL),
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
                  j.completed_at IS NOT NULL AS job_ended, j.now AS clock_now, j.stored_input,
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
        claim.as_json() if claim is not None else None,
    )
    if row is None:
        return StepOpened(None, None)
    deadline = row["job_deadline_at"]
    if row["stored_input"] is not None:  # not the job's step at a glance: nothing opened
        return StepOpened(None, None, deadline, stored_input=row["stored_input"])
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

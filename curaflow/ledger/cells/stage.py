"""The job-level stage in the ledger: ``jobs.last_stage`` and the ``job.progress`` events,
moved by the rule :func:`curaflow.domain.projection.open_stage` (the job row locked)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import asyncpg

from curaflow.domain.projection import open_stage
from curaflow.ledger.cells.rows import TERMINAL_STATE_NAMES
from curaflow.ledger.db import now_ms
from curaflow.ledger.events import NOTIFY_CHANNEL, event_body, push_appended

#: The job's last recorded stage and its open cells' stages, for :func:`sync_job_stage`.
_STAGES_SQL = """SELECT j.last_stage,
                        ARRAY(SELECT c.stage FROM cells c
                              WHERE c.job_id = j.job_id AND NOT (c.state = ANY ($2::text[]))) AS stages
                 FROM jobs j WHERE j.job_id = $1"""
#: The write of :func:`sync_job_stage`: ``curaflow_set_job_stage`` (migration 0040) moves
#: the stage it is given and appends the events; it decides nothing.
_SET_STAGE_SQL = """SELECT o_seq, o_type, o_at, o_payload, o_callback_url, o_correlation_id
                    FROM curaflow_set_job_stage($1, $2, $3, $4, $5, $6)"""


class StageFacts(NamedTuple):
    """What the stage rule reads of a job, when the caller already holds it: the stage
    ``jobs.last_stage`` records and the stages of the job's open cells."""

    last_stage: str | None
    open_stages: list[str]


def sole_cell_stage_sql(cells: str, state: str, stage: str, terminal: str) -> str:
    """The stage facts of a job with one cell as a SQL expression — the open stages the
    stage rule reads (:func:`~curaflow.domain.projection.open_stage`), a ``text[]``:
    ``ARRAY[stage]`` while the cell's ``state`` is not one of ``terminal``, ``'{}'`` once
    it is — or NULL for a job of several cells (their stages are read:
    :func:`sync_job_stage`) or without the cell (``state`` NULL).

    The one place this rule is written: every statement that writes a job's sole cell
    and needs its stage facts returns this column (:func:`start_step`, which also hands it
    to ``curaflow_set_job_stage`` in the same statement, and :func:`finish_cell`), and
    :func:`sole_cell_stage` reads it. Only rows the statement's transaction locked or the
    statement wrote may be named (the rule of :func:`lock_job`): ``cells`` the locked job
    row's ``cardinality(target_ids)``, ``state`` and ``stage`` the cell as the statement
    wrote it (``RETURNING``).

    Args:
        cells / state / stage: SQL expressions of the job's number of cells and the
            cell's state and stage.
        terminal: the SQL parameter (``$n``) holding
            :data:`~curaflow.ledger.cells.rows.TERMINAL_STATE_NAMES` (the names of
            :data:`curaflow.domain.cells.TERMINAL_STATES`, the owner of which states end a
            cell).
    """
    return (
        f"(CASE WHEN {cells} = 1 AND {state} IS NOT NULL THEN"
        f" CASE WHEN {state} = ANY({terminal}::text[]) THEN '{{}}'::text[] ELSE ARRAY[{stage}]::text[] END END)"
    )


def sole_cell_stage(last_stage: str | None, sole_stages: list[str] | None) -> StageFacts | None:
    """The stage facts of a job with one cell, read from what the caller's transaction
    already holds — the locked job row's ``last_stage`` (:func:`lock_job`) and the column
    a :func:`sole_cell_stage_sql` expression returned — so :func:`sync_job_stage` reads
    nothing. None for a job of several cells (their stages are read) or without the cell.
    """
    return None if sole_stages is None else StageFacts(last_stage, list(sole_stages))


def sole_cell_move(job: asyncpg.Record | Mapping[str, Any], cell_stage: str) -> StageFacts | None:
    """The stage facts of a job with one cell once the caller's next statement moves that
    cell to the open stage ``cell_stage`` — from the locked job row (``last_stage``,
    ``cells``: :func:`lock_job`) and what the statement writes, known before it is sent —
    or None for a job of several cells (their stages are read after the move:
    :func:`sync_job_stage`)."""
    if job["cells"] != 1:
        return None
    return StageFacts(job["last_stage"], [cell_stage])


def stage_due(facts: StageFacts) -> str | None:
    """The stage :func:`sync_job_stage` writes for ``facts`` (without ``started``): the
    rule's stage (:func:`~curaflow.domain.projection.open_stage`) when it is not the one
    ``jobs.last_stage`` records, else None (nothing to write)."""
    stage = open_stage(facts.open_stages)
    return None if stage is None or stage == facts.last_stage else stage


def moved_with_stage(ctes: list[str], move: str, *, at: str, stage: str, progress: str, channel: str) -> str:
    """One statement: ``move`` — an ``UPDATE cells … RETURNING …`` of a job's sole cell,
    after the ``ctes`` it uses — and, only when it moved the cell, the job's stage write
    (``curaflow_set_job_stage`` with the stage :func:`stage_due` decided: ``jobs.last_stage``
    and ``job.progress``). The statement returns the moved row and ``stage_events``, the
    events appended (a ``jsonb`` array of the function's rows, for :func:`push_staged`);
    no row when the cell did not move (then nothing was written). ``at`` … ``channel``
    are the statement's parameters (``$n``) of the events' time (epoch ms), the stage,
    the ``job.progress`` body and the NOTIFY channel (:func:`plan_move` passes them).

    The function's statements run after ``move`` in the same transaction: it writes only
    the job row this transaction locked (:func:`lock_job`) and the job's events, which
    ``move`` does not touch, and reads nothing ``move`` writes — so this is
    :func:`sync_job_stage` after ``move``, one round trip fewer. ``move`` must return
    ``c.job_id AS moved_job_id`` (the call is made for each row it returns: none, or one).
    """
    staged = (
        f"staged AS (SELECT s.* FROM moved CROSS JOIN LATERAL curaflow_set_job_stage("
        f"moved.moved_job_id, {at}, {stage}, NULL, {progress}, {channel}) s)"
    )
    return (
        f"WITH {', '.join([*ctes, f'moved AS ({move})', staged])} "
        "SELECT moved.*, (SELECT COALESCE(jsonb_agg(to_jsonb(staged) ORDER BY staged.o_seq), '[]'::jsonb) "
        "FROM staged) AS stage_events FROM moved"
    )


class StageMove(NamedTuple):
    """The statement that moves a job's cell (:func:`plan_move`), and what follows it.

    Attributes:
        sql / args: the statement and its parameters.
        folded: the statement also writes the job's stage (a job of one cell, a stage
            due): the pushes of its events follow (:func:`finish_move`).
        read_after: a job of several cells: its stage is read and written after the move.
    """

    sql: str
    args: list[Any]
    folded: bool
    read_after: bool


def plan_move(
    job: asyncpg.Record | Mapping[str, Any], cell_stage: str, ctes: list[str], move: str, args: list[Any], *, at: str
) -> StageMove:
    """The statement of a cell's move to the open stage ``cell_stage`` — ``move``, an
    ``UPDATE cells … RETURNING …, c.job_id AS moved_job_id``, after the ``ctes`` it uses,
    with ``args`` — that also writes the job's stage when the stage rule can be applied
    before it is sent (:func:`sole_cell_move`, :func:`stage_due`: :func:`moved_with_stage`);
    ``at`` is the parameter (``$n``) of the move's time, epoch ms. Pass the row it returns
    to :func:`finish_move`."""
    facts = sole_cell_move(job, cell_stage)
    stage = stage_due(facts) if facts is not None else None
    if stage is None:
        sql = f"WITH {', '.join(ctes)} {move}" if ctes else move
        return StageMove(sql, args, folded=False, read_after=facts is None)
    n = len(args)
    sql = moved_with_stage(ctes, move, at=at, stage=f"${n + 1}", progress=f"${n + 2}", channel=f"${n + 3}")
    return StageMove(sql, [*args, stage, event_body("job.progress"), NOTIFY_CHANNEL], folded=True, read_after=False)


async def finish_move(conn: asyncpg.Connection, job_id: str, plan: StageMove, row: asyncpg.Record) -> None:
    """After a :func:`plan_move` statement moved the cell (``row``: what it returned): the
    pushes of the stage events it appended, or — a job of several cells — the stage read
    and written now (:func:`sync_job_stage`; it changes the job row only)."""
    if plan.folded:
        await push_staged(conn, job_id, row["stage_events"])
    elif plan.read_after:
        await sync_job_stage(conn, job_id)


async def push_staged(conn: asyncpg.Connection, job_id: str, events: list[dict[str, Any]] | None) -> None:
    """Enqueue the pushes of the events a :func:`moved_with_stage` statement appended
    (:func:`push_appended`: only for a job with a ``callback_url``)."""
    for e in events or []:
        await push_appended(
            conn, job_id, e["o_type"], e["o_seq"], e["o_at"], e["o_payload"], e["o_callback_url"], e["o_correlation_id"]
        )


async def sync_job_stage(
    conn: asyncpg.Connection,
    job_id: str,
    *,
    started: bool = False,
    at: int | None = None,
    known: StageFacts | None = None,
) -> None:
    """Emit ``job.progress`` when the job-level stage changed (job row must be locked).

    The job-level stage is decided by :func:`curaflow.domain.projection.open_stage`, the
    rule ``GET /jobs/{id}`` shows, from the open cells' stages read here (a statement of
    its own, after the caller's lock, so it sees every committed cell) — or given as
    ``known`` by a caller that holds them (a job of one cell: :func:`sole_cell_stage`).
    ``jobs.last_stage`` holds the stage of the job's last ``job.progress`` event; when
    the stage moved, or with ``started`` (the job's first step, ``job.started`` appended
    first), one more statement writes it and appends the events. Pushes of a job with a
    ``callback_url`` are enqueued in the same transaction.

    Args:
        at: the events' time, epoch ms (default now); :func:`start_step` passes the time
            it wrote as ``started_at`` (reference §4.3: ``job.started`` is at ``started_at``).
        known: the stage facts, when the caller holds them (no statement reads them).
    """
    if known is None:
        row = await conn.fetchrow(_STAGES_SQL, job_id, TERMINAL_STATE_NAMES)
        if row is None:
            return
        known = StageFacts(row["last_stage"], list(row["stages"]))
    stage = open_stage(known.open_stages)
    if not started and (stage is None or stage == known.last_stage):
        return
    rows = await conn.fetch(
        _SET_STAGE_SQL,
        job_id,
        at if at is not None else now_ms(),
        stage,
        event_body("job.started") if started else None,
        event_body("job.progress"),
        NOTIFY_CHANNEL,
    )
    for r in rows:
        await push_appended(
            conn, job_id, r["o_type"], r["o_seq"], r["o_at"], r["o_payload"], r["o_callback_url"], r["o_correlation_id"]
        )

"""A bound cell's moves after its binding: ``artifact_ready`` (the end of the fetch), a
terminal state (:func:`finish_cell`), the fallback pass a cell is about to run."""

from __future__ import annotations

from typing import Any

import asyncpg

from curaflow.domain.cells import TERMINAL_STATES, CellStage, CellState, check_transition
from curaflow.domain.holds import KINDS_OF_0046, Hold
from curaflow.domain.models import Artifact, CellSnapshot
from curaflow.domain.reasons import bounded_reason_message, user_message
from curaflow.ledger.artifacts import copy_pages_sql
from curaflow.ledger.cells.barriers import lock_job
from curaflow.ledger.cells.leases import end_lease
from curaflow.ledger.cells.rows import C_COLUMNS, TERMINAL_STATE_NAMES
from curaflow.ledger.cells.stage import (
    finish_move,
    plan_move,
    sole_cell_stage,
    sole_cell_stage_sql,
    sync_job_stage,
)
from curaflow.ledger.db import now_ms
from curaflow.ledger.records import CELL_COLUMNS, cell_from_row, load_cell

#: The states a cell may reach ``artifact_ready`` from (:func:`curaflow.domain.cells.check_transition`).
_READY_FROM = sorted(str(s) for s in CellState if check_transition(s, CellState.ARTIFACT_READY))


async def artifact_ready(
    conn: asyncpg.Connection,
    job_id: str,
    target_id: str,
    work_id: str,
    artifact: Artifact | dict[str, Any],
    *,
    pages: tuple[list[int], list[bytes]] | None = None,
) -> CellSnapshot | None:
    """``selected → artifact_ready`` for the bound work, storing the artifact description,
    and the end of the fetch step: the cell's lease is released in the same statement
    (as :func:`end_lease`: not while a delivery of the cell is in flight).

    Args:
        pages: the artifact's pages as ``(numbers, bytes)``, each of one chunk
            (:func:`curaflow.ledger.artifacts.held_pages`): the ledger's copy is written by
            the same statement, so the cell is never ready without it (a caller passing
            None copied the artifact first: :func:`curaflow.ledger.artifacts.store_artifact`).

    Returns:
        The cell afterwards; unchanged (reloaded, its lease released all the same) when
        it no longer holds ``work_id`` or cannot move to ``artifact_ready``; None when
        the job or the cell is unknown.
    """
    job = await lock_job(conn, job_id)
    if job is None:
        return None
    held = artifact if isinstance(artifact, Artifact) else None
    ctes = [copy_pages_sql("$1", "$2", "$3", "$7", "$8")] if pages is not None else []
    move = f"""UPDATE cells c SET state = 'artifact_ready', stage = 'delivering', artifact = $4, updated_at = $5,
                   lease_until = CASE WHEN s.sending THEN c.lease_until END,
                   lease_owner = CASE WHEN s.sending THEN c.lease_owner END
            FROM (SELECT EXISTS (SELECT 1 FROM delivery_intents d WHERE d.job_id = $1 AND d.target_id = $2
                                 AND d.status = 'sending') AS sending) s
            WHERE c.job_id = $1 AND c.target_id = $2 AND c.work_id = $3 AND c.state = ANY($6::text[])
            RETURNING {C_COLUMNS}, c.job_id AS moved_job_id"""
    args: list[Any] = [
        job_id,
        target_id,
        work_id,
        held.model_dump(mode="json") if held is not None else artifact,
        now_ms(),
        _READY_FROM,
        *(pages or ()),
    ]
    # A job of one cell: its stage after the move is known now, and written by the same
    # statement when it moves (plan_move); a job of several reads its cells after.
    plan = plan_move(job, str(CellStage.DELIVERING), ctes, move, args, at="$5")
    updated = await conn.fetchrow(plan.sql, *plan.args)
    if updated is None:
        await end_lease(conn, job_id, target_id)
        return await load_cell(conn, job_id, target_id)
    cell = cell_from_row(updated, artifact=held)
    await finish_move(conn, job_id, plan, updated)
    return cell


#: For each terminal state, the states a cell may reach it from
#: (:func:`curaflow.domain.cells.check_transition`, the FSM that owns the rule).
_FINISH_FROM = {
    state: sorted(str(s) for s in CellState if check_transition(s, state)) for state in sorted(TERMINAL_STATES)
}


async def finish_cell(
    conn: asyncpg.Connection,
    job_id: str,
    target_id: str,
    state: CellState,
    reason: str | None = None,
    message: str | None = None,
    *,
    locked: bool | asyncpg.Record = False,
    end_attempt: bool = False,
    held_by: Hold | None = None,
) -> CellSnapshot | None:
    """Move a cell to a terminal ``state`` with its reason, if the FSM allows it.

    A cell that is already terminal keeps its state (a submitted cell is never
    downgraded). Reserved intents of a cell that ends without delivery are released so
    another job may deliver that work later. ``message`` defaults to the reason's
    user-facing sentence. The move is one ``UPDATE`` guarded by the states the FSM
    allows it from (:data:`_FINISH_FROM`), returning the cell. The message is stored at
    most 400 characters long (:func:`~curaflow.domain.reasons.bounded_reason_message`).

    Args:
        locked: the caller already holds the job row lock in this transaction
            (:func:`lock_job`): True, or the row :func:`lock_job` returned (the stage rule
            then reads nothing for a job of one cell); otherwise it is taken here.
        end_attempt: the caller's attempt ends with this call: the cell's lease is
            released also when the cell was terminal already (a beat the attempt sent
            while its request was out may have leased it again); a cell that moves is
            released by the move itself.
        held_by: what held the cell when its job ended it (the finish's
            :func:`curaflow.domain.holds.held_by`), stored with it: in ``cells.held_by``
            when its kind is one every build since migration 0046 reads there
            (:data:`~curaflow.domain.holds.KINDS_OF_0046`), else in
            ``cells.held_by_added`` (migration 0049), so a build of before reads the
            job without it instead of failing on it.

    Returns:
        The cell afterwards (unchanged when the FSM refused), or None when the job or
        the cell is unknown.
    """
    job = locked if isinstance(locked, asyncpg.Record) else None
    if not locked:
        job = await lock_job(conn, job_id)
        if job is None:
            return None
    now = now_ms()
    row = await conn.fetchrow(
        f"""UPDATE cells SET state = $3, stage = 'done', terminal_reason_code = $4,
               terminal_reason_message = $5, updated_at = $6, completed_at = $6,
               lease_until = NULL, lease_owner = NULL, held_by = $8::jsonb, held_by_added = $9::jsonb
           WHERE job_id = $1 AND target_id = $2 AND state = ANY($7::text[])
           RETURNING {CELL_COLUMNS}, {sole_cell_stage_sql("$10::int", "state", "stage", "$11")} AS sole_stages""",
        job_id,
        target_id,
        str(state),
        reason,
        bounded_reason_message(message or (user_message(reason) if reason else None)),
        now,
        _FINISH_FROM[state],
        held_by.model_dump() if held_by is not None and held_by.kind in KINDS_OF_0046 else None,
        held_by.model_dump() if held_by is not None and held_by.kind not in KINDS_OF_0046 else None,
        job["cells"] if job is not None else None,  # the job row this transaction locked
        TERMINAL_STATE_NAMES,
    )
    if row is None:
        if end_attempt:
            await end_lease(conn, job_id, target_id)
        return await load_cell(conn, job_id, target_id)
    if state != CellState.SUBMITTED:
        # Never sent → released (another job may deliver the work); maybe landed (in
        # flight now, or an earlier request's outcome never learnt) or part of it posted
        # (a multi-part send's confirmed parts, `remote_ids`) → unknown, which keeps the
        # work blocked on that route (reported partial when parts are posted).
        await conn.execute(
            """UPDATE delivery_intents
               SET status = CASE WHEN status = 'sending' OR maybe_delivered
                                      OR (jsonb_typeof(remote_ids) = 'array' AND jsonb_array_length(remote_ids) > 0)
                                 THEN 'unknown' ELSE 'released' END,
                   updated_at = $3
               WHERE job_id = $1 AND target_id = $2 AND status IN ('reserved', 'sending')""",
            job_id,
            target_id,
            now,
        )
    cell = cell_from_row(row)
    known = sole_cell_stage(job["last_stage"], row["sole_stages"]) if job is not None else None
    await sync_job_stage(conn, job_id, known=known)
    return cell


async def set_fallback_pass(conn: asyncpg.Connection, job_id: str, target_id: str, fallback_pass: int) -> None:
    """Record the fallback pass a cell is about to run (scheduled jobs only; column
    ``cells.fallback_stage``, named after reference §5.5; only while the cell is
    ``pending``), and end the step that decided it: the cell's lease is released in the
    same statement, by :func:`end_lease`'s rule."""
    await conn.execute(
        """UPDATE cells c SET fallback_stage = CASE WHEN c.state = 'pending' THEN $3 ELSE c.fallback_stage END,
                  search_checkpoint = CASE WHEN c.state = 'pending' THEN NULL ELSE c.search_checkpoint END,
                  updated_at = $4,
                  lease_until = CASE WHEN s.sending THEN c.lease_until END,
                  lease_owner = CASE WHEN s.sending THEN c.lease_owner END
           FROM (SELECT EXISTS (SELECT 1 FROM delivery_intents d WHERE d.job_id = $1 AND d.target_id = $2
                                AND d.status = 'sending') AS sending) s
           WHERE c.job_id = $1 AND c.target_id = $2""",
        job_id,
        target_id,
        fallback_pass,
        now_ms(),
    )

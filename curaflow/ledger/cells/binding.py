"""Binding a work to a cell: the first candidate no other cell holds on the target's routes
(first binding wins), the search step's binding, and the rebinding after an unavailable work."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import asyncpg

from curaflow.domain.cells import CellStage, CellState, is_terminal
from curaflow.domain.messages import TargetSpec
from curaflow.domain.models import CandidateReport, CellSnapshot, Work
from curaflow.ledger.cells.barriers import Barrier, barrier_of, barrier_sql, lock_job, lock_job_and_cell_sql
from curaflow.ledger.cells.leases import end_lease
from curaflow.ledger.cells.reservations import LOCK_JOB_CELL_AND_RESERVE, reserve, reserve_args
from curaflow.ledger.cells.rows import C_COLUMNS, TERMINAL_STATE_NAMES
from curaflow.ledger.cells.stage import finish_move, plan_move
from curaflow.ledger.cells.steps import continue_step
from curaflow.ledger.db import DB_NOW_MS, jsonable, now_ms
from curaflow.ledger.holdings import hold_sql
from curaflow.ledger.records import CELL_COLUMNS, cell_from_row, load_cell

#: Candidates kept on a cell after binding, for ``fetch`` to fall back on when the bound
#: work turns out to be unavailable.
SPARE_CANDIDATES = 10
#: The job row locked, then the cell (no candidate to reserve: a binding that binds nothing).
_LOCK_JOB_AND_CELL = lock_job_and_cell_sql("$1", "$2", "NULL::boolean")


class Renewal(NamedTuple):
    """The lease an ``acquire`` step renews when its binding carries the step on into the
    fetch (:func:`bind_and_continue`): its length (ms) and holder."""

    lease_ms: int
    owner: str


@dataclass(frozen=True)
class Carry:
    """The binding carries its step on into the fetch (``acquire``): the cell's lease is
    renewed for ``lease_ms`` (held by ``owner``) in the binding's own statement, instead
    of the step ending; with ``store_id``, the same statement records that this artifact
    store will write the cell's folder (the fetch's :func:`curaflow.ledger.holdings.hold`,
    before its first byte)."""

    lease_ms: int
    owner: str
    store_id: str | None = None


class Binding(NamedTuple):
    """What :func:`bind_search` did: see there."""

    cell: CellSnapshot | None
    bound: bool = False  # this call bound a work (False: none could be, or the cell was adopted)
    barrier: Barrier | None = None  # with ``Carry``: the job's barrier at the binding
    opened: bool = False  # with ``Carry``: the step goes on into the fetch
    held: bool = False  # with ``Carry.store_id``: the holding was recorded by the binding


async def bind_work(
    conn: asyncpg.Connection,
    job_id: str,
    target: TargetSpec,
    candidates: list[Work],
    report: CandidateReport,
) -> CellSnapshot | None:
    """Bind the first candidate no other cell holds on these routes (first binding wins).

    Locks the job and cell; a cell already bound or terminal is returned unchanged (a
    resumed attempt adopts the existing binding and never re-ranks). Each candidate is
    reserved on every route of the target inside a savepoint; one that another job
    reserved in the meantime is skipped as a duplicate. The cell's lease is left as it is
    (the step goes on: :func:`bind_search` ends or carries it).

    Args:
        candidates: eligible works in rank order; stored on the cell so ``fetch`` can
            move to the next one when a bound work turns out to be unavailable.
        report: the scan's candidate report (updated with the binding).

    Returns:
        The cell after the call; ``state == selected`` when a work was bound, still
        ``pending`` when none could be.
    """
    return (await _bind(conn, job_id, target, candidates, report, lease=None)).cell


async def bind_search(
    conn: asyncpg.Connection,
    job_id: str,
    target: TargetSpec,
    candidates: list[Work],
    report: CandidateReport,
    *,
    carry: Carry | None = None,
) -> Binding:
    """The ``search`` step's binding (:func:`bind_work`), ending the step with it — or, with
    ``carry``, carrying it on into the fetch.

    A cell that binds a work, or is adopted bound or terminal, ends the search step here:
    its lease is released (as :func:`end_lease`) — in the binding's own ``UPDATE`` for a
    new binding. With ``carry`` and a cell ``selected``, the lease is renewed instead and
    the job's barrier read (the rule :func:`continue_step` applies: the job row is locked
    by this transaction); the step goes on only without one (``opened``). A cell still
    ``pending`` (no candidate could be bound) keeps its lease: the scan goes on, or the
    caller ends the step (:func:`set_fallback_pass`, :func:`finish_cell`).

    Returns:
        The cell, whether this call bound it, and with ``carry`` the barrier and whether
        the step is still open.
    """
    lease: Carry | bool = carry if carry is not None else True
    binding = await _bind(conn, job_id, target, candidates, report, lease=lease)
    cell = binding.cell
    if cell is None or binding.bound or (cell.state == CellState.PENDING and cell.work_id is None):
        return binding
    # Adopted: bound or ended by an earlier attempt.
    if carry is not None and cell.state == CellState.SELECTED:
        barrier = await continue_step(conn, job_id, target.target_id, lease_ms=carry.lease_ms, owner=carry.owner)
        if barrier is None:
            return Binding(cell, opened=True)
        await end_lease(conn, job_id, target.target_id)
        return Binding(cell, barrier=barrier)
    await end_lease(conn, job_id, target.target_id)
    return binding


async def _bind(
    conn: asyncpg.Connection,
    job_id: str,
    target: TargetSpec,
    candidates: list[Work],
    report: CandidateReport,
    *,
    lease: Carry | bool | None,
) -> Binding:
    """:func:`bind_work`; a new binding's ``UPDATE`` also releases the lease (``lease``
    True), renews it and reads the job's barrier (a :class:`Carry`), or leaves it (None)."""
    # One statement: the job's lock, then the cell's, and the first candidate's reservation.
    if candidates:
        row = await conn.fetchrow(
            LOCK_JOB_CELL_AND_RESERVE,
            *reserve_args(job_id, target.target_id, candidates[0], target.routes),
            TERMINAL_STATE_NAMES,
        )
    else:
        row = await conn.fetchrow(_LOCK_JOB_AND_CELL, job_id, target.target_id)
    if row is None:  # the job or the cell is unknown
        return Binding(None)
    job = row  # the locked job row's columns (lock_job's), for the stage rule
    if is_terminal(row["state"]) or row["work_id"] is not None:
        return Binding(await load_cell(conn, job_id, target.target_id))
    bound: Work | None = None
    remaining: list[Work] = []
    for i, work in enumerate(candidates):
        reserved = row["reserved"] if i == 0 else await reserve(conn, job_id, target.target_id, work, target.routes)
        if reserved:
            bound = work
            remaining = candidates[i + 1 :]
            break
        report.rejected += 1
        report.reasons["duplicate"] = report.reasons.get("duplicate", 0) + 1
        report.filtered.append({"work_id": work.work_id, "reason": "duplicate"})
    now = now_ms()
    if bound is None:
        row = await conn.fetchrow(
            f"""UPDATE cells SET candidate_report = $3, candidates = '[]'::jsonb, updated_at = $4
               WHERE job_id = $1 AND target_id = $2 RETURNING {CELL_COLUMNS}""",
            job_id,
            target.target_id,
            jsonable(report),
            now,
        )
        return Binding(cell_from_row(row))
    report.selected = bound.work_id
    remaining = remaining[:SPARE_CANDIDATES]
    args: list[Any] = [
        job_id,
        target.target_id,
        bound.work_id,
        bound.work_type,
        jsonable(bound),
        [jsonable(w) for w in remaining],
        jsonable(report),
        now,
    ]
    step, barrier = "", "NULL"
    held: list[str] = []
    if isinstance(lease, Carry):
        # Carried on: renewed, and the job's barrier judged on the row this transaction
        # locked (as continue_step does). The lease and the barrier are the database's
        # clock (docs/DESIGN.md "Ledger times are the database's clock"), read here.
        step = f", lease_until = $9::bigint + {DB_NOW_MS}, lease_owner = $10, heartbeat_at = {DB_NOW_MS}"
        barrier = f"(SELECT {barrier_sql('j')} FROM jobs j WHERE j.job_id = $1)"
        args += [lease.lease_ms, lease.owner]
        if lease.store_id is not None:
            held = [f"held AS ({hold_sql('$1', '$2', '$11', '$8')})"]
            args.append(lease.store_id)
    elif lease:
        # The step ends with the binding (as end_lease: kept while a delivery is sending).
        step = """, lease_until = CASE WHEN s.sending THEN c.lease_until END,
                     lease_owner = CASE WHEN s.sending THEN c.lease_owner END"""
    move = f"""UPDATE cells c SET state = 'selected', stage = 'fetching', work_id = $3, work_type = $4,
               work = $5, candidates = $6, candidate_report = $7, attempt_count = c.attempt_count + 1,
               updated_at = $8{step}
           FROM (SELECT EXISTS (SELECT 1 FROM delivery_intents d WHERE d.job_id = $1 AND d.target_id = $2
                                AND d.status = 'sending') AS sending) s
           WHERE c.job_id = $1 AND c.target_id = $2
           RETURNING {C_COLUMNS}, {barrier} AS barrier, c.job_id AS moved_job_id"""
    # A job of one cell: its stage after the binding is known now, and written by the same
    # statement (plan_move); a job of several reads its cells after.
    plan = plan_move(job, str(CellStage.FETCHING), held, move, args, at="$8")
    updated = await conn.fetchrow(plan.sql, *plan.args)
    cell = cell_from_row(updated)
    await finish_move(conn, job_id, plan, updated)
    found = barrier_of(updated)
    if found is not None and isinstance(lease, Carry):
        await end_lease(conn, job_id, target.target_id)  # the step stops here: the workflow decides
    return Binding(cell, bound=True, barrier=found, opened=isinstance(lease, Carry) and found is None, held=bool(held))


async def rebind_next(
    conn: asyncpg.Connection,
    job_id: str,
    target: TargetSpec,
    work_id: str,
    skip_reason: str,
    kind: str = "gone",
    recognised: bool = True,
) -> CellSnapshot | None:
    """Provisional release of an unavailable bound work, then bind the next candidate.

    Only a cell still ``selected`` with ``work_id`` is released (reference §1.1): its
    reserved intents become ``released`` and the skip is counted in the candidate report
    (``unavailable``, and its ``kind`` — :class:`~curaflow.sources.errors.UnavailableKind`
    — in ``unavailable``; and in ``unrecognised`` when the answer was not ``recognised`` as
    the work's). The released intents keep whether it was (``release_unrecognised``,
    migration 0045): the cell's later passes are told such a work ``unrecognised``, the
    source's answer, however long the account holds it back
    (:func:`~curaflow.ledger.cells.search_resume`,
    :func:`~curaflow.ledger.remembered.known_works`). The stored remaining candidates are
    then tried in order.

    Args:
        recognised: the answer was recognised as the work's
            (:attr:`~curaflow.sources.errors.WorkUnavailable.recognised`).

    Returns:
        The cell: ``selected`` with the next work, or ``pending`` with no work when the
        candidates ran out (the caller then ends it ``no_candidate``).
    """
    job = await lock_job(conn, job_id)
    if job is None:
        return None
    row = await conn.fetchrow(
        """SELECT state, work_id, candidates, candidate_report FROM cells
           WHERE job_id = $1 AND target_id = $2 FOR UPDATE""",
        job_id,
        target.target_id,
    )
    if row is None:
        return None
    if row["state"] != CellState.SELECTED or row["work_id"] != work_id:
        return await load_cell(conn, job_id, target.target_id)
    await conn.execute(
        """UPDATE delivery_intents SET status = 'released', last_error = $4, updated_at = $5,
               release_unrecognised = $6
           WHERE job_id = $1 AND target_id = $2 AND work_id = $3 AND status = 'reserved'""",
        job_id,
        target.target_id,
        work_id,
        skip_reason,
        now_ms(),
        not recognised,
    )
    report = CandidateReport.model_validate(row["candidate_report"] or {})
    report.selected = None
    report.rejected += 1
    report.reasons["unavailable"] = report.reasons.get("unavailable", 0) + 1
    report.unavailable[kind] = report.unavailable.get(kind, 0) + 1
    if not recognised:
        report.unrecognised[kind] = report.unrecognised.get(kind, 0) + 1
    report.filtered.append({"work_id": work_id, "reason": "unavailable"})
    candidates = [Work.model_validate(w) for w in (row["candidates"] or [])]
    await conn.execute(
        """UPDATE cells SET state = 'pending', stage = 'searching', work_id = NULL, work_type = NULL,
               work = NULL, artifact = NULL, updated_at = $3
           WHERE job_id = $1 AND target_id = $2""",
        job_id,
        target.target_id,
        now_ms(),
    )
    return await bind_work(conn, job_id, target, candidates, report)

"""Cell transitions in the ledger, each in the caller's transaction with its effect.

Lock order everywhere: the job row first (``SELECT … FOR UPDATE``), then cell and intent
rows. Every function here expects a connection inside a transaction unless its doc says
otherwise. Transitions go through the FSM of :mod:`curaflow.domain.cells`: a terminal
cell never changes and a submitted cell is never downgraded; an illegal request leaves
the row untouched and returns the cell as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple

import asyncpg

from curaflow.domain.cells import TERMINAL_STATES, CellStage, CellState, check_transition, is_terminal
from curaflow.domain.messages import RouteRef, TargetSpec
from curaflow.domain.models import Artifact, CandidateReport, CellSnapshot, Work
from curaflow.domain.projection import open_stage
from curaflow.domain.reasons import user_message
from curaflow.ledger import frontiers
from curaflow.ledger.artifacts import copy_pages_sql
from curaflow.ledger.db import jsonable, now_ms
from curaflow.ledger.events import NOTIFY_CHANNEL, event_body, push_appended
from curaflow.ledger.holdings import hold_sql
from curaflow.ledger.records import CELL_COLUMNS, cell_from_row, load_cell

LIVE_INTENT_STATES = ("reserved", "sending", "delivered", "duplicate", "unknown")
#: Candidates kept on a cell after binding, for ``fetch`` to fall back on when the bound
#: work turns out to be unavailable.
SPARE_CANDIDATES = 10

#: The cell's columns qualified by the alias ``c`` (an ``UPDATE … FROM`` returns them unambiguously).
_C_COLUMNS = ", ".join("c." + col.strip() for col in CELL_COLUMNS.split(","))


def intent_key(route: str, work_type: str, work_id: str, job_id: str, target_id: str) -> str:
    """The stable delivery idempotency key (DESIGN.md decision 6)."""
    return f"curaflow:{route}:{work_type}:{work_id}:{job_id}:{target_id}"


def barrier_sql(job: str, now: str) -> str:
    """The barrier rule (DESIGN.md decision 13) as a SQL expression: ``'cancelled'`` when
    a consumer cancel is recorded (``cancel_requested_at``), ``'deadline'`` when the
    job's ``deadline_at`` is at or before ``now`` (epoch ms), else NULL.

    The one place the rule is written; every reader computes it under the job row lock
    (:func:`lock_job`, :func:`start_step`, :func:`continue_step`, and the binding that carries
    a step on, :func:`bind_search`).

    Args:
        job: the SQL alias of the ``jobs`` row.
        now: a SQL expression for the time to judge at (a parameter such as ``$3``).
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
    ``cells``, the number of its cells (:func:`sole_cell_stage`).

    Read other rows (a cell's state) in a later statement, never in this one: under READ
    COMMITTED a statement that waited for the lock still reads other rows as they were
    when it started, before the transaction it waited for committed.
    """
    return await conn.fetchrow(
        f"""SELECT job_id, started_at, cancel_requested_at, completed_at, deadline_at,
                  {barrier_sql("jobs", "$2")} AS barrier, last_stage, cardinality(target_ids) AS cells
           FROM jobs WHERE job_id = $1 FOR UPDATE""",
        job_id,
        now_ms(),
    )


#: The job's last recorded stage and its open cells' stages, for :func:`sync_job_stage`.
_STAGES_SQL = """SELECT j.last_stage,
                        ARRAY(SELECT c.stage FROM cells c
                              WHERE c.job_id = j.job_id AND NOT (c.state = ANY ($2::text[]))) AS stages
                 FROM jobs j WHERE j.job_id = $1"""
#: The write of :func:`sync_job_stage`: ``curaflow_set_job_stage`` (migration 0040) moves
#: the stage it is given and appends the events; it decides nothing.
_SET_STAGE_SQL = """SELECT o_seq, o_type, o_at, o_payload, o_callback_url, o_correlation_id
                    FROM curaflow_set_job_stage($1, $2, $3, $4, $5, $6)"""
_TERMINAL_STATE_NAMES = sorted(str(s) for s in TERMINAL_STATES)


class StageFacts(NamedTuple):
    """What the stage rule reads of a job, when the caller already holds it: the stage
    ``jobs.last_stage`` records and the stages of the job's open cells."""

    last_stage: str | None
    open_stages: list[str]


def sole_cell_stage(job: asyncpg.Record | Mapping[str, Any] | None, cell: CellSnapshot | None) -> StageFacts | None:
    """The stage facts of a job with one cell, from what the caller's transaction already
    holds — the locked job row (``last_stage``, ``cells``: :func:`lock_job`) and that cell
    as the caller's statement wrote it — so :func:`sync_job_stage` reads nothing. None for
    a job of several cells (their stages are read) or when either is missing.

    Only rows the transaction locked or wrote are used (the rule of :func:`lock_job`).
    """
    if job is None or cell is None or job["cells"] != 1:
        return None
    return StageFacts(job["last_stage"], [] if is_terminal(cell.state) else [cell.stage])


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
        row = await conn.fetchrow(_STAGES_SQL, job_id, _TERMINAL_STATE_NAMES)
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


class Barrier(StrEnum):
    """Why a job admits no new step (DESIGN.md decision 13): its ledger row says so."""

    CANCELLED = "cancelled"  # a consumer cancel is recorded (``jobs.cancel_requested_at``)
    DEADLINE = "deadline"  # the job's deadline (``jobs.deadline_at``) has passed


def barrier_of(job: asyncpg.Record) -> Barrier | None:
    """The barrier of a job row read with a ``barrier`` column (:func:`lock_job`), or None."""
    return Barrier(job["barrier"]) if job["barrier"] else None


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
    ``job.started``. The cell's ``stage`` moves forward only while it is non-terminal. A
    job that is already terminal is left untouched. A job behind a barrier (a recorded
    consumer cancel, or its deadline passed) opens no step: the caller does no work.

    Two statements: the job row is locked, judged (:func:`barrier_sql`) and written with
    the cell row in one; ``job.started`` and ``job.progress`` follow in one
    (:func:`sync_job_stage`), only when they are due. Only the rows the first statement
    locks or updates are read in it, so both are current even when it waited for the
    lock (:func:`lock_job`); for a job of one cell they are all the stage rule needs
    (:func:`sole_cell_stage`).

    Args:
        stage: the stage this activity works in.
        attempt: the activity's Temporal attempt number. ``Job.attempt`` (``jobs.attempt``)
            is the highest one any step of the job reached: 0 before the first step, 1
            while no step was retried, never lower than it was (a retried search followed
            by a first delivery attempt stays 2).
        lease_ms: lease length; the heartbeat timeout of the activity.
        owner: the worker identity holding the lease.

    Returns:
        ``(cell, barrier, deadline_at_ms)`` (:class:`StepOpened`); cell None when the job
        or cell is unknown; barrier set when the step must not run (then nothing was
        changed).
    """
    now = now_ms()
    # One statement: lock the job row, judge its barrier and, only without one (and while
    # the job is open), write the job row and the cell row.
    row = await conn.fetchrow(
        f"""WITH j AS (SELECT job_id, started_at, completed_at, {barrier_sql("jobs", "$3")} AS barrier,
                              last_stage, cardinality(target_ids) AS cells, deadline_at
                       FROM jobs WHERE job_id = $1 FOR UPDATE),
                go AS (SELECT job_id, started_at FROM j WHERE completed_at IS NULL AND barrier IS NULL),
                job AS (UPDATE jobs t SET attempt = GREATEST(t.attempt, $2),
                               started_at = COALESCE(t.started_at, $3), updated_at = $3
                        FROM go WHERE t.job_id = go.job_id RETURNING go.started_at AS prev_started),
                cell AS (UPDATE cells SET stage = CASE WHEN state = ANY($8::text[]) THEN stage ELSE $5 END,
                                          lease_until = $6, lease_owner = $7, heartbeat_at = $3, updated_at = $3
                         WHERE job_id = $1 AND target_id = $4 AND EXISTS (SELECT 1 FROM go)
                         RETURNING {CELL_COLUMNS}, search_checkpoint IS NOT NULL AS checkpointed)
           SELECT j.barrier, j.last_stage AS job_last_stage, j.cells AS job_cells, j.deadline_at AS job_deadline_at,
                  EXISTS (SELECT 1 FROM job) AS opened, job.prev_started, cell.*
           FROM j LEFT JOIN job ON true LEFT JOIN cell ON true""",
        job_id,
        attempt,
        now,
        target_id,
        str(stage),
        now + lease_ms,
        owner,
        _TERMINAL_STATE_NAMES,
    )
    if row is None:
        return StepOpened(None, None)
    deadline = row["job_deadline_at"]
    if not row["opened"]:
        return StepOpened(await load_cell(conn, job_id, target_id), barrier_of(row), deadline)
    cell = cell_from_row(row) if row["target_id"] is not None else None
    job = {"cells": row["job_cells"], "last_stage": row["job_last_stage"]}
    await sync_job_stage(conn, job_id, started=row["prev_started"] is None, at=now, known=sole_cell_stage(job, cell))
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
    now = now_ms()
    job = await conn.fetchrow(
        f"""WITH cell AS (UPDATE cells SET lease_until = $3, lease_owner = $4, heartbeat_at = $5
                         WHERE job_id = $1 AND target_id = $2 RETURNING job_id)
           SELECT {barrier_sql("j", "$5")} AS barrier FROM jobs j WHERE j.job_id = $1""",
        job_id,
        target_id,
        now + lease_ms,
        owner,
        now,
    )
    return barrier_of(job) if job is not None else None


async def heartbeat(pool: asyncpg.Pool, job_id: str, target_id: str, lease_ms: int) -> None:
    """Extend a cell's lease and stamp ``heartbeat_at`` (own short transaction)."""
    now = now_ms()
    await pool.execute(
        """UPDATE cells SET heartbeat_at = $3, lease_until = $4
           WHERE job_id = $1 AND target_id = $2""",
        job_id,
        target_id,
        now,
        now + lease_ms,
    )


async def end_lease(conn: asyncpg.Connection, job_id: str, target_id: str) -> None:
    """Release a cell's lease at the end of an activity attempt.

    The lease stays while another route's delivery of the same cell is in flight
    (an intent ``sending``): that attempt still holds the cell.
    """
    await conn.execute(
        """UPDATE cells SET lease_until = NULL, lease_owner = NULL
           WHERE job_id = $1 AND target_id = $2
             AND NOT EXISTS (SELECT 1 FROM delivery_intents d
                             WHERE d.job_id = $1 AND d.target_id = $2 AND d.status = 'sending')""",
        job_id,
        target_id,
    )


async def save_checkpoint(pool: asyncpg.Pool, job_id: str, target_id: str, checkpoint: dict[str, Any]) -> None:
    """Persist the search activity's resume point (own short transaction)."""
    await pool.execute(
        "UPDATE cells SET search_checkpoint = $3 WHERE job_id = $1 AND target_id = $2",
        job_id,
        target_id,
        checkpoint,
    )


class SearchResume(NamedTuple):
    """Where a ``search`` attempt resumes: see :func:`search_resume`."""

    released: set[str]  # works this cell bound and released as unavailable (skipped)
    checkpoint: dict[str, Any] | None  # the saved scan position, or None
    frontier: dict[str, Any] | None = None  # the target's stored scan frontier, or None


async def search_resume(
    pool: asyncpg.Pool, job_id: str, target_id: str, frontier_key: str | None = None
) -> SearchResume:
    """The works this cell released as unavailable (a later pass skips them), the saved
    search checkpoint and, with ``frontier_key``, the target's stored scan frontier
    (:mod:`curaflow.ledger.frontiers`, the source's JSON), in one statement (own short
    transaction).

    A search with no frontier to read, whose cell never bound a work (none released) and
    holds no checkpoint, has nothing to resume and skips this read (:func:`resume_needed`)."""
    frontier = frontiers.stored_sql("$2", "$3") if frontier_key is not None else "NULL::jsonb"
    row = await pool.fetchrow(
        f"""SELECT c.search_checkpoint,
                  ARRAY(SELECT DISTINCT d.work_id FROM delivery_intents d
                        WHERE d.job_id = $1 AND d.target_id = $2 AND d.status = 'released') AS released,
                  {frontier} AS frontier
           FROM cells c WHERE c.job_id = $1 AND c.target_id = $2""",
        job_id,
        target_id,
        *([frontier_key] if frontier_key is not None else []),
    )
    if row is None:
        return SearchResume(set(), None)
    checkpoint, stored = row["search_checkpoint"], row["frontier"]
    return SearchResume(
        set(row["released"]),
        checkpoint if isinstance(checkpoint, dict) else None,
        stored if isinstance(stored, dict) else None,
    )


def resume_needed(opened: StepOpened, frontier_key: str | None) -> bool:
    """Whether a search step opened as ``opened`` has anything :func:`search_resume` would
    find: the target's stored frontier (``frontier_key``), works its cell released (only a
    cell that bound a work releases one) or a saved checkpoint."""
    if frontier_key is not None:
        return True
    return opened.cell is not None and (opened.cell.attempt > 0 or opened.checkpointed)


_RESERVE = "curaflow_reserve_work($1::text[], $2::text[], $3::text[], $4, $5, $6, $7, $8)"
#: The cell locked and read, and — only while it is bindable (open, no work) — the
#: reservation, in one statement after the job's lock (so the cell row is current).
_LOCK_CELL_AND_RESERVE = f"""
WITH c AS (SELECT state, work_id FROM cells WHERE job_id = $6 AND target_id = $7 FOR UPDATE)
SELECT c.state, c.work_id,
       CASE WHEN c.work_id IS NULL AND NOT (c.state = ANY($9::text[])) THEN {_RESERVE} END AS reserved
FROM c"""


def _reserve_args(job_id: str, target_id: str, work: Work, routes: list[RouteRef]) -> list[Any]:
    routes = list({r.name: r for r in routes}.values())
    return [
        [intent_key(r.name, work.work_type, work.work_id, job_id, target_id) for r in routes],
        [r.name for r in routes],
        [r.kind for r in routes],
        work.work_type,
        work.work_id,
        job_id,
        target_id,
        now_ms(),
    ]


async def _reserve(conn: asyncpg.Connection, job_id: str, target_id: str, work: Work, routes: list[RouteRef]) -> bool:
    """Reserve ``work`` on every route, all or none; False if any route holds it live.

    One statement: the function ``curaflow_reserve_work`` (migration 0031) inserts the
    intents and turns a unique violation into False, rolling back its own inserts. A route
    named twice counts once (one ``INSERT … ON CONFLICT`` cannot touch a key twice).
    """
    return bool(await conn.fetchval(f"SELECT {_RESERVE}", *_reserve_args(job_id, target_id, work, routes)))


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
    job = await lock_job(conn, job_id)
    if job is None:
        return Binding(None)
    if candidates:  # the cell's lock and the first candidate's reservation in one statement
        row = await conn.fetchrow(
            _LOCK_CELL_AND_RESERVE,
            *_reserve_args(job_id, target.target_id, candidates[0], target.routes),
            _TERMINAL_STATE_NAMES,
        )
    else:
        row = await conn.fetchrow(
            """SELECT state, work_id, NULL::boolean AS reserved FROM cells
               WHERE job_id = $1 AND target_id = $2 FOR UPDATE""",
            job_id,
            target.target_id,
        )
    if row is None:
        return Binding(None)
    if is_terminal(row["state"]) or row["work_id"] is not None:
        return Binding(await load_cell(conn, job_id, target.target_id))
    bound: Work | None = None
    remaining: list[Work] = []
    for i, work in enumerate(candidates):
        reserved = row["reserved"] if i == 0 else await _reserve(conn, job_id, target.target_id, work, target.routes)
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
    step, barrier, held = "", "NULL", ""
    if isinstance(lease, Carry):
        # Carried on: renewed, and the job's barrier judged on the row this transaction
        # locked (as continue_step does).
        step = ", lease_until = $9, lease_owner = $10, heartbeat_at = $8"
        barrier = f"(SELECT {barrier_sql('j', '$8')} FROM jobs j WHERE j.job_id = $1)"
        args += [now + lease.lease_ms, lease.owner]
        if lease.store_id is not None:
            held = f"WITH held AS ({hold_sql('$1', '$2', '$11', '$8')})"
            args.append(lease.store_id)
    elif lease:
        # The step ends with the binding (as end_lease: kept while a delivery is sending).
        step = """, lease_until = CASE WHEN s.sending THEN c.lease_until END,
                     lease_owner = CASE WHEN s.sending THEN c.lease_owner END"""
    updated = await conn.fetchrow(
        f"""{held}
           UPDATE cells c SET state = 'selected', stage = 'fetching', work_id = $3, work_type = $4,
               work = $5, candidates = $6, candidate_report = $7, attempt_count = c.attempt_count + 1,
               updated_at = $8{step}
           FROM (SELECT EXISTS (SELECT 1 FROM delivery_intents d WHERE d.job_id = $1 AND d.target_id = $2
                                AND d.status = 'sending') AS sending) s
           WHERE c.job_id = $1 AND c.target_id = $2
           RETURNING {_C_COLUMNS}, {barrier} AS barrier""",
        *args,
    )
    cell = cell_from_row(updated)
    await sync_job_stage(conn, job_id, known=sole_cell_stage(job, cell))  # changes the job row only
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
) -> CellSnapshot | None:
    """Provisional release of an unavailable bound work, then bind the next candidate.

    Only a cell still ``selected`` with ``work_id`` is released (reference §1.1): its
    reserved intents become ``released`` and the skip is counted in the candidate report
    (``unavailable``, and its ``kind`` — :class:`~curaflow.sources.errors.UnavailableKind`
    — in ``unavailable``). The stored remaining candidates are then tried in order.

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
        """UPDATE delivery_intents SET status = 'released', last_error = $4, updated_at = $5
           WHERE job_id = $1 AND target_id = $2 AND work_id = $3 AND status = 'reserved'""",
        job_id,
        target.target_id,
        work_id,
        skip_reason,
        now_ms(),
    )
    report = CandidateReport.model_validate(row["candidate_report"] or {})
    report.selected = None
    report.rejected += 1
    report.reasons["unavailable"] = report.reasons.get("unavailable", 0) + 1
    report.unavailable[kind] = report.unavailable.get(kind, 0) + 1
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
    copy = f"WITH {copy_pages_sql('$1', '$2', '$3', '$7', '$8')}" if pages is not None else ""
    updated = await conn.fetchrow(
        f"""{copy}
            UPDATE cells c SET state = 'artifact_ready', stage = 'delivering', artifact = $4, updated_at = $5,
                   lease_until = CASE WHEN s.sending THEN c.lease_until END,
                   lease_owner = CASE WHEN s.sending THEN c.lease_owner END
            FROM (SELECT EXISTS (SELECT 1 FROM delivery_intents d WHERE d.job_id = $1 AND d.target_id = $2
                                 AND d.status = 'sending') AS sending) s
            WHERE c.job_id = $1 AND c.target_id = $2 AND c.work_id = $3 AND c.state = ANY($6::text[])
            RETURNING {_C_COLUMNS}""",
        job_id,
        target_id,
        work_id,
        held.model_dump(mode="json") if held is not None else artifact,
        now_ms(),
        _READY_FROM,
        *(pages or ()),
    )
    if updated is None:
        await end_lease(conn, job_id, target_id)
        return await load_cell(conn, job_id, target_id)
    cell = cell_from_row(updated, artifact=held)
    await sync_job_stage(conn, job_id, known=sole_cell_stage(job, cell))  # changes the job row only
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
) -> CellSnapshot | None:
    """Move a cell to a terminal ``state`` with its reason, if the FSM allows it.

    A cell that is already terminal keeps its state (a submitted cell is never
    downgraded). Reserved intents of a cell that ends without delivery are released so
    another job may deliver that work later. ``message`` defaults to the reason's
    user-facing sentence. The move is one ``UPDATE`` guarded by the states the FSM
    allows it from (:data:`_FINISH_FROM`), returning the cell.

    Args:
        locked: the caller already holds the job row lock in this transaction
            (:func:`lock_job`): True, or the row :func:`lock_job` returned (the stage rule
            then reads nothing for a job of one cell); otherwise it is taken here.
        end_attempt: the caller's attempt ends with this call: the cell's lease is
            released also when the cell was terminal already (a beat the attempt sent
            while its request was out may have leased it again); a cell that moves is
            released by the move itself.

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
               lease_until = NULL, lease_owner = NULL
           WHERE job_id = $1 AND target_id = $2 AND state = ANY($7::text[])
           RETURNING {CELL_COLUMNS}""",
        job_id,
        target_id,
        str(state),
        reason,
        (message or (user_message(reason) if reason else None)),
        now,
        _FINISH_FROM[state],
    )
    if row is None:
        if end_attempt:
            await end_lease(conn, job_id, target_id)
        return await load_cell(conn, job_id, target_id)
    if state != CellState.SUBMITTED:
        # Never sent → released (another job may deliver the work); maybe landed (in
        # flight now, or an earlier request's outcome never learnt) → unknown, which
        # keeps the work blocked on that route.
        await conn.execute(
            """UPDATE delivery_intents
               SET status = CASE WHEN status = 'sending' OR maybe_delivered THEN 'unknown' ELSE 'released' END,
                   updated_at = $3
               WHERE job_id = $1 AND target_id = $2 AND status IN ('reserved', 'sending')""",
            job_id,
            target_id,
            now,
        )
    cell = cell_from_row(row)
    await sync_job_stage(conn, job_id, known=sole_cell_stage(job, cell))
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

"""Job rows: durable admission, lookups, cancel requests, workflow bookkeeping.

Admission is durable before it is acknowledged (DESIGN.md decision 2): the job row, its
cells and the ``job.accepted`` event are written in one transaction with an
insert-if-absent on the job id and the idempotency key; the workflow is started after
commit. The first admission's response body is frozen in ``admission_response`` so a
replay answers with an identical body. The job's ``created_at`` and ``deadline_at`` are
the database's clock, read by that insert (DESIGN.md "Ledger times are the database's
clock").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from typing import Any

import asyncpg

from curaflow.domain.messages import JobInput
from curaflow.domain.models import CellSnapshot, JobRecord
from curaflow.ledger.cells import lock_job
from curaflow.ledger.db import DB_NOW_MS, jsonable
from curaflow.ledger.events import NOTIFY_CHANNEL, event_body, push_appended
from curaflow.ledger.records import JOB_COLUMNS, job_from_row, load_job
from curaflow.protocol.models.rules import MIN_DEADLINE_MS
from curaflow.protocol.projection import project_job


@dataclass
class NewJob:
    """What admission asks the ledger to create.

    Attributes:
        job_input: the workflow argument; stored so the reconciler can start a workflow
            that was never started. Its ``created_at_ms`` / ``deadline_at_ms`` are written
            as given unless ``deadline_ms`` is set.
        params: the normalised retrieval view (compared on replay), or None.
        occurrence_at: a scheduled job's nominal time, epoch ms (UTC); None for other
            jobs (their occurrence is the admission, ``created_at``).
        deadline_ms: set by every admission (the API's, ``curaflow run``, the ``admit``
            activity, a schedule's occurrence): the job is dated on the database's clock
            (docs/DESIGN.md "Ledger times are the database's clock") — ``created_at`` is
            the insert's own read of :data:`~curaflow.ledger.db.DB_NOW_MS` and
            ``deadline_at`` that instant plus ``deadline_ms`` (ms), at most
            ``deadline_bound_ms``; the job input's two times are replaced by them in
            everything written and returned. None: the job input's times as given (the
            tests' and benchmarks' fixtures).
        deadline_bound_ms: the latest deadline (epoch ms, UTC): the end of the Temporal
            run that admits the job less its margin
            (:func:`curaflow.domain.execution.run_deadline_bound`); None: unbounded. A
            bound that leaves a new job less than
            :data:`~curaflow.protocol.models.rules.MIN_DEADLINE_MS` creates nothing
            (:class:`RunTooShort`). Only with ``deadline_ms``.
    """

    job_input: JobInput
    idempotency_key: str | None = None
    correlation_id: str | None = None
    callback_url: str | None = None
    labels: dict[str, str] | None = None
    params: dict[str, Any] | None = None
    occurrence_date: str | None = None
    occurrence_at: int | None = None
    deadline_ms: int | None = None
    deadline_bound_ms: int | None = None


@dataclass
class AdmissionRow:
    """A job found or created by :func:`insert_job`.

    Attributes:
        job_input: the created job's workflow argument as written (its times the
            insert's); None when the job already existed (read it with
            :func:`workflow_input`).
    """

    record: JobRecord
    created: bool
    response: dict[str, Any]
    params: dict[str, Any] | None
    job_input: JobInput | None = None


class RunTooShort(Exception):
    """:func:`insert_job` created nothing: ``NewJob.deadline_bound_ms`` leaves the job less
    than the shortest deadline, and no job holds its id or key.

    Attributes:
        now_ms: the database's time the insert judged it at (epoch ms, UTC).
    """

    def __init__(self, now_ms: int) -> None:
        super().__init__(f"the run ends too soon for a deadline (database time {now_ms})")
        self.now_ms = now_ms


def admitted_record(new: NewJob, created_at: int | None = None, deadline_at: int | None = None) -> JobRecord:
    """The job exactly as :func:`insert_job` writes it (queued, every cell pending), dated
    ``created_at`` / ``deadline_at`` (epoch ms; None: the job input's)."""
    inp = new.job_input
    created = inp.created_at_ms if created_at is None else created_at
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
        created_at=created,
        updated_at=created,
        deadline_at=inp.deadline_at_ms if deadline_at is None else deadline_at,
        occurrence_date=new.occurrence_date,
        occurrence_at=new.occurrence_at,
        queries={t.target_id: t.query.model_dump(mode="json") for t in inp.targets},
        cells=[CellSnapshot(target_id=t.target_id, updated_at=created) for t in inp.targets],
    )


#: Stand-ins for the admission's two times in the answer built before the insert (no
#: time of a job is negative), and the ``format()`` arguments the insert puts there:
#: ``created_at`` (the job's ``created_at``, ``updated_at``, ``progress.at``) and
#: ``deadline_at``.
_TIME_ARGUMENTS = {-1: "%1$s", -2: "%2$s"}


def answer_template(new: NewJob) -> str:
    """The frozen admission answer (``{"job": Job}``, the protocol projection of the job as
    :func:`insert_job` writes it) as the text of a PostgreSQL ``format()`` string whose
    first argument is the job's ``created_at`` and second its ``deadline_at`` (epoch ms;
    ``null`` for a fixture without one): the insert fills them in from the database's
    clock. Every other ``%`` is doubled; the text is what ``json.dumps`` writes
    (``ensure_ascii=False``), so the stored answer decodes to the same dict, in the same
    key order, as the projection of the dated job."""
    return _template({"job": project_job(admitted_record(new, -1, -2))})


def _template(value: Any) -> str:
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if type(value) is int:
        return _TIME_ARGUMENTS.get(value) or str(value)
    if isinstance(value, str):
        return encode_basestring(value).replace("%", "%%")
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_template(str(k))}: {_template(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_template(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False).replace("%", "%%")


async def insert_job(conn: asyncpg.Connection, new: NewJob) -> AdmissionRow:
    """Create the job if absent (by job id and by idempotency key), in one transaction.

    One statement (``curaflow_admit_job``, migration 0054) writes the job row, its cells
    and the first admission's answer (frozen in ``admission_response``, so a replay
    answers with the identical body) and, with ``new.deadline_ms``, dates the job on the
    database's clock (``NewJob``); then, in the same statement, ``job.accepted``. Nothing
    is read back: the answer returned is the one stored. A job without a ``callback_url``
    costs that one statement (its own transaction); one with a ``callback_url`` adds
    BEGIN, the push's enqueue and COMMIT; a replay adds the read of the job found.

    Args:
        conn: a connection (the function opens its own transaction, or a savepoint in
            the caller's).
        new: the job to create.

    Returns:
        The created job (``created=True``, with its workflow argument as written) or,
        when the id or key already existed, the existing job with its frozen admission
        response.

    Raises:
        RunTooShort: ``new.deadline_bound_ms`` leaves no deadline and no job holds the
            id or key; nothing is written.
    """
    inp = new.job_input
    given = new.deadline_ms is None
    args = (
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
        inp.created_at_ms if given else None,
        inp.deadline_at_ms if given else None,
        new.occurrence_date,
        answer_template(new),
        new.occurrence_at,
        new.deadline_ms,
        None if given else new.deadline_bound_ms,
        MIN_DEADLINE_MS,
        event_body("job.accepted"),
        NOTIFY_CHANNEL,
    )
    # One statement (curaflow_admit_job, migration 0054): the insert dates the job on one
    # read of the database's clock and writes the job row, its cells (only when the job
    # was created) and the answer; then, only for a created job, ``job.accepted``. A job
    # with a ``callback_url`` enqueues the event's push in the same transaction, so only
    # it (or a caller already in a transaction: a savepoint) opens one.
    if new.callback_url is None and not conn.is_in_transaction():
        row = await conn.fetchrow(_ADMIT, *args)
        assert row is not None
        return await _admitted(conn, new, row)
    async with conn.transaction():
        row = await conn.fetchrow(_ADMIT, *args)
        assert row is not None
        return await _admitted(conn, new, row)


#: :func:`insert_job`'s statement: ``curaflow_admit_job`` (migration 0054).
_ADMIT = f"""SELECT o_now AS now, o_job_id AS job_id, o_created_at AS created_at, o_deadline_at AS deadline_at,
                    o_admission_response AS admission_response, o_seq AS seq, o_at AS at,
                    o_callback_url AS callback_url, o_correlation_id AS correlation_id
             FROM curaflow_admit_job({", ".join(f"${n}" for n in range(1, 23))})"""


async def _admitted(conn: asyncpg.Connection, new: NewJob, row: asyncpg.Record) -> AdmissionRow:
    """What :func:`insert_job`'s statement answered (``row``): the created job, with the
    push of its ``job.accepted`` enqueued (a ``callback_url``: the caller's transaction),
    or the job that already held the id or key.

    Raises:
        RunTooShort: nothing was created and no job holds the id or key (module doc).
    """
    inp = new.job_input
    if row["job_id"] is None:
        existing = await find_existing(conn, inp.job_id, new.idempotency_key)
        if existing is None and new.deadline_ms is not None and new.deadline_bound_ms is not None:
            raise RunTooShort(row["now"])
        assert existing is not None, "insert conflicted but no job found"
        return existing
    created_at, deadline_at = row["created_at"], row["deadline_at"]
    await push_appended(
        conn,
        inp.job_id,
        "job.accepted",
        int(row["seq"]),
        row["at"],
        event_body("job.accepted"),
        row["callback_url"],
        row["correlation_id"],
    )
    return AdmissionRow(
        record=admitted_record(new, created_at, deadline_at),
        created=True,
        response=row["admission_response"],
        params=new.params,
        job_input=inp.model_copy(update={"created_at_ms": created_at, "deadline_at_ms": deadline_at}),
    )


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


async def occurrence_job(conn: asyncpg.Connection, schedule_id: str, minute_ms: int) -> str | None:
    """The id of the plan's job whose nominal time (``jobs.occurrence_at``) falls in the
    minute starting at ``minute_ms`` (epoch ms, UTC), or None; the earliest admitted if
    several (admitted before 2026-12-07, when a change of the plan's zone gave one instant
    two ids). Index ``jobs_schedule_occurrence`` (migration 0039). Jobs admitted before
    that migration have no ``occurrence_at`` and are found by their id only."""
    id_: str | None = await conn.fetchval(
        """SELECT job_id FROM jobs
           WHERE schedule_id = $1 AND occurrence_at >= $2 AND occurrence_at < $2 + 60000
           ORDER BY created_at, job_id LIMIT 1""",
        schedule_id,
        minute_ms,
    )
    return id_


async def occurrence_of(conn: asyncpg.Connection, schedule_id: str, minute_ms: int, job_ids: list[str]) -> str | None:
    """The job a plan's occurrence of the minute starting at ``minute_ms`` (epoch ms, UTC)
    is, or None: the first of ``job_ids`` stored with its workflow argument (the
    occurrence's id in the plan's zone, then its legacy id), else the plan's job of that
    minute (:func:`occurrence_job`: an id written in the plan's zone before a change of it).

    The one lookup of "which job is this occurrence": ``admit_occurrence`` joins the job it
    names (under :func:`lock_occurrence`), and ``curaflow schedules trigger`` prints it
    (until 2026-12-07 the trigger printed the id in the plan's current zone, not the job's
    when the occurrence joined one admitted under the old zone or a legacy id).
    """
    found: str | None = await conn.fetchval(
        """SELECT job_id FROM jobs WHERE job_id = ANY($1::text[]) AND workflow_input IS NOT NULL
           ORDER BY array_position($1::text[], job_id) LIMIT 1""",
        job_ids,
    )
    if found is not None:
        return found
    return await occurrence_job(conn, schedule_id, minute_ms)


async def lock_occurrence(conn: asyncpg.Connection, schedule_id: str, minute_ms: int) -> None:
    """Hold, until the caller's transaction ends, the lock of one nominal minute of a plan:
    two admissions of the same instant under different ids (the plan's zone changed between
    them) cannot both find no job and both insert. A transaction-scoped advisory lock keyed
    by two ``int4`` (the plan id's hash, the minute's number since the epoch): PostgreSQL
    keeps that key space apart from the one-``bigint`` keys of the reconciler, the watch
    and the migrations."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1), $2::int)", schedule_id, minute_ms // 60_000)


async def request_cancel(conn: asyncpg.Connection, job_id: str, reason: str) -> bool:
    """Record a consumer cancel request (first one wins) on an open job. Returns False for
    an unknown job and for one that had already ended: an ended job is not cancelled, and
    its row keeps what it held at its end (until 2026-12-07 the cancel was written on an
    ended job too — by a run added under its id that was sent ``cancel`` before its first
    step; DESIGN.md "One job id, one run").

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
               WHERE job_id = $1 AND completed_at IS NULL""",
            job_id,
            reason,
        )
    return status.endswith("1")


async def job_ended(pool: asyncpg.Pool, job_id: str) -> bool:
    """Whether the job ended in the ledger (``jobs.completed_at`` set); False for an open or
    unknown job. One statement."""
    return await pool.fetchval("SELECT completed_at IS NOT NULL FROM jobs WHERE job_id = $1", job_id) is True


async def deadline_of(pool: asyncpg.Pool, job_id: str) -> int | None:
    """The job's deadline (``jobs.deadline_at``, epoch ms UTC), None when unknown or unset.

    The steps have it from their opening (:class:`curaflow.ledger.cells.StepOpened`); read
    here where that is not at hand (an ``acquire`` attempt that failed: the deadline
    owns a failure after it passed).
    """
    value = await pool.fetchval("SELECT deadline_at FROM jobs WHERE job_id = $1", job_id)
    return int(value) if value is not None else None

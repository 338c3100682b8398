"""A cell's lease, and the job's deadline, judged on one clock: the database's.

Worker processes on several hosts share one ledger. A cell's lease (``cells.lease_until``,
``heartbeat_at``) is written by the attempt that holds the cell and judged by other
processes — the reconciler (:data:`~curaflow.ledger.reconciler.NO_LIVE_ATTEMPT`: no job is
converged while an attempt of it is live), the API (``lease_active``,
``lease_expires_at``). Until 2026-12-06 the writer stamped the lease from its own wall
clock and each reader judged it on its own: a host whose clock is off by more than a
lease (60 s by default) saw another worker's live lease as lapsed (a job converged under
an attempt still running) or a dead worker's lease as live for as long as its skew (a job
stuck until then); a worker behind the clock opened steps past the job's deadline. Now
the lease is written and compared in SQL on the database's clock
(:data:`curaflow.ledger.db.DB_NOW_MS`), as the send lease and the rate gates were.

A job's ``created_at`` and ``deadline_at`` were the admitting process's clock (the API,
``curaflow run``, a Temporal client's ``admit``, a schedule's occurrence): an admitter
off by more than a job's deadline gave the barrier a job already expired, or one open
its skew past its deadline. Now the admission's insert dates the job on the database's
clock, and everything built after it (the workflow's argument, the frozen answer)
carries those times.

Each test plays two hosts in this process: :func:`host_clock` skews every wall-clock
read of curaflow's own code (``now_ms``, wherever a module imported it) for the calls of
one side, the other side reads the real clock. On the session's real PostgreSQL.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import sys
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from curaflow.api.jobs import read_job
from curaflow.config import Settings
from curaflow.config.schedules import ScheduleConfig
from curaflow.domain.cells import CellStage
from curaflow.domain.execution import job_workflow, run_end_room_ms
from curaflow.domain.messages import JobInput, RouteRef, RunLimit, TargetSpec
from curaflow.domain.models import CandidateReport, Work
from curaflow.domain.occurrence import AdmitOccurrenceInput, OccurrenceInput
from curaflow.jobs.admission import Admission, Admitter
from curaflow.ledger import cells, db, event_pushes
from curaflow.ledger.jobs import mark_workflow_started, request_cancel
from curaflow.ledger.reconciler import attempt_live
from curaflow.protocol.errors import ProtocolError
from curaflow.routes import DirectoryRouteConfig
from curaflow.schedules.admit import admit_occurrence
from tests.support import ledger_job, short_id

pytestmark = pytest.mark.integration

#: Far more than a lease (60 s by default) or the reconciler's graces.
SKEW_MS = 5 * 60_000


#: The real clock, read before any test patches it.
_REAL_NOW_MS = db.now_ms
#: The skew of the host the running code plays (a task keeps the value of the context it
#: was created in: a worker started inside :func:`host_clock` stays on its host).
_SKEW_MS: contextvars.ContextVar[int] = contextvars.ContextVar("host_skew_ms", default=0)


def _host_now_ms() -> int:
    return _REAL_NOW_MS() + _SKEW_MS.get()


@contextlib.contextmanager
def host_clock(skew_ms: int) -> Iterator[None]:
    """This process plays a host whose wall clock is ``skew_ms`` off: every module of
    curaflow (and of its activities) that reads :func:`curaflow.ledger.db.now_ms` reads it
    skewed while the block runs — in this task and in every task created inside the block
    (an in-process worker started there), while the outermost block lasts; a block inside
    another plays another host for its own calls only."""
    token = _SKEW_MS.set(skew_ms)
    try:
        with pytest.MonkeyPatch.context() as patch:
            for name, module in list(sys.modules.items()):
                if name.split(".")[0] in ("curaflow", "activities") and getattr(module, "now_ms", None) is _REAL_NOW_MS:
                    patch.setattr(module, "now_ms", _host_now_ms)
            yield
    finally:
        _SKEW_MS.reset(token)


Writer = Callable[[asyncpg.Pool, str, TargetSpec, int], Awaitable[None]]


async def _open(pool: asyncpg.Pool, job_id: str, target: TargetSpec, lease_ms: int) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await cells.start_step(
            conn, job_id, target.target_id, stage=CellStage.SEARCHING, attempt=1, lease_ms=lease_ms, owner="w"
        )


async def _beat(pool: asyncpg.Pool, job_id: str, target: TargetSpec, lease_ms: int) -> None:
    await _open(pool, job_id, target, lease_ms)
    await cells.heartbeat(pool, job_id, target.target_id, lease_ms)


async def _carry_bound(pool: asyncpg.Pool, job_id: str, target: TargetSpec, lease_ms: int) -> None:
    """acquire's step adopting a cell bound before: carried on by :func:`continue_step`."""
    async with pool.acquire() as conn, conn.transaction():
        await cells.bind_work(conn, job_id, target, [Work(work_id=f"w{short_id()}")], CandidateReport())
    await _open(pool, job_id, target, lease_ms)
    async with pool.acquire() as conn, conn.transaction():
        assert await cells.continue_step(conn, job_id, target.target_id, lease_ms=lease_ms, owner="w") is None


async def _carry_binding(pool: asyncpg.Pool, job_id: str, target: TargetSpec, lease_ms: int) -> None:
    """acquire's search binding a work and carrying its step on (:class:`cells.Carry`)."""
    await _open(pool, job_id, target, lease_ms)
    async with pool.acquire() as conn, conn.transaction():
        binding = await cells.bind_search(
            conn,
            job_id,
            target,
            [Work(work_id=f"w{short_id()}")],
            CandidateReport(),
            carry=cells.Carry(lease_ms=lease_ms, owner="w"),
        )
    assert binding.bound and binding.opened, binding


WRITERS: dict[str, Writer] = {
    "start_step": _open,
    "heartbeat": _beat,
    "continue_step": _carry_bound,
    "bind_search_carry": _carry_binding,
}


async def _job(pool: asyncpg.Pool, deadline_in_ms: int = 3_600_000) -> tuple[str, TargetSpec]:
    target = TargetSpec(target_id="demo", routes=[RouteRef(name=f"r-{short_id()}", kind="directory")])
    return await ledger_job(pool, target, label="clock", deadline_in_ms=deadline_in_ms), target


async def _judged_live(pool: asyncpg.Pool, job_id: str) -> tuple[bool, bool]:
    """Whether the job's attempt is live to the reconciler and to ``GET /jobs/{id}``."""
    job = await read_job(pool, job_id)  # type: ignore[arg-type]
    assert job["lease_active"] == (job["lease_expires_at"] is not None), job
    return await attempt_live(pool, job_id), bool(job["lease_active"])


@pytest.mark.parametrize("writer", sorted(WRITERS))
async def test_a_live_lease_written_on_a_clock_behind_is_live_to_others(ledger_pool: asyncpg.Pool, writer: str) -> None:
    """A worker whose clock is five minutes behind holds the cell (a 60 s lease, just
    written): the reconciler must not converge the job under it, the API reports it."""
    job_id, target = await _job(ledger_pool)
    with host_clock(-SKEW_MS):
        await WRITERS[writer](ledger_pool, job_id, target, 60_000)
    assert await _judged_live(ledger_pool, job_id) == (True, True)


@pytest.mark.parametrize("writer", sorted(WRITERS))
async def test_a_lapsed_lease_written_on_a_clock_ahead_is_lapsed_to_others(
    ledger_pool: asyncpg.Pool, writer: str
) -> None:
    """A worker whose clock is five minutes ahead wrote a lease that has run out (a lease
    of 0 ms: no wait in the test) and died: no attempt holds the job any more."""
    job_id, target = await _job(ledger_pool)
    with host_clock(SKEW_MS):
        await WRITERS[writer](ledger_pool, job_id, target, 0)
    assert await _judged_live(ledger_pool, job_id) == (False, False)


@pytest.mark.parametrize("skew_ms", [SKEW_MS, -SKEW_MS], ids=["ahead", "behind"])
async def test_a_reader_judges_a_lease_whatever_its_own_clock(ledger_pool: asyncpg.Pool, skew_ms: int) -> None:
    """The reconciler or the API on a skewed host: a live lease stays live, a lapsed one
    lapsed."""
    live, target = await _job(ledger_pool)
    await _beat(ledger_pool, live, target, 60_000)
    lapsed, target = await _job(ledger_pool)
    await _beat(ledger_pool, lapsed, target, 0)
    with host_clock(skew_ms):
        assert await _judged_live(ledger_pool, live) == (True, True)
        assert await _judged_live(ledger_pool, lapsed) == (False, False)


@pytest.mark.parametrize("skew_ms", [SKEW_MS, -SKEW_MS], ids=["ahead", "behind"])
async def test_the_deadline_barrier_is_judged_on_the_database_clock(ledger_pool: asyncpg.Pool, skew_ms: int) -> None:
    """A job whose deadline passed a minute ago opens no step, and one due in a minute
    does, whatever the worker's clock says."""
    past, _ = await _job(ledger_pool, deadline_in_ms=-60_000)
    due, _ = await _job(ledger_pool, deadline_in_ms=60_000)
    with host_clock(skew_ms):
        async with ledger_pool.acquire() as conn, conn.transaction():
            opened = await cells.start_step(
                conn, past, "demo", stage=CellStage.SEARCHING, attempt=1, lease_ms=60_000, owner="w"
            )
            assert opened.barrier == cells.Barrier.DEADLINE, opened
            job = await cells.lock_job(conn, past)
            assert job is not None and cells.barrier_of(job) == cells.Barrier.DEADLINE
        async with ledger_pool.acquire() as conn, conn.transaction():
            opened = await cells.start_step(
                conn, due, "demo", stage=CellStage.SEARCHING, attempt=1, lease_ms=60_000, owner="w"
            )
            assert opened.barrier is None, opened
            job = await cells.lock_job(conn, due)
            assert job is not None and cells.barrier_of(job) is None
            assert await cells.continue_step(conn, due, "demo", lease_ms=60_000, owner="w") is None


async def _pending_push(pool: asyncpg.Pool) -> str:
    """A job with one event pending its push to the consumer's callback."""
    job_id, _ = await _job(pool)
    async with pool.acquire() as conn, conn.transaction():
        seq = await conn.fetchval("SELECT min(seq) FROM job_events WHERE job_id = $1", job_id)
        await event_pushes.enqueue_push(conn, job_id, seq, f"e-{short_id()}", "http://127.0.0.1:9/hook", {})
    return job_id


@pytest.mark.parametrize("skew_ms", [SKEW_MS, -SKEW_MS], ids=["ahead", "behind"])
async def test_an_event_push_claim_is_judged_on_the_database_clock(ledger_pool: asyncpg.Pool, skew_ms: int) -> None:
    """The push lease (``event_pushes.claimed_until``) is the same kind: a pusher's live
    claim holds the event against every other pusher (no second send while the first is
    out), a lapsed one does not, whichever of them has the skewed clock."""
    for claimer, other in ((skew_ms, 0), (0, skew_ms)):
        live, lapsed = await _pending_push(ledger_pool), await _pending_push(ledger_pool)
        with host_clock(claimer):
            assert (await event_pushes.claim_next(ledger_pool, live, "first", 60_000)).push is not None
            assert (await event_pushes.claim_next(ledger_pool, lapsed, "first", 0)).push is not None
        with host_clock(other):
            assert (await event_pushes.claim_next(ledger_pool, live, "second", 60_000)).busy, (claimer, other)
            assert (await event_pushes.claim_next(ledger_pool, lapsed, "second", 60_000)).push is not None


@pytest.mark.parametrize("skew_ms", [SKEW_MS, -SKEW_MS], ids=["ahead", "behind"])
async def test_a_cancel_and_a_workflow_start_are_recorded_on_the_database_clock(
    ledger_pool: asyncpg.Pool, skew_ms: int
) -> None:
    """The reconciler's graces judge ``cancel_requested_at`` (rule 3) and
    ``workflow_started_at`` (rule 4) on the database's clock: the API that records them
    writes that clock's time, not its own."""
    job_id, _ = await _job(ledger_pool)
    before = await ledger_pool.fetchval(f"SELECT {db.DB_NOW_MS}")
    with host_clock(skew_ms):
        async with ledger_pool.acquire() as conn:
            await mark_workflow_started(conn, job_id)
            assert await request_cancel(conn, job_id, "test")
    after = await ledger_pool.fetchval(f"SELECT {db.DB_NOW_MS}")
    row = await ledger_pool.fetchrow(
        "SELECT cancel_requested_at, workflow_started_at FROM jobs WHERE job_id = $1", job_id
    )
    assert before <= row["workflow_started_at"] <= row["cancel_requested_at"] <= after, (before, dict(row), after)


# --- a job's created_at and deadline_at: the admission's insert reads the database's clock


def _admitter(pool: asyncpg.Pool, tmp_path: Path) -> Admitter:
    """The admission of ``POST /jobs``, ``curaflow run`` and the ``admit`` activity (the
    default target ``demo``), writing only the ledger."""
    return Admitter(Settings(state_dir=tmp_path, routes={"out": DirectoryRouteConfig(path=tmp_path)}), pool, None)


async def _admit_from_temporal(admitter: Admitter, key: str, limit: RunLimit) -> Admission:
    """``key``'s Task admitted as a Temporal client's start does (``admit``, run ``limit``)."""
    return await admitter.admit(
        _task(key),
        trigger="temporal",
        workflow_id=f"demo@manual-{key}",
        workflow_type=job_workflow("candidate_search"),
        start=False,
        run_limit=limit,
    )


async def _dated_on_the_database_clock(
    pool: asyncpg.Pool, job_id: str, before: int, deadline_ms: int | None, job_input: JobInput | None
) -> int:
    """Assert the job's times are the database's: ``created_at`` read between ``before`` and
    now on that clock, ``deadline_at`` its deadline after it (``deadline_ms``; None: any
    later instant), and every copy of them — the stored workflow argument, the frozen
    admission answer, ``job.accepted``, the cell, the argument the admission returned —
    the same. Returns the deadline."""
    after = await pool.fetchval(f"SELECT {db.DB_NOW_MS}")
    row = await pool.fetchrow(
        """SELECT created_at, updated_at, deadline_at, workflow_input, admission_response FROM jobs
           WHERE job_id = $1""",
        job_id,
    )
    assert row is not None
    created, deadline = row["created_at"], row["deadline_at"]
    assert before <= created <= after, (before, created, after)
    if deadline_ms is not None:
        assert deadline == created + deadline_ms, (created, deadline)
    assert created < deadline
    assert row["updated_at"] == created
    stored = JobInput.model_validate(row["workflow_input"])
    assert (stored.created_at_ms, stored.deadline_at_ms) == (created, deadline)
    if job_input is not None:
        assert job_input == stored
    answer = row["admission_response"]["job"]
    assert (answer["created_at"], answer["updated_at"], answer["deadline_at"]) == (created, created, deadline)
    assert answer["progress"]["at"] == created
    cell = await pool.fetchrow("SELECT created_at, updated_at FROM cells WHERE job_id = $1", job_id)
    assert cell is not None and (cell["created_at"], cell["updated_at"]) == (created, created)
    accepted = await pool.fetchval("SELECT at FROM job_events WHERE job_id = $1 AND type = 'job.accepted'", job_id)
    assert accepted == created
    return deadline


def _task(key: str, **extra: Any) -> dict[str, Any]:
    return {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": key,
        "params": {"target_id": "demo"},
        **extra,
    }


@pytest.mark.parametrize("skew_ms", [SKEW_MS, -SKEW_MS], ids=["ahead", "behind"])
async def test_an_admitted_job_s_deadline_is_on_the_database_clock(
    ledger_pool: asyncpg.Pool, tmp_path: Path, skew_ms: int
) -> None:
    """The API (or ``curaflow run``) on a host five minutes off admits a job with a
    two-minute deadline: the deadline is two minutes after the admission on the clock
    every judge reads — the database's barrier finds the job open (behind: it was past its
    deadline at once; ahead: it stayed open five minutes after it should have ended) — and
    a replay answers the first admission's body."""
    admitter = _admitter(ledger_pool, tmp_path)
    key = f"clock-{short_id()}"
    before = await ledger_pool.fetchval(f"SELECT {db.DB_NOW_MS}")
    # The answer is stored as a format() string the insert dates: text that reads as its
    # directives, or as the stand-in times, is the consumer's, as sent.
    task = _task(key, deadline_ms=120_000, correlation_id='-1 %1$s %2$s %% "-2" ü')
    with host_clock(skew_ms):
        admission = await admitter.admit(task, start=False)
        replay = await admitter.admit(task, start=False)
    assert admission.body["job"]["correlation_id"] == '-1 %1$s %2$s %% "-2" ü'
    async with ledger_pool.acquire() as conn, conn.transaction():
        job = await cells.lock_job(conn, admission.job_id)
        assert job is not None and cells.barrier_of(job) is None
    await _dated_on_the_database_clock(ledger_pool, admission.job_id, before, 120_000, admission.job_input)
    assert not admission.replayed and replay.replayed
    assert json.dumps(replay.body) == json.dumps(admission.body)
    stored = await ledger_pool.fetchval("SELECT admission_response FROM jobs WHERE job_id = $1", admission.job_id)
    assert json.dumps(stored) == json.dumps(admission.body)


@pytest.mark.parametrize("skew_ms", [SKEW_MS, -SKEW_MS], ids=["ahead", "behind"])
async def test_a_temporal_client_s_run_bounds_the_deadline_on_the_database_clock(
    ledger_pool: asyncpg.Pool, tmp_path: Path, skew_ms: int
) -> None:
    """The ``admit`` activity of a Temporal client's start, on a worker five minutes off:
    the run ends (Temporal's clock, here the database's) in four minutes, so the job's
    deadline is that end less the job's room to end itself (:func:`run_end_room_ms`) —
    judged from the database's now, not the worker's (ahead, the worker found the run
    already over and refused the Task)."""
    admitter = _admitter(ledger_pool, tmp_path)
    key = f"clock-run-{short_id()}"
    before = await ledger_pool.fetchval(f"SELECT {db.DB_NOW_MS}")
    limit = RunLimit(ends_at_ms=before + 240_000, timeout="run_timeout")
    with host_clock(skew_ms):
        admission = await _admit_from_temporal(admitter, key, limit)
    deadline = await _dated_on_the_database_clock(ledger_pool, admission.job_id, before, None, admission.job_input)
    assert admission.job_input is not None
    assert deadline == limit.ends_at_ms - run_end_room_ms(admission.job_input.budgets.heartbeat_timeout_ms)


@pytest.mark.parametrize("skew_ms", [SKEW_MS, -SKEW_MS], ids=["ahead", "behind"])
async def test_a_run_too_short_is_judged_on_the_database_clock(
    ledger_pool: asyncpg.Pool, tmp_path: Path, skew_ms: int
) -> None:
    """A run that Temporal closes in 20 s leaves no deadline (its end less 30 s is past),
    whatever the admitting worker's clock says (behind, it gave the job five minutes);
    nothing is written, and the refusal says how soon the run closes."""
    admitter = _admitter(ledger_pool, tmp_path)
    key = f"clock-short-{short_id()}"
    now = await ledger_pool.fetchval(f"SELECT {db.DB_NOW_MS}")
    limit = RunLimit(ends_at_ms=now + 20_000, timeout="run_timeout")
    with host_clock(skew_ms), pytest.raises(ProtocolError) as refused:
        await _admit_from_temporal(admitter, key, limit)
    assert refused.value.detail["field"] == "run_timeout", refused.value.detail
    assert " 19 s from now" in refused.value.message or " 20 s from now" in refused.value.message, refused.value
    assert await ledger_pool.fetchval("SELECT 1 FROM jobs WHERE job_id = $1", f"demo@manual-{key}") is None


@pytest.mark.parametrize("skew_ms", [SKEW_MS, -SKEW_MS], ids=["ahead", "behind"])
async def test_an_occurrence_s_deadline_is_on_the_database_clock(
    ledger_pool: asyncpg.Pool, tmp_path: Path, skew_ms: int
) -> None:
    """The schedule trampoline's ``admit_occurrence`` on a worker five minutes off: the
    occurrence's job is dated, and its default deadline (30 min) judged, on the database's
    clock; the argument it returns (the job's workflow's) carries those times."""
    plan = f"clock{short_id()}"
    settings = Settings(
        state_dir=tmp_path,
        routes={"out": DirectoryRouteConfig(path=tmp_path)},
        schedules=[ScheduleConfig(id=plan, cron=["0 3 * * *"])],
    )
    occurrence = OccurrenceInput(schedule_id=plan, cron=["0 3 * * *"], task_queue="curaflow")
    at = int(datetime(2026, 12, 6, 3, tzinfo=UTC).timestamp() * 1000)
    before = await ledger_pool.fetchval(f"SELECT {db.DB_NOW_MS}")
    with host_clock(skew_ms):
        admitted = await admit_occurrence(
            ledger_pool, settings, AdmitOccurrenceInput(occurrence=occurrence, scheduled_at_ms=at, trampoline_id="t")
        )
    assert admitted.created
    await _dated_on_the_database_clock(
        ledger_pool, admitted.job_id, before, settings.budgets.default_deadline_ms, admitted.job_input
    )

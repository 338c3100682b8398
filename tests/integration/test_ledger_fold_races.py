"""The ledger's one-statement folds (migrations 0054-0056) under races and kills.

``curaflow_admit_job`` (admission), ``curaflow_finish_job`` (the job's end) and
``curaflow_record_delivered`` (a route's receipt) each run what were two statements in one
call. These tests race them against each other on real PostgreSQL and kill a backend
while the call waits mid-way, and check what must hold whatever the interleaving: one
job per idempotency key and one ``job.accepted``, the same frozen answer (byte for byte)
to every admission of the key, a gap-free event sequence with one terminal event, the
outcome equal to what the ledger holds, no deadlock, and nothing half-written.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import asyncpg
import pytest

from curaflow.config.delivery import ROUTE_RATE_LIMIT_CAP_MS
from curaflow.domain.cells import CellStage
from curaflow.domain.messages import JobInput, RouteRef, TargetSpec
from curaflow.domain.models import CandidateReport, Work
from curaflow.ledger import cells, deliveries
from curaflow.ledger.db import create_pool, now_ms
from curaflow.ledger.finish import finish_job
from curaflow.ledger.jobs import NewJob, insert_job, request_cancel
from curaflow.protocol.models.events import TERMINAL_EVENT_TYPES
from tests.support import ledger_job, waiting_for_a_lock

pytestmark = pytest.mark.integration

HOOK = "https://consumer.example/hook"


def _new(job_id: str, key: str, *, callback: bool, note: str) -> NewJob:
    now = now_ms()
    inp = JobInput(
        job_id=job_id,
        plan_id="demo",
        created_at_ms=now,
        deadline_at_ms=now + 3_600_000,
        targets=[TargetSpec(target_id="demo", routes=[RouteRef(name="a", kind="directory")])],
    )
    return NewJob(
        job_input=inp,
        idempotency_key=key,
        callback_url=HOOK if callback else None,
        labels={"note": note},
        correlation_id=note,
        deadline_ms=3_600_000,
    )


async def _admit(pool: asyncpg.Pool, new: NewJob):  # type: ignore[no-untyped-def]
    async with pool.acquire() as conn:
        return await insert_job(conn, new)


async def _events(pool: asyncpg.Pool, job_id: str) -> list[tuple[int, str]]:
    rows = await pool.fetch("SELECT seq, type FROM job_events WHERE job_id = $1 ORDER BY seq", job_id)
    return [(r["seq"], r["type"]) for r in rows]


@pytest.mark.parametrize("callback", [False, True], ids=["no-callback", "callback"])
@pytest.mark.parametrize("body", ["same", "different"])
@pytest.mark.parametrize("ids", ["one-id", "own-ids"])
async def test_concurrent_admissions_of_one_key_make_one_job_and_answer_alike(
    ledger_pool: asyncpg.Pool, database_url: str, callback: bool, body: str, ids: str
) -> None:
    """Six admissions of one idempotency key at once (the same body, or each its own
    labels and a non-ASCII, large correlation id; the same job id or each its own): one
    job, one ``job.accepted`` (seq 1), one push of it for a job with a callback, and every
    answer — the creator's and the five replays' — is the stored answer, byte for byte."""
    key = f"race-{uuid.uuid4().hex[:8]}"
    base = f"demo@manual-race-{uuid.uuid4().hex[:8]}"
    news = [
        _new(
            base if ids == "one-id" else f"{base}-{n}",
            key,
            callback=callback,
            note="même" if body == "same" else f"ノート {n} " + "é" * 4000,
        )
        for n in range(6)
    ]
    admitters = await create_pool(database_url, min_size=len(news), max_size=len(news))
    try:
        rows = await asyncio.gather(*(_admit(admitters, new) for new in news))
    finally:
        await admitters.close()
    created = [r for r in rows if r.created]
    assert len(created) == 1, [r.created for r in rows]
    job_id = created[0].record.job_id
    assert {r.record.job_id for r in rows} == {job_id}
    stored = await ledger_pool.fetchval("SELECT admission_response::text FROM jobs WHERE job_id = $1", job_id)
    for row in rows:
        answer = row.response if isinstance(row.response, str) else json.dumps(row.response, ensure_ascii=False)
        assert answer == stored
    assert await ledger_pool.fetchval("SELECT count(*) FROM jobs WHERE idempotency_key = $1", key) == 1
    assert await _events(ledger_pool, job_id) == [(1, "job.accepted")]
    pushes = await ledger_pool.fetch("SELECT seq FROM event_pushes WHERE job_id = $1", job_id)
    assert [p["seq"] for p in pushes] == ([1] if callback else [])


async def _sending_job(pool: asyncpg.Pool, routes: int) -> tuple[str, list[str]]:
    """A job of one cell whose work is being sent on ``routes`` routes: its id and the
    intents' idempotency keys."""
    refs = [RouteRef(name=f"{n}-{uuid.uuid4().hex[:6]}", kind="directory") for n in "abc"[:routes]]
    target = TargetSpec(target_id="demo", routes=refs)
    work = Work(work_id=f"w{uuid.uuid4().hex[:8]}")
    job_id = await ledger_job(pool, target, label="folds")
    async with pool.acquire() as conn, conn.transaction():
        await cells.bind_work(conn, job_id, target, [work], CandidateReport())
        await cells.artifact_ready(conn, job_id, "demo", work.work_id, {"work_id": work.work_id, "files": []})
    keys = []
    for route in refs:
        async with pool.acquire() as conn, conn.transaction():
            cell, *_ = await cells.start_step(
                conn, job_id, "demo", stage=CellStage.DELIVERING, attempt=1, lease_ms=60_000, owner=route.name
            )
            claim = await deliveries.claim_send(
                conn, job_id, "demo", route.name, rate_limit_cap_ms=ROUTE_RATE_LIMIT_CAP_MS, opened=cell
            )
            assert claim.decision == "send" and claim.idempotency_key
            keys.append(claim.idempotency_key)
    return job_id, keys


async def _receipt(pool: asyncpg.Pool, job_id: str, key: str):  # type: ignore[no-untyped-def]
    async with pool.acquire() as conn, conn.transaction():
        return await deliveries.record_delivered(conn, job_id, "demo", key, remote_id=f"m-{key[:6]}")


async def _finish(pool: asyncpg.Pool, job_id: str, cause: str):  # type: ignore[no-untyped-def]
    async with pool.acquire() as conn:
        return await finish_job(conn, job_id, cause=cause)


async def _terminated_mid_call(pool: asyncpg.Pool, pid: int, task: asyncio.Task[Any]) -> None:
    """Terminate backend ``pid`` (the one ``task``'s call runs on, waiting) and see the call
    end with its connection gone."""
    assert await pool.fetchval("SELECT pg_terminate_backend($1)", pid)
    with pytest.raises((asyncpg.AdminShutdownError, asyncpg.ConnectionDoesNotExistError, asyncpg.InterfaceError)):
        await asyncio.wait_for(task, 10)


async def _assert_consistent(pool: asyncpg.Pool, job_id: str) -> None:
    """The event stream is gap-free from 1 with one terminal event, last; the outcome
    record's status is the job row's and its cells' verdict is the cell the ledger holds."""
    events = await _events(pool, job_id)
    assert [s for s, _ in events] == list(range(1, len(events) + 1)), events
    terminal = [t for _, t in events if t in TERMINAL_EVENT_TYPES.values()]
    assert len(terminal) == 1 and events[-1][1] == terminal[0], events
    job = await pool.fetchrow(
        "SELECT business_status, completed_at, event_seq FROM jobs WHERE job_id = $1",
        job_id,
    )
    assert job["event_seq"] == len(events)
    outcome = await pool.fetchrow("SELECT business_status, record FROM outcomes WHERE job_id = $1", job_id)
    assert outcome is not None and outcome["business_status"] == job["business_status"]
    assert job["completed_at"] is not None
    leases = await pool.fetchval("SELECT count(*) FROM cells WHERE job_id = $1 AND lease_owner IS NOT NULL", job_id)
    assert leases == 0


@pytest.mark.parametrize("cause", ["deadline", "cancelled", "stalled"])
async def test_receipts_racing_the_finish_keep_the_lock_order_and_the_stream(
    ledger_pool: asyncpg.Pool, database_url: str, cause: str
) -> None:
    """Two routes' receipts of one cell and the job's finish (the deadline, a cancel, the
    reconciler's) sent at once, all blocked behind one holder of the job row and let go
    together: no deadlock, each statement waits its turn, one terminal event on a
    gap-free stream, and the receipts that landed are recorded delivered whatever the
    order."""
    job_id, keys = await _sending_job(ledger_pool, 2)
    racers = await create_pool(database_url, min_size=3, max_size=3)
    try:
        async with ledger_pool.acquire() as holder:
            tx = holder.transaction()
            await tx.start()
            await holder.execute("SELECT 1 FROM jobs WHERE job_id = $1 FOR UPDATE", job_id)
            tasks = [asyncio.create_task(_receipt(racers, job_id, k)) for k in keys]
            tasks.append(asyncio.create_task(_finish(racers, job_id, cause)))
            await waiting_for_a_lock(ledger_pool)
            await tx.commit()
        results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 30)
    finally:
        await racers.close()
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, errors
    await _assert_consistent(ledger_pool, job_id)
    statuses = {
        r["idempotency_key"]: r["status"]
        for r in await ledger_pool.fetch(
            "SELECT idempotency_key, status FROM delivery_intents WHERE job_id = $1", job_id
        )
    }
    assert statuses == dict.fromkeys(keys, "delivered")


async def test_a_receipt_killed_waiting_mid_call_writes_nothing_and_a_retry_converges(
    ledger_pool: asyncpg.Pool, database_url: str
) -> None:
    """``curaflow_record_delivered`` holds the job row and waits on the intent (another
    session holds it); its backend is terminated: the job row is free again, the intent
    as it was, no route gate or event touched; the receipt sent again records it."""
    job_id, (key,) = await _sending_job(ledger_pool, 1)
    before = await _events(ledger_pool, job_id)
    receiver_pool = await create_pool(database_url, min_size=1, max_size=1)
    receiver = await receiver_pool.acquire()
    try:
        pid = await receiver.fetchval("SELECT pg_backend_pid()")
        async with ledger_pool.acquire() as holder:
            tx = holder.transaction()
            await tx.start()
            await holder.execute("SELECT 1 FROM delivery_intents WHERE idempotency_key = $1 FOR UPDATE", key)

            async def receipt() -> None:
                async with receiver.transaction():
                    await deliveries.record_delivered(receiver, job_id, "demo", key)

            task = asyncio.create_task(receipt())
            await waiting_for_a_lock(ledger_pool)
            # It holds the job row (taken first): a lock on it from here would wait.
            held = await ledger_pool.fetchval(
                """SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
                   WHERE l.pid = $1 AND c.relname = 'jobs' AND l.mode = 'RowShareLock' AND l.granted""",
                pid,
            )
            assert held == 1
            await _terminated_mid_call(ledger_pool, pid, task)
            await tx.rollback()
    finally:
        await receiver_pool.release(receiver)
        await receiver_pool.close()
    row = await ledger_pool.fetchrow(
        "SELECT status, delivered_at FROM delivery_intents WHERE idempotency_key = $1", key
    )
    assert (row["status"], row["delivered_at"]) == ("sending", None)
    assert await _events(ledger_pool, job_id) == before
    cell = await _receipt(ledger_pool, job_id, key)
    assert cell is not None and str(cell.state) == "submitted"
    finished = await _finish(ledger_pool, job_id, "completed")
    assert finished is not None and finished.outcome is not None
    await _assert_consistent(ledger_pool, job_id)


async def test_a_finish_killed_waiting_mid_call_writes_nothing_and_a_retry_converges(
    ledger_pool: asyncpg.Pool, database_url: str
) -> None:
    """``curaflow_finish_job`` has written the job row's end and waits on the outcome's
    insert (another session inserts the job's outcome and holds it uncommitted); its
    backend is terminated: no end, no terminal event, no outcome; the finish sent again
    writes them once."""
    job_id, (key,) = await _sending_job(ledger_pool, 1)
    await _receipt(ledger_pool, job_id, key)
    before = await _events(ledger_pool, job_id)
    finisher_pool = await create_pool(database_url, min_size=1, max_size=1)
    finisher = await finisher_pool.acquire()
    try:
        pid = await finisher.fetchval("SELECT pg_backend_pid()")
        async with ledger_pool.acquire() as holder:
            tx = holder.transaction()
            await tx.start()
            await holder.execute(
                "INSERT INTO outcomes (job_id, business_status, alertable, record, created_at)"
                " VALUES ($1, 'other', false, '{}'::jsonb, 0)",
                job_id,
            )
            task = asyncio.create_task(finish_job(finisher, job_id, cause="completed"))
            await waiting_for_a_lock(ledger_pool)
            await _terminated_mid_call(ledger_pool, pid, task)
            await tx.rollback()
    finally:
        await finisher_pool.release(finisher)
        await finisher_pool.close()
    job = await ledger_pool.fetchrow("SELECT completed_at, business_status FROM jobs WHERE job_id = $1", job_id)
    assert (job["completed_at"], job["business_status"]) == (None, None)
    assert await ledger_pool.fetchval("SELECT count(*) FROM outcomes WHERE job_id = $1", job_id) == 0
    assert await _events(ledger_pool, job_id) == before
    finished = await _finish(ledger_pool, job_id, "completed")
    assert finished is not None and finished.outcome is not None
    assert finished.record.business_status == "success"
    await _assert_consistent(ledger_pool, job_id)


@pytest.mark.parametrize("callback", [False, True], ids=["no-callback", "callback"])
async def test_an_admission_killed_mid_call_leaves_no_job_and_its_replay_creates_it(
    ledger_pool: asyncpg.Pool, database_url: str, callback: bool
) -> None:
    """``curaflow_admit_job`` has inserted the job row and its cells and waits while
    appending ``job.accepted`` (a trigger of the test's holds it on a lock the test
    holds); its backend is terminated: no job, no cell, no event, no push — the insert
    was not committed on its own, with or without BEGIN; the admission sent again
    creates the job once."""
    key = f"kill-{uuid.uuid4().hex[:8]}"
    new = _new(f"demo@manual-kill-{uuid.uuid4().hex[:8]}", key, callback=callback, note="ü")
    job_id = new.job_input.job_id
    lock = 0x5EED_0000 + int(uuid.uuid4().hex[:4], 16)
    fn = f"hold_{uuid.uuid4().hex[:8]}"
    await ledger_pool.execute(
        f"""CREATE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN IF NEW.job_id = '{job_id}' THEN PERFORM pg_advisory_xact_lock({lock}); END IF; RETURN NEW; END $$;
            CREATE TRIGGER {fn} BEFORE INSERT ON job_events FOR EACH ROW EXECUTE FUNCTION {fn}();"""
    )
    admitter_pool = await create_pool(database_url, min_size=1, max_size=1)
    admitter = await admitter_pool.acquire()
    try:
        pid = await admitter.fetchval("SELECT pg_backend_pid()")
        async with ledger_pool.acquire() as holder:
            await holder.execute("SELECT pg_advisory_lock($1)", lock)
            try:
                task = asyncio.create_task(insert_job(admitter, new))
                await waiting_for_a_lock(ledger_pool)
                await _terminated_mid_call(ledger_pool, pid, task)
            finally:
                await holder.execute("SELECT pg_advisory_unlock($1)", lock)
    finally:
        await admitter_pool.release(admitter)
        await admitter_pool.close()
        await ledger_pool.execute(f"DROP TRIGGER {fn} ON job_events; DROP FUNCTION {fn}();")
    for table in ("jobs", "cells", "job_events", "event_pushes"):
        assert await ledger_pool.fetchval(f"SELECT count(*) FROM {table} WHERE job_id = $1", job_id) == 0, table
    row = await _admit(ledger_pool, new)
    assert row.created
    assert await _events(ledger_pool, job_id) == [(1, "job.accepted")]


async def test_an_admission_racing_a_cancel_and_receipts_racing_a_cancel(
    ledger_pool: asyncpg.Pool, database_url: str
) -> None:
    """A cancel sent while its job is being admitted either finds no job or is recorded
    on it; a cancel, two receipts and the cancelled finish at once: no deadlock, the
    stream gap-free with one terminal event, the receipts recorded."""
    racers = await create_pool(database_url, min_size=4, max_size=4)
    try:
        for n in range(5):
            new = _new(
                f"demo@manual-cancel-{uuid.uuid4().hex[:8]}", f"c-{uuid.uuid4().hex[:8]}", callback=n % 2 == 0, note="x"
            )

            async def cancel(job_id: str) -> bool:
                async with racers.acquire() as conn:
                    return await request_cancel(conn, job_id, "race")

            admitted, cancelled = await asyncio.gather(_admit(racers, new), cancel(new.job_input.job_id))
            assert admitted.created
            recorded = await ledger_pool.fetchval(
                "SELECT cancel_requested_at IS NOT NULL FROM jobs WHERE job_id = $1", new.job_input.job_id
            )
            assert recorded == cancelled
            await _finish(ledger_pool, new.job_input.job_id, "cancelled")
        job_id, keys = await _sending_job(ledger_pool, 2)

        async def cancel_it() -> bool:
            async with racers.acquire() as conn:
                return await request_cancel(conn, job_id, "race")

        results = await asyncio.gather(
            cancel_it(),
            *(_receipt(racers, job_id, k) for k in keys),
            _finish(racers, job_id, "cancelled"),
            return_exceptions=True,
        )
        assert not [r for r in results if isinstance(r, BaseException)], results
    finally:
        await racers.close()
    await _assert_consistent(ledger_pool, job_id)
    statuses = await ledger_pool.fetch("SELECT status FROM delivery_intents WHERE job_id = $1", job_id)
    assert [s["status"] for s in statuses] == ["delivered", "delivered"]


async def test_a_receipt_that_waited_for_the_job_lock_sees_the_receipt_it_waited_for(
    ledger_pool: asyncpg.Pool, database_url: str
) -> None:
    """Two routes' receipts of one cell: the first is written and not yet committed when
    the second calls ``curaflow_record_delivered`` and waits on the job row. Once the
    first commits, the second must read the cell's intents after the lock (a statement of
    its own inside the function: READ COMMITTED) — both confirmed, so the cell ends
    ``submitted``; read with the snapshot it waited under, it would see the first route
    still ``sending`` and leave the cell open with every route delivered."""
    job_id, (first, second) = await _sending_job(ledger_pool, 2)
    racers = await create_pool(database_url, min_size=1, max_size=1)
    try:
        async with ledger_pool.acquire() as holder:
            tx = holder.transaction()
            await tx.start()
            held = await deliveries.record_delivered(holder, job_id, "demo", first)
            assert held is not None and str(held.state) != "submitted"  # route b still sending
            waiting = asyncio.create_task(_receipt(racers, job_id, second))
            await waiting_for_a_lock(ledger_pool)
            assert not waiting.done()
            await tx.commit()
        cell = await asyncio.wait_for(waiting, 10)
    finally:
        await racers.close()
    assert cell is not None and str(cell.state) == "submitted", cell
    state = await ledger_pool.fetchval("SELECT state FROM cells WHERE job_id = $1", job_id)
    assert state == "submitted"

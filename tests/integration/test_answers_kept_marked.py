"""What the ledger keeps of a third party's answer or reason, cut to its bound, says it was
cut and by how much (``… (+N characters)``) and still fits the bound.

Until 2026-12-07 a receiver's answer was stored cut at 2 000 characters, a source's why
and a route's pause reason at 500, a consumer callback's error at 500, with no mark: a
report said less than what happened and nothing said so.
"""

from __future__ import annotations

import re
import uuid

import asyncpg
import pytest

from curaflow.domain.messages import RouteRef, TargetSpec
from curaflow.ledger import deliveries, event_pushes, route_gates
from curaflow.ledger import remembered as memory
from curaflow.ledger.events import append_event
from tests.recording_support import claimed_send
from tests.support import ledger_job, short_id

pytestmark = pytest.mark.integration

#: A receiver's answer of 2 500 characters, the same at every position it is cut at.
ANSWER = "HTTP 400: " + "x" * 2_490
MARK = re.compile(r"… \(\+(\d+) characters\)$")


def assert_marked(stored: str | None, bound: int, text: str = ANSWER) -> None:
    assert stored is not None
    found = MARK.search(stored)
    assert found, stored[-40:]
    kept = stored[: found.start()]
    assert len(stored) <= bound, len(stored)
    assert text.startswith(kept) and len(kept) + int(found.group(1)) == len(text)


def _fields(route: str, work_id: str) -> dict[str, str]:
    return {
        "route": route,
        "work_type": "illustration",
        "work_id": work_id,
        "reason": "route_refused",
        "error": ANSWER,
        "job_id": "j",
        "target_id": "t",
    }


async def test_a_refusal_and_a_hold_keep_the_answer_marked(ledger_pool: asyncpg.Pool) -> None:
    route = f"hook-{short_id()}"
    async with ledger_pool.acquire() as conn:
        await memory.remember_refusal(conn, **_fields(route, "1"))
        await memory.hold_work(conn, **_fields(route, "2"), hold_ms=60_000)
    refusals = await memory.list_refusals(ledger_pool, route)
    assert len(refusals) == 2
    for refusal in refusals:
        assert_marked(refusal.error, 2_000)


async def test_a_why_unavailable_is_kept_marked(ledger_pool: asyncpg.Pool) -> None:
    gate = f"g-{short_id()}"
    async with ledger_pool.acquire() as conn:
        assert await memory.remember_unavailable(
            conn, gate=gate, work_type="illustration", work_id="1", why=ANSWER, job_id="j", ttl_ms=60_000
        )
    why = await ledger_pool.fetchval("SELECT why FROM unavailable_works WHERE gate = $1", gate)
    assert_marked(why, 500)


async def test_a_pause_reason_is_kept_marked(ledger_pool: asyncpg.Pool) -> None:
    route = f"tg-{short_id()}"
    pause = None
    for work_id in ("1", "2", "3"):
        async with ledger_pool.acquire() as conn, conn.transaction():
            pause = await route_gates.count_refusal(
                conn,
                route=route,
                work_type="illustration",
                work_id=work_id,
                answer=ANSWER,
                threshold=3,
                pause_ms=60_000,
            )
    assert isinstance(pause, route_gates.Pause)
    gate = await route_gates.read_gate(ledger_pool, route)
    assert gate is not None
    reason = "3 different works refused in a row with the same answer: " + ANSWER
    assert_marked(gate.pause_reason, 500, reason)


async def test_a_failed_send_keeps_the_answer_marked(ledger_pool: asyncpg.Pool) -> None:
    route = RouteRef(name=f"dir-{uuid.uuid4().hex[:6]}", kind="directory")
    inp, request = await claimed_send(ledger_pool, route, f"w{uuid.uuid4().hex[:8]}")
    assert request.idempotency_key
    async with ledger_pool.acquire() as conn:
        await deliveries.record_failed(
            conn, inp.job_id, "demo", request.idempotency_key, reason="route_unavailable", error=ANSWER, permanent=False
        )
    stored = await ledger_pool.fetchval(
        "SELECT last_error FROM delivery_intents WHERE idempotency_key = $1", request.idempotency_key
    )
    assert_marked(stored, 2_000)


async def test_a_callback_answer_is_kept_marked(ledger_pool: asyncpg.Pool) -> None:
    target = TargetSpec(target_id="demo", routes=[RouteRef(name=f"r-{short_id()}", kind="directory")])
    job_id = await ledger_job(ledger_pool, target, label="marked")
    async with ledger_pool.acquire() as conn, conn.transaction():
        seq = await append_event(conn, job_id, "job.progress")
        await event_pushes.enqueue_push(conn, job_id, seq, f"e-{short_id()}", "http://127.0.0.1:9/hook", {})
    push = (await event_pushes.claim_next(ledger_pool, job_id, "attempt", 60_000)).push
    assert push is not None
    await event_pushes.record_push(ledger_pool, push, event_pushes.PENDING, http_status=400, error=ANSWER)
    stored = await ledger_pool.fetchval("SELECT last_error FROM event_pushes WHERE job_id = $1", job_id)
    assert_marked(stored, 500)

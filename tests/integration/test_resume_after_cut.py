"""A multi-part send (a Telegram album, Discord messages) cut by a cancel that is not the
job's — an operator's ``temporal activity reset``, the worker's shutdown — while nothing
of its next part had left: the parts already posted are confirmed (``remote_ids``), the
rest was never sent, and Temporal's next attempt resumes after them.

``claim_send`` holds back an intent whose request may have landed (``maybe_delivered``)
on an at-most-once route; a part known to be posted is not such a request, and must not
make the resume a ``delivery_unknown`` (it did: the cut wrote ``maybe_delivered`` for
posted parts). When the job ends instead, what is posted keeps the work blocked on the
route (``unknown``, reported partial), never ``released`` for another job to post again.
"""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import asyncpg

from activities.deliver import DeliveryRecords, SendCut
from curaflow.config.delivery import ROUTE_RATE_LIMIT_CAP_MS
from curaflow.domain.cells import CellStage, CellState
from curaflow.domain.messages import DeliverInput, RouteRef
from curaflow.domain.reasons import TerminalReason
from curaflow.ledger import cells, deliveries
from curaflow.ledger.records import load_cell
from curaflow.routes.base import DeliveryRequest
from tests.recording_support import claimed_send


async def _claimed_with_a_part_posted(pool: asyncpg.Pool) -> tuple[DeliverInput, DeliveryRequest]:
    route = RouteRef(name=f"tg-{uuid.uuid4().hex[:6]}", kind="telegram")
    inp, request = await claimed_send(pool, route, f"w{uuid.uuid4().hex[:8]}")
    await deliveries.record_part(pool, request.idempotency_key, [[101, 102]])  # the first album is in the chat
    return inp, request


async def _cut(pool: asyncpg.Pool, inp: DeliverInput, request: DeliveryRequest, *, out: bool) -> None:
    records: Any = DeliveryRecords()
    records.deps = SimpleNamespace(pool=pool)
    cut = SendCut(TerminalReason.DELIVERY_FAILED, "cut", ambiguous=out)
    await records._record_cut(inp, request, cut, posted=True)


async def _claim_again(pool: asyncpg.Pool, inp: DeliverInput) -> deliveries.SendClaim:
    async with pool.acquire() as conn, conn.transaction():
        cell, barrier, *_ = await cells.start_step(
            conn, inp.job_id, "demo", stage=CellStage.DELIVERING, attempt=2, lease_ms=60_000, owner="w"
        )
        assert barrier is None
        return await deliveries.claim_send(
            conn, inp.job_id, "demo", inp.route.name, rate_limit_cap_ms=ROUTE_RATE_LIMIT_CAP_MS, opened=cell
        )


async def test_a_cut_between_parts_resumes_after_the_posted_parts(ledger_pool: asyncpg.Pool) -> None:
    inp, request = await _claimed_with_a_part_posted(ledger_pool)
    await _cut(ledger_pool, inp, request, out=False)  # nothing of the second album had left

    claim = await _claim_again(ledger_pool, inp)

    assert claim.decision == "send", claim
    assert claim.remote_ids == [[101, 102]]  # the next attempt sends only the second album


async def test_a_cut_while_a_part_was_out_is_never_sent_again(ledger_pool: asyncpg.Pool) -> None:
    inp, request = await _claimed_with_a_part_posted(ledger_pool)
    await _cut(ledger_pool, inp, request, out=True)  # the second album may be in the chat

    claim = await _claim_again(ledger_pool, inp)

    assert claim.decision == "ambiguous", claim


async def test_a_job_ending_after_a_cut_between_parts_keeps_the_work_blocked(ledger_pool: asyncpg.Pool) -> None:
    inp, request = await _claimed_with_a_part_posted(ledger_pool)
    await _cut(ledger_pool, inp, request, out=False)

    async with ledger_pool.acquire() as conn, conn.transaction():
        await cells.finish_cell(conn, inp.job_id, "demo", CellState.FAILED, TerminalReason.CANCELLED_BY_CONSUMER)

    status = await ledger_pool.fetchval(
        "SELECT status FROM delivery_intents WHERE idempotency_key = $1", request.idempotency_key
    )
    assert status == "unknown"  # part of it is in the chat: never released to another job


async def test_a_receipt_after_the_cell_ended_keeps_the_verdict_and_is_recorded(ledger_pool: asyncpg.Pool) -> None:
    # An operator paused, then reset the step while its send was out: the next attempt
    # found the intent `sending` and ended the cell `delivery_unknown`; the first send then
    # landed. The cell's verdict stands; what landed is recorded — the intent delivered,
    # the route's ids on it, the Job listing the route as having the work.
    inp, request = await _claimed_with_a_part_posted(ledger_pool)
    key = request.idempotency_key
    async with ledger_pool.acquire() as conn, conn.transaction():  # what the next attempt records
        await deliveries.record_failed(
            conn,
            inp.job_id,
            "demo",
            key,
            reason=TerminalReason.DELIVERY_UNKNOWN,
            error="x",
            permanent=True,
            unknown=True,
        )

    async with ledger_pool.acquire() as conn, conn.transaction():  # the first send's late receipt
        cell = await deliveries.record_delivered(
            conn, inp.job_id, "demo", key, remote_id="101", remote_ids=[[101, 102], [103]], remote_status="sent"
        )

    assert (cell.state, cell.reason) == ("failed", "delivery_unknown"), cell
    row = await ledger_pool.fetchrow(
        "SELECT status, remote_id, remote_ids FROM delivery_intents WHERE idempotency_key = $1", key
    )
    assert (row["status"], row["remote_id"], row["remote_ids"]) == ("delivered", "101", [[101, 102], [103]])
    async with ledger_pool.acquire() as conn:
        [reported] = (await load_cell(conn, inp.job_id, "demo", with_deliveries=True)).delivery_reports()
    assert (reported.status, reported.remote_id) == ("delivered", "101")

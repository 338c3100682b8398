"""A send's failure is counted once for its route, however often its recording is tried.

The transaction that records a failed send commits; the connection dies before the
acknowledgement arrives (PostgreSQL restarted, a proxy cut it after ``COMMIT``).
:func:`~activities.deliver.recording.until_recorded` tries the recording again: until
2026-12-05 the second try counted the route's rate-limit step again (the next wait one
step longer) and, after a refusal that paused the route, remembered the refusal the pause
had lifted and began a new streak with the work. Now the recording counts only while the
intent is ``sending`` from that very send (:func:`curaflow.ledger.deliveries.record_failed`'s
``send``): a second try finds it recorded and writes nothing.

The lost acknowledgement is simulated on the session's real PostgreSQL: a pool whose first
connection, once its transaction committed, raises as a dead connection does.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from curaflow.domain.ratelimit import retry_delay_ms
from curaflow.domain.reasons import TerminalReason
from curaflow.ledger import remembered as memory
from curaflow.ledger import route_gates
from curaflow.routes.base import RouteError, answer_key
from tests.recording_support import claimed_send, delivery_records, in_an_attempt, telegram_route

pytestmark = [pytest.mark.integration]

ANSWER = "400 Bad Request: message thread not found"


class _AckLost:
    """A pool whose first ``acquire`` raises once its block ended well (its transaction
    committed): the acknowledgement of the commit lost with the connection."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self.lost = 0

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[asyncpg.Connection]:
        async with self.pool.acquire() as conn:
            yield conn
        if self.lost == 0:
            self.lost += 1
            raise asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation")


@pytest.fixture(autouse=True)
def _in_an_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    in_an_attempt(monkeypatch)


async def test_a_rate_limit_whose_commit_was_not_acknowledged_is_one_step(ledger_pool: asyncpg.Pool) -> None:
    route = telegram_route()
    inp, request = await claimed_send(ledger_pool, route, f"w{uuid.uuid4().hex[:8]}")
    err = RouteError(TerminalReason.DELIVERY_FAILED, "429 Too Many Requests", rate_limited=True)
    pool = _AckLost(ledger_pool)

    recorded = await delivery_records(pool)._record_error(inp, request, err, max_attempts=10)

    assert pool.lost == 1  # the recording was tried twice
    gate = await route_gates.read_gate(ledger_pool, route.name)
    assert gate is not None and gate.rate_limits == 1, gate  # one rate limit, one step
    assert recorded.delay_ms == retry_delay_ms(1, None)  # the wait of that step, as counted
    status = await ledger_pool.fetchval(
        "SELECT status FROM delivery_intents WHERE idempotency_key = $1", request.idempotency_key
    )
    assert status == "reserved"


async def test_a_refusal_that_paused_the_route_is_not_counted_again(ledger_pool: asyncpg.Pool) -> None:
    route = telegram_route()
    first, second = f"w{uuid.uuid4().hex[:8]}", f"w{uuid.uuid4().hex[:8]}"
    # The route refused another work with the same answer before: this refusal pauses it.
    async with ledger_pool.acquire() as conn, conn.transaction():
        await route_gates.count_refusal(
            conn,
            route=route.name,
            work_type="illustration",
            work_id=first,
            answer=answer_key(ANSWER),
            threshold=2,
            pause_ms=600_000,
        )
    inp, request = await claimed_send(ledger_pool, route, second)
    err = RouteError(TerminalReason.DELIVERY_REJECTED, ANSWER, permanent=True, answer=ANSWER)
    pool = _AckLost(ledger_pool)

    recorded = await delivery_records(pool, streak=2)._record_error(inp, request, err, max_attempts=10)

    assert pool.lost == 1
    assert recorded.verdict.outcome == "rejected"
    gate = await route_gates.read_gate(ledger_pool, route.name)
    assert gate is not None and gate.paused_ms > 0 and gate.pauses == 1, gate
    assert gate.streak_answer is None and gate.streak_works == [], gate  # no new streak begun by the same work
    assert await memory.list_refusals(ledger_pool, route.name) == []  # the pause lifted it; it stays lifted

"""One rate limit of an account is one step of its ladder, and no request leaves into a
cooldown or a pause decided while it waited for its slot — over the ledger's gate
(:class:`~curaflow.ledger.gates.LedgerGate`, real PostgreSQL), the gate every worker uses
(the cases and their history: ``tests/unit/test_one_limit_one_step.py``)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

import asyncpg
import pytest

from curaflow.domain.ratelimit import LADDER_BASE_MS
from curaflow.domain.reasons import TerminalReason
from curaflow.ledger import gates
from curaflow.ledger.gates import LedgerGate
from curaflow.sources.errors import SourceError
from tests.unit.test_one_limit_one_step import (
    RATE_LIMIT,
    RESTRICTED,
    a_request_waits_while_its_neighbour_is_answered,
    requests_out_together_meet_one_limit,
)

pytestmark = pytest.mark.integration


def key() -> str:
    return f"gate-{uuid.uuid4().hex[:8]}"


def ledger_slots_taken(pool: asyncpg.Pool, gate: str, slots: int) -> Callable[[], Awaitable[bool]]:
    """Whether ``slots`` slots of ``gate`` were handed out (its row's ``requests``)."""

    async def taken() -> bool:
        state = await gates.read_gate(pool, gate)
        return state is not None and state.requests >= slots

    return taken


@pytest.mark.parametrize("n", [2, 4, 8])
async def test_requests_out_together_met_by_one_rate_limit_climb_the_ladder_once(
    ledger_pool: asyncpg.Pool, n: int
) -> None:
    gate = key()
    results = await requests_out_together_meet_one_limit(
        LedgerGate(ledger_pool, gate, min_interval_ms=0, concurrency=n), n
    )
    assert all(isinstance(r, SourceError) and r.reason == TerminalReason.RATE_LIMITED for r in results), results
    state = await gates.read_gate(ledger_pool, gate)
    assert state is not None
    assert state.penalty == 1  # was n: 480 s for four, the cap (15 min) for eight
    assert 0 < state.cooldown_until - state.now <= LADDER_BASE_MS
    assert all(r.cooldown_s is not None and 0 < r.cooldown_s <= LADDER_BASE_MS / 1000 for r in results)
    assert state.rate_limits == n  # every answer is still counted (curaflow accounts list)


async def test_a_request_waiting_for_its_slot_does_not_leave_into_a_cooldown_begun_meanwhile(
    ledger_pool: asyncpg.Pool,
) -> None:
    gate = key()
    ledger = LedgerGate(ledger_pool, gate, min_interval_ms=1_000, concurrency=2)
    # auth and the two searches: three slots handed out, the second's an interval ahead
    sent, waited = await a_request_waits_while_its_neighbour_is_answered(
        ledger, RATE_LIMIT, ledger_slots_taken(ledger_pool, gate, 3)
    )
    assert len(sent) == 1, sent  # the one that waited had left into the cooldown
    assert isinstance(waited, SourceError) and waited.reason == TerminalReason.RATE_LIMITED, waited
    assert waited.cooldown_s is not None and 0 < waited.cooldown_s <= LADDER_BASE_MS / 1000
    state = await gates.read_gate(ledger_pool, gate)
    assert state is not None and state.penalty == 1  # its answer had climbed the ladder again (120 s)


async def test_a_request_waiting_for_its_slot_does_not_leave_into_a_pause_begun_meanwhile(
    ledger_pool: asyncpg.Pool,
) -> None:
    gate = key()
    ledger = LedgerGate(ledger_pool, gate, min_interval_ms=1_000, concurrency=2)
    sent, waited = await a_request_waits_while_its_neighbour_is_answered(
        ledger, RESTRICTED, ledger_slots_taken(ledger_pool, gate, 3)
    )
    assert len(sent) == 1, sent  # the one that waited had asked the restricted account again
    assert isinstance(waited, SourceError) and waited.reason == TerminalReason.ACCOUNT_RESTRICTED, waited
    assert not waited.retryable


async def test_a_limit_after_the_cooldown_ended_climbs_the_ladder(ledger_pool: asyncpg.Pool) -> None:
    """Guard: a limit met once the cooldown ended is the next step; a second answer of one
    limit keeps the step and floors the cooldown with its stated delay (up to the cap)."""
    gate = key()
    assert await gates.penalize(ledger_pool, gate, base_ms=60_000, cap_ms=900_000) == 60_000
    started = await ledger_pool.fetchval("SELECT last_rate_limit_at FROM source_gates WHERE gate = $1", gate)
    await asyncio.sleep(0.01)
    left = await gates.penalize(ledger_pool, gate, base_ms=60_000, cap_ms=900_000, retry_after_ms=300_000)
    # when the limit started the cooldown: what the finish's holds compare with a deadline
    assert await ledger_pool.fetchval("SELECT last_rate_limit_at FROM source_gates WHERE gate = $1", gate) == started
    assert 299_000 < left <= 300_000
    state = await gates.read_gate(ledger_pool, gate)
    assert state is not None and state.penalty == 1
    await ledger_pool.execute("UPDATE source_gates SET cooldown_until = 0 WHERE gate = $1", gate)  # it ended
    assert await gates.penalize(ledger_pool, gate, base_ms=60_000, cap_ms=900_000) == 120_000
    state = await gates.read_gate(ledger_pool, gate)
    assert state is not None and state.penalty == 2

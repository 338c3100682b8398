"""A route whose receiver says its endpoint is gone (a webhook's 410 Gone) is paused at its
first such answer, and pages, its work held back never used up — not after the refusal
streak (``delivery.refusal_streak`` different works), which held two more works back first
(until 2026-12-07).

RFC 9110 §15.5.11: 410 Gone, "access to the target resource is no longer available at the
origin server and that this condition is likely to be permanent"; Standard Webhooks 1.0:
on a 410 the sender should disable the endpoint. The endpoint is the route's alone: the
answer cannot depend on the work. Recorded as the deliver activity records it, on the
session's real PostgreSQL.
"""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from curaflow.domain.messages import RouteRef
from curaflow.ledger import remembered as memory
from curaflow.ledger import route_gates
from curaflow.routes.webhook import classify
from tests.recording_support import claimed_send, delivery_records, in_an_attempt

pytestmark = [pytest.mark.integration]


def _hook() -> RouteRef:
    return RouteRef(name=f"hook-{uuid.uuid4().hex[:6]}", kind="webhook")


@pytest.fixture(autouse=True)
def _in_an_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    in_an_attempt(monkeypatch)


async def test_a_410_pauses_the_route_at_the_first_work_and_lifts_its_hold(ledger_pool: asyncpg.Pool) -> None:
    route = _hook()
    inp, request = await claimed_send(ledger_pool, route, f"w{uuid.uuid4().hex[:8]}")

    recorded = await delivery_records(ledger_pool)._record_error(inp, request, classify(410, None), max_attempts=10)

    assert recorded.verdict.reason == "route_refused"  # the route's, never the work's
    gate = await route_gates.read_gate(ledger_pool, route.name)
    assert gate is not None and gate.paused_ms > 0 and gate.pauses == 1, gate
    assert "http 410" in (gate.pause_reason or "")
    assert (
        await memory.list_refusals(ledger_pool, route.name) == []
    )  # the work not held back: the pause holds the route


async def test_a_404_still_waits_for_the_streak(ledger_pool: asyncpg.Pool) -> None:
    route = _hook()
    inp, request = await claimed_send(ledger_pool, route, f"w{uuid.uuid4().hex[:8]}")

    await delivery_records(ledger_pool)._record_error(inp, request, classify(404, None), max_attempts=10)

    gate = await route_gates.read_gate(ledger_pool, route.name)
    assert gate is not None and gate.paused_ms == 0 and gate.streak_answer == "http 404", gate

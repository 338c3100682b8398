"""An at-most-once route whose every answer may follow a post stops burning works.

On a route with ``on_ambiguous = "fail"`` an answer that may follow a post — a proxy's HTML
page under a 200, a bare 204, a gateway's 502 — ends the work ``delivery_unknown``, blocked
on the route for good (it may be in the chat). Until 2026-12-07 such an answer was never
counted in the route's streak: a proxy in front of the Bot API answering every request
with its page blocked one more work with every job, for ever, and never paused the route
nor paged it as broken. Now three different works ending so with the same answer pause
the route (``delivery.refusal_streak``), as three refusals do; the works already blocked
stay blocked (they may have been posted).

The recording runs as the deliver activity runs it
(:meth:`activities.deliver.DeliveryRecords._record_error`) on the session's real PostgreSQL.
"""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from curaflow.domain.reasons import TerminalReason
from curaflow.ledger import route_gates
from curaflow.routes.base import RouteError
from tests.integration.test_answer_recorded_once import _claimed, _in_an_attempt, _records, _route  # noqa: F401 - the fixture runs each test in an attempt

pytestmark = [pytest.mark.integration]

PAGE = "200 (not the Bot API's answer)"


def _maybe_posted(answer: str | None) -> RouteError:
    return RouteError(
        TerminalReason.TELEGRAM_FAILED, "an answer that is not the Bot API's", ambiguous=True, answer=answer
    )


async def test_three_works_ending_unknown_with_the_same_answer_pause_the_route(ledger_pool: asyncpg.Pool) -> None:
    route = _route()
    outcomes = []
    for _ in range(3):
        inp, request = await _claimed(ledger_pool, route, f"w{uuid.uuid4().hex[:8]}")
        recorded = await _records(ledger_pool)._record_error(inp, request, _maybe_posted(PAGE), max_attempts=10)
        outcomes.append(recorded.verdict.outcome)
    assert outcomes == ["unknown"] * 3
    gate = await route_gates.read_gate(ledger_pool, route.name)
    assert gate is not None and gate.paused_ms > 0 and gate.pauses == 1, gate
    assert "not the bot api's answer" in (gate.pause_reason or "")


async def test_no_answer_is_never_counted(ledger_pool: asyncpg.Pool) -> None:
    # A timeout after the request left: nothing the receiver said, nothing counted.
    route = _route()
    for _ in range(3):
        inp, request = await _claimed(ledger_pool, route, f"w{uuid.uuid4().hex[:8]}")
        await _records(ledger_pool)._record_error(inp, request, _maybe_posted(None), max_attempts=10)
    gate = await route_gates.read_gate(ledger_pool, route.name)
    assert gate is None or (gate.paused_ms == 0 and gate.streak_works == []), gate

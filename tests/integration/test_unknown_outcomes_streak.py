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
from types import SimpleNamespace

import asyncpg
import pytest

from curaflow.domain.reasons import TerminalReason
from curaflow.ledger import route_gates
from curaflow.routes.base import RouteError
from tests.recording_support import claimed_send, delivery_records, in_an_attempt, telegram_route

pytestmark = [pytest.mark.integration]

PAGE = "200 (not the Bot API's answer)"


def _maybe_posted(answer: str | None) -> RouteError:
    return RouteError(
        TerminalReason.TELEGRAM_FAILED, "an answer that is not the Bot API's", ambiguous=True, answer=answer
    )


@pytest.fixture(autouse=True)
def _in_an_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    in_an_attempt(monkeypatch)


async def test_three_works_ending_unknown_with_the_same_answer_pause_the_route(ledger_pool: asyncpg.Pool) -> None:
    route = telegram_route()
    outcomes = []
    for _ in range(3):
        inp, request = await claimed_send(ledger_pool, route, f"w{uuid.uuid4().hex[:8]}")
        recorded = await delivery_records(ledger_pool)._record_error(inp, request, _maybe_posted(PAGE), max_attempts=10)
        outcomes.append(recorded.verdict.outcome)
    assert outcomes == ["unknown"] * 3
    gate = await route_gates.read_gate(ledger_pool, route.name)
    assert gate is not None and gate.paused_ms > 0 and gate.pauses == 1, gate
    assert "not the bot api's answer" in (gate.pause_reason or "")


async def test_no_answer_is_never_counted(ledger_pool: asyncpg.Pool) -> None:
    # A timeout after the request left: nothing the receiver said, nothing counted.
    route = telegram_route()
    for _ in range(3):
        inp, request = await claimed_send(ledger_pool, route, f"w{uuid.uuid4().hex[:8]}")
        await delivery_records(ledger_pool)._record_error(inp, request, _maybe_posted(None), max_attempts=10)
    gate = await route_gates.read_gate(ledger_pool, route.name)
    assert gate is None or (gate.paused_ms == 0 and gate.streak_works == []), gate


def _may_have_landed(answer: str | None) -> RouteError:
    """A webhook receiver's answer that may follow a post: its gateway's 502."""
    return RouteError(TerminalReason.DELIVERY_FAILED, "webhook answered HTTP 502", ambiguous=True, answer=answer)


async def test_works_an_at_least_once_route_ran_out_of_attempts_on_after_a_possible_post_pause_it(
    ledger_pool: asyncpg.Pool,
) -> None:
    """A route that may send again (a webhook: the receiver deduplicates on the
    ``webhook-id``; Telegram or Discord under ``on_ambiguous = "retry"``) retries an answer
    that may follow a post with the same key — until its attempts run out: the send is
    ``delivery_abandoned`` and its intent ``unknown``, the work held on the route for good
    (another job's key is another ``webhook-id``, which the receiver cannot deduplicate).
    A receiver whose gateway answers every request 502 (its application down) so blocked
    one more work with every job, unpaged: the streak counted only an at-most-once route's
    ``unknown`` (until 2026-12-07). Three works ending so with the same answer now pause
    the route as three refusals do."""
    route = telegram_route()
    records = delivery_records(ledger_pool)
    records.deps.route = lambda name: SimpleNamespace(resend_safe=True)
    outcomes, statuses = [], []
    for _ in range(3):
        inp, request = await claimed_send(ledger_pool, route, f"w{uuid.uuid4().hex[:8]}")
        recorded = await records._record_error(inp, request, _may_have_landed("HTTP 502"), max_attempts=1)
        outcomes.append(recorded.verdict.outcome)
        statuses.append(
            await ledger_pool.fetchval(
                "SELECT status FROM delivery_intents WHERE idempotency_key = $1", request.idempotency_key
            )
        )
    assert outcomes == ["abandoned"] * 3 and statuses == ["unknown"] * 3  # each work held on the route
    gate = await route_gates.read_gate(ledger_pool, route.name)
    assert gate is not None and gate.paused_ms > 0 and gate.pauses == 1, gate
    assert "http 502" in (gate.pause_reason or "")


async def test_an_at_least_once_route_retrying_an_answer_is_not_counted_before_its_last_attempt(
    ledger_pool: asyncpg.Pool,
) -> None:
    # Guard: while attempts are left the send is retried with the same key (nothing held
    # for good yet): nothing counted, whatever the answer.
    route = telegram_route()
    records = delivery_records(ledger_pool)
    records.deps.route = lambda name: SimpleNamespace(resend_safe=True)
    for _ in range(3):
        inp, request = await claimed_send(ledger_pool, route, f"w{uuid.uuid4().hex[:8]}")
        recorded = await records._record_error(inp, request, _may_have_landed("HTTP 502"), max_attempts=10)
        assert recorded.verdict.outcome == "failed"
    gate = await route_gates.read_gate(ledger_pool, route.name)
    assert gate is None or (gate.paused_ms == 0 and gate.streak_works == []), gate

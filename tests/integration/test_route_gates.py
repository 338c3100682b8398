"""A route's gate in the ledger (curaflow.ledger.route_gates): the refusal streak, the
pause, the rate-limit steps, the holds — on the session's real PostgreSQL."""

from __future__ import annotations

import asyncpg
import pytest

from curaflow.domain.ratelimit import UNSTATED_BASE_MS
from curaflow.ledger import remembered as memory
from curaflow.ledger import route_gates
from curaflow.routes.base import answer_key
from tests.support import short_id

pytestmark = [pytest.mark.integration]

ANSWER = answer_key("400 Bad Request: message thread not found")


async def refuse(pool: asyncpg.Pool, route: str, work_id: str, answer: str = ANSWER, *, hold: bool = True) -> object:
    """Record a refusal as the deliver activity does: the hold (or refusal), then the streak."""
    async with pool.acquire() as conn, conn.transaction():
        fields = {
            "route": route,
            "work_type": "illustration",
            "work_id": work_id,
            "reason": "route_refused",
            "error": answer,
            "job_id": f"j-{work_id}",
            "target_id": "t",
        }
        if hold:
            await memory.hold_work(conn, **fields, hold_ms=3_600_000)
        else:
            await memory.remember_refusal(conn, **fields)
        return await route_gates.count_refusal(
            conn,
            route=route,
            work_type="illustration",
            work_id=work_id,
            answer=answer,
            threshold=3,
            pause_ms=60_000,
        )


async def test_three_different_works_with_the_same_answer_pause_the_route_and_lift_their_refusals(
    ledger_pool: asyncpg.Pool,
) -> None:
    route = f"tg-{short_id()}"
    assert await refuse(ledger_pool, route, "1") is None
    assert await refuse(ledger_pool, route, "1") is None  # the same work again: still one work
    assert await refuse(ledger_pool, route, "2", hold=False) is None
    pause = await refuse(ledger_pool, route, "3")
    assert isinstance(pause, route_gates.Pause)
    assert [w[1] for w in pause.works] == ["1", "2", "3"] and pause.restored == 3
    assert await memory.list_refusals(ledger_pool, route) == []  # holds and the refusal lifted
    gate = await route_gates.read_gate(ledger_pool, route)
    assert gate is not None and 55_000 < gate.paused_ms <= 60_000 and gate.pauses == 1
    assert gate.streak_answer is None and "message thread not found" in (gate.pause_reason or "")
    # while paused a refusal is recorded but never pages twice
    assert await refuse(ledger_pool, route, "4") is None
    assert await refuse(ledger_pool, route, "5") is None
    assert await refuse(ledger_pool, route, "6") is None
    resumed, released = await route_gates.resume(ledger_pool, route)
    assert resumed and released == 3  # the holds of 4, 5, 6
    gate = await route_gates.read_gate(ledger_pool, route)
    assert gate is not None and gate.paused_ms == 0 and gate.streak_works == []
    assert await route_gates.resume(ledger_pool, route) == (False, 0)


async def test_another_answer_starts_a_new_streak(ledger_pool: asyncpg.Pool) -> None:
    route = f"hook-{short_id()}"
    assert await refuse(ledger_pool, route, "1") is None
    assert await refuse(ledger_pool, route, "2") is None
    assert await refuse(ledger_pool, route, "3", answer_key("HTTP 403")) is None
    gate = await route_gates.read_gate(ledger_pool, route)
    assert gate is not None and gate.streak_answer == "http 403" and gate.streak_works == [["illustration", "3"]]
    assert gate.paused_ms == 0
    # digits are not the answer: item numbers, sizes and ids differ from work to work
    assert answer_key("400 failed to send message #3: file 1234.png") == answer_key(
        "400 failed to send message #7: file 99.png"
    )


async def test_three_works_refused_under_three_statuses_never_pause_the_route(ledger_pool: asyncpg.Pool) -> None:
    # Three works refused by one receiver under three statuses (a 415, a 422, a 404 — the
    # answers' keys; which of them is the work's is the route's reading, not the gate's):
    # three answers, no broken route. Until 2026-12-07 the status's digits
    # were folded like a work's numbers ("http #" each time): the route paused and paged,
    # and the first work's refusal was lifted.
    route = f"hook-{short_id()}"
    assert await refuse(ledger_pool, route, "1", answer_key("HTTP 415"), hold=False) is None
    assert await refuse(ledger_pool, route, "2", answer_key("HTTP 422"), hold=False) is None
    assert await refuse(ledger_pool, route, "3", answer_key("HTTP 404")) is None
    gate = await route_gates.read_gate(ledger_pool, route)
    assert gate is not None and gate.paused_ms == 0 and gate.streak_works == [["illustration", "3"]]
    assert {r.work_id for r in await memory.list_refusals(ledger_pool, route)} == {"1", "2", "3"}


async def test_a_hold_doubles_in_a_row_and_never_downgrades_a_refusal(ledger_pool: asyncpg.Pool) -> None:
    route = f"dc-{short_id()}"
    fields = {
        "route": route,
        "work_type": "illustration",
        "reason": "route_refused",
        "error": "413",
        "job_id": "j",
        "target_id": "t",
    }
    async with ledger_pool.acquire() as conn:
        first = await memory.hold_work(conn, **fields, work_id="1", hold_ms=1_000)
        second = await memory.hold_work(conn, **fields, work_id="1", hold_ms=1_000)
        await memory.remember_refusal(conn, **fields, work_id="2")
        assert await memory.hold_work(conn, **fields, work_id="2", hold_ms=1_000) == 0
        assert 950 <= second - first <= 1_500  # held 1 s, then 2 s from a moment later
        known = await memory.known_works(
            conn, routes=[route], gate="g", work_type="illustration", work_ids=["1", "2", "3"]
        )
        assert known == {"1": "held", "2": "refused"}
        later = await memory.known_works(
            conn, routes=[route], gate="g", work_type="illustration", work_ids=["1"], now=second + 1
        )
        assert later == {}  # the hold is over: the work is offered again


async def test_a_rate_limit_without_a_delay_climbs_per_route_and_a_global_one_holds_the_route(
    ledger_pool: asyncpg.Pool,
) -> None:
    route = f"dc-{short_id()}"
    async with ledger_pool.acquire() as conn:
        delays = [
            await route_gates.rate_limited(conn, route=route, stated_ms=None, route_wide=False, cap_ms=60_000)
            for _ in range(3)
        ]
        assert delays == [UNSTATED_BASE_MS, 2 * UNSTATED_BASE_MS, 4 * UNSTATED_BASE_MS]
        assert (
            await route_gates.rate_limited(conn, route=route, stated_ms=1_500, route_wide=False, cap_ms=60_000) == 1_500
        )
        wide = await route_gates.rate_limited(conn, route=route, stated_ms=None, route_wide=True, cap_ms=60_000)
    gate = await route_gates.read_gate(ledger_pool, route)
    assert gate is not None and gate.rate_limits == 5 and 0 < gate.cooldown_ms <= wide


async def test_a_route_wide_limit_stating_a_week_holds_the_route_no_longer_than_its_cap(
    ledger_pool: asyncpg.Pool,
) -> None:
    """A route-wide limit (Discord's ``global``, a 429 that is not the platform's JSON: a
    proxy's) stating an absurd delay — a week — held every send of the route for the week,
    each job of its targets ending expired meanwhile. The route's cooldown is at most
    ``cap_ms`` (``delivery.route_rate_limit_cap_ms``), and so is the wait of the send that
    met it (a review: each job then met the 429 again and waited the week itself)."""
    route = f"dc-{short_id()}"
    week_ms = 7 * 24 * 3_600_000
    async with ledger_pool.acquire() as conn:
        delay = await route_gates.rate_limited(conn, route=route, stated_ms=week_ms, route_wide=True, cap_ms=3_600_000)
        # ... and so does the send that met it; a limit of one send is waited as stated.
        one = await route_gates.rate_limited(conn, route=route, stated_ms=week_ms, route_wide=False, cap_ms=3_600_000)
    assert delay == 3_600_000 and one == week_ms
    gate = await route_gates.read_gate(ledger_pool, route)
    assert gate is not None and 3_500_000 < gate.cooldown_ms <= 3_600_000
    # A limit within the cap is kept as stated, and a later shorter one never shortens it.
    route2 = f"dc-{short_id()}"
    async with ledger_pool.acquire() as conn:
        await route_gates.rate_limited(conn, route=route2, stated_ms=600_000, route_wide=True, cap_ms=3_600_000)
        await route_gates.rate_limited(conn, route=route2, stated_ms=1_000, route_wide=True, cap_ms=3_600_000)
    gate2 = await route_gates.read_gate(ledger_pool, route2)
    assert gate2 is not None and 590_000 < gate2.cooldown_ms <= 600_000


async def test_one_route_wide_limit_answered_to_many_sends_is_one_step(ledger_pool: asyncpg.Pool) -> None:
    """A receiver's 429 holds the whole route (a webhook's since 2026-12-07, Discord's
    ``global``, a proxy's in front of Telegram). Sends of the route out together when it
    comes — the jobs of a schedule delivering at once — are each answered the one limit,
    and each answer climbed the route's ladder: eight 429s without a delay cooled the
    whole route down 640 s instead of 5 s (nine: the ladder's 15 min), every job of the
    route waiting it out. No send leaves while the route cools down, so a limit answered
    meanwhile is the limit that started it: the step is kept; one met after the cooldown
    ended climbs (DESIGN.md "One rate limit, one step", as for an account's)."""
    route = f"hook-{short_id()}"
    async with ledger_pool.acquire() as conn:
        delays = [
            await route_gates.rate_limited(conn, route=route, stated_ms=None, route_wide=True, cap_ms=3_600_000)
            for _ in range(8)
        ]
    assert delays == [UNSTATED_BASE_MS] * 8
    gate = await route_gates.read_gate(ledger_pool, route)
    assert gate is not None and gate.rate_limits == 1 and 0 < gate.cooldown_ms <= UNSTATED_BASE_MS
    # A stated delay answered in the burst still holds the route as long as it says.
    async with ledger_pool.acquire() as conn:
        stated = await route_gates.rate_limited(conn, route=route, stated_ms=30_000, route_wide=True, cap_ms=3_600_000)
    gate = await route_gates.read_gate(ledger_pool, route)
    assert stated == 30_000 and gate is not None and 25_000 < gate.cooldown_ms <= 30_000 and gate.rate_limits == 1
    # The cooldown over (as when its time has passed), the next limit is the next step.
    await ledger_pool.execute("UPDATE route_gates SET cooldown_until = 0 WHERE route = $1", route)
    async with ledger_pool.acquire() as conn:
        after = await route_gates.rate_limited(conn, route=route, stated_ms=None, route_wide=True, cap_ms=3_600_000)
    assert after == 2 * UNSTATED_BASE_MS

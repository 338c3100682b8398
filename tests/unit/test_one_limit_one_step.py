"""One rate limit of an account is one step of its cooldown ladder, and no request of the
account leaves into a cooldown or a pause decided while it waited for its slot
(DESIGN.md "One rate limit, one step"; reference ``pixiv-and-delivery-apis.md`` §2.5:
the first limit cools the account down 60 s, the next 120 s …).

An account whose ``max_concurrency`` is above 1 (the replay's is 4) has several requests
out or waiting at once. Until 2026-12-06 each answer of one limit climbed the ladder: four
requests out together cooled the account down 480 s instead of 60 s (eight: the cap,
15 min), and a request that waited for its slot while its neighbour's answer started a
cooldown left into it — a request the gate promises never leaves — and its answer climbed
the ladder again; a request waiting while the account was restricted left too.

The client runs against ``httpx.MockTransport`` speaking the app-api's wire format, over the
in-process gate (:class:`~curaflow.sources.gate.MemoryGate`);
``tests/integration/test_one_limit_one_step.py`` runs the same over the ledger's gate.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from curaflow.domain.ratelimit import LADDER_BASE_MS
from curaflow.domain.reasons import TerminalReason
from curaflow.sources.errors import SourceError
from curaflow.sources.gate import Gate, MemoryGate
from curaflow.sources.pixiv.client import PixivClient

TOKEN = {"access_token": "a", "refresh_token": "r", "expires_in": 3600}
#: Pixiv's rate limit (reference §2.5), with HTTP 403.
RATE_LIMIT = {"error": {"user_message": "", "message": "Rate Limit", "reason": "", "user_message_details": {}}}
#: The app-api's answer to a restricted account.
RESTRICTED = {
    "error": {
        "user_message": "Your access is currently restricted.",
        "message": "",
        "reason": "",
        "user_message_details": {},
    }
}

Answer = Callable[[httpx.Request], Awaitable[httpx.Response]]


def pixiv(gate: Gate, api: Answer) -> tuple[PixivClient, list[str]]:
    """A client over ``gate`` whose app-api answers ``api``; the words searched, in the
    order their requests left."""
    sent: list[str] = []

    async def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/auth/token"):
            return httpx.Response(200, json=TOKEN)
        sent.append(request.url.params["word"])
        return await api(request)

    http = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    return PixivClient(http, refresh_token="r", api_url="http://api.test", auth_url="http://api.test", gate=gate), sent


async def requests_out_together_meet_one_limit(gate: Gate, n: int) -> list[BaseException | Any]:
    """``n`` searches out at once, every one answered the rate limit once all are out."""
    out = asyncio.Event()
    arrived = 0

    async def api(request: httpx.Request) -> httpx.Response:
        nonlocal arrived
        arrived += 1
        if arrived == n:
            out.set()
        await out.wait()
        return httpx.Response(403, json=RATE_LIMIT)

    client, sent = pixiv(gate, api)
    await client.authenticate()
    results = await asyncio.gather(*(client.search_illust(f"w{i}") for i in range(n)), return_exceptions=True)
    assert len(sent) == n
    return results


async def a_request_waits_while_its_neighbour_is_answered(
    gate: Gate, first: dict[str, Any], second_waiting: Callable[[], Awaitable[bool]]
) -> tuple[list[str], Any]:
    """Two searches at once: the one that takes the first slot leaves at once, and is
    answered ``first`` (HTTP 403) only once the other holds its slot and waits for it
    (``second_waiting``: the gate's spacing holds it an interval). The words that left,
    and what the search that waited raised."""

    async def api(request: httpx.Request) -> httpx.Response:
        for _ in range(500):  # at most 5 s: then answered anyway (the test then fails on what left)
            if await second_waiting():
                break
            await asyncio.sleep(0.01)
        return httpx.Response(403, json=first)

    client, sent = pixiv(gate, api)
    await client.authenticate()  # its slot taken: the first search leaves one interval later
    await asyncio.sleep(gate.min_interval_ms / 1000)  # type: ignore[attr-defined]
    words = ("one", "two")
    results = dict(
        zip(words, await asyncio.gather(*map(client.search_illust, words), return_exceptions=True), strict=True)
    )
    assert sent, results
    assert isinstance(results[sent[0]], SourceError), results
    waited = next(w for w in words if w != sent[0])
    return sent, results[waited]


class CountedGate(MemoryGate):
    """A :class:`MemoryGate` counting the slots asked: it takes a slot as it is entered,
    with no wait before (its lock is free), so a slot counted is a slot taken."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.asked = 0

    async def acquire(self) -> None:
        self.asked += 1
        await super().acquire()


def slots_taken(gate: CountedGate, slots: int) -> Callable[[], Awaitable[bool]]:
    """Whether ``slots`` slots of ``gate`` were taken."""

    async def taken() -> bool:
        return gate.asked >= slots

    return taken


@pytest.mark.parametrize("n", [2, 4, 8])
async def test_requests_out_together_met_by_one_rate_limit_climb_the_ladder_once(n: int) -> None:
    gate = MemoryGate(0, concurrency=n)
    results = await requests_out_together_meet_one_limit(gate, n)
    assert all(isinstance(r, SourceError) and r.reason == TerminalReason.RATE_LIMITED for r in results), results
    assert gate.penalty == 1  # one limit: the ladder's first step (was n)
    cooldowns = [r.cooldown_s for r in results]
    assert all(c is not None and 0 < c <= LADDER_BASE_MS / 1000 for c in cooldowns), (
        cooldowns
    )  # was up to 60 s × 2^(n-1)


async def test_a_request_waiting_for_its_slot_does_not_leave_into_a_cooldown_begun_meanwhile() -> None:
    gate = CountedGate(500, concurrency=2)  # the token's slot, then the two searches'
    sent, waited = await a_request_waits_while_its_neighbour_is_answered(gate, RATE_LIMIT, slots_taken(gate, 3))
    assert len(sent) == 1, sent  # the one that waited never left (it did, into the cooldown)
    assert isinstance(waited, SourceError) and waited.reason == TerminalReason.RATE_LIMITED, waited
    assert waited.cooldown_s is not None and 0 < waited.cooldown_s <= LADDER_BASE_MS / 1000
    assert gate.penalty == 1  # its answer had climbed the ladder again (120 s)


async def test_a_request_waiting_for_its_slot_does_not_leave_into_a_pause_begun_meanwhile() -> None:
    gate = CountedGate(500, concurrency=2)
    sent, waited = await a_request_waits_while_its_neighbour_is_answered(gate, RESTRICTED, slots_taken(gate, 3))
    assert len(sent) == 1, sent  # the one that waited never asked the restricted account again
    assert isinstance(waited, SourceError) and waited.reason == TerminalReason.ACCOUNT_RESTRICTED, waited
    assert not waited.retryable


async def test_a_limit_after_the_cooldown_ended_climbs_the_ladder() -> None:
    """Guard: the ladder still climbs for a limit met by a request that left after the
    cooldown (the next step, 120 s), and a stated delay still floors a cooldown running."""
    now = [1000.0]
    gate = MemoryGate(0, clock=lambda: now[0])
    assert await gate.rate_limited(None) == 60
    assert await gate.rate_limited(300) == 300  # a second answer of the limit: its stated delay, same step
    assert gate.penalty == 1
    now[0] += 301
    assert await gate.rate_limited(None) == 120
    assert gate.penalty == 2

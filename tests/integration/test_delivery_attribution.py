"""Delivery failures judged from their owner, at job level.

Real Temporal, real PostgreSQL, real worker processes; Pixiv is the replay, Telegram and
Discord are the fakes of ``tests/fakes`` (their wire formats and limits).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import StackFactory
from tests.fakes.discord import FakeDiscord
from tests.fakes.telegram import FakeTelegram, TgReply
from tests.integration.test_delivery_jobs import names, routes_stack, run_job
from tests.jobs_support import ReplayServer, curaflow, discord_route, intents, ordered, telegram_route

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: A tag whose one recorded work has three pages (an album).
ALBUM_TAG = "描き方"


def pages_in_chat(fake: FakeTelegram) -> list[str]:
    return [(m.get("photo") or [m.get("document")])[0]["file_unique_id"] for m in fake.messages]


async def refusals(stack: Any, *, held: bool = False) -> int:
    """Refusals for good (or, with ``held``, holds) remembered for this stack's routes (the
    ledger is shared by the session: an earlier test's routes may have refused works)."""
    pool = await stack.ledger()
    routes = list(stack.settings.routes)
    return int(
        await pool.fetchval(
            "SELECT count(*) FROM route_refusals WHERE route = ANY($1::text[]) AND (until IS NOT NULL) = $2",
            routes,
            held,
        )
    )


async def test_a_receivers_size_limit_never_consumes_the_work(
    make_stack: StackFactory, replay: ReplayServer, discord: FakeDiscord
) -> None:
    # The server's limit is lower than the route says (its boost lapsed): 413 / 40005.
    discord.max_request_bytes = 1024
    [work_id] = ordered("ゆずソフト")
    _, dc = names()
    stack = routes_stack(make_stack, replay, {dc: discord_route(discord)}, tags=["ゆずソフト"])
    await stack.start_worker()

    record = await run_job(stack, ["ゆずソフト"])
    cell = record.cells[0]
    assert (cell.state, cell.reason) == ("failed", "route_refused")
    assert record.business_status == "failed"  # alertable: someone must fix the route
    assert await refusals(stack) == 0  # the work is not refused for good
    assert await refusals(stack, held=True) == 1  # only held back from the route for a while
    assert (await intents(await stack.ledger(), record.job_id))[dc]["status"] == "failed"

    discord.max_request_bytes = 10 * 1024 * 1024  # the route is fixed and resumed: the same work goes
    resumed = await curaflow("routes", "resume", dc, stack=stack)
    assert resumed.returncode == 0, resumed.stderr
    again = await run_job(stack, ["ゆずソフト"])
    assert (again.cells[0].state, again.cells[0].work_id) == ("submitted", work_id)


async def test_a_partly_posted_album_is_resumed_after_the_rate_limit(
    make_stack: StackFactory, replay: ReplayServer, telegram: FakeTelegram
) -> None:
    telegram.script["sendMediaGroup"] = [TgReply("partial", posted=1, retry_after=1), TgReply("429", retry_after=1)]
    tg, _ = names()
    stack = routes_stack(make_stack, replay, {tg: telegram_route(telegram)}, tags=[ALBUM_TAG])
    await stack.start_worker()

    record = await run_job(stack, [ALBUM_TAG])
    assert record.cells[0].state == "submitted", record.cells[0].reason
    pages = pages_in_chat(telegram)
    assert len(pages) == 3 == len(set(pages))  # page 0 once, not re-sent by either retry
    intent = (await intents(await stack.ledger(), record.job_id))[tg]
    assert [len(part) for part in intent["remote_ids"]] == [3]  # remote ids per item


async def test_a_partial_post_is_reported_partial_and_never_posted_again(
    make_stack: StackFactory, replay: ReplayServer, telegram: FakeTelegram
) -> None:
    # Page 0 is posted, then a rate limit; the retry finds the chat gone (a broken route).
    telegram.script["sendMediaGroup"] = [TgReply("partial", posted=1, retry_after=1), TgReply("chat_not_found")]
    [work_id] = ordered(ALBUM_TAG)
    tg, _ = names()
    stack = routes_stack(make_stack, replay, {tg: telegram_route(telegram)}, tags=[ALBUM_TAG])
    await stack.start_worker()

    record = await run_job(stack, [ALBUM_TAG])
    cell = record.cells[0]
    assert (cell.state, cell.reason) == ("failed", "delivery_partial")
    assert [d.status for d in cell.delivery_reports()] == ["partial"]
    assert record.business_status == "failed"
    intent = (await intents(await stack.ledger(), record.job_id))[tg]
    assert intent["status"] == "unknown" and intent["remote_ids"] == [[None]]
    assert await refusals(stack) == 0  # nothing for `curaflow refusals clear` to re-open

    again = await run_job(stack, [ALBUM_TAG])  # the chat works again
    assert again.cells[0].work_id != work_id  # the work stays blocked on that route
    assert len(pages_in_chat(telegram)) == 1  # page 0 was never posted again

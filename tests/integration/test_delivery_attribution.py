"""Delivery failures judged from their owner, at job level.

Real Temporal, real PostgreSQL, real worker processes; Pixiv is the replay, Telegram,
Discord and a signed-webhook receiver are the fakes of ``tests/fakes`` (their wire formats
and limits).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from curaflow.protocol.projection import project_job
from tests.fakes.discord import DcReply
from tests.fakes.telegram import FakeTelegram, TgReply
from tests.fakes.webhook import Reply
from tests.jobs_support import (
    Fakes,
    SharedEnv,
    curaflow,
    discord_route,
    intents,
    ordered,
    telegram_route,
    webhook_route,
)
from tests.support import Stack

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: A tag whose one recorded work has three pages (an album).
ALBUM_TAG = "描き方"
#: The deadline of a job whose send a receiver holds past it: long enough for the shared
#: worker's search, download and first send (well under a second on an idle machine), and
#: every hold below lasts minutes past it. A job held past it ends at it, so the test's
#: time is this (it was 15 s: two cases took 15 s each).
HELD_DEADLINE_MS = 6_000


def pages_in_chat(fake: FakeTelegram) -> list[str]:
    return [(m.get("photo") or [m.get("document")])[0]["file_unique_id"] for m in fake.messages]


async def refusals(stack: Stack, route: str, *, held: bool = False) -> int:
    """Refusals for good (or, with ``held``, holds) remembered for ``route`` (the ledger is
    shared by the session: an earlier test's routes may have refused works)."""
    pool = await stack.ledger()
    return int(
        await pool.fetchval(
            "SELECT count(*) FROM route_refusals WHERE route = $1 AND (until IS NOT NULL) = $2", route, held
        )
    )


#: Each test's slot → its one route's config (one worker for the module).
SLOTS: dict[str, Callable[[Fakes], dict[str, Any]]] = {
    "size": lambda f: discord_route(f.discord),
    "resumed": lambda f: telegram_route(f.telegram),
    "partial": lambda f: telegram_route(f.telegram),
    "flood": lambda f: telegram_route(f.telegram),
    "flood_hours": lambda f: telegram_route(f.telegram),
    "global": lambda f: discord_route(f.discord),
    "unavailable": lambda f: webhook_route(f.webhook, "/unavailable"),
    "unavailable_hours": lambda f: webhook_route(f.webhook, "/unavailable_hours"),
    "unavailable_short": lambda f: webhook_route(f.webhook, "/unavailable_short"),
}


def shared_config(env: SharedEnv) -> dict[str, Any]:
    """The module's worker: a target per slot, with its one route (``env.route(slot)``)."""
    return {
        "pixiv": env.replay.config(),
        "routes": {env.route(slot): route(env.fakes) for slot, route in SLOTS.items()},
        "targets": [{"id": slot, "query": {"tags": ["オリジナル"]}, "routes": [env.route(slot)]} for slot in SLOTS],
    }


async def test_a_receivers_size_limit_never_consumes_the_work(env: SharedEnv) -> None:
    # The server's limit is lower than the route says (its boost lapsed): 413 / 40005.
    discord, stack, dc = env.discord, env.stack, env.route("size")
    discord.max_request_bytes = 1024
    [work_id] = ordered("ゆずソフト")

    record = await env.run("size", ["ゆずソフト"])
    cell = record.cells[0]
    assert (cell.state, cell.reason) == ("failed", "route_refused")
    assert record.business_status == "failed"  # alertable: someone must fix the route
    assert await refusals(stack, dc) == 0  # the work is not refused for good
    assert await refusals(stack, dc, held=True) == 1  # only held back from the route for a while
    assert (await intents(await stack.ledger(), record.job_id))[dc]["status"] == "failed"

    discord.max_request_bytes = 10 * 1024 * 1024  # the route is fixed and resumed: the same work goes
    resumed = await curaflow("routes", "resume", dc, stack=stack)
    assert resumed.returncode == 0, resumed.stderr
    again = await env.run("size", ["ゆずソフト"])
    assert (again.cells[0].state, again.cells[0].work_id) == ("submitted", work_id)


async def test_an_album_failed_at_an_item_is_posted_whole_once_after_the_rate_limit(env: SharedEnv) -> None:
    # The Bot API's 400 naming the album's item 2 posted nothing of it (an album is one
    # request to Telegram): the retry sends it whole. Until 2026-12-07 items 0..1 were
    # recorded posted and only the rest was sent again.
    telegram, stack, tg = env.telegram, env.stack, env.route("resumed")
    telegram.script["sendMediaGroup"] = [
        TgReply("item_failed", posted=2, retry_after=1),
        TgReply("429", retry_after=1),
    ]

    record = await env.run("resumed", [ALBUM_TAG])
    assert record.cells[0].state == "submitted", record.cells[0].reason
    pages = pages_in_chat(telegram)
    assert len(pages) == 3 == len(set(pages))  # every page once
    intent = (await intents(await stack.ledger(), record.job_id))[tg]
    assert [len(part) for part in intent["remote_ids"]] == [3]  # remote ids per item
    assert None not in intent["remote_ids"][0]


async def test_an_album_posted_without_an_item_is_unknown_and_never_posted_again(env: SharedEnv) -> None:
    # Telegram posted page 0 of the album and left the rest out ("Message was not sent"):
    # which pages are in the chat the answer does not say — unknown, never sent again.
    telegram, stack, tg = env.telegram, env.stack, env.route("partial")
    telegram.script["sendMediaGroup"] = [TgReply("partial", posted=1)]
    [work_id] = ordered(ALBUM_TAG)

    record = await env.run("partial", [ALBUM_TAG])
    cell = record.cells[0]
    assert (cell.state, cell.reason) == ("failed", "delivery_unknown")
    assert [d.status for d in cell.delivery_reports()] == ["unknown"]
    assert record.business_status == "failed"
    intent = (await intents(await stack.ledger(), record.job_id))[tg]
    assert intent["status"] == "unknown"
    assert await refusals(stack, tg) == 0  # nothing for `curaflow refusals clear` to re-open

    telegram.script["sendMediaGroup"] = []
    again = await env.run("partial", [ALBUM_TAG])  # the chat works again
    assert again.cells[0].work_id != work_id  # the work stays blocked on that route
    assert len(pages_in_chat(telegram)) == 1  # page 0 was never posted again


async def held_report(stack: Stack, job_id: str) -> tuple[int, dict[str, Any], dict[str, Any]]:
    """What a consumer reads of an ended job: its deadline, ``GET /jobs/{id}``'s ``error``
    (the terminal event carries the same) and the outcome record."""
    pool = await stack.ledger()
    record = await stack.wait_terminal(job_id)
    assert record.deadline_at is not None
    error = project_job(record)["error"]
    outcome = await pool.fetchval("SELECT record FROM outcomes WHERE job_id = $1", job_id)
    return record.deadline_at, error, json.loads(outcome) if isinstance(outcome, str) else outcome


@pytest.mark.parametrize(
    ("slot", "reply", "kind", "code"),
    [
        # Telegram's flood wait on one send, waited as stated: past the deadline, within
        # the execution's grace (the deadline ends the job) …
        ("flood", TgReply("429", retry_after=300), "rate_limited", ("deadline_exceeded", "execution_timeout")),
        # … or past the execution's end too (Temporal refuses the retry: the route's failure).
        ("flood_hours", TgReply("429", retry_after=4 * 3600), "rate_limited", ("delivery_failed", "telegram_failed")),
        # Discord's global limit: the whole route cools down (at most its cap, 1 h).
        ("global", DcReply("429_global_stated", retry_after=4 * 3600), "cooling", None),
    ],
    ids=["telegram_flood_wait_past_the_deadline", "telegram_flood_wait_of_hours", "discord_global"],
)
async def test_a_job_ending_while_a_route_holds_the_delivery_says_what_held_it(
    env: SharedEnv, slot: str, reply: Any, kind: str, code: tuple[str, str] | None
) -> None:
    route = env.route(slot)
    if slot.startswith("flood"):
        env.telegram.script["*"] = [reply] * 5
    else:
        env.discord.script = [reply] * 5

    job_id = await env.stack.admit({**env.task(slot, ["ゆずソフト"]), "deadline_ms": HELD_DEADLINE_MS})
    deadline_at, error, outcome = await held_report(env.stack, job_id)

    if code is not None:  # the protocol's code is unchanged
        assert (error["code"], error["detail"]["internal_code"]) == code
    # The report says what held the cell: the route, the kind of wait its receiver stated, until when.
    held = error["detail"]["held_by"]
    assert (held["owner"], held["name"], held["kind"]) == ("route", route, kind)
    assert held["until"] > deadline_at  # it held the delivery past the deadline
    target = outcome["cells"]["targets"][0]
    for text in (error["message"], outcome["user_message"]["en"], target["error"]):
        assert route in text and "rate limit" in text, text
        assert "narrower query" not in text and "check the bot" not in text  # remedies that would not help
    assert route in outcome["user_message"]["zh"] and "限流" in outcome["user_message"]["zh"]
    assert target["held_by"] == held


def unavailable(retry_after_s: int) -> Reply:
    """A receiver down for maintenance: ``503`` with the ``Retry-After`` it asks for."""
    return Reply(503, {"error": "down for maintenance"}, headers={"Retry-After": str(retry_after_s)})


@pytest.mark.parametrize(
    ("slot", "retry_after_s", "code"),
    [
        # The receiver's stated wait ends past the deadline, within the execution's grace:
        # the deadline ends the job …
        ("unavailable", 300, ("deadline_exceeded", "execution_timeout")),
        # … or past the execution's end too (Temporal refuses the retry: the route's failure).
        ("unavailable_hours", 4 * 3600, ("delivery_failed", "delivery_failed")),
    ],
    ids=["webhook_503_past_the_deadline", "webhook_503_of_hours"],
)
async def test_a_job_ending_while_its_receiver_asked_to_come_back_later_says_so(
    env: SharedEnv, slot: str, retry_after_s: int, code: tuple[str, str]
) -> None:
    # A receiver answering 503 with a Retry-After is waited as it asked, like a rate
    # limit; the report named no hold ("use a longer deadline", or the route's failure),
    # though the receiver had asked curaflow to come back later.
    route = env.route(slot)
    env.webhook.script[f"/{slot}"] = [unavailable(retry_after_s)] * 5

    job_id = await env.stack.admit({**env.task(slot, ["ゆずソフト"]), "deadline_ms": HELD_DEADLINE_MS})
    deadline_at, error, outcome = await held_report(env.stack, job_id)

    assert (error["code"], error["detail"]["internal_code"]) == code  # the protocol's code is unchanged
    assert len(env.webhook.received) == 1  # the wait was kept: nothing was sent again
    held = error["detail"]["held_by"]
    assert (held["owner"], held["name"], held["kind"]) == ("route", route, "unavailable")
    assert held["until"] > deadline_at
    target = outcome["cells"]["targets"][0]
    for text in (error["message"], outcome["user_message"]["en"], target["error"]):
        assert route in text and "unavailable" in text, text
        assert "rate limit" not in text and "rate-limit" not in text, text  # not a rate limit
        assert "longer deadline" not in text and "narrower query" not in text, text  # remedies that would not help
    zh = outcome["user_message"]["zh"]
    assert route in zh and "不可用" in zh and "限流" not in zh
    assert target["held_by"] == held


async def test_a_receiver_back_within_the_deadline_gets_the_work_once(env: SharedEnv) -> None:
    # Guard: a 503 whose stated wait ends before the deadline is waited, then the work
    # goes once; the job names no hold and its intent keeps none.
    hook = env.route("unavailable_short")
    env.webhook.script["/unavailable_short"] = [unavailable(2)]

    record = await env.run("unavailable_short", ["ゆずソフト"])

    cell = record.cells[0]
    assert (cell.state, cell.held_by) == ("submitted", None), cell
    first, second = env.webhook.received
    assert second.at - first.at >= 2.0  # the stated wait, not the backoff
    assert env.webhook.works() == [cell.work_id] * 2  # the 503, then the one accepted
    intent = (await intents(await env.stack.ledger(), record.job_id))[hook]
    assert intent["status"] == "delivered"

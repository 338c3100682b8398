"""An answer curaflow has never seen costs one attempt, never a work (issue "safe defaults
at the edges", the delivery side), at job level.

Real Temporal, real PostgreSQL, real worker processes; Pixiv is the replay, Telegram,
Discord and the webhook receiver are the fakes of ``tests/fakes`` speaking their wire
formats: a topic that no longer exists, a closed topic, a request over the Bot API
server's size, a receiver refusing every work, a 429 without a delay, Cloudflare's 1015
page. The ledger and the fakes' records are the proof; the operator's commands are run
as an operator runs them. One worker process serves the module
(:func:`tests.support.shared_stack`), each test on a target and a route of its own
(:data:`SLOTS`), the fakes reset before it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from curaflow.ledger import route_gates
from tests.fakes.discord import DcReply
from tests.integration.test_delivery_jobs import run_job
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


async def remembered(stack: Stack, route: str) -> list[dict[str, Any]]:
    """The route's rows of ``route_refusals``: refusals for good (``until`` None) and holds."""
    pool = await stack.ledger()
    rows = await pool.fetch("SELECT work_id, reason, until FROM route_refusals WHERE route = $1", route)
    return [dict(r) for r in rows]


def cell_of(record: Any) -> tuple[str, str | None, str | None]:
    cell = record.cells[0]
    return cell.state, cell.reason, cell.work_id


#: Each test's target (its slot) → its one route's config.
SLOTS: dict[str, Callable[[Fakes], dict[str, Any]]] = {
    "streak": lambda f: telegram_route(f.telegram, message_thread_id=999),
    "topic-5": lambda f: telegram_route(f.telegram, message_thread_id=5),
    "topic-7": lambda f: telegram_route(f.telegram, message_thread_id=7),
    "split": lambda f: telegram_route(f.telegram, max_request_bytes=250_000),
    "413": lambda f: telegram_route(f.telegram),
    "all-refused": lambda f: webhook_route(f.webhook, "/all"),
    "discord-429_no_delay": lambda f: discord_route(f.discord),
    "discord-html_429": lambda f: discord_route(f.discord),
}


def shared_config(env: SharedEnv) -> dict[str, Any]:
    """The module's worker: a target per slot, with its one route (``env.route(slot)``)."""
    return {
        "pixiv": env.replay.config(),
        "routes": {env.route(slot): route(env.fakes) for slot, route in SLOTS.items()},
        "targets": [{"id": slot, "query": {"tags": ["オリジナル"]}, "routes": [env.route(slot)]} for slot in SLOTS],
    }


async def test_an_unknown_telegram_refusal_never_burns_works_and_a_streak_pauses_the_route(env: SharedEnv) -> None:
    # The route posts into forum topic 999, which no longer exists: Telegram answers
    # 400 "Bad Request: message thread not found", a wording no list of curaflow names.
    telegram = env.telegram
    telegram.threads = {"1"}
    w1, w2, w3 = ordered("オリジナル")[:3]
    stack, tg = env.stack, env.route("streak")

    first, second = await run_job(stack, target_id="streak"), await run_job(stack, target_id="streak")
    # the route's failure, alertable; the work is not refused, only held back, so the
    # next job tries the next work instead of the same one first for ever
    assert [cell_of(r) for r in (first, second)] == [("failed", "route_refused", w1), ("failed", "route_refused", w2)]
    assert first.business_status == second.business_status == "failed"
    rows = await remembered(stack, tg)
    assert {r["work_id"] for r in rows} == {w1, w2} and all(r["until"] is not None for r in rows)
    listed = await curaflow("refusals", "list", "--route", tg, "--json", stack=stack)
    assert {(r["work_id"], r["until"] is not None) for r in json.loads(listed.stdout)} == {(w1, True), (w2, True)}

    # the third different work refused with the same answer: the route is broken, not the works
    third = await run_job(stack, target_id="streak")
    assert cell_of(third) == ("failed", "route_refused", w3)
    gate = await route_gates.read_gate(await stack.ledger(), tg)
    assert gate is not None and gate.paused_ms > 0 and "message thread not found" in (gate.pause_reason or "")
    assert await remembered(stack, tg) == []  # the streak's holds are lifted: no work is lost

    # while paused nothing is sent: the job fails at once, alertable, the work not used
    sent = len(telegram.requests)
    paused = await run_job(stack, target_id="streak")
    assert cell_of(paused)[:2] == ("failed", "route_paused") and paused.business_status == "failed"
    assert len(telegram.requests) == sent
    assert (await intents(await stack.ledger(), paused.job_id))[tg]["status"] == "failed"

    listed = await curaflow("routes", "list", "--json", stack=stack)
    assert listed.returncode == 0, listed.stderr
    [row] = [r for r in json.loads(listed.stdout) if r["route"] == tg]
    assert row["paused_until"] and "message thread not found" in row["pause_reason"]

    # the operator fixes the topic and resumes the route: the first work, never delivered, goes
    telegram.threads = {"1", "999"}
    resumed = await curaflow("routes", "resume", tg, stack=stack)
    assert resumed.returncode == 0, resumed.stderr
    again = await run_job(stack, target_id="streak")
    assert cell_of(again) == ("submitted", None, w1)
    assert [m["message_id"] for m in telegram.messages] and telegram.violations == []
    assert await curaflow("routes", "resume", tg, stack=stack) is not None  # idempotent


@pytest.mark.parametrize(
    ("threads", "closed", "thread_id"),
    [({"1"}, set(), 5), ({"7"}, {"7"}, 7)],
    ids=["thread-not-found", "TOPIC_CLOSED"],
)
async def test_a_telegram_topic_refusal_is_the_routes_failure(
    env: SharedEnv, threads: set[str], closed: set[str], thread_id: int
) -> None:
    telegram = env.telegram
    telegram.threads, telegram.closed_threads = threads, closed
    [work_id] = ordered("ゆずソフト")
    slot = f"topic-{thread_id}"
    stack, tg = env.stack, env.route(slot)

    record = await run_job(stack, ["ゆずソフト"], target_id=slot)
    assert cell_of(record) == ("failed", "route_refused", work_id)
    assert record.business_status == "failed"  # alertable
    [row] = await remembered(stack, tg)
    assert row["until"] is not None  # held back for a while, never refused for good


async def test_a_telegram_album_over_the_request_limit_is_split_under_it(env: SharedEnv) -> None:
    replay, telegram = env.replay, env.telegram
    [work_id] = ordered(ALBUM_TAG)
    replay.faults.image_sizes = {work_id: (2000, 2000)}  # pages of 89, 94 and 127 KB: 310 KB together
    telegram.max_request_bytes = 250_000  # the Bot API server takes at most this per request
    stack, tg = env.stack, env.route("split")

    record = await run_job(stack, [ALBUM_TAG], target_id="split")
    assert cell_of(record) == ("submitted", None, work_id)
    assert all(r.status == 200 for r in telegram.requests)  # no 413: split before anyone is blamed
    assert [r.method for r in telegram.requests] == ["sendMediaGroup", "sendPhoto"]
    assert len(telegram.messages) == 3 and telegram.violations == []
    intent = (await intents(await stack.ledger(), record.job_id))[tg]
    assert [len(part) for part in intent["remote_ids"]] == [2, 1]


async def test_a_413_of_the_whole_request_never_makes_the_next_job_send_the_same_work(env: SharedEnv) -> None:
    # The Bot API server in front takes less than the route says: the first work's
    # request is refused whole (413), the route's failure; the next job sends another work.
    replay, telegram = env.replay, env.telegram
    w1, w2 = ordered("オリジナル")[:2]
    replay.faults.image_sizes = {w1: (6000, 6000)}
    telegram.max_request_bytes = 160_000  # w1 is one PNG of 173 KB; w2 albums of 11 pages of 13 KB
    stack, tg = env.stack, env.route("413")

    first = await run_job(stack, target_id="413")
    assert cell_of(first) == ("failed", "route_refused", w1)
    second = await run_job(stack, target_id="413")
    assert cell_of(second) == ("submitted", None, w2)
    sent = [r for r in telegram.requests if r.status == 413]
    assert len(sent) == 1  # w1 was sent once, not by every job
    # w1 is held back, not refused: once the hold ends (or the route is resumed) it is offered again
    assert [(r["work_id"], r["until"] is not None) for r in await remembered(stack, tg)] == [(w1, True)]
    resumed = await curaflow("routes", "resume", tg, stack=stack)
    assert resumed.returncode == 0 and "1 held work released" in resumed.stdout, resumed.stdout
    assert await remembered(stack, tg) == []


async def test_a_receiver_refusing_every_work_is_paused_and_its_refusals_are_restored(env: SharedEnv) -> None:
    # A receiver that answers 422 ("the work's content") to everything: each answer alone
    # blames the work, but three different works in a row with the same answer is a
    # broken receiver; the refusals it recorded are lifted.
    webhook = env.webhook
    w1, w2, w3 = ordered("オリジナル")[:3]
    webhook.refuse_works = set(ordered("オリジナル"))
    stack, hook = env.stack, env.route("all-refused")

    records = [await run_job(stack, target_id="all-refused") for _ in range(3)]
    assert [cell_of(r) for r in records] == [("failed", "delivery_rejected", w) for w in (w1, w2, w3)]
    assert await remembered(stack, hook) == []  # restored: none of them is refused for good
    gate = await route_gates.read_gate(await stack.ledger(), hook)
    assert gate is not None and gate.paused_ms > 0 and gate.pauses == 1

    webhook.refuse_works = set()  # fixed
    resumed = await curaflow("routes", "resume", hook, stack=stack)
    assert resumed.returncode == 0, resumed.stderr
    again = await run_job(stack, target_id="all-refused")
    assert cell_of(again) == ("submitted", None, w1)


@pytest.mark.parametrize("kind", ["429_no_delay", "html_429"])
async def test_a_discord_rate_limit_without_a_delay_backs_off_for_seconds(env: SharedEnv, kind: str) -> None:
    discord = env.discord
    discord.script = [DcReply(kind)]
    stack, dc = env.stack, env.route(f"discord-{kind}")

    record = await run_job(stack, ["ゆずソフト"], target_id=f"discord-{kind}")
    assert cell_of(record)[0] == "submitted"
    first, second = discord.requests
    assert first.status == 429 and second.status == 200 and len(discord.messages) == 1
    assert second.at - first.at >= 5.0  # the backoff's first step, not a one-second constant
    gate = await route_gates.read_gate(await stack.ledger(), dc)
    assert gate is not None and gate.rate_limits == 0  # the delivery ended the streak
    # Cloudflare's IP-level block held the whole route, not only this attempt
    assert (gate.cooldown_until > 0) is (kind == "html_429")

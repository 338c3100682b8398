"""Telegram, Discord and webhook delivery at job level, with the ledger as the proof.

Real Temporal, real PostgreSQL, real worker processes; Pixiv is the replay server (in
the test process), Telegram / Discord / the webhook receiver are fakes on 127.0.0.1
that check what they receive against the platforms' limits.

One worker process serves the module (:func:`tests.support.shared_stack`): each test has
a target and routes of its own (:data:`SLOTS`), and the fakes are reset before it; the
test that kills a worker has a stack of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from curaflow.protocol.projection import project_job
from tests.conftest import StackFactory
from tests.fakes.telegram import TgReply
from tests.fakes.webhook import Reply
from tests.jobs_support import (
    Fakes,
    ReplayServer,
    SharedEnv,
    discord_route,
    intents,
    ordered,
    telegram_route,
    webhook_route,
)
from tests.support import Stack, eventually, short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def routes_stack(
    make_stack: StackFactory,
    replay: ReplayServer,
    routes: dict[str, dict[str, Any]],
    *,
    tags: list[str] | None = None,
    target: dict[str, Any] | None = None,
    **extra: Any,
) -> Stack:
    config = {
        "pixiv": replay.config(),
        "routes": routes,
        "targets": [
            {"id": "demo", "query": {"tags": tags or ["オリジナル"]}, "routes": list(routes), **(target or {})}
        ],
        **extra,
    }
    return make_stack(config)


async def run_job(stack: Stack, tags: list[str] | None = None, target_id: str | None = None) -> Any:
    """Admit a job (on ``target_id``, or the stack's only target) and wait for its end."""
    params: dict[str, Any] = {"target_id": target_id} if target_id else {}
    return await stack.wait_terminal(await stack.admit(stack.task(query={"tags": tags or ["オリジナル"]}, **params)))


def names() -> tuple[str, str]:
    return f"tg-{short_id()}", f"hook-{short_id()}"


RouteKinds = Callable[[Fakes], dict[str, dict[str, Any]]]

#: Each test's target (its slot) → its routes (kind → route config) and target fields.
SLOTS: dict[str, tuple[RouteKinds, dict[str, Any]]] = {
    "document": (lambda f: {"tg": telegram_route(f.telegram)}, {}),
    "album": (lambda f: {"tg": telegram_route(f.telegram)}, {}),
    "retry-after": (lambda f: {"tg": telegram_route(f.telegram)}, {}),
    "ambiguous": (lambda f: {"tg": telegram_route(f.telegram, timeout_ms=500)}, {}),
    "ambiguous-retry": (lambda f: {"tg": telegram_route(f.telegram, timeout_ms=500, on_ambiguous="retry")}, {}),
    "one-fails": (lambda f: {"tg": telegram_route(f.telegram), "hook": webhook_route(f.webhook)}, {}),
    "long-album": (lambda f: {"tg": telegram_route(f.telegram)}, {}),
    "discord": (lambda f: {"dc": discord_route(f.discord)}, {}),
    "cache": (
        lambda f: {"tg": telegram_route(f.telegram), "hook": webhook_route(f.webhook)},
        {"storage_mode": "cache"},
    ),
    "cache-kept": (
        lambda f: {"tg": telegram_route(f.telegram), "hook": webhook_route(f.webhook)},
        {"storage_mode": "cache"},
    ),
    "exactly-once": (
        lambda f: {"tg": telegram_route(f.telegram), "hook": webhook_route(f.webhook)},
        {"filters": {"max_page_count": 1}},  # one message per job
    ),
    "pending": (lambda f: {"hook": webhook_route(f.webhook, "/p")}, {}),
}


def shared_config(env: SharedEnv) -> dict[str, Any]:
    """The module's worker: a target per slot, with its routes (``env.route(slot, kind)``)."""
    routes: dict[str, Any] = {}
    targets = []
    for slot, (kinds, target) in SLOTS.items():
        mine = {env.route(slot, kind): route for kind, route in kinds(env.fakes).items()}
        routes.update(mine)
        targets.append({"id": slot, "query": {"tags": ["オリジナル"]}, "routes": list(mine), **target})
    return {"pixiv": env.replay.config(), "routes": routes, "targets": targets}


async def test_a_7000x5400_image_goes_as_a_document(env: SharedEnv) -> None:
    replay, telegram = env.replay, env.telegram
    [work_id] = ordered("ゆずソフト")
    replay.faults.image_sizes = {work_id: (7000, 5400)}  # served at full size
    stack = env.stack
    tg = env.route("document", "tg")
    record = await env.run("document", ["ゆずソフト"])

    assert record.cells[0].state == "submitted" and record.cells[0].work_id == work_id
    [sent] = telegram.requests
    assert sent.method == "sendDocument"
    assert (sent.files["document"].width, sent.files["document"].height) == (7000, 5400)
    assert telegram.violations == []
    intent = (await intents(await stack.ledger(), record.job_id))[tg]
    message_id = telegram.messages[0]["message_id"]
    assert intent["status"] == "delivered"
    assert intent["remote_id"] == str(message_id) and intent["remote_ids"] == [[message_id]]


async def test_a_3_page_work_goes_as_one_album(env: SharedEnv) -> None:
    telegram = env.telegram
    stack = env.stack
    tg = env.route("album", "tg")
    record = await env.run("album", ["描き方"])

    assert record.cells[0].state == "submitted" and record.cells[0].work_id == "126879163"
    [sent] = telegram.requests
    assert sent.method == "sendMediaGroup" and len(sent.media) == 3
    assert [m["type"] for m in sent.media] == ["photo"] * 3
    assert "https://www.pixiv.net/artworks/126879163" in sent.media[0]["caption"]
    assert telegram.violations == []
    intent = (await intents(await stack.ledger(), record.job_id))[tg]
    assert intent["remote_ids"] == [[m["message_id"] for m in telegram.messages]]


async def test_a_429_with_retry_after_is_honoured(env: SharedEnv) -> None:
    telegram = env.telegram
    telegram.script["*"] = [TgReply("429", retry_after=2)]
    stack = env.stack
    tg = env.route("retry-after", "tg")
    record = await env.run("retry-after", ["ゆずソフト"])

    assert record.cells[0].state == "submitted"
    first, second = telegram.requests
    assert first.status == 429 and second.status == 200
    assert second.at - first.at >= 2.0  # next_retry_delay = retry_after, not the backoff
    assert len(telegram.messages) == 1
    intent = (await intents(await stack.ledger(), record.job_id))[tg]
    assert (intent["status"], intent["attempts"]) == ("delivered", 2)


async def test_an_ambiguous_telegram_timeout_does_not_produce_a_second_post(env: SharedEnv) -> None:
    telegram = env.telegram
    telegram.script["*"] = [TgReply("stall", stall_s=3)]  # posted, answer held past the timeout
    stack = env.stack
    tg = env.route("ambiguous", "tg")
    record = await env.run("ambiguous", ["ゆずソフト"])

    cell = record.cells[0]
    assert (cell.state, cell.reason) == ("failed", "delivery_unknown")
    assert "not sent again" in (cell.reason_message or "")
    assert (await stack.attempts(record.job_id))["deliver"] == 1
    assert len(telegram.requests) == 1 and len(telegram.messages) == 1
    pool = await stack.ledger()
    assert (await intents(pool, record.job_id))[tg]["status"] == "unknown"
    error = project_job(record)["error"]
    assert error["code"] == "delivery_failed" and error["detail"]["internal_code"] == "delivery_unknown"

    # the unknown intent keeps the work blocked on that route: a later job does not re-post it
    again = await env.run("ambiguous", ["ゆずソフト"])
    assert again.cells[0].state == "no_candidate" and again.cells[0].reason == "duplicate_exhausted"
    assert len(telegram.messages) == 1


async def test_on_ambiguous_retry_re_sends_at_least_once(env: SharedEnv) -> None:
    telegram = env.telegram
    telegram.script["*"] = [TgReply("stall", stall_s=3)]
    record = await env.run("ambiguous-retry", ["ゆずソフト"])

    assert record.cells[0].state == "submitted"
    assert len(telegram.messages) == 2  # at least once: the operator chose duplicates over gaps


async def test_two_routes_where_one_fails_permanently(env: SharedEnv) -> None:
    # Telegram answers once the webhook got its request: a cell that failed for good
    # releases its routes' unsent intents, so the other order would send nothing there.
    telegram, webhook = env.telegram, env.webhook
    telegram.script["*"] = [TgReply("chat_not_found", after=webhook.arrived)] * 5
    stack = env.stack
    tg = env.route("one-fails", "tg")
    hook = env.route("one-fails", "hook")
    record = await env.run("one-fails")

    cell = record.cells[0]
    assert (cell.state, cell.reason) == ("failed", "route_refused")  # the chat is broken, not the work
    assert (await stack.attempts(record.job_id))["deliver"] == 2  # one per route, none retried
    assert len(telegram.requests) == 1  # non-retryable: no second attempt
    assert len(webhook.received) == 1  # the other route delivered, once, with its own intent
    by_route = await intents(await stack.ledger(), record.job_id)
    assert by_route[tg]["status"] == "failed" and "chat not found" in by_route[tg]["last_error"]
    assert by_route[hook]["status"] == "delivered"
    assert by_route[tg]["idempotency_key"] != by_route[hook]["idempotency_key"]
    assert record.business_status == "failed"


async def test_a_long_album_resumes_at_the_first_unconfirmed_chunk(env: SharedEnv) -> None:
    telegram = env.telegram
    telegram.script["sendMediaGroup"] = [TgReply("ok"), TgReply("429", retry_after=1)]
    stack = env.stack
    tg = env.route("long-album", "tg")
    record = await env.run("long-album", ["フリー素材"])

    assert record.cells[0].state == "submitted"
    assert [(r.status, len(r.media)) for r in telegram.requests] == [(200, 7), (429, 7), (200, 7)]
    assert len(telegram.messages) == 14
    intent = (await intents(await stack.ledger(), record.job_id))[tg]
    assert [len(p) for p in intent["remote_ids"]] == [7, 7]
    assert telegram.violations == []


async def test_discord_delivery_records_the_message_id(env: SharedEnv) -> None:
    discord = env.discord
    stack = env.stack
    name = env.route("discord", "dc")
    record = await env.run("discord", ["描き方"])

    assert record.cells[0].state == "submitted"
    [sent] = discord.requests
    assert sent.wait and len(sent.files) == 3
    assert discord.violations == []
    intent = (await intents(await stack.ledger(), record.job_id))[name]
    assert intent["remote_id"] == discord.messages[0]["id"]


async def test_storage_mode_cache_deletes_artifacts_once_every_route_confirmed(env: SharedEnv) -> None:
    telegram, webhook = env.telegram, env.webhook
    record = await env.run("cache")

    assert record.cells[0].state == "submitted"
    assert record.cells[0].artifact is not None
    for f in record.cells[0].artifact.files:
        assert not Path(f.path).exists()
    assert len(telegram.messages) >= 1 and len(webhook.received) == 1


async def test_cache_mode_keeps_artifacts_while_a_route_has_not_confirmed(env: SharedEnv) -> None:
    telegram = env.telegram
    telegram.script["*"] = [TgReply("blocked")]
    record = await env.run("cache-kept")

    assert record.cells[0].state == "failed"
    assert record.cells[0].artifact is not None
    assert all(Path(f.path).exists() for f in record.cells[0].artifact.files)


async def test_done_when_telegram_and_webhook_exactly_once(env: SharedEnv) -> None:
    """The issue's "done when", as a test: two routes, three jobs, one 429."""
    telegram, webhook = env.telegram, env.webhook
    stack = env.stack
    tg = env.route("exactly-once", "tg")
    hook = env.route("exactly-once", "hook")

    first = await env.run("exactly-once")
    second = await env.run("exactly-once")
    telegram.script["*"] = [TgReply("429", retry_after=1)]
    third = await env.run("exactly-once")

    works = [r.cells[0].work_id for r in (first, second, third)]
    assert all(r.cells[0].state == "submitted" for r in (first, second, third))
    assert len(set(works)) == 3
    # Telegram: one post per job (single-page works), each caption naming its work
    posted = [m for m in telegram.messages if "caption" in m]
    assert [next(w for w in works if w in m["caption"]) for m in posted] == works
    assert len(telegram.requests) == 4 and telegram.requests[2].status == 429
    # the webhook: one signed request per job
    assert [r.json()["work"]["work_id"] for r in webhook.received] == works
    # the ledger proves it: one live intent per (route, work), each delivered
    pool = await stack.ledger()
    rows = await pool.fetch(
        """SELECT route, work_id, count(*) AS n, array_agg(status) AS statuses FROM delivery_intents
           WHERE route = ANY($1::text[]) GROUP BY route, work_id""",
        [tg, hook],
    )
    assert len(rows) == 6 and all(r["n"] == 1 and r["statuses"] == ["delivered"] for r in rows)
    index = await pool.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = 'delivery_intents_route_work'")
    assert "UNIQUE" in index and "(route, work_type, work_id)" in index


async def test_webhook_pending_answer_is_retried_with_the_same_key(env: SharedEnv) -> None:
    webhook = env.webhook
    webhook.script["/p"] = [Reply(202, {"status": "queued"})]
    record = await env.run("pending")

    assert record.cells[0].state == "submitted"
    first, second = webhook.at("/p")
    assert first.headers["webhook-id"] == second.headers["webhook-id"]


async def test_a_worker_killed_mid_send_is_ambiguous_and_never_re_posts(
    env: SharedEnv, make_stack: StackFactory
) -> None:
    # The worker dies while Telegram is answering: the retry on another worker finds the
    # intent still ``sending`` and, with on_ambiguous = fail, refuses to post again.
    replay, telegram = env.replay, env.telegram
    telegram.script["*"] = [TgReply("stall", stall_s=4)]
    tg, _ = names()
    stack = routes_stack(make_stack, replay, {tg: telegram_route(telegram, timeout_ms=30_000)}, tags=["ゆずソフト"])
    doomed = await stack.start_worker()
    job_id = await stack.admit(stack.task(query={"tags": ["ゆずソフト"]}))
    await eventually(lambda: telegram.messages, interval_s=0.05, what="the post landed")
    doomed.kill()
    await stack.start_worker()
    record = await stack.wait_terminal(job_id, timeout_s=60)
    assert (await stack.attempts(job_id))["deliver"] == 2  # the killed one and the one that refused

    cell = record.cells[0]
    assert (cell.state, cell.reason) == ("failed", "delivery_unknown")
    assert len(telegram.requests) == 1 and len(telegram.messages) == 1
    intent = (await intents(await stack.ledger(), job_id))[tg]
    assert intent["status"] == "unknown" and intent["attempts"] == 1

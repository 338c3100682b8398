"""Real-world route failures: Telegram's photo/document choice, remembered refusals, gateway errors.

Route-level cases run the production routes against the fakes on 127.0.0.1 (real HTTP,
real multipart; the fakes answer with the platforms' envelopes and their gateways' HTML
pages); job-level cases run real Temporal, real PostgreSQL and real worker processes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from curaflow.routes.base import RouteError
from tests.fakes.discord import DcReply, FakeDiscord
from tests.fakes.telegram import FakeTelegram, TgReply
from tests.integration.test_routes import dc_route, make_request, tg_route
from tests.jobs_support import Fakes, SharedEnv, curaflow, intents, ordered, telegram_route, webhook_route

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
async def http() -> Any:
    async with httpx.AsyncClient() as client:
        yield client


# ---- 5. one photo/document decision per work --------------------------------------------


async def test_a_work_goes_in_one_shape_decided_from_all_its_files(
    tmp_path: Path, telegram: FakeTelegram, http: Any
) -> None:
    # 12 pages: 11 fit a photo, the last (7000×5400) does not. Two albums of 6; both must
    # be documents, not 6 photos then 6 documents.
    request = make_request(tmp_path, [(800, 600)] * 11 + [(7000, 5400)])
    await tg_route(telegram, http).deliver(request)

    assert [(r.method, len(r.media)) for r in telegram.requests] == [("sendMediaGroup", 6)] * 2
    assert {m["type"] for r in telegram.requests for m in r.media} == {"document"}
    assert telegram.violations == []


async def test_a_resumed_work_keeps_its_shape(tmp_path: Path, telegram: FakeTelegram, http: Any) -> None:
    # the first album (with the big page) was confirmed by an earlier attempt; the rest,
    # all small pages, still go as documents
    request = make_request(tmp_path, [(7000, 5400)] + [(800, 600)] * 11, parts_done=[[1, 2, 3, 4, 5, 6]])
    await tg_route(telegram, http).deliver(request)
    [sent] = telegram.requests
    assert [m["type"] for m in sent.media] == ["document"] * 6


# ---- 9. gateway errors and HTML bodies are ambiguous -----------------------------------


@pytest.mark.parametrize("kind", ["gateway_502", "gateway_504", "html_500"])
async def test_a_telegram_gateway_page_is_ambiguous(
    tmp_path: Path, telegram: FakeTelegram, http: Any, kind: str
) -> None:
    telegram.script["*"] = [TgReply(kind)]
    with pytest.raises(RouteError) as caught:
        await tg_route(telegram, http).deliver(make_request(tmp_path, [(800, 600)]))
    assert caught.value.ambiguous and not caught.value.permanent
    assert "outcome unknown" in str(caught.value) and "<html" not in str(caught.value)
    assert len(telegram.messages) == (0 if kind == "html_500" else 1)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (200, {"ok": False, "error_code": 400, "description": "Bad Request: chat not found"}),
        (200, {"ok": False, "error_code": 200, "description": "OK"}),
        (200, {"ok": False}),
        (202, {"ok": False, "error_code": 429, "description": "Too Many Requests: retry after 5"}),
        (500, {"ok": False, "error_code": 400, "description": "Bad Request: chat not found"}),
        (503, {"ok": False, "description": "upstream connect error"}),
        (520, {"ok": False, "error_code": "520", "description": "Too Many Requests: retry after 3"}),
    ],
    ids=["200-400", "200-200", "200-bare", "202-429", "500-400", "503-none", "520-text"],
)
async def test_a_telegram_envelope_not_the_bot_apis_own_after_a_post_is_ambiguous(
    tmp_path: Path, telegram: FakeTelegram, http: Any, status: int, body: dict[str, Any]
) -> None:
    # A proxy in front of the Bot API forwarded the request (the photo is posted) and
    # answered in the envelope's shape with an `error_code` that is not its status, or
    # `ok: false` under a 2xx, which the Bot API never writes: the status decides, and a
    # 2xx or a 5xx may follow a post — ambiguous (never a refusal the route holds the work
    # back for and posts again after, never a plain retry posting it twice).
    telegram.script["*"] = [TgReply("rewritten", status=status, body=body)]
    with pytest.raises(RouteError) as caught:
        await tg_route(telegram, http).deliver(make_request(tmp_path, [(800, 600)]))
    err = caught.value
    assert err.ambiguous and not err.permanent and not err.rate_limited, str(err)
    # No refusal: the work is never held back and posted again. An answer all the same,
    # by its status: several works ending unknown with it pause the route (2026-12-07).
    assert err.answer is not None and str(status) in err.answer
    assert len(telegram.messages) == 1


@pytest.mark.parametrize("retry_after", [30, 7 * 24 * 3600])
async def test_a_telegram_429_that_is_not_the_bot_apis_holds_the_whole_route(
    tmp_path: Path, telegram: FakeTelegram, http: Any, retry_after: int
) -> None:
    # The gateway in front of the Bot API limits the worker's address, not one send (as
    # Cloudflare's 1015 page in front of Discord): every send of the route waits it, at
    # most the route's cap (delivery.route_rate_limit_cap_ms) — never a week on its word.
    telegram.script["*"] = [TgReply("html_429", retry_after=retry_after)]
    with pytest.raises(RouteError) as caught:
        await tg_route(telegram, http).deliver(make_request(tmp_path, [(800, 600)]))
    err = caught.value
    assert err.rate_limited and err.route_wide, str(err)
    assert err.retry_after_s == retry_after and not err.ambiguous and not err.permanent
    assert telegram.messages == []


async def test_the_bot_apis_own_429_holds_that_send_only(tmp_path: Path, telegram: FakeTelegram, http: Any) -> None:
    telegram.script["*"] = [TgReply("429", retry_after=7)]  # a flood wait of the chat: waited as stated
    with pytest.raises(RouteError) as caught:
        await tg_route(telegram, http).deliver(make_request(tmp_path, [(800, 600)]))
    err = caught.value
    assert err.rate_limited and not err.route_wide and err.retry_after_s == 7


async def test_a_telegram_json_server_error_is_still_a_plain_retry(
    tmp_path: Path, telegram: FakeTelegram, http: Any
) -> None:
    telegram.script["*"] = [TgReply("500")]  # the Bot API's own {"ok": false, "error_code": 500}
    with pytest.raises(RouteError) as caught:
        await tg_route(telegram, http).deliver(make_request(tmp_path, [(800, 600)]))
    assert not caught.value.ambiguous and not caught.value.permanent


@pytest.mark.parametrize("retry_after", [30, 7 * 24 * 3600])
async def test_a_discord_429_in_json_that_is_not_discords_holds_the_whole_route(
    tmp_path: Path, discord: FakeDiscord, http: Any, retry_after: int
) -> None:
    # A gateway in front of Discord limiting the worker's address answers its own JSON
    # (neither `global` nor `retry_after`): the route's limit, as Cloudflare's 1015 page is —
    # the route cools down, the stated wait at most the route's cap, never a week.
    discord.script = [DcReply("proxy_429", retry_after=retry_after)]
    with pytest.raises(RouteError) as caught:
        await dc_route(discord, http).deliver(make_request(tmp_path, [(800, 600)]))
    err = caught.value
    assert err.rate_limited and err.route_wide and err.retry_after_s == retry_after, str(err)
    assert discord.messages == []


@pytest.mark.parametrize("kind", ["429", "429_no_delay"])
async def test_discords_own_429_holds_that_send_only(
    tmp_path: Path, discord: FakeDiscord, http: Any, kind: str
) -> None:
    discord.script = [DcReply(kind, retry_after=3)]
    with pytest.raises(RouteError) as caught:
        await dc_route(discord, http).deliver(make_request(tmp_path, [(800, 600)]))
    assert caught.value.rate_limited and not caught.value.route_wide


@pytest.mark.parametrize("kind", ["gateway_502", "gateway_504"])
async def test_a_discord_gateway_page_is_ambiguous(tmp_path: Path, discord: FakeDiscord, http: Any, kind: str) -> None:
    discord.script = [DcReply(kind)]
    with pytest.raises(RouteError) as caught:
        await dc_route(discord, http).deliver(make_request(tmp_path, [(800, 600)]))
    assert caught.value.ambiguous and not caught.value.permanent
    assert len(discord.messages) == 1


#: The job-level tests' slots → their one route's config (one worker for them all).
SLOTS: dict[str, Callable[[Fakes], dict[str, Any]]] = {
    "gateway": lambda f: telegram_route(f.telegram),
    "refused": lambda f: webhook_route(f.webhook),
    "refusing": lambda f: webhook_route(f.webhook, "/refusing"),
    "other": lambda f: webhook_route(f.webhook, "/other"),
}


def shared_config(env: SharedEnv) -> dict[str, Any]:
    """The job-level tests' worker: a target per slot, with its one route (``env.route(slot)``)."""
    return {
        "pixiv": env.replay.config(),
        "routes": {env.route(slot): route(env.fakes) for slot, route in SLOTS.items()},
        "targets": [{"id": slot, "query": {"tags": ["オリジナル"]}, "routes": [env.route(slot)]} for slot in SLOTS],
    }


async def test_a_telegram_502_after_the_post_does_not_post_twice(env: SharedEnv) -> None:
    telegram, stack, tg = env.telegram, env.stack, env.route("gateway")
    telegram.script["*"] = [TgReply("gateway_502")]  # posted, then nginx's HTML 502
    record = await env.run("gateway", ["ゆずソフト"])

    cell = record.cells[0]
    assert (cell.state, cell.reason) == ("failed", "delivery_unknown")
    assert (await stack.attempts(record.job_id))["deliver"] == 1  # not sent again
    assert len(telegram.requests) == 1 and len(telegram.messages) == 1
    assert (await intents(await stack.ledger(), record.job_id))[tg]["status"] == "unknown"


# ---- 7. a route's refusal of a work is remembered ---------------------------------------


async def test_a_refused_work_is_not_offered_to_that_route_again(env: SharedEnv) -> None:
    webhook, stack, hook = env.webhook, env.stack, env.route("refused")
    w1, w2, w3 = ordered("オリジナル")[:3]
    webhook.refuse_works = {w1}  # 422 for this one work, every time
    records = [await env.run("refused") for _ in range(3)]

    first = records[0].cells[0]
    assert (first.state, first.reason, first.work_id) == ("failed", "delivery_rejected", w1)
    assert [(r.cells[0].state, r.cells[0].work_id) for r in records[1:]] == [("submitted", w2), ("submitted", w3)]
    assert webhook.works() == [w1, w2, w3]  # the refused work was sent once, not by every job
    report = records[1].cells[0].candidate_report
    assert report is not None and report.reasons.get("refused") == 1

    # the operator lists the refusal, fixes the receiver and clears it: the work is offered again
    listed = await curaflow("refusals", "list", "--route", hook, "--json", stack=stack)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [(r["route"], r["work_id"], r["reason"]) for r in rows] == [(hook, w1, "delivery_rejected")]
    assert "422" in rows[0]["error"]
    webhook.refuse_works = set()
    cleared = await curaflow("refusals", "clear", hook, w1, stack=stack)
    assert cleared.returncode == 0, cleared.stderr
    again = await env.run("refused")
    assert (again.cells[0].state, again.cells[0].work_id) == ("submitted", w1)
    assert webhook.works() == [w1, w2, w3, w1]


async def test_a_refusal_on_one_route_leaves_other_routes_free(env: SharedEnv) -> None:
    w1 = ordered("オリジナル")[0]
    env.webhook.refuse_works = {w1}
    assert (await env.run("refusing")).cells[0].reason == "delivery_rejected"

    # a target on another route still gets w1
    env.webhook.refuse_works = set()
    record = await env.run("other")
    assert (record.cells[0].state, record.cells[0].work_id) == ("submitted", w1)

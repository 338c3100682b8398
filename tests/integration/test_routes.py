"""The Telegram, Discord and webhook routes against their fakes on 127.0.0.1.

Real HTTP, real multipart; the fakes check every request against the platform limits
(``violations``) and answer with the platforms' envelopes. Job-level behaviour (ledger,
retries, fan-out) is in ``test_delivery_jobs.py``.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from pydantic import SecretStr

from curaflow.artifacts import describe
from curaflow.domain.models import Artifact, Work
from curaflow.domain.reasons import Owner, TerminalReason
from curaflow.domain.verdicts import owner_of
from curaflow.routes import DiscordRouteConfig, TelegramRouteConfig
from curaflow.routes.base import DeliveryRequest, RouteError
from curaflow.routes.caption import utf16_len
from curaflow.routes.discord import DiscordRoute
from curaflow.routes.telegram import TelegramRoute
from curaflow.routes.webhook import WebhookRoute
from tests.fakes.discord import DcReply, FakeDiscord
from tests.fakes.telegram import FakeTelegram, TgReply
from tests.fakes.webhook import Reply, WebhookReceiver
from tests.support import eventually, whsec

CHAT = "-1001234567890"


def make_request(tmp_path: Path, sizes: list[tuple[int, int]], *, title: str = "夕焼け", **kw: Any) -> DeliveryRequest:
    files = []
    for page, (w, h) in enumerate(sizes):
        path = tmp_path / f"4242_p{page}.jpg"
        color = hashlib.sha256(f"{page}".encode()).digest()[:3]
        Image.new("RGB", (w, h), tuple(color)).save(path, format="JPEG", quality=80)
        files.append(describe(path, page))
    work = Work(
        work_id="4242",
        title=title,
        url="https://www.pixiv.net/artworks/4242",
        author="artist-001",
        tags=["オリジナル", "風景"],
        page_count=len(sizes),
    )
    return DeliveryRequest(
        job_id="job-1",
        target_id="demo",
        route="tg",
        idempotency_key="curaflow:tg:illustration:4242:job-1:demo",
        work=work,
        artifact=Artifact(work_id="4242", files=files),
        **kw,
    )


@pytest.fixture
async def http() -> Any:
    async with httpx.AsyncClient() as client:
        yield client


def tg_route(fake: FakeTelegram, http: httpx.AsyncClient, **kw: Any) -> TelegramRoute:
    config = TelegramRouteConfig(bot_token=SecretStr(fake.token), chat_id=CHAT, api_url=fake.url, **kw)
    return TelegramRoute("tg", config, http)


def dc_route(fake: FakeDiscord, http: httpx.AsyncClient, **kw: Any) -> DiscordRoute:
    return DiscordRoute("dc", DiscordRouteConfig(url=SecretStr(fake.url), **kw), http)


# ---- Telegram --------------------------------------------------------------------------


async def test_small_single_image_goes_as_a_photo(tmp_path: Path, telegram: FakeTelegram, http: Any) -> None:
    receipt = await tg_route(telegram, http).deliver(make_request(tmp_path, [(800, 600)]))
    [sent] = telegram.requests
    assert sent.method == "sendPhoto"
    assert sent.fields["chat_id"] == CHAT
    assert sent.files["photo"].width == 800
    assert "https://www.pixiv.net/artworks/4242" in sent.fields["caption"]
    assert receipt.remote_ids == [[telegram.messages[0]["message_id"]]]
    assert receipt.remote_id == str(telegram.messages[0]["message_id"])
    assert telegram.violations == []


async def test_7000x5400_image_goes_as_a_document(tmp_path: Path, telegram: FakeTelegram, http: Any) -> None:
    request = make_request(tmp_path, [(7000, 5400)])
    await tg_route(telegram, http).deliver(request)
    [sent] = telegram.requests
    assert sent.method == "sendDocument"
    assert (sent.files["document"].width, sent.files["document"].height) == (7000, 5400)
    assert "document" in telegram.messages[0]
    assert telegram.violations == []


async def test_extreme_ratio_goes_as_a_document(tmp_path: Path, telegram: FakeTelegram, http: Any) -> None:
    await tg_route(telegram, http).deliver(make_request(tmp_path, [(4200, 200)]))
    assert [r.method for r in telegram.requests] == ["sendDocument"]


async def test_photo_refused_by_telegram_is_resent_as_a_document(
    tmp_path: Path, telegram: FakeTelegram, http: Any
) -> None:
    telegram.script["sendPhoto"] = [TgReply("photo_invalid")]
    receipt = await tg_route(telegram, http).deliver(make_request(tmp_path, [(800, 600)]))
    assert [r.method for r in telegram.requests] == ["sendPhoto", "sendDocument"]
    assert len(telegram.messages) == 1 and receipt.remote_ids == [[telegram.messages[0]["message_id"]]]


async def test_three_pages_go_as_one_album(tmp_path: Path, telegram: FakeTelegram, http: Any) -> None:
    receipt = await tg_route(telegram, http).deliver(make_request(tmp_path, [(600, 800)] * 3))
    [sent] = telegram.requests
    assert sent.method == "sendMediaGroup"
    assert [m["type"] for m in sent.media] == ["photo"] * 3
    assert [m["media"] for m in sent.media] == ["attach://file0", "attach://file1", "attach://file2"]
    assert "caption" in sent.media[0] and all("caption" not in m for m in sent.media[1:])
    assert len({m["media_group_id"] for m in telegram.messages}) == 1
    assert receipt.remote_ids == [[m["message_id"] for m in telegram.messages]]
    assert telegram.violations == []


async def test_album_with_an_oversized_page_goes_as_documents(
    tmp_path: Path, telegram: FakeTelegram, http: Any
) -> None:
    await tg_route(telegram, http).deliver(make_request(tmp_path, [(600, 800), (7000, 5400)]))
    [sent] = telegram.requests
    assert [m["type"] for m in sent.media] == ["document", "document"]
    assert telegram.violations == []


async def test_long_album_splits_evenly_and_resumes_at_the_first_unconfirmed_chunk(
    tmp_path: Path, telegram: FakeTelegram, http: Any
) -> None:
    telegram.script["sendMediaGroup"] = [TgReply("ok"), TgReply("429", retry_after=7)]
    parts: list[list[Any]] = []

    async def on_part(done: list[Any]) -> None:
        parts[:] = done

    route = tg_route(telegram, http)
    with pytest.raises(RouteError) as caught:
        await route.deliver(make_request(tmp_path, [(300, 400)] * 14, on_part=on_part))
    assert caught.value.retry_after_s == 7 and not caught.value.permanent and not caught.value.ambiguous
    assert [len(p) for p in parts] == [7]  # the first album is recorded before the second leaves

    receipt = await route.deliver(make_request(tmp_path, [(300, 400)] * 14, parts_done=list(parts)))
    albums = [r for r in telegram.requests if r.status == 200]
    assert [len(r.media) for r in albums] == [7, 7]
    assert len(telegram.messages) == 14  # nothing sent twice
    assert [len(p) for p in receipt.remote_ids] == [7, 7]
    assert "(2/2)" in albums[1].media[0]["caption"]
    assert telegram.violations == []


@pytest.mark.parametrize(
    "reply",
    [
        TgReply("odd_result", message_id="abc"),
        TgReply("odd_result", message_id=None),
        TgReply("odd_result", message_id={"id": 1}),
        TgReply("odd_result", message_id=True),
        TgReply("odd_result", result=True),
        TgReply("odd_result", result=[]),
        TgReply("odd_result", result="posted"),
    ],
    ids=["text-id", "null-id", "object-id", "boolean-id", "result-true", "result-empty", "result-text"],
)
@pytest.mark.parametrize("pages", [1, 3], ids=["photo", "album"])
async def test_an_ok_answer_of_a_shape_never_seen_is_a_delivery_and_nothing_is_posted_twice(
    tmp_path: Path, telegram: FakeTelegram, http: Any, reply: TgReply, pages: int
) -> None:
    # `ok: true` is Telegram's word that the request was done: every file of it is posted,
    # whatever the message ids look like. Read as a failure (a bug's internal_error), the
    # report said less than happened; read as nothing posted, a retry posted it again.
    telegram.script["*"] = [reply]
    route = tg_route(telegram, http)
    receipt = await route.deliver(make_request(tmp_path, [(600, 800)] * pages))
    assert len(telegram.messages) == pages
    assert receipt.remote_status == "sent" and [len(p) for p in receipt.remote_ids] == [pages]
    assert all(i is None or isinstance(i, int) for p in receipt.remote_ids for i in p)
    again = await route.deliver(make_request(tmp_path, [(600, 800)] * pages, parts_done=receipt.remote_ids))
    assert len(telegram.messages) == pages and again.remote_ids == receipt.remote_ids


async def test_caption_is_truncated_within_1024_utf16_units(tmp_path: Path, telegram: FakeTelegram, http: Any) -> None:
    await tg_route(telegram, http).deliver(make_request(tmp_path, [(600, 800)], title="🌅" * 900))
    caption = telegram.requests[0].fields["caption"]
    assert utf16_len(caption) <= 1024 and caption.split("\n")[0].endswith("…")
    assert "https://www.pixiv.net/artworks/4242" in caption
    assert telegram.violations == []


async def test_429_carries_retry_after(tmp_path: Path, telegram: FakeTelegram, http: Any) -> None:
    telegram.script["*"] = [TgReply("429", retry_after=3)]
    with pytest.raises(RouteError) as caught:
        await tg_route(telegram, http).deliver(make_request(tmp_path, [(600, 800)]))
    assert caught.value.retry_after_s == 3 and not caught.value.permanent
    assert telegram.messages == []


@pytest.mark.parametrize("kind", ["chat_not_found", "blocked"])
async def test_chat_not_found_and_blocked_are_permanent_route_refusals(
    tmp_path: Path, telegram: FakeTelegram, http: Any, kind: str
) -> None:
    telegram.script["*"] = [TgReply(kind)]
    with pytest.raises(RouteError) as caught:
        await tg_route(telegram, http).deliver(make_request(tmp_path, [(600, 800)]))
    assert caught.value.permanent and caught.value.reason == TerminalReason.ROUTE_REFUSED


async def test_wrong_token_is_a_permanent_rejection_without_leaking_it(
    tmp_path: Path, telegram: FakeTelegram, http: Any
) -> None:
    config = TelegramRouteConfig(bot_token=SecretStr("999:WRONG-secret"), chat_id=CHAT, api_url=telegram.url)
    with pytest.raises(RouteError) as caught:
        await TelegramRoute("tg", config, http).deliver(make_request(tmp_path, [(600, 800)]))
    assert caught.value.permanent and "401" in str(caught.value)
    assert "WRONG-secret" not in str(caught.value)


async def test_server_error_is_retryable_not_ambiguous(tmp_path: Path, telegram: FakeTelegram, http: Any) -> None:
    telegram.script["*"] = [TgReply("500")]
    with pytest.raises(RouteError) as caught:
        await tg_route(telegram, http).deliver(make_request(tmp_path, [(600, 800)]))
    assert not caught.value.permanent and not caught.value.ambiguous


async def test_stalled_answer_is_ambiguous_and_the_message_exists(
    tmp_path: Path, telegram: FakeTelegram, http: Any
) -> None:
    telegram.script["*"] = [TgReply("stall", stall_s=2)]
    with pytest.raises(RouteError) as caught:
        await tg_route(telegram, http, timeout_ms=300).deliver(make_request(tmp_path, [(600, 800)]))
    assert caught.value.ambiguous and not caught.value.permanent
    # It did land (re-sending would duplicate it), maybe only after the 300 ms on a busy machine.
    await eventually(lambda: len(telegram.messages) == 1, timeout_s=10, what=lambda: f"messages {telegram.messages}")


async def test_connection_refused_is_not_ambiguous(tmp_path: Path, http: Any) -> None:
    config = TelegramRouteConfig(bot_token=SecretStr("1:x"), chat_id=CHAT, api_url="http://127.0.0.1:9")
    with pytest.raises(RouteError) as caught:
        await TelegramRoute("tg", config, http).deliver(make_request(tmp_path, [(600, 800)]))
    assert not caught.value.ambiguous and not caught.value.permanent


async def test_migrated_chat_is_followed(tmp_path: Path, telegram: FakeTelegram, http: Any) -> None:
    telegram.script["*"] = [TgReply("migrate", migrate_to="-1005555")]
    route = tg_route(telegram, http)
    await route.deliver(make_request(tmp_path, [(600, 800)]))
    assert [r.fields["chat_id"] for r in telegram.requests] == [CHAT, "-1005555"]
    assert telegram.posted("-1005555") and route.chat_id == "-1005555"


@pytest.mark.parametrize("odd", [True, {"id": -100123}, [-100123], "not a chat", 1.5], ids=str)
async def test_a_migration_to_a_chat_id_that_is_not_one_is_refused_and_the_chat_kept(
    tmp_path: Path, telegram: FakeTelegram, http: Any, odd: Any
) -> None:
    # Followed, chat_id became "True" or "{'id': -100123}" for the rest of the worker's
    # life (routes are kept per process): every later delivery went to no chat.
    telegram.script["sendPhoto"] = [TgReply("migrate", migrate_to=odd)]
    route = tg_route(telegram, http)
    with pytest.raises(RouteError):
        await route.deliver(make_request(tmp_path, [(800, 600)]))
    assert route.chat_id == CHAT and len(telegram.requests) == 1
    await route.deliver(make_request(tmp_path, [(800, 600)]))  # the next goes where it went
    assert telegram.requests[-1].fields["chat_id"] == CHAT and len(telegram.messages) == 1


async def test_an_album_failure_naming_an_item_beyond_any_album_is_the_routes_answer_not_a_crash(
    tmp_path: Path, telegram: FakeTelegram, http: Any
) -> None:
    # "failed to send message #<5000 digits>": int() raised ValueError (too many digits),
    # curaflow's permanent internal_error; no album has more than 10 items.
    from curaflow.routes.telegram import stated_phrase

    assert stated_phrase("Bad Request: failed to send message #" + "9" * 5000)[0] is None
    assert stated_phrase('Bad Request: failed to send message #2 with the error message "x"') == (2, "x")


async def test_ambiguity_policy_decides_resend_safety(telegram: FakeTelegram, http: Any) -> None:
    assert tg_route(telegram, http).resend_safe is False
    assert tg_route(telegram, http, on_ambiguous="retry").resend_safe is True


# ---- Discord ---------------------------------------------------------------------------


async def test_discord_posts_files_with_wait_and_records_the_message_id(
    tmp_path: Path, discord: FakeDiscord, http: Any
) -> None:
    receipt = await dc_route(discord, http).deliver(make_request(tmp_path, [(600, 800)] * 3))
    [sent] = discord.requests
    assert sent.wait is True
    assert [f.field for f in sent.files] == ["files[0]", "files[1]", "files[2]"]
    assert sent.payload["allowed_mentions"] == {"parse": []}
    assert "https://www.pixiv.net/artworks/4242" in sent.payload["content"]
    assert receipt.remote_id == discord.messages[0]["id"]
    assert receipt.remote_ids == [[discord.messages[0]["id"]] * 3]  # the message carrying each page
    assert discord.violations == []


@pytest.mark.parametrize("odd", [None, {"id": "1"}, ["1"], True, "x" * 5000, "12\x00\u202e"])
async def test_discord_a_created_message_whose_id_is_not_one_is_delivered_with_no_id(
    tmp_path: Path, discord: FakeDiscord, http: Any, odd: Any
) -> None:
    # A 2xx with the created message is Discord's word that it posted; an id of another
    # shape is not kept as text of a dict (nor a huge or unprintable one): the message is
    # delivered, its id unknown.
    discord.script = [DcReply("odd_id", message_id=odd)]
    receipt = await dc_route(discord, http).deliver(make_request(tmp_path, [(600, 800)]))
    assert len(discord.messages) == 1 and receipt.remote_status == "sent"
    assert receipt.remote_ids == [[None]] and receipt.remote_id is None  # one page, its message's id unknown


async def test_discord_splits_more_than_ten_files_and_resumes(tmp_path: Path, discord: FakeDiscord, http: Any) -> None:
    discord.script = [DcReply("ok"), DcReply("429", retry_after=0.25)]
    parts: list[Any] = []

    async def on_part(done: list[Any]) -> None:
        parts[:] = done

    route = dc_route(discord, http)
    with pytest.raises(RouteError) as caught:
        await route.deliver(make_request(tmp_path, [(100, 100)] * 12, on_part=on_part))
    assert caught.value.retry_after_s == 0.25
    receipt = await route.deliver(make_request(tmp_path, [(100, 100)] * 12, parts_done=list(parts)))
    assert [len(r.files) for r in discord.requests if r.created] == [10, 2]
    assert len(receipt.remote_ids) == 2 and len(discord.messages) == 2
    assert discord.violations == []


async def test_discord_content_is_kept_within_2000_characters(tmp_path: Path, discord: FakeDiscord, http: Any) -> None:
    await dc_route(discord, http).deliver(make_request(tmp_path, [(100, 100)], title="x" * 5000))
    assert len(discord.requests[0].payload["content"]) <= 2000
    assert discord.violations == []


async def test_discord_refusing_the_content_curaflow_composed_is_the_routes_never_the_works(
    tmp_path: Path, discord: FakeDiscord, http: Any
) -> None:
    """A Discord that counts otherwise than curaflow, or lowered its limit, refuses the
    caption curaflow composed within ``content_max``: 50035 naming ``content``. That is
    curaflow's or the route's doing — the work refused for good until 2026-12-07 —: the
    route's refusal (the work held back, the streak counting it), its message naming
    ``content_max``."""
    discord.content_max = 40
    with pytest.raises(RouteError) as caught:
        await dc_route(discord, http).deliver(make_request(tmp_path, [(100, 100)], title="x" * 200))
    err = caught.value
    assert err.reason == TerminalReason.ROUTE_REFUSED and owner_of(err.reason) == Owner.ROUTE, str(err)
    assert "content_max" in str(err) and discord.messages == []
    # Lowered to what that Discord takes, the same work goes.
    receipt = await dc_route(discord, http, content_max=40).deliver(
        make_request(tmp_path, [(100, 100)], title="x" * 200)
    )
    assert receipt.remote_id is not None and len(discord.messages) == 1


async def test_discord_content_counts_code_points_as_discord_does(
    tmp_path: Path, discord: FakeDiscord, http: Any
) -> None:
    """Discord counts a content's code points (its API is Python 3: discord-api-docs #1315):
    a title of 1 900 astral emoji with combining marks fits its 2 000 whole (3 800 UTF-16
    units), one of 2 100 is cut within 2 000 code points, and the fake (which counts as
    Discord does) takes both."""
    fits = "😀\u0301" * 950  # 1 900 code points
    await dc_route(discord, http).deliver(make_request(tmp_path, [(100, 100)], title=fits))
    assert discord.requests[0].payload["content"].split("\n")[0] == fits
    await dc_route(discord, http).deliver(make_request(tmp_path, [(100, 100)], title="😀" * 2100))
    content = discord.requests[1].payload["content"]
    assert len(content) <= 2000 < len(content.encode("utf-16-le")) // 2
    assert discord.violations == []


async def test_discord_file_over_the_cap_is_rejected_before_sending(
    tmp_path: Path, discord: FakeDiscord, http: Any
) -> None:
    request = make_request(tmp_path, [(1200, 1200)])
    with pytest.raises(RouteError) as caught:
        await dc_route(discord, http, max_file_bytes=1024).deliver(request)
    assert caught.value.permanent and "max_file_bytes" in str(caught.value)
    assert discord.requests == []


async def test_discord_unknown_webhook_is_permanent(tmp_path: Path, discord: FakeDiscord, http: Any) -> None:
    discord.script = [DcReply("404")]
    with pytest.raises(RouteError) as caught:
        await dc_route(discord, http).deliver(make_request(tmp_path, [(100, 100)]))
    assert caught.value.permanent and "10015" in str(caught.value)


async def test_discord_stall_is_ambiguous(tmp_path: Path, discord: FakeDiscord, http: Any) -> None:
    discord.script = [DcReply("stall", stall_s=2)]
    with pytest.raises(RouteError) as caught:
        await dc_route(discord, http, timeout_ms=300).deliver(make_request(tmp_path, [(100, 100)]))
    assert caught.value.ambiguous
    # The request was whole when the route gave up: the message exists (the ambiguity is real),
    # though on a busy machine the fake may still be reading the body when the 300 ms ran out.
    await eventually(lambda: len(discord.messages) == 1, timeout_s=10, what=lambda: f"messages {discord.messages}")


# ---- webhook receiver contract ----------------------------------------------------


def hook_route(webhook: WebhookReceiver, http: httpx.AsyncClient, path: str, timeout_s: float = 30.0) -> WebhookRoute:
    """A webhook route to ``path`` of the fake receiver. The default time limit is one no
    answer of the fake meets but a held one: with 1 s for every case (until 2026-12-06), a
    prompt answer on a busy machine ended ``TimeLimitBeforeSending`` (the request not even
    sent within the second)."""
    return WebhookRoute("hook", webhook.url + path, whsec(), http, timeout_s=timeout_s)


@pytest.mark.parametrize(
    "reply,outcome",
    [
        (Reply(201, {"status": "accepted", "id": "r-1"}), "delivered"),
        (Reply(200, None), "delivered"),
        (Reply(409, {"status": "duplicate"}), "duplicate"),
        (Reply(200, {"status": "rejected"}), "rejected"),
        (Reply(200, {"status": "Rejected"}), "rejected"),
        # A 2xx saying only that something failed names no work: the receiver's own error
        # (JSend's "error" is a server-side failure), the route's — never the work refused
        # for good (until 2026-12-05 both were).
        (Reply(200, {"status": "error", "message": "database unavailable"}), "refused"),
        (Reply(200, {"status": "failed"}), "refused"),
        # The receiver holds it: retried with the same webhook-id and remembered as
        # possibly delivered (until 2026-12-07 a plain retry, the work sent again by the
        # next job under another webhook-id once the attempts ran out).
        (Reply(202, {"status": "queued"}), "ambiguous"),
        (Reply(202, {"status": "pending"}, headers={"retry-after": "90"}), "ambiguous"),
        (Reply(422, {"error": "bad content"}), "rejected"),
        # curaflow sends every work as application/json: a 415 refuses every work alike,
        # the receiver's configuration — the route's (the work's until 2026-12-07).
        (Reply(415, {"error": "unsupported type"}), "refused"),
        (Reply(400, {"error": "bad"}), "refused"),  # a bare 400 names no work: the route's
        (Reply(404, None), "refused"),
        (Reply(413, None), "refused"),
        # A redirect names another destination: the receiver's address is wrong (the
        # route's failure), and it is never followed.
        (Reply(301, None), "refused"),
        # 303 See Other answers a POST it processed (RFC 9110 §15.4.4): the receiver may have
        # it — retried with the same webhook-id, possibly delivered, never followed (the
        # route's refusal until 2026-12-07, the work then sent under another webhook-id).
        (Reply(303, None, headers={"location": "/c/result/1"}), "ambiguous"),
        (Reply(307, {"location": "elsewhere"}), "refused"),
        (Reply(308, None), "refused"),
        (Reply(429, {"error": "slow down"}), "retry"),
        (Reply(500, None), "retry"),
        (Reply(503, None), "retry"),
        # held until the receiver stops: the route's 3 s end after the request was sent
        (Reply(200, {"status": "accepted"}, delay_s=600), "ambiguous"),
    ],
)
async def test_webhook_receiver_contract(
    tmp_path: Path, webhook: WebhookReceiver, http: Any, reply: Reply, outcome: str
) -> None:
    webhook.script["/c"] = [reply]
    route = hook_route(webhook, http, "/c", timeout_s=3.0 if outcome == "ambiguous" else 30.0)
    request = make_request(tmp_path, [(100, 100)])
    if outcome in ("delivered", "duplicate"):
        receipt = await route.deliver(request)
        assert receipt.duplicate is (outcome == "duplicate")
        if outcome == "delivered" and isinstance(reply.body, dict) and reply.body.get("id"):
            assert receipt.remote_id == "r-1"
    else:
        with pytest.raises(RouteError) as caught:
            await route.deliver(request)
        err = caught.value
        assert err.permanent is (outcome in ("rejected", "refused"))
        assert err.ambiguous is (outcome == "ambiguous")
        if outcome == "rejected":
            assert err.reason == TerminalReason.DELIVERY_REJECTED
        if outcome == "refused":  # the receiver refuses the request itself: the route's failure
            assert err.reason == TerminalReason.ROUTE_REFUSED
        if "retry-after" in reply.headers:  # the receiver's stated wait is waited (2026-12-07)
            assert err.retry_after_s == float(reply.headers["retry-after"])
    assert route.resend_safe  # the receiver dedupes on webhook-id: a re-send is safe
    assert webhook.at("/c")[0].signature_ok


async def test_webhook_retry_after_and_a_stable_idempotency_key(
    tmp_path: Path, webhook: WebhookReceiver, http: Any
) -> None:
    webhook.script["/r"] = [Reply(429, {"error": "slow"})]
    route = hook_route(webhook, http, "/r")
    request = make_request(tmp_path, [(100, 100)])
    with pytest.raises(RouteError):
        await route.deliver(request)
    await route.deliver(request)
    first, second = webhook.at("/r")
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == request.idempotency_key
    assert first.signature_ok and second.signature_ok
    assert first.json() == second.json()


async def test_webhook_retry_after_header_is_honoured(tmp_path: Path, http: Any) -> None:
    from fastapi import FastAPI
    from fastapi.responses import Response

    from curaflow.process.httpserver import BackgroundServer

    app = FastAPI()

    @app.post("/")
    async def busy() -> Response:
        return Response(status_code=429, headers={"Retry-After": "12"})

    @app.post("/twice")
    async def busy_twice() -> Response:  # a proxy in front added its own Retry-After
        answer = Response(status_code=429)
        answer.raw_headers += [(b"retry-after", b"12"), (b"retry-after", b"12")]
        return answer

    @app.post("/dated")
    async def busy_until() -> Response:  # RFC 9110's other form: an HTTP-date
        later = datetime.now(UTC) + timedelta(seconds=40)
        return Response(status_code=503, headers={"Retry-After": format_datetime(later, usegmt=True)})

    async with BackgroundServer(app) as server:
        route = WebhookRoute("hook", server.url + "/", whsec(), http)
        with pytest.raises(RouteError) as caught:
            await route.deliver(make_request(tmp_path, [(100, 100)]))
        dated = WebhookRoute("hook", server.url + "/dated", whsec(), http)
        with pytest.raises(RouteError) as until:
            await dated.deliver(make_request(tmp_path, [(100, 100)]))
        twice = WebhookRoute("hook", server.url + "/twice", whsec(), http)
        with pytest.raises(RouteError) as repeated:
            await twice.deliver(make_request(tmp_path, [(100, 100)]))
    assert repeated.value.retry_after_s == 12 and repeated.value.rate_limited
    assert caught.value.retry_after_s == 12 and not caught.value.permanent
    assert until.value.retry_after_s is not None and 35 <= until.value.retry_after_s <= 40


@pytest.mark.parametrize("status", [301, 302, 307, 308])
async def test_a_redirect_from_a_discord_webhook_is_the_routes_failure(tmp_path: Path, http: Any, status: int) -> None:
    from fastapi import FastAPI
    from fastapi.responses import Response

    from curaflow.process.httpserver import BackgroundServer

    app = FastAPI()
    hits: list[str] = []

    @app.post("/api/webhooks/1/token")
    async def moved() -> Response:
        return Response(status_code=status, headers={"Location": "/elsewhere"})

    @app.post("/elsewhere")
    async def elsewhere() -> Response:
        hits.append("followed")
        return Response(status_code=200, content=b'{"id": "1"}', media_type="application/json")

    async with BackgroundServer(app) as server:
        config = DiscordRouteConfig(url=SecretStr(server.url + "/api/webhooks/1/token"))
        with pytest.raises(RouteError) as caught:
            await DiscordRoute("dc", config, http).deliver(make_request(tmp_path, [(100, 100)]))
    assert caught.value.reason == TerminalReason.ROUTE_REFUSED and caught.value.permanent
    assert hits == []  # never followed


async def test_an_album_of_ten_in_a_forum_topic_is_confirmed_by_its_whole_answer(
    tmp_path: Path, telegram: FakeTelegram, http: Any
) -> None:
    # Telegram's answer to an album is every Message it posted, each with its photo's
    # sizes, the chat and — in a forum topic — the topic's creation under
    # `reply_to_message`: about 17 KB for 10 photos (44 KB with the longest caption
    # and titles Telegram takes). Cut at the 16 KiB the routes kept,
    # it was no JSON, read as "not the Bot API's answer": ambiguous, and on an
    # at-most-once route the posted album ended `delivery_unknown`, blocked there for good.
    telegram.threads = {"7"}
    parts: list[list[Any]] = []

    async def on_part(done: list[Any]) -> None:
        parts[:] = done

    request = make_request(tmp_path, [(2600, 1800)] * 10, title="夏の終わりの夕焼けと少女", on_part=on_part)
    request.work.tags = ["オリジナル", "風景", "夕焼け", "女の子", "空", "雲", "制服", "夏", "背景", "創作"]
    receipt = await tg_route(telegram, http, message_thread_id=7).deliver(request)
    [sent] = telegram.requests
    assert len(sent.media) == 10 and telegram.violations == []
    assert len(telegram.answers[-1]) > 16 * 1024  # Telegram's answer, as long as it is
    ids = [m["message_id"] for m in telegram.messages]
    assert receipt.remote_ids == [ids] and parts == [ids] and receipt.remote_id == str(ids[0])

"""Each route's classification table: only a positively recognised answer blames the work.

The production routes run against ``httpx.MockTransport`` answering one scripted answer
(the platforms' wire formats: Telegram's ``{"ok": false, …}``, Discord's ``{"code",
"message"}``, a webhook receiver's status): an answer a route does not recognise —
another wording, another status, another shape — is the route's (``route_refused``:
the work is not used up), never the work's; a rate limit without a stated delay says
so (no constant delay is invented); a request that never left is never ambiguous.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable
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
from curaflow.routes.discord import DiscordRoute
from curaflow.routes.telegram import TelegramRoute
from curaflow.routes.webhook import WebhookRoute
from tests.support import whsec

Answer = Callable[[httpx.Request], httpx.Response]


def request_of(tmp_path: Path, pages: int = 1, *, animated: bool = False) -> DeliveryRequest:
    files = []
    for page in range(pages):
        path = tmp_path / f"4242_p{page}.{'gif' if animated else 'jpg'}"
        if animated:
            frames = [Image.new("RGB", (40, 40), (i * 60, 0, 0)) for i in range(3)]
            frames[0].save(path, format="GIF", save_all=True, append_images=frames[1:], duration=100)
        else:
            Image.new("RGB", (60 + page, 40), (page * 30 % 256, 90, 30)).save(path, format="JPEG")
        f = describe(path, page)
        if animated:
            f = f.model_copy(update={"frame_delays_ms": [100, 100, 100]})
        files.append(f)
    work = Work(work_id="4242", title="t", url="https://www.pixiv.net/artworks/4242", page_count=pages)
    return DeliveryRequest(
        job_id="j",
        target_id="t",
        route="r",
        idempotency_key="curaflow:r:illustration:4242:j:t",
        work=work,
        artifact=Artifact(work_id="4242", files=files),
    )


async def deliver(route_of: Callable[[httpx.AsyncClient], Any], answer: Answer, tmp_path: Path, **kw: Any) -> Any:
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
        return await route_of(http).deliver(request_of(tmp_path, **kw))


async def failure(
    route_of: Callable[[httpx.AsyncClient], Any], answer: Answer, tmp_path: Path, **kw: Any
) -> RouteError:
    with pytest.raises(RouteError) as caught:
        await deliver(route_of, answer, tmp_path, **kw)
    return caught.value


def telegram(http: httpx.AsyncClient) -> TelegramRoute:
    config = TelegramRouteConfig(bot_token=SecretStr("1:x"), chat_id="-100", api_url="https://tg.test")
    return TelegramRoute("tg", config, http)


def discord(http: httpx.AsyncClient) -> DiscordRoute:
    return DiscordRoute("dc", DiscordRouteConfig(url=SecretStr("https://dc.test/api/v10/webhooks/1/x")), http)


def webhook(http: httpx.AsyncClient) -> WebhookRoute:
    return WebhookRoute("hook", "https://hook.test/in", whsec(), http)


def tg_answer(status: int, description: str, **extra: Any) -> Answer:
    body = {"ok": False, "error_code": status, "description": description, **extra}
    return lambda _req: httpx.Response(status, json=body)


def is_the_routes(err: RouteError) -> bool:
    return err.reason == TerminalReason.ROUTE_REFUSED and err.permanent and owner_of(err.reason) == Owner.ROUTE


def random_wording(rng: random.Random) -> str:
    return "Bad Request: " + " ".join(
        "".join(rng.choices(string.ascii_letters + "_", k=rng.randint(3, 12))) for _ in range(rng.randint(1, 5))
    )


# ---- Telegram -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "description"),
    [
        (400, "Bad Request: message thread not found"),
        (400, "Bad Request: TOPIC_CLOSED"),
        (400, "Bad Request: message caption is too long"),
        (400, "Bad Request: not enough rights to send photos to the chat"),
        (403, "Forbidden: bot is not a member of the channel chat"),
        (404, "Not Found"),
        (409, "Conflict: something new"),
        (413, "Request Entity Too Large"),
        (418, "I'm a teapot"),
        (451, "Unavailable For Legal Reasons"),
    ],
)
async def test_an_unknown_or_destination_telegram_refusal_is_the_routes(
    tmp_path: Path, status: int, description: str
) -> None:
    err = await failure(telegram, tg_answer(status, description), tmp_path)
    assert is_the_routes(err), (err.reason, str(err))
    assert description.split(": ", 1)[-1] in str(err)  # the operator reads what Telegram said


#: A refusal of the route's own configuration (the Bot API's wire format, or what stands in
#: front of it), and the settings its message may name: the ones the answer is about.
TELEGRAM_MISCONFIGURED: dict[str, tuple[Answer, set[str]]] = {
    "token-revoked": (tg_answer(401, "Unauthorized"), {"bot_token"}),
    "token-unknown": (tg_answer(404, "Not Found"), {"bot_token", "api_url"}),
    "proxy-404": (lambda _r: httpx.Response(404, text="<html>Not Found</html>"), {"bot_token", "api_url"}),
    "redirect": (lambda _r: httpx.Response(302, headers={"location": "https://elsewhere.test/"}), {"api_url"}),
    "proxy-403": (lambda _r: httpx.Response(403, text="<html>Forbidden</html>"), {"api_url"}),
    "blocked": (tg_answer(403, "Forbidden: bot was blocked by the user"), {"chat_id"}),
    "kicked": (tg_answer(403, "Forbidden: bot was kicked from the supergroup chat"), {"chat_id"}),
    "chat-not-found": (tg_answer(400, "Bad Request: chat not found"), {"chat_id"}),
    "topic-deleted": (tg_answer(400, "Bad Request: message thread not found"), {"message_thread_id"}),
    "topic-closed": (tg_answer(400, "Bad Request: TOPIC_CLOSED"), {"message_thread_id"}),
    "request-too-large": (tg_answer(413, "Request Entity Too Large"), {"max_request_bytes"}),
}
SETTINGS = ("bot_token", "api_url", "chat_id", "message_thread_id", "max_request_bytes")


@pytest.mark.parametrize("case", list(TELEGRAM_MISCONFIGURED))
async def test_a_telegram_refusal_of_the_routes_configuration_names_the_setting_to_fix(
    tmp_path: Path, case: str
) -> None:
    # The route's own misconfiguration is the route's, and its message — the cell's error,
    # what the operator reads when the route pauses — names the settings the answer is
    # about, and no other. Until 2026-12-07 every refusal said "fix the route (chat_id,
    # message_thread_id, the bot's rights, max_request_bytes)": a revoked token (401) or a
    # token the Bot API knows no bot by (404) was told to check everything but the token.
    answer, settings = TELEGRAM_MISCONFIGURED[case]
    err = await failure(telegram, answer, tmp_path)
    assert is_the_routes(err), (err.reason, str(err))
    named = {setting for setting in SETTINGS if setting in str(err)}
    assert named and named <= settings, (case, str(err))


async def test_any_new_telegram_wording_is_the_routes(tmp_path: Path) -> None:
    rng = random.Random(32)
    for _ in range(20):
        wording = random_wording(rng)
        err = await failure(telegram, tg_answer(rng.choice([400, 403, 406, 422]), wording), tmp_path)
        assert is_the_routes(err), wording


@pytest.mark.parametrize(
    "description",
    [
        "Bad Request: CHAT_PHOTO_INVALID",  # a chat's photo, not the page
        "Bad Request: USER_PHOTO_INVALID",
        "Bad Request: PHOTO_INVALID_DIMENSIONS_OF_THE_CHAT_AVATAR",
        "Bad Request: message thread not found (PHOTO_INVALID)",
        "Bad Request: the proxy says the upload file is too big for its buffer",
        "Bad Request: not enough rights to send documents: file is too big",
        "Bad Request: TOPIC_CLOSED; wrong type of the web page content",
        "Bad Request: IMAGE_PROCESS_FAILED_ON_THE_CHAT",
        'Bad Request: failed to send message #0 with the error message "CHAT_PHOTO_INVALID"',
        'Bad Request: failed to send message #0 with the error message "the file is too big for the proxy"',
    ],
)
async def test_a_work_word_inside_another_telegram_description_is_the_routes(tmp_path: Path, description: str) -> None:
    """The Bot API states a refusal of the file as a whole phrase — its error's name or
    words after ``Bad Request:`` (``PHOTO_INVALID_DIMENSIONS``, ``file is too big``), or
    quoted in an album's ``failed to send message #N with the error message "…"``. A
    description holding such words inside another is no such phrase: the route's, never
    the work's (until 2026-12-07 the words were found anywhere: ``CHAT_PHOTO_INVALID``
    refused the work for good)."""
    for pages in (1, 3):  # a photo (then a document), an album
        err = await failure(telegram, tg_answer(400, description), tmp_path, pages=pages)
        assert is_the_routes(err), (pages, err.reason, str(err))


@pytest.mark.parametrize(
    "description",
    [
        "Bad Request: PHOTO_INVALID_DIMENSIONS",
        "Bad Request: photo_invalid_dimensions",
        "PHOTO_INVALID_DIMENSIONS",
        "Bad Request: IMAGE_PROCESS_FAILED",
        "Bad Request: file is too big",
        "Bad Request: File is too big ",
        'Bad Request: failed to send message #0 with the error message "PHOTO_INVALID"',
    ],
)
async def test_a_documented_telegram_refusal_of_the_file_is_the_works(tmp_path: Path, description: str) -> None:
    err = await failure(telegram, tg_answer(400, description), tmp_path)
    assert err.reason == TerminalReason.DELIVERY_REJECTED and err.permanent, (err.reason, str(err))


@pytest.mark.parametrize(
    "answer",
    [
        lambda _r: httpx.Response(400, text="<html>400 Bad Request</html>"),  # not the Bot API's
        lambda _r: httpx.Response(400, json={"ok": False, "error_code": "forty", "description": "x"}),
        lambda _r: httpx.Response(400, json={"ok": False, "error_code": 400, "description": 7, "parameters": []}),
        lambda _r: httpx.Response(400, json={"ok": False, "description": {"x": 1}, "parameters": "p"}),
    ],
    ids=["html", "error_code-not-a-number", "parameters-a-list", "description-an-object"],
)
async def test_a_telegram_refusal_of_an_unknown_shape_is_the_routes(tmp_path: Path, answer: Answer) -> None:
    assert is_the_routes(await failure(telegram, answer, tmp_path))


WEEK_WAIT = {"retry_after": 604_800}


@pytest.mark.parametrize(
    "answer",
    [
        lambda _r: httpx.Response(
            403,
            json={"ok": False, "error_code": 429, "description": "Too Many Requests", "parameters": WEEK_WAIT},
        ),
        lambda _r: httpx.Response(
            400, json={"ok": False, "description": "Too Many Requests: retry after 604800", "parameters": WEEK_WAIT}
        ),
        lambda _r: httpx.Response(
            404, json={"ok": False, "error_code": 400, "description": "Too Many Requests: retry after 604800"}
        ),
        lambda _r: httpx.Response(302, json={"ok": False, "error_code": 429, "parameters": WEEK_WAIT}),
    ],
    ids=["403-saying-429", "400-without-error_code", "404-saying-400", "302-saying-429"],
)
async def test_a_telegram_rate_limit_in_an_answer_not_the_bot_apis_is_no_rate_limit(
    tmp_path: Path, answer: Answer
) -> None:
    """A 3xx / 4xx other than 429 whose envelope is not the Bot API's own refusal (its
    ``error_code`` another number or none: a proxy rewriting statuses) is decided by its
    status: the route's. Its words — ``parameters.retry_after``, "retry after N" — are no
    rate limit of Telegram's: read as one, they held that send as long as they said (a
    week here), never capped, instead of the route's refusal."""
    err = await failure(telegram, answer, tmp_path)
    assert is_the_routes(err) and not err.rate_limited and err.retry_after_s is None


@pytest.mark.parametrize(
    "description",
    [
        "Bad Request: wrong type of the web page content",
        "Bad Request: Wrong type of the web page content",
        'Bad Request: failed to send message #1 with the error message "Wrong type of the web page content"',
    ],
)
@pytest.mark.parametrize("shape", ["animation", "photo", "album"])
async def test_telegrams_words_for_media_given_by_url_are_the_routes(
    tmp_path: Path, description: str, shape: str
) -> None:
    """ "Wrong type of the web page content" is the Bot API's wording of Telegram's
    ``WEBPAGE_MEDIA_EMPTY`` (tdlib/telegram-bot-api ``Client::fail_query_with_error``, beside
    ``WEBPAGE_CURL_FAILED`` → "Failed to get HTTP URL content"): the media given *by URL*
    is not of its type. curaflow uploads every page's bytes and never sends a URL, so the
    answer names no file of the work — one curaflow should never meet, the route's, as its
    sibling. Until 2026-12-07 it refused the work for good on the route (read as "an
    animation Telegram cannot play"), a photo without its second chance as a document."""
    kw: dict[str, Any] = {"animation": {"animated": True}, "photo": {}, "album": {"pages": 3}}[shape]
    err = await failure(telegram, tg_answer(400, description), tmp_path, **kw)
    assert is_the_routes(err), (err.reason, str(err))


async def test_a_telegram_photo_refusal_is_sent_again_as_a_document(tmp_path: Path) -> None:
    seen: list[str] = []

    def answer(req: httpx.Request) -> httpx.Response:
        seen.append(req.url.path.rsplit("/", 1)[-1])
        if len(seen) == 1:
            return httpx.Response(
                400, json={"ok": False, "error_code": 400, "description": "Bad Request: PHOTO_INVALID_DIMENSIONS"}
            )
        return httpx.Response(200, json={"ok": True, "result": {"message_id": 7}})

    receipt = await deliver(telegram, answer, tmp_path)
    assert seen == ["sendPhoto", "sendDocument"] and receipt.remote_id == "7"


@pytest.mark.parametrize(
    ("description", "pages"),
    [
        ("Bad Request: file of size 10485761 bytes is too big for a photo; the maximum size is 10485760 bytes", 1),
        (
            'Bad Request: File "/var/lib/telegram-bot-api/1:x/photos/file_7.jpg" of size 14598977 bytes is too big '
            "for a photo",
            1,
        ),
        (
            'Bad Request: failed to send message #2 with the error message "file of size 12000000 bytes is too big '
            'for a photo; the maximum size is 10485760 bytes"',
            3,
        ),
    ],
    ids=["photo", "photo-with-path", "album"],
)
async def test_a_photo_telegram_finds_too_big_for_a_photo_is_sent_again_as_a_document(
    tmp_path: Path, description: str, pages: int
) -> None:
    """TDLib's own words for a page over its photo limit (``check_full_local_location``: "file
    of size N bytes is too big for a photo; the maximum size is M bytes") say the page
    cannot be a *photo* — as ``PHOTO_INVALID_DIMENSIONS`` does —, never that it cannot be
    sent: the route sends it again as a document in the same attempt. Until 2026-12-07 they
    were an answer of the route's (``route_refused``: the work held back and sent as a photo
    again after its hold, for ever; three works so paused the route), though a document
    would have gone."""
    seen: list[str] = []

    def answer(req: httpx.Request) -> httpx.Response:
        seen.append(req.url.path.rsplit("/", 1)[-1])
        if len(seen) == 1:
            return httpx.Response(400, json={"ok": False, "error_code": 400, "description": description})
        result: Any = [{"message_id": 7 + i} for i in range(pages)] if pages > 1 else {"message_id": 7}
        return httpx.Response(200, json={"ok": True, "result": result})

    receipt = await deliver(telegram, answer, tmp_path, pages=pages)
    method = "sendPhoto" if pages == 1 else "sendMediaGroup"
    again = "sendDocument" if pages == 1 else "sendMediaGroup"
    assert seen == [method, again] and receipt.remote_id == "7", seen


@pytest.mark.parametrize(
    ("description", "pages"),
    [
        ("Bad Request: not enough rights to send photos to the chat", 1),
        ("Bad Request: Not enough rights to send photos to the chat ", 3),
        (
            'Bad Request: failed to send message #1 with the error message "Not enough rights to send photos to '
            'the chat"',
            3,
        ),
    ],
    ids=["photo", "album", "album-item"],
)
async def test_a_chat_that_takes_no_photos_gets_the_page_as_a_document(
    tmp_path: Path, description: str, pages: int
) -> None:
    """A chat whose members may send documents but not photos (Telegram's granular
    rights, ``can_send_photos`` apart from ``can_send_documents``): TDLib's "Not enough
    rights to send photos to the chat" says the page cannot go as a *photo* there, never
    that it cannot go — the route sends it again as a document in the same attempt, as for
    "too big for a photo". Until 2026-12-07 it was the route's refusal (``route_refused``:
    the work held back and sent as a photo again after its hold; three works so paused
    the route), though a document would have gone."""
    seen: list[str] = []

    def answer(req: httpx.Request) -> httpx.Response:
        seen.append(req.url.path.rsplit("/", 1)[-1])
        if len(seen) == 1:
            return httpx.Response(400, json={"ok": False, "error_code": 400, "description": description})
        result: Any = [{"message_id": 7 + i} for i in range(pages)] if pages > 1 else {"message_id": 7}
        return httpx.Response(200, json={"ok": True, "result": result})

    receipt = await deliver(telegram, answer, tmp_path, pages=pages)
    method = "sendPhoto" if pages == 1 else "sendMediaGroup"
    again = "sendDocument" if pages == 1 else "sendMediaGroup"
    assert seen == [method, again] and receipt.remote_id == "7", seen


@pytest.mark.parametrize(
    "description",
    [
        "Bad Request: not enough rights to send documents to the chat",  # the document's own refusal
        "Bad Request: not enough rights to send photos to the chat",  # said of a document: not its words
        "Bad Request: not enough rights to send photos to the chat or anything else",  # words inside another
    ],
)
async def test_rights_refused_for_a_document_are_the_routes(tmp_path: Path, description: str) -> None:
    # The page already goes as a document (an animation: never a photo): no other form is
    # left, and the chat's rights are the route's — never the work's.
    seen: list[str] = []

    def answer(req: httpx.Request) -> httpx.Response:
        seen.append(req.url.path.rsplit("/", 1)[-1])
        return httpx.Response(400, json={"ok": False, "error_code": 400, "description": description})

    err = await failure(telegram, answer, tmp_path, animated=True)
    assert err.reason == TerminalReason.ROUTE_REFUSED and err.permanent, (err.reason, str(err))
    assert seen == ["sendAnimation"], seen


@pytest.mark.parametrize(
    "answer",
    [
        tg_answer(429, "Too Many Requests"),
        tg_answer(400, "Bad Request: Too Many Requests"),
        tg_answer(429, "Too Many Requests: retry after soon", parameters={"retry_after": "x"}),
        lambda _r: httpx.Response(429, text="<html>Too Many Requests</html>"),
    ],
    ids=["429", "400-text", "junk-delay", "html"],
)
async def test_a_telegram_rate_limit_without_a_delay_states_none(tmp_path: Path, answer: Answer) -> None:
    err = await failure(telegram, answer, tmp_path)
    assert err.rate_limited and not err.permanent
    assert err.retry_after_s is None  # the backoff is decided once, in curaflow.domain.ratelimit


async def test_a_telegram_rate_limit_with_its_delay_keeps_it(tmp_path: Path) -> None:
    err = await failure(
        telegram, tg_answer(429, "Too Many Requests: retry after 8", parameters={"retry_after": 8}), tmp_path
    )
    assert err.rate_limited and err.retry_after_s == 8


# ---- Discord ------------------------------------------------------------------------------------


def dc_answer(status: int, body: Any = None, *, text: str | None = None, **headers: str) -> Answer:
    if text is not None:
        return lambda _r: httpx.Response(status, text=text, headers=headers)
    return lambda _r: httpx.Response(status, json=body, headers=headers)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (
            400,
            {
                "code": 50035,
                "message": "Invalid Form Body",
                "errors": {
                    "username": {
                        "_errors": [
                            {"code": "USERNAME_INVALID_CONTAINS", "message": 'Username cannot contain "discord"'}
                        ]
                    }
                },
            },
        ),
        (400, {"code": 50035, "message": "Invalid Form Body", "errors": {"thread_id": {"_errors": []}}}),
        # The content curaflow composed (the caption, under `content_max` ≤ 2000): curaflow's
        # or the route's doing — the work's until 2026-12-07, refused for good
        # (tests/unit/test_route_answers_nobody_named.py).
        (
            400,
            {
                "code": 50035,
                "message": "Invalid Form Body",
                "errors": {"content": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH"}]}},
            },
        ),
        # A field curaflow never sends (no embed is built): an answer it should never
        # meet, the route's — until 2026-12-07 `embeds` refused the work for good.
        (
            400,
            {
                "code": 50035,
                "message": "Invalid Form Body",
                "errors": {"embeds": {"0": {"description": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH"}]}}}},
            },
        ),
        (
            400,
            {
                "code": 50035,
                "message": "Invalid Form Body",
                "errors": {"content": {"_errors": []}, "embeds": {"_errors": []}},
            },
        ),
        (400, {"code": 220001, "message": "Webhooks posted to forum channels must have a thread_name or thread_id"}),
        (400, {"code": 10003, "message": "Unknown Channel"}),
        (400, {"message": "something new"}),
        (400, None),
        (403, {"code": 50013, "message": "Missing Permissions"}),
        (404, {"code": 10015, "message": "Unknown Webhook"}),
        (405, {"message": "405: Method Not Allowed", "code": 0}),
        (413, {"code": 40005, "message": "Request entity too large"}),
        (418, {"message": "teapot"}),
    ],
)
async def test_an_unknown_or_destination_discord_refusal_is_the_routes(tmp_path: Path, status: int, body: Any) -> None:
    assert is_the_routes(await failure(discord, dc_answer(status, body), tmp_path))


@pytest.mark.parametrize(
    "body",
    [
        {
            "code": 50035,
            "message": "Invalid Form Body",
            "errors": {"files[0]": {"_errors": [{"code": "BINARY_TYPE_MAX_SIZE"}]}},
        },
        {"code": 50045, "message": "File uploaded exceeds the maximum size"},
        {"code": 20009, "message": "Explicit content cannot be sent to the desired recipient(s)"},
        {"code": 200000, "message": "Message was blocked by automatic moderation"},
    ],
    ids=["file", "file-too-big", "explicit", "automod"],
)
async def test_a_discord_refusal_of_the_content_is_the_works(tmp_path: Path, body: Any) -> None:
    err = await failure(discord, dc_answer(400, body), tmp_path)
    assert err.reason == TerminalReason.DELIVERY_REJECTED and err.permanent
    assert owner_of(err.reason) == Owner.WORK


CLOUDFLARE_1015 = (
    "<!DOCTYPE html><html><head><title>Access denied | discord.com used Cloudflare to restrict access</title>"
    "</head><body><h1>Error 1015</h1><h2>You are being rate limited</h2></body></html>"
)


@pytest.mark.parametrize(
    ("answer", "route_wide"),
    [
        (dc_answer(429, {"message": "You are being rate limited.", "global": False}), False),
        (dc_answer(429, {"message": "You are being rate limited.", "retry_after": "soon"}), False),
        (dc_answer(429, {"message": "You are being rate limited.", "global": True}), True),
        (dc_answer(429, text=CLOUDFLARE_1015), True),
        (dc_answer(429, text="error code: 1015"), True),
    ],
    ids=["no-delay", "junk-delay", "global", "cloudflare-1015", "cloudflare-text"],
)
async def test_a_discord_rate_limit_without_a_delay_states_none(
    tmp_path: Path, answer: Answer, route_wide: bool
) -> None:
    err = await failure(discord, answer, tmp_path)
    assert err.rate_limited and not err.permanent and err.retry_after_s is None
    assert err.route_wide is route_wide  # a global or IP-level limit holds every send of the route


async def test_a_discord_rate_limit_with_its_delay_keeps_it(tmp_path: Path) -> None:
    err = await failure(discord, dc_answer(429, {"retry_after": 2.5, "global": False}), tmp_path)
    assert err.rate_limited and err.retry_after_s == 2.5 and not err.route_wide
    err = await failure(discord, dc_answer(429, {"message": "x"}, **{"Retry-After": "3"}), tmp_path)
    assert err.retry_after_s == 3


LIMITED = {"message": "You are being rate limited.", "retry_after": 2.5}


@pytest.mark.parametrize(
    ("answer", "route_wide"),
    [
        (dc_answer(429, {**LIMITED, "global": "true"}), True),
        (dc_answer(429, {**LIMITED, "global": "True"}), True),
        (dc_answer(429, {**LIMITED, "global": "false"}), False),
        (dc_answer(429, {**LIMITED, "global": "yes"}), True),
        (dc_answer(429, {**LIMITED, "global": 1}), True),
        (dc_answer(429, {**LIMITED, "global": 0}), True),
        (dc_answer(429, {**LIMITED, "global": None}), True),
        (dc_answer(429, {**LIMITED, "global": {}}), True),
        (dc_answer(429, LIMITED, **{"X-RateLimit-Global": "true"}), True),
        (dc_answer(429, {**LIMITED, "global": False}, **{"X-RateLimit-Global": "true"}), True),
        (dc_answer(429, {**LIMITED, "global": False}, **{"X-RateLimit-Global": "1"}), True),
        (dc_answer(429, {**LIMITED, "global": False}, **{"X-RateLimit-Global": "false"}), False),
        (dc_answer(429, {**LIMITED, "global": False}, **{"X-RateLimit-Scope": "user"}), False),
        (dc_answer(429, {**LIMITED, "global": False}, **{"X-RateLimit-Scope": "shared"}), False),
        (dc_answer(429, {**LIMITED, "global": False}, **{"X-RateLimit-Scope": "Global"}), True),
        (dc_answer(429, {**LIMITED, "global": False}, **{"X-RateLimit-Scope": "application"}), True),
        (dc_answer(429, {**LIMITED, "global": False}, **{"X-RateLimit-Scope": ""}), True),
        (dc_answer(429, {"message": "You are being rate limited.", "global": "false"}), False),
    ],
    ids=[
        "body-string-true",
        "body-string-True",
        "body-string-false",
        "body-yes",
        "body-1",
        "body-0",
        "body-null",
        "body-object",
        "header-global",
        "header-global-over-body-false",
        "header-global-unknown",
        "header-global-false",
        "scope-user",
        "scope-shared",
        "scope-Global",
        "scope-unknown",
        "scope-empty",
        "string-false-without-delay",
    ],
)
async def test_a_discord_rate_limits_scope_is_read_as_written_and_the_unknown_holds_the_route(
    tmp_path: Path, answer: Answer, route_wide: bool
) -> None:
    """Discord's ``global`` (the body's boolean, the ``X-RateLimit-Global`` header) and
    ``X-RateLimit-Scope`` decide whether a 429 holds one send or the whole route: a
    boolean written as a string (a proxy, a library) is read as its word, and a value
    curaflow does not recognise is the wider scope — the route waits (capped), it never
    hammers a global limit send by send."""
    err = await failure(discord, answer, tmp_path)
    assert err.rate_limited and not err.permanent
    assert err.route_wide is route_wide


@pytest.mark.parametrize(
    "answer",
    [
        lambda _r: httpx.Response(204),
        lambda _r: httpx.Response(200),
        lambda _r: httpx.Response(202, text=""),
        lambda _r: httpx.Response(200, json={"ok": True}),
        lambda _r: httpx.Response(200, json={"id": "1234"}),
        lambda _r: httpx.Response(201, json={"id": 5, "status": "created"}),
        lambda _r: httpx.Response(200, json={"channel_id": "9"}),
        lambda _r: httpx.Response(200, json=[{"id": "1234", "channel_id": "9"}]),
        lambda _r: httpx.Response(200, text="<html>id channel_id</html>", headers={"content-type": "text/html"}),
    ],
    ids=["204", "200-empty", "202-empty", "200-no-message", "200-id-alone", "201-created", "200-no-id", "list", "html"],
)
async def test_a_discord_2xx_without_the_created_message_is_an_unknown_outcome(tmp_path: Path, answer: Answer) -> None:
    """The route asks ``wait=true``: Discord then answers the created message. A 2xx
    without it — a bare 204 (Discord's answer when it did *not* wait: "a message that is
    not saved does not return an error"), an empty 200 — confirms nothing: the message may
    or may not exist (ambiguous, the route's ``on_ambiguous`` decides), never a delivery.
    Nor does an object that is no message of Discord's: an ``id`` alone (any service's
    answer to a create — a webhook URL mistyped to another service's; until 2026-12-07 a
    delivery, the work recorded delivered with nothing in the channel), a message without
    the channel it was posted in (a message object always names it: Discord's docs,
    "Message Object")."""
    err = await failure(discord, answer, tmp_path)
    assert err.ambiguous and not err.permanent
    # An answer all the same: three works ending unknown with it pause the route.
    assert err.answer is not None and "without the created message" in err.answer
    assert owner_of(err.reason) == Owner.ROUTE


HUGE_ID = 10**400  # 401 digits: JSON reads it (up to 4 300), no id is that long


async def test_an_integer_id_longer_than_any_id_is_a_delivery_with_no_id(tmp_path: Path) -> None:
    """An id of 401 digits in an acceptance is no id (``REMOTE_ID_MAX``, as text of that
    length already is): the delivery stands, its id unknown, on every route."""
    receipt = await deliver(webhook, lambda _r: httpx.Response(200, json={"id": HUGE_ID}), tmp_path)
    assert receipt.remote_status == "200" and receipt.remote_id is None
    posted_dc = {"id": HUGE_ID, "channel_id": "9"}
    receipt = await deliver(discord, lambda _r: httpx.Response(200, json=posted_dc), tmp_path)
    assert receipt.remote_ids == [[None]] and receipt.remote_id is None
    posted = {"ok": True, "result": {"message_id": HUGE_ID, "chat": {"id": -100}}}
    receipt = await deliver(telegram, lambda _r: httpx.Response(200, json=posted), tmp_path)
    assert receipt.remote_ids == [[None]] and receipt.remote_id is None


# ---- webhook ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "status", [400, 401, 402, 403, 404, 405, 406, 410, 411, 413, 414, 415, 418, 426, 431, 451, 499]
)
async def test_an_unknown_or_destination_webhook_refusal_is_the_routes(tmp_path: Path, status: int) -> None:
    err = await failure(webhook, lambda _r: httpx.Response(status, json={"error": "no"}), tmp_path)
    assert is_the_routes(err), status


async def test_a_webhook_410_gone_is_the_routes_and_pauses_it_at_once(tmp_path: Path) -> None:
    """A 410 Gone says the receiver's endpoint is gone for good (RFC 9110 §15.5.11;
    Standard Webhooks 1.0: the sender should disable the endpoint): the route's refusal, the
    route paused at this first answer (``pauses_route``), never a work's — until 2026-12-07
    it counted in the refusal streak as any answer, two more works held back before the
    pause."""
    err = await failure(webhook, lambda _r: httpx.Response(410, json={"error": "gone"}), tmp_path)
    assert is_the_routes(err) and err.pauses_route and err.answer == "http 410"


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 415, 422, 429, 500, 502, 303, 301])
async def test_no_other_webhook_answer_pauses_the_route_at_once(tmp_path: Path, status: int) -> None:
    err = await failure(webhook, lambda _r: httpx.Response(status, json={"error": "no"}), tmp_path)
    assert not err.pauses_route, status


async def test_a_webhook_415_is_the_routes_whatever_the_work(tmp_path: Path) -> None:
    """curaflow sends every work as ``application/json``: a receiver refusing that media type
    refuses every work alike — its own configuration, never one work's type (until
    2026-12-07 ``delivery_rejected``: each work refused for good on the route, one by one)."""
    err = await failure(webhook, lambda _r: httpx.Response(415, json={"error": "unsupported media type"}), tmp_path)
    assert err.reason == TerminalReason.ROUTE_REFUSED and err.answer == "http 415"


@pytest.mark.parametrize(
    "answer",
    [
        lambda _r: httpx.Response(422, json={"error": "content refused"}),
        lambda _r: httpx.Response(200, json={"status": "rejected"}),
    ],
    ids=["422", "2xx-rejected"],
)
async def test_a_webhook_receiver_refusing_the_work_says_so(tmp_path: Path, answer: Answer) -> None:
    err = await failure(webhook, answer, tmp_path)
    assert err.reason == TerminalReason.DELIVERY_REJECTED and err.permanent


async def test_a_webhook_429_without_a_delay_states_none(tmp_path: Path) -> None:
    err = await failure(webhook, lambda _r: httpx.Response(429, text="slow down"), tmp_path)
    assert err.rate_limited and err.retry_after_s is None and not err.permanent


@pytest.mark.parametrize("error", [httpx.ConnectTimeout, httpx.PoolTimeout, httpx.ConnectError])
async def test_a_webhook_request_that_never_left_is_not_ambiguous(tmp_path: Path, error: type[Exception]) -> None:
    def answer(req: httpx.Request) -> httpx.Response:
        raise error("the TLS handshake never completed", request=req)

    err = await failure(webhook, answer, tmp_path)
    assert not err.ambiguous and not err.permanent


# ---- Any route ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("route_of", "body"),
    [
        (telegram, {"ok": True, "result": {"message_id": 7}}),
        (discord, {"id": "1234", "channel_id": "9"}),
        (webhook, {"status": "accepted"}),
    ],
)
async def test_an_acceptance_with_header_bytes_that_are_not_ascii_is_delivered(
    tmp_path: Path, route_of: Callable[[httpx.AsyncClient], Any], body: Any
) -> None:
    # A receiver's header in UTF-8 or Latin-1 (a proxy's, a server name) is no reason to
    # doubt its acceptance: the work was delivered, not blocked on the route.
    headers = [(b"content-type", b"application/json"), (b"server", "zürich ☕".encode()), (b"x-raw", b"\xe9t\xe9")]
    receipt = await deliver(route_of, lambda _r: httpx.Response(200, headers=headers, json=body), tmp_path)
    assert not receipt.duplicate


# ---- a status HTTP does not define ----------------------------------------------------------------

#: Bodies a 6xx–9xx may carry: each route's own refusal shape, another JSON, a page, none.
UNDEFINED_BODIES: dict[str, Callable[[int], httpx.Response]] = {
    "telegram-shaped": lambda s: httpx.Response(
        s, json={"ok": False, "error_code": s, "description": "Bad Request: file is too big", "parameters": {}}
    ),
    "discord-shaped": lambda s: httpx.Response(
        s, json={"code": 50045, "message": "File uploaded exceeds the maximum size"}
    ),
    "webhook-shaped": lambda s: httpx.Response(s, json={"status": "rejected", "error": "no"}),
    "html": lambda s: httpx.Response(s, text="<html><body>proxy</body></html>", headers={"content-type": "text/html"}),
    "empty": lambda s: httpx.Response(s),
}


@pytest.mark.parametrize("status", [600, 700, 799, 999])
@pytest.mark.parametrize("body", list(UNDEFINED_BODIES))
@pytest.mark.parametrize("route_of", [webhook, telegram, discord], ids=["webhook", "telegram", "discord"])
async def test_a_status_http_does_not_define_costs_one_attempt_on_every_route(
    tmp_path: Path, route_of: Callable[[httpx.AsyncClient], Any], body: str, status: int
) -> None:
    """RFC 9110 §15: a status outside 100–599 is invalid, read "as if it had a 5xx" — one
    no receiver documents, so whatever it carries is not the receiver's own answer: the
    request may have been processed (ambiguous: the route's ``on_ambiguous`` decides),
    retried on the route's backoff, never the work's nor the route's refusal. Until
    2026-12-07 the webhook route read every such status as ``route_refused`` and Telegram
    and Discord read one carrying their own refusal's shape as ``route_refused``."""
    answer = UNDEFINED_BODIES[body]
    err = await failure(route_of, lambda _r: answer(status), tmp_path)
    assert err.ambiguous and not err.permanent and not err.rate_limited, (err.reason, str(err))
    # neither the work refused nor the route: the route's failure of one attempt
    assert err.reason in (TerminalReason.DELIVERY_FAILED, TerminalReason.TELEGRAM_FAILED), err.reason
    assert err.answer is not None and str(status) in err.answer  # counted in an at-most-once route's streak


def test_answers_are_plain_json() -> None:
    # the scripted answers above are the platforms' envelopes (a sanity check of the fixtures)
    assert json.loads(tg_answer(400, "x")(httpx.Request("POST", "https://t")).content)["ok"] is False

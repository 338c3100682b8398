"""A third party's answer blames the work, or sends curaflow elsewhere, only when its status,
its shape and its words agree (DESIGN.md "Safe defaults at the edges": the unknown is
cheap; recognise positively only what blames the work).

Each case is an answer whose words are the platform's own for "this work's file" or "the
chat moved", but whose status or shape is not the one the platform gives them with (a
proxy rewriting statuses, a gateway's JSON). Before 2026-12-06 the words alone decided:

* Telegram refused the work for good on ``"file is too big"`` whatever the HTTP status
  (a 200, a 403, a 500 carrying ``error_code: 400``), and a 400 whose JSON said
  ``error_code: 502`` was a gateway error, the work ``unknown`` for good on an
  at-most-once route;
* Telegram followed ``migrate_to_chat_id`` in any answer (a 200, a 429, a 500) and to any
  integer, and sent every later delivery of the process to that chat;
* Discord refused the work for good on a content code in a 401 or a 404 (the webhook's
  token refused, the webhook unknown: the route's, whatever the body says).

The routes run against ``httpx.MockTransport`` answering the platforms'
wire formats (Telegram's ``{"ok": false, …}``, Discord's ``{"code", "message"}``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from curaflow.domain.reasons import Owner, TerminalReason
from curaflow.domain.verdicts import owner_of
from curaflow.routes.base import RouteError
from tests.unit.test_route_answers import deliver, discord, failure, telegram

FILE_TOO_BIG = "Bad Request: file is too big"


def tg(status: int, body: dict[str, Any]) -> Any:
    return lambda _r: httpx.Response(status, json=body)


# ---- Telegram: the work's refusal is a 400 that says error_code 400 --------------------------


@pytest.mark.parametrize(
    ("status", "error_code"),
    [(200, 400), (403, 400), (404, 400), (500, 400), (400, "400"), (400, None), (400, 403)],
    ids=["200", "403", "404", "500", "code-text", "no-code", "400-says-403"],
)
async def test_telegrams_words_for_the_work_in_an_answer_that_disagrees_are_not_the_works(
    tmp_path: Path, status: int, error_code: Any
) -> None:
    body: dict[str, Any] = {"ok": False, "description": FILE_TOO_BIG}
    if error_code is not None:
        body["error_code"] = error_code
    err = await failure(telegram, tg(status, body), tmp_path)
    assert owner_of(err.reason) != Owner.WORK, (err.reason, str(err))
    assert err.reason != TerminalReason.DELIVERY_REJECTED
    # A 4xx saying "not done" is no post; under a 2xx or a 5xx an envelope that is not the
    # Bot API's own may follow a post (DESIGN.md: a 2xx that is not `ok: true` is unknown)
    assert not err.ambiguous or status >= 500 or 200 <= status < 300


async def test_telegrams_words_for_the_work_in_its_own_400_are_still_the_works(tmp_path: Path) -> None:
    err = await failure(telegram, tg(400, {"ok": False, "error_code": 400, "description": FILE_TOO_BIG}), tmp_path)
    assert err.reason == TerminalReason.DELIVERY_REJECTED and err.permanent


async def test_a_telegram_4xx_whose_json_names_a_gateway_error_is_no_gateway_error(tmp_path: Path) -> None:
    # A 400 is a refusal: the request was not posted. Read as a gateway error, it was
    # ambiguous — the work `unknown` for good on an at-most-once route.
    err = await failure(telegram, tg(400, {"ok": False, "error_code": 502, "description": "Bad Gateway"}), tmp_path)
    assert not err.ambiguous and owner_of(err.reason) == Owner.ROUTE


async def test_a_photo_refusal_in_an_answer_that_disagrees_is_not_sent_again_as_a_document(tmp_path: Path) -> None:
    seen: list[str] = []

    def answer(req: httpx.Request) -> httpx.Response:
        seen.append(req.url.path.rsplit("/", 1)[-1])
        return httpx.Response(
            200, json={"ok": False, "error_code": 400, "description": "Bad Request: PHOTO_INVALID_DIMENSIONS"}
        )

    err = await failure(telegram, answer, tmp_path)
    assert seen == ["sendPhoto"] and owner_of(err.reason) == Owner.ROUTE


# ---- Telegram: a chat migration is the Bot API's 400 naming a supergroup -----------------------


def migrating(status: int, code: Any, to: Any) -> Any:
    return tg(
        status,
        {
            "ok": False,
            "error_code": code,
            "description": "Bad Request: group chat was upgraded to a supergroup chat",
            "parameters": {"migrate_to_chat_id": to},
        },
    )


@pytest.mark.parametrize(
    ("status", "code", "to"),
    [
        (200, 400, -1001234567),  # a 2xx
        (500, 500, -1001234567),  # a 5xx
        (429, 429, -1001234567),  # a rate limit
        (403, 400, -1001234567),  # status and error_code disagree
        (400, 400, 777),  # a user's id, no supergroup's
        (400, 400, -12345),  # a basic group's id, no supergroup's
    ],
    ids=["200", "500", "429", "403-says-400", "positive-id", "basic-group-id"],
)
async def test_a_migration_the_bot_api_did_not_answer_is_never_followed(
    tmp_path: Path, status: int, code: Any, to: Any
) -> None:
    seen: list[str] = []

    def answer(req: httpx.Request) -> httpx.Response:
        seen.append(dict(_form(req)).get("chat_id", ""))
        return migrating(status, code, to)(req)

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
        route = telegram(http)
        with pytest.raises(RouteError):
            await route.deliver(_request(tmp_path))
        assert route.chat_id == "-100" and set(seen) == {"-100"}, (route.chat_id, seen)


async def test_the_bot_apis_migration_is_still_followed(tmp_path: Path) -> None:
    seen: list[str] = []

    def answer(req: httpx.Request) -> httpx.Response:
        seen.append(dict(_form(req)).get("chat_id", ""))
        if len(seen) == 1:
            return migrating(400, 400, -1001234567)(req)
        return httpx.Response(200, json={"ok": True, "result": {"message_id": 5}})

    receipt = await deliver(telegram, answer, tmp_path)
    assert seen == ["-100", "-1001234567"] and receipt.remote_id == "5"


def _form(req: httpx.Request) -> list[tuple[str, str]]:
    """The plain fields of a multipart request (no files)."""
    fields: list[tuple[str, str]] = []
    body = req.read()
    boundary = req.headers["content-type"].split("boundary=", 1)[1].encode()
    for part in body.split(b"--" + boundary):
        head, _, value = part.partition(b"\r\n\r\n")
        if b'name="' in head and b"filename=" not in head:
            name = head.split(b'name="', 1)[1].split(b'"', 1)[0].decode()
            fields.append((name, value.rstrip(b"\r\n").decode()))
    return fields


def _request(tmp_path: Path) -> Any:
    from tests.unit.test_route_answers import request_of

    return request_of(tmp_path)


# ---- Discord: a content code blames the work only with a status that can carry it ---------------


@pytest.mark.parametrize("status", [401, 404, 405, 409])
@pytest.mark.parametrize(
    "body",
    [
        {"code": 50045, "message": "File uploaded exceeds the maximum size"},
        {"code": 20009, "message": "Explicit content cannot be sent to the desired recipient(s)"},
        {"code": 50035, "message": "Invalid Form Body", "errors": {"content": {"_errors": [{"code": "X"}]}}},
    ],
    ids=["file-too-big", "explicit", "form-content"],
)
async def test_a_discord_content_code_under_a_status_about_the_webhook_is_the_routes(
    tmp_path: Path, status: int, body: dict[str, Any]
) -> None:
    # 401: the webhook's token refused; 404: the webhook unknown; 405 / 409: the request's
    # method or state. None says anything of the work, whatever the body's code.
    err = await failure(discord, lambda _r: httpx.Response(status, json=body), tmp_path)
    assert err.reason == TerminalReason.ROUTE_REFUSED and owner_of(err.reason) == Owner.ROUTE, str(err)


@pytest.mark.parametrize("status", [400, 403, 413])
async def test_a_discord_content_code_under_a_refusal_of_the_request_is_still_the_works(
    tmp_path: Path, status: int
) -> None:
    body = {"code": 50045, "message": "File uploaded exceeds the maximum size"}
    err = await failure(discord, lambda _r: httpx.Response(status, json=body), tmp_path)
    assert err.reason == TerminalReason.DELIVERY_REJECTED

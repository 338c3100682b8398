"""A Telegram album's failure as the Bot API states it: ``failed to send message #N``.

The Bot API server (tdlib/telegram-bot-api, ``Client::on_message_send_failed``) numbers
the messages of a ``sendMediaGroup`` from **1**, in the order their sends ended, and TDLib
sends an album to Telegram as **one** request (``messages.sendMultiMedia``): when an item
fails before the album leaves (its upload refused: ``PHOTO_INVALID_DIMENSIONS`` …) every
item fails — the named one with its error, the others ``Group send failed`` — and when
Telegram refuses the album every item fails with its error, ``#1`` named. So the answer
``400 Bad Request: failed to send message #N with the error message "E"`` says nothing of
the album was posted; only ``E`` = ``Message was not sent`` (Telegram's result left that
item out while it posted the others) says some items may be in the chat, which ones not.

Until 2026-12-07 curaflow read ``#N`` as "items 0..N-1 are in the chat": an album whose
third photo Telegram could not take as a photo (``#3``) was recorded with three items
posted that never were, and ended ``delivery_partial`` (the work ``unknown`` on the route
for good, reported partial) instead of being sent again as documents; a route's refusal
named at ``#1`` likewise recorded a page posted and ended partial, never held back.

The route runs against ``httpx.MockTransport`` answering the Bot API's wire format.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from curaflow.domain.reasons import TerminalReason
from curaflow.routes.base import RouteError
from tests.unit.test_route_answers import request_of, telegram

MESSAGE = {"message_id": 7, "chat": {"id": -100}, "date": 1}


def failed_at(position: int, error: str) -> dict[str, Any]:
    """The Bot API's own 400 for an album whose item ``position`` (1-based) failed with ``error``."""
    return {
        "ok": False,
        "error_code": 400,
        "description": f'Bad Request: failed to send message #{position} with the error message "{error}"',
    }


async def _send_album(
    tmp_path: Path, answers: list[dict[str, Any]], pages: int = 3
) -> tuple[Any, list[Any], list[str]]:
    """Deliver an album of ``pages`` photos, each request answered by the next of ``answers``
    (HTTP 400 for an ``ok: false``); returns the receipt (or the RouteError), the parts
    recorded through ``on_part`` and the methods called."""
    recorded: list[Any] = []
    methods: list[str] = []

    async def on_part(parts: list[Any]) -> None:
        recorded.append(parts)

    def answer(req: httpx.Request) -> httpx.Response:
        methods.append(req.url.path.rsplit("/", 1)[-1])
        body = answers[min(len(methods), len(answers)) - 1]
        return httpx.Response(200 if body.get("ok") else 400, json=body)

    request = request_of(tmp_path, pages=pages)
    request.on_part = on_part
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
        try:
            outcome: Any = await telegram(http).deliver(request)
        except RouteError as err:
            outcome = err
    return outcome, recorded, methods


@pytest.mark.parametrize("position", [1, 2, 3])
async def test_an_album_photo_telegram_refuses_sends_the_album_again_as_documents(
    tmp_path: Path, position: int
) -> None:
    documents = {"ok": True, "result": [dict(MESSAGE, message_id=i) for i in (11, 12, 13)]}
    outcome, recorded, methods = await _send_album(
        tmp_path, [failed_at(position, "PHOTO_INVALID_DIMENSIONS"), documents]
    )
    assert not isinstance(outcome, RouteError), f"{outcome.reason}: {outcome}"
    assert methods == ["sendMediaGroup", "sendMediaGroup"]
    # Nothing of the refused album was posted: only the documents' three messages are.
    assert recorded == [[[11, 12, 13]]], recorded
    assert outcome.remote_ids == [[11, 12, 13]]


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        ("Bad Request: chat not found", TerminalReason.ROUTE_REFUSED),
        ("IMAGE_PROCESS_FAILED", TerminalReason.DELIVERY_REJECTED),
        ("Too Many Requests: retry after 8", TerminalReason.TELEGRAM_FAILED),
        ("a wording never seen", TerminalReason.ROUTE_REFUSED),
    ],
    ids=["the-routes", "the-works", "a-rate-limit", "never-seen"],
)
@pytest.mark.parametrize("position", [1, 2])
async def test_an_album_failed_at_an_item_posted_nothing(
    tmp_path: Path, position: int, error: str, reason: TerminalReason
) -> None:
    # Sent as documents already (a photo refused first), or as photos: either way the
    # album's answer names no item posted, and the failure is the quoted error's.
    outcome, recorded, _methods = await _send_album(tmp_path, [failed_at(position, error)])
    assert isinstance(outcome, RouteError)
    assert recorded == [], "no item of an album Telegram failed is recorded as posted"
    assert outcome.reason == reason, str(outcome)
    assert not outcome.ambiguous


async def test_an_album_telegram_posted_without_an_item_may_be_in_the_chat(tmp_path: Path) -> None:
    # "Message was not sent": Telegram's result left that item out and posted the others —
    # which ones the answer does not say: an unknown outcome, never "nothing posted" (a
    # second post of those items) nor a count of items read from the number.
    outcome, recorded, _methods = await _send_album(tmp_path, [failed_at(1, "Message was not sent")])
    assert isinstance(outcome, RouteError)
    assert outcome.ambiguous and outcome.reason == TerminalReason.TELEGRAM_FAILED, str(outcome)
    assert recorded == []
    assert outcome.answer is not None

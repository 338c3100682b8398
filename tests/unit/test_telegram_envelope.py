"""A Telegram 2xx is a delivery only in the Bot API's success envelope: ``ok`` and ``result``.

The Bot API answers every success ``{"ok": true, "result": …}`` (reference
``pixiv-and-delivery-apis.md`` §3.1; tdlib/telegram-bot-api writes ``result`` with every
``ok``). ``{"ok": true}`` alone is no answer of the Bot API's — a stub, a health endpoint
or another service at a mistyped ``api_url`` (Slack's API answers ``{"ok": true}``): until
2026-12-07 it was read as every file of the request posted, the work recorded delivered
for good with nothing in the chat, every delivery of the route so, never paged. Now it is
an answer that may follow a post (ambiguous, its status kept for the route's streak), as
any 2xx that is not the Bot API's. A ``result`` of a shape never seen stays a delivery
(the ``ok`` of the Bot API's envelope: ``tests/integration/test_routes.py``).

The route runs against ``httpx.MockTransport`` answering the Bot API's wire format.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from curaflow.domain.reasons import TerminalReason
from tests.unit.test_route_answers import deliver, failure, telegram


@pytest.mark.parametrize("pages", [1, 3], ids=["sendPhoto", "sendMediaGroup"])
@pytest.mark.parametrize("body", [{"ok": True}, {"ok": True, "description": "done"}], ids=["ok-alone", "ok-with-words"])
async def test_a_telegram_ok_without_a_result_is_no_delivery(tmp_path: Path, pages: int, body: Any) -> None:
    err = await failure(telegram, lambda _r: httpx.Response(200, json=body), tmp_path, pages=pages)
    assert err.ambiguous and not err.permanent and err.reason == TerminalReason.TELEGRAM_FAILED, str(err)
    assert err.answer is not None  # three works ending unknown with it pause the route


async def test_a_telegram_ok_with_a_result_of_any_shape_is_still_a_delivery(tmp_path: Path) -> None:
    for result in (True, [], "posted", None):
        receipt = await deliver(
            telegram, lambda _r, r=result: httpx.Response(200, json={"ok": True, "result": r}), tmp_path
        )
        assert receipt.remote_status == "sent"

"""HTTP's own "send it again later" statuses are one attempt on every route, never a refusal
(DESIGN.md "Safe defaults at the edges": the unknown is cheap).

``408 Request Timeout`` (RFC 9110 §15.5.9: the server — often a proxy in front of the
receiver — closed the connection before it received the whole request) and ``425 Too
Early`` (RFC 8470 §5.2: the server will not risk processing a request that might be
replayed) both say the request was not processed and may be repeated. Until 2026-12-06
every route read them as ``route_refused``: the cell failed unretried, the work was held
back from the route for an hour, and three works meeting a proxy's idle timeout in a row
paused the route.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from curaflow.domain.reasons import TerminalReason
from curaflow.routes import discord, telegram, webhook
from curaflow.routes.base import SEND_AGAIN_STATUSES
from tests.unit import test_route_answers as answers


def test_the_statuses_are_http_s_own() -> None:
    assert frozenset({408, 425}) == SEND_AGAIN_STATUSES


@pytest.mark.parametrize("status", [408, 425])
def test_a_webhook_receiver_s_send_again_is_retried(status: int) -> None:
    err = webhook.classify(status, None)
    assert err.reason == TerminalReason.DELIVERY_FAILED
    assert not err.permanent and not err.ambiguous and not err.rate_limited
    assert err.answer is None  # not a refusal: counts toward no route pause


@pytest.mark.parametrize("status", [408, 425])
@pytest.mark.parametrize("body", [None, {"code": 0, "message": "Request Timeout"}])
def test_a_discord_send_again_is_retried(status: int, body: object) -> None:
    err = discord.classify(status, body, None)
    assert err.reason == TerminalReason.DELIVERY_FAILED
    assert not err.permanent and not err.ambiguous and not err.rate_limited
    assert err.answer is None


@pytest.mark.parametrize("status", [408, 425])
@pytest.mark.parametrize("recognised", [True, False])
def test_a_telegram_send_again_is_retried(status: int, recognised: bool) -> None:
    err = telegram.classify(status, "Request Timeout", {}, None, photo=True, recognised=recognised)
    assert err is not None
    assert err.reason == TerminalReason.TELEGRAM_FAILED
    assert not err.permanent and not err.ambiguous and not err.rate_limited
    assert err.answer is None


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 413])
def test_other_refusals_stay_the_route_s(status: int) -> None:
    assert webhook.classify(status, None).reason == TerminalReason.ROUTE_REFUSED
    assert discord.classify(status, None, None).reason == TerminalReason.ROUTE_REFUSED
    tg = telegram.classify(status, "Bad Request: chat not found", {}, None, photo=False)
    assert tg is not None and tg.reason == TerminalReason.ROUTE_REFUSED


@pytest.mark.parametrize("status", [408, 425])
@pytest.mark.parametrize("route_of", ["webhook", "discord", "telegram"])
async def test_each_route_s_send_retries_them(tmp_path: Path, status: int, route_of: str) -> None:
    """Through each route's own send: a proxy's page (HTML) or the platform's JSON alike."""
    routes = {"webhook": answers.webhook, "discord": answers.discord, "telegram": answers.telegram}
    for answer in (
        lambda _r: httpx.Response(status, text="<html>Request Timeout</html>"),
        lambda _r: httpx.Response(status, json={"ok": False, "error_code": status, "description": "Timeout"}),
    ):
        err = await answers.failure(routes[route_of], answer, tmp_path)
        assert not err.permanent, (route_of, err)
        assert err.reason in (TerminalReason.DELIVERY_FAILED, TerminalReason.TELEGRAM_FAILED)
        assert err.answer is None

"""A receiver unavailable for a stated while is asked again after it, on every route.

RFC 9110 §10.2.3: a server sends ``Retry-After`` with a ``503 (Service Unavailable)`` "to
indicate how long the service is expected to be unavailable to the client". The webhook
route honoured it on every 5xx (DESIGN.md, owners: "how long to wait before retrying";
:func:`curaflow.domain.ratelimit.stated_wait_ms`, the wait remembered on the intent as
``unavailable``); until 2026-12-07 Telegram and Discord ignored it — their own 5xx, a
gateway's — and so did every route on Cloudflare's own 52x pages and on a status HTTP does
not define (read as a 5xx): the next attempt came on Temporal's backoff, seconds later,
into the outage the receiver had announced, and the attempts ran out in it.

A 5xx that may follow a post (a gateway's 502, a page that is not the platform's) carries
its stated delay too: a route that may send again (the webhook, ``on_ambiguous =
"retry"``) waits it.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from activities.errors import route_failure
from curaflow.routes.discord import DiscordRoute, DiscordRouteConfig
from tests.unit.test_route_answers import discord, failure, telegram, webhook

CF = {"server": "cloudflare", "cf-ray": "8a1b2c3d4e5f6071-LAX"}
HTML = {"content-type": "text/html"}

#: (route, status, body, headers) of a 5xx — or HTTP's "send it again" — each route reads.
UNAVAILABLE: dict[str, tuple[Any, int, dict[str, Any], dict[str, str]]] = {
    "tg-own-500": (telegram, 500, {"json": {"ok": False, "error_code": 500, "description": "Internal"}}, {}),
    "tg-own-503": (telegram, 503, {"json": {"ok": False, "error_code": 503, "description": "Unavailable"}}, {}),
    "tg-502-page": (telegram, 502, {"text": "<html>502 Bad Gateway</html>"}, HTML),
    "tg-503-page": (telegram, 503, {"text": "<html>maintenance</html>"}, HTML),
    "tg-408": (telegram, 408, {"text": "<html>408 Request Timeout</html>"}, HTML),
    "dc-own-500": (discord, 500, {"json": {"message": "500: Internal Server Error", "code": 0}}, {}),
    "dc-own-503": (discord, 503, {"json": {"message": "upstream unavailable", "code": 0}}, {}),
    "dc-502-page": (discord, 502, {"text": "<html>502 Bad Gateway</html>"}, HTML),
    "dc-503-page": (discord, 503, {"text": "<html>maintenance</html>"}, HTML),
    "wh-503": (webhook, 503, {}, {}),
    "cf-521-tg": (telegram, 521, {"text": "error code: 521"}, CF),
    "cf-530-dc": (discord, 530, {"text": "error code: 1016"}, CF),
    "cf-520-wh": (webhook, 520, {"text": "<html>520</html>"}, {**CF, **HTML}),
    "cf-524-tg": (telegram, 524, {"text": "<html>524</html>"}, {**CF, **HTML}),
    "undefined-tg": (telegram, 600, {"text": "?"}, {}),
    "undefined-dc": (discord, 799, {"text": "?"}, {}),
    "undefined-wh": (webhook, 999, {"text": "?"}, {}),
}


def answering(status: int, body: dict[str, Any], headers: dict[str, str]) -> Any:
    return lambda _r: httpx.Response(status, headers=headers, **body)


@pytest.mark.parametrize("case", list(UNAVAILABLE))
async def test_a_stated_retry_after_of_an_unavailable_receiver_is_waited(tmp_path: Path, case: str) -> None:
    route_of, status, body, headers = UNAVAILABLE[case]
    err = await failure(route_of, answering(status, body, {**headers, "retry-after": "120"}), tmp_path)
    assert not err.rate_limited and not err.permanent, str(err)
    assert err.retry_after_s == 120, (case, err.retry_after_s, str(err))
    # The next attempt waits it (Temporal's next_retry_delay).
    assert route_failure(err).next_retry_delay == timedelta(seconds=120)


@pytest.mark.parametrize("case", list(UNAVAILABLE))
async def test_without_a_stated_retry_after_temporals_backoff_decides(tmp_path: Path, case: str) -> None:
    route_of, status, body, headers = UNAVAILABLE[case]
    for stated in ({}, {"retry-after": "soon"}, {"retry-after": "-5"}):
        err = await failure(route_of, answering(status, body, {**headers, **stated}), tmp_path)
        assert err.retry_after_s is None, (case, stated, err.retry_after_s)
        assert route_failure(err).next_retry_delay is None


@pytest.mark.parametrize(
    ("body", "seconds"),
    [
        ({"json": {"message": "500: Internal Server Error", "code": 0}}, 6.457),  # Discord's own: its version's ms
        ({"text": "<html>503 Service Unavailable</html>"}, 6457.0),  # in front of Discord: HTTP's seconds
    ],
    ids=["discords-own", "not-discords"],
)
async def test_a_discord_5xx_delay_is_read_in_the_unit_of_who_stated_it(
    tmp_path: Path, body: dict[str, Any], seconds: float
) -> None:
    # A webhook URL as Discord hands it out names no API version: Discord's own delays in
    # milliseconds (as its 429's, tests/unit/test_discord_delay_units.py).
    def route_of(http: httpx.AsyncClient) -> DiscordRoute:
        config = DiscordRouteConfig(url=SecretStr("https://discord.com/api/webhooks/1/x"))
        return DiscordRoute("dc", config, http)

    err = await failure(route_of, answering(503, body, {"retry-after": "6457"}), tmp_path)
    assert err.retry_after_s == pytest.approx(seconds), err.retry_after_s


async def test_a_2xx_that_may_have_posted_states_no_wait(tmp_path: Path) -> None:
    # Retry-After says nothing of a 2xx (RFC 9110 §10.2.3: a 503's, a 3xx's, a 429's).
    err = await failure(telegram, answering(200, {"text": "<html>portal</html>"}, {"retry-after": "120"}), tmp_path)
    assert err.ambiguous and err.retry_after_s is None


async def test_a_stated_unavailability_longer_than_the_routes_cap_is_waited_the_cap(tmp_path: Path) -> None:
    # A 503 says the receiver is unavailable to every send of the route: a week stated by a
    # proxy in front of it is waited at most delivery.route_rate_limit_cap_ms (1 h by
    # default), as a route-wide rate limit is — until 2026-12-07 the week, each job of the
    # route's targets held to its deadline.
    week = {"retry-after": str(7 * 24 * 3600)}
    for route_of, status, body, headers in UNAVAILABLE.values():
        err = await failure(route_of, answering(status, body, {**headers, **week}), tmp_path)
        assert route_failure(err).next_retry_delay == timedelta(hours=1), (status, str(err))
        assert route_failure(err, cap_ms=600_000).next_retry_delay == timedelta(minutes=10)

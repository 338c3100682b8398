"""Cloudflare's own 52x answers in front of a receiver: which say the request never reached it.

Cloudflare answers these itself, about the origin server behind it (Cloudflare's docs,
"Cloudflare 5xx errors"): 521 web server is down (the origin refused the connection), 522
connection timed out, 523 origin is unreachable, 525 SSL handshake failed, 526 invalid SSL
certificate — the request was never handed to the origin: not sent, one retried attempt,
no duplicate possible. 520 (the origin answered something Cloudflare could not read) and
524 (the origin took the request and sent no answer in time) follow a request the origin
had: it may have processed it — ambiguous.

Until 2026-12-07 Discord and Telegram read every 52x page of Cloudflare's as a gateway
error that may have posted: on an at-most-once route (``on_ambiguous = "fail"``, the
default) the work ended ``delivery_unknown``, blocked on the route for good, though
Cloudflare said the origin was never reached; and the webhook route read 520 and 524 as
a 5xx of the receiver's that processed nothing — never remembered as possibly delivered,
so attempts that ran out offered the work to the next job under another ``webhook-id``.

Cloudflare's answer is known by its headers (``Server: cloudflare``, ``CF-RAY``); the
same status without them is not Cloudflare's word and keeps each route's reading.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from curaflow.domain.reasons import Owner, TerminalReason
from curaflow.domain.verdicts import delivery_verdict
from curaflow.routes.base import cloudflares_answer
from tests.unit.test_route_answers import discord, failure, telegram, webhook

NOT_REACHED = [521, 522, 523, 525, 526]
MAY_HAVE_PROCESSED = [520, 524]
#: The headers Cloudflare puts on its own pages, alone or together.
CLOUDFLARE_HEADERS = {
    "server": {"server": "cloudflare"},
    "server-case": {"server": " CloudFlare "},
    "cf-ray": {"cf-ray": "8a1b2c3d4e5f6071-LAX"},
    "both": {"server": "cloudflare", "cf-ray": "8a1b2c3d4e5f6071-FRA"},
}
ROUTES = [discord, telegram, webhook]
ROUTE_IDS = ["discord", "telegram", "webhook"]


def cloudflare_page(status: int, headers: dict[str, str]) -> Callable[[httpx.Request], httpx.Response]:
    page = f"<html><head><title>hook.test | {status}: Cloudflare</title></head><body>Error {status}</body></html>"
    return lambda _r: httpx.Response(status, text=page, headers={"content-type": "text/html", **headers})


def at_most_once(route_of: Any) -> bool:
    return route_of is not webhook


@pytest.mark.parametrize("headers", list(CLOUDFLARE_HEADERS))
@pytest.mark.parametrize("status", NOT_REACHED)
@pytest.mark.parametrize("route_of", ROUTES, ids=ROUTE_IDS)
async def test_cloudflare_saying_the_origin_was_never_reached_is_one_attempt_not_sent(
    tmp_path: Path, route_of: Any, status: int, headers: str
) -> None:
    err = await failure(route_of, cloudflare_page(status, CLOUDFLARE_HEADERS[headers]), tmp_path)
    assert not err.ambiguous and not err.permanent and not err.rate_limited, str(err)
    assert err.reason in (TerminalReason.DELIVERY_FAILED, TerminalReason.TELEGRAM_FAILED), err.reason
    assert err.answer is None, "Cloudflare's word about the origin is no answer of the receiver's"
    assert "cloudflare" in str(err).lower() and str(status) in str(err)
    verdict = delivery_verdict(
        reason=err.reason,
        permanent=err.permanent,
        ambiguous=err.ambiguous,
        resend_safe=not at_most_once(route_of),
        attempt=1,
        max_attempts=5,
    )
    assert not verdict.final and not verdict.unknown and verdict.owner == Owner.ROUTE, verdict


@pytest.mark.parametrize("status", MAY_HAVE_PROCESSED)
@pytest.mark.parametrize("route_of", ROUTES, ids=ROUTE_IDS)
async def test_cloudflare_saying_the_origin_had_the_request_may_have_delivered(
    tmp_path: Path, route_of: Any, status: int
) -> None:
    err = await failure(route_of, cloudflare_page(status, CLOUDFLARE_HEADERS["both"]), tmp_path)
    assert err.ambiguous and not err.permanent, str(err)
    assert err.answer is not None and str(status) in err.answer  # counted in an at-most-once route's streak


@pytest.mark.parametrize("headers", [{}, {"server": "nginx"}, {"server": "cloudflare-like"}, {"cf-ray": ""}])
@pytest.mark.parametrize("status", NOT_REACHED)
@pytest.mark.parametrize("route_of", [discord, telegram], ids=["discord", "telegram"])
async def test_the_same_status_not_from_cloudflare_keeps_the_routes_reading(
    tmp_path: Path, route_of: Any, status: int, headers: dict[str, str]
) -> None:
    # A 52x no header says is Cloudflare's (a proxy's, an origin's own): a 5xx that is not
    # the platform's, which may follow a post — as before.
    err = await failure(route_of, cloudflare_page(status, headers), tmp_path)
    assert err.ambiguous and not err.permanent, str(err)


@pytest.mark.parametrize("route_of", ROUTES, ids=ROUTE_IDS)
async def test_other_statuses_cloudflare_carries_keep_the_routes_reading(tmp_path: Path, route_of: Any) -> None:
    # discord.com answers everything through Cloudflare: its own headers on a 502 or a 503
    # say nothing of whether the origin was reached.
    err = await failure(route_of, cloudflare_page(502, CLOUDFLARE_HEADERS["both"]), tmp_path)
    assert err.ambiguous, str(err)


@pytest.mark.parametrize(
    ("headers", "said"),
    [
        ({"server": "cloudflare"}, True),
        ({"Server": "CLOUDFLARE"}, True),
        ({"server": "cloudflare-nginx"}, True),
        ({"cf-ray": "8a1b2c3d4e5f6071-LAX"}, True),
        ({"server": "nginx", "cf-ray": "8a1b2c3d4e5f6071-LAX"}, True),
        ({}, False),
        ({"server": "nginx"}, False),
        ({"server": "not-cloudflare"}, False),
        ({"cf-ray": "  "}, False),
        ({"cf-cache-status": "DYNAMIC"}, False),
    ],
)
def test_cloudflares_answer_is_known_by_its_headers(headers: dict[str, str], said: bool) -> None:
    assert cloudflares_answer(httpx.Headers(headers)) is said

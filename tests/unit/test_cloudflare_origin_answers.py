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

Cloudflare's own 1xxx errors (its docs, "Cloudflare 1xxx errors": "HTTP errors such as
409, 530, 403, and 429 are returned in the HTTP status header of a response, while 1XXX
errors appear in the HTML body") are Cloudflare's answers, never the receiver's: ``530``
(Cloudflare "is unable to resolve the origin hostname, preventing it from establishing a
connection to the origin server": 1016 Origin DNS error, 1033 a tunnel not connected) and
a ``409`` stating a 1xxx code (Cloudflare "will return a 409 response for Error 1001: DNS
Resolution Error") say the request never reached the receiver — until 2026-12-07 the
first was a gateway error on Telegram and Discord (the work ``delivery_unknown`` for good)
and the second a *duplicate* on the webhook route: the work recorded delivered, never
sent. A 1xxx page under 403 (1020 access denied, 1006–1010 banned) and Cloudflare's
challenge page (``cf-mitigated: challenge``) under a 4xx are Cloudflare's own refusal:
nothing sent, and the same request meets the same rule again — the route's refusal
(``route_refused``: the work held back, the route's streak pauses it), never the work's
(a callback push, with no route to pause, retries it: ``test_push_answers``). Its
challenge page under a 5xx is one retried attempt, not sent (until 2026-12-07 ambiguous on
Discord's 503). Under 429 (1015 rate limited) it is the route's rate limit, never the work's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from curaflow.domain.reasons import Owner, TerminalReason
from curaflow.domain.verdicts import delivery_verdict, owner_of
from curaflow.routes.base import RouteError, cloudflare_code, cloudflares_answer
from tests.unit.test_route_answers import discord, failure, request_of, telegram, webhook

NOT_REACHED = [521, 522, 523, 525, 526, 530]
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


# ---- Cloudflare's own 1xxx errors ------------------------------------------------------------------

CF = {"server": "cloudflare", "cf-ray": "8a1b2c3d4e5f6071-LAX"}


def cloudflare_1xxx(status: int, code: int, form: str, headers: dict[str, str] | None = None) -> Any:
    """Cloudflare's own 1xxx error as it answers it: plain text to a client that does not
    ask for HTML (``error code: 1016``), or its HTML page (the code in ``cf-error-code``)."""
    if form == "text":
        body, kind = f"error code: {code}", "text/plain; charset=UTF-8"
    else:
        body = (
            "<!DOCTYPE html><html><head><title>Error | hook.test | Cloudflare</title></head><body>"
            '<div id="cf-error-details"><h1><span class="cf-error-type" data-translate="error">Error</span>'
            f'<span class="cf-error-code">{code}</span><small class="heading-ray-id">Ray ID: 8a1b2c3d4e5f6071</small>'
            "</h1></div></body></html>"
        )
        kind = "text/html; charset=UTF-8"
    chosen = CF if headers is None else headers
    return lambda _r: httpx.Response(status, text=body, headers={"content-type": kind, **chosen})


@pytest.mark.parametrize("form", ["text", "html"])
@pytest.mark.parametrize(("status", "code"), [(530, 1016), (530, 1033), (409, 1001), (409, 1014)])
@pytest.mark.parametrize("route_of", ROUTES, ids=ROUTE_IDS)
async def test_cloudflare_unable_to_reach_the_origin_is_never_the_receivers_answer(
    tmp_path: Path, route_of: Any, status: int, code: int, form: str
) -> None:
    # Not sent, one retried attempt: never a duplicate (the webhook's 409: until 2026-12-07
    # the work recorded delivered with nothing sent), never a possible post (Telegram's and
    # Discord's 530: until 2026-12-07 `delivery_unknown` for good), never refused.
    async with httpx.AsyncClient(transport=httpx.MockTransport(cloudflare_1xxx(status, code, form))) as http:
        try:
            receipt = await route_of(http).deliver(request_of(tmp_path))
        except RouteError as caught:
            err = caught
        else:
            pytest.fail(f"Cloudflare's {status} / {code} was taken for a delivery: {receipt}")
    assert not err.ambiguous and not err.permanent and not err.rate_limited, str(err)
    assert err.reason in (TerminalReason.DELIVERY_FAILED, TerminalReason.TELEGRAM_FAILED), err.reason
    assert err.answer is None, "Cloudflare's word about the origin is no answer of the receiver's"
    assert "cloudflare" in str(err).lower() and str(code) in str(err), str(err)


async def test_the_receivers_own_409_behind_cloudflare_is_still_a_duplicate(tmp_path: Path) -> None:
    # Every answer through Cloudflare carries its headers: only a body stating Cloudflare's
    # own 1xxx code makes a 409 Cloudflare's.
    for body in ({"json": {"error": "duplicate"}}, {"text": "already have it: error code 1001 of ours"}, {}):
        answer = lambda _r, body=body: httpx.Response(409, headers=CF, **body)  # noqa: E731
        async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
            receipt = await webhook(http).deliver(request_of(tmp_path))
        assert receipt.duplicate, body


async def test_a_1xxx_page_without_cloudflares_headers_keeps_the_routes_reading(tmp_path: Path) -> None:
    # The same words from a server no header says is Cloudflare's: the webhook's 409 is
    # its receiver's duplicate, as its contract says.
    async with httpx.AsyncClient(transport=httpx.MockTransport(cloudflare_1xxx(409, 1001, "text", {}))) as http:
        receipt = await webhook(http).deliver(request_of(tmp_path))
    assert receipt.duplicate


def refused_by_cloudflare(err: RouteError) -> None:
    """``err`` is Cloudflare's own refusal in front of the receiver: the route's, permanent, never ambiguous."""
    assert err.reason == TerminalReason.ROUTE_REFUSED and owner_of(err.reason) == Owner.ROUTE, (err.reason, str(err))
    assert err.permanent and not err.ambiguous and not err.rate_limited, str(err)
    assert "cloudflare" in str(err).lower(), str(err)


def not_sent(err: RouteError) -> None:
    """``err`` is one attempt that sent nothing: retried, not ambiguous, no answer of the receiver's."""
    assert not err.ambiguous and not err.permanent and not err.rate_limited, str(err)
    assert err.reason in (TerminalReason.DELIVERY_FAILED, TerminalReason.TELEGRAM_FAILED), err.reason
    assert owner_of(err.reason) == Owner.ROUTE
    assert err.answer is None, "Cloudflare's word in front of the receiver is no answer of the receiver's"
    assert "cloudflare" in str(err).lower(), str(err)


@pytest.mark.parametrize("form", ["text", "html"])
@pytest.mark.parametrize("code", [1006, 1009, 1010, 1012, 1020])
@pytest.mark.parametrize("route_of", ROUTES, ids=ROUTE_IDS)
async def test_cloudflare_denying_access_is_the_routes_refusal_never_the_works(
    tmp_path: Path, route_of: Any, code: int, form: str
) -> None:
    # Cloudflare's edge blocked the request (a firewall rule, a banned address or
    # signature): nothing was sent, and sending it again meets the same rule — the route's
    # refusal (the work held back, the route's streak pauses it and pages), its code named.
    err = await failure(route_of, cloudflare_1xxx(403, code, form), tmp_path)
    refused_by_cloudflare(err)
    assert str(code) in str(err) and err.answer is not None, (str(err), err.answer)


CHALLENGE = "<!DOCTYPE html><html><head><title>Just a moment...</title></head><body></body></html>"


@pytest.mark.parametrize("status", [403, 503, 400])
@pytest.mark.parametrize("route_of", ROUTES, ids=ROUTE_IDS)
async def test_cloudflares_challenge_page_is_never_the_receivers_answer(
    tmp_path: Path, route_of: Any, status: int
) -> None:
    # Cloudflare's challenge page (`cf-mitigated: challenge`, Cloudflare's docs "Detect a
    # Challenge Page response": set on every challenge page) stands in the receiver's place:
    # under a 4xx the route's refusal (the same rule meets the request again), under a 5xx
    # one attempt not sent (until 2026-12-07 ambiguous on Discord's 503).
    headers = {"content-type": "text/html", "cf-mitigated": "challenge", **CF}
    err = await failure(route_of, lambda _r: httpx.Response(status, text=CHALLENGE, headers=headers), tmp_path)
    if status < 500:
        refused_by_cloudflare(err)
    else:
        not_sent(err)
    assert "challenge" in str(err), str(err)


@pytest.mark.parametrize(
    "answer",
    [
        {"text": '{"error": "forbidden"}', "headers": {"content-type": "application/json", **CF}},
        {"text": "error code: 1020", "headers": {"content-type": "text/plain"}},  # no header of Cloudflare's
        {"text": CHALLENGE, "headers": {"content-type": "text/html", "cf-mitigated": "challenge"}},
        {"text": "{}", "headers": {"content-type": "application/json", "cf-mitigated": "block", **CF}},
    ],
)
async def test_the_receivers_own_403_keeps_the_routes_reading(tmp_path: Path, answer: dict[str, Any]) -> None:
    err = await failure(webhook, lambda _r: httpx.Response(403, **answer), tmp_path)
    assert err.reason == TerminalReason.ROUTE_REFUSED and err.permanent, (err.reason, str(err))


@pytest.mark.parametrize("form", ["text", "html"])
@pytest.mark.parametrize("route_of", ROUTES, ids=ROUTE_IDS)
async def test_cloudflares_rate_limit_holds_the_whole_route_never_the_work(
    tmp_path: Path, route_of: Any, form: str
) -> None:
    err = await failure(route_of, cloudflare_1xxx(429, 1015, form), tmp_path)
    assert err.rate_limited and err.route_wide and not err.permanent and not err.ambiguous, str(err)
    assert owner_of(err.reason) == Owner.ROUTE


async def test_discords_own_block_in_json_is_the_routes(tmp_path: Path) -> None:
    # Discord answers a request its Cloudflare blocks in its own JSON shape
    # (discord-api-docs #6473: `{"message": "internal network error", "code": 40333}`):
    # a code no list of the work's holds — the route's, whatever the status.
    body = {"message": "internal network error", "code": 40333}
    for status in (400, 403):
        err = await failure(discord, lambda _r, s=status: httpx.Response(s, json=body, headers=CF), tmp_path)
        assert err.reason == TerminalReason.ROUTE_REFUSED, (status, err.reason)


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ("error code: 1016", 1016),
        ("  error code: 1001\n", 1001),
        ("Error Code: 1020", 1020),
        ('<h1><span class="cf-error-code">1033</span></h1>', 1033),
        ('<span class="cf-error-code"> 1015 </span>', 1015),
        ("error code: 520", None),  # a 52x page's status, not a 1xxx
        ("error code: 10160", None),
        ("our error code: 1001, retry later", None),  # words inside another answer
        ('{"error": "error code: 1001"}', None),
        ("", None),
    ],
)
def test_cloudflares_1xxx_code_is_read_from_its_own_page_only(body: str, code: int | None) -> None:
    assert cloudflare_code(httpx.Response(409, text=body, headers=CF)) == code
    assert cloudflare_code(httpx.Response(409, text=body)) is None  # no header says it is Cloudflare's

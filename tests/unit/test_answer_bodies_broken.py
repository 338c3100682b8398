"""A receiver's status line came, then its body broke: the status is the answer.

Probes of the delivery side's defaults (DESIGN.md "Safe defaults at the edges: the delivery
side") on a real socket (:mod:`tests.fakes.hostile`): the status and headers of an answer
arrived, then its body could not be read whole — cut before its ``Content-Length``, a
``Content-Encoding`` its bytes are not or that curaflow does not decode, a body trickled
past the route's own time limit.
A refusal status (3xx, 4xx, 429) so answered is that refusal, read as an answer that is not
the platform's JSON: the route's, or a rate limit with its ``Retry-After``. It was taken for
a send whose outcome is unknown, which on an at-most-once route (Telegram's and Discord's
default) ends the work ``delivery_unknown``, blocked on the route for good, though the
receiver said it refused the request. A 2xx so answered may still have posted: ambiguous,
as before.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from curaflow.domain.reasons import TerminalReason
from curaflow.routes import DiscordRouteConfig, TelegramRouteConfig
from curaflow.routes.base import RouteError
from curaflow.routes.discord import DiscordRoute
from curaflow.routes.telegram import TelegramRoute
from curaflow.routes.webhook import WebhookRoute
from tests.fakes.hostile import Behaviour, HostileParty
from tests.support import whsec
from tests.unit.test_route_answers import request_of
from tests.unit.test_unknown_is_cheap_at_routes import verdict_of

#: The routes' own time limit: an endless body is cut at it, so the endless cases wait it out.
TIMEOUT_MS = 500
#: The limit of the cases whose answer ends by itself: only a loaded machine's stall could
#: reach it (at 500 ms one did: a cut answer read as "not sent", ``TimeLimitBeforeSending``).
SLACK_MS = 10_000


@pytest.fixture(autouse=True)
def _time_limit(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The routes' time limit by the case: :data:`TIMEOUT_MS` for an endless body (its
    verdict is the limit's), :data:`SLACK_MS` for every answer that ends by itself."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is None or callspec.params.get("how") != "endless":
        monkeypatch.setattr(f"{__name__}.TIMEOUT_MS", SLACK_MS)


def telegram(party: HostileParty) -> TelegramRoute:
    config = TelegramRouteConfig(bot_token=SecretStr("1:x"), chat_id="-100", api_url=party.url, timeout_ms=TIMEOUT_MS)
    return TelegramRoute("tg", config, httpx.AsyncClient())


def discord(party: HostileParty) -> DiscordRoute:
    config = DiscordRouteConfig(url=SecretStr(party.url + "/api/webhooks/1/x"), timeout_ms=TIMEOUT_MS)
    return DiscordRoute("dc", config, httpx.AsyncClient())


def webhook(party: HostileParty) -> WebhookRoute:
    return WebhookRoute("hook", party.url + "/hook", whsec(), httpx.AsyncClient(), timeout_s=TIMEOUT_MS / 1000)


ROUTES = [telegram, discord, webhook]
TG_REFUSAL = json.dumps({"ok": False, "error_code": 400, "description": "Bad Request: chat not found"}).encode()
DC_REFUSAL = b'{"message": "Unknown Webhook", "code": 10015}'


def broken(
    how: str,
    status: int,
    body: bytes,
    headers: tuple[tuple[str, str], ...] = (),
    content_type: str = "application/json",
) -> Behaviour:
    """An answer of ``status`` whose body breaks ``how``, labelled ``content_type``."""
    if how == "cut":  # closed before its Content-Length
        return Behaviour("cut_body", status=status, body=body, headers=headers, content_type=content_type)
    if how == "encoding":  # a Content-Encoding its bytes are not
        coded = (("content-encoding", "gzip"), *headers)
        return Behaviour(status=status, body=body, headers=coded, content_type=content_type)
    if how == "unknown_encoding":  # a Content-Encoding curaflow does not decode (curaflow.outbound.decoding)
        coded = (("content-encoding", "br"), *headers)
        return Behaviour(status=status, body=body, headers=coded, content_type=content_type)
    assert how == "endless"  # trickled past the route's own time limit
    return Behaviour(
        "trickle_body", status=status, body=b" ", chunk=1, interval_s=0.05, headers=headers, content_type=content_type
    )


async def failure(route_of: Callable[[HostileParty], Any], party: HostileParty, tmp_path: Path) -> RouteError:
    route = route_of(party)
    with pytest.raises(RouteError) as caught:
        await route.deliver(request_of(tmp_path))
    return caught.value


HOW = ["cut", "encoding", "unknown_encoding", "endless"]


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("route_of", ROUTES, ids=["telegram", "discord", "webhook"])
@pytest.mark.parametrize("status", [400, 403, 404, 302])
async def test_a_refusal_whose_body_breaks_is_the_routes_not_an_unknown_outcome(
    party: HostileParty, tmp_path: Path, route_of: Callable[[HostileParty], Any], status: int, how: str
) -> None:
    party.default = broken(how, status, TG_REFUSAL if route_of is telegram else DC_REFUSAL)
    err = await failure(route_of, party, tmp_path)
    assert not err.ambiguous, str(err)
    assert err.reason == TerminalReason.ROUTE_REFUSED and err.permanent, (err.reason, str(err))
    verdict = verdict_of(err, resend_safe=route_of is webhook)
    assert not verdict.unknown and not verdict.remember_refusal and verdict.hold  # the work held, never blocked


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("route_of", ROUTES, ids=["telegram", "discord", "webhook"])
async def test_a_rate_limit_whose_body_breaks_keeps_its_retry_after(
    party: HostileParty, tmp_path: Path, route_of: Callable[[HostileParty], Any], how: str
) -> None:
    party.default = broken(how, 429, b'{"retry_after": 1}', headers=(("retry-after", "30"),))
    err = await failure(route_of, party, tmp_path)
    assert err.rate_limited and not err.ambiguous and not err.permanent, str(err)
    assert err.retry_after_s == 30


@pytest.mark.parametrize("how", HOW)
async def test_a_webhook_duplicate_whose_body_breaks_is_a_duplicate(
    party: HostileParty, tmp_path: Path, how: str
) -> None:
    party.default = broken(how, 409, b'{"status": "duplicate"}')
    receipt = await webhook(party).deliver(request_of(tmp_path))
    assert receipt.duplicate


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("route_of", ROUTES, ids=["telegram", "discord", "webhook"])
async def test_an_acceptance_whose_body_breaks_may_have_posted(
    party: HostileParty, tmp_path: Path, route_of: Callable[[HostileParty], Any], how: str
) -> None:
    # Guard: a 2xx whose body breaks is still an unknown outcome (Telegram's and Discord's
    # answer is what says what was posted; a webhook's body may say rejected or pending).
    party.default = broken(how, 200, b'{"ok": true, "result": {"message_id": 5}, "id": "5"}')
    err = await failure(route_of, party, tmp_path)
    assert err.ambiguous, str(err)


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("label", ["text/plain", "text/html; charset=utf-8", ""], ids=["text", "html", "unlabelled"])
@pytest.mark.parametrize("status", [200, 202])
async def test_a_webhook_acceptance_whose_body_says_no_word_is_a_delivery_though_it_breaks(
    party: HostileParty, tmp_path: Path, how: str, label: str, status: int
) -> None:
    """A webhook receiver's 2xx whose body is not labelled JSON says no word (the receiver
    contract: such a body plays no part, :meth:`WebhookRoute._business_status`): its status
    line is the whole answer, a delivery, whatever its body then does. Until 2026-12-07 the
    body's breaking (cut, a coding it is not or curaflow does not decode, trickled past the
    time limit) made it an unknown outcome: retried under the same ``webhook-id``, answered
    alike, and once the attempts ran out the intent ``unknown`` — the work held on the route
    for good and counted toward its pause, though the receiver said 2xx every time."""
    party.default = broken(how, status, b"OK, received", content_type=label)
    receipt = await webhook(party).deliver(request_of(tmp_path))
    assert not receipt.duplicate and receipt.remote_status == str(status)


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("route_of", [telegram, discord], ids=["telegram", "discord"])
async def test_an_acceptance_whose_body_breaks_is_an_answer_the_route_counts(
    party: HostileParty, tmp_path: Path, route_of: Callable[[HostileParty], Any], how: str
) -> None:
    """The receiver answered — its 2xx status line and headers came — and the body broke.
    On an at-most-once route the work ends ``delivery_unknown``, blocked there for good,
    as for a proxy's page under a 200; such an answer is counted in the route's streak so a
    receiver answering every send so pauses the route instead of blocking one more work
    with every job, unpaged (DESIGN.md, the refusal streak). Until 2026-12-07 it carried no
    answer — taken for no answer at all, never counted — while the same 5xx counted."""
    party.default = broken(how, 200, b'{"ok": true, "result": {"message_id": 5}, "id": "5"}')
    first = await failure(route_of, party, tmp_path)
    again = await failure(route_of, party, tmp_path)
    assert first.ambiguous and verdict_of(first, resend_safe=False).unknown, str(first)
    assert first.answer is not None and first.answer.startswith("http 200 "), first.answer
    assert first.answer == again.answer  # one answer, however often it comes


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("route_of", [telegram, discord], ids=["telegram", "discord"])
async def test_a_server_error_whose_body_breaks_may_have_posted(
    party: HostileParty, tmp_path: Path, route_of: Callable[[HostileParty], Any], how: str
) -> None:
    # Guard: a 5xx that is not the platform's JSON is a gateway's: ambiguous, as before.
    party.default = broken(how, 500, b'{"ok": false, "error_code": 500, "description": "Internal"}')
    err = await failure(route_of, party, tmp_path)
    assert err.ambiguous, str(err)


@pytest.mark.parametrize("route_of", ROUTES, ids=["telegram", "discord", "webhook"])
async def test_cloudflares_origin_never_reached_whose_body_breaks_is_not_sent(
    party: HostileParty, tmp_path: Path, route_of: Callable[[HostileParty], Any]
) -> None:
    # Cloudflare's 522 page cut short: its status and headers came, and they say the
    # origin was never reached (curaflow.routes.base.cloudflare_error) — one attempt, not
    # sent, on an at-most-once route too (until 2026-12-07: a gateway error, the work
    # `delivery_unknown` on Telegram and Discord).
    page = b"<html><head><title>522: Connection timed out</title></head><body>cloudflare</body></html>"
    headers = (("server", "cloudflare"), ("cf-ray", "8a1b2c3d4e5f6071-LAX"), ("content-type", "text/html"))
    party.default = broken("cut", 522, page, headers=headers)
    err = await failure(route_of, party, tmp_path)
    assert not err.ambiguous and not err.permanent and "Cloudflare" in str(err), str(err)
    verdict = verdict_of(err, resend_safe=route_of is webhook)
    assert not verdict.final and not verdict.unknown


@pytest.mark.parametrize("label", ["br", "x-unheard-of"])
async def test_a_204_labelled_with_a_coding_curaflow_does_not_decode_is_read_as_a_204(
    party: HostileParty, tmp_path: Path, label: str
) -> None:
    # A 204 has no body (RFC 9110 §15.3.5): nothing to decode, nothing unread. Its
    # Content-Encoding (a proxy's in front of the receiver) is no failure to read it: the
    # webhook's 204 is a delivery; Discord's is what any 204 is there (the route asks
    # wait=true: a 2xx without the created message, ambiguous), never a broken answer.
    party.default = Behaviour(status=204, body=b"", headers=(("content-encoding", label),))
    receipt = await webhook(party).deliver(request_of(tmp_path))
    assert not receipt.duplicate
    err = await failure(discord, party, tmp_path)
    assert err.ambiguous and "without the created message" in str(err), str(err)

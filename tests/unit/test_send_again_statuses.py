"""HTTP's own "send it again" statuses are one attempt on every route and every push, never
a refusal (DESIGN.md "Safe defaults at the edges": the unknown is cheap).

``408 Request Timeout`` (RFC 9110 §15.5.9: the server — often a proxy in front of the
receiver — closed the connection before it received the whole request), ``421 Misdirected
Request`` (RFC 9110 §15.5.20: the connection reached a server that does not serve the
URL's origin; the client may send the request again, idempotent or not, over a different
connection) and ``425 Too Early`` (RFC 8470 §5.2: the server will not risk processing a
request that might be replayed) each say the request was not processed and may be
repeated. Until 2026-12-06 every route read 408 and 425 as ``route_refused``: the cell
failed unretried, the work was held back from the route for an hour, and three works
meeting a proxy's idle timeout in a row paused the route; until 2026-12-07 421 was so
read, and a job's push answered 421 was dead-lettered at once — and the connection that
answered it stayed in the pool, so a retry would have met the same server again.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import httpx
import pytest
from temporalio.testing import ActivityEnvironment

from curaflow.domain.reasons import TerminalReason
from curaflow.jobs.pushes import Verdict, classify_answer
from curaflow.outbound import Limits, Outbound
from curaflow.outbound.destinations import data, parse_networks
from curaflow.routes import discord, telegram, webhook
from curaflow.routes.base import SEND_AGAIN_STATUSES
from tests.unit import test_route_answers as answers
from tests.unit.test_push_answers import claimed, pusher


@pytest.mark.parametrize("status", [408, 421, 425])
def test_a_push_s_send_again_is_retried_not_dead_lettered(status: int) -> None:
    assert classify_answer(status) == Verdict.RETRY


def test_the_statuses_are_http_s_own() -> None:
    assert frozenset({408, 421, 425}) == SEND_AGAIN_STATUSES


@pytest.mark.parametrize("status", [408, 421, 425])
def test_a_webhook_receiver_s_send_again_is_retried(status: int) -> None:
    err = webhook.classify(status, None)
    assert err.reason == TerminalReason.DELIVERY_FAILED
    assert not err.permanent and not err.ambiguous and not err.rate_limited
    assert err.answer is None  # not a refusal: counts toward no route pause


@pytest.mark.parametrize("status", [408, 421, 425])
@pytest.mark.parametrize("body", [None, {"code": 0, "message": "Request Timeout"}])
def test_a_discord_send_again_is_retried(status: int, body: object) -> None:
    err = discord.classify(status, body, None)
    assert err.reason == TerminalReason.DELIVERY_FAILED
    assert not err.permanent and not err.ambiguous and not err.rate_limited
    assert err.answer is None


@pytest.mark.parametrize("status", [408, 421, 425])
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


@pytest.mark.parametrize("status", [408, 421, 425])
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


class KeptAlive:
    """A receiver on 127.0.0.1 that keeps its connections open (HTTP/1.1 keep-alive) and
    answers each request by the next status of ``statuses``; ``served`` records, per
    request, the number of the connection it came on."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses
        self.served: list[int] = []
        self._connections = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections += 1
        number = self._connections
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(v)
                        for k, _, v in (ln.partition(b":") for ln in head.split(b"\r\n"))
                        if k.lower() == b"content-length"
                    ),
                    0,
                )
                await reader.readexactly(length)
                self.served.append(number)
                body = b"Misdirected"
                status = self.statuses.pop(0) if self.statuses else 200
                writer.write(b"HTTP/1.1 %d X\r\ncontent-length: %d\r\n\r\n%s" % (status, len(body), body))
                await writer.drain()
        writer.close()


@pytest.mark.parametrize("via", ["outbound", "push"])
async def test_the_connection_that_answered_421_is_never_used_again(via: str) -> None:
    # RFC 9110 §15.5.20: a 421 is sent again "over a different connection". The receiver
    # keeps its connections alive and answers 421, then 200: the request sent again after
    # the 421 comes over a new connection, through a route's exchange (Outbound.send) and
    # through a push's send alike; the 200's connection is kept for the next request.
    receiver = KeptAlive([421])
    url = await receiver.start()
    try:
        if via == "outbound":
            client = Outbound(data(["127.0.0.1:*"], parse_networks(["127.0.0.0/8"])))
            try:
                statuses = [
                    (await client.request("POST", url + "/x", limits=Limits(time_s=5))).status_code for _ in range(3)
                ]
            finally:
                await client.aclose()
        else:
            activity = pusher()
            try:
                statuses = [
                    (await ActivityEnvironment().run(activity._send, claimed(url + "/cb"), 5.0)).status
                    for _ in range(3)
                ]
            finally:
                await activity.deps.client_for("pushes").aclose()
    finally:
        await receiver.stop()
    assert statuses == [421, 200, 200]
    assert receiver.served == [1, 2, 2]

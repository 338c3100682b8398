"""A slow or hostile third party costs only its own attempt (curaflow.outbound).

Route, source and image-host cases run the production clients against a hostile party
on 127.0.0.1 (tests/fakes/hostile.py: trickling, endless, huge, silent); job-level cases
run real Temporal, real PostgreSQL and real worker processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
from PIL import Image
from pydantic import SecretStr

from curaflow.artifacts import ArtifactStore, describe
from curaflow.domain.models import Artifact, Work, WorkPage
from curaflow.domain.reasons import TerminalReason
from curaflow.domain.tally import Tally
from curaflow.routes import DiscordRouteConfig, TelegramRouteConfig
from curaflow.routes.base import RouteError
from curaflow.routes.discord import DiscordRoute
from curaflow.routes.telegram import TelegramRoute
from curaflow.routes.webhook import WebhookRoute
from curaflow.sources.errors import SourceError, WorkUnavailable
from curaflow.sources.pixiv.client import PixivClient
from tests.conftest import StackFactory
from tests.fakes.hostile import Behaviour, HostileParty
from tests.fakes.webhook import WebhookReceiver
from tests.integration.test_delivery_jobs import routes_stack
from tests.integration.test_routes import make_request
from tests.jobs_support import ReplayServer, intents, ordered, webhook_route
from tests.support import eventually, short_id, terminal_job, whsec

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MiB = 1024 * 1024
TOKEN = b'{"access_token": "a", "refresh_token": "r", "expires_in": 3600}'


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=httpx.Timeout(1.0)) as client:
        yield client


async def all_closed(party: HostileParty, within_s: float = 3.0) -> None:
    await eventually(
        lambda: _closed(party), timeout_s=within_s, interval_s=0.05, what="every connection of the party closed"
    )


async def _closed(party: HostileParty) -> bool | None:
    return True if party.connections and all(c.closed is not None for c in party.connections) else None


def source(party: HostileParty, http: httpx.AsyncClient, **kw: Any) -> PixivClient:
    return PixivClient(http, refresh_token="r", api_url=party.url, auth_url=party.url, image_host=party.url, **kw)


def work_with(url: str) -> Work:
    return Work(
        work_id="4242", title="t", url="https://www.pixiv.net/artworks/4242", pages=[WorkPage(index=0, url=url)]
    )


CANONICAL = "https://i.pximg.net/img-original/img/2025/02/01/00/00/00/4242_p0.jpg"


# ---- routes: total time, answers read to a few KiB ---------------------------------------


async def test_a_webhook_body_trickled_after_200_is_cut_by_the_route_timeout(
    party: HostileParty, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    # 200 at once, then the body a KiB at a time, every 0.2 s, for ever: httpx's read
    # timeout never trips; the route's timeout is the total time of the request. 3 s: the
    # request is out well within it on a busy machine (a 1 s route of test_routes.py once
    # ended TimeLimitBeforeSending there: not sent, so not ambiguous).
    party.default = Behaviour("trickle_body", chunk=1024, interval_s=0.2)
    route = WebhookRoute("hook", party.url + "/hook", whsec(), http, timeout_s=3.0)
    started = time.monotonic()
    with pytest.raises(RouteError) as caught:
        await asyncio.wait_for(route.deliver(make_request(tmp_path, [(64, 64)])), 20)
    assert time.monotonic() - started < 8  # the route's 3 s, not the trickle's for ever
    assert caught.value.ambiguous and not caught.value.permanent  # the request was out: may have landed
    await all_closed(party)


@pytest.mark.parametrize(
    "answer",
    [
        b'{"id": {"x": 1}}',
        b'{"id": ["a"]}',
        b'{"id": true}',
        b'{"id": "\\ud800"}',
        b'{"remote_id": "a\\u0000b"}',
        b'{"id": "' + b"7" * 5000 + b'"}',
    ],
    ids=["object", "list", "boolean", "lone-surrogate", "nul", "huge"],
)
async def test_a_webhook_id_that_is_not_one_is_a_delivery_with_no_id(
    party: HostileParty, http: httpx.AsyncClient, tmp_path: Path, answer: bytes
) -> None:
    # A 2xx is the receiver's word that it has the work; an id of another shape is not
    # kept (text of a dict, 5 000 digits, or a lone surrogate the ledger refuses when the
    # receipt is recorded, after the delivery: a failure then, and a resend).
    party.default = Behaviour(body=answer)
    receipt = await _webhook(party, http).deliver(make_request(tmp_path, [(64, 64)]))
    assert receipt.remote_id is None and receipt.remote_status == "200"


DEEP = b"[" * 5000 + b"]" * 5000  # 10 KB, under the answers' read limit; deeper than json.loads recurses


async def test_a_2xx_nested_too_deep_to_parse_is_read_as_an_answer_not_a_crash(
    party: HostileParty, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    # RecursionError out of response.json() was curaflow's internal_error, permanent: for
    # the webhook a 2xx is the receiver's word that it has the work (delivered); for the
    # chat routes a 2xx they cannot read is their own ambiguous answer, as any unreadable one.
    party.default = Behaviour(body=b'{"ok": true, "result": ' + DEEP + b"}")
    receipt = await _webhook(party, http).deliver(make_request(tmp_path, [(64, 64)]))
    assert receipt.remote_status == "200" and receipt.remote_id is None
    for route in (_telegram(party, http), _discord(party, http)):
        with pytest.raises(RouteError) as caught:
            await route.deliver(make_request(tmp_path, [(64, 64)]))
        assert caught.value.ambiguous and caught.value.reason != TerminalReason.INTERNAL_ERROR, route


def _webhook(party: HostileParty, http: httpx.AsyncClient) -> Any:
    return WebhookRoute("hook", party.url + "/hook", whsec(), http, timeout_s=10)


def _telegram(party: HostileParty, http: httpx.AsyncClient) -> Any:
    config = TelegramRouteConfig(bot_token=SecretStr("1:x"), chat_id="-100", api_url=party.url, timeout_ms=10_000)
    return TelegramRoute("tg", config, http)


def _discord(party: HostileParty, http: httpx.AsyncClient) -> Any:
    return DiscordRoute(
        "dc", DiscordRouteConfig(url=SecretStr(party.url + "/api/webhooks/1/x"), timeout_ms=10_000), http
    )


@pytest.mark.parametrize("make_route", [_webhook, _telegram, _discord], ids=["webhook", "telegram", "discord"])
async def test_a_100_mb_receiver_answer_is_read_only_to_its_bound(
    party: HostileParty, http: httpx.AsyncClient, tmp_path: Path, make_route: Any
) -> None:
    party.default = Behaviour("huge", total=100 * MiB, length=True, body=b'{"ok": true, "result": "' + b"x" * 4000)
    route = make_route(party, http)
    try:
        await asyncio.wait_for(route.deliver(make_request(tmp_path, [(64, 64)])), 20)
    except RouteError as err:
        assert err.ambiguous  # an answer that cannot be read whole is not a confirmation
    await all_closed(party)
    assert party.connections[-1].written < 16 * MiB  # the rest was never read (nor held)


def noise_request(tmp_path: Path) -> Any:
    """A delivery of one page of about 8 MB (noise: PNG keeps it), more than the loopback
    sockets' buffers take before the party reads."""
    request = make_request(tmp_path, [(64, 64)])
    path = tmp_path / "4242_p0.png"
    Image.frombytes("RGB", (1700, 1650), os.urandom(1700 * 1650 * 3)).save(path, format="PNG", compress_level=0)
    request.artifact = Artifact(work_id="4242", files=[describe(path, 0)])
    return request


@pytest.mark.parametrize("make_route", [_webhook, _telegram, _discord], ids=["webhook", "telegram", "discord"])
async def test_a_receiver_resetting_the_connection_before_the_request_wholly_left_was_not_sent(
    party: HostileParty, http: httpx.AsyncClient, tmp_path: Path, make_route: Any
) -> None:
    # The receiver reads the headers and a KiB of the body, then resets the connection: it
    # never had the whole request, so it cannot have posted it. Until 2026-12-06 that was
    # an outcome unknown (ambiguous): on Telegram and Discord (on_ambiguous = "fail") the
    # work ended delivery_unknown, never sent again on the route, though nothing arrived.
    party.default = Behaviour("reset_while_sending", chunk=1024)
    request = noise_request(tmp_path)
    assert request.artifact.files[0].bytes > 6 * MiB
    with pytest.raises(RouteError) as caught:
        await asyncio.wait_for(make_route(party, http).deliver(request), 20)
    assert not caught.value.ambiguous and not caught.value.permanent, str(caught.value)  # retried, never unknown
    assert caught.value.answer is None  # no answer of the receiver's: nothing counted


# ---- the source: search pages bounded in time and size ----------------------------------


@pytest.mark.parametrize("length", [True, False], ids=["content-length", "close-delimited"])
async def test_a_50_mb_search_page_is_refused(party: HostileParty, http: httpx.AsyncClient, length: bool) -> None:
    party.paths = {
        "/auth/token": Behaviour(body=TOKEN),
        "/v1/search/illust": Behaviour("huge", total=50 * MiB, length=length, body=b'{"illusts": [], "x": "'),
    }
    with pytest.raises(SourceError) as caught:
        await asyncio.wait_for(source(party, http).search_illust("tag"), 20)
    # an answer never seen: one retried attempt (until 2026-12-07 the job ended at it)
    assert caught.value.reason == TerminalReason.REMOTE_HTTP_ERROR and caught.value.retryable
    assert "bytes" in str(caught.value)
    await all_closed(party)
    assert party.requests("/v1/search")[-1].written < 16 * MiB


async def test_a_trickling_search_page_is_cut_by_the_request_timeout(
    party: HostileParty, http: httpx.AsyncClient
) -> None:
    party.paths = {
        "/auth/token": Behaviour(body=TOKEN),
        "/v1/search/illust": Behaviour("trickle_body", chunk=1, interval_s=0.2, body=b" "),  # a byte every 0.2 s
    }
    started = time.monotonic()
    with pytest.raises(SourceError) as caught:
        await asyncio.wait_for(source(party, http, request_timeout_s=1.0).search_illust("tag"), 10)
    assert caught.value.reason == TerminalReason.NETWORK_ERROR and caught.value.retryable
    assert time.monotonic() - started < 3.0
    await all_closed(party)


@pytest.mark.parametrize("token", [None, 12345, "", "a b", "tok\nX-Injected: 1", ["a"], {"t": "a"}])
async def test_an_auth_answer_without_a_usable_access_token_is_retried_and_never_sent(
    party: HostileParty, http: httpx.AsyncClient, token: object
) -> None:
    # Pixiv would answer a request bearing "None" with an OAuth error, then the refresh
    # gives "None" again: `auth_failed`, the account's refresh token blamed for an answer
    # nobody recognised. An access token that is not one (text without whitespace or
    # controls) is the source's glitch: retried, and no request is made with it.
    body = json.dumps({"access_token": token, "refresh_token": "r", "expires_in": 3600}).encode()
    party.paths = {"/auth/token": Behaviour(body=body), "/v1/search/illust": Behaviour(body=b'{"illusts": []}')}
    with pytest.raises(SourceError) as caught:
        await asyncio.wait_for(source(party, http).search_illust("tag"), 10)
    assert caught.value.retryable and caught.value.reason != TerminalReason.AUTH_FAILED
    assert "access token" in str(caught.value)
    assert party.requests("/v1/search") == []


@pytest.mark.parametrize("rotated", [{"r": 1}, 12345, "", "a b", "r\n2", ["r2"]])
async def test_a_rotated_refresh_token_that_is_not_one_keeps_the_current(
    party: HostileParty, http: httpx.AsyncClient, rotated: object
) -> None:
    # Kept, the garbage would be sent at the next refresh: invalid_grant, `auth_failed`.
    body = json.dumps({"access_token": "a", "refresh_token": rotated, "expires_in": 3600}).encode()
    party.paths = {"/auth/token": Behaviour(body=body), "/v1/search/illust": Behaviour(body=b'{"illusts": []}')}
    client = source(party, http)
    await client.search_illust("tag")
    await client.authenticate(force=True)
    sent = [parse_qs(c.body.decode())["refresh_token"] for c in party.requests("/auth/token")]
    assert sent == [["r"], ["r"]]
    good = json.dumps({"access_token": "a", "refresh_token": "r2", "expires_in": 3600}).encode()
    party.paths["/auth/token"] = Behaviour(body=good)
    await client.authenticate(force=True)
    await client.authenticate(force=True)
    assert parse_qs(party.requests("/auth/token")[-1].body.decode())["refresh_token"] == ["r2"]  # a real one is adopted


@pytest.mark.parametrize("rotated", [{"r": 1}, 12345, "a b", "r\n2", ["r2"]])
async def test_a_login_answer_whose_refresh_token_is_not_one_stores_nothing(
    party: HostileParty, http: httpx.AsyncClient, tmp_path: Path, rotated: object
) -> None:
    # `curaflow pixiv refresh` stores the answer's refresh token for the account: stored,
    # "{'r': 1}" would replace a working token with one no refresh accepts.
    from curaflow.sources.pixiv.login import LoginError, refresh

    body = {"access_token": "a", "refresh_token": rotated, "expires_in": 3600, "user": {"id": "1", "name": "n"}}
    party.paths = {"/auth/token": Behaviour(body=json.dumps(body).encode())}
    with pytest.raises(LoginError) as caught:
        await refresh(http, "r", auth_url=party.url)
    assert caught.value.kind == "unexpected" and "nothing was stored" in caught.value.message
    body["refresh_token"] = "r2"
    party.paths = {"/auth/token": Behaviour(body=json.dumps(body).encode())}
    assert (await refresh(http, "r", auth_url=party.url)).refresh_token == "r2"


@pytest.mark.parametrize(
    "answer",
    [b'{"error": "Something new"}', b'{"error": {"message": "Temporarily unavailable"}}', b'{"error": {"x": 1}}'],
)
async def test_a_200_carrying_an_error_never_seen_is_retried_not_final(
    party: HostileParty, http: httpx.AsyncClient, answer: bytes
) -> None:
    # A 200 is no refusal Pixiv documents: with an error text curaflow does not recognise
    # it was a final remote_http_error, the job's search failed on its first answer.
    party.paths = {"/auth/token": Behaviour(body=TOKEN), "/v1/search/illust": Behaviour(body=answer)}
    with pytest.raises(SourceError) as caught:
        await asyncio.wait_for(source(party, http).search_illust("tag"), 10)
    assert caught.value.retryable and caught.value.reason == TerminalReason.REMOTE_HTTP_ERROR


async def test_odd_answers_of_the_app_api_are_the_sources_retried_failure_never_a_crash(
    party: HostileParty, http: httpx.AsyncClient
) -> None:
    # An illust detail without its illust raised KeyError; a JSON answer declaring a
    # charset that is no text codec raised out of response.text.
    party.paths = {"/auth/token": Behaviour(body=TOKEN), "/v1/illust/detail": Behaviour(body=b"{}")}
    with pytest.raises(SourceError) as caught:
        await asyncio.wait_for(source(party, http).illust_detail("4242"), 10)
    assert caught.value.retryable and "illust object" in str(caught.value)
    party.paths["/v1/search/illust"] = Behaviour(
        body=b'{"illusts": [], "next_url": null}', content_type="application/json; charset=rot13"
    )
    assert (await asyncio.wait_for(source(party, http).search_illust("tag"), 10))["illusts"] == []


# ---- the image host: time, bytes, destination, content ----------------------------------


async def test_a_trickling_jpeg_is_cut_by_the_download_time_limit(
    party: HostileParty, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    party.default = Behaviour("trickle_body", chunk=1, interval_s=0.2, body=b"\xff", content_type="image/jpeg")
    store = ArtifactStore(tmp_path)
    started = time.monotonic()
    with pytest.raises(SourceError) as caught:
        await asyncio.wait_for(
            store.fetch(source(party, http, download_timeout_s=1.0), work_with(CANONICAL), "j", "t"), 10
        )
    assert caught.value.reason == TerminalReason.DOWNLOAD_TIMEOUT
    assert time.monotonic() - started < 3.0
    assert list(store.folder("j", "t").iterdir()) == []
    await all_closed(party)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308, 304, 300])
async def test_an_image_host_answering_a_redirect_is_the_hosts_retried_failure_not_the_works(
    party: HostileParty, http: httpx.AsyncClient, tmp_path: Path, status: int
) -> None:
    # A 3xx (a maintenance page, a moved CDN) is documented nowhere as the work's: read
    # as `gone`, every work of the account was remembered unavailable while it lasted.
    party.default = Behaviour(status=status, body=b"", headers=(("location", "https://i.pximg.net/maintenance.html"),))
    with pytest.raises(SourceError) as caught:
        await asyncio.wait_for(ArtifactStore(tmp_path).fetch(source(party, http), work_with(CANONICAL), "j", "t"), 10)
    assert not isinstance(caught.value, WorkUnavailable)
    assert caught.value.retryable and caught.value.reason == TerminalReason.DOWNLOAD_FAILED
    assert f"HTTP {status}" in str(caught.value)


async def test_an_endless_image_stops_at_the_byte_limit(
    party: HostileParty, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    party.default = Behaviour("trickle_body", chunk=65536, interval_s=0.0, body=b"\xff", content_type="image/jpeg")
    store = ArtifactStore(tmp_path)
    with pytest.raises(WorkUnavailable, match="larger than"):
        await asyncio.wait_for(
            store.fetch(source(party, http, download_max_bytes=MiB), work_with(CANONICAL), "j", "t"), 20
        )
    assert list(store.folder("j", "t").iterdir()) == []  # nothing written to the store stays
    await all_closed(party)
    assert party.connections[-1].written < 8 * MiB


async def test_an_image_url_pointing_at_an_internal_host_is_never_fetched(
    party: HostileParty, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    internal = await HostileParty(default=Behaviour(body=b'{"internal": "status"}')).start()
    try:
        store = ArtifactStore(tmp_path)
        with pytest.raises(WorkUnavailable):
            await store.fetch(source(party, http), work_with(internal.url + "/internal/status.json"), "j", "t")
        assert internal.connections == [] and party.connections == []
    finally:
        await internal.stop()


async def test_a_page_that_is_not_an_image_is_never_complete(
    party: HostileParty, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    party.default = Behaviour(body=b'{"internal": "status"}')  # framed correctly, named .json
    store = ArtifactStore(tmp_path)
    with pytest.raises(WorkUnavailable, match="not an image"):
        await store.fetch(source(party, http), work_with(CANONICAL.replace(".jpg", ".json")), "j", "t")
    assert list(store.folder("j", "t").iterdir()) == []


# ---- jobs: the deadline and a cancel reach a send that is out ----------------------------


def party_stack(
    make_stack: StackFactory, replay: ReplayServer, party: HostileParty, timeout_ms: int, kind: str = "webhook"
) -> Any:
    hook = f"{kind}-{short_id()}"
    route: dict[str, Any]
    if kind == "telegram":  # no idempotency key: an unknown send is never re-sent (on_ambiguous = fail)
        route = {"kind": "telegram", "bot_token": "1:x", "chat_id": "-100", "api_url": party.url}
    else:
        route = {"kind": "webhook", "url": party.url + "/hook", "secret": whsec()}
    route["timeout_ms"] = timeout_ms
    return routes_stack(make_stack, replay, {hook: route}), hook


# A receiver trickling its body after a 200 ends its job expired by its deadline, every
# send cut at the route's timeout and reported unknown: the chaos suite's own check
# (bench/chaos/edges.py, case "receiver streams its 200 at 1 KiB/s"; tests/chaos).


@pytest.mark.parametrize("kind", ["webhook", "telegram"])
async def test_a_cancel_during_a_hanging_send_is_honoured_within_seconds(
    make_stack: StackFactory, replay: ReplayServer, party: HostileParty, kind: str
) -> None:
    party.default = Behaviour("hang")  # reads the request, never answers
    stack, hook = party_stack(make_stack, replay, party, 100_000, kind)
    await stack.start_worker()
    http = await stack.start_api()
    job_id = (await http.post("/jobs", json=stack.task(query={"tags": ["オリジナル"]}))).json()["job"]["job_id"]
    await eventually(lambda: _sent(party), timeout_s=30, interval_s=0.05, what="the send is out")

    started = time.monotonic()
    await http.post(f"/jobs/{job_id}/cancel")
    job = await terminal_job(http, job_id, timeout_s=30)
    took = time.monotonic() - started
    assert job["status"] == "cancelled", job  # cut by the cancel: cancelled, whatever the route
    assert took < 4.0, took
    await all_closed(party)
    assert (await intents(await stack.ledger(), job_id))[hook]["status"] == "unknown"


async def test_a_send_cut_at_the_deadline_ends_the_job_expired_on_any_route(
    make_stack: StackFactory, replay: ReplayServer, party: HostileParty
) -> None:
    # Telegram cannot be re-sent after an unknown outcome; the deadline cut the send, so
    # the job is expired (not failed delivery_unknown) and the send is reported unknown
    party.default = Behaviour("hang")
    stack, hook = party_stack(make_stack, replay, party, 100_000, "telegram")
    await stack.start_worker()
    http = await stack.start_api()
    body = stack.task(query={"tags": ["オリジナル"]})
    body["deadline_ms"] = 8_000
    job_id = (await http.post("/jobs", json=body)).json()["job"]["job_id"]

    job = await terminal_job(http, job_id, timeout_s=40)
    assert job["status"] == "expired", job
    assert job["updated_at"] - job["deadline_at"] < 4_000
    assert party.connections, "the send was out when the deadline passed"
    await all_closed(party)
    assert (await intents(await stack.ledger(), job_id))[hook]["status"] == "unknown"


async def _sent(party: HostileParty) -> bool | None:
    return True if party.connections and party.connections[-1].request_line else None


async def test_a_work_whose_page_points_at_an_internal_service_is_skipped_and_never_delivered(
    make_stack: StackFactory, replay: ReplayServer, webhook: WebhookReceiver, tmp_path: Path
) -> None:
    # The source says the first candidate's page is on an internal HTTP service: it is
    # never requested, the work is unavailable, and the next candidate is delivered —
    # no `.json` (the service's answer) reaches the directory or the webhook
    internal = await HostileParty(default=Behaviour(body=b'{"internal": "status"}')).start()
    try:
        w1, w2 = ordered("オリジナル")[:2]
        replay.faults.mutate[w1] = {
            "page_count": 1,
            "meta_pages": [],
            "meta_single_page": {"original_image_url": internal.url + "/internal/status.json"},
        }
        out = tmp_path / "delivered"
        hook, folder = f"hook-{short_id()}", f"dir-{short_id()}"
        routes = {hook: webhook_route(webhook), folder: {"kind": "directory", "path": str(out)}}
        stack = routes_stack(make_stack, replay, routes)
        await stack.start_worker()
        record = await stack.wait_terminal(await stack.admit(stack.task(query={"tags": ["オリジナル"]})), 60)

        assert (record.cells[0].state, record.cells[0].work_id) == ("submitted", w2)
        assert internal.connections == []
        assert webhook.works() == [w2]
        assert all(f["mime"].startswith("image/") for f in webhook.received[0].json()["files"])
        assert not [p for p in out.rglob("*") if p.suffix == ".json" and w1 in p.name]
        report = record.cells[0].candidate_report
        assert report is not None and report.reasons.get("unavailable") == 1
        # what the source answered (a URL off its image host), counted unusable in the tally
        assert report.unavailable == {"unusable_url": 1} and Tally.of(report).unusable == 1
    finally:
        await internal.stop()


# ---- a TLS handshake that never completes: nothing was sent -------------------------------------


async def released_or_unknown(stack: Any, job_id: str, route: str) -> str:
    pool = await stack.ledger()
    status = await pool.fetchval(
        "SELECT status FROM delivery_intents WHERE job_id = $1 AND route = $2 ORDER BY id DESC LIMIT 1", job_id, route
    )
    return str(status)


async def _opened(party: HostileParty) -> bool | None:
    return True if party.connections else None


@pytest.mark.parametrize("stop", ["cancel", "deadline"])
async def test_a_tls_handshake_that_never_completes_sends_nothing_and_is_never_unknown(
    make_stack: StackFactory, replay: ReplayServer, party: HostileParty, stop: str
) -> None:
    # The receiver accepts the connection and never answers the TLS ClientHello: no byte
    # of the request ever left, so a cancel (or the deadline) that cuts the attempt finds
    # nothing ambiguous — the work is released, not reported unknown (and not blocked).
    party.default = Behaviour("hang")
    hook = f"webhook-{short_id()}"
    route = {"kind": "webhook", "url": f"https://127.0.0.1:{party.port}/hook", "secret": whsec(), "timeout_ms": 100_000}
    stack = routes_stack(make_stack, replay, {hook: route})
    await stack.start_worker()
    http = await stack.start_api()
    body = stack.task(query={"tags": ["オリジナル"]})
    if stop == "deadline":
        body["deadline_ms"] = 8_000
    job_id = (await http.post("/jobs", json=body)).json()["job"]["job_id"]
    await eventually(lambda: _opened(party), timeout_s=30, interval_s=0.05, what="the connection is open")

    if stop == "cancel":
        await http.post(f"/jobs/{job_id}/cancel")
    job = await terminal_job(http, job_id, timeout_s=40)
    assert job["status"] == ("cancelled" if stop == "cancel" else "expired"), job
    await all_closed(party, within_s=5)
    assert all(not c.request_line.startswith(("POST", "GET")) for c in party.connections)  # nothing was sent
    assert await released_or_unknown(stack, job_id, hook) == "released"
    deliveries = [d for cell in job.get("cells", []) for d in cell.get("deliveries", [])]
    assert all(d.get("status") != "unknown" for d in deliveries), deliveries

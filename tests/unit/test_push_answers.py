"""One push's answer, as a receiver curaflow never met may give it (``activities.push_events``).

A push's verdict is its status line (:func:`curaflow.jobs.pushes.classify_answer`); what
follows it must cost nothing more than a bounded look at its body. Each case runs the
activity's send against a raw-socket receiver (:class:`tests.fakes.hostile.HostileParty`)
through the real outbound client on the callback allow-list, inside Temporal's
``ActivityEnvironment`` (the send heartbeats).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import SecretStr
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.push_events import ANSWER_DRAIN_S, PushActivity
from curaflow.jobs.pushes import Verdict, classify_answer
from curaflow.ledger.event_pushes import ClaimedPush
from curaflow.outbound import Outbound
from curaflow.outbound.destinations import data, parse_networks
from tests.fakes.hostile import Behaviour, HostileParty
from tests.support import eventually, resolving_to, whsec

#: The push's whole time in these tests (seconds): far longer than a bounded look at a body.
TIMEOUT_S = 20.0


def pusher() -> PushActivity:
    """A ``PushActivity`` whose deps hold the callback secret and the pushes' client (127.0.0.1 allowed)."""
    client = Outbound(data(["127.0.0.1:*"], parse_networks(["127.0.0.0/8"])))
    deps: Any = SimpleNamespace(
        settings=SimpleNamespace(api=SimpleNamespace(callback_secret=SecretStr(whsec()))),
        client_for=lambda purpose: client,
    )
    return PushActivity(deps)


def claimed(url: str) -> ClaimedPush:
    return ClaimedPush(
        job_id="demo@k", seq=1, event_id="evt-1", url=url, body='{"type": "job.accepted"}', attempts=1, owner="me"
    )


@pytest.mark.parametrize("status", [200, 204, 409, 410, 503])
async def test_a_body_that_never_ends_holds_the_send_no_longer_than_a_look_at_it(status: int) -> None:
    # The receiver sends its status line at once, then a byte every 0.1 s for ever. The
    # status is the answer: the send ends within ANSWER_DRAIN_S of it with that status,
    # never after the push's whole time (until 2026-12-07 every such event held the
    # worker's slot, and every event after it, for callback_timeout_ms: 30 s a push).
    party = await HostileParty(
        default=Behaviour("trickle_body", status=status, chunk=1, interval_s=0.1, body=b" ")
    ).start()
    activity = pusher()
    try:
        began = time.monotonic()
        sent = await ActivityEnvironment().run(activity._send, claimed(party.url + "/cb"), TIMEOUT_S)
        got, error, forced = sent.status, sent.error, sent.forced
        took = time.monotonic() - began
        # the connection is let go: the receiver's next write meets its close
        await eventually(lambda: party.connections[0].closed, timeout_s=5, what="the receiver's connection closed")
    finally:
        await activity.deps.client_for("pushes").aclose()
        await party.stop()
    assert (got, forced) == (status, None)
    assert took < ANSWER_DRAIN_S + 2, took
    if 200 <= status < 300:
        assert error is None
    else:
        assert error is not None and error.startswith(f"HTTP {status}")


async def test_a_brief_answer_is_read_whole() -> None:
    # What the look is for: an answer of a few bytes is read to its end (a receiver that
    # keeps its connection alive keeps it for the next push).
    party = await HostileParty(default=Behaviour("ok", status=200, body=b'{"ok": true}')).start()
    activity = pusher()
    try:
        sent = await ActivityEnvironment().run(activity._send, claimed(party.url + "/cb"), TIMEOUT_S)
        got, error = sent.status, sent.error
    finally:
        await activity.deps.client_for("pushes").aclose()
        await party.stop()
    assert (got, error) == (200, None)


# ---- where the callback host's name leads ----------------------------------------------------


def pusher_to(allowed: list[str]) -> tuple[PushActivity, Outbound]:
    """A ``PushActivity`` whose pushes' client allows ``allowed`` and no private network."""
    client = Outbound(data(allowed, ()))
    deps: Any = SimpleNamespace(
        settings=SimpleNamespace(api=SimpleNamespace(callback_secret=SecretStr(whsec()))),
        client_for=lambda purpose: client,
    )
    return PushActivity(deps), client


@pytest.mark.parametrize("address", ["0.0.0.0", "127.0.0.1", "10.0.0.7", "169.254.169.254", "::1", "::ffff:127.0.0.1"])
async def test_a_callback_host_resolving_to_an_address_never_connected_costs_one_attempt(
    monkeypatch: pytest.MonkeyPatch, address: str
) -> None:
    # The callback host is on the allow-list; at send time its name resolves to an address
    # a data destination never reaches (a DNS sinkhole's 0.0.0.0, a rebinding to loopback
    # or to the metadata service, a resolver's blip). Nothing is connected to — and the
    # event is not dead-lettered on that one DNS answer: it is one retried attempt, as any
    # send that reached no one (until 2026-12-07 it was dead at once, the consumer's event
    # lost for good on the word of a lookup).
    activity, client = pusher_to(["hooks.example"])
    connects = resolving_to(monkeypatch, client, address)
    try:
        sent = await ActivityEnvironment().run(activity._send, claimed("http://hooks.example/cb"), TIMEOUT_S)
        status, error, forced = sent.status, sent.error, sent.forced
    finally:
        await client.aclose()
    assert connects == []
    assert status is None and forced is None, (status, forced, error)
    assert classify_answer(status) == Verdict.RETRY
    assert error is not None and "refused" in error and address in error


async def test_a_callback_origin_off_the_allow_list_is_still_dead_at_once() -> None:
    # The operator's allow-list no longer holds the job's callback origin (it was there at
    # admission): that is no answer of the network but the operator's rule — dead at once,
    # nothing sent.
    activity, client = pusher_to(["other.example"])
    try:
        sent = await ActivityEnvironment().run(activity._send, claimed("http://hooks.example/cb"), TIMEOUT_S)
        status, error, forced = sent.status, sent.error, sent.forced
    finally:
        await client.aclose()
    assert (status, forced) == (None, Verdict.DEAD)
    assert error is not None and "not an allowed destination" in error


# ---- an answer's head that never ends --------------------------------------------------------


class InformationalFlood:
    """A receiver on 127.0.0.1, served by a thread of its own (so this test's event loop
    measures only curaflow's side): it reads a request's head, then sends ``102
    Processing`` heads as fast as the socket takes them, for ever — HTTP lets a server
    send any number of informational (1xx) answers before its final one."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        self.sent = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self._socket.accept()
                with conn:
                    head = b""
                    while b"\r\n\r\n" not in head:
                        head += conn.recv(65536)
                    block = b"HTTP/1.1 102 Processing\r\n\r\n" * 2000
                    with contextlib.suppress(OSError):
                        while True:
                            conn.sendall(block)
                            self.sent += len(block)

    def close(self) -> None:
        self._socket.close()


async def test_endless_informational_answers_hold_neither_the_send_nor_the_event_loop() -> None:
    # Every 1xx head is parsed and skipped by the transport while it waits for the final
    # answer: a receiver sending them for ever kept the send for its whole time (20 s
    # here, 30 s by default) with the worker's event loop starved by the parsing (a tick
    # of 10 ms came 26 times in 3 s, the loop held up to 350 ms at once), for each of
    # the event's attempts. A head is bounded in bytes, informational answers included
    # (outbound.MAX_ANSWER_HEAD_BYTES): past it the answer is a transport error — one
    # retried attempt, at once.
    flood = InformationalFlood()
    activity = pusher()
    gaps: list[float] = []

    async def ticker() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    ticks = asyncio.create_task(ticker())
    try:
        began = time.monotonic()
        sent = await ActivityEnvironment().run(activity._send, claimed(f"http://127.0.0.1:{flood.port}/cb"), TIMEOUT_S)
        took = time.monotonic() - began
    finally:
        ticks.cancel()
        await activity.deps.client_for("pushes").aclose()
        flood.close()
    assert sent.status is None and sent.forced is None and classify_answer(sent.status) == Verdict.RETRY
    assert sent.error is not None and sent.error.startswith("transport"), sent.error
    # ended by the head's bound, not by the send's time (the whole TIMEOUT_S before): how
    # long it took and how long the loop was held are the machine's (0.17 s and 37 ms at
    # most on an idle one; a loaded machine stretches both), so they are bounded loosely
    assert took < TIMEOUT_S / 2, took
    assert gaps, "the event loop never ticked during the send"


# ---- an answer that is not the receiver's ----------------------------------------------------

#: Headers Cloudflare's edge writes on every answer it gives.
CLOUDFLARE = (("server", "cloudflare"), ("cf-ray", "8f2c1a2b3c4d5e6f-FRA"))


async def test_a_409_through_cloudflare_whose_body_never_ends_is_retried_after_a_look() -> None:
    # A 409 through Cloudflare is the receiver's "already recorded" or Cloudflare's own page
    # saying it never reached the receiver (error code 1001): its body tells them apart. A
    # body that does not come whole within the look tells nothing: one retried attempt
    # (the receiver dedupes by Idempotency-Key), never a delivery nobody can vouch for, and
    # never a send held longer than the look.
    party = await HostileParty(
        default=Behaviour("trickle_body", status=409, chunk=1, interval_s=0.1, body=b" ", headers=CLOUDFLARE)
    ).start()
    activity = pusher()
    try:
        began = time.monotonic()
        sent = await ActivityEnvironment().run(activity._send, claimed(party.url + "/cb"), TIMEOUT_S)
        took = time.monotonic() - began
    finally:
        await activity.deps.client_for("pushes").aclose()
        await party.stop()
    assert (sent.status, sent.verdict) == (409, Verdict.RETRY), sent
    assert sent.never_reached is not None and "Cloudflare" in sent.never_reached
    assert took < ANSWER_DRAIN_S + 2, took


@pytest.mark.parametrize(("status", "verdict"), [(522, Verdict.RETRY), (520, Verdict.RETRY), (404, Verdict.DEAD)])
async def test_cloudflares_own_answers_are_named_as_cloudflares(status: int, verdict: Verdict) -> None:
    # What the ledger keeps says who answered: Cloudflare's 52x are its own about the
    # receiver behind it (the routes' reading), a 404 through it is the receiver's.
    party = await HostileParty(
        default=Behaviour("ok", status=status, body=b"<html></html>", headers=CLOUDFLARE)
    ).start()
    activity = pusher()
    try:
        sent = await ActivityEnvironment().run(activity._send, claimed(party.url + "/cb"), TIMEOUT_S)
    finally:
        await activity.deps.client_for("pushes").aclose()
        await party.stop()
    assert (sent.status, sent.verdict) == (status, verdict)
    assert sent.error is not None
    assert ("Cloudflare" in sent.error) is (status != 404), sent.error


async def test_a_worker_without_the_callback_secret_leaves_the_push_to_a_worker_that_has_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A worker whose configuration lacks api.callback_secret (a rolling change, one
    # process's environment missing it) cannot sign a push. Until 2026-12-07 it claimed the
    # job's next event and marked it dead at once: the consumer never got it, although
    # every other worker could have sent it. Now the attempt is a configuration mismatch —
    # retried on any worker, counted and paged — and nothing is claimed.
    import activities.push_events as push_module
    from curaflow.domain.messages import PushInput
    from curaflow.observability import metrics

    claims: list[object] = []

    async def claim_next(*args: object, **kwargs: object) -> object:
        claims.append(args)
        raise AssertionError("an event was claimed by a worker that cannot sign it")

    monkeypatch.setattr(push_module, "claim_next", claim_next)
    deps: Any = SimpleNamespace(
        settings=SimpleNamespace(api=SimpleNamespace(callback_secret=None)),
        identity="worker-without-secret",
        pool=None,
        client_for=lambda purpose: None,
    )
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info, workflow_id="demo@k", workflow_type="JobWorkflow", activity_type="push_events"
    )
    before = metrics.CONFIG_MISMATCHES.labels(kind="setting", name="api.callback_secret")._value.get()
    with pytest.raises(ApplicationError) as failed:
        await env.run(PushActivity(deps).push_events, PushInput(job_id="demo@k"))
    assert failed.value.type == "configuration_mismatch" and not failed.value.non_retryable, failed.value
    assert "api.callback_secret" in str(failed.value)
    assert claims == []
    assert metrics.CONFIG_MISMATCHES.labels(kind="setting", name="api.callback_secret")._value.get() == before + 1


#: Cloudflare's own answers in front of a receiver whose status is a 4xx (or its challenge's
#: 503): a 1xxx page under a 403 (1020 a firewall rule, 1010 the client's signature, 1012
#: access denied, as text or its HTML page), or a challenge page (``cf-mitigated: challenge``,
#: Cloudflare's docs "Detect a Challenge Page response"). The consumer never had the event.
CLOUDFLARE_HTML_1XXX = (
    b"<!DOCTYPE html><html><head><title>Attention Required! | Cloudflare</title></head><body>"
    b'<h1><span class="cf-error-type">Error</span><span class="cf-error-code">1010</span></h1></body></html>'
)
CHALLENGE_PAGE = b"<!DOCTYPE html><html><head><title>Just a moment...</title></head><body></body></html>"
NOT_THE_RECEIVERS = {
    "403-1020-text": Behaviour(
        "ok", status=403, body=b"error code: 1020", content_type="text/plain", headers=CLOUDFLARE
    ),
    "403-1012-text": Behaviour(
        "ok", status=403, body=b"error code: 1012", content_type="text/plain", headers=CLOUDFLARE
    ),
    "403-1010-html": Behaviour(
        "ok", status=403, body=CLOUDFLARE_HTML_1XXX, content_type="text/html", headers=CLOUDFLARE
    ),
    "403-challenge": Behaviour(
        "ok",
        status=403,
        body=CHALLENGE_PAGE,
        content_type="text/html",
        headers=(*CLOUDFLARE, ("cf-mitigated", "challenge")),
    ),
    "503-challenge": Behaviour(
        "ok",
        status=503,
        body=CHALLENGE_PAGE,
        content_type="text/html",
        headers=(*CLOUDFLARE, ("cf-mitigated", "challenge")),
    ),
    "400-challenge": Behaviour(
        "ok",
        status=400,
        body=CHALLENGE_PAGE,
        content_type="text/html",
        headers=(("cf-ray", "8f2c1a2b3c4d5e6f-FRA"), ("cf-mitigated", "Challenge")),
    ),
}


@pytest.mark.parametrize("answer", list(NOT_THE_RECEIVERS))
async def test_cloudflares_own_refusal_in_front_of_the_receiver_is_a_retried_attempt(answer: str) -> None:
    # "Other 4xx -> dead-letter at once" is the receiver's refusal. Cloudflare's block or
    # challenge in front of it is not: the consumer never had the event — one counted,
    # backed-off attempt, dead only once its attempts ran out (until 2026-12-07 dead at once).
    party = await HostileParty(default=NOT_THE_RECEIVERS[answer]).start()
    activity = pusher()
    try:
        sent = await ActivityEnvironment().run(activity._send, claimed(party.url + "/cb"), TIMEOUT_S)
    finally:
        await activity.deps.client_for("pushes").aclose()
        await party.stop()
    assert sent.verdict == Verdict.RETRY, sent
    assert sent.never_reached is not None and "Cloudflare" in sent.never_reached, sent
    assert sent.error is not None and "never reached" in sent.error, sent.error


@pytest.mark.parametrize(
    "behaviour",
    [
        # the receiver's own 403 through Cloudflare (its JSON, its words quoting a code)
        Behaviour("ok", status=403, body=b'{"error": "forbidden"}', headers=CLOUDFLARE),
        Behaviour("ok", status=403, body=b"error code: 1020 of ours", content_type="text/plain", headers=CLOUDFLARE),
        # Cloudflare's words with no header of Cloudflare's: not its answer
        Behaviour("ok", status=403, body=b"error code: 1020", content_type="text/plain"),
        Behaviour(
            "ok", status=403, body=CHALLENGE_PAGE, content_type="text/html", headers=(("cf-mitigated", "challenge"),)
        ),
        # a challenge header on an answer that is Cloudflare's but whose value is another
        Behaviour("ok", status=403, body=b"{}", headers=(*CLOUDFLARE, ("cf-mitigated", "block"))),
    ],
)
async def test_the_receivers_own_403_stays_dead_at_once(behaviour: Behaviour) -> None:
    party = await HostileParty(default=behaviour).start()
    activity = pusher()
    try:
        sent = await ActivityEnvironment().run(activity._send, claimed(party.url + "/cb"), TIMEOUT_S)
    finally:
        await activity.deps.client_for("pushes").aclose()
        await party.stop()
    assert (sent.status, sent.verdict, sent.never_reached) == (403, Verdict.DEAD, None), sent

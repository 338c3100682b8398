"""Receivers played badly: answers that broke a rule of "the unknown is cheap" until 2026-12-07.

The rule (DESIGN.md "Safe defaults at the edges: the delivery side"): an answer curaflow
does not recognise costs one attempt, and a failure is blamed on its real owner — the
route, the work or curaflow. Each case below fell to a default that broke it:

* a route's refusal streak (three *different* works refused in a row with the same
  answer pause the route and lift their refusals) keyed answers with every digit folded,
  the status's too: a webhook receiver refusing one work with 415 (its type), another with
  422 (its content) and a third with 404 was "the same answer" three times — the route
  paused and paged as broken, the works' own refusals lifted, though each answer was
  another;
* the directory route took any JSON object at the work's ``manifest.json`` for a manifest
  of another delivery — "the directory already has the work", the intent ``delivered``
  (duplicate) for good and nothing written — though ``{}``, a consumer's own
  ``{"status": "processed"}`` or another work's manifest copied there say nothing of
  whether this work was delivered;
* the directory route refused for good (``route_refused``: the cell failed unretried, the
  work held back, three works in a row pausing the route) on a network disk's connection
  errors — ``EHOSTDOWN`` of an SMB share reconnecting, ``ECONNRESET``, ``ENETUNREACH`` … —,
  which pass by themselves as the ``EIO``, ``ETIMEDOUT`` and ``ESTALE`` of the same disks
  already retried do;
* a webhook receiver's 2xx saying ``pending`` / ``queued`` — it has the delivery and will
  act on it — was retried as a request that never arrived: when the attempts ran out the
  intent ended ``failed`` and the next job sent the work again under another
  ``webhook-id``, which the receiver cannot deduplicate (a second copy once its queue
  drains); a 502 or a timeout, weaker evidence of arrival, was remembered as possibly
  delivered;
* on an at-most-once route (``on_ambiguous = "fail"``) an answer that may follow a post —
  a proxy's HTML page under a 200, Discord's bare 204, a gateway's 502 — ends the work
  ``delivery_unknown``, blocked on the route for good; that answer carried nothing the
  route's streak could count, so a proxy answering every request so blocked one more work
  with every job, for ever, and never paused the route nor paged as broken — and on a
  route that may send again (a webhook) such an answer (its gateway's 502 / 504, a 2xx
  saying ``queued``) carried nothing either, though attempts that run out on it hold the
  work on the route for good (its intent ``unknown``);
* a webhook receiver's 429 — its limit of curaflow's requests, there is no chat or
  channel of a send to limit — was taken for a limit of that one send: waited as stated,
  a week in a proxy's ``Retry-After`` (every job of the route expiring in the wait), while
  every other send of the route met the limit in turn; the limits of the same kind in
  front of Telegram and Discord, and a job's pushes, were capped;
* a directory route whose work folder another program holds locked (``flock``, its own
  exclusive lock while it processes the folder) hung the delivery: the route waited for a
  shared lock with no bound, on a thread no cancel stops — every retry one more such
  thread, until the process's threads for file work were gone.

The routes run against ``httpx.MockTransport`` answering the platforms' wire formats
(:mod:`tests.unit.test_route_answers`).
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from curaflow.domain.reasons import TerminalReason
from curaflow.domain.verdicts import delivery_verdict
from curaflow.routes.base import answer_key
from curaflow.routes.directory import DirectoryRoute
from tests.unit.test_route_answers import discord, failure, telegram, webhook
from tests.unit.test_unknown_is_cheap_at_routes import dir_failure, dir_request, failing_mkstemp, is_held_not_refused

# ---- the refusal streak: the status is part of the answer ---------------------------------------


def _answers(route_of: Any, statuses: tuple[int, ...], body: Any, tmp_path: Path) -> Any:
    async def each() -> list[str | None]:
        keys = []
        for status in statuses:
            err = await failure(route_of, lambda _r, s=status: httpx.Response(s, **body(s)), tmp_path)
            keys.append(err.answer)
        return keys

    return each()


@pytest.mark.parametrize(
    ("route_of", "statuses", "body"),
    [
        (webhook, (415, 422, 404, 410, 413), lambda _s: {}),
        (telegram, (400, 403, 404), lambda s: {"json": {"ok": False, "error_code": s}}),
        (discord, (400, 403, 404), lambda _s: {"text": "<html>nginx</html>"}),
    ],
    ids=["webhook", "telegram-without-words", "discord-not-its-json"],
)
async def test_refusals_under_different_statuses_are_different_answers(
    tmp_path: Path, route_of: Any, statuses: tuple[int, ...], body: Any
) -> None:
    # Three different works refused with 415, 422 and 404 are three answers: none of them
    # says the route is broken (the streak needs the same answer three times).
    keys = await _answers(route_of, statuses, body, tmp_path)
    assert None not in keys
    assert len(set(keys)) == len(statuses), keys


def test_the_numbers_in_the_words_still_fold_and_the_status_stays() -> None:
    # Item numbers, sizes and ids differ from work to work: they are not the answer.
    assert answer_key("400 Bad Request: failed to send message #3: file 1234.png") == answer_key(
        "400 Bad Request: failed to send message #7: file 99.png"
    )
    assert answer_key("HTTP 404") == answer_key("http 404") != answer_key("HTTP 422")
    assert answer_key("HTTP 400 code 50035 Invalid Form Body") != answer_key("HTTP 403 code 50035 Invalid Form Body")


# ---- the directory: only a manifest of curaflow's for this work says "delivered" ---------------


@pytest.mark.parametrize(
    "manifest",
    [
        {},
        {"status": "processed", "pages": 2},
        {"idempotency_key": 7, "work": {"work_id": "4242"}},
        {"idempotency_key": "", "work": {"work_id": "4242"}},
        {"idempotency_key": "curaflow:out:illustration:4242:j0:t"},
        {"idempotency_key": "curaflow:out:illustration:9999:j0:t", "work": {"work_id": "9999"}},
    ],
    ids=["empty-object", "a-consumers-own", "key-not-text", "key-empty", "no-work", "another-works"],
)
async def test_a_manifest_that_is_not_curaflows_for_this_work_is_never_a_delivery(
    tmp_path: Path, manifest: dict[str, Any]
) -> None:
    folder = tmp_path / "out" / "4242"
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    err = await dir_failure(tmp_path)
    assert is_held_not_refused(err), (err.reason, str(err))
    assert "manifest" in str(err)
    assert json.loads((folder / "manifest.json").read_text()) == manifest, "nothing written over it"


async def test_another_deliverys_manifest_of_this_work_still_says_the_directory_has_it(tmp_path: Path) -> None:
    # A second route on the same path, an earlier job: the work is there (duplicate).
    request = dir_request(tmp_path)
    await DirectoryRoute("other", tmp_path / "out").deliver(request)
    again = dir_request(tmp_path)
    again.idempotency_key = "curaflow:out:illustration:4242:j2:t"
    receipt = await DirectoryRoute("out", tmp_path / "out").deliver(again)
    assert receipt.duplicate and receipt.remote_status == "exists"


# ---- the directory: a network disk's connection that broke may come back ------------------------

NETWORK_ERRORS = [
    errno.ECONNRESET,
    errno.ECONNABORTED,
    errno.ECONNREFUSED,
    errno.EHOSTDOWN,
    errno.EHOSTUNREACH,
    errno.ENETDOWN,
    errno.ENETUNREACH,
    errno.ENETRESET,
    errno.ENOTCONN,
    errno.ENOLINK,
    errno.ECOMM,
    errno.EREMOTEIO,
]


@pytest.mark.parametrize("code", NETWORK_ERRORS, ids=[errno.errorcode[c] for c in NETWORK_ERRORS])
async def test_a_network_disks_connection_error_is_retried_not_the_routes_refusal(tmp_path: Path, code: int) -> None:
    # An SMB share answers EHOSTDOWN while its session reconnects, an NFS or FUSE disk a
    # reset or an unreachable server: the disk comes back by itself, the next attempt
    # writes the work. Refused, the cell failed unretried and three works in a row
    # paused the route as broken.
    with failing_mkstemp(code):
        err = await dir_failure(tmp_path)
    assert err.reason == TerminalReason.DELIVERY_FAILED and not err.permanent and not err.ambiguous, str(err)
    assert err.answer is None, "never counted in the route's refusal streak"


# ---- the webhook: "pending" is the receiver holding the delivery -------------------------------


@pytest.mark.parametrize("word", ["pending", "queued", "Queued"])
async def test_a_webhook_receiver_holding_the_delivery_is_remembered_as_possibly_delivered(
    tmp_path: Path, word: str
) -> None:
    # Retried with the same webhook-id (the receiver dedupes on it) — and, as a 502's or a
    # timeout's, remembered as possibly delivered: should the attempts run out, the intent
    # ends `unknown` (the work stays on this route), never `failed` and sent again by the
    # next job under a webhook-id the receiver has never seen.
    answer = lambda _r: httpx.Response(202, json={"status": word})  # noqa: E731
    err = await failure(webhook, answer, tmp_path)
    assert err.reason == TerminalReason.DELIVERY_FAILED and not err.permanent
    assert err.ambiguous, "the receiver has it: possibly delivered"
    verdict = delivery_verdict(
        reason=err.reason, permanent=False, ambiguous=err.ambiguous, resend_safe=True, attempt=1, max_attempts=5
    )
    assert not verdict.final, "retried with the same webhook-id"


# ---- at most once: an answer that may follow a post is still an answer the streak counts -----------


@pytest.mark.parametrize(
    ("route_of", "status", "body"),
    [
        (telegram, 200, {"text": "<html>captive portal</html>"}),
        (telegram, 502, {"text": "<html>502 Bad Gateway</html>"}),
        (telegram, 500, {"json": {"ok": False, "error_code": 502, "description": "Bad Gateway"}}),
        (discord, 204, {}),
        (discord, 200, {"json": {"message": "ok"}}),
        (discord, 503, {"text": "<html>Service Unavailable</html>"}),
        (webhook, 502, {"text": "<html>502 Bad Gateway</html>"}),
        (webhook, 504, {}),
        (webhook, 202, {"json": {"status": "queued"}}),
        (webhook, 200, {"json": {"status": "sent"}}),
        (webhook, 200, {"json": {"status": True}}),
    ],
    ids=[
        "tg-200-html",
        "tg-502",
        "tg-500-not-its-own",
        "dc-204",
        "dc-200-no-message",
        "dc-503-html",
        "wh-502",
        "wh-504",
        "wh-202-queued",
        "wh-200-word-never-seen",
        "wh-200-status-true",
    ],
)
async def test_an_answer_that_may_follow_a_post_is_an_answer_of_the_route(
    tmp_path: Path, route_of: Any, status: int, body: dict[str, Any]
) -> None:
    # The same answer to two works is the same key: three works ending unknown so pause
    # the route (activities.deliver.recording counts an unknown outcome's answer) — on a
    # route that may send again (the webhook), three works whose attempts ran out on it
    # (their intents `unknown`: held on the route for good), since 2026-12-07 — a 2xx
    # word curaflow has never seen too, read as `pending` is (until e3464fc's follow-up it
    # carried no answer: a receiver saying it to every work spent every work's attempts,
    # each ended abandoned, and the route was never paused).
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = await failure(route_of, lambda _r: httpx.Response(status, **body), tmp_path / "a")
    second = await failure(route_of, lambda _r: httpx.Response(status, **body), tmp_path / "b")
    assert first.ambiguous and not first.permanent, str(first)
    assert first.answer is not None and first.answer == second.answer, (first.answer, second.answer)
    said = body.get("json", {}).get("status") if status < 300 and "json" in body else None
    if isinstance(said, str):  # a 2xx's word: the word
        assert f"status {said}" in first.answer, first.answer
    elif said is not None:  # a status that is no word: named by its JSON
        assert "status" in first.answer, first.answer
    else:
        assert str(status) in first.answer, first.answer


async def test_no_answer_at_all_is_still_no_answer(tmp_path: Path) -> None:
    # A timeout or a broken connection after the request left says nothing of the
    # receiver: nothing is counted (the job's deadline cutting a send is one of them).
    def broken(_r: httpx.Request) -> httpx.Response:
        raise httpx.ReadError("connection reset")

    for route_of in (telegram, discord):
        err = await failure(route_of, broken, tmp_path)
        assert err.ambiguous and err.answer is None, str(err)


# ---- the webhook: a receiver's 429 limits the route, not one send --------------------------------


@pytest.mark.parametrize("retry_after", [None, "1", "604800", "Fri, 31 Dec 9999 23:59:59 GMT"])
async def test_a_webhook_receivers_rate_limit_holds_the_route_capped(tmp_path: Path, retry_after: str | None) -> None:
    # route_wide: every send of the route waits the cooldown, at most
    # delivery.route_rate_limit_cap_ms (route_gates.rate_limited), never a week on one
    # send's word; the stated delay is still what the cooldown starts from.
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    err = await failure(webhook, lambda _r: httpx.Response(429, headers=headers), tmp_path)
    assert err.rate_limited and not err.permanent and not err.ambiguous, str(err)
    assert err.route_wide, "the receiver limits the route's requests, not one send"


# ---- the directory: a work folder another program holds locked ----------------------------------


async def test_a_work_folder_another_program_holds_locked_costs_one_attempt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from curaflow.routes import directory_files

    # raising=True: a wait patched where no lock reads it would leave this test waiting 10 s.
    monkeypatch.setattr(directory_files, "FOLDER_LOCK_WAIT_S", 0.2)
    request = dir_request(tmp_path)
    folder = tmp_path / "out" / "4242"
    folder.mkdir(parents=True)
    theirs = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(theirs, fcntl.LOCK_EX)  # held as long as the other program works the folder
        try:
            async with asyncio.timeout(10):  # a bound of the test's own: it hung for ever
                err = await dir_failure(tmp_path, request)
        except TimeoutError:
            pytest.fail("the delivery waited for the folder's lock with no bound")
    finally:
        os.close(theirs)
    assert err.reason == TerminalReason.DELIVERY_FAILED and not err.permanent and not err.ambiguous, str(err)
    assert err.answer is None and "lock" in str(err)
    assert not (folder / "manifest.json").exists()


async def test_a_lock_released_within_the_bound_is_waited_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Another delivery's cleanup holds the folder a moment (its exclusive lock while it
    # removes leftovers): the delivery waits for it and writes the work.
    real = fcntl.flock
    refused = {"left": 3}

    def flock(fd: int, op: int) -> None:
        if op == fcntl.LOCK_SH | fcntl.LOCK_NB and refused["left"] > 0:
            refused["left"] -= 1
            raise BlockingIOError(errno.EWOULDBLOCK, os.strerror(errno.EWOULDBLOCK))
        real(fd, op)

    monkeypatch.setattr(fcntl, "flock", flock)
    receipt = await DirectoryRoute("out", tmp_path / "out").deliver(dir_request(tmp_path))
    assert receipt.remote_status == "written" and refused["left"] == 0

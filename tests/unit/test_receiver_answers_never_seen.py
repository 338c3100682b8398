"""Receivers' answers nobody named before 2026-12-06, each probed at the default it fell to.

The project's rule (DESIGN.md "Safe defaults at the edges: the delivery side"): an answer
curaflow does not recognise costs one attempt and is the route's; it never refuses the
work for good, never blocks it, never reports a delivery that did not happen nor hides
one that did. Each case below fell to a default that broke that rule:

* Telegram's ``{"ok": true, …}`` under a status that is no acceptance (a 3xx, a 4xx, a
  429, a 5xx) was read as the Bot API's "done": the work reported delivered on the word
  of an answer whose status said otherwise;
* Telegram's words "failed to send message #N" were read in any answer, the Bot API's
  own 400 or not (a 403, a 200 or a 500 whose ``error_code`` disagreed, no
  ``error_code`` at all): the album's first N items recorded as posted though nothing
  said so — the next attempt sent only the rest (pages never delivered, the work
  reported delivered), or the failure ended the work ``partial`` (``unknown`` on the
  route for good);
* a Discord 5xx whose JSON is not Discord's error (``{"code", "message"}``: a gateway's
  or a proxy's JSON) was read as Discord's own — retried as a request Discord did not
  post, on an at-most-once route too (a second post reported as one delivery);
* the directory route took any OS error looking for ``manifest.json`` (``EIO`` of a
  network disk, ``EACCES``) for "no manifest": the work written again over a delivery
  the directory already had, its manifest replaced, a duplicate reported delivered;
* a job's push answered by a redirect (never followed) was dead-lettered at once: the
  event lost for the consumer on one answer of a kind curaflow never follows.

The routes run against ``httpx.MockTransport`` answering the platforms' wire formats
(:mod:`tests.unit.test_route_answers`).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import pytest

from activities.deliver.sending import _guarded
from curaflow.domain.reasons import Owner, TerminalReason
from curaflow.domain.verdicts import delivery_verdict, owner_of
from curaflow.jobs.pushes import Verdict, classify_answer
from curaflow.routes.base import RouteError
from curaflow.routes.directory import DirectoryRoute
from tests.unit.test_route_answers import discord, failure, request_of, telegram
from tests.unit.test_unknown_is_cheap_at_routes import dir_request

MESSAGE = {"message_id": 7, "chat": {"id": -100}, "date": 1}


def answering(status: int, body: Any, headers: dict[str, str] | None = None) -> Any:
    return lambda _r: httpx.Response(status, json=body, headers=headers or {})


# ---- Telegram: "ok": true is the Bot API's "done" only in a 2xx -------------------------------


@pytest.mark.parametrize("status", [301, 302, 303, 400, 403, 404, 409, 418, 429, 500, 503])
async def test_a_telegram_ok_under_a_status_that_is_no_acceptance_is_never_a_delivery(
    tmp_path: Path, status: int
) -> None:
    err = await failure(
        telegram, answering(status, {"ok": True, "result": MESSAGE}, {"location": "https://elsewhere"}), tmp_path
    )
    assert owner_of(err.reason) != Owner.WORK and err.reason != TerminalReason.DELIVERY_REJECTED, str(err)
    if status == 429:
        assert err.rate_limited and not err.permanent
    elif status >= 500:
        # What it says cannot be known: the request may have reached Telegram.
        assert err.ambiguous
    else:
        # Its status says the request was refused: the route's, the work held back.
        assert err.reason == TerminalReason.ROUTE_REFUSED and not err.ambiguous and err.answer is not None


async def test_a_telegram_ok_in_a_2xx_is_still_a_delivery(tmp_path: Path) -> None:
    from tests.unit.test_route_answers import deliver

    for status in (200, 201):
        receipt = await deliver(telegram, answering(status, {"ok": True, "result": MESSAGE}), tmp_path)
        assert receipt.remote_id == "7"


# ---- Telegram: no answer says an album was partly posted by its item's number ------------------

PARTLY = 'Bad Request: failed to send message #2 with the error message "PHOTO_INVALID_DIMENSIONS"'


async def _album(tmp_path: Path, status: int, body: dict[str, Any]) -> tuple[RouteError, list[Any]]:
    recorded: list[Any] = []

    async def on_part(parts: list[Any]) -> None:
        recorded.append(parts)

    request = request_of(tmp_path, pages=4)
    request.on_part = on_part
    async with httpx.AsyncClient(transport=httpx.MockTransport(answering(status, body))) as http:
        with pytest.raises(RouteError) as caught:
            await _guarded(telegram(http), request)
    return caught.value, recorded


@pytest.mark.parametrize(
    ("status", "error_code"),
    [(403, 400), (200, 400), (500, 400), (400, None), (400, "400"), (400, 403), (403, 403), (500, 500)],
    ids=["403-says-400", "200-says-400", "500-says-400", "no-code", "code-text", "400-says-403", "403", "500"],
)
async def test_telegrams_words_for_a_partly_posted_album_in_another_answer_post_nothing(
    tmp_path: Path, status: int, error_code: Any
) -> None:
    body: dict[str, Any] = {"ok": False, "description": PARTLY}
    if error_code is not None:
        body["error_code"] = error_code
    err, recorded = await _album(tmp_path, status, body)
    assert recorded == [], "no item is recorded posted on the word of an answer that is not the Bot API's 400"
    verdict = delivery_verdict(
        reason=err.reason,
        permanent=err.permanent,
        ambiguous=err.ambiguous,
        resend_safe=False,
        attempt=1,
        max_attempts=5,
        posted=bool(recorded),
    )
    assert verdict.outcome != "partial" and not verdict.remember_refusal, (verdict, str(err))


async def test_the_bot_apis_own_400_naming_an_album_item_posted_nothing_either(tmp_path: Path) -> None:
    # The Bot API's own answer: the album failed whole (an album is one request to Telegram;
    # its items are numbered from 1 — tests/unit/test_telegram_album_failures.py). Until
    # 2026-12-07 it recorded items 0..N-1 posted.
    err, recorded = await _album(tmp_path, 400, {"ok": False, "error_code": 400, "description": PARTLY})
    assert recorded == [], recorded
    assert err.reason == TerminalReason.DELIVERY_REJECTED  # refused as photos, then as documents: the work's page


# ---- Discord: a 5xx is Discord's own (not posted) only in Discord's error JSON ----------------


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"error": "upstream connect error"},
        {"message": "Service Unavailable"},
        {"code": 0},
        {"code": "0", "message": "x"},
    ],
    ids=["empty", "error", "message-only", "code-only", "code-text"],
)
@pytest.mark.parametrize("status", [500, 503, 520])
async def test_a_discord_5xx_whose_json_is_not_discords_may_have_posted(
    tmp_path: Path, status: int, body: dict[str, Any]
) -> None:
    err = await failure(discord, answering(status, body), tmp_path)
    assert err.ambiguous and not err.permanent and owner_of(err.reason) != Owner.WORK, str(err)


async def test_discords_own_5xx_is_still_retried_as_not_posted(tmp_path: Path) -> None:
    err = await failure(discord, answering(500, {"message": "500: Internal Server Error", "code": 0}), tmp_path)
    assert not err.ambiguous and not err.permanent and err.reason == TerminalReason.DELIVERY_FAILED


# ---- the directory route: only "no such file" says there is no manifest -------------------------


@pytest.mark.parametrize("code", [errno.EIO, errno.EACCES, errno.ESTALE, 99999])
async def test_a_manifest_the_disk_cannot_say_exists_is_never_written_over(tmp_path: Path, code: int) -> None:
    route = DirectoryRoute("out", tmp_path / "out")
    first = dir_request(tmp_path)
    assert (await route.deliver(first)).remote_status == "written"
    manifest = tmp_path / "out" / "4242" / "manifest.json"
    before = manifest.read_bytes()
    other = dir_request(tmp_path)
    other.idempotency_key = "curaflow:out:illustration:4242:j2:t"
    real = os.lstat

    def failing(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if os.fspath(path).endswith("manifest.json"):
            raise OSError(code, os.strerror(code) if code != 99999 else "never seen")
        return real(path, *args, **kwargs)

    with mock.patch("os.lstat", failing), pytest.raises(RouteError) as caught:
        await _guarded(route, other)
    err = caught.value
    assert manifest.read_bytes() == before, "the delivery the directory has is not written over"
    assert not err.ambiguous and owner_of(err.reason) != Owner.WORK, str(err)
    if code in (errno.EIO, errno.ESTALE):
        assert err.reason == TerminalReason.DELIVERY_FAILED and not err.permanent
    else:
        assert err.reason == TerminalReason.ROUTE_REFUSED and err.answer is not None
    # The disk answering again: the directory's word decides (a duplicate, never "written").
    assert (await route.deliver(other)).duplicate


# ---- pushes: a redirect (never followed) costs one attempt, not the event ----------------------


@pytest.mark.parametrize("status", [300, 301, 302, 303, 304, 307, 308, 399])
def test_a_pushs_redirect_is_retried_not_dead_lettered(status: int) -> None:
    assert classify_answer(status) == Verdict.RETRY


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 413, 422, 499])
def test_a_pushs_4xx_is_still_dead_lettered_at_once(status: int) -> None:
    assert classify_answer(status) == Verdict.DEAD

"""Every permanent verdict of the delivery side comes only from an answer the table recognises.

Property-based: each HTTP route (Telegram, Discord, webhook) runs against
``httpx.MockTransport`` answering an arbitrary answer — any status, ``Retry-After`` and
``Content-Type`` in odd forms, ``X-RateLimit-Scope``, bodies of the platform's shape with
any values, JSON of other shapes, HTML, empty, huge, truncated — and the job's pushes'
:func:`~curaflow.jobs.pushes.classify_answer` takes any status. What is asserted is the
table of DESIGN.md "Safe defaults at the edges: the delivery side" ("Permanent verdicts of
the delivery side, answer by answer"), restated here from the receivers' documentation, not from the code:

* the work is refused for good (``delivery_rejected``, remembered) only for an answer in
  the route's recognised list, read where status, shape and words agree;
* a delivery is ambiguous (``delivery_unknown`` on an at-most-once route: the work blocked
  there for good) only where the request may have been processed — a 2xx that is not the
  platform's, a 5xx that is not the platform's own, a gateway error, a status HTTP does not
  define (600–999: RFC 9110 §15 reads it as a 5xx, whatever it carries), a webhook
  receiver's 303 See Other (RFC 9110 §15.4.4: the POST's result found elsewhere) — never
  another 3xx nor a 4xx;
* a delivery is confirmed only by the platform's acceptance;
* a rate limit (a 429; Telegram's ``retry_after``) is one retried attempt whose wait is
  bounded (the stated delay at most :data:`~curaflow.domain.ratelimit.MAX_STATED_S`, the
  backoff at most the ladder's cap), never permanent, never ambiguous;
* every other answer is the route's (``route_refused``: the work held back for a while,
  never remembered) or retried — never the work's.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curaflow.domain.ratelimit import LADDER_CAP_MS, MAX_STATED_S, retry_delay_ms
from curaflow.domain.reasons import TerminalReason
from curaflow.domain.verdicts import delivery_verdict
from curaflow.jobs.pushes import Verdict, classify_answer
from curaflow.outbound import ROUTE_ANSWER_KEEP_BYTES
from curaflow.routes.base import DeliveryReceipt, RouteError
from tests.unit.test_route_answers import discord, request_of, telegram, webhook

EXAMPLES = settings(
    max_examples=int(os.environ.get("VERDICT_EXAMPLES", "250")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)

_PAGES = Path(tempfile.mkdtemp(prefix="verdicts-"))
atexit.register(shutil.rmtree, _PAGES, True)
_REQUESTS: dict[int, Any] = {}
for _pages in (1, 3):
    (_PAGES / str(_pages)).mkdir()
    _REQUESTS[_pages] = request_of(_PAGES / str(_pages), _pages)

# ---- the recognised table, from the receivers' documentation ------------------------------------

#: Telegram's words for a file the Bot API cannot take (Bot API error strings; reference §3.2).
#: Not "wrong type of the web page content": the Bot API's words for media given by URL
#: (``WEBPAGE_MEDIA_EMPTY``), which curaflow never sends — the route's.
TG_WORK_WORDS = (
    "photo_invalid_dimensions",
    "image_process_failed",
    "photo_save_file_invalid",
    "photo_ext_invalid",
    "photo_invalid",
    "file is too big",
)
#: Discord's JSON error codes about the content (docs "JSON Error Codes").
#: Not 200001 (a title blocked: curaflow sends none — the route's since 2026-12-07).
DC_WORK_CODES = {20009, 50045, 200000, 240000}
DC_FORM_BODY = 50035
#: The webhook route's published receiver contract: 422, or a 2xx saying "rejected" (a 415 is the route's:
#: curaflow sends every work as application/json — 2026-12-07).
WH_WORK_STATUSES = {422}
#: A 2xx's words the contract reads (docs/routes.md "Webhook receivers"; reference §4.1:
#: "2xx + explicit success word → delivered; … unknown 2xx word → retry"): the receiver has
#: it, already had it, refuses the work, failed, holds it. Any other word is one never seen.
WH_ACCEPTED = {"accepted", "idempotent_replay", "success", "succeeded", "ok", "delivered", "received", "created"}
WH_ACCEPTED |= {"processed", "done", "completed", "stored"}
WH_DUPLICATE = {"duplicate", "duplicate_existing"}
WH_REFUSING = {"rejected", "failed", "error"}

# ---- answers --------------------------------------------------------------------------------------

STATUSES = st.one_of(
    st.sampled_from([200, 201, 204, 301, 302, 303, 304, 307, 400, 401, 403, 404, 405, 408, 409, 410, 413, 415]),
    st.sampled_from([418, 421, 422, 425, 429, 451, 499, 500, 501, 502, 503, 504, 520, 521, 522, 523, 524, 525]),
    st.sampled_from([526, 599]),
    st.integers(200, 599),
    st.integers(600, 999),
)
RETRY_AFTERS = st.one_of(
    st.none(),
    st.sampled_from(
        [
            "",
            " ",
            "0",
            "-5",
            "5",
            "1.5",
            "120",
            "1e308",
            "inf",
            "nan",
            "NaN",
            "99999999999999999999999999999",
            "abc",
            "5, 10",
            "10,abc",
            "Wed, 21 Oct 2015 07:28:00 GMT",
            "Fri, 31 Dec 9999 23:59:59 GMT",
            "Wed, 21 Oct 2015",
            "\t7\t",
        ]
    ),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40),
)
CONTENT_TYPES = st.one_of(
    st.none(),
    st.sampled_from(
        [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
            "APPLICATION/JSON; charset=UTF-8",
            "application/problem+json",
            "text/html",
            "text/plain",
            "application/octet-stream",
            "multipart/form-data",
            "",
        ]
    ),
)
SCOPES = st.one_of(st.none(), st.sampled_from(["user", "global", "shared", "GLOBAL", "Shared", "", "bogus"]))
GLOBAL_HEADERS = st.one_of(st.none(), st.sampled_from(["true", "false", "True", " FALSE ", "1", "0", "", "yes"]))
#: What stands in front of the receiver says who it is: Cloudflare's `Server` and `CF-RAY`.
SERVERS = st.one_of(st.none(), st.sampled_from(["cloudflare", "CloudFlare", "nginx", "cloudflare-like", ""]))
CF_RAYS = st.one_of(st.none(), st.sampled_from(["8a1b2c3d4e5f6071-LAX", "", " "]))
#: ``Location`` values, each with whether it leaves the test webhook's origin
#: (``https://hook.test``): an authentication portal's on its own host (Authelia's 303 to
#: a POST), another port or scheme; the receiver's own result; none that can be read.
LOCATION_LEAVES = {
    "https://auth.hook.test/?rd=https%3A%2F%2Fhook.test%2Fin&rm=POST": True,
    "https://hook.test:8443/login": True,
    "http://hook.test/result/1": True,
    "/result/1": False,
    "https://HOOK.test:443/result/1": False,
    "result/1": False,
    "": False,
    "http://[::1": False,
}
LOCATIONS = st.one_of(st.none(), st.sampled_from(sorted(LOCATION_LEAVES)))

JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
)
ANY_JSON = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)

WORDS = st.sampled_from(
    [
        *TG_WORK_WORDS,
        "PHOTO_INVALID_DIMENSIONS",
        "Bad Request: chat not found",
        "Bad Request: message thread not found",
        "Bad Request: TOPIC_CLOSED",
        "Bad Request: message is too long",
        "Bad Request: message caption is too long",
        "Bad Request: wrong file identifier/HTTP URL specified",
        "Bad Request: failed to get HTTP URL content",
        "Bad Request: Wrong type of the web page content",
        "Bad Request: group chat was upgraded to a supergroup chat",
        "Bad Request: group send failed",
        'Bad Request: failed to send message #3 with the error message "PHOTO_INVALID_DIMENSIONS"',
        'Bad Request: failed to send message #0 with the error message "file is too big"',
        "Bad Request: CHAT_PHOTO_INVALID",
        "Bad Request: the upload file is too big for the proxy",
        'Bad Request: failed to send message #1 with the error message "USER_PHOTO_INVALID"',
        "Too Many Requests: retry after 8",
        "Too Many Requests: retry after 1e9",
        "Forbidden: bot was blocked by the user",
        "Unauthorized",
        "Request Entity Too Large",
        "Invalid Form Body",
        "Unknown Webhook",
        "Explicit content",
        "500: Internal Server Error",
        "You are being rate limited.",
        "",
    ]
)
TEXT = st.one_of(WORDS, st.text(max_size=60), st.builds(lambda a, b: f"{a} {b}", WORDS, WORDS))
NUMBERISH = st.one_of(
    st.none(),
    st.integers(-(2**64), 2**64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["8", "1e9", "-1", "abc", "", True, False, [], {}]),
)


def _json_text(value: Any) -> bytes:
    return json.dumps(value, allow_nan=True).encode()


TG_BODIES = st.fixed_dictionaries(
    {},
    optional={
        "ok": st.one_of(st.booleans(), st.sampled_from(["true", "false", 1, 0, None])),
        "error_code": st.one_of(STATUSES, st.sampled_from([400, 429, 502, "400", None, True])),
        "description": st.one_of(TEXT, st.sampled_from([None, 7, ["x"]])),
        "parameters": st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "retry_after": NUMBERISH,
                    "migrate_to_chat_id": st.one_of(
                        NUMBERISH, st.sampled_from([-1001234567890, -100, "-1001234567890", 12345])
                    ),
                },
            ),
            ANY_JSON,
        ),
        "result": ANY_JSON,
    },
)
FORM_ERRORS = st.recursive(
    st.fixed_dictionaries({"_errors": st.lists(st.fixed_dictionaries({"code": TEXT, "message": TEXT}), max_size=2)}),
    lambda inner: st.dictionaries(
        st.sampled_from(["content", "attachments", "files[0]", "0", "username", "thread_id", "embeds", "payload_json"]),
        inner,
        max_size=3,
    ),
    max_leaves=5,
)
DC_BODIES = st.fixed_dictionaries(
    {},
    optional={
        "code": st.one_of(
            st.sampled_from([0, 10015, 20009, 40005, 50006, 50035, 50045, 200000, 200001, 240000, 40060]),
            st.integers(-5, 10**6),
            st.sampled_from(["50035", None, True]),
        ),
        "message": st.one_of(TEXT, st.none()),
        "errors": st.one_of(FORM_ERRORS, ANY_JSON),
        "retry_after": NUMBERISH,
        "global": st.one_of(st.booleans(), st.sampled_from(["true", "False", " false ", "yes", 1, 0, None])),
        "id": st.one_of(st.text(max_size=25), st.integers(0, 2**64), st.none()),
    },
)
WH_BODIES = st.fixed_dictionaries(
    {},
    optional={
        "status": st.one_of(
            st.sampled_from(["rejected", "REJECTED", "failed", "error", "pending", "queued", "accepted", "ok"]),
            st.sampled_from(["submitted", " Rejected\n", "Accepted ", "duplicate_existing", "idempotent_replay"]),
            st.sampled_from([200, 202, 500, True, False, 2.5, [], {}]),
            TEXT,
            st.none(),
            st.integers(),
        ),
        "id": st.one_of(st.text(max_size=30), st.integers(), st.none()),
    },
)


def bodies(platform: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[bytes]:
    """A body: the platform's shape with any values, any JSON, HTML, empty, bytes, cut or huge."""
    shaped = platform.map(_json_text)
    return st.one_of(
        shaped,
        shaped,
        shaped.flatmap(lambda b: st.integers(0, max(0, len(b) - 1)).map(lambda n: b[:n])),  # truncated
        ANY_JSON.map(_json_text),
        st.just(b""),
        st.just(b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"),
        st.just(b"error code: 1015"),
        st.binary(max_size=80),
        shaped.map(lambda b: b + b" " * (300 * 1024)),  # huge: past what a route reads of an answer
        st.just(b'{"ok": false, "error_code": 400, "description": "' + b"[" * 100_000 + b'"}'),
    )


@st.composite
def agreeing(draw: st.DrawFn, status: int) -> dict[str, Any]:
    """A Bot API refusal whose ``ok`` and ``error_code`` agree with ``status`` (its words
    and parameters any), so the words are read at all."""
    body = draw(TG_BODIES)
    return {**body, "ok": False, "error_code": status}


@st.composite
def answers(
    draw: st.DrawFn,
    platform: st.SearchStrategy[dict[str, Any]],
    *,
    agree: bool = False,
    statuses: st.SearchStrategy[int] = STATUSES,
) -> tuple[int, dict[str, str], bytes]:
    status = draw(statuses)
    if agree and draw(st.booleans()):
        platform = agreeing(status)
    headers: dict[str, str] = {}
    if (ctype := draw(CONTENT_TYPES)) is not None:
        headers["content-type"] = ctype
    if (retry_after := draw(RETRY_AFTERS)) is not None:
        headers["retry-after"] = retry_after
    if (scope := draw(SCOPES)) is not None:
        headers["x-ratelimit-scope"] = scope
    if (said_global := draw(GLOBAL_HEADERS)) is not None:
        headers["x-ratelimit-global"] = said_global
    if (server := draw(SERVERS)) is not None:
        headers["server"] = server
    if (ray := draw(CF_RAYS)) is not None:
        headers["cf-ray"] = ray
    if (location := draw(LOCATIONS)) is not None:
        headers["location"] = location
    return status, headers, draw(bodies(platform))


def cloudflares(status: int, headers: dict[str, str]) -> str | None:
    """What Cloudflare in front of the receiver said of the origin, by its docs ("Cloudflare 5xx
    errors"): ``not_sent`` (521, 522, 523, 525, 526: never reached), ``maybe`` (520, 524: the
    origin had the request); None when the answer is not Cloudflare's own 52x."""
    if headers.get("server", "").strip().lower() != "cloudflare" and not headers.get("cf-ray", "").strip():
        return None
    return "not_sent" if status in (521, 522, 523, 525, 526) else "maybe" if status in (520, 524) else None


# ---- driving a route --------------------------------------------------------------------------------


def run(
    route_of: Callable[[httpx.AsyncClient], Any], answer: Callable[[httpx.Request], httpx.Response], pages: int
) -> tuple[DeliveryReceipt | RouteError, list[httpx.Request]]:
    asked: list[httpx.Request] = []

    def recorded(req: httpx.Request) -> httpx.Response:
        asked.append(req)
        return answer(req)

    async def go() -> DeliveryReceipt | RouteError:
        async with httpx.AsyncClient(transport=httpx.MockTransport(recorded)) as http:
            try:
                return await route_of(http).deliver(_REQUESTS[pages])
            except RouteError as err:
                return err

    return asyncio.run(go()), asked


def parsed(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def assert_cheap(err: RouteError, status: int, *, see_other_may_follow_a_post: bool = False) -> None:
    """What every answer owes: a rate limit is one bounded attempt; a 3xx / 4xx is never
    ambiguous (but a webhook receiver's 303, ``see_other_may_follow_a_post``); nothing but
    the work's own reasons is remembered as a refusal."""
    verdict = delivery_verdict(
        reason=err.reason,
        permanent=err.permanent,
        ambiguous=err.ambiguous,
        resend_safe=False,
        attempt=1,
        max_attempts=5,
    )
    if err.rate_limited:
        assert not err.permanent and not err.ambiguous, err
        assert not verdict.final
        assert err.retry_after_s is None or 0 <= err.retry_after_s <= MAX_STATED_S, err.retry_after_s
        stated = err.retry_after_s * 1000 if err.retry_after_s else None
        for step in (1, 2, 30, 10_000):
            wait = retry_delay_ms(step, stated)
            assert 0 < wait <= max(LADDER_CAP_MS, MAX_STATED_S * 1000) and math.isfinite(wait)
            if stated is None:
                assert wait <= LADDER_CAP_MS
    if status == 429:
        assert err.rate_limited, err
    if 300 <= status < 500 and not (see_other_may_follow_a_post and status == 303):
        assert not err.ambiguous, (status, err)
    if status >= 600:  # no receiver's answer, whatever it carries: one attempt, possibly posted
        assert err.ambiguous and not err.permanent and not err.rate_limited, (status, err)
    if err.permanent:
        assert err.reason in (TerminalReason.DELIVERY_REJECTED, TerminalReason.ROUTE_REFUSED), err
        assert not err.rate_limited
    if verdict.remember_refusal:
        assert err.reason == TerminalReason.DELIVERY_REJECTED


def assert_cloudflares_word(err: RouteError, status: int, headers: dict[str, str]) -> None:
    """Cloudflare's own 52x is read the same on every route: never reached → one attempt,
    not sent (never ambiguous, never permanent); the origin had it → ambiguous."""
    said = cloudflares(status, headers)
    if said == "not_sent":
        assert not err.ambiguous and not err.permanent and not err.rate_limited and err.answer is None, err
    if said == "maybe":
        assert err.ambiguous and not err.permanent, err


def answer_of(status: int, headers: dict[str, str], body: bytes) -> Callable[[httpx.Request], httpx.Response]:
    return lambda _req: httpx.Response(status, headers=headers, content=body)


# ---- Telegram ---------------------------------------------------------------------------------------


def tg_recognised_work_refusal(status: int, data: Any) -> bool:
    if status != 400 or not isinstance(data, dict) or data.get("ok") is not False:
        return False
    code, words, params = data.get("error_code"), data.get("description"), data.get("parameters")
    if not is_int(code) or code != 400 or not isinstance(words, str):
        return False
    if isinstance(params, dict) and params.get("retry_after") is not None:
        return False
    return "too many requests" not in words.lower() and tg_phrase(words) in TG_WORK_WORDS


def tg_phrase(words: str) -> str:
    """The phrase a Bot API description states, whole: after its ``Bad Request:`` prefix (if
    any), or an album item's quoted error message (``failed to send message #N with the
    error message "…"``); lowercased. Words inside a longer phrase state nothing."""

    def bare(text: str) -> str:
        text = text.strip()
        return text[len("bad request:") :].strip() if text.lower().startswith("bad request:") else text

    text = bare(words)
    item = re.fullmatch(r'failed to send message #\d{1,4}(?: with the error message "(.*)")?', text, re.I | re.S)
    return bare(item.group(1) or "" if item else text).lower()


@EXAMPLES
@given(answer=answers(TG_BODIES, agree=True), pages=st.sampled_from([1, 3]))
def test_telegram_permanent_verdicts_come_only_from_the_recognised_table(
    answer: tuple[int, dict[str, str], bytes], pages: int
) -> None:
    status, headers, body = answer
    data = parsed(body[:ROUTE_ANSWER_KEEP_BYTES])
    outcome, asked = run(telegram, answer_of(status, headers, body), pages)
    if isinstance(outcome, DeliveryReceipt):
        assert 200 <= status < 300 and isinstance(data, dict) and data.get("ok") is True, (status, body[:200])
        return
    err = outcome
    assert_cheap(err, status)
    assert_cloudflares_word(err, status, headers)
    if err.reason == TerminalReason.DELIVERY_REJECTED:
        assert tg_recognised_work_refusal(status, data), (status, body[:300], str(err))
    if err.ambiguous:
        assert 200 <= status < 300 or status >= 500, (status, err)
    # A 2xx that is no delivery, and a 5xx that is not the Bot API's own refusal (its
    # envelope with `ok: false` and the status as `error_code`), may follow a post.
    own = isinstance(data, dict) and data.get("ok") is False and is_int(data.get("error_code"))
    own = own and data.get("error_code") == status
    if 200 <= status < 300 or (500 <= status < 600 and not own and cloudflares(status, headers) != "not_sent"):
        assert err.ambiguous, (status, body[:300], str(err))
    # A 429 not the Bot API's own is a gateway's limit: the whole route cools down (capped).
    if err.route_wide:
        assert status == 429 and not own, (status, body[:300])
    if status == 429 and not own:
        assert err.route_wide, (status, body[:300], str(err))
    # A migration is followed only from the Bot API's own 400 naming a supergroup's id.
    chats = {_chat_of(r) for r in asked}
    if len(chats) > 1:
        params = data.get("parameters") if isinstance(data, dict) else None
        target = params.get("migrate_to_chat_id") if isinstance(params, dict) else None
        assert status == 400 and isinstance(data, dict) and data.get("error_code") == 400, (status, body[:300])
        assert is_int(target) and str(target).startswith("-100") and target < -1000, target
        assert str(target) in chats


def _chat_of(req: httpx.Request) -> str:
    found = re.search(rb'name="chat_id"\r\n\r\n([^\r]*)\r\n', req.content)
    assert found is not None
    return found.group(1).decode()


# ---- Discord ----------------------------------------------------------------------------------------


def dc_recognised_work_refusal(status: int, data: Any) -> bool:
    if status not in (400, 403, 413) or not isinstance(data, dict) or not is_int(data.get("code")):
        return False
    code = data["code"]
    if code in DC_WORK_CODES:
        return True
    if code != DC_FORM_BODY:
        return False

    def fields(errors: Any, prefix: str = "") -> list[str] | None:
        if not isinstance(errors, dict):
            return None
        names: list[str] = []
        for key, value in errors.items():
            if key == "_errors":
                names.append(prefix or "(body)")
                continue
            inner = fields(value, f"{prefix}.{key}" if prefix else key)
            if inner is None:
                return None
            names.extend(inner)
        return names

    named = fields(data.get("errors"))
    tops = {name.split(".")[0] for name in named or []}
    # Only the uploaded files: `content` and `attachments` are composed by curaflow (the
    # caption, the file list), the route's since 2026-12-07.
    return bool(named) and all(t.startswith("file") for t in tops)


@EXAMPLES
@given(answer=answers(DC_BODIES), pages=st.sampled_from([1, 3]))
def test_discord_permanent_verdicts_come_only_from_the_recognised_table(
    answer: tuple[int, dict[str, str], bytes], pages: int
) -> None:
    status, headers, body = answer
    data = parsed(body[:ROUTE_ANSWER_KEEP_BYTES]) if body else None
    outcome, _asked = run(discord, answer_of(status, headers, body), pages)
    if isinstance(outcome, DeliveryReceipt):
        assert 200 <= status < 300 and (status == 204 or (isinstance(data, dict) and "id" in data)), status
        return
    err = outcome
    assert_cheap(err, status)
    assert_cloudflares_word(err, status, headers)
    if err.reason == TerminalReason.DELIVERY_REJECTED:
        assert dc_recognised_work_refusal(status, data), (status, body[:300], str(err))
    if err.ambiguous:
        assert 200 <= status < 300 or status >= 500, (status, err)

    # Discord's own rate limit (docs "Rate Limits": `message`, `retry_after`, `global`) holds
    # one send only when every word of its scope says so — the body's `global` false, the
    # `X-RateLimit-Global` header false, the scope `user` or `shared` (each absent, or
    # `true` / `false` written as a string); a word saying global, or one curaflow does
    # not recognise, holds the route; any other 429 is the limit of what stands in front.
    def word(value: Any) -> str:
        return value.strip().lower() if isinstance(value, str) else repr(value)

    said = word(data["global"]) if isinstance(data, dict) and "global" in data else None
    discords = isinstance(data, dict) and ("retry_after" in data or said in ("true", "false", "True", "False"))
    one_send = (
        discords
        and said in (None, "false", "False")
        and word(headers.get("x-ratelimit-global", "false")) == "false"
        and word(headers.get("x-ratelimit-scope", "user")) in ("user", "shared")
    )
    if err.route_wide:
        assert status == 429 and not one_send, (headers, body[:200])
    if status == 429:
        assert err.route_wide is not one_send, (headers, body[:200])


# ---- webhook ----------------------------------------------------------------------------------------


def wh_says(headers: dict[str, str], body: bytes) -> str | None:
    """The ``status`` word of a 2xx labelled JSON (a media type is read in any case, RFC 9110
    §8.3.1), trimmed and in any case; a number its digits, any other value no word of the
    contract's; None when the answer says none (not labelled JSON, not an object, no
    ``status``, ``null``)."""
    ctype = headers.get("content-type", "").split(";")[0].strip().lower()
    if not (ctype == "application/json" or ctype.endswith("+json")):
        return None
    data = parsed(body[:ROUTE_ANSWER_KEEP_BYTES])
    word = data.get("status") if isinstance(data, dict) else None
    if word is None:
        return None
    if isinstance(word, str):
        return word.strip().casefold()
    return str(word) if is_int(word) else "<not a word>"


def wh_has_it(word: str | None) -> bool:
    """Whether a 2xx's word says the receiver has (or already had) the delivery: none said
    (a plain ``200 OK``), an acknowledgement, a 2xx status echoed."""
    if word is None or word in WH_ACCEPTED or word in WH_DUPLICATE:
        return True
    return len(word) == 3 and word.isdigit() and word.startswith("2")


@EXAMPLES
@given(answer=answers(WH_BODIES, statuses=st.one_of(st.sampled_from([200, 201, 202, 204]), STATUSES)))
def test_webhook_permanent_verdicts_come_only_from_the_recognised_table(
    answer: tuple[int, dict[str, str], bytes],
) -> None:
    status, headers, body = answer
    outcome, _asked = run(webhook, answer_of(status, headers, body), 1)
    word = wh_says(headers, body) if 200 <= status < 300 else None
    if isinstance(outcome, DeliveryReceipt):
        assert 200 <= status < 300 or status == 409, status
        assert wh_has_it(word), (headers, body[:200])
        assert outcome.duplicate is (status == 409 or word in WH_DUPLICATE), (status, word)
        return
    err = outcome
    assert_cheap(err, status, see_other_may_follow_a_post=True)
    assert_cloudflares_word(err, status, headers)
    if err.reason == TerminalReason.DELIVERY_REJECTED:
        assert status in WH_WORK_STATUSES or (200 <= status < 300 and word == "rejected"), (status, body[:200])
    # a gateway error, a status HTTP does not define, Cloudflare saying the receiver had it,
    # the receiver holding it or saying a word never seen
    if err.ambiguous:
        maybe = cloudflares(status, headers) == "maybe"
        assert status in (303, 502, 504) or status >= 600 or maybe or (200 <= status < 300 and word is not None), status
        assert word not in WH_REFUSING, (status, word)
    if 200 <= status < 300 and not wh_has_it(word) and word not in WH_REFUSING:
        # the receiver holding it, or a word never seen: one attempt, under the same webhook-id
        assert err.ambiguous and not err.permanent and err.reason == TerminalReason.DELIVERY_FAILED, (word, str(err))
    if 500 <= status < 600 or status in (408, 421, 425, 429):
        assert not err.permanent
    # RFC 9110 §15.4.4: a 303 answers a POST its server processed (the result elsewhere) —
    # possibly delivered, one attempt — unless it points off the receiver's origin (no result
    # of the receiver's: a portal in front of it took the POST); another 3xx says "not
    # here": the route's.
    if status == 303 and LOCATION_LEAVES.get(headers.get("location", ""), False):
        assert err.reason == TerminalReason.ROUTE_REFUSED and not err.ambiguous, (headers, str(err))
    elif status == 303:
        assert err.ambiguous and not err.permanent and err.reason == TerminalReason.DELIVERY_FAILED, str(err)
    elif 300 <= status < 400:
        assert err.reason == TerminalReason.ROUTE_REFUSED and not err.ambiguous, (status, str(err))


# ---- the job's pushes -------------------------------------------------------------------------------


@EXAMPLES
@given(status=st.one_of(st.none(), st.integers(0, 1200)))
def test_a_push_is_dead_lettered_only_for_a_refusal_of_the_request(status: int | None) -> None:
    verdict = classify_answer(status)
    if verdict == Verdict.DEAD:
        assert status is not None and 400 <= status < 500 and status not in (408, 421, 425, 429)
    if verdict == Verdict.DELIVERED:
        assert status is not None and (200 <= status < 300 or status == 409)


@pytest.mark.parametrize("label", ["Application/JSON", "APPLICATION/JSON; charset=UTF-8", "application/JSON"])
@pytest.mark.parametrize(
    ("word", "reason"),
    [
        ("pending", TerminalReason.DELIVERY_FAILED),
        ("rejected", TerminalReason.DELIVERY_REJECTED),
        ("failed", TerminalReason.ROUTE_REFUSED),
    ],
)
def test_a_webhook_2xx_labelled_json_in_any_case_is_read(label: str, word: str, reason: TerminalReason) -> None:
    # A media type is case-insensitive (RFC 9110 §8.3.1): a receiver's framework writing
    # `Application/JSON` says what one writing `application/json` says. Its "pending" was
    # recorded delivered (the work never sent again, though the receiver asked for it).
    outcome, _ = run(webhook, answer_of(200, {"content-type": label}, json.dumps({"status": word}).encode()), 1)
    assert isinstance(outcome, RouteError) and outcome.reason == reason, outcome

"""Every answer of Pixiv's about a work — its detail, its ugoira metadata, an image of it —
costs the work more than one retried attempt only when the answer is in the table of
answers recognised as the work's (DESIGN.md "Attribution before judgement", "Work-owned
failures and the decode budget"; the decision-owner rows "whether a failure is the work's"
and "how long a work found unavailable is skipped").

The classifiers are driven with arbitrary statuses, headers and bodies (the app-api's
own objects with any words, other JSON shapes, a CDN's or Pixiv's HTML page, empty and
truncated bodies, images of another format than their URL says) and each outcome is
checked against the table, written out here from the raw answer — never by calling the
classifiers' own predicates:

* the week (``WorkUnavailable.recognised``): a detail's HTTP 404 in the app-api's error
  object (``user_message``, ``message``, ``reason``) whose words to its user are Pixiv's
  that the work was deleted or never existed (2026-12-07: any words were), the restricted
  words nowhere in it; a page's own bytes (an image signature) that
  are whole and do not decode, or over the decode budget — never what the client alone
  sees of an image (its 404/410 asks the detail first);
* an hour (``WorkUnavailable`` not recognised): a work call's 403 or 404; the app-api's
  own 400 (its object under 400: it refused what was asked of one work, 2026-12-06 — it
  ended the job at its first answer); the app-api's
  object carrying "Your access is currently restricted." under a 2xx or a 4xx; ugoira
  metadata of the app-api's ``ugoira_metadata`` object describing no animation; an
  image's 403, 404/410 (to be corroborated), 414, a body over its limit; a page that
  signs no image format;
* anything else: a retried ``SourceError`` (never final for a work's call), the
  account never paused by a work call, its ladder climbed only by a rate limit.
"""

from __future__ import annotations

import asyncio
import io
import json
import tempfile
from pathlib import Path
from typing import Any

import httpx
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from PIL import Image

from curaflow.artifacts.store import ArtifactStore
from curaflow.domain.models import Work, WorkPage
from curaflow.domain.reasons import TerminalReason
from curaflow.sources.corroboration import FRAMING_BYTES, MAX_BYTES_PER_PIXEL, not_the_listed_picture
from curaflow.sources.errors import SourceError, UnavailableKind, WorkUnavailable
from curaflow.sources.gate import MemoryGate
from curaflow.sources.pixiv.client import PixivClient
from tests.support import pixiv_answering

RESTRICTED = "Your access is currently restricted."
#: Words an answer may carry: the ones curaflow knows (restricted, rate limit, OAuth),
#: Pixiv's words to its user, a server's, none.
WORDS = [
    "",
    " ",
    RESTRICTED,
    RESTRICTED.upper(),
    "Rate Limit",
    "Error occurred at the OAuth process. Please check your Access Token to fix this.",
    "該当作品は削除されたか、存在しない作品IDです。",
    "Work has been deleted or the ID does not exist.",
    "指定されたエンドポイントは存在しません",
    "Page not found",
    "Not Found",
    "invalid_grant",
    "Service Unavailable",
]
#: Pixiv's words that a work is gone, written out (lower case: any case is read so).
GONE_WORDINGS = ("該当作品は削除されたか、存在しない作品idです", "work has been deleted or the id does not exist")
HTML_PAGES = [
    b"<!DOCTYPE html><html><head><title>pixiv</title></head><body><h1>404 Not Found</h1>"
    b"<p>\xe3\x81\x8a\xe6\x8e\xa2\xe3\x81\x97\xe3\x81\xae\xe3\x83\x9a\xe3\x83\xbc\xe3\x82\xb8</p></body></html>",
    b"<html><head><title>Attention Required! | Cloudflare</title></head>"
    b"<body>Sorry, you have been blocked</body></html>",
    b"<html><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>",
    f"<html><body>{RESTRICTED}</body></html>".encode(),
]
#: Statuses: every class, and the ones the table names.
STATUSES = st.one_of(
    st.sampled_from([200, 201, 204, 206, 301, 302, 304, 307, 400, 401, 403, 404, 405, 410, 414, 429, 451]),
    st.sampled_from([500, 502, 503, 504, 520, 599]),
    st.integers(min_value=200, max_value=599),
)
CONTENT_TYPES = st.sampled_from(
    ["application/json", "application/json; charset=utf-8", "text/html", "text/plain", "image/jpeg", "image/png", ""]
)

words = st.one_of(st.sampled_from(WORDS), st.text(max_size=12))
app_api_error = st.fixed_dictionaries(
    {"user_message": st.one_of(words, st.none(), st.integers()), "message": words, "reason": words},
    optional={"user_message_details": st.just({}), "code": st.integers(0, 999)},
)
#: The object with a field missing, a gateway's, text: other shapes of an error.
other_error = st.one_of(
    st.dictionaries(st.sampled_from(["user_message", "message", "reason", "code"]), words, max_size=2),
    words,
    st.none(),
    st.integers(),
)
illust = st.fixed_dictionaries(
    {"id": st.sampled_from([123, "123", 456, 0, -1, None]), "title": words},
    optional={
        "type": st.sampled_from(["illust", "manga", "ugoira", "novel", None]),
        "visible": st.sampled_from([True, False, None, "true"]),
        "page_count": st.sampled_from([1, 2, 0, "1", None]),
        "tags": st.just([{"name": "t", "translated_name": None}]),
        "meta_single_page": st.sampled_from(
            [{}, {"original_image_url": "https://i.pximg.net/img-original/img/2025/01/01/00/00/00/123_p0.png"}]
        ),
        "x_restrict": st.sampled_from([0, 1, 2, 3]),
        "caption": words,
    },
)
ugoira_meta = st.fixed_dictionaries(
    {},
    optional={
        "zip_urls": st.sampled_from(
            [{}, {"medium": "https://i.pximg.net/img-zip-ugoira/img/123_ugoira600x600.zip"}, {"medium": "ftp://x"}]
        ),
        "frames": st.sampled_from([[], [{"file": "000000.jpg", "delay": 100}], [{"file": "000000.jpg"}], None]),
    },
)
json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
json_bodies = st.one_of(
    st.builds(lambda e: {"error": e}, app_api_error),
    st.builds(lambda e: {"error": e}, other_error),
    st.builds(lambda i: {"illust": i}, illust),
    st.builds(lambda i, e: {"illust": i, "error": e}, illust, app_api_error),
    st.builds(lambda m: {"ugoira_metadata": m}, ugoira_meta),
    st.builds(lambda m: {"ugoira_metadata": m}, json_value),
    json_value,
)


def _png(fmt: str = "PNG") -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (64, 48), (10, 200, 30)).save(buf, fmt)
    return buf.getvalue()


IMAGES = {fmt: _png(fmt) for fmt in ("PNG", "JPEG", "GIF", "WEBP", "BMP", "TIFF")}


@st.composite
def api_answers(draw: st.DrawFn) -> tuple[int, dict[str, str], bytes, Any]:
    """An answer: its status, headers, body bytes and the JSON they hold (None: not JSON)."""
    status = draw(STATUSES)
    kind = draw(st.sampled_from(["json", "json", "json", "truncated", "html", "empty", "image", "bytes"]))
    parsed: Any = None
    if kind in ("json", "truncated"):
        parsed = draw(json_bodies)
        body = json.dumps(parsed, ensure_ascii=draw(st.booleans())).encode()
        if kind == "truncated" and len(body) > 1:
            body = body[: draw(st.integers(1, len(body) - 1))]
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed = None
    elif kind == "html":
        body = draw(st.sampled_from(HTML_PAGES))
    elif kind == "image":
        body = IMAGES[draw(st.sampled_from(sorted(IMAGES)))]
    elif kind == "bytes":
        body = draw(st.binary(max_size=64))
    else:
        body = b""
    headers = {"content-type": draw(CONTENT_TYPES)}
    if draw(st.booleans()):
        headers["retry-after"] = draw(st.sampled_from(["0", "60", "Wed, 21 Oct 2015 07:28:00 GMT", "x"]))
    return status, headers, body, parsed


def _client(answer: httpx.Response, gate: MemoryGate, *, download_max_bytes: int = 1 << 20) -> PixivClient:
    return pixiv_answering(
        lambda request: answer, image_host="http://img.test", gate=gate, download_max_bytes=download_max_bytes
    )


def _outcome(call: Any) -> object:
    async def run() -> object:
        try:
            return await call()
        except (SourceError, WorkUnavailable) as err:
            return err

    return asyncio.run(run())


def _error_object(parsed: Any) -> dict[str, Any] | None:
    """The app-api's error object of ``parsed`` (its three fields present), else None."""
    err = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(err, dict) and {"user_message", "message", "reason"} <= err.keys():
        return err
    return None


def _carries(parsed: Any, text: str) -> bool:
    """Whether the error of ``parsed`` carries ``text`` (any case) in its words."""
    err = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(err, dict):
        said = " ".join(str(err.get(k) or "") for k in ("message", "user_message", "reason"))
    else:
        said = str(err or "")
    return text.lower() in said.lower()


def _check_work_call(status: int, parsed: Any, outcome: object, gate: MemoryGate, *, ugoira: bool) -> None:
    obj = _error_object(parsed)
    restricted_object = (
        obj is not None and _carries(parsed, RESTRICTED) and (200 <= status < 300 or 400 <= status < 500)
    )
    assert gate._paused_until == 0.0, "a work's answer paused the account"
    if isinstance(outcome, WorkUnavailable):
        if outcome.recognised:  # the week
            assert outcome.kind is UnavailableKind.GONE
            assert status == 404 and obj is not None, (status, parsed)
            words = obj["user_message"]
            assert isinstance(words, str) and any(w in words.lower() for w in GONE_WORDINGS), parsed
            assert not _carries(parsed, RESTRICTED), parsed
        elif outcome.kind is UnavailableKind.UNUSABLE_ANIMATION:  # an hour: the metadata's shape
            assert ugoira and 200 <= status < 300, (status, parsed)
            assert isinstance(parsed, dict) and isinstance(parsed.get("ugoira_metadata"), dict), parsed
            assert parsed.get("error") in (None, "", {}, 0, False), parsed
        else:  # an hour: a refusal of the request, or the account's words
            assert outcome.kind is UnavailableKind.GONE
            assert status in (403, 404) or restricted_object or (status == 400 and obj is not None), (status, parsed)
    elif isinstance(outcome, SourceError):
        assert outcome.reason is not TerminalReason.ACCOUNT_RESTRICTED
        assert outcome.retryable, (status, parsed)  # a work's call never ends the job
        if outcome.reason is TerminalReason.RATE_LIMITED:
            assert status == 429 or ((200 <= status < 300 or 400 <= status < 500) and _carries(parsed, "rate limit"))
    else:
        assert 200 <= status < 300, status
    if gate.penalty:
        assert isinstance(outcome, SourceError) and outcome.reason is TerminalReason.RATE_LIMITED


PROPERTY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(api_answers())
def test_a_works_detail_costs_it_more_than_an_attempt_only_as_the_table_says(
    answer: tuple[int, dict[str, str], bytes, Any],
) -> None:
    status, headers, body, parsed = answer
    gate = MemoryGate()
    pixiv = _client(httpx.Response(status, headers=headers, content=body), gate)
    _check_work_call(status, parsed, _outcome(lambda: pixiv.illust_detail_texts("123")), gate, ugoira=False)


@PROPERTY
@given(api_answers())
def test_a_works_ugoira_metadata_costs_it_more_than_an_attempt_only_as_the_table_says(
    answer: tuple[int, dict[str, str], bytes, Any],
) -> None:
    status, headers, body, parsed = answer
    gate = MemoryGate()
    pixiv = _client(httpx.Response(status, headers=headers, content=body), gate)
    _check_work_call(status, parsed, _outcome(lambda: pixiv.ugoira_metadata("123")), gate, ugoira=True)


# ---- images ----------------------------------------------------------------------

#: A page's URL of a ``.jpg`` (what the bodies below mostly are not).
PAGE_URL = "https://i.pximg.net/img-original/img/2025/02/01/00/00/00/123_p0.jpg"
IMAGE_LIMIT = 4096
SIGNATURES = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a")


def _signs_an_image(body: bytes) -> bool:
    return body.startswith(SIGNATURES) or (body[:4] == b"RIFF" and body[8:12] == b"WEBP")


def _another_picture_than_listed(body: bytes) -> bool:
    """Whether ``body`` opens as a picture whose aspect ratio is not the listed page's
    (64x48): no page of the work (``corroboration.not_the_listed_picture``, 2026-12-07) — a
    GIF whose flipped byte is its width (found by this property on CI, 2026-12-08)."""
    try:
        with Image.open(io.BytesIO(body)) as opened:
            width, height = opened.size
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):  # no picture Pillow reads
        return False
    return width > 0 and height > 0 and not_the_listed_picture(width, height, 64, 48) is not None


@st.composite
def image_bodies(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["image", "image", "cut", "flipped", "html", "json", "empty", "bytes", "large"]))
    if kind in ("image", "cut", "flipped"):
        body = IMAGES[draw(st.sampled_from(sorted(IMAGES)))]
        if kind == "cut":
            return body[: draw(st.integers(0, len(body) - 1))]
        if kind == "flipped":
            at = draw(st.integers(0, len(body) - 1))
            return body[:at] + bytes([body[at] ^ draw(st.integers(1, 255))]) + body[at + 1 :]
        return body
    if kind == "html":
        return draw(st.sampled_from(HTML_PAGES))
    if kind == "json":
        return json.dumps(draw(json_bodies)).encode()
    if kind == "large":
        return IMAGES["PNG"] + bytes(IMAGE_LIMIT)
    return b"" if kind == "empty" else draw(st.binary(max_size=64))


@st.composite
def image_answers(draw: st.DrawFn) -> tuple[int, dict[str, str], bytes]:
    status = draw(st.one_of(st.just(200), STATUSES))
    body = draw(image_bodies())
    headers = {"content-type": draw(CONTENT_TYPES)}
    if draw(st.booleans()):  # a length announced, right or not
        headers["content-length"] = str(draw(st.sampled_from([len(body), 0, len(body) + 1, max(0, len(body) - 1)])))
    if status == 206 and draw(st.booleans()):
        headers["content-range"] = f"bytes 0-{len(body) - 1}/{len(body)}"
    return status, headers, body


#: A GIF whose width's byte is flipped (320x48 for a page listed 64x48): CI's example, 2026-12-08.
ANOTHER_PICTURE = IMAGES["GIF"][:7] + bytes([IMAGES["GIF"][7] ^ 1]) + IMAGES["GIF"][8:]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(image_answers())
@example((200, {"content-type": "application/json"}, ANOTHER_PICTURE))
def test_an_image_answer_costs_its_work_more_than_an_attempt_only_as_the_table_says(
    answer: tuple[int, dict[str, str], bytes],
) -> None:
    """The image host's answer through the artifact store (its length, its bytes checked),
    for a page listed 64x48: a body over the 4 KiB limit is one a page of that size may be
    (``corroboration.sized``: the week); the host's bodies larger than any such page are
    ``tests/unit/test_store_pages.py``'s."""
    status, headers, body = answer
    gate = MemoryGate()
    pixiv = _client(httpx.Response(status, headers=headers, content=body), gate, download_max_bytes=IMAGE_LIMIT)
    work = Work(
        work_id="123",
        title="t",
        url="https://www.pixiv.net/artworks/123",
        pages=[WorkPage(index=0, url=PAGE_URL, width=64, height=48)],
    )
    with tempfile.TemporaryDirectory() as folder:
        outcome = _outcome(lambda: ArtifactStore(Path(folder)).fetch(pixiv, work, "j", "t"))  # type: ignore[arg-type]
    assert gate._paused_until == 0.0
    if isinstance(outcome, WorkUnavailable):
        assert not outcome.corroborate or status in (404, 410), status
        if outcome.recognised and outcome.kind is UnavailableKind.TOO_LARGE:  # the week: a 64x48 page may be so
            assert len(body) > IMAGE_LIMIT and 200 <= status < 300
            assert IMAGE_LIMIT < 64 * 48 * MAX_BYTES_PER_PIXEL + FRAMING_BYTES
        elif outcome.recognised:  # the week: the page's own bytes, whole
            assert 200 <= status < 300 and outcome.kind in (UnavailableKind.UNDECODABLE, UnavailableKind.OVER_BUDGET)
            assert _signs_an_image(body), body[:16]
        elif outcome.kind is UnavailableKind.GONE:
            assert status in (403, 404, 410), status
        elif outcome.kind is UnavailableKind.UNUSABLE_URL:
            assert status == 414, status
        elif outcome.kind is UnavailableKind.TOO_LARGE:
            assert len(body) > IMAGE_LIMIT, len(body)
        else:
            assert outcome.kind is UnavailableKind.NOT_AN_IMAGE and 200 <= status < 300, (outcome, status)
            assert (
                not _signs_an_image(body)
                or body.startswith(b"BM")
                or body[:4] in (b"II*\x00", b"MM\x00*")
                or _another_picture_than_listed(body)  # a placeholder's answer: the hour, not the week
            ), body[:16]
    elif isinstance(outcome, SourceError):
        assert outcome.retryable, outcome
        if outcome.reason is TerminalReason.RATE_LIMITED:
            # HTTP 429, or Pixiv's words in an error under a 2xx or a 4xx (reference §2.5:
            # classify by body, not status) — never under a 5xx or a redirect
            spoken = 200 <= status < 300 or 400 <= status < 500
            assert status == 429 or (spoken and b"rate limit" in body.lower()), (status, body[:64])
    else:
        assert 200 <= status < 300, status

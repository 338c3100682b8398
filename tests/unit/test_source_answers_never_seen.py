"""Answers of the source side curaflow had never been shown, played by a hostile party: each
costs one attempt, never a work, a target or an account (DESIGN.md "Attribution before
judgement"; "the unknown is cheap").

The client runs against ``httpx.MockTransport``: the token endpoint and the app-api answer
what each test scripts, in Pixiv's wire format where it is Pixiv's.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from curaflow.artifacts import ArtifactStore
from curaflow.domain.models import Work, WorkPage
from curaflow.domain.reasons import TerminalReason
from curaflow.sources.animation import Animation, AnimationFrame
from curaflow.sources.errors import SourceError, UnavailableKind, WorkUnavailable
from curaflow.sources.gate import MemoryGate
from curaflow.sources.pixiv.client import PixivClient
from tests.support import pixiv_answering

TOKEN = {"access_token": "a", "refresh_token": "r", "expires_in": 3600}
#: Over the 64 KiB byte limit the clients below are given.
BIG = b"<html>" + b"x" * (256 * 1024)


def scripted(
    api: Callable[[httpx.Request], httpx.Response], *, gate: MemoryGate | None = None, page_max_bytes: int = 64 * 1024
) -> PixivClient:
    """A client whose token endpoint grants a token and whose app-api answers ``api``."""
    return pixiv_answering(api, page_max_bytes=page_max_bytes, gate=gate)


@pytest.mark.parametrize(
    "status",
    [
        500,
        502,
        503,  # a gateway's maintenance page, larger than any page of results
        504,
        302,  # a redirect's body (never followed)
        404,  # not the app-api's error object: nothing of it could be read
        400,
    ],
)
async def test_an_oversized_answer_whose_status_is_no_pages_is_one_retried_attempt(status: int) -> None:
    """An answer over ``outbound.page_max_bytes`` was judged by its size alone, whatever its
    status: a search's was ``remote_http_error`` not retried — the job ended at the
    first answer of a gateway whose 5xx error page (or a redirect's, or a ``Content-Length``
    it announced) was over the limit. The same request does not get the same answer from
    a failing server: one attempt, retried, as the status says with no body read."""
    pixiv = scripted(lambda request: httpx.Response(status, content=BIG))
    with pytest.raises(SourceError) as raised:
        await pixiv.search_illust("tag")
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, True)
    assert raised.value.status == status


@pytest.mark.parametrize("status", [500, 502, 503, 302, 400])
@pytest.mark.parametrize("call", ["illust_detail", "ugoira_metadata"])
async def test_a_works_oversized_answer_under_a_failing_status_holds_no_work(call: str, status: int) -> None:
    """Asked of one work, the 5xx (or redirect) over the byte limit held the work back as
    an answer about it; a failing server says nothing of the work: one retried attempt,
    as the same status with a short body is."""
    pixiv = scripted(lambda request: httpx.Response(status, content=BIG))
    with pytest.raises(SourceError) as raised:
        await getattr(pixiv, call)("123")
    assert not isinstance(raised.value, WorkUnavailable)
    assert raised.value.retryable is True


async def test_an_oversized_rate_limit_is_a_rate_limit() -> None:
    """A 429 is a rate limit whatever its body (RFC 6585 §4): over the byte limit too, the
    account's ladder climbs and the attempt waits its cooldown — it ended the job."""
    gate = MemoryGate(cap_ms=900_000)
    pixiv = scripted(lambda request: httpx.Response(429, content=BIG, headers={"Retry-After": "120"}), gate=gate)
    with pytest.raises(SourceError) as raised:
        await pixiv.search_illust("tag")
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.RATE_LIMITED, True)
    assert raised.value.cooldown_s is not None and raised.value.cooldown_s >= 120


@pytest.mark.parametrize("announced", [True, False])
async def test_an_oversized_answer_of_the_pages_own_status_keeps_its_rule(announced: bool) -> None:
    """A 2xx over the byte limit is judged by its size, announced by its ``Content-Length``
    or counted: an answer never seen, one retried attempt (until 2026-12-07 the job ended,
    "the same request gets the same answer")."""

    def answer(request: httpx.Request) -> httpx.Response:
        if announced:
            return httpx.Response(200, content=BIG)
        return httpx.Response(200, content=_streamed())  # no Content-Length: counted

    async def _streamed() -> AsyncIterator[bytes]:
        yield BIG

    pixiv = scripted(answer)
    with pytest.raises(SourceError) as raised:
        await pixiv.search_illust("tag")
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, True)


#: An answer no decoder of a text codec reads in linear time: Python's ``punycode`` codec
#: inserts each code point into the text built so far (RFC 3492 §6.2), quadratic in the
#: length — ~5 s of CPU for 384 KB, hours for the 4 MiB an answer may hold.
PUNYCODE_BOMB = b"-" + b"a9" * (192 * 1024)


async def test_a_declared_charset_that_decodes_in_quadratic_time_costs_no_cpu() -> None:
    """Every app-api answer was decoded with the charset its ``Content-Type`` declared
    (httpx's ``response.text``): ``charset=punycode`` is a text codec whose decoder is
    quadratic, and an answer of 384 KB held the worker's event loop — every job of the
    process, its heartbeats — for seconds (4 MiB: half an hour). JSON is UTF-8 (RFC 8259
    §8.1): the declared charset is not read. The answer is no JSON: one retried attempt."""
    import time

    pixiv = scripted(
        lambda request: httpx.Response(
            200, content=PUNYCODE_BOMB, headers={"Content-Type": "application/json; charset=punycode"}
        ),
        page_max_bytes=1024 * 1024,
    )
    started = time.process_time()
    with pytest.raises(SourceError) as raised:
        await pixiv.search_illust("tag")
    assert time.process_time() - started < 1.0
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, True)


@pytest.mark.parametrize("charset", ["iso-8859-1", "windows-1252", "shift_jis", "utf-16", "punycode"])
async def test_a_json_answer_is_read_as_utf_8_whatever_charset_it_declares(charset: str) -> None:
    """A proxy that labels Pixiv's UTF-8 JSON with another charset had its text read as
    that charset: the work's title and tags came out as mojibake (``æ\\x9d±æ\\x96¹``) — and
    a detail whose tags no longer hold the query's word is a work that "no longer
    matches", an empty page then taken for the end of the target's results. JSON is UTF-8
    (RFC 8259 §8.1; UTF-16 and UTF-32 told by its first bytes, as ``json`` does)."""
    illust = {
        "id": 123,
        "type": "illust",
        "title": "東方",
        "tags": [{"name": "東方", "translated_name": None}],
        "caption": "",
        "create_date": "2026-12-01T00:00:00+09:00",
        "page_count": 1,
        "meta_pages": [],
        "meta_single_page": {"original_image_url": "https://i.pximg.net/img-original/img/123_p0.png"},
        "x_restrict": 0,
        "illust_ai_type": 1,
        "total_bookmarks": 1,
        "visible": True,
        "width": 10,
        "height": 10,
    }
    import json

    body = json.dumps({"illust": illust}, ensure_ascii=False).encode()
    pixiv = scripted(
        lambda request: httpx.Response(
            200, content=body, headers={"Content-Type": f"application/json; charset={charset}"}
        )
    )
    work, texts = await pixiv.illust_detail_texts("123")
    assert work.title == "東方"
    assert texts is not None and "東方" in texts


@pytest.mark.parametrize(
    "texts",
    [
        ["東\ufffd", "a title"],  # a byte of the tag that was no UTF-8, read as U+FFFD
        ["\ufffd\ufffd", "a title"],  # a tag of an emoji whose escape came broken (a lone surrogate)
        ["風景", "landscape", "a title", "caption \ufffd"],  # the caption damaged: the word may stand there
    ],
)
def test_a_damaged_text_may_still_hold_the_querys_word(texts: list[str]) -> None:
    """A work "no longer matches" only when none of its texts can hold the query's word,
    and an empty page where it stood is then the end of the target's results (the scan
    exhausted, its sweep cleared). A text holding U+FFFD was not read whole — a byte that
    was no UTF-8, a lone surrogate of a broken emoji, both made U+FFFD when cleaned — and
    the word may be what was lost: such a work could still match, and the empty page
    stays the source's failure (retried)."""
    from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
    from curaflow.sources.pixiv.scan.pages import no_longer_matches

    for tags in (["東方"], ["🐱"]):
        target = TargetSpec(target_id="t", query=TargetQuery(tags=tags), filters=TargetFilters())
        assert no_longer_matches(target, texts) is False
    target = TargetSpec(target_id="t", query=TargetQuery(tags=["東方"]), filters=TargetFilters())
    assert no_longer_matches(target, ["風景", "a title"]) is True  # read whole, without the word


# ---- a body over its byte limit that is not the file at all ------------------------------

PAGE_URL = "https://i.pximg.net/img-original/img/2026/12/01/00/00/00/123_p0.png"
#: A broken mirror's or proxy's answer for every file: an endless page that is no image.
NOT_THE_FILE = b"<!DOCTYPE html><html><body>" + b"<p>upstream is down</p>" * 12_000
PNG_SIGNED = b"\x89PNG\r\n\x1a\n" + b"\x00" * 280_000


def image_client(body: bytes) -> PixivClient:
    """A client whose image host answers ``body`` (200, its length announced, in 8 KiB
    chunks as a socket delivers it) to every image, within a 64 KiB ``download_max_bytes``."""

    async def chunks() -> AsyncIterator[bytes]:
        for at in range(0, len(body), 8192):
            yield body[at : at + 8192]

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=chunks(), headers={"Content-Length": str(len(body))})

    return pixiv_answering(answer, image_host="http://img.test", download_max_bytes=64 * 1024)


def large_page_work() -> Work:
    """A work whose page is listed 10 000 px square: an image of it may be ~800 MB."""
    return Work(
        work_id="123",
        title="t",
        url="https://www.pixiv.net/artworks/123",
        width=10_000,
        height=10_000,
        pages=[WorkPage(index=0, url=PAGE_URL, width=10_000, height=10_000)],
    )


@pytest.mark.parametrize(("body", "recognised"), [(NOT_THE_FILE, False), (PNG_SIGNED, True)], ids=["html", "png"])
async def test_a_page_over_the_limit_is_weighed_only_when_its_bytes_begin_as_an_image(
    tmp_path: Path, body: bytes, recognised: bool
) -> None:
    """A body over ``download_max_bytes`` is the work's (the week) when an image of its
    listed size could be that large (``corroboration.sized``) — which every large work's
    could: a mirror streaming an endless HTML page for every file cost each work listed
    over ~2 900 px square the week. A body whose first bytes sign no image format is no
    page's own bytes, whatever its size: what the host sent, held briefly."""
    with pytest.raises(WorkUnavailable) as raised:
        await ArtifactStore(tmp_path).fetch(image_client(body), large_page_work(), "j", "t")
    assert raised.value.kind == UnavailableKind.TOO_LARGE
    assert raised.value.recognised is recognised, raised.value.why


class ZipOf:
    """A source of one ugoira of ``frames`` frames (listed 600 px square, Pixiv's
    ``ugoira600x600`` zip) whose frames zip answers ``body`` in 8 KiB chunks."""

    def __init__(self, body: bytes, frames: int) -> None:
        self.body = body
        self.meta = Animation(
            zip_url="https://i.pximg.net/img-zip-ugoira/img/123_ugoira600x600.zip",
            frames=[AnimationFrame(file=f"{i:06d}.jpg", delay_ms=100) for i in range(frames)],
        )

    @contextlib.asynccontextmanager
    async def download(self, url: str) -> AsyncIterator[Any]:
        data = self.body

        class Body:
            expected_bytes = len(data)

            async def chunks(self) -> AsyncIterator[bytes]:
                for at in range(0, len(data), 8192):
                    yield data[at : at + 8192]

        yield Body()

    async def animation(self, work: Work) -> Animation:
        return self.meta


@pytest.mark.parametrize(
    ("body", "recognised"),
    [(NOT_THE_FILE, False), (b"PK\x03\x04" + b"\x00" * 280_000, True)],
    ids=["html", "zip"],
)
async def test_a_frames_zip_over_the_limit_is_weighed_only_when_its_bytes_begin_as_a_zip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: bytes, recognised: bool
) -> None:
    """The size rule allows each frame of a frames zip its framing (4 MiB): an ugoira of
    ten frames or more "could be" any size, so a mirror streaming an endless page for
    every zip URL cost every such ugoira the week. A body that does not begin as a zip
    (a local file header, ``PK\\x03\\x04``) is not the work's zip: held briefly."""
    from curaflow import artifacts

    monkeypatch.setattr(artifacts.store, "MAX_ZIP_BYTES", 64 * 1024)
    work = Work(
        work_id="123", title="t", url="https://www.pixiv.net/artworks/123", kind="ugoira", width=600, height=600,
        pages=[WorkPage(index=0, url=PAGE_URL, width=600, height=600)],
    )  # fmt: skip
    with pytest.raises(WorkUnavailable) as raised:
        await ArtifactStore(tmp_path).fetch(ZipOf(body, frames=12), work, "j", "t")  # type: ignore[arg-type]
    assert raised.value.kind == UnavailableKind.TOO_LARGE
    assert raised.value.recognised is recognised, raised.value.why


@pytest.mark.parametrize(
    "words",
    [
        "\u200b",  # a zero-width space: a template that rendered nothing
        "\ufeff",  # a byte order mark
        "\u2060\u200d",  # a word joiner, a zero-width joiner
        "-",
        "...",
        "「」",
        "\u200b\u3000.",
    ],
)
@pytest.mark.parametrize("call", ["illust_detail", "ugoira_metadata"])
async def test_a_404_whose_words_to_its_user_say_nothing_is_not_the_works(call: str, words: str) -> None:
    """The app-api's 404 is the work's (gone, the week) only with words to its user that say
    something: an empty or blank ``user_message`` was already none, but one of invisible
    characters (a zero-width space, a BOM) or of marks alone (``-``, ``...``) passed for
    words — what a template that rendered nothing gives every work asked. A letter or a
    digit must be there; else held briefly."""
    body = {"error": {"user_message": words, "message": "", "reason": "", "user_message_details": {}}}
    pixiv = scripted(lambda request: httpx.Response(404, json=body))
    with pytest.raises(WorkUnavailable) as raised:
        await getattr(pixiv, call)("123")
    assert raised.value.recognised is False


@pytest.mark.parametrize(
    "words",
    [
        "該当作品は削除されたか、存在しない作品IDです。",
        "The following work is either deleted, or the ID does not exist.",
    ],
)
async def test_a_404_in_pixivs_words_that_the_work_is_gone_stays_the_works(words: str) -> None:
    """Other words that say something ("Page not found", "404", "Ошибка") are not the
    work's since 2026-12-07 (tests/unit/test_gone_in_pixivs_words.py)."""
    body = {"error": {"user_message": words, "message": "", "reason": "", "user_message_details": {}}}
    pixiv = scripted(lambda request: httpx.Response(404, json=body))
    with pytest.raises(WorkUnavailable) as raised:
        await pixiv.illust_detail("123")
    assert raised.value.recognised is True


# ---- the network's answer for the image host ---------------------------------------------


@pytest.mark.parametrize("address", ["0.0.0.0", "127.0.0.1", "10.0.0.7", "::1"])
async def test_an_image_host_resolving_to_an_address_never_connected_is_no_answer_about_the_work(
    monkeypatch: pytest.MonkeyPatch, address: str
) -> None:
    """``i.pximg.net`` resolving to an address a data destination may not reach (a DNS
    sinkhole answering ``0.0.0.0`` for a blocked name, a captive portal, a hijack) was taken
    for ``unusable_url`` — "what the source answered", held back: the cell moved on through
    every candidate, holding each, and the job ended ``source_unusable``, blaming Pixiv's
    answers. The work's URL is Pixiv's own; the network answered: a retried download."""
    from curaflow.outbound import Outbound
    from curaflow.sources.pixiv.client import image_destinations
    from tests.support import resolving_to

    images = Outbound(image_destinations(None))
    connects = resolving_to(monkeypatch, images, address)
    pixiv = PixivClient(
        httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200, json=TOKEN))),
        images=images,
        refresh_token="r",
        api_url="http://api.test",
        auth_url="http://api.test",
    )
    with pytest.raises(SourceError) as raised:
        async with pixiv.download(PAGE_URL):
            pass  # pragma: no cover
    assert not isinstance(raised.value, WorkUnavailable)
    assert raised.value.retryable and raised.value.reason == TerminalReason.DOWNLOAD_FAILED
    assert connects == []
    await images.aclose()

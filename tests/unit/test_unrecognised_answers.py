"""Which answers of Pixiv say something positive about a work (``WorkUnavailable.recognised``).

A work found unavailable is skipped by the account's later jobs for
``pixiv.unavailable_ttl_ms`` (7 days) only when the answer is about the work itself; an
answer that would come for any work while it lasts — the image host's ``403`` (what
i.pximg.net answers a request it refuses), a page that is no image, a bare ``403`` of the
API — holds the work back for ``pixiv.unrecognised_hold_ms`` (1 h) instead
(``SourcePolicy.memory_ms``). The client runs against ``httpx.MockTransport`` answering
the app-api's token and one scripted answer per request.
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import httpx
import pytest
from PIL import Image

from curaflow.artifacts.images import Refused, check_image
from curaflow.domain.reasons import TerminalReason
from curaflow.ledger.db import now_ms
from curaflow.outbound import attempt_deadline
from curaflow.outbound.errors import time_limit_error
from curaflow.sources.base import SourcePolicy
from curaflow.sources.corroboration import corroborated
from curaflow.sources.errors import SourceError, UnavailableKind, WorkUnavailable
from curaflow.sources.gate import MemoryGate
from curaflow.sources.pixiv.client import PixivClient

IMAGE = "https://i.pximg.net/img-original/img/2025/01/01/00/00/00/123_p0.png"


def client(status: int, body: bytes = b"") -> PixivClient:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/auth/token"):
            token = {"access_token": "a", "refresh_token": "r", "expires_in": 3600, "user": {"id": "1"}}
            return httpx.Response(200, json=token)
        return httpx.Response(status, content=body, headers={"Content-Type": "text/html"})

    http = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    return PixivClient(http, refresh_token="r", api_url="http://api.test", auth_url="http://api.test")


@pytest.mark.parametrize(
    ("status", "corroborate"),
    [(404, True), (410, True), (403, False)],
)
async def test_an_images_answer_alone_is_never_the_works(status: int, corroborate: bool) -> None:
    """A 404/410 says the file is not there — what a misconfigured mirror, a CDN in a
    deploy or a moved path answers every work: the work's only once its detail says the
    work is gone (``corroborate``; until 2026-12-05 it was the work's for the week). A 403
    is the host refusing the request: never the work's."""
    with pytest.raises(WorkUnavailable) as raised:
        async with client(status, b"Forbidden").download(IMAGE):
            pass
    assert (raised.value.kind, raised.value.recognised) == (UnavailableKind.GONE, False)
    assert raised.value.corroborate is corroborate


class Detail:
    """A source whose :meth:`work` answers as scripted (the rest of the protocol unused)."""

    def __init__(self, answer: BaseException | None) -> None:
        self.answer = answer
        self.asked: list[str] = []

    async def work(self, work_id: str) -> object:
        self.asked.append(work_id)
        if self.answer is not None:
            raise self.answer
        return object()


FILE_404 = WorkUnavailable("123", "image HTTP 404", corroborate=True)


@pytest.mark.parametrize(
    ("detail", "recognised"),
    [
        (WorkUnavailable("123", "deleted", recognised=True), True),  # the app-api's own 404: the week
        (None, False),  # the detail describes the work alive: the host's answer
        (WorkUnavailable("123", "HTTP 404"), False),  # a 404 page not the app-api's: says nothing
        (WorkUnavailable("123", "Your access is currently restricted."), False),
        (SourceError(TerminalReason.REMOTE_HTTP_ERROR, "pixiv answered HTTP 503"), False),
        (SourceError(TerminalReason.RATE_LIMITED, "rate limited", cooldown_s=60.0), False),
        (SourceError(TerminalReason.NETWORK_ERROR, "pixiv timeout: ReadTimeout"), False),
    ],
)
async def test_a_files_404_is_the_works_only_when_its_detail_says_it_is_gone(
    detail: BaseException | None, recognised: bool
) -> None:
    source = Detail(detail)
    settled = await corroborated(source, "123", FILE_404)  # type: ignore[arg-type]
    assert source.asked == ["123"]
    assert (settled.kind, settled.recognised, settled.corroborate) == (UnavailableKind.GONE, recognised, False)
    assert settled.why.startswith("image HTTP 404")
    policy = SourcePolicy()
    assert policy.memory_ms(settled.recognised) == (
        policy.unavailable_ttl_ms if recognised else policy.unrecognised_hold_ms
    )


def _timed_out(*, by_deadline: bool) -> SourceError:
    """What the Pixiv client raises for a detail its time limit cut (the job's deadline
    or the request's own limit)."""
    cut = time_limit_error(2.0, True, None, by_deadline=by_deadline)
    try:
        raise SourceError(TerminalReason.NETWORK_ERROR, "pixiv timeout: TimeLimitAfterSending") from cut
    except SourceError as err:
        return err


async def test_a_detail_the_jobs_deadline_cut_settles_nothing() -> None:
    """The job's deadline cut the detail: curaflow's own bound, no answer of the host's —
    raised for the caller to fail the attempt (until 2026-12-05 the work was held back and
    counted as the host's answer). The request's own time limit is the source's: held."""
    with pytest.raises(SourceError):
        await corroborated(Detail(_timed_out(by_deadline=True)), "123", FILE_404)  # type: ignore[arg-type]
    settled = await corroborated(Detail(_timed_out(by_deadline=False)), "123", FILE_404)  # type: ignore[arg-type]
    assert not settled.recognised and "could not be asked" in settled.why
    # the attempt's deadline already passed when the detail failed, whatever the failure
    with attempt_deadline(now_ms() - 1), pytest.raises(SourceError):
        await corroborated(Detail(SourceError(TerminalReason.NETWORK_ERROR, "x")), "123", FILE_404)  # type: ignore[arg-type]


async def test_an_answer_that_asks_no_corroboration_costs_no_request() -> None:
    source = Detail(None)
    for err in (
        WorkUnavailable("123", "image HTTP 403", recognised=False),
        WorkUnavailable("123", "too large", UnavailableKind.TOO_LARGE, recognised=True),
    ):
        assert await corroborated(source, "123", err) is err  # type: ignore[arg-type]
    assert source.asked == []


def test_a_raiser_cannot_claim_what_asks_corroboration() -> None:
    claimed = WorkUnavailable("123", "image HTTP 404", recognised=True, corroborate=True)
    assert (claimed.recognised, claimed.corroborate) == (False, True)
    # what the source answered is never the work's, corroborated or not
    url = WorkUnavailable("123", "refused", UnavailableKind.UNUSABLE_URL, corroborate=True)
    assert (url.recognised, url.corroborate) == (False, False)


async def test_what_curaflow_raises_while_asking_passes_unchanged() -> None:
    """The gate's database failing is curaflow's, not an answer of the source."""
    with pytest.raises(ConnectionResetError):
        await corroborated(Detail(ConnectionResetError()), "123", FILE_404)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "body", "recognised"),
    [
        (
            404,
            {"error": {"user_message": "該当作品は削除されたか、存在しない作品IDです。", "message": "", "reason": ""}},
            True,
        ),
        # The app-api's object with no word to its user: what any path it does not serve
        # answers every work (2026-12-06: it was the work's, the week).
        (404, {"error": {"user_message": "", "message": "", "reason": ""}}, False),
        # The words a restricted account gets for every request: not the work's (a work
        # Pixiv restricts is listed as a placeholder and judged by its listing).
        (400, {"error": {"user_message": "Your access is currently restricted.", "message": "", "reason": ""}}, False),
        (403, {"error": {"user_message": "", "message": "", "reason": ""}}, False),
    ],
)
async def test_a_details_answer_is_the_works_only_when_it_says_so(
    status: int, body: dict[str, object], recognised: bool
) -> None:
    with pytest.raises(WorkUnavailable) as raised:
        await client(status, json.dumps(body).encode()).illust_detail("123")
    assert raised.value.recognised is recognised


@pytest.mark.parametrize("visible", [True, False])
async def test_a_detail_describing_another_work_says_nothing_of_the_asked_one(visible: bool) -> None:
    """A cache or a proxy keyed wrongly answers the detail of another work: alive, or a
    placeholder. Until 2026-12-05 it was returned as the asked work's — another work's
    placeholder made a scan take an empty answer for the end of results (the asked work
    "hidden"). Now it is the source's failure, retried: nothing of the asked work."""
    other = {
        "id": 456,
        "title": "t",
        "type": "illust",
        "visible": visible,
        "user": {"id": 1, "name": "n", "account": "a"},
        "tags": [],
        "create_date": "2025-01-01T00:00:00+09:00",
        "page_count": 1,
        "width": 8,
        "height": 8,
        "meta_single_page": {"original_image_url": IMAGE.replace("123", "456")},
        "meta_pages": [],
        "image_urls": {"large": IMAGE.replace("123", "456")},
    }

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/auth/token"):
            token = {"access_token": "a", "refresh_token": "r", "expires_in": 3600, "user": {"id": "1"}}
            return httpx.Response(200, json=token)
        return httpx.Response(200, json={"illust": other})

    http = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    pixiv = PixivClient(http, refresh_token="r", api_url="http://api.test", auth_url="http://api.test")
    with pytest.raises(SourceError) as raised:
        await pixiv.illust_detail("123")
    assert raised.value.reason == "remote_http_error" and raised.value.retryable
    assert "456" in str(raised.value) and "123" in str(raised.value)
    assert (await pixiv.illust_detail("456")).work_id == "456"  # its own detail, as before
    # the fetch's corroboration: asked about 123 and told of another work, the image's
    # 404 stays the host's (held), and its why does not say the work is listed
    settled = await corroborated(PixivSourceOf(pixiv), "123", FILE_404)  # type: ignore[arg-type]
    assert not settled.recognised and "could not be asked" in settled.why


class PixivSourceOf:
    """The one method :func:`corroborated` asks of a source, over a client."""

    def __init__(self, pixiv: PixivClient) -> None:
        self.pixiv = pixiv

    async def work(self, work_id: str) -> object:
        return await self.pixiv.illust_detail(work_id)


def test_a_page_that_is_no_image_is_not_recognised_as_the_works(tmp_path: Path) -> None:
    page = tmp_path / "123_p0.png"
    page.write_bytes(b"<!doctype html><title>Maintenance</title>" + b" " * 512)
    checked = check_image(page)
    assert isinstance(checked, Refused) and (checked.kind, checked.recognised) == (UnavailableKind.NOT_AN_IMAGE, False)
    bmp = tmp_path / "124_p0.png"
    Image.new("RGB", (8, 8)).save(bmp, format="BMP")  # an image, in a format not verified here
    checked = check_image(bmp)
    assert isinstance(checked, Refused) and checked.recognised is False
    # A whole PNG (IEND, right CRCs) whose pixels do not inflate: the host holds these bytes.
    pixels = b"not zlib at all" * 8
    header = struct.pack(">IIBBBBB", 8, 8, 8, 2, 0, 0, 0)
    whole_but_broken = tmp_path / "125_p0.png"
    whole_but_broken.write_bytes(
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )
    checked = check_image(whole_but_broken)
    assert isinstance(checked, Refused) and (checked.kind, checked.recognised) == (UnavailableKind.UNDECODABLE, True)


def chunk(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


def test_a_hold_is_never_longer_than_what_the_source_remembers() -> None:
    policy = SourcePolicy(unavailable_ttl_ms=7 * 86_400_000, unrecognised_hold_ms=3_600_000)
    assert (policy.memory_ms(True), policy.memory_ms(False)) == (7 * 86_400_000, 3_600_000)
    assert SourcePolicy(unavailable_ttl_ms=1000, unrecognised_hold_ms=3_600_000).memory_ms(False) == 1000
    assert SourcePolicy(unavailable_ttl_ms=0).memory_ms(False) == 0  # 0 remembers nothing


async def test_ugoira_metadata_describing_no_animation_is_not_recognised_as_the_works() -> None:
    """A frame without a delay, no frames, a zip URL that is none: what a renamed field of
    the app-api would look like for every ugoira. Until 2026-12-05 each such work was
    remembered unusable for the week; now it is skipped and held back briefly."""
    body = {
        "ugoira_metadata": {
            "zip_urls": {"medium": "https://i.pximg.net/img-zip-ugoira/img/123_ugoira600x600.zip"},
            "frames": [{"file": "000000.jpg", "duration": 80}],
        }
    }
    with pytest.raises(WorkUnavailable) as raised:
        await client(200, json.dumps(body).encode()).ugoira_metadata("123")
    assert (raised.value.kind, raised.value.recognised) == (UnavailableKind.UNUSABLE_ANIMATION, False)


async def test_ugoira_metadata_with_a_negative_delay_is_not_recognised_as_the_works() -> None:
    """A delay below zero was raised to the shortest and the work delivered with made-up
    timings; it describes no animation: skipped, held back briefly."""
    body = {
        "ugoira_metadata": {
            "zip_urls": {"medium": "https://i.pximg.net/img-zip-ugoira/img/123_ugoira600x600.zip"},
            "frames": [{"file": "000000.jpg", "delay": 80}, {"file": "000001.jpg", "delay": -80}],
        }
    }
    with pytest.raises(WorkUnavailable) as raised:
        await client(200, json.dumps(body).encode()).ugoira_metadata("123")
    assert (raised.value.kind, raised.value.recognised) == (UnavailableKind.UNUSABLE_ANIMATION, False)


def test_every_kind_an_unrecognised_answer_may_carry_is_counted_from_the_start() -> None:
    from curaflow.observability.metrics import UNRECOGNISED_ANSWER_KINDS

    assert set(UNRECOGNISED_ANSWER_KINDS) == {kind.value for kind in UnavailableKind}


async def test_an_image_hosts_rate_limit_in_a_403_is_a_rate_limit_not_a_hold() -> None:
    """Pixiv words its rate limit in the body, often with HTTP 403 (reference §2.5): from the
    image host too it is the account's cooldown, not a work held back (found by a review,
    2026-12-05: every work of a search was held while the limit lasted and the gate never
    backed off). A 403 with any other body is still a hold; a huge body is not read."""
    limited = json.dumps({"error": {"message": "Rate Limit"}}).encode()
    with pytest.raises(SourceError) as raised:
        async with client(403, limited).download(IMAGE):
            pass
    assert raised.value.reason == TerminalReason.RATE_LIMITED
    for body in (b"Forbidden", b"{" * 100_000, json.dumps({"error": {"message": "Forbidden"}}).encode()):
        with pytest.raises(WorkUnavailable) as held:
            async with client(403, body).download(IMAGE):
                pass
        assert held.value.recognised is False


@pytest.mark.parametrize(
    ("url", "status"),
    [
        ("https://169.254.169.254/latest/meta-data/123_p0.png", 200),  # an internal host
        ("https://i-cf.pximg.net/img-original/img/2025/01/01/00/00/00/123_p0.png", 200),  # a host never seen
        ("https://10.0.0.7/img-zip-ugoira/img/2025/01/01/00/00/00/123_ugoira600x600.zip", 200),  # a frames zip
        ("", 200),  # the listing's image field renamed: no URL at all
        ("https://i.pximg.net/img-original//123_p0.png", 200),  # a path of another shape
        (IMAGE, 414),  # the host refusing the URL's length
    ],
    ids=["internal-host", "unknown-host", "zip-on-internal-host", "no-url", "empty-segment", "414"],
)
async def test_a_url_the_source_answered_is_not_recognised_as_the_works(url: str, status: int) -> None:
    """A work's file URL is what the source answered for it, not the work: a host never
    seen (Pixiv moving its image host, a tampered answer naming an internal service), a
    renamed image field (no URL), a URL of another shape, a ``414`` — what every work would
    get while the source answers so. Until 2026-12-05 each was remembered unusable for the
    week (``recognised``): one answer of a new shape cost every work its jobs examined for
    seven days. Held back for ``unrecognised_hold_ms`` now; nothing is requested."""
    with pytest.raises(WorkUnavailable) as raised:
        async with client(status, b"").download(url):
            pass
    assert (raised.value.kind, raised.value.recognised) == (UnavailableKind.UNUSABLE_URL, False)


async def test_a_work_listing_no_file_is_not_recognised_as_the_works(tmp_path: Path) -> None:
    """A work listed without a page and without an animation: what a renamed field of the
    source's listing would look like for every work — held back briefly, not the week."""
    from curaflow.artifacts import ArtifactStore
    from curaflow.domain.models import Work

    class NoFiles:
        async def animation(self, work: Work) -> None:
            return None

    with pytest.raises(WorkUnavailable) as raised:
        await ArtifactStore(tmp_path).fetch(NoFiles(), Work(work_id="123", pages=[]), "job", "t")  # type: ignore[arg-type]
    assert (raised.value.kind, raised.value.recognised) == (UnavailableKind.NO_FILE, False)


@pytest.mark.parametrize(
    ("status", "body", "retryable"),
    [
        # What a proxy, a CDN or a moved endpoint answers for every request while it lasts:
        # not the app-api speaking — one attempt, retried with backoff, never the job's end.
        (400, b"<html><body>Bad Request</body></html>", True),
        (401, b"<html><body>Unauthorized</body></html>", True),
        (403, b"", True),
        (404, b"<!doctype html><title>Not Found</title>", True),
        (418, b'{"error": {"message": "teapot"}}', True),
        # The app-api's own error object refusing the request's parameters in its
        # validator's shape: it refused what was asked (final).
        (400, b'{"error": {"user_message": "", "message": "{\\"word\\": [\\"invalid word\\"]}", "reason": ""}}', False),
        # In other words (its own, never seen): one retried attempt (2026-12-07: final;
        # tests/unit/test_refused_request_in_pixivs_shape.py).
        (400, b'{"error": {"user_message": "", "message": "invalid word", "reason": ""}}', True),
        (
            400,
            json.dumps({"error": {"user_message": "不正な値", "message": "", "reason": ""}}).encode(),
            True,
        ),
        # The app-api's object under a status that says nothing of the request (it is
        # forbidden now, not there, gone, a status never seen) with words never seen: one
        # attempt, retried (until 2026-12-06 it ended the job at its first answer).
        (403, b'{"error": {"user_message": "", "message": "Something never seen", "reason": ""}}', True),
        (
            403,
            json.dumps({"error": {"user_message": "しばらく", "message": "", "reason": ""}}).encode(),
            True,
        ),
        (404, b'{"error": {"user_message": "", "message": "Not Found", "reason": ""}}', True),
        (405, b'{"error": {"user_message": "", "message": "Method Not Allowed", "reason": ""}}', True),
        (410, b'{"error": {"user_message": "", "message": "Gone", "reason": ""}}', True),
        (451, b'{"error": {"user_message": "", "message": "", "reason": "legal"}}', True),
    ],
)
async def test_a_searchs_4xx_ends_the_attempt_only_when_the_app_api_says_so(
    status: int, body: bytes, retryable: bool
) -> None:
    with pytest.raises(SourceError) as raised:
        await client(status, body).search_illust("風景")
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, retryable)


@pytest.mark.parametrize("call", ["detail", "ugoira_metadata"])
@pytest.mark.parametrize(
    "error",
    [
        {"user_message": "", "message": "Invalid illust_id", "reason": ""},
        {"user_message": "この作品は表示できません", "message": "", "reason": "", "user_message_details": {}},
    ],
    ids=["server-words", "words-to-its-user"],
)
async def test_the_app_apis_400_on_a_works_own_call_holds_the_work_not_the_job(
    call: str, error: dict[str, object]
) -> None:
    """The app-api's 400 refuses what was asked; asked of one work (its detail, its ugoira
    metadata) it is an answer about that request never seen, in words never seen. It
    ended the attempt unretried: the fetch's cell failed remote_http_error at once and
    nothing was held back — the target's later jobs met the work again and failed the
    same way for as long as the answer lasted (a target, not an attempt). Now
    the work is skipped and held back briefly (not recognised as the work's), as a bare
    403 or a 404 not in the app-api's words is, and the cell moves on."""
    c = client(400, json.dumps({"error": error}).encode())
    with pytest.raises(WorkUnavailable) as raised:
        await (c.illust_detail("123") if call == "detail" else c.ugoira_metadata("123"))
    assert raised.value.recognised is False
    assert raised.value.kind == UnavailableKind.GONE


def gated_client(status: int, body: bytes, headers: dict[str, str] | None = None) -> tuple[PixivClient, MemoryGate]:
    """:func:`client` behind an in-process gate (its cooldown read after a request)."""
    gate = MemoryGate()

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/auth/token"):
            token = {"access_token": "a", "refresh_token": "r", "expires_in": 3600, "user": {"id": "1"}}
            return httpx.Response(200, json=token)
        return httpx.Response(status, content=body, headers={"Content-Type": "image/jpeg", **(headers or {})})

    http = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    return PixivClient(http, refresh_token="r", api_url="http://api.test", auth_url="http://api.test", gate=gate), gate


async def read_image(c: PixivClient, url: str = IMAGE) -> bytes:
    async with c.download(url) as body:
        return b"".join([chunk async for chunk in body.chunks()])


RATE_LIMITED_BODIES = [
    json.dumps({"error": {"message": "Rate Limit"}}).encode(),
    json.dumps({"error": {"user_message": "", "message": "Rate Limit", "reason": ""}}).encode(),
    b'\r\n  {"error": "rate limit exceeded"}',
]


@pytest.mark.parametrize("status", [200, 400, 404, 410, 420])
@pytest.mark.parametrize("body", RATE_LIMITED_BODIES, ids=["message", "app-api-object", "text"])
async def test_an_image_hosts_rate_limit_in_the_body_is_the_accounts_cooldown_whatever_its_status(
    status: int, body: bytes
) -> None:
    """Pixiv words its rate limit in the body whatever the status (reference §2.5: "classify
    by body, not status"; :func:`~curaflow.sources.pixiv.client.answers.says_rate_limit`:
    a 2xx or a 4xx). The app-api's answers were read so, and the image host's 403 and 429;
    any other image answer was not: a 200 carrying the words was a page that is no image
    (every work a job met held back for an hour, the job ending ``source_unusable``), a 404
    asked for a detail and held the work, another 4xx was a plain retried download — and
    in each the account's gate never backed off, every later request meeting the limit
    again. Now it is the account's rate limit: the gate's ladder climbs, the stated delay
    its floor, no work held."""
    c, gate = gated_client(status, body, {"Retry-After": "90"})
    with pytest.raises(SourceError) as raised:
        await read_image(c)
    assert raised.value.reason == TerminalReason.RATE_LIMITED
    assert raised.value.cooldown_s is not None and raised.value.cooldown_s >= 90
    assert gate.penalty == 1


@pytest.mark.parametrize(
    "body",
    [
        (
            b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"
            b"\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82"
        ),
        json.dumps({"error": {"message": "Forbidden"}}).encode(),
        b"{" + b" " * 100_000 + b"}",
        b"",
    ],
    ids=["image", "json-of-other-words", "json-over-the-error-bound", "empty"],
)
async def test_an_image_hosts_200_without_the_words_is_the_body_as_it_came(body: bytes) -> None:
    """A 200 that says no rate limit is read as before, every byte: an image, a JSON page of
    other words (no image: held briefly by the store, as before), a body longer than an
    error answer, none."""
    c, gate = gated_client(200, body)
    assert await read_image(c) == body
    assert gate.penalty == 0


async def test_a_503_with_the_words_cools_nothing() -> None:
    """A 5xx is the server failing (:func:`~curaflow.sources.pixiv.client.answers.speaks_of_the_request`):
    its body says nothing of the account — a retried download, the gate left as it was."""
    c, gate = gated_client(503, RATE_LIMITED_BODIES[0])
    with pytest.raises(SourceError) as raised:
        await read_image(c)
    assert raised.value.reason == TerminalReason.DOWNLOAD_FAILED
    assert gate.penalty == 0


async def test_a_page_answered_a_rate_limit_in_a_200_holds_no_work(tmp_path: Path) -> None:
    """Through the artifact store: a rate limit in a 200 fails the fetch as the account's
    rate limit (its cooldown the next attempt's delay) — never ``not_an_image``, which held
    the work back and moved the cell on to the next candidate, asking again at once."""
    from curaflow.artifacts import ArtifactStore
    from curaflow.domain.models import Work, WorkPage

    c, _ = gated_client(200, RATE_LIMITED_BODIES[0])
    work = Work(work_id="123", pages=[WorkPage(index=0, url=IMAGE)])
    with pytest.raises(SourceError) as raised:
        await ArtifactStore(tmp_path).fetch(c, work, "job", "t")  # type: ignore[arg-type]
    assert raised.value.reason == TerminalReason.RATE_LIMITED


@pytest.mark.parametrize(("status", "corroborate"), [(403, False), (404, True), (410, True)])
async def test_an_error_body_that_cannot_be_read_leaves_the_status_to_decide(status: int, corroborate: bool) -> None:
    """An image host's 4xx is read for the rate limit's words first; a body that cannot be
    read (a coding curaflow does not decode) says nothing, and the status decides as before
    reading: a 404/410 asks the work's detail, a 403 holds the work briefly — never a
    retried download that would take neither answer."""
    c, gate = gated_client(status, b"\x00\x01", {"Content-Encoding": "x-never-seen"})
    with pytest.raises(WorkUnavailable) as raised:
        await read_image(c)
    assert (raised.value.recognised, raised.value.corroborate) == (False, corroborate)
    assert gate.penalty == 0

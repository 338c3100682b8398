"""Image requests: a work's image URL mapped onto the image host it may be fetched from,
the streaming GET of an image, and the download the Source protocol reads
(:class:`~curaflow.sources.base.Download`)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import httpx

from curaflow.domain.reasons import TerminalReason
from curaflow.domain.text import clean_text, loads_clean
from curaflow.outbound import (
    AnswerTooLarge,
    DestinationRefused,
    Limits,
    Outbound,
    announced_length,
    iter_capped,
    url_problem,
)
from curaflow.sources.errors import SourceError, UnavailableKind, WorkUnavailable
from curaflow.sources.pixiv.client.constants import LOOPBACK_HOSTS, PIXIV_IMAGE_HOSTS, USER_AGENT
from curaflow.sources.pixiv.client.gated import GatedRequests


class ImageRequests(GatedRequests):
    """The image half of :class:`~curaflow.sources.pixiv.client.PixivClient` (which sets
    the attributes below)."""

    image_host: str | None
    image_referer: str
    _images: Outbound
    _image_limits: Limits

    def image_url(self, url: str) -> str:
        """Where to GET the image ``url`` of a work: itself, or its copy on ``image_host``.

        With ``image_host`` set, ``https://i.pximg.net/<path>`` becomes
        ``<image_host>/<path>``, and so does a loopback replay URL
        ``http://127.0.0.1:<port>/i/<path>`` (stored by versions before canonical URLs):
        never the port of whichever process bound the work.

        The path stays strictly under the image host (and under ``image_host``'s own
        path): a URL that is not one a request can be made for
        (:func:`~curaflow.outbound.url_problem`: too long, whitespace or unprintable
        characters, not a URL, a dot-segment — raw, percent-encoded, behind a backslash),
        or whose path is not absolute or has an empty segment, is refused.

        Raises:
            DestinationRefused: the URL names a host other than Pixiv's image host (a
                work's URLs are the source's data: only its image host may be fetched),
                or is not a usable URL (above).
        """
        problem = url_problem(url)
        if problem is not None:
            raise DestinationRefused(f"image URL refused: {problem}")
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        query = f"?{parts.query}" if parts.query else ""
        path = parts.path
        if not path.startswith("/") or "//" in path or parts.fragment:
            raise DestinationRefused("image URL refused: its path is not a plain absolute path")
        if host in PIXIV_IMAGE_HOSTS and parts.scheme == "https" and parts.port in (None, 443):
            return url if self.image_host is None else f"{self.image_host}{path}{query}"
        if self.image_host is not None and host in LOOPBACK_HOSTS and path.startswith("/i/"):
            return f"{self.image_host}{path[2:]}{query}"
        raise DestinationRefused(f"image URL host {host!r} is not the source's image host")

    def image_request(self, url: str) -> httpx.Request:
        """Build a GET for an image URL with the app's ``Referer`` (mapped by :meth:`image_url`).

        Raises:
            DestinationRefused: as :meth:`image_url`, or a URL httpx cannot build a request for.
        """
        try:
            return self._images.build_request(
                "GET",
                self.image_url(url),
                headers={"Referer": self.image_referer, "User-Agent": USER_AGENT, "Accept-Encoding": "identity"},
            )
        except (httpx.InvalidURL, ValueError) as err:
            raise DestinationRefused(f"image URL refused: {type(err).__name__}") from None

    @contextlib.asynccontextmanager
    async def open_image(self, url: str) -> AsyncIterator[httpx.Response]:
        """Open a streaming GET of an image; the ``async with`` block reads the body
        (:meth:`image_chunks`) under the download's total time limit.

        Raises:
            SourceError: ``download_failed`` / ``download_timeout`` (also when the time
                runs out inside the block; ``download_failed`` too when the host's name
                leads to an address the guard refuses: the network's answer, 2026-12-07);
                rate limits as ``rate_limited``. Any other
                answer (another 4xx, a 5xx, a 3xx, a 206 whose ``Content-Range`` is not the
                whole file: :func:`whole_range`) is the host's, retried.
            WorkUnavailable: HTTP 404/410 for the image (``gone``, ``corroborate``: the
                work's only once its detail says the work is gone,
                :func:`~curaflow.sources.corroboration.corroborated`), 403 (``gone``, not
                recognised as the work's: the host refuses the request); an image URL the
                client may not request (:meth:`image_url`), or HTTP 414 URI Too Long
                (``unusable_url``: what the source answered, never
                recognised as the work's); a body whose bytes go over ``download_max_bytes``
                — never its announced length alone — (``too_large``
                with its ``limit_bytes``: the work's only once the artifact store finds an
                image of the page's size could be so large,
                :func:`~curaflow.sources.corroboration.sized`).
        """
        work_id = url.rsplit("/", 1)[-1].split("_", 1)[0][:64] if isinstance(url, str) else "?"
        try:
            request = self.image_request(url)
        except DestinationRefused as err:
            # What the source answered for the work (a host never seen, no URL at all, a
            # path of another shape), not the work: held back briefly, never the week.
            raise WorkUnavailable(work_id, str(err), UnavailableKind.UNUSABLE_URL) from None
        await self._pass_gate()
        try:
            async with self._images.stream(request, self._image_limits) as response:
                if 400 <= response.status_code < 500:
                    # Pixiv words its rate limit in the body whatever the 4xx (reference
                    # §2.5; a 429 is one whatever its body): the account's cooldown, read
                    # before the status is judged (2026-12-07: only a 403's body was read —
                    # under a 404 the words held the work, under a 400 they were a plain
                    # retried download, the gate never backing off). A 2xx's body is read
                    # as it comes (image_chunks).
                    said = None if response.status_code == 429 else await _error_body(response)
                    await self._check_rate_limit(response, said)
                if response.status_code in (404, 410):
                    # The file is not at that path: what a deleted or private work's image
                    # answers, and what a misconfigured mirror, a CDN in a deploy or a moved
                    # path answers every work. The work's only if its detail says it is gone
                    # (curaflow.sources.corroboration, asked by the fetch once this came).
                    raise WorkUnavailable(work_id, f"image HTTP {response.status_code}", corroborate=True)
                if response.status_code == 403:  # i.pximg.net's answer to a request it refuses
                    raise WorkUnavailable(
                        work_id, "image HTTP 403 (the image host refused the request)", recognised=False
                    )
                if response.status_code == 414:  # the URL the source answered is what the host refused
                    raise WorkUnavailable(work_id, "image HTTP 414 (URI too long)", UnavailableKind.UNUSABLE_URL)
                if response.status_code >= 400:
                    raise SourceError(
                        TerminalReason.DOWNLOAD_FAILED,
                        f"image HTTP {response.status_code}",
                        status=response.status_code,
                    )
                if not 200 <= response.status_code < 300:
                    # A 3xx is documented nowhere as the work's (a maintenance page, a
                    # moved host): the host's, retried; redirects are never followed.
                    raise SourceError(
                        TerminalReason.DOWNLOAD_FAILED,
                        f"image HTTP {response.status_code} (redirects are not followed)",
                        status=response.status_code,
                    )
                if response.status_code == PARTIAL_STATUS and not whole_range(response.headers.get("content-range")):
                    # Never asked for a range: a part of the file is a cache's or a proxy's
                    # slice (a later part signs no image: until 2026-12-06 the page was
                    # "not an image", the work held back). The host's answer, retried.
                    raise SourceError(
                        TerminalReason.DOWNLOAD_FAILED,
                        "image HTTP 206: a part of the file where all of it was asked (Content-Range "
                        f"{clean_text(str(response.headers.get('content-range')))[:60]!r})",
                        status=response.status_code,
                    )
                await self._gate_ok()
                yield response
        except DestinationRefused as err:
            # The URL passed image_url: what is refused now is where the host's name led
            # (an address the guard refuses: a DNS sinkhole's 0.0.0.0, a captive portal, a
            # hijack) — the network's answer, about no work: a retried download. Until
            # 2026-12-07 it was ``unusable_url``, "what the source answered": the cell
            # moved on through every candidate, holding each, and the job ended
            # ``source_unusable``, blaming Pixiv's answers.
            raise SourceError(TerminalReason.DOWNLOAD_FAILED, f"image host refused at connect time: {err}") from None
        except AnswerTooLarge as err:
            raise WorkUnavailable(
                work_id,
                f"an image page is larger than {err.limit} bytes (outbound.download_max_bytes)",
                UnavailableKind.TOO_LARGE,
                limit_bytes=err.limit,
            ) from None
        except httpx.TimeoutException as err:
            raise SourceError(TerminalReason.DOWNLOAD_TIMEOUT, f"image timeout: {err}") from err
        except httpx.HTTPError as err:
            raise SourceError(TerminalReason.DOWNLOAD_FAILED, f"image request: {type(err).__name__}") from err

    async def image_chunks(self, response: httpx.Response) -> AsyncIterator[bytes]:
        """The body of an image opened by :meth:`open_image`, within ``download_max_bytes``
        counted from its bytes: a ``Content-Length`` over the limit is no refusal by
        itself (:func:`~curaflow.outbound.iter_capped` ``by_length=False``) — ``too_large``
        is a verdict on the work, and only the bytes may say it (2026-12-07).

        A body that begins as a JSON object (:func:`begins_as_json`: no image, zip or other
        file does) is held until it ends, or passes :data:`ERROR_BODY_BYTES`, and read as
        an error answer: Pixiv's rate limit in it is the account's (``rate_limited``, the
        gate's ladder climbed: reference §2.5, "classify by body, not status"; the words in
        a 2xx, :func:`~curaflow.sources.pixiv.client.answers.says_rate_limit`). Until
        2026-12-07 it was a page that is no image: every work a job met held back for an
        hour, the job ending ``source_unusable``, the account asking again all the while.
        Any other body passes whole, as it came: its first chunk decides at once.

        Raises:
            SourceError: ``rate_limited`` (above).
        """
        held: bytearray | None = bytearray()
        async for chunk in iter_capped(response, self._image_limits.max_bytes, by_length=False):
            if held is None or (not held and begins_as_json(chunk) is False):
                held = None  # an image's first chunk: passed on as it came, never copied
                yield chunk
                continue
            held += chunk
            if len(held) > ERROR_BODY_BYTES or begins_as_json(held) is False:
                yield bytes(held)
                held = None
        if held:
            await self._check_rate_limit(response, _json_of(bytes(held)))
            yield bytes(held)

    # ---- the Source protocol's download half (curaflow.sources.base) -------------

    @contextlib.asynccontextmanager
    async def download(self, url: str) -> AsyncIterator[ImageDownload]:
        """:meth:`open_image` as a :class:`~curaflow.sources.base.Download`: the announced
        length (``Content-Length`` when it is a number) and the body's chunks.

        Raises:
            SourceError / WorkUnavailable: as :meth:`open_image`.
        """
        async with self.open_image(url) as response:
            yield ImageDownload(self, response)


#: HTTP 206 Partial Content: an answer to a range request, which the client never makes.
PARTIAL_STATUS = 206
_BYTE_RANGE = re.compile(r"bytes ([0-9]{1,18})-([0-9]{1,18})/([0-9]{1,18})")


def whole_range(content_range: str | None) -> bool:
    """Whether a ``Content-Range`` (RFC 9110 §14.4) covers a whole file of known length:
    ``bytes 0-<length - 1>/<length>``. Anything else — a later or a shorter part, an
    unknown length (``/*``), an unsatisfied range, another unit, no header — is not the
    whole file."""
    match = _BYTE_RANGE.fullmatch((content_range or "").strip())
    if match is None:
        return False
    first, last, length = (int(g) for g in match.groups())
    return first == 0 and length > 0 and last == length - 1


#: The most of an image host's error answer read to find what it says (bytes).
ERROR_BODY_BYTES = 16_384


#: The bytes JSON allows before its first value (RFC 8259 §2).
JSON_WHITESPACE = b" \t\r\n"


def begins_as_json(data: bytes | bytearray) -> bool | None:
    """Whether ``data`` begins as a JSON object (``{`` after JSON's whitespace); None while
    it holds whitespace alone (the next bytes tell). No image format, zip or other file
    curaflow fetches begins so: its first byte answers."""
    for byte in data:
        if byte not in JSON_WHITESPACE:
            return byte == ord("{")
    return None


def _json_of(data: bytes) -> object:
    """The JSON of an error answer's bytes, every string cleaned; None when it is none."""
    try:
        return loads_clean(data.decode("utf-8", "replace"))  # JSON is UTF-8 (RFC 8259 §8.1)
    except ValueError:
        return None


async def _error_body(response: httpx.Response) -> object:
    """The JSON of a streamed error answer from its first :data:`ERROR_BODY_BYTES` (None when
    it is not JSON, or longer, or when its bytes cannot be read: its status decides then):
    never more is read, whatever ``Content-Length`` says, nor decoded than a step past it
    (:func:`~curaflow.outbound.iter_capped`; httpx's ``aiter_bytes`` decodes a raw chunk
    whole).

    Raises:
        httpx.TimeoutException: the download's time ran out while the body was read.
    """
    data = bytearray()
    try:
        async for chunk in iter_capped(response, None):
            data += chunk
            if len(data) > ERROR_BODY_BYTES:
                return None
    except httpx.TimeoutException:
        raise
    except httpx.HTTPError:  # a coding curaflow does not decode, a connection cut: nothing said
        return None
    return _json_of(bytes(data))


class ImageDownload:
    """One image being downloaded by :meth:`PixivClient.download`.

    Attributes:
        expected_bytes: the bytes the body yields as the image host announced them
            (:func:`~curaflow.outbound.announced_length`: ``Content-Length``, unless the
            host content-encoded the body although asked for ``identity``), else None.
    """

    def __init__(self, client: ImageRequests, response: httpx.Response) -> None:
        self._client = client
        self._response = response
        self.expected_bytes = announced_length(response)

    def chunks(self) -> AsyncIterator[bytes]:
        """The body within ``download_max_bytes`` (:meth:`PixivClient.image_chunks`)."""
        return self._client.image_chunks(self._response)

"""One outbound HTTP client per purpose, bounding every exchange in time, bytes and destination.

An :class:`Outbound` wraps an ``httpx.AsyncClient`` built on the guarded transport
(:func:`~curaflow.outbound.transport.guarded_transport`) and sends every request under
:class:`Limits`:

* **total time** (``Limits.time_s``, seconds): one ``asyncio.timeout`` around connecting,
  sending, and reading the whole answer — not httpx's per-read timeout, which a party that
  trickles a byte at a time never trips. It is never longer than what the current attempt
  has left before the job's deadline (:func:`attempt_deadline`). When it runs out the
  exchange is cancelled, which closes the connection, and
  :class:`~curaflow.outbound.errors.TimeLimitExceeded` tells whether the request had
  started to leave (``sent``: the outcome is unknown). A cancel of the calling task
  (Temporal's, through a heartbeat) cancels the exchange the same way, at once.
* **an answer whose body breaks**: once the status line and headers are in, a failure
  reading the body (cut before its ``Content-Length``, a ``Content-Encoding`` its bytes are
  not or that curaflow does not decode, the exchange's own time limit while it trickles)
  is raised as it came, carrying that status and those headers (:func:`answer_head`): the
  caller decides whether the status alone answers (a route's refusal does; a job's
  deadline carries none — the job's stop, not the party's answer).
* **bytes read**: ``max_bytes`` refuses a longer answer
  (:class:`~curaflow.outbound.errors.AnswerTooLarge`, at its ``Content-Length`` or as soon
  as the limit is crossed — only then for a caller whose refusal is a verdict on a work,
  :func:`iter_capped` ``by_length=False``); ``keep_bytes`` keeps only the start of an answer and drops the
  rest unread (a receiver's answer: its status and first KiB are all that matter). Both
  count decoded bytes: a ``Content-Encoding`` is undone by curaflow from the raw body, a
  bounded step at a time (:mod:`curaflow.outbound.decoding`), so an exchange holds no
  more than its limit and a few steps whatever the compression ratio; a coding it does
  not decode is refused (:class:`~curaflow.outbound.errors.UnsupportedContentEncoding`),
  and no request asks for one (``Accept-Encoding``).
* **destination**: the request's origin must be allowed before anything is sent, and the
  connection's address is checked when connecting
  (:mod:`curaflow.outbound.destinations`). Redirects are never followed.
* **a connection that answered 421** (:data:`NEW_CONNECTION_STATUSES`) is closed, never
  used again: the answer comes with its status and headers and no body (RFC 9110
  §15.5.20: the request is sent again over a different connection; until 2026-12-07 the
  kept-alive connection went back to the pool and the retry met the same server).

``sent`` is learnt from httpcore's trace hook (``http11.send_request_headers.started`` /
``http2.send_request_headers.started``): it fires once the connection — TCP and TLS — is
up and the request's first bytes are written, so a connect or a TLS handshake that never
completes is never "sent". A request whose connection broke while it was being written
(``send_request_headers.failed`` / ``send_request_body.failed`` with httpcore's
``WriteError``: the party reset or closed it) never left whole and nothing more of it can
leave: the party cannot have acted on it, so it is not sent either — with no answer it is
:class:`~curaflow.outbound.errors.RequestNotWhole` (an ``httpx.WriteError``; until
2026-12-06 it was the read's failure, taken for a request that had left: ambiguous). A
write cut by curaflow itself (the time limit, a cancel) is sent once the body's last
bytes were handed to the connection (:class:`_BodyEnd`: the part reaching its
``Content-Length``, or a chunked body's end) — what was handed on may still leave while
the connection closes, the last write's (the final empty chunk's) whole —, and not sent
before: the request's end never left this process, so the party never had it whole and
cannot have acted on it (until 2026-12-07 every cut after the head started was "maybe
sent": a Telegram or Discord album cut on a slow uplink every time ended
``delivery_unknown``, the work held on the route for good). That point is never later
than httpcore's ``send_request_body.complete``; the connection pool speaks HTTP/1.1 only
(no h2), and the rule is the body's, whatever the protocol. A caller that may cut a send
from outside (a cancel) asks :func:`in_flight` whether a request of it was out when it cut.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import http.cookiejar
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

from curaflow.outbound.decoding import ACCEPT_ENCODING, ask_only_decoded, content_codings, decoded_chunks
from curaflow.outbound.destinations import Destinations
from curaflow.outbound.errors import (
    DestinationRefused,
    TimeLimitExceeded,
    not_whole_error,
    time_limit_error,
    too_large_error,
)
from curaflow.outbound.transport import GuardedBackend, guarded_transport, head_ended, head_started

#: The header an answer's ``Location`` is moved to when it names no URL curaflow could read
#: (:func:`_set_aside_unreadable_location`): the answer stays the receiver's 3xx.
UNREADABLE_LOCATION = "x-curaflow-unreadable-location"


async def _set_aside_unreadable_location(response: httpx.Response) -> None:
    """An httpx response hook: a 3xx whose ``Location`` names no URL httpx can read
    (``http://[::1``, a port that is no number, an IPv6 host that is none) has it moved to
    :data:`UNREADABLE_LOCATION`, so the answer reaches its reader as the receiver's 3xx.

    curaflow follows no redirect (``follow_redirects=False``), yet httpx builds the
    redirect's request from every 3xx carrying a ``Location`` — after the response hooks —
    and raises ``RemoteProtocolError`` ("Invalid URL in location header") when it cannot
    read one (httpx 0.28–0.29, ``AsyncClient._redirect_url``). An answer that came was
    then a transport failure after the request left: "outcome unknown", a Telegram or
    Discord work blocked for good where ambiguity fails, a webhook's 301 possibly
    delivered (2026-12-07, found by ``tests/unit/test_permanent_verdicts_property.py``).

    The Location is read as httpx reads it to build that request (:func:`_redirect_read`),
    every step: until 2026-12-08 only its parse and its join were, and a ``Location`` that
    parsed then failed a later step — ``https://xn--ls8h.la/`` (its host decoded by IDNA
    only on reading: ``idna.IDNAError``), ``mailto:hook@example.test`` or ``a:b`` (a scheme
    and no host, given the request's host: ``InvalidURL``) — raised from the redirect's
    build: an exception of no route's reading, ``internal_error``, the work blocked on the
    route for good.
    """
    if not response.has_redirect_location:
        return
    location = response.headers["location"]
    try:
        _redirect_read(response.request, location)
    except Exception:  # noqa: BLE001 - whatever httpx cannot read is no URL to it
        del response.headers["location"]
        response.headers[UNREADABLE_LOCATION] = location


def _redirect_read(request: httpx.Request, location: str) -> None:
    """Read ``location`` as httpx does to build a redirect's request (httpx 0.28–0.29,
    ``BaseClient._redirect_url`` and ``_redirect_headers``): parsed; given the request's
    host when it names a scheme and no host; joined to the request's URL when relative;
    given the request's fragment; its host decoded (IDNA, decoded only on reading) and its
    netloc read as ASCII (the redirect's ``Host``).

    Raises:
        Exception: whatever httpx would raise building that request (``InvalidURL``, an
            ``idna.IDNAError``, a ``UnicodeError``).
    """
    url = httpx.URL(location)
    if url.scheme and not url.host:
        url = url.copy_with(host=request.url.host)
    if url.is_relative_url:
        url = request.url.join(url)
    if request.url.fragment and not url.fragment:
        url = url.copy_with(fragment=request.url.fragment)
    _ = (url.host, url.port, url.netloc.decode("ascii"))


#: Bytes of an answer kept when only its status and first words matter (a callback
#: push's receiver: its status decides).
ANSWER_KEEP_BYTES = 16 * 1024
#: Bytes of a route's answer kept: a route reads what the receiver did from it whole — a
#: Telegram album's answer is every ``Message`` posted, about 17 KB for 10 photos in a
#: forum topic and about 44 KB at the platform's limits (a caption of 1024 units escaped
#: as ``\uXXXX``, chat and topic titles of 128 characters), a Discord
#: message's every attachment and its content. An answer cut shorter is no JSON, which a
#: route must take for an unknown outcome: until 2026-12-05 routes kept
#: :data:`ANSWER_KEEP_BYTES`, and a 10-photo album posted in a topic ended
#: ``delivery_unknown`` on an at-most-once route. Still a bound: an endless or huge answer
#: costs at most this much memory per send, the rest never read.
ROUTE_ANSWER_KEEP_BYTES = 256 * 1024
#: Read size of a streamed body (the transport's: httpcore reads at most 64 KiB at once),
#: and the most a content-encoded body is decoded to at once, per coding
#: (:mod:`curaflow.outbound.decoding`).
CHUNK_BYTES = 64 * 1024

#: Statuses after which the connection that answered is never used again: ``421
#: Misdirected Request`` (RFC 9110 §15.5.20: that connection reached a server that does not
#: serve the URL's origin, and the request "MAY be retried … over a different connection").
#: Its body is not read (the status is the whole answer: a send again,
#: :data:`curaflow.routes.base.SEND_AGAIN_STATUSES`), so the transport closes the connection.
NEW_CONNECTION_STATUSES = frozenset({421})

_ATTEMPT_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("attempt_deadline", default=None)


class InFlight:
    """Requests made inside :func:`in_flight` that started to leave (httpcore's trace
    hook) and whose exchange has not ended — the ones whose outcome a cut makes unknown.

    Attributes:
        out: how many such requests there are now.
    """

    out: int = 0


_IN_FLIGHT: contextvars.ContextVar[InFlight | None] = contextvars.ContextVar("in_flight", default=None)


@contextlib.contextmanager
def in_flight() -> Iterator[InFlight]:
    """Count the requests of the exchanges made inside (also by tasks created inside,
    which copy the context) that are out: a request counts from the moment its headers
    start to leave until its exchange ended (the answer read, or an error raised), its
    connection broke while it was being written (the party reset it), or it was cut
    before its body's last bytes were handed on (:class:`_BodyEnd`), so a request cut
    while connecting or in the TLS handshake, or whose end never left, never counts."""
    flight = InFlight()
    token = _IN_FLIGHT.set(flight)
    try:
        yield flight
    finally:
        _IN_FLIGHT.reset(token)


@contextlib.contextmanager
def attempt_deadline(deadline_at_ms: int | None) -> Iterator[None]:
    """Bound every exchange made inside by the job's deadline (epoch ms, UTC; None: none).

    The deadline is turned into a monotonic instant once, on entry, so a clock step
    does not move it. Nested uses keep the earlier deadline.
    """
    if deadline_at_ms is None:
        yield
        return
    at = time.monotonic() + (deadline_at_ms - time.time() * 1000) / 1000
    current = _ATTEMPT_DEADLINE.get()
    token = _ATTEMPT_DEADLINE.set(at if current is None else min(at, current))
    try:
        yield
    finally:
        _ATTEMPT_DEADLINE.reset(token)


def time_left(limit_s: float) -> float:
    """``limit_s`` or what the attempt has left before the job's deadline, whichever is
    shorter (seconds, ≥ 0)."""
    at = _ATTEMPT_DEADLINE.get()
    if at is None:
        return max(0.0, limit_s)
    return max(0.0, min(limit_s, at - time.monotonic()))


def past_deadline() -> bool:
    """True when the current attempt runs under a job's deadline (:func:`attempt_deadline`)
    and it has passed: whatever an exchange failed with now, the job's own bound cut it,
    not the party's answer."""
    at = _ATTEMPT_DEADLINE.get()
    return at is not None and at <= time.monotonic()


@dataclass(frozen=True)
class Limits:
    """The bounds of one exchange.

    Attributes:
        time_s: total time, seconds (connect + send + whole answer).
        max_bytes: longest answer accepted (decoded bytes); None: no limit.
        keep_bytes: keep at most this many bytes of the answer and stop reading (the
            answer is marked truncated); None: read it all (within ``max_bytes``).
    """

    time_s: float
    max_bytes: int | None = None
    keep_bytes: int | None = None


class _BodyEnd(httpx.AsyncByteStream):
    """A request's body as httpcore takes it, part by part, to write each to the
    connection: it notes when the body's *last* bytes were handed on.

    ``handed`` is True once the part holding the body's last byte was taken — by the
    length its ``Content-Length`` states (at once for a body of none: the request's head
    is then all of it), or, for a chunked body, once the body ended (the terminating
    empty chunk is written next). It is set before that part's write begins, so a write
    cut after its bytes were handed to the connection — the last part's, or the final
    empty chunk's, which may have left whole before the cut — is never taken for one
    that was not.

    Args:
        stream: the request's body.
        length: its ``Content-Length``; None for a chunked body.
    """

    def __init__(self, stream: httpx.AsyncByteStream, length: int | None) -> None:
        self._stream = stream
        self._left = length
        self.handed = length == 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self._stream:
            if self._left is not None:
                self._left -= len(part)
                if self._left <= 0:
                    self.handed = True
            yield part
        self.handed = True

    async def aclose(self) -> None:
        await self._stream.aclose()


def _body_length(request: httpx.Request) -> int | None:
    """The number of body bytes ``request`` says it carries — its ``Content-Length``, 0
    when it states neither a length nor ``Transfer-Encoding: chunked`` (HTTP/1.1: no body)
    — or None for a chunked body (its end is the empty chunk that follows the last part)."""
    length = request.headers.get("content-length", "").strip()
    if length.isdigit():
        return int(length)
    if "chunked" in request.headers.get("transfer-encoding", "").lower():
        return None
    return 0


class _Trace:
    """httpcore trace hook: remembers whether the request started to leave and whether
    its end may have left (and counts it in the caller's :class:`InFlight` from its first
    byte until :meth:`ended`, or until writing it failed).

    Attributes:
        sent: the request's headers started to leave.
        broken: the connection broke while the request's headers or body were written
            (httpcore's ``WriteError``: the party reset or closed it): its end never left,
            so the party never had the whole request.
        body: the request's body as httpcore takes it (:class:`_BodyEnd`: whether its last
            bytes were handed to the connection); None for a request sent without one.
    """

    def __init__(self, flight: InFlight | None) -> None:
        self.sent = False
        self.broken = False
        self.body: _BodyEnd | None = None
        self._flight = flight

    @property
    def left(self) -> bool:
        """Whether the whole request may have reached the party: it started to leave,
        writing it did not fail, and its last bytes were handed to the connection
        (:class:`_BodyEnd`) — written to its end, or its last write under way. A request
        cut (the time limit, a cancel) while its body was still being handed on never left
        whole: its end never left this process, and the party cannot have acted on it."""
        return self.sent and not self.broken and (self.body is None or self.body.handed)

    async def __call__(self, event: str, info: dict[str, Any]) -> None:
        if event.endswith("receive_response_headers.started"):
            head_started()  # the head's reads are bounded (transport.MAX_ANSWER_HEAD_BYTES)
        elif event.endswith(("receive_response_headers.complete", "receive_response_headers.failed")):
            head_ended()
        if event.endswith("send_request_headers.started") and not self.sent:
            self.sent = True
            if self._flight is not None:
                self._flight.out += 1
        elif event.endswith(("send_request_headers.failed", "send_request_body.failed")) and isinstance(
            info.get("exception"), httpcore.WriteError
        ):
            # The connection broke under the write (the party reset or closed it): the
            # request's end never left, and nothing more of it can. A cut of our own (the
            # time limit, a cancel) is not this: what was handed to the connection may
            # still leave while it closes, so such a request stays out (ambiguous).
            self.broken = True
            self.ended()

    def ended(self) -> None:
        """The exchange ended (answered or failed): its outcome is no longer in the air."""
        if self.sent and self._flight is not None:
            self._flight.out -= 1
            self._flight = None


#: The attribute of an exchange's failure holding the answer's head (:func:`answer_head`).
_HEAD_ATTRIBUTE = "curaflow_answer_head"


def answer_head(err: BaseException) -> httpx.Response | None:
    """The status and headers of the answer whose body ``err`` broke (:meth:`Outbound.send`:
    cut mid-way, a ``Content-Encoding`` its bytes are not or that curaflow does not
    decode, the exchange's own time limit while the body trickled), as a response with
    no body (:func:`is_truncated` true); None when ``err`` came before an answer's head,
    or is the job's deadline (``TimeLimitExceeded.by_deadline``)."""
    head = getattr(err, _HEAD_ATTRIBUTE, None)
    return head if isinstance(head, httpx.Response) else None


def is_truncated(response: httpx.Response) -> bool:
    """Whether :meth:`Outbound.send` dropped the rest of ``response``'s body (``keep_bytes``)."""
    return bool(response.extensions.get("curaflow_truncated"))


def announced_length(response: httpx.Response) -> int | None:
    """How many bytes the body of ``response`` will yield, as its headers announce it:
    ``Content-Length`` when it is a number and counts those bytes — no
    ``Content-Encoding`` but ``identity`` (:func:`~curaflow.outbound.decoding.content_codings`
    empty) —, else None.

    A party that content-encodes its answer although asked for ``identity`` (a mirror, a
    CDN gzipping images) sends the *encoded* length, and :func:`iter_capped` yields the
    decoded bytes: compared with them, a whole body read as cut short (2026-12-05: every
    page of such an image host was ``download_failed``, every attempt of every job).
    Whether such a body is whole is then for its own framing to say (the image check, the
    zip's directory).
    """
    length = response.headers.get("content-length", "")
    if not length.isdigit() or content_codings(response.headers):
        return None
    return int(length)


async def iter_capped(
    response: httpx.Response, max_bytes: int | None, *, by_length: bool = True
) -> AsyncIterator[bytes]:
    """The decoded body of a streamed ``response``, refused past ``max_bytes`` (decoded
    bytes), read raw and decoded by curaflow
    (:func:`~curaflow.outbound.decoding.decoded_chunks`): an answer with no
    ``Content-Encoding`` in the chunks the transport read (at most 64 KiB each, as they
    came, never copied), an encoded one in chunks of at most :data:`CHUNK_BYTES`, each
    decoded only when the one before was taken.

    So a compression bomb is refused at ``max_bytes`` having held at most that and a few
    steps (DESIGN "The outbound layer", 2026-12-06): httpx decoded each raw chunk whole
    with no bound — one 64 KiB chunk of a 1000:1 gzip stream was ~64 MiB before the cap
    could look at it, 130 MiB of peak RSS per exchange.

    Args:
        by_length: refuse an answer whose ``Content-Length`` is over ``max_bytes`` before
            reading it (what saves the bytes of an answer whose refusal blames nobody: an
            API page, a receiver's answer). False: only the bytes counted decide — a
            caller whose refusal is a verdict on a work (an image page, a frames zip:
            :func:`curaflow.sources.corroboration.sized`) may not take a header's word for
            it; such a body is read to the first chunk past the limit at most (within the
            exchange's time limit), and one that ends short of the length it announced is
            a body cut short (2026-12-07: a lying header cost the work the week).

    Raises:
        AnswerTooLarge: ``Content-Length`` over the limit (nothing read; only with
            ``by_length``), or the body crossed it.
        UnsupportedContentEncoding: a coding curaflow does not decode (nothing read).
        httpx.DecodingError: bytes that are not their coding, as httpx raises it.
    """
    if max_bytes is not None and by_length:
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > max_bytes:
            raise too_large_error(max_bytes, response.request)
    received = 0
    async for chunk in decoded_chunks(response, CHUNK_BYTES):
        received += len(chunk)
        if max_bytes is not None and received > max_bytes:
            raise too_large_error(max_bytes, response.request)
        yield chunk


#: Headers of a streamed answer that do not describe the body :meth:`Outbound.send` returns
#: (decoded by :func:`iter_capped`, and cut to ``keep_bytes``): the rebuilt response must
#: not decode it again, nor check it against the encoded length.
_REBUILT_WITHOUT = (b"content-encoding", b"transfer-encoding", b"content-length")


class _KeepsNoCookies(http.cookiejar.CookieJar):
    """A cookie jar that keeps nothing: no party curaflow talks to needs a cookie (Pixiv's
    app-api and the bots' APIs authenticate by token, image hosts by ``Referer``, receivers
    by signature), and a jar that kept them would let any party grow every later request
    to it (and the client's memory) with each answer, and carry one job's state into the
    next. ``Set-Cookie`` is ignored without being parsed."""

    def set_cookie(self, cookie: http.cookiejar.Cookie) -> None:
        return None

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None


class Outbound:
    """The outbound client of one purpose (the source, one route, the pushes).

    The client it builds keeps no cookie (:class:`_KeepsNoCookies`), reads every 3xx as
    an answer, whatever its ``Location`` (:func:`_set_aside_unreadable_location`, on a
    client handed in too) and asks for the content codings curaflow decodes
    (:data:`~curaflow.outbound.decoding.ACCEPT_ENCODING`); whatever the client, a request
    never asks for another (:meth:`stream`).

    Args:
        destinations: what it may reach.
        http: an existing client to send with (tests; no connect-time address check
            then); None builds one on the guarded transport.
        max_connections: pool size when building the client.
        connect_timeout_s: longest TCP/TLS connect, seconds (within the total limit).
    """

    def __init__(
        self,
        destinations: Destinations,
        *,
        http: httpx.AsyncClient | None = None,
        max_connections: int = 100,
        connect_timeout_s: float = 10.0,
    ) -> None:
        self.destinations = destinations
        self._backend: GuardedBackend | None = None
        if http is None:
            limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=min(20, max_connections))
            self._backend = GuardedBackend(destinations)
            http = httpx.AsyncClient(
                transport=guarded_transport(destinations, limits, self._backend),
                cookies=_KeepsNoCookies(),
                headers={"Accept-Encoding": ACCEPT_ENCODING},
                timeout=httpx.Timeout(None, connect=connect_timeout_s),
                follow_redirects=False,
                trust_env=False,
            )
        hooks = http.event_hooks
        if _set_aside_unreadable_location not in hooks["response"]:  # a client handed in too
            hooks["response"].append(_set_aside_unreadable_location)
            http.event_hooks = hooks
        self.http = http

    def check(self, url: httpx.URL) -> None:
        """Refuse a URL whose origin is not allowed.

        Raises:
            DestinationRefused: scheme, host or port not allowed (port 0 never is).
        """
        if not self.destinations.allows_url(url):
            raise DestinationRefused(f"{url.scheme}://{url.host}:{url.port or ''} is not an allowed destination")

    def build_request(self, method: str, url: str, **kwargs: Any) -> httpx.Request:
        """``httpx.AsyncClient.build_request`` of the underlying client."""
        return self.http.build_request(method, url, **kwargs)

    async def request(self, method: str, url: str, *, limits: Limits, **kwargs: Any) -> httpx.Response:
        """Build and :meth:`send` a request (``kwargs`` as ``httpx.AsyncClient.build_request``)."""
        return await self.send(self.build_request(method, url, **kwargs), limits)

    async def send(self, request: httpx.Request, limits: Limits) -> httpx.Response:
        """Send ``request`` and read its answer within ``limits``.

        Returns:
            The answer with its body read (at most ``keep_bytes``; :func:`is_truncated`
            tells whether the rest was dropped). The connection of a truncated answer
            is closed.

        Raises:
            DestinationRefused: the destination guard refused it (nothing sent).
            TimeLimitExceeded: the total time (or the job's deadline) ran out.
            AnswerTooLarge: over ``max_bytes``.
            UnsupportedContentEncoding: a ``Content-Encoding`` curaflow does not decode.
            httpx.HTTPError: any other transport failure, as httpx raises it. A failure
                met after the answer's status and headers came carries them
                (:func:`answer_head`), unless the job's deadline cut it.
        """
        head: httpx.Response | None = None
        try:
            async with self.stream(request, limits) as response:
                head = response
                kept: list[bytes] = []
                size = 0
                truncated = is_truncated(response)  # a 421's body is never read
                async for chunk in iter_capped(response, limits.max_bytes):
                    if limits.keep_bytes is not None and size + len(chunk) > limits.keep_bytes:
                        kept.append(chunk[: limits.keep_bytes - size])
                        truncated = True
                        break
                    kept.append(chunk)
                    size += len(chunk)
                return _rebuilt(response, request, b"".join(kept), truncated)
        except httpx.HTTPError as err:
            # The status line and headers were in: they go with the failure, for the
            # caller to judge (a job's deadline is no answer of the party's).
            if head is not None and not (isinstance(err, TimeLimitExceeded) and err.by_deadline):
                setattr(err, _HEAD_ATTRIBUTE, _rebuilt(head, request, b"", True))
            raise

    @contextlib.asynccontextmanager
    async def stream(self, request: httpx.Request, limits: Limits) -> AsyncIterator[httpx.Response]:
        """Open ``request`` as a streamed answer, the whole ``async with`` body under the
        total time limit (read the body with :func:`iter_capped`: httpx's decoding of
        ``aiter_bytes`` has no bound). Its ``Accept-Encoding`` loses any coding curaflow
        does not decode (:func:`~curaflow.outbound.decoding.ask_only_decoded`). An answer
        of :data:`NEW_CONNECTION_STATUSES` is yielded with no body (its status and
        headers; :func:`is_truncated` true), its connection closed unread.

        Raises:
            as :meth:`send` (``TimeLimitExceeded`` at the exit of the block when the time
            ran out inside it).
        """
        self.check(request.url)
        ask_only_decoded(request)
        trace = _Trace(_IN_FLIGHT.get())
        request.extensions = {**request.extensions, "trace": trace}
        if isinstance(request.stream, httpx.AsyncByteStream):
            trace.body = _BodyEnd(request.stream, _body_length(request))
            request.stream = trace.body
        budget = time_left(limits.time_s)
        by_deadline = budget < limits.time_s
        if budget <= 0:
            raise time_limit_error(limits.time_s, False, request, by_deadline=True)
        answered = False
        head_ended()  # no head budget left over from an exchange cut in this task
        try:
            async with asyncio.timeout(budget):
                response = await self.http.send(request, stream=True)
                answered = True
                if response.status_code in NEW_CONNECTION_STATUSES:
                    await response.aclose()  # unread: the transport closes its connection
                    response = _bodiless(response, request)
                try:
                    yield response
                finally:
                    await response.aclose()
        except TimeoutError:
            # Cut by the time limit: the caller classifies it (sent → ambiguous; a request
            # whose connection broke under the write before, or whose body's end was never
            # handed on → not sent) and the exchange is over.
            trace.ended()
            raise time_limit_error(budget, trace.left, request, by_deadline=by_deadline) from None
        except asyncio.CancelledError:
            if not trace.left:
                trace.ended()  # its end never left: not out
            raise  # cut from outside: a request whose end may have left stays out, its outcome unknown
        except httpx.TransportError as err:
            trace.ended()
            if trace.broken and not answered:
                # Writing the request failed and no answer came (httpcore swallowed the
                # write's error to look for an early answer, then failed reading).
                raise not_whole_error(request, err) from err
            raise
        except BaseException:
            trace.ended()
            raise
        finally:
            head_ended()
        trace.ended()

    async def aclose(self) -> None:
        """Close the underlying client and its connections, and its resolver's threads
        (:class:`~curaflow.outbound.transport.Resolver`) when it built one."""
        await self.http.aclose()
        if self._backend is not None:
            self._backend.resolver.close()


def _rebuilt(response: httpx.Response, request: httpx.Request, content: bytes, truncated: bool) -> httpx.Response:
    """``response`` with ``content`` as its whole body (already decoded) and the header
    bytes as they came: decoded text (a receiver's UTF-8 or Latin-1 value) would be
    encoded again as ASCII and raise."""
    headers = [(k, v) for k, v in response.headers.raw if k.lower() not in _REBUILT_WITHOUT]
    return httpx.Response(
        response.status_code,
        headers=headers,
        content=content,
        request=request,
        extensions={"curaflow_truncated": truncated, "http_version": response.http_version.encode()},
    )


def _bodiless(response: httpx.Response, request: httpx.Request) -> httpx.Response:
    """``response``'s status and header bytes with an empty, unread body (a stream, so it
    reads as any streamed answer), marked truncated; no framing header (it describes no
    body any more)."""
    headers = [(k, v) for k, v in response.headers.raw if k.lower() not in _REBUILT_WITHOUT]
    return httpx.Response(
        response.status_code,
        headers=headers,
        stream=httpx.ByteStream(b""),
        request=request,
        extensions={"curaflow_truncated": True, "http_version": response.http_version.encode()},
    )


def as_outbound(http: httpx.AsyncClient | Outbound, destinations: Destinations) -> Outbound:
    """``http`` itself when it is an :class:`Outbound`, else an :class:`Outbound` sending
    with that client to ``destinations`` (origins checked; addresses only by the
    client's own transport)."""
    return http if isinstance(http, Outbound) else Outbound(destinations, http=http)

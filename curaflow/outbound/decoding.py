"""An answer's ``Content-Encoding`` decoded by curaflow, a bounded step at a time.

httpx decodes ``Content-Encoding`` by handing each raw chunk the transport read (up to
64 KiB) to zlib whole, with no bound on the output (``httpx._decoders``: no
``max_length``): one 64 KiB chunk of a 1000:1 gzip stream is ~64 MiB decoded before a
byte cap can look at it — 130 MiB of peak RSS per exchange, measured (DESIGN "The outbound
layer"). So the outbound layer reads an answer's raw bytes (``Response.aiter_raw``: httpx
decodes nothing then) and decodes them here, with ``zlib.decompressobj(...).decompress(data,
max_length)`` — each call yields at most ``max_length`` bytes and keeps the input it did
not reach in ``unconsumed_tail``, fed back until it is used (Python's ``zlib`` docs,
"Decompress.decompress"). An exchange then holds at most a step per coding beyond what its
caller keeps: a bomb is refused at ``max_bytes`` with a few MiB at most.

What is decoded is what httpx decodes, to the same bytes (RFC 9110 §8.4.1 for the names):

* ``gzip`` (and ``x-gzip``, which RFC 9110 §8.4.1.3 tells a recipient to take for it):
  one gzip member (zlib's ``wbits`` 16 + ``MAX_WBITS``);
* ``deflate``: the zlib format (RFC 9110 §8.4.1.2, ``wbits`` ``MAX_WBITS``) — or, as httpx
  does, a raw deflate stream (``-MAX_WBITS``) when the first bytes are no zlib stream (what
  some servers send under that name);
* ``identity``: the bytes as they came (also an empty coding);
* several codings (comma-separated, or over several header lines) are undone in the
  reverse of the order listed (RFC 9110 §8.4: listed in the order applied).

Bytes after the end of a compressed stream are ignored, and a stream that ends early
yields what it held, as httpx does: whether such a body is whole is for its framing
(``Content-Length``) or its own format to say. ``br`` and ``zstd`` are decoded by httpx only
when the optional ``brotli`` / ``zstandard`` packages are installed (neither is a
dependency of curaflow), with no bound either: here they are refused, as every coding not
listed above (``compress``, ``*``, a name never seen) — :class:`UnsupportedContentEncoding`,
the party's answer failing to be read (httpx passed such a body on as if not encoded).
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Iterator

import httpx

from curaflow.outbound.errors import UnsupportedContentEncoding

#: Content codings curaflow decodes, besides ``identity`` (their zlib ``wbits``).
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
#: ``Accept-Encoding`` of the clients :class:`~curaflow.outbound.client.Outbound` builds:
#: the codings it decodes (httpx's default adds ``br`` / ``zstd`` when their packages are
#: installed, which this layer refuses).
ACCEPT_ENCODING = "gzip, deflate"
#: Codings a request may ask for (``Accept-Encoding``): those decoded, and ``identity``.
_ASKABLE = frozenset((*_WBITS, "identity"))


def content_codings(headers: httpx.Headers) -> list[str]:
    """The content codings of an answer in the order they were applied (RFC 9110 §8.4):
    every ``Content-Encoding`` value, lower-cased, ``identity`` and empty items dropped.
    ``[]``: the body is the content as it came."""
    codings = []
    for value in headers.get_list("content-encoding", split_commas=True):
        coding = value.strip().lower()
        if coding and coding != "identity":
            codings.append(coding)
    return codings


def ask_only_decoded(request: httpx.Request) -> None:
    """Drop from ``request``'s ``Accept-Encoding`` every coding curaflow does not decode
    (``br``, ``zstd``, ``*`` …), keeping the rest as written (weights included);
    ``identity`` when none is left. A request without the header, or asking only for
    decoded codings, is left as it is.

    httpx's default header asks for ``br`` and ``zstd`` whenever their packages happen to
    be installed: a server would then encode answers so, and every one would be refused.
    """
    asked = request.headers.get("accept-encoding")
    if asked is None:
        return
    items = [item for item in asked.split(",") if item.strip()]
    kept = [item.strip() for item in items if item.split(";", 1)[0].strip().lower() in _ASKABLE]
    if len(kept) != len(items):
        request.headers["Accept-Encoding"] = ", ".join(kept) or "identity"


def decoded_chunks(response: httpx.Response, step: int) -> AsyncIterator[bytes]:
    """The body of a streamed ``response`` with its ``Content-Encoding`` undone, read raw.

    An answer with no coding (or ``identity``) is ``response.aiter_raw()`` itself: the
    chunks as the transport read them (at most 64 KiB each), never copied. An encoded one
    yields chunks of at most ``step`` bytes, each decoded only when asked for. A response
    read already (built with its content: ``httpx.MockTransport``'s) yields that content.

    An answer with no body (:func:`_bodiless`: a HEAD's, a 1xx, 204 or 304, a
    ``Content-Length`` of 0) has nothing to decode, whatever its ``Content-Encoding``: it is
    ``aiter_raw()`` (no bytes), never refused.

    Raises:
        UnsupportedContentEncoding: a coding curaflow does not decode (at once, nothing read)
            on an answer that may have a body.
        httpx.DecodingError: bytes that are not their coding (zlib's error), as httpx raises it.
        httpx.HTTPError: what reading the raw body raises.
    """
    codings = content_codings(response.headers)
    if codings and _bodiless(response):
        # No byte to decode or misread: a HEAD's or a 304's coding even names a body not sent.
        return response.aiter_raw()
    for coding in codings:
        if coding not in _WBITS:
            err = UnsupportedContentEncoding(
                f"the answer is content-encoded as {coding!r}, which curaflow does not decode "
                "(gzip, deflate and identity only)",
                request=response.request,
            )
            err.coding = coding
            raise err
    if response.is_stream_consumed:
        # Read before it came here — a response built with its content, as
        # ``httpx.MockTransport`` answers: httpx decoded it then, and ``aiter_bytes`` hands
        # that on without decoding it again (or raises ``StreamConsumed``, as it would).
        return response.aiter_bytes()
    if not codings:
        return response.aiter_raw()
    inflaters = [_Inflater(coding, response.request) for coding in reversed(codings)]
    return _decoding(response.aiter_raw(), inflaters, step)


def _bodiless(response: httpx.Response) -> bool:
    """Whether ``response`` has no body to decode: the answer to a HEAD, a 1xx, a 204 or a
    304 (RFC 9110 §6.4.1: whatever its headers say, no content follows), or one whose
    ``Content-Length`` is 0."""
    return (
        response.request.method == "HEAD"
        or response.status_code < 200
        or response.status_code in (204, 304)
        or response.headers.get("content-length", "").strip() == "0"
    )


async def _decoding(raw: AsyncIterator[bytes], inflaters: list[_Inflater], step: int) -> AsyncIterator[bytes]:
    """``raw`` through ``inflaters`` (the outermost coding first), ``step`` bytes at most
    per chunk and per coding held at once."""
    async for chunk in raw:
        for piece in _through(inflaters, 0, chunk, step):
            yield piece


def _through(inflaters: list[_Inflater], at: int, data: bytes, step: int) -> Iterator[bytes]:
    """``data`` decoded by ``inflaters[at:]``, a step of each at a time."""
    if at == len(inflaters) - 1:
        yield from inflaters[at].feed(data, step)
        return
    for piece in inflaters[at].feed(data, step):
        yield from _through(inflaters, at + 1, piece, step)


#: How many bytes of a ``deflate`` answer that decoded to nothing yet are kept to read
#: again as a raw deflate stream: the most one transport read gives (httpx's first call).
_RAW_PROBE_BYTES = 65536


class _Inflater:
    """One zlib stream of a coding (``gzip``, ``x-gzip`` or ``deflate``), decoded a step
    at a time.

    ``deflate`` first reads the zlib format; if that fails before anything was decoded,
    it starts again on the bytes fed as a raw deflate stream — httpx's fallback
    (``httpx._decoders.DeflateDecoder``), which httpx tries on an error of its first call
    only: a first raw chunk of one byte cannot fail (zlib judges its two-byte header with
    the second), so the same answer was decoded or refused by how the transport cut it.
    Here the fallback holds while nothing was decoded from the first
    :data:`_RAW_PROBE_BYTES` fed (or the first call's bytes, were they more), however they
    came.
    """

    def __init__(self, coding: str, request: httpx.Request) -> None:
        self._zlib = zlib.decompressobj(_WBITS[coding])
        #: The bytes fed while the stream may still be raw deflate (None: it may not).
        self._fed: bytearray | None = bytearray() if coding == "deflate" else None
        self._request = request

    def feed(self, data: bytes, step: int) -> Iterator[bytes]:
        """What ``data`` decodes to, in pieces of at most ``step`` bytes, each made only when
        the previous one was taken; nothing once the stream has ended (what follows its end
        is ignored).

        Raises:
            httpx.DecodingError: ``data`` is not the rest of the stream (zlib's error).
        """
        fed = self._fed
        if fed is not None:
            fed += data
        tail = data
        while not self._zlib.eof:
            try:
                out = self._zlib.decompress(tail, step)
            except zlib.error as exc:
                if fed is None:
                    raise httpx.DecodingError(str(exc), request=self._request) from exc
                # Not the zlib format: a raw deflate stream, read from the first byte.
                self._fed = None
                self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
                yield from self.feed(bytes(fed), step)
                return
            left = self._zlib.unconsumed_tail
            if out:
                fed = self._fed = None
                yield out
            elif left and len(left) >= len(tail):
                # zlib returns with input left only once its output is full: never here.
                raise httpx.DecodingError("the decompressor made no progress", request=self._request)
            tail = left
            # A full step may leave output inside zlib (a long match half copied): ask again.
            if not tail and len(out) < step:
                break
        if fed is not None and len(fed) > _RAW_PROBE_BYTES:
            self._fed = None  # so much and nothing decoded: the zlib format's, or nothing

"""A content-encoded answer through the outbound layer (curaflow.outbound.decoding).

curaflow reads every answer's raw bytes and decodes its ``Content-Encoding`` itself, a
bounded step at a time (the bomb's memory: ``tests/unit/test_outbound.py``). What it
decodes is what httpx decoded — ``gzip`` (and ``x-gzip``, RFC 9110 §8.4.1.3), ``deflate``
(zlib-wrapped, and the raw deflate some servers send under that name), ``identity``,
several codings in the order applied — to the same bytes; an answer labelled with a
coding it does not decode is refused as the party's (httpx passed its bytes on as if
they were not encoded: an image host's ``br`` answer read as a page that is no image).
"""

from __future__ import annotations

import io
import random
import zlib
from collections.abc import AsyncIterator, Iterable

import httpx
import pytest
from PIL import Image

from curaflow.domain.reasons import TerminalReason
from curaflow.outbound import (
    Limits,
    Outbound,
    UnsupportedContentEncoding,
    answer_head,
    configured,
    is_truncated,
    iter_capped,
)
from curaflow.outbound.client import CHUNK_BYTES
from curaflow.sources.errors import SourceError
from curaflow.sources.pixiv.client import PixivClient
from tests.fakes.hostile import Behaviour, HostileParty

#: Half noise, half runs: spans many raw chunks and many decoded steps.
BODY = random.Random(7).randbytes(300_000) + b"curaflow " * 60_000


def encoded(data: bytes, codings: Iterable[str]) -> bytes:
    """``data`` encoded by ``codings`` in the order applied (``raw-deflate``: a deflate
    stream with no zlib wrapper, what some servers send as ``deflate``)."""
    for coding in codings:
        wbits = {"gzip": 31, "x-gzip": 31, "deflate": 15, "raw-deflate": -15}[coding]
        packer = zlib.compressobj(6, zlib.DEFLATED, wbits)
        data = packer.compress(data) + packer.flush()
    return data


#: (label sent as Content-Encoding, codings applied in order)
ENCODED = [
    ("gzip", ["gzip"]),
    ("x-gzip", ["x-gzip"]),
    ("deflate", ["deflate"]),
    ("deflate", ["raw-deflate"]),
    ("deflate, gzip", ["deflate", "gzip"]),
    ("GZip , identity", ["gzip"]),
    ("identity", []),
]


@pytest.mark.parametrize(("label", "codings"), ENCODED, ids=[f"{a}<-{'+'.join(b)}" for a, b in ENCODED])
async def test_an_encoded_answer_decodes_to_its_bytes(party: HostileParty, label: str, codings: list[str]) -> None:
    party.default = Behaviour(body=encoded(BODY, codings), headers=(("content-encoding", label),))
    out = Outbound(configured(party.url))
    response = await out.request("GET", party.url + "/x", limits=Limits(time_s=10, max_bytes=len(BODY)))
    assert response.content == BODY
    assert "content-encoding" not in response.headers  # decoded: nothing to undo again
    assert response.headers["content-length"] == str(len(BODY))  # the body it holds (httpx's)
    async with out.stream(out.build_request("GET", party.url + "/x"), Limits(time_s=10)) as streamed:
        chunks = [chunk async for chunk in iter_capped(streamed, len(BODY))]
    assert b"".join(chunks) == BODY
    if codings:
        assert max(map(len, chunks)) <= CHUNK_BYTES  # decoded a bounded step at a time
    await out.aclose()


async def test_a_coding_over_several_header_lines_is_decoded_in_the_order_applied(party: HostileParty) -> None:
    party.default = Behaviour(
        body=encoded(BODY, ["deflate", "gzip"]), headers=(("content-encoding", "deflate"), ("content-encoding", "gzip"))
    )
    out = Outbound(configured(party.url))
    response = await out.request("GET", party.url + "/x", limits=Limits(time_s=10))
    assert response.content == BODY
    await out.aclose()


async def test_the_kept_start_of_an_encoded_answer_is_its_decoded_start(party: HostileParty) -> None:
    party.default = Behaviour(body=encoded(BODY, ["gzip"]), headers=(("content-encoding", "gzip"),))
    out = Outbound(configured(party.url))
    response = await out.request("POST", party.url + "/", content=b"x", limits=Limits(time_s=10, keep_bytes=16384))
    assert response.content == BODY[:16384] and is_truncated(response)
    await out.aclose()


class _Raw(httpx.AsyncByteStream):
    def __init__(self, raw: bytes, size: int) -> None:
        self.raw, self.size = raw, size

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for i in range(0, len(self.raw), self.size):
            yield self.raw[i : i + self.size]


def _response(raw: bytes, label: str, size: int) -> httpx.Response:
    request = httpx.Request("GET", "https://i.example.net/x")
    return httpx.Response(200, headers={"content-encoding": label}, stream=_Raw(raw, size), request=request)


async def _ours(raw: bytes, label: str, size: int) -> bytes | str:
    try:
        return b"".join([chunk async for chunk in iter_capped(_response(raw, label, size), None)])
    except httpx.DecodingError as err:
        return type(err).__name__


async def _httpx(raw: bytes, label: str, size: int) -> bytes | str:
    try:
        return b"".join([chunk async for chunk in _response(raw, label, size).aiter_bytes()])
    except httpx.DecodingError as err:
        return type(err).__name__


def _streams() -> list[tuple[str, bytes]]:
    whole = encoded(BODY, ["gzip"])
    return [
        ("gzip", whole),
        ("gzip", whole + b"trailing bytes after the member"),  # ignored, as by httpx (zlib's unused_data)
        ("gzip", whole[: len(whole) // 2]),  # a stream cut short: what came, no error, as by httpx
        ("gzip", whole[:-8] + b"\x00" * 8),  # its CRC wrong: the failure
        ("gzip", b"not gzip at all"),  # the failure
        ("deflate", encoded(BODY, ["deflate"])),
        ("deflate", encoded(BODY, ["raw-deflate"])),
        ("gzip, deflate", encoded(BODY, ["gzip", "deflate"])),
        ("deflate, deflate", encoded(BODY, ["raw-deflate", "deflate"])),
        ("gzip", encoded(b"", ["gzip"])),
        ("gzip", b""),
    ]


@pytest.mark.parametrize("size", [1, 7, 65536, 10**7])
@pytest.mark.parametrize(("label", "raw"), _streams())
async def test_what_is_decoded_is_what_httpx_decoded(label: str, raw: bytes, size: int) -> None:
    # The same bytes, or the same failure, whatever the size of the raw chunks — but one
    # case: a raw deflate stream inside another coding. httpx tries the raw format only if
    # the coding's first decode call fails, and makes that call with whatever the outer
    # coding gave the first raw chunk (nothing, a byte: no error yet); curaflow with the
    # first bytes the outer coding gave. Where httpx failed so, curaflow may decode it.
    ours, theirs = await _ours(raw, label, size), await _httpx(raw, label, size)
    if theirs == "DecodingError" and raw in (encoded(BODY, ["raw-deflate"]), encoded(BODY, ["raw-deflate", "deflate"])):
        assert ours == BODY  # how its bytes came says nothing of what they are
    else:
        assert ours == theirs


@pytest.mark.parametrize("size", [1, 2, 3, 7, 65536])
@pytest.mark.parametrize(
    ("label", "codings"), [("deflate", ["raw-deflate"]), ("deflate, deflate", ["raw-deflate", "deflate"])]
)
async def test_a_raw_deflate_stream_decodes_however_its_bytes_come(label: str, codings: list[str], size: int) -> None:
    # httpx tries the raw format only if its first decode call fails, and a call of one
    # byte cannot fail (zlib judges its two-byte header on the second): the same answer
    # decoded or refused by how the transport happened to cut it. curaflow tries the raw
    # format while nothing was decoded from the first 64 KiB.
    assert await _ours(encoded(BODY, codings), label, size) == BODY


UNDECODED = ["br", "zstd", "compress", "x-compress", "gzip, br", "x-unheard-of", "*"]

#: Answers with no body (RFC 9110 §6.4.1: a HEAD's, a 204, a 304; and one of length 0).
BODILESS = [(204, "POST"), (304, "GET"), (200, "HEAD"), (200, "GET")]


@pytest.mark.parametrize(("status", "method"), BODILESS, ids=["204", "304", "HEAD", "empty"])
@pytest.mark.parametrize("label", ["br", "zstd", "x-unheard-of", "gzip"])
async def test_an_answer_with_no_body_has_no_coding_to_refuse(
    party: HostileParty, status: int, method: str, label: str
) -> None:
    # No byte to decode, none to misread: the answer is its status and headers (a HEAD's
    # or a 304's Content-Encoding even names the coding of a body not sent). It was
    # refused: a receiver's 204 a send whose outcome is unknown.
    party.default = Behaviour(status=status, body=b"", headers=(("content-encoding", label),))
    out = Outbound(configured(party.url))
    response = await out.request(method, party.url + "/", limits=Limits(time_s=10, max_bytes=10))
    assert response.status_code == status and response.content == b""
    async with out.stream(out.build_request(method, party.url + "/"), Limits(time_s=10)) as streamed:
        assert [chunk async for chunk in iter_capped(streamed, None)] == []
    await out.aclose()


@pytest.mark.parametrize("label", UNDECODED)
async def test_an_answer_in_a_coding_curaflow_does_not_decode_is_refused(party: HostileParty, label: str) -> None:
    party.default = Behaviour(status=201, body=b'{"ok": true}', headers=(("content-encoding", label),))
    out = Outbound(configured(party.url))
    with pytest.raises(UnsupportedContentEncoding) as caught:
        await out.request("POST", party.url + "/", content=b"x", limits=Limits(time_s=10))
    assert isinstance(caught.value, httpx.DecodingError)  # the party's answer failed to read, as httpx types it
    assert "does not decode" in str(caught.value) and label.split(",")[-1].strip() in str(caught.value)
    head = answer_head(caught.value)
    assert head is not None and head.status_code == 201  # the status came: the caller judges it
    async with out.stream(out.build_request("GET", party.url + "/"), Limits(time_s=10)) as response:
        with pytest.raises(UnsupportedContentEncoding):
            async for _ in iter_capped(response, None):
                pass
    await out.aclose()


def _png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (64, 48), (10, 200, 30)).save(buf, "PNG")
    return buf.getvalue()


CANONICAL = "https://i.pximg.net/img-original/img/2025/02/01/00/00/00/4242_p0.png"


@pytest.mark.parametrize("label", ["br", "zstd"])
async def test_an_image_in_a_coding_curaflow_does_not_decode_is_the_hosts_failure(
    party: HostileParty, label: str
) -> None:
    # The image host's answer, never the work's: retried as download_failed. httpx handed
    # the bytes on as the image (a page that is no image: the work held back).
    party.default = Behaviour(body=_png(), content_type="image/png", headers=(("content-encoding", label),))
    async with httpx.AsyncClient() as http:
        client = PixivClient(http, refresh_token="r", api_url=party.url, auth_url=party.url, image_host=party.url)
        with pytest.raises(SourceError) as caught:
            async with client.download(CANONICAL) as download:
                async for _ in download.chunks():
                    pass
    assert caught.value.reason == TerminalReason.DOWNLOAD_FAILED and caught.value.retryable
    assert "UnsupportedContentEncoding" in str(caught.value)


async def test_an_api_answer_in_a_coding_curaflow_does_not_decode_is_the_sources_failure(party: HostileParty) -> None:
    body = b'{"access_token": "a", "refresh_token": "r", "expires_in": 3600}'
    party.default = Behaviour(body=body, headers=(("content-encoding", "br"),))
    async with httpx.AsyncClient() as http:
        client = PixivClient(http, refresh_token="r", api_url=party.url, auth_url=party.url, image_host=party.url)
        with pytest.raises(SourceError) as caught:
            await client.authenticate()
    assert caught.value.reason == TerminalReason.NETWORK_ERROR and caught.value.retryable  # never auth_failed
    assert "UnsupportedContentEncoding" in str(caught.value)


@pytest.mark.parametrize(
    ("asked", "sent"),
    [
        ("gzip, deflate, br, zstd", "gzip, deflate"),
        ("br;q=1.0, gzip;q=0.5", "gzip;q=0.5"),
        ("identity", "identity"),
        ("br", "identity"),
        ("*", "identity"),
        ("gzip, deflate", "gzip, deflate"),
    ],
)
async def test_a_request_never_asks_for_a_coding_curaflow_does_not_decode(
    party: HostileParty, asked: str, sent: str
) -> None:
    # httpx asks for br and zstd whenever their packages are installed; curaflow would
    # then refuse every answer a server encoded so.
    out = Outbound(configured(party.url), http=httpx.AsyncClient(headers={"Accept-Encoding": asked}))
    await out.request("GET", party.url + "/", limits=Limits(time_s=10))
    assert party.connections[-1].headers["accept-encoding"] == sent
    await out.aclose()


async def test_the_built_client_asks_for_what_curaflow_decodes(party: HostileParty) -> None:
    out = Outbound(configured(party.url))
    await out.request("GET", party.url + "/", limits=Limits(time_s=10))
    assert party.connections[-1].headers["accept-encoding"] == "gzip, deflate"
    await out.aclose()

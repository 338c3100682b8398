"""An image host that content-encodes its answer although asked for ``identity``.

The client asks the image host for ``Accept-Encoding: identity``; a host (a mirror set as
``pixiv.image_url``, a CDN in front of it) may gzip the answer all the same, and the outbound
layer decodes what ``Content-Encoding`` names. ``Content-Length`` then counts the encoded bytes,
not the image's: the length a download announces must be the length of what it yields,
or the artifact store reads a whole image as "truncated" (``download_failed``), every
attempt of every job, for every work the host serves.
"""

from __future__ import annotations

import gzip
import io

import httpx
import pytest
from PIL import Image

from curaflow.sources.pixiv.client import PixivClient
from tests.fakes.hostile import Behaviour, HostileParty

CANONICAL = "https://i.pximg.net/img-original/img/2025/02/01/00/00/00/4242_p0.png"


def png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (64, 48), (10, 200, 30)).save(buf, "PNG")
    return buf.getvalue()


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "identity"])
async def test_the_length_a_download_announces_is_the_length_it_yields(party: HostileParty, encoding: str) -> None:
    image = png() * 4  # compressible: the encoded body is shorter than the image
    body = {"gzip": gzip.compress, "deflate": lambda b: __import__("zlib").compress(b), "identity": bytes}[encoding](
        image
    )
    party.default = Behaviour(body=body, content_type="image/png", headers=(("content-encoding", encoding),))
    async with httpx.AsyncClient() as http:
        client = PixivClient(http, refresh_token="r", api_url=party.url, auth_url=party.url, image_host=party.url)
        async with client.download(CANONICAL) as download:
            received = b"".join([chunk async for chunk in download.chunks()])
    assert received == image
    assert download.expected_bytes in (None, len(received)), (download.expected_bytes, len(received))

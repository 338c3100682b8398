"""An image host answering a part of the file (HTTP 206) to a request for all of it.

The client never asks for a range: a ``206 Partial Content`` is a cache or a proxy
answering from a slice it holds (a CDN's slicing misconfigured, a range cached from another
client). Its bytes are a part of the page — the head (short: retried as ``download_failed``)
or any later part (no image signature: until 2026-12-06 it was the page's ``not_an_image``,
the work skipped in the job and held back for ``unrecognised_hold_ms``, every work the host
so answered). A part is the host's answer, never a verdict on the work: one attempt,
retried (``download_failed``). A 206 whose ``Content-Range`` covers the whole file is the
file.
"""

from __future__ import annotations

import io
from pathlib import Path

import httpx
import pytest
from PIL import Image

from curaflow.artifacts.store import ArtifactStore
from curaflow.domain.models import Work, WorkPage
from curaflow.sources.errors import SourceError
from tests.support import pixiv_answering

URL = "https://i.pximg.net/img-original/img/2025/02/01/00/00/00/42_p0.png"
WORK = Work(
    work_id="42",
    title="t",
    url="https://www.pixiv.net/artworks/42",
    pages=[WorkPage(index=0, url=URL, width=64, height=48)],
)


def _png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (64, 48), (10, 200, 30)).save(buf, "PNG")
    return buf.getvalue()


PNG = _png()
N = len(PNG)


async def _fetch(tmp_path: Path, answer: httpx.Response) -> object:
    client = pixiv_answering(lambda request: answer, image_host="http://img.test")
    return await ArtifactStore(tmp_path).fetch(client, WORK, "j", "t")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("body", "content_range"),
    [
        (PNG[100:], f"bytes 100-{N - 1}/{N}"),  # a later part: signs no image
        (PNG[:100], f"bytes 0-99/{N}"),  # the head
        (PNG[100:], f"bytes 100-{N - 1}/*"),
        (PNG[100:], None),  # no Content-Range at all
        (PNG[100:], "bytes */1000"),
        (PNG[100:], "pages 1-2/3"),  # a unit never seen
        (PNG[100:], f"bytes 0-{N - 1}/{N + 10}"),  # not the whole of it
    ],
    ids=["tail", "head", "unknown-length", "none", "unsatisfied", "other-unit", "short-of-the-whole"],
)
async def test_a_part_of_the_file_is_the_hosts_answer_retried(
    tmp_path: Path, body: bytes, content_range: str | None
) -> None:
    headers = {"content-type": "image/png"} | ({"content-range": content_range} if content_range else {})
    with pytest.raises(SourceError) as caught:
        await _fetch(tmp_path, httpx.Response(206, content=body, headers=headers))
    assert caught.value.reason.value == "download_failed" and caught.value.retryable
    assert caught.value.status == 206


async def test_a_206_covering_the_whole_file_is_the_file(tmp_path: Path) -> None:
    artifact = await _fetch(
        tmp_path, httpx.Response(206, content=PNG, headers={"content-range": f"bytes 0-{N - 1}/{N}"})
    )
    assert artifact.files  # type: ignore[attr-defined]

"""A page's described type (``ArtifactFile.mime``, what every route sends it as) is what its
bytes are, never what its URL's extension says: a PNG the image host serves under
``…_p0.jpg`` is ``image/png`` (until 2026-12-07 it was delivered described as
``image/jpeg``, the type of its URL's extension). A body whose bytes are no image curaflow
takes stays what it was: ``not_an_image``, not recognised as the work's (held briefly).

The image host is Pixiv's wire format on ``httpx.MockTransport`` (the client's own image
requests), and a page kept from an earlier attempt is described again from its bytes.
"""

from __future__ import annotations

import io
from pathlib import Path

import httpx
import pytest
from PIL import Image

from curaflow.artifacts import ArtifactStore, describe
from curaflow.domain.models import Work, WorkPage
from curaflow.sources.errors import UnavailableKind, WorkUnavailable
from tests.support import pixiv_answering


def encoded(fmt: str) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 6), (40, 80, 120)).save(buf, format=fmt)
    return buf.getvalue()


def work(url: str) -> Work:
    return Work(
        work_id="42",
        url="https://www.pixiv.net/artworks/42",
        kind="illust",
        page_count=1,
        pages=[WorkPage(index=0, url=url)],
    )


ORIGINAL = "https://i.pximg.net/img-original/img/2026/12/01/00/00/00/42_p0"


@pytest.mark.parametrize(
    ("fmt", "suffix", "mime"),
    [
        ("PNG", ".jpg", "image/png"),
        ("JPEG", ".png", "image/jpeg"),
        ("GIF", ".jpg", "image/gif"),
        ("WEBP", ".png", "image/webp"),
        ("PNG", "", "image/png"),  # a URL without an extension
        ("JPEG", ".jpeg", "image/jpeg"),
        ("PNG", ".png", "image/png"),
    ],
)
async def test_a_pages_type_is_its_bytes_whatever_its_url_says(
    tmp_path: Path, fmt: str, suffix: str, mime: str
) -> None:
    body = encoded(fmt)
    pixiv = pixiv_answering(lambda request: httpx.Response(200, content=body, headers={"Content-Type": "image/jpeg"}))
    store = ArtifactStore(tmp_path)
    artifact = await store.fetch(pixiv, work(ORIGINAL + suffix), "job@x", "t")
    (file,) = artifact.files
    assert file.mime == mime
    assert Path(file.path).read_bytes() == body
    # Kept from this attempt, the next attempt describes the page again from its bytes.
    again = await store.fetch(pixiv, work(ORIGINAL + suffix), "job@x", "t")
    assert again.files[0].mime == mime


def test_a_complete_file_is_described_by_its_bytes(tmp_path: Path) -> None:
    path = tmp_path / "42_p0.jpg"
    path.write_bytes(encoded("PNG"))
    assert describe(path, 0).mime == "image/png"


async def test_a_body_that_is_no_image_stays_not_an_image_held_briefly(tmp_path: Path) -> None:
    html = b"<!DOCTYPE html><html><body>maintenance</body></html>"
    pixiv = pixiv_answering(lambda request: httpx.Response(200, content=html, headers={"Content-Type": "image/png"}))
    with pytest.raises(WorkUnavailable) as raised:
        await ArtifactStore(tmp_path).fetch(pixiv, work(ORIGINAL + ".png"), "job@x", "t")
    assert (raised.value.kind, raised.value.recognised) == (UnavailableKind.NOT_AN_IMAGE, False)

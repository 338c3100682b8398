"""A body is over its byte limit only when its own bytes are: an announced length blames no work.

A page over ``outbound.download_max_bytes`` (a frames zip over ``MAX_ZIP_BYTES``) is the
work's — remembered unavailable for the week — when an image of its listed size could be
that large (:func:`curaflow.sources.corroboration.sized`). Until 2026-12-07 the refusal came
from the ``Content-Length`` header alone, before any byte was read (the outbound layer's
``iter_capped``, the artifact store's frames zip): a header that lies — a proxy's or a
cache's length of another file — on a large page or an ugoira cost the work the week. Now
the body is read, to one chunk past the limit at most (within the download's time limit and
the job's deadline): only bytes counted over the limit are the size rule's to judge; a body
that ends short of the length it announced is a body cut short (``download_failed``,
retried, never the work's).
"""

from __future__ import annotations

import contextlib
import io
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from curaflow.artifacts import ArtifactStore
from curaflow.domain.models import Work, WorkPage
from curaflow.domain.reasons import TerminalReason
from curaflow.sources.animation import MAX_ZIP_BYTES
from curaflow.sources.errors import SourceError, UnavailableKind, WorkUnavailable
from curaflow.sources.pixiv.client import PixivClient
from curaflow.sources.pixiv.replay.data import recorded_works
from curaflow.sources.pixiv.ugoira import parse_metadata
from tests.fakes.pximg import FakeImageHost
from tests.fakes.replay import Faults

MiB = 1024 * 1024
RECORDED = recorded_works()[0]
WORK_ID = str(RECORDED["id"])
PAGE_URL = str(RECORDED["meta_single_page"]["original_image_url"])
#: 10 000 px square: an uncompressed 16-bit RGBA PNG of it is ~800 MB, so a body over 64 MiB
#: may be the work's by the size rule — only the bytes may say it is.
LARGE = 10_000


def large_work(url: str = PAGE_URL) -> Work:
    """The recorded work, listed 10 000 px square (its page, and its frames as an ugoira)."""
    return Work(
        work_id=WORK_ID,
        title="t",
        url="https://www.pixiv.net/artworks/x",
        width=LARGE,
        height=LARGE,
        pages=[WorkPage(index=0, url=url, width=LARGE, height=LARGE)],
    )


@contextlib.asynccontextmanager
async def image_host() -> AsyncIterator[FakeImageHost]:
    host = await FakeImageHost(Faults()).start()
    try:
        yield host
    finally:
        await host.stop()


@contextlib.asynccontextmanager
async def client_of(host: FakeImageHost, **limits: Any) -> AsyncIterator[PixivClient]:
    async with httpx.AsyncClient() as http:
        yield PixivClient(
            http,
            refresh_token="r",
            api_url="http://api.test",
            auth_url="http://api.test",
            image_host=host.url,
            **limits,
        )


@pytest.mark.parametrize("announced", [65 * MiB, 10**12], ids=["just-over", "a-terabyte"])
async def test_a_length_announced_over_the_limit_for_a_small_page_is_a_body_cut_short(
    tmp_path: Path, announced: int
) -> None:
    """The host announces more than ``download_max_bytes`` (64 MiB) for a page of a few KiB,
    sends it and closes: the page's listed size could be that large, and until 2026-12-07
    the header alone made the work ``too_large`` for the week. Its bytes are read: it ends
    short of its length — the host's answer, retried."""
    async with image_host() as host, client_of(host) as client:
        host.announced[f"{WORK_ID}_p0"] = announced
        with pytest.raises(SourceError) as caught:
            await ArtifactStore(tmp_path).fetch(client, large_work(), "j", "t")
    assert caught.value.reason == TerminalReason.DOWNLOAD_FAILED and caught.value.retryable, caught.value
    assert len(host.of_work(WORK_ID)) == 1


async def test_a_page_whose_own_bytes_exceed_the_limit_stays_the_works(tmp_path: Path) -> None:
    """The bytes themselves go over the limit (64 KiB here): the size rule judges it, and a
    page of that listed size may be that large — the work's, as before."""
    async with image_host() as host, client_of(host, download_max_bytes=64 * 1024) as client:
        # 256 KiB, announced truthfully, beginning as a PNG (a body that begins as no image
        # is the host's, whatever its size: test_source_answers_never_seen.py)
        host.bodies[f"{WORK_ID}_p0"] = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 1024
        with pytest.raises(WorkUnavailable) as caught:
            await ArtifactStore(tmp_path).fetch(client, large_work(), "j", "t")
    assert caught.value.kind == UnavailableKind.TOO_LARGE and caught.value.recognised, caught.value.why


def frames_zip() -> tuple[bytes, Any]:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        for i in range(2):
            picture = io.BytesIO()
            Image.new("RGB", (40, 30), (i * 90, 90, 200)).save(picture, "JPEG")
            archive.writestr(f"{i:06d}.jpg", picture.getvalue())
    meta = parse_metadata(
        {
            "ugoira_metadata": {
                "zip_urls": {"medium": "https://i.pximg.net/z/1.zip"},
                "frames": [{"file": f"{i:06d}.jpg", "delay": 50} for i in range(2)],
            }
        }
    )
    return buf.getvalue(), meta


class ZipAnnouncing:
    """A source of one ugoira whose frames zip announces ``announced`` bytes (its real
    length when None) and yields its real bytes."""

    def __init__(self, body: bytes, meta: Any, announced: int | None) -> None:
        self.body, self.meta, self.announced = body, meta, announced

    @contextlib.asynccontextmanager
    async def download(self, url: str) -> AsyncIterator[Any]:
        data, announced = self.body, self.announced

        class Body:
            expected_bytes = len(data) if announced is None else announced

            async def chunks(self) -> AsyncIterator[bytes]:
                yield data

        yield Body()

    async def animation(self, work: Work) -> Any:
        return self.meta


async def test_a_frames_zip_announcing_more_than_its_limit_is_read_not_judged_by_its_header(tmp_path: Path) -> None:
    """An ugoira of 10 000 px square frames (so its zip may be over 64 MiB) whose zip
    announces more than ``MAX_ZIP_BYTES`` and holds a few KiB: until 2026-12-07 the
    artifact store refused it by the length alone, ``too_large``, the week. Its bytes are
    read: short of what it announced — cut short, retried."""
    body, meta = frames_zip()
    with pytest.raises(SourceError) as caught:
        await ArtifactStore(tmp_path).fetch(ZipAnnouncing(body, meta, MAX_ZIP_BYTES + 1), large_work(), "j", "t")  # type: ignore[arg-type]
    assert caught.value.reason == TerminalReason.DOWNLOAD_FAILED and caught.value.retryable, caught.value
    # the same zip announcing its own length is an animation
    artifact = await ArtifactStore(tmp_path / "whole").fetch(ZipAnnouncing(body, meta, None), large_work(), "j", "t")  # type: ignore[arg-type]
    assert artifact.files[0].frame_delays_ms == [50, 50]

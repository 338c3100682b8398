"""Ugoira (Pixiv's animated works): the frames' metadata, the frames zip, one animated GIF.

An ugoira (``illust.type == "ugoira"``) is not its cover image: the app-api's
``GET /v1/ugoira/metadata?illust_id=<id>`` answers ``{"ugoira_metadata": {"zip_urls":
{"medium": <zip>}, "frames": [{"file": "000000.jpg", "delay": <ms>}, …]}}`` (reference
``pixiv-and-delivery-apis.md``; the downloaders users know — gallery-dl, PixivUtil2 —
fetch the same zip). The zip holds one JPEG per frame; the delays are per frame, in
milliseconds. :func:`encode_gif` turns both into one animated GIF (looping for ever),
the one animated format Telegram's ``sendAnimation``, Discord and every image viewer
show; the delays also go into the directory route's manifest.

Bounds (as for images, so a work can never exhaust a worker): the zip is at most
:data:`MAX_ZIP_BYTES` (streamed to disk, never held in memory), at most
:data:`MAX_FRAMES` frames, each entry at most :data:`MAX_FRAME_BYTES` uncompressed, and
the frames' pixels together at most :data:`MAX_TOTAL_PIXELS` (the GIF encoder keeps
every frame to compare it with the next: memory ≈ 4 bytes per pixel of all frames).
"""

from __future__ import annotations

import io
import os
import re
import zipfile
from pathlib import Path
from typing import Any

from PIL import Image
from pydantic import BaseModel

#: A frames zip larger than this is refused (bytes).
MAX_ZIP_BYTES = 64 * 1024 * 1024
#: Frames per animation at most.
MAX_FRAMES = 1000
#: One frame's uncompressed size at most (bytes).
MAX_FRAME_BYTES = 16 * 1024 * 1024
#: Pixels of all frames together at most (width × height × frames).
MAX_TOTAL_PIXELS = 60_000_000
#: A frame's delay is clamped to this range (ms); GIF stores centiseconds.
MIN_DELAY_MS, MAX_DELAY_MS = 20, 655_350
FRAME_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class UgoiraError(ValueError):
    """The metadata or the zip is not a usable animation (a permanent fact of the work)."""


class UgoiraFrame(BaseModel):
    """One frame: its file name in the zip and how long it shows (ms)."""

    file: str
    delay_ms: int


class UgoiraMetadata(BaseModel):
    """What ``/v1/ugoira/metadata`` says of a work: the frames zip and its frames in order."""

    zip_url: str
    frames: list[UgoiraFrame]

    @property
    def delays_ms(self) -> list[int]:
        """Each frame's delay in ms, in order."""
        return [f.delay_ms for f in self.frames]


def parse_metadata(body: Any) -> UgoiraMetadata:
    """Parse an app-api ``/v1/ugoira/metadata`` answer.

    Raises:
        UgoiraError: no zip URL, no frames, more than :data:`MAX_FRAMES`, a frame name
            that is not a plain file name, a delay that is not a number.
    """
    meta = body.get("ugoira_metadata") if isinstance(body, dict) else None
    if not isinstance(meta, dict):
        raise UgoiraError("no ugoira_metadata in the answer")
    urls = meta.get("zip_urls") if isinstance(meta.get("zip_urls"), dict) else {}
    zip_url = urls.get("medium") or urls.get("original") if urls else None
    if not isinstance(zip_url, str) or not zip_url.startswith("https://"):
        raise UgoiraError("no frames zip URL")
    raw = meta.get("frames")
    if not isinstance(raw, list) or not raw:
        raise UgoiraError("no frames")
    if len(raw) > MAX_FRAMES:
        raise UgoiraError(f"{len(raw)} frames, over the limit of {MAX_FRAMES}")
    frames = []
    for item in raw:
        name, delay = (item.get("file"), item.get("delay")) if isinstance(item, dict) else (None, None)
        if not isinstance(name, str) or not FRAME_NAME.match(name) or name.startswith("."):
            raise UgoiraError(f"frame file name {name!r} is not a plain file name")
        if not isinstance(delay, int) or isinstance(delay, bool):
            raise UgoiraError(f"frame {name}: delay {delay!r} is not a number of ms")
        frames.append(UgoiraFrame(file=name, delay_ms=min(MAX_DELAY_MS, max(MIN_DELAY_MS, delay))))
    return UgoiraMetadata(zip_url=zip_url, frames=frames)


def encode_gif(zip_path: Path, meta: UgoiraMetadata, dest: Path) -> tuple[int, int]:
    """Write the frames of ``zip_path`` as one looping animated GIF at ``dest`` (blocking).

    Frames are read from the zip one at a time; the file is written to a temporary name
    next to ``dest``, fsynced and renamed, so ``dest`` is complete or absent.

    Returns:
        The animation's ``(width, height)`` (the first frame's; others are fitted to it).

    Raises:
        UgoiraError: not a zip, a frame missing or over :data:`MAX_FRAME_BYTES`, an
            undecodable frame, or frames over :data:`MAX_TOTAL_PIXELS` together.
    """
    try:
        archive = zipfile.ZipFile(zip_path)
    except (zipfile.BadZipFile, OSError) as err:
        raise UgoiraError(f"the frames zip is not a zip: {err}") from None
    with archive:
        entries = {info.filename: info for info in archive.infolist()}
        for frame in meta.frames:
            info = entries.get(frame.file)
            if info is None:
                raise UgoiraError(f"frame {frame.file} is not in the zip")
            if info.file_size > MAX_FRAME_BYTES:
                raise UgoiraError(f"frame {frame.file} is {info.file_size} bytes, over {MAX_FRAME_BYTES}")

        def frame_image(name: str, size: tuple[int, int] | None) -> Image.Image:
            try:
                with archive.open(entries[name]) as fh:
                    data = fh.read(MAX_FRAME_BYTES + 1)
                image = Image.open(io.BytesIO(data))
                image.load()
            except (OSError, ValueError, zipfile.BadZipFile, Image.DecompressionBombError) as err:
                raise UgoiraError(f"frame {name} cannot be decoded: {type(err).__name__}") from None
            rgb = image.convert("RGB")
            return rgb if size is None or rgb.size == size else rgb.resize(size)

        first = frame_image(meta.frames[0].file, None)
        width, height = first.size
        if width * height * len(meta.frames) > MAX_TOTAL_PIXELS:
            raise UgoiraError(
                f"{len(meta.frames)} frames of {width}×{height} are over {MAX_TOTAL_PIXELS} pixels together"
            )
        rest = (frame_image(f.file, (width, height)) for f in meta.frames[1:])
        tmp = dest.with_name(f".{dest.name}.part")
        try:
            with open(tmp, "wb") as out:
                first.save(
                    out,
                    format="GIF",
                    save_all=True,
                    append_images=rest,
                    duration=meta.delays_ms,
                    loop=0,
                    disposal=1,
                )
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
    return width, height

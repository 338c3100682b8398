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
:data:`MAX_ZIP_BYTES` (streamed to disk, never held in memory), each entry at most
:data:`MAX_FRAME_BYTES` uncompressed, and the decode budget
(:mod:`curaflow.sources.decoding`): frames, pixels summed over every frame — each frame
decoded at its own size, and all of them held by the GIF encoder at the first frame's
size (~1 byte per pixel) — and CPU time. **Every frame's header is read first** (no pixel
decoded), so a zip whose first frame is 1×1 and whose later frames are 13000×13000 is
refused before anything is decoded; then each frame is charged as it is decoded.

Whose failure: metadata of the app-api's shape that describes no animation, a frame
missing from a zip whose directory was read, a frame that does not decode although its
CRC matched, a body that is no zip at all — the work's (:class:`UgoiraError`); over the
budget — the work's (:class:`~curaflow.sources.decoding.OverBudget`); an answer that is
not the app-api's metadata object — the source's (:class:`UnrecognisedMetadata`); a zip
cut short or failing its CRC — maybe the transfer (:class:`UgoiraBroken`, retried).
"""

from __future__ import annotations

import io
import os
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from PIL import Image, UnidentifiedImageError
from pydantic import BaseModel

from curaflow.outbound import url_problem
from curaflow.sources.decoding import DecodeBudget, DecodeMeter, OverBudget

#: A frames zip larger than this is refused (bytes).
MAX_ZIP_BYTES = 64 * 1024 * 1024
#: One frame's uncompressed size at most (bytes).
MAX_FRAME_BYTES = 16 * 1024 * 1024
#: A frame's delay is clamped to this range (ms); GIF stores centiseconds.
MIN_DELAY_MS, MAX_DELAY_MS = 20, 655_350
FRAME_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
#: Formats a frame may have (what Pillow identifies from its bytes).
FRAME_FORMATS = frozenset({"JPEG", "PNG", "GIF", "WEBP"})
#: The first bytes of a zip (a local file header, or the end record of an empty one).
ZIP_SIGNATURES = (b"PK\x03\x04", b"PK\x05\x06")


class UgoiraError(ValueError):
    """The metadata or the zip is not a usable animation (a permanent fact of the work)."""


class UnrecognisedMetadata(ValueError):
    """The answer is not the app-api's ``ugoira_metadata`` object: the source answered
    something curaflow does not recognise (the source's failure, never the work's)."""


class UgoiraBroken(Exception):
    """The frames zip is cut short or fails its CRC: maybe the transfer (retried)."""


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
        UnrecognisedMetadata: the answer holds no ``ugoira_metadata`` object.
        UgoiraError: it does, and it describes no usable animation: no zip URL, or one
            that is not an ``https`` URL a request can be made for
            (:func:`~curaflow.outbound.url_problem`); no frames; a frame name that is not
            a plain file name; a frame without a delay in ms.

    How many frames an animation may have is the decode budget's
    (:class:`~curaflow.sources.decoding.DecodeBudget`), checked before the zip is fetched.
    """
    meta = body.get("ugoira_metadata") if isinstance(body, dict) else None
    if not isinstance(meta, dict):
        raise UnrecognisedMetadata("no ugoira_metadata object in the answer")
    urls = meta.get("zip_urls")
    zip_url = (urls.get("medium") or urls.get("original")) if isinstance(urls, dict) else None
    if not isinstance(zip_url, str) or not zip_url.startswith("https://"):
        raise UgoiraError("no frames zip URL")
    if (problem := url_problem(zip_url)) is not None:
        raise UgoiraError(f"the frames zip URL is {problem}")
    raw = meta.get("frames")
    if not isinstance(raw, list) or not raw:
        raise UgoiraError("no frames")
    frames = []
    for item in raw:
        name, delay = (item.get("file"), item.get("delay")) if isinstance(item, dict) else (None, None)
        if not isinstance(name, str) or not FRAME_NAME.match(name) or name.startswith("."):
            raise UgoiraError(f"frame file name {name!r} is not a plain file name")
        if not isinstance(delay, int) or isinstance(delay, bool):
            raise UgoiraError(f"frame {name}: delay {delay!r} is not a number of ms")
        frames.append(UgoiraFrame(file=name, delay_ms=min(MAX_DELAY_MS, max(MIN_DELAY_MS, delay))))
    return UgoiraMetadata(zip_url=zip_url, frames=frames)


def _is_zip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(4) in ZIP_SIGNATURES


def _frame_size(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> tuple[int, int]:
    """A frame's (width, height) from its header (no pixel decoded).

    Raises:
        UgoiraError: the member is not an image of :data:`FRAME_FORMATS`.
        OverBudget: Pillow's own bomb bound refuses its size.
        UgoiraBroken: the member cannot be read from the zip.
    """
    try:
        with archive.open(info) as fh, Image.open(fh) as image:
            if image.format not in FRAME_FORMATS:
                raise UgoiraError(f"frame {info.filename} is not an image ({image.format})")
            return image.size
    except UnidentifiedImageError:
        raise UgoiraError(f"frame {info.filename} is not an image") from None
    except Image.DecompressionBombError as err:
        raise OverBudget(f"frame {info.filename}: {err}") from None
    except (zipfile.BadZipFile, EOFError) as err:
        raise UgoiraBroken(f"frame {info.filename} cannot be read from the zip: {err}") from None
    except (OSError, ValueError, SyntaxError) as err:
        raise UgoiraError(f"frame {info.filename} has no readable header: {type(err).__name__}") from None


def encode_gif(
    zip_path: Path, meta: UgoiraMetadata, dest: Path, *, meter: DecodeMeter | None = None
) -> tuple[int, int]:
    """Write the frames of ``zip_path`` as one looping animated GIF at ``dest`` (blocking).

    Every frame's header is read first and the decode planned against ``meter``'s budget
    (module doc); frames are then read from the zip one at a time, each charged to
    ``meter`` before it is decoded. The file is written to a temporary name next to
    ``dest``, fsynced and renamed, so ``dest`` is complete or absent.

    Args:
        meter: the decode's account (default: a fresh one of the default budget). Call
            it in the thread that decodes: its CPU time is that thread's.

    Returns:
        The animation's ``(width, height)`` (the first frame's; others are fitted to it).

    Raises:
        UgoiraError: the body is no zip; a frame is missing from it, not an image, or
            does not decode.
        OverBudget: a frame over :data:`MAX_FRAME_BYTES`, or the decode over its budget.
        UgoiraBroken: the zip is cut short, or a frame fails its CRC.
        DecodeStopped: ``meter`` was stopped, or its deadline passed.
    """
    meter = meter if meter is not None else DecodeBudget().meter()
    with meter.running():
        return _encode(zip_path, meta, dest, meter)


def _encode(zip_path: Path, meta: UgoiraMetadata, dest: Path, meter: DecodeMeter) -> tuple[int, int]:
    if not meta.frames:  # a source's own Animation, never parsed by parse_metadata
        raise UgoiraError("no frames")
    meter.plan(frames=len(meta.frames), pixels=0)
    try:
        archive = zipfile.ZipFile(zip_path)
    except (zipfile.BadZipFile, OSError) as err:
        if not _is_zip(zip_path):
            raise UgoiraError("the frames zip is not a zip") from None
        raise UgoiraBroken(f"the frames zip cannot be read (cut short?): {err}") from None
    with archive:
        entries = {info.filename: info for info in archive.infolist()}
        sizes: list[tuple[int, int]] = []
        for frame in meta.frames:
            info = entries.get(frame.file)
            if info is None:
                raise UgoiraError(f"frame {frame.file} is not in the zip")
            if info.file_size > MAX_FRAME_BYTES:
                raise OverBudget(f"frame {frame.file} is {info.file_size} bytes, over {MAX_FRAME_BYTES}")
            sizes.append(_frame_size(archive, info))
            meter.check()
        width, height = sizes[0]
        largest = max(sizes, key=lambda s: s[0] * s[1])
        own = sum(w * h for w, h in sizes)
        meter.plan(frames=len(sizes), pixels=max(own, width * height * len(sizes)), largest=largest)

        def frame_image(index: int, size: tuple[int, int] | None) -> Image.Image:
            name = meta.frames[index].file
            w, h = sizes[index]
            meter.frame(w * h)
            try:
                with archive.open(entries[name]) as fh:
                    data = fh.read(MAX_FRAME_BYTES + 1)
            except (zipfile.BadZipFile, EOFError) as err:  # a CRC that does not match: maybe the transfer
                raise UgoiraBroken(f"frame {name} cannot be read from the zip: {err}") from None
            try:
                image = Image.open(io.BytesIO(data))
                image.load()
            except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as err:
                raise UgoiraError(f"frame {name} cannot be decoded: {type(err).__name__}") from None
            rgb = image.convert("RGB")
            return rgb if size is None or rgb.size == size else rgb.resize(size)

        first = frame_image(0, None)

        def rest() -> Iterator[Image.Image]:
            for index in range(1, len(meta.frames)):
                yield frame_image(index, (width, height))

        tmp = dest.with_name(f".{dest.name}.part")
        try:
            with open(tmp, "wb") as out:
                first.save(
                    out,
                    format="GIF",
                    save_all=True,
                    append_images=rest(),
                    duration=meta.delays_ms,
                    loop=0,
                    disposal=1,
                )
                meter.check()
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
    return width, height

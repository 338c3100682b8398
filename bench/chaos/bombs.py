"""Decode bombs and unusable animations: small files whose decoding would cost a worker
minutes of CPU or gigabytes of memory, and ugoira metadata no animation can be made of.

Made on demand with Pillow (nothing binary is kept in the repository): the ``edges``
chaos scenario's hostile image host serves them (:mod:`bench.chaos.hostile`, sizes drawn
from the run's seed), and the tests of the decode budget craft them
(``tests/unit/test_decode_budget.py``).

* :func:`many_frame_gif` — an animated GIF of thousands of 1×1 frames on a large canvas:
  ~25 bytes per frame on disk, but Pillow composes every frame on the whole canvas (a
  4000×4000 canvas costs ~50 ms of CPU per frame: 20 000 frames are ~16 min);
* :func:`huge_canvas_gif` — a few 1×1 frames on a canvas near (or over) a page's pixel
  bound: each frame costs the whole canvas;
* :func:`ugoira_zip` — an ugoira frames zip whose first frame is 1×1 and whose later
  frames are one large PNG (13000×13000 grey: ~160 KB compressed, 169 MB decoded, ~500 MB
  once converted to RGB): a check that reads only the first frame passes it;
* :func:`many_marker_jpeg` / :func:`many_chunk_png` — a small JPEG or PNG whose
  headers are padded with hundreds of thousands of empty segments or chunks: Pillow walks
  them one by one in Python as it opens the file, a JPEG's ``APPn`` / ``COM`` kept each
  (~130 bytes a 4-byte marker: a 64 MiB page held ~2 GiB and 16 s of CPU), a PNG's
  unknown chunks ~100 bytes each;
* :func:`many_scan_jpeg` — a progressive JPEG of a flat picture whose refinement scan is
  repeated thousands of times: ~30 bytes a scan, and libjpeg visits every block of the
  picture for each (it only warns of a scan repeated): 20 000 scans of a 4000×4000
  picture are ~600 KB and ~4 min of CPU, all of it inside one frame's decode;
* :func:`many_scan_arithmetic_jpeg` — the same in a *sequential* JPEG: arithmetic-coded
  (``SOF9``), its components scanned one at a time and the first one's scan repeated
  without entropy-coded data (libjpeg reads zeros at the next marker: a whole scan of
  every block): 10 bytes a scan, ~14 ms of CPU a scan of a 4000×4000 picture — 6 000
  scans are ~60 KB and ~80 s of CPU in one frame, and not progressive;
* :func:`unusable_metadata` — ``/v1/ugoira/metadata`` answers that are the app-api's
  shape but describe no usable animation (a zip URL that is not one, no frames, frames
  without delays).
"""

from __future__ import annotations

import io
import random
import struct
import zipfile
import zlib
from typing import Any

from PIL import Image

#: A graphic control extension: no disposal, 10 ms.
_GCE = b"\x21\xf9\x04\x00\x01\x00\x00\x00"


def _gif_parts(frame: tuple[int, int]) -> tuple[bytes, bytes]:
    """Pillow's one-frame GIF of ``frame`` split into its head (header, screen descriptor,
    global colour table) and its image (descriptor and LZW data)."""
    buf = io.BytesIO()
    Image.new("P", frame, 0).save(buf, "GIF")
    small = buf.getvalue()
    at = small.index(b"\x2c" + struct.pack("<HHHH", 0, 0, *frame))
    flags = small[10]
    table = 3 * 2 ** ((flags & 7) + 1) if flags & 0x80 else 0
    return small[: 13 + table], small[at:-1]


def gif(canvas: tuple[int, int], frames: int, frame: tuple[int, int] = (1, 1)) -> bytes:
    """An animated GIF of ``frames`` frames of ``frame`` pixels at the top left of a
    ``canvas`` (width, height) screen, made without ever holding the canvas in memory."""
    head, image = _gif_parts(frame)
    screen = bytearray(head)
    screen[:6] = b"GIF89a"  # graphic control extensions are GIF89a's
    screen[6:10] = struct.pack("<HH", *canvas)
    return bytes(screen) + (_GCE + image) * frames + b";"


def many_frame_gif(frames: int = 20_000, canvas: tuple[int, int] = (4000, 4000)) -> bytes:
    """Thousands of 1×1 frames on a large canvas (the module doc)."""
    return gif(canvas, frames)


def huge_canvas_gif(canvas: tuple[int, int] = (6000, 6000), frames: int = 4) -> bytes:
    """A few 1×1 frames on a canvas near a page's pixel bound (the module doc)."""
    return gif(canvas, frames)


def png(size: tuple[int, int], mode: str = "L") -> bytes:
    """A blank PNG of ``size`` (a large one compresses to a few hundred KB)."""
    buf = io.BytesIO()
    Image.new(mode, size).save(buf, "PNG")
    return buf.getvalue()


def many_marker_jpeg(markers: int, marker: bytes = b"\xff\xe1") -> bytes:
    """An 8×8 JPEG with ``markers`` empty segments of ``marker`` (``APP1``: Pillow keeps
    each in ``applist``) after its start of image."""
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (0, 90, 200)).save(buf, "JPEG")
    data = buf.getvalue()
    return data[:2] + (marker + b"\x00\x02") * markers + data[2:]


def _jpeg_scans(data: bytes) -> list[tuple[int, int]]:
    """Where each scan of the JPEG ``data`` lies (its ``SOS`` segment and its entropy-coded
    data): ``(start, end)`` byte ranges, walked by the segments' lengths."""
    scans: list[tuple[int, int]] = []
    at = 2
    while at + 4 <= len(data) and data[at + 1] != 0xD9:
        end = at + 2 + int.from_bytes(data[at + 2 : at + 4], "big")
        if data[at + 1] == 0xDA:
            while not (data[end] == 0xFF and data[end + 1] not in (0x00, *range(0xD0, 0xD8))):
                end += 1
            scans.append((at, end))
        at = end
    return scans


def many_scan_jpeg(size: tuple[int, int] = (4000, 4000), scans: int = 20_000) -> bytes:
    """A progressive JPEG of a flat ``size`` picture whose first AC refinement scan is
    repeated ``scans`` times before its end of image (the module doc)."""
    buf = io.BytesIO()
    Image.new("RGB", size, (120, 130, 140)).save(buf, "JPEG", progressive=True, quality=90)
    data = buf.getvalue()
    for start, end in _jpeg_scans(data):
        components = data[start + 4]
        spectral_end, approximation = data[start + 6 + 2 * components], data[start + 7 + 2 * components]
        if spectral_end > 0 and approximation >> 4:  # an AC scan refining bits sent before
            return data[:-2] + data[start:end] * scans + data[-2:]
    raise AssertionError("Pillow wrote no AC refinement scan")


def _segment(marker: int, body: bytes) -> bytes:
    """A JPEG marker segment: ``FF marker``, its length (two bytes, counting itself), ``body``."""
    return bytes((0xFF, marker)) + struct.pack(">H", len(body) + 2) + body


def many_scan_arithmetic_jpeg(size: tuple[int, int] = (4000, 4000), scans: int = 6_000) -> bytes:
    """A *sequential* arithmetic-coded JPEG (``SOF9``) of ``size`` whose first component's
    scan is repeated ``scans`` times (the module doc). Built segment by segment (Pillow
    writes no arithmetic coding): one quantisation table, three components scanned one
    at a time — so libjpeg reads it in multi-scan mode and takes a component's scan again —
    and scans without entropy-coded data: at the next marker libjpeg's arithmetic decoder
    reads zeros, a whole scan of every block of the component for its 10-byte header."""
    width, height = size
    quantisation = _segment(0xDB, b"\x00" + bytes([1] * 64))
    components = b"".join(bytes((c, 0x11, 0)) for c in (1, 2, 3))
    frame = _segment(0xC9, b"\x08" + struct.pack(">HH", height, width) + b"\x03" + components)

    def scan(component: int) -> bytes:
        return _segment(0xDA, bytes((1, component, 0x00, 0, 63, 0)))

    return b"\xff\xd8" + quantisation + frame + scan(1) + scan(2) + scan(3) + scan(1) * scans + b"\xff\xd9"


def many_chunk_png(chunks: int, kind: bytes = b"abCd") -> bytes:
    """An 8×8 PNG with ``chunks`` empty ancillary chunks of ``kind`` (one curaflow and
    Pillow do not know) after its ``IHDR``."""
    data = png((8, 8), "RGB")
    empty = struct.pack(">I", 0) + kind + struct.pack(">I", zlib.crc32(kind))
    return data[:33] + empty * chunks + data[33:]


def ugoira_zip(frames: int = 3, huge: tuple[int, int] = (13000, 13000)) -> tuple[bytes, list[dict[str, Any]]]:
    """A frames zip whose first frame is 1×1 and whose later frames are one ``huge`` PNG,
    with the metadata frames list that names them (``[{file, delay}]``)."""
    big = png(huge)
    names = [f"{i:06d}.png" for i in range(frames)]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr(names[0], png((1, 1), "RGB"))
        for name in names[1:]:
            archive.writestr(name, big)
    return buf.getvalue(), [{"file": name, "delay": 50} for name in names]


def random_bomb(rng: random.Random, kind: str) -> bytes:
    """One bomb of ``kind`` (``gif_frames``, ``gif_canvas``), its sizes drawn from ``rng``."""
    if kind == "gif_frames":
        side = rng.choice((2000, 3000, 4000))
        return many_frame_gif(rng.randrange(5_000, 20_001), (side, side))
    if kind == "gif_canvas":
        side = rng.randrange(4500, 20_001, 100)
        return huge_canvas_gif((side, side), rng.randrange(3, 9))
    raise ValueError(f"unknown bomb kind {kind!r}")


def random_ugoira_bomb(rng: random.Random) -> tuple[bytes, list[dict[str, Any]]]:
    """:func:`ugoira_zip` with a later frame between 9000² and 13000² pixels."""
    side = rng.randrange(9000, 13001, 500)
    return ugoira_zip(rng.randrange(2, 5), (side, side))


#: The kinds of unusable animation :func:`unusable_metadata` answers.
UNUSABLE_ANIMATIONS = ("zip_url", "no_frames", "no_delays")


def unusable_metadata(rng: random.Random, kind: str, zip_url: str) -> dict[str, Any]:
    """A ``/v1/ugoira/metadata`` answer of the app-api's shape that describes no usable
    animation: ``zip_url`` — the zip URL is not one (another scheme, not a string, 100 000
    characters, a path climbing out of the image host's prefix); ``no_frames`` — the
    frames list is empty, absent or not a list; ``no_delays`` — a frame has no delay (or
    one that is not a number)."""
    frames: Any = [{"file": f"{i:06d}.jpg", "delay": 80} for i in range(4)]
    url: Any = zip_url
    if kind == "zip_url":
        url = rng.choice(
            (
                "ftp://i.pximg.net/img-zip-ugoira/x.zip",
                12345,
                "https://i.pximg.net/" + "a" * 100_000 + ".zip",
                "https://i.pximg.net/../../_chaos/state",
                "https://i.pximg.net/img-zip-ugoira/%2e%2e/%2e%2e/_chaos/state",
            )
        )
    elif kind == "no_frames":
        frames = rng.choice(([], None, "000000.jpg"))
    elif kind == "no_delays":
        frames[rng.randrange(len(frames))] = rng.choice(({"file": "000002.jpg"}, {"file": "000002.jpg", "delay": None}))
    else:
        raise ValueError(f"unknown unusable animation {kind!r}")
    meta: dict[str, Any] = {"zip_urls": {"medium": url}}
    if frames is not None:
        meta["frames"] = frames
    return {"ugoira_metadata": meta}

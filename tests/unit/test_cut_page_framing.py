"""A page cut right after an image it carries inside one of its segments is the transfer's.

Whether a page that does not decode is the work's (``undecodable``, the week) or maybe the
transfer's (``download_failed``, retried) is read from its framing
(:func:`curaflow.artifacts.images.whole_by_framing`). A JPEG's framing was its last two
bytes (EOI) and a PNG's its last twelve (the ``IEND`` chunk): a JPEG's EXIF thumbnail is a
whole JPEG inside its ``APP1`` segment, and a PNG may carry one inside an ancillary chunk,
so a body cut right after that inner image's end read as whole — a short transfer blamed
on the work.
"""

from __future__ import annotations

import io
import random
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from PIL import Image

from curaflow.artifacts.images import Refused, Verified, check_image


def _noise(size: tuple[int, int], seed: int = 3) -> Image.Image:
    rng = random.Random(seed)
    image = Image.new("RGB", size)
    image.putdata([(rng.randrange(256), rng.randrange(256), rng.randrange(256)) for _ in range(size[0] * size[1])])
    return image


def _saved(image: Image.Image, fmt: str) -> bytes:
    out = io.BytesIO()
    image.save(out, format=fmt)
    return out.getvalue()


def jpeg_with_thumbnail() -> tuple[bytes, int]:
    """A JPEG whose ``APP1`` (EXIF) segment holds a thumbnail, a whole JPEG; and where that
    thumbnail ends (its EOI's last byte, + 1)."""
    picture = _noise((64, 64))
    thumbnail = _saved(picture.resize((16, 16)), "JPEG")
    payload = b"Exif\x00\x00II*\x00\x08\x00\x00\x00\x00\x00" + thumbnail
    app1 = b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload
    main = _saved(picture, "JPEG")
    return main[:2] + app1 + main[2:], 2 + len(app1)


def _png_chunk(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


def png_carrying_a_png() -> tuple[bytes, int]:
    """A PNG carrying a whole PNG in an ancillary chunk of its own (``prVw``: a preview)
    after its ``IHDR``; and where the carried PNG ends (its ``IEND``'s last byte, + 1)."""
    outer = _saved(_noise((64, 64)), "PNG")
    inner = _saved(_noise((8, 8), seed=5), "PNG")
    ihdr_end = 8 + 25
    return outer[:ihdr_end] + _png_chunk(b"prVw", inner) + outer[ihdr_end:], ihdr_end + 8 + len(inner)


@pytest.mark.parametrize(
    ("made", "suffix", "inner_end"),
    [(jpeg_with_thumbnail, "jpg", b"\xff\xd9"), (png_carrying_a_png, "png", b"IEND\xaeB`\x82")],
    ids=["jpeg-thumbnail", "png-carried"],
)
def test_a_page_cut_right_after_an_image_it_carries_is_retried_not_the_works(
    tmp_path: Path, made: Callable[[], tuple[bytes, int]], suffix: str, inner_end: bytes
) -> None:
    # A JPEG's EXIF thumbnail ends on its own EOI, a PNG carried in a chunk on its own IEND:
    # a page cut right there ends as a whole file ends, yet is not the file.
    data, cut = made()
    whole = tmp_path / f"whole_p0.{suffix}"
    whole.write_bytes(data)
    assert check_image(whole) == Verified(64, 64)
    page = tmp_path / f"cut_p0.{suffix}"
    page.write_bytes(data[:cut])
    assert page.read_bytes().endswith(inner_end)  # the carried image's end
    assert isinstance(check_image(page), str)  # maybe the transfer's: retried


def test_a_whole_jpeg_or_png_that_does_not_decode_stays_the_works(tmp_path: Path) -> None:
    """Whole by its segments (EOI reached past the thumbnail) or its chunks (IEND reached
    past the carried PNG), a page that does not decode is what the host holds."""
    data, thumbnail_end = jpeg_with_thumbnail()
    sof = data.index(b"\xff\xc0", thumbnail_end)
    broken = data[: sof + 9] + b"\x09" + data[sof + 10 :]  # 9 components: libjpeg refuses
    page = tmp_path / "broken_p0.jpg"
    page.write_bytes(broken)
    checked = check_image(page)
    assert isinstance(checked, Refused) and checked.recognised and checked.kind == "undecodable", checked
    png, _ = png_carrying_a_png()
    at = png.rindex(b"IDAT") + 4
    png = png[:at] + bytes(16) + png[at + 16 :]  # its pixels replaced: a wrong CRC
    page = tmp_path / "broken_p0.png"
    page.write_bytes(png)
    checked = check_image(page)
    assert isinstance(checked, Refused) and checked.recognised and checked.kind == "undecodable", checked


def _com(size: int) -> bytes:
    """A JPEG comment segment of exactly ``size`` bytes (4 to 65 537)."""
    return b"\xff\xfe" + struct.pack(">H", size - 2) + b"c" * (size - 4)


def _text(size: int) -> bytes:
    """A PNG ``tEXt`` chunk of exactly ``size`` bytes (at least 14)."""
    return _png_chunk(b"tEXt", b"k\x00" + b"c" * (size - 14))


def halved_at(data: bytes, cut: int, fmt: str) -> bytes:
    """``data`` (a JPEG of :func:`jpeg_with_thumbnail` or a PNG of
    :func:`png_carrying_a_png`) with a comment (``COM`` / ``tEXt``) put in before the cut —
    after the SOI / the ``IHDR`` — or right after it, so that its first half (what
    :class:`tests.fakes.pximg.FakeImageHost`'s ``close_half`` sends) ends where
    ``data[:cut]`` ends; the whole file stays whole."""
    front, pad, least = (2, _com, 4) if fmt == "jpeg" else (33, _text, 14)
    first = len(data) > 2 * cut + 1
    wanted = len(data) - 2 * cut if first else 2 * cut - len(data)
    for size in (wanted, wanted - 1, wanted + 1, wanted + 2):
        if size < least:
            continue
        out = data[:front] + pad(size) + data[front:] if first else data[:cut] + pad(size) + data[cut:]
        if len(out) // 2 == cut + (size if first else 0):
            return out
    raise AssertionError("no comment puts the cut at the half")

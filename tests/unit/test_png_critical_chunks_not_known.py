"""A whole PNG whose only fault is a critical chunk libpng does not know is no verdict on the work.

A chunk whose type's first letter is upper case is critical (PNG spec 5.4): a decoder that
does not know it stops ("unhandled critical chunk" in libpng, and so in browsers). PNG
defines four (``IHDR``, ``PLTE``, ``IDAT``, ``IEND``); a file may carry another — Apple's
``CgBI`` (before ``IHDR``, its pixels a raw deflate stream of premultiplied BGRA), or one a
later edition of the spec or a writer defines. Every CRC right and the structure otherwise
what libpng reads, such a file is not broken: what does not read it is the decoder, as a
JPEG of a coding libjpeg-turbo does not implement
(:func:`~curaflow.sources.decoding.jpeg_coding_not_decoded`). Until 2026-12-07 the page was
``undecodable``, recognised — the week, and a lasting ``unavailable`` its target's frontier
passed for good — when Pillow decoded it, and ``download_failed`` in every attempt when it
did not (the walk of its framing refused the chunk). Now it is held briefly and counted, as
that JPEG is; what is positively the file's stays the work's: a wrong CRC on a whole file,
a structure libpng refuses whatever chunks it knows, an ``IHDR`` naming an undefined method,
a pixel stream that does not decode in a file with no chunk unknown.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from pathlib import Path

import pytest
from PIL import Image

from curaflow.artifacts import ArtifactStore
from curaflow.artifacts.images import Refused, Verified, check_image
from curaflow.sources.animation import UnusableAnimation, encode_gif
from curaflow.sources.decoding import coding_not_decoded, png_critical_not_known
from curaflow.sources.errors import UnavailableKind, WorkUnavailable
from curaflow.sources.pixiv.ugoira import parse_metadata
from tests.unit.test_store_pages import Pages, work

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def chunk(kind: bytes, payload: bytes, *, good: bool = True) -> bytes:
    """One chunk, its CRC right (``good``) or wrong."""
    crc = zlib.crc32(kind + payload) ^ (0 if good else 1)
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", crc)


def ihdr(*, compression: int = 0) -> bytes:
    """The IHDR of an 8×8 RGB image, 8 bits a sample (its compression method ``compression``)."""
    return chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 2, compression, 0, 0))


#: The filtered scanlines of an 8×8 RGB image (filter type 0, one grey).
RAW = (b"\x00" + b"\x40" * 24) * 8


def idat(*, good: bool = True, cut: bool = False) -> bytes:
    """The pixels as one IDAT of a zlib stream (cut before its end: ``cut``)."""
    stream = zlib.compress(RAW)
    return chunk(b"IDAT", stream[:-6] if cut else stream, good=good)


def raw_deflate_idat() -> bytes:
    """The pixels as Apple's ``CgBI`` files hold them: a deflate stream without zlib's
    header and checksum, which a PNG decoder refuses ("incorrect header check")."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    return chunk(b"IDAT", packer.compress(RAW) + packer.flush())


IEND = chunk(b"IEND", b"")
CGBI = chunk(b"CgBI", b"\x50\x00\x20\x06")
FUTURE = chunk(b"ZXCV", b"a chunk of a later edition")
TEXT = chunk(b"tEXt", b"Title\x00a page")

#: Whole PNGs (every CRC right) whose only fault is a critical chunk libpng does not know.
CRITICAL_NOT_KNOWN = {
    # Pillow skips the chunk and decodes the pixels: verified until libpng's walk refused it.
    "before-the-pixels": SIGNATURE + ihdr() + FUTURE + idat() + IEND,
    "after-the-pixels": SIGNATURE + ihdr() + idat() + FUTURE + IEND,
    "two-of-them": SIGNATURE + ihdr() + FUTURE + idat() + chunk(b"QWER", b"") + IEND,
    "reserved-bit-set": SIGNATURE + ihdr() + chunk(b"ZXcV", b"x") + idat() + IEND,
    # Pillow cannot decode the pixels the chunk announces: retried as download_failed.
    "cgbi-as-apple-writes-it": SIGNATURE + CGBI + ihdr() + raw_deflate_idat() + IEND,
    "cgbi-after-ihdr": SIGNATURE + ihdr() + CGBI + raw_deflate_idat() + IEND,
    # The unknown chunk announces pixels Pillow cannot read whatever they are.
    "pixels-not-decoded": SIGNATURE + ihdr() + FUTURE + idat(cut=True) + IEND,
    # An ancillary chunk's wrong CRC is dropped by libpng: the unknown chunk is what stops it.
    "and-a-bad-ancillary-crc": SIGNATURE + ihdr() + chunk(b"tEXt", b"k\x00v", good=False) + FUTURE + idat() + IEND,
}

#: Whole PNGs Pillow or libpng refuses for what is positively the file's, whatever chunks
#: the decoder knows: each stays the work's (``undecodable``, recognised).
THE_FILES = {
    "bad-crc-on-the-unknown-chunk": SIGNATURE + ihdr() + chunk(b"ZXCV", b"x", good=False) + idat() + IEND,
    "bad-crc-on-idat": SIGNATURE + ihdr() + FUTURE + idat(good=False) + IEND,
    "text-before-ihdr": SIGNATURE + TEXT + ihdr() + FUTURE + idat() + IEND,
    "second-ihdr": SIGNATURE + ihdr() + FUTURE + ihdr() + idat() + IEND,
    "digit-in-type": SIGNATURE + ihdr() + FUTURE + chunk(b"tE5t", b"x") + idat() + IEND,
    "idats-not-consecutive": SIGNATURE
    + ihdr()
    + chunk(b"IDAT", zlib.compress(RAW)[:20])
    + FUTURE
    + chunk(b"IDAT", zlib.compress(RAW)[20:])
    + IEND,
    "compression-method-not-deflate": SIGNATURE + ihdr(compression=1) + FUTURE + idat() + IEND,
    "pixels-cut-no-unknown-chunk": SIGNATURE + ihdr() + idat(cut=True) + IEND,
    # The ancillary chunk's wrong CRC is dropped (what libpng shows): the method stays undefined.
    "undefined-method-and-a-bad-ancillary-crc": SIGNATURE
    + ihdr(compression=1)
    + chunk(b"tEXt", b"k\x00v", good=False)
    + idat()
    + IEND,
}


def test_the_pngs_differ_from_a_verified_one_by_the_chunk_alone(tmp_path: Path) -> None:
    page = tmp_path / "1_p0.png"
    page.write_bytes(SIGNATURE + ihdr() + idat() + IEND)
    assert check_image(page) == Verified(8, 8)
    page.write_bytes(SIGNATURE + ihdr() + TEXT + chunk(b"prVt", b"x") + idat() + IEND)
    assert check_image(page) == Verified(8, 8)


def test_apng_chunks_are_ancillary_and_an_apng_is_verified(tmp_path: Path) -> None:
    # acTL, fcTL, fdAT: their first letter lower case (PNG spec 5.4; APNG, PNG third edition).
    assert not any(png_critical_not_known(kind) for kind in (b"acTL", b"fcTL", b"fdAT", b"IHDR", b"IDAT"))
    assert all(png_critical_not_known(kind) for kind in (b"CgBI", b"ZXCV", b"ZXcV", b"DDAT"))
    page = tmp_path / "1_p0.png"
    frames = [Image.new("RGB", (16, 16), (i * 90, 0, 0)) for i in range(3)]
    frames[0].save(page, "PNG", save_all=True, append_images=frames[1:])
    assert b"fdAT" in page.read_bytes()
    assert check_image(page) == Verified(16, 16)
    assert coding_not_decoded(io.BytesIO(page.read_bytes())) is False


@pytest.mark.parametrize("data", CRITICAL_NOT_KNOWN.values(), ids=CRITICAL_NOT_KNOWN.keys())
def test_a_whole_png_with_a_critical_chunk_libpng_does_not_know_is_not_recognised_as_the_works(
    tmp_path: Path, data: bytes
) -> None:
    page = tmp_path / "1_p0.png"
    page.write_bytes(data)
    checked = check_image(page)
    assert isinstance(checked, Refused), checked
    assert (checked.kind, checked.recognised) == (UnavailableKind.UNDECODABLE, False), checked
    assert coding_not_decoded(io.BytesIO(data)) is True
    assert page.read_bytes() == data  # the page itself is untouched


@pytest.mark.parametrize("data", THE_FILES.values(), ids=THE_FILES.keys())
def test_a_whole_png_broken_whatever_the_decoder_knows_stays_the_works(tmp_path: Path, data: bytes) -> None:
    page = tmp_path / "1_p0.png"
    page.write_bytes(data)
    checked = check_image(page)
    assert isinstance(checked, Refused), checked
    assert (checked.kind, checked.recognised) == (UnavailableKind.UNDECODABLE, True), checked
    assert coding_not_decoded(io.BytesIO(data)) is False


def test_a_cut_png_with_a_critical_chunk_libpng_does_not_know_is_retried(tmp_path: Path) -> None:
    page = tmp_path / "1_p0.png"
    page.write_bytes(CRITICAL_NOT_KNOWN["cgbi-as-apple-writes-it"][:-20])
    assert isinstance(check_image(page), str)  # not whole by its framing: download_failed


def _frame_refusal(tmp_path: Path, frame: bytes) -> UnusableAnimation:
    path = tmp_path / "f.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("000000.png", frame)
        archive.writestr("000001.png", SIGNATURE + ihdr() + idat() + IEND)
    meta = parse_metadata(
        {
            "ugoira_metadata": {
                "zip_urls": {"medium": "https://i.pximg.net/z/1_ugoira600x600.zip"},
                "frames": [{"file": "000001.png", "delay": 50}, {"file": "000000.png", "delay": 50}],
            }
        }
    )
    with pytest.raises(UnusableAnimation) as caught:
        encode_gif(path, meta, tmp_path / "1_ugoira.gif")
    return caught.value


@pytest.mark.parametrize("shape", ["cgbi-as-apple-writes-it", "cgbi-after-ihdr", "pixels-not-decoded"])
def test_an_ugoira_png_frame_pillow_cannot_decode_for_a_critical_chunk_it_does_not_know_is_not_the_works(
    tmp_path: Path, shape: str
) -> None:
    assert _frame_refusal(tmp_path, CRITICAL_NOT_KNOWN[shape]).recognised is False


def test_an_ugoira_png_frame_that_does_not_decode_with_no_chunk_unknown_stays_the_works(tmp_path: Path) -> None:
    assert _frame_refusal(tmp_path, THE_FILES["pixels-cut-no-unknown-chunk"]).recognised is True


def test_an_ugoira_png_frame_pillow_decodes_despite_a_critical_chunk_it_does_not_know_is_encoded(
    tmp_path: Path,
) -> None:
    # The animation delivered is the GIF curaflow encodes from Pillow's pixels, not the frame.
    path = tmp_path / "f.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("000000.png", CRITICAL_NOT_KNOWN["before-the-pixels"])
    meta = parse_metadata(
        {
            "ugoira_metadata": {
                "zip_urls": {"medium": "https://i.pximg.net/z/1_ugoira600x600.zip"},
                "frames": [{"file": "000000.png", "delay": 50}],
            }
        }
    )
    assert encode_gif(path, meta, tmp_path / "1_ugoira.gif") == (8, 8)


@pytest.mark.parametrize("recognised", [False, True], ids=["critical-not-known", "bad-idat-crc"])
async def test_the_store_holds_a_work_whose_page_has_a_critical_chunk_not_known_briefly(
    tmp_path: Path, recognised: bool
) -> None:
    page = THE_FILES["bad-crc-on-idat"] if recognised else CRITICAL_NOT_KNOWN["before-the-pixels"]
    with pytest.raises(WorkUnavailable) as raised:
        await ArtifactStore(tmp_path).fetch(Pages([page]), work(1), "job", "t")  # type: ignore[arg-type]
    assert (raised.value.kind, raised.value.recognised) == (UnavailableKind.UNDECODABLE, recognised)

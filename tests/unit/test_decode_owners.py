"""One owner of "too large" and of a decode's verdict (curaflow.sources.decoding).

* Pillow's own decompression-bomb guard (``Image.MAX_IMAGE_PIXELS``: an error past ~179 M
  pixels, a ``DecompressionBombWarning`` past ~89 M) used to refuse on its own: a
  sequential JPEG the budget counts at 1/8 (20 000 px square: 6.25 M pixels decoded) was
  refused and the work blamed, and an operator's ``image_max_pixels`` over Pillow's bound
  was not the one that decided. The budget is now the only owner; what Pillow's guard
  looked at before allocating (a GIF's frames growing the canvas, a WebP's canvas) is
  planned from the bytes before Pillow opens the file.
* A warning Pillow emits (the bomb warning, a malformed EXIF, an invalid APNG) changed the
  verdict under ``-W error`` / ``PYTHONWARNINGS=error``: it was raised out of the check.
* A PNG libpng refuses (a chunk before ``IHDR``, a chunk type that is not four ASCII
  letters, a second ``IHDR``) was verified by Pillow. (One whose only fault is a critical
  chunk libpng does not know is held, not the work's: ``test_png_critical_chunks_not_known``.)
"""

from __future__ import annotations

import io
import struct
import warnings
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageFile

from bench.chaos import bombs
from curaflow.artifacts.images import Refused, Verified, check_image
from curaflow.sources.animation import encode_gif
from curaflow.sources.decoding import DecodeBudget
from curaflow.sources.errors import UnavailableKind
from curaflow.sources.pixiv.ugoira import parse_metadata
from tests.unit.test_image_checks import checked_in_a_process


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The size of every frame whose pixels were decoded (``ImageFile.load``), in order."""
    calls: list[tuple[int, int]] = []
    real = ImageFile.ImageFile.load

    def load(self: ImageFile.ImageFile) -> Any:
        calls.append(self.size)
        return real(self)

    monkeypatch.setattr(ImageFile.ImageFile, "load", load)
    return calls


def flat_jpeg(width: int, height: int) -> bytes:
    """A sequential greyscale JPEG of ``width`` × ``height`` of one flat grey (multiples of
    32), made without holding its pixels: every 8×8 block is a DC difference of 0 and an
    end of block (6 bits with the standard tables), so 4 blocks are the 3 bytes 28 a2 8a."""
    buf = io.BytesIO()
    Image.new("L", (32, 32), 128).save(buf, "JPEG", quality=90)
    data = buf.getvalue()
    sof, sos = data.index(b"\xff\xc0"), data.index(b"\xff\xda")
    scan = sos + 2 + int.from_bytes(data[sos + 2 : sos + 4], "big")
    assert data[scan:] == b"\x28\xa2\x8a" * 4 + b"\xff\xd9"  # what the pattern assumes
    head = data[: sof + 5] + struct.pack(">HH", height, width) + data[sof + 9 : scan]
    return head + b"\x28\xa2\x8a" * (width * height // 256) + b"\xff\xd9"


def over_budget_by_the_setting(checked: object, setting: str = "outbound.image_max_pixels") -> bool:
    return isinstance(checked, Refused) and checked.kind == UnavailableKind.OVER_BUDGET and setting in checked.why


# ---- item 1: the budget is the only owner of "too large" ---------------------------------


def test_pillows_own_guard_defers_to_the_budget() -> None:
    assert Image.MAX_IMAGE_PIXELS is None


def test_a_sequential_jpeg_over_pillows_bound_that_the_budget_admits_is_verified(tmp_path: Path) -> None:
    """20 000 px square (400 M pixels: over twice Pillow's bound) read in one scan is decoded
    at 1/8 — 6.25 M pixels, within the default frame bound: it was refused as a
    decompression bomb and the work made unavailable."""
    path = tmp_path / "wide_p0.jpg"
    path.write_bytes(flat_jpeg(20_000, 20_000))
    meter = DecodeBudget().meter()
    assert check_image(path, meter=meter) == Verified(20_000, 20_000)
    assert meter.pixels == 2500 * 2500


def test_an_operator_raised_frame_bound_is_the_one_that_decides(tmp_path: Path) -> None:
    """``image_max_pixels`` raised to 300 M: a PNG claiming 20 000 px square (400 M) is over
    it, refused from its header by the budget (the message names the setting) — before,
    Pillow's own bound refused it first with its own message."""
    path = tmp_path / "huge_p0.png"
    path.write_bytes(bombs.png((1, 1)))
    data = bytearray(path.read_bytes())
    data[16:24] = struct.pack(">II", 20_000, 20_000)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))
    path.write_bytes(bytes(data))
    checked = check_image(path, max_pixels=300_000_000)
    assert over_budget_by_the_setting(checked), checked


def _gif_growing(screen: tuple[int, int], frames: list[tuple[int, int]]) -> bytes:
    """A GIF of ``screen`` whose frames' descriptors claim the sizes of ``frames`` (each
    disposed to the background: Pillow fills the frame's extent when it seeks to it), with
    the LZW data of a 1×1 frame."""
    head, image = bombs._gif_parts((1, 1))
    out = bytearray(head)
    out[:6] = b"GIF89a"
    out[6:10] = struct.pack("<HH", *screen)
    for size in frames:
        out += b"\x21\xf9\x04\x08\x01\x00\x00\x00"  # disposal 2 (restore to background)
        out += image[:5] + struct.pack("<HH", *size) + image[9:]
    return bytes(out + b";")


@pytest.mark.parametrize(
    "frames",
    [
        pytest.param([(12_000, 12_000)], id="first-frame-grows-the-canvas"),
        pytest.param([(1, 1), (12_000, 12_000)], id="second-frame-grows-the-canvas"),
        pytest.param([(1, 1), (20_000, 20_000)], id="second-frame-over-pillows-bound"),
    ],
)
def test_a_gif_whose_frames_grow_its_canvas_is_refused_before_pillow_allocates(
    tmp_path: Path, decoded: list[tuple[int, int]], frames: list[tuple[int, int]]
) -> None:
    """Pillow grows a GIF's canvas to a frame that extends past the screen, and fills the
    frame's extent when it seeks to it — before the frame is charged: 144 M pixels were
    allocated (Pillow's guard only warned) and the first frame decoded before the refusal."""
    path = tmp_path / "grow_p0.gif"
    path.write_bytes(_gif_growing((100, 100), frames))
    checked = check_image(path)
    assert over_budget_by_the_setting(checked), checked
    assert decoded == []
    result = checked_in_a_process(path)
    assert "OVER_BUDGET" in result["checked"] and result["grew_kib"] < 64 * 1024, result


@pytest.mark.parametrize("stray", [b"\x00", b"\xff" * 300], ids=["one-byte", "a-run"])
def test_a_gif_hiding_a_growing_frame_behind_bytes_that_start_no_block_is_refused_before_pillow_allocates(
    tmp_path: Path, decoded: list[tuple[int, int]], stray: bytes
) -> None:
    """Pillow skips a byte that starts no GIF block (GifImagePlugin ``_seek``) and reads the
    frames after it; the walk of the blocks stopped there, so a second frame behind one
    stray byte growing the canvas to 20 000 px square was not planned: Pillow filled its
    extent as it seeked to it (1.5 GB, 1.7 s of CPU) before the frame was charged."""
    head, _ = bombs._gif_parts((1, 1))
    path = tmp_path / "stray_p0.gif"
    gif = _gif_growing((100, 100), [(1, 1), (20_000, 20_000)])
    second = gif.index(b"\x21\xf9", len(head) + 1)
    path.write_bytes(gif[:second] + stray + gif[second:])
    checked = check_image(path)
    assert over_budget_by_the_setting(checked), checked
    assert decoded == []
    result = checked_in_a_process(path)
    assert "OVER_BUDGET" in result["checked"] and result["grew_kib"] < 64 * 1024, result


def _webp_claiming(canvas: tuple[int, int]) -> bytes:
    """An animated WebP of two 16×16 frames whose ``VP8X`` claims ``canvas``."""
    buf = io.BytesIO()
    frames = [Image.new("RGB", (16, 16), (i * 90, 0, 0)) for i in range(2)]
    frames[0].save(buf, "WEBP", save_all=True, append_images=frames[1:], lossless=True)
    data = bytearray(buf.getvalue())
    assert data[12:16] == b"VP8X"
    data[24:30] = (canvas[0] - 1).to_bytes(3, "little") + (canvas[1] - 1).to_bytes(3, "little")
    return bytes(data)


@pytest.mark.parametrize("canvas", [(10_000, 10_000), (16_000, 16_000)], ids=["100M", "256M"])
def test_a_webp_canvas_over_the_bound_is_refused_before_pillow_opens_it(
    tmp_path: Path, decoded: list[tuple[int, int]], canvas: tuple[int, int]
) -> None:
    """libwebp allocates the canvas (twice) when Pillow opens an animated WebP: the canvas
    is planned from the container's header first."""
    path = tmp_path / "canvas_p0.webp"
    path.write_bytes(_webp_claiming(canvas))
    checked = check_image(path)
    assert over_budget_by_the_setting(checked), checked
    assert decoded == []
    result = checked_in_a_process(path)
    assert "OVER_BUDGET" in result["checked"] and result["grew_kib"] < 64 * 1024, result


def test_an_ugoira_frame_whose_canvas_is_over_the_bound_is_refused_before_pillow_opens_it(tmp_path: Path) -> None:
    """The frames' headers are read before any is decoded; a GIF or WebP frame's canvas is
    planned from its bytes, before Pillow opens it (and allocates)."""
    archive = tmp_path / "frames.zip"
    small = io.BytesIO()
    Image.new("RGB", (16, 16), (1, 2, 3)).save(small, "PNG")
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("000000.png", small.getvalue())
        zf.writestr("000001.webp", _webp_claiming((16_000, 16_000)))
        zf.writestr("000002.gif", _gif_growing((100, 100), [(20_000, 20_000)]))
    for name in ("000001.webp", "000002.gif"):
        meta = parse_metadata(
            {
                "ugoira_metadata": {
                    "zip_urls": {"medium": "https://i.pximg.net/x.zip"},
                    "frames": [{"file": "000000.png", "delay": 50}, {"file": name, "delay": 50}],
                }
            }
        )
        with pytest.raises(Exception) as raised:
            encode_gif(archive, meta, tmp_path / "out.gif")
        assert type(raised.value).__name__ == "OverBudget" and "outbound.image_max_pixels" in str(raised.value), name


# ---- item 2: a warning never changes a verdict -------------------------------------------


def _jpeg_with_a_broken_exif() -> bytes:
    """A JPEG without JFIF whose EXIF has a tag pointing past its data (Pillow warns when
    it reads the EXIF for the DPI, as it opens the file)."""
    tiff = b"II*\x00" + struct.pack("<IH", 8, 1) + struct.pack("<HHII", 0x010F, 2, 100, 100_000) + b"\0\0\0\0"
    app1 = b"Exif\x00\x00" + tiff
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (1, 2, 3)).save(buf, "JPEG")
    data = buf.getvalue()
    assert data[2:4] == b"\xff\xe0"
    data = data[:2] + data[4 + int.from_bytes(data[4:6], "big") :]  # no JFIF: the DPI comes from EXIF
    return data[:2] + b"\xff\xe1" + struct.pack(">H", len(app1) + 2) + app1 + data[2:]


def _png_with_two_actl() -> bytes:
    """A PNG with two ``acTL`` chunks: Pillow warns "Invalid APNG" and reads the still image."""

    def chunk(kind: bytes, payload: bytes) -> bytes:
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))

    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (1, 2, 3)).save(buf, "PNG")
    data = buf.getvalue()
    actl = chunk(b"acTL", struct.pack(">II", 1, 0))
    return data[:33] + actl + actl + data[33:]


@pytest.mark.parametrize(
    ("name", "make", "size"),
    [
        pytest.param("big_p0.jpg", lambda: flat_jpeg(10_000, 10_000), (10_000, 10_000), id="bomb-warning-jpeg"),
        pytest.param("exif_p0.jpg", _jpeg_with_a_broken_exif, (64, 64), id="broken-exif"),
        pytest.param("apng_p0.png", _png_with_two_actl, (64, 64), id="invalid-apng"),
    ],
)
def test_a_pillow_warning_does_not_change_the_verdict_under_warnings_as_errors(
    tmp_path: Path, name: str, make: Any, size: tuple[int, int]
) -> None:
    path = tmp_path / name
    path.write_bytes(make())
    assert check_image(path) == Verified(*size)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_image(path) == Verified(*size)


def test_an_ugoira_frame_pillow_warns_about_is_encoded_under_warnings_as_errors(tmp_path: Path) -> None:
    """A palette PNG frame with a transparency table: Pillow warns as it converts it."""
    frame = Image.new("P", (16, 16), 1)
    frame.putpalette([0, 0, 0, 255, 0, 0, 0, 255, 0] + [0] * (3 * 253))
    buf = io.BytesIO()
    frame.save(buf, "PNG", transparency=bytes([0, 128, 255]))
    archive = tmp_path / "frames.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("000000.png", buf.getvalue())
        zf.writestr("000001.png", buf.getvalue())
    meta = parse_metadata(
        {
            "ugoira_metadata": {
                "zip_urls": {"medium": "https://i.pximg.net/x.zip"},
                "frames": [{"file": "000000.png", "delay": 50}, {"file": "000001.png", "delay": 50}],
            }
        }
    )
    assert encode_gif(archive, meta, tmp_path / "a.gif") == (16, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert encode_gif(archive, meta, tmp_path / "b.gif") == (16, 16)


def _webp_whose_bitstream_is_not_its_canvas() -> bytes:
    """A whole WebP (its RIFF length is the file's) whose ``VP8X`` canvas is 16×16 and whose
    ``VP8`` picture claims 16 383 px square: libwebp refuses it as Pillow opens it."""
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (9, 9, 9)).save(buf, "WEBP")
    vp8 = bytearray(buf.getvalue()[12:])
    assert vp8[:4] == b"VP8 "
    struct.pack_into("<HH", vp8, 14, 16_383, 16_383)
    vp8x = b"VP8X" + struct.pack("<I", 10) + bytes(4) + (15).to_bytes(3, "little") * 2
    body = b"WEBP" + vp8x + bytes(vp8)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def test_a_whole_image_pillow_cannot_open_is_the_works_and_a_cut_one_retried(tmp_path: Path) -> None:
    """The verdict of a page Pillow refuses as it opens it is read from its signature and
    its framing, as for one that fails later: a whole WebP libwebp refuses was answered
    as maybe the transfer's (retried every attempt, the work never told unavailable), and a
    GIF cut inside its first image descriptor as no image (``not_an_image``: held back,
    never retried) — a short download blamed on the work."""
    whole = tmp_path / "lying_p0.webp"
    whole.write_bytes(_webp_whose_bitstream_is_not_its_canvas())
    checked = check_image(whole)
    assert isinstance(checked, Refused) and checked.kind == UnavailableKind.UNDECODABLE, checked
    assert checked.recognised
    gif = _gif_growing((10, 10), [(5, 5)])
    cut = tmp_path / "cut_p0.gif"
    cut.write_bytes(gif[: gif.index(b"\x2c", 13) + 5])
    assert isinstance(check_image(cut), str)
    page = tmp_path / "page_p0.html"
    page.write_bytes(b"<html>rate limited</html>")
    assert check_image(page) == Refused("not an image", recognised=False)


# ---- item 4: a PNG libpng refuses is not verified ----------------------------------------


def _chunk(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


def _png_parts() -> tuple[bytes, bytes, bytes, bytes]:
    """A 64×64 PNG as its signature, IHDR, IDAT and IEND chunks (every CRC right)."""
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (1, 2, 3)).save(buf, "PNG")
    data = buf.getvalue()
    idat = data.index(b"IDAT") - 4
    end = idat + 12 + int.from_bytes(data[idat : idat + 4], "big")
    assert data[end + 4 : end + 8] == b"IEND"
    return data[:8], data[8:33], data[idat:end], data[end:]


def _libpng_refuses(shape: str) -> bytes:
    sig, ihdr, idat, iend = _png_parts()
    text = _chunk(b"tEXt", b"Title\x00a page")
    return {
        "text-before-ihdr": sig + text + ihdr + idat + iend,
        "digit-in-type": sig + ihdr + _chunk(b"tE5t", b"x") + idat + iend,
        "underscore-in-type": sig + ihdr + _chunk(b"ab_c", b"x") + idat + iend,
        "second-ihdr": sig + ihdr + ihdr + idat + iend,
        # IHDR naming a compression method other than deflate (0, the only one PNG
        # defines): libpng's "Unknown compression method in IHDR"; Pillow reads the
        # pixels as deflate whatever the byte says.
        "compression-method-not-deflate": sig + _chunk(b"IHDR", ihdr[8:18] + b"\x01" + ihdr[19:21]) + idat + iend,
        # IHDR of 14 bytes (PNG defines 13): libpng's "IHDR: invalid"; Pillow reads the
        # first 13 and verified it (2026-12-07).
        "ihdr-longer-than-13-bytes": sig + _chunk(b"IHDR", ihdr[8:21] + b"\x00") + idat + iend,
    }[shape]


@pytest.mark.parametrize(
    "shape",
    [
        "text-before-ihdr",
        "digit-in-type",
        "underscore-in-type",
        "second-ihdr",
        "compression-method-not-deflate",
        "ihdr-longer-than-13-bytes",
    ],
)
def test_a_png_libpng_refuses_is_refused_as_the_works(tmp_path: Path, shape: str) -> None:
    """libpng (and so the browsers, Telegram's and Discord's previews) stops at these
    ("missing IHDR", "invalid chunk type", "IHDR: out of place"); Pillow verified them.
    Every CRC is right: the bytes are what the file holds, so the page is the work's
    (``undecodable``), not a transfer's."""
    path = tmp_path / "odd_p0.png"
    path.write_bytes(_libpng_refuses(shape))
    checked = check_image(path)
    assert isinstance(checked, Refused) and checked.kind == UnavailableKind.UNDECODABLE, checked
    assert checked.recognised and "libpng" in checked.why, checked


def test_a_png_libpng_reads_is_still_verified(tmp_path: Path) -> None:
    """Ancillary chunks anywhere after IHDR, private ones, an APNG: read by libpng."""
    sig, ihdr, idat, iend = _png_parts()
    path = tmp_path / "fine_p0.png"
    path.write_bytes(
        sig + ihdr + _chunk(b"tEXt", b"k\x00v") + _chunk(b"prVt", b"x") + idat + _chunk(b"tIME", b"\0" * 7) + iend
    )
    assert check_image(path) == Verified(64, 64)
    frames = [Image.new("RGB", (16, 16), (i * 90, 0, 0)) for i in range(3)]
    frames[0].save(path, "PNG", save_all=True, append_images=frames[1:])
    assert check_image(path) == Verified(16, 16)


# ---- item 3: a JPEG's entropy-coded data is not checked beyond what libjpeg refuses -------


def test_a_jpeg_whose_scan_data_was_replaced_is_verified_as_libjpeg_shows_it(tmp_path: Path) -> None:
    """JPEG carries no checksum, and libjpeg decodes replaced scan data with at most a
    warning (often none: bytes that are valid codes decode to other pixels), which
    Pillow's decoder discards (DESIGN "Image checks": no reliable signal, none guessed)."""
    buf = io.BytesIO()
    Image.effect_noise((256, 256), 64).convert("RGB").save(buf, "JPEG", quality=90)
    data = bytearray(buf.getvalue())
    sos = data.index(b"\xff\xda")
    start = sos + 2 + int.from_bytes(data[sos + 2 : sos + 4], "big")
    data[start + 1000 : start + 1400] = bytes(range(1, 201)) * 2  # no 0xFF: no marker inside
    path = tmp_path / "replaced_p0.jpg"
    path.write_bytes(bytes(data))
    assert check_image(path) == Verified(256, 256)

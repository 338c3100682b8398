"""The decode check of a fetched page is bounded (curaflow.artifacts.verify_image).

A page is refused by the pixel size its header claims, before any pixel is decoded, and
a page that cannot be verified is never "accepted on its length": it is not an image
that can be delivered (the work is unavailable).
"""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import warnings
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from curaflow.artifacts import verify_image
from curaflow.artifacts.images import Verified, check_image, one_scan
from curaflow.sources.animation import UnusableAnimation, encode_gif
from curaflow.sources.decoding import PNG_MAX_CHUNKS, DecodeBudget, png_without_bad_ancillary
from curaflow.sources.pixiv.ugoira import parse_metadata


def refused(problem: object) -> bool:
    """A verdict that the page can never be delivered (not None: whole; not a str: retry)."""
    return type(problem).__name__ == "Refused"


def png_claiming(path: Path, width: int, height: int) -> Path:
    """A PNG whose header claims ``width`` × ``height``, with a few bytes of pixel data."""

    def chunk(kind: bytes, payload: bytes) -> bytes:
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")
    )
    return path


def checked_in_a_process(path: Path, max_pixels: int | None = None) -> dict[str, Any]:
    """``check_image(path, max_pixels=...)`` in a process of its own: its answer (``repr``)
    and how much its peak RSS grew (KiB) — a fresh process, so the peak is the check's.
    The interpreter's warning filters are left as they start (the check's verdict does not
    depend on them)."""
    code = (
        "import resource, json\n"
        "from pathlib import Path\n"
        "from curaflow.artifacts.images import check_image\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        f"checked = check_image(Path({str(path)!r}), max_pixels={max_pixels!r})\n"
        "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print(json.dumps({'checked': repr(checked), 'grew_kib': after - before}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def test_a_header_claiming_60000_square_is_refused_not_accepted(tmp_path: Path) -> None:
    problem = verify_image(png_claiming(tmp_path / "p0.png", 60000, 60000))
    assert refused(problem), problem


def test_a_small_png_of_13000_square_is_refused_before_decoding(tmp_path: Path) -> None:
    # 657 KB on disk, 169 megapixels: a full decode holds ~680 MB
    path = tmp_path / "big_p0.png"
    # made in a process of its own: Linux keeps a parent's peak RSS across fork + exec
    make = f"from PIL import Image; Image.new('1', (13000, 13000), 1).save({str(path)!r}, format='PNG')"
    subprocess.run([sys.executable, "-c", make], check=True, timeout=120)
    assert path.stat().st_size < 2_000_000
    result = checked_in_a_process(path)
    assert result["checked"].startswith("Refused("), result
    assert result["grew_kib"] < 64 * 1024, result  # the check never held the decoded image


def test_a_page_that_is_not_an_image_is_refused_whatever_its_name(tmp_path: Path) -> None:
    for name in ("p0.json", "p0.jpg", "p0.bin"):
        path = tmp_path / name
        path.write_text(json.dumps({"service": "internal", "secret": "x"}))
        assert refused(verify_image(path)), name


def test_an_image_within_the_bound_is_verified_and_a_broken_one_retried(tmp_path: Path) -> None:
    good = tmp_path / "ok_p0.png"
    Image.new("RGB", (800, 600), (10, 20, 30)).save(good, format="PNG")
    assert verify_image(good) is None
    cut = tmp_path / "cut_p0.png"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    problem = verify_image(cut)
    assert isinstance(problem, str)  # short: another download may succeed
    assert refused(verify_image(good, max_pixels=100_000))


def test_a_jpeg_is_decoded_from_its_one_open_and_a_cut_one_still_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pillow's ``verify()`` of a JPEG checks nothing, so a JPEG is opened once and fully
    decoded from that open; a PNG (CRCs checked by ``verify()``) is opened twice. Cut in
    half, either is still short (a ``str``: another download may succeed)."""
    opened: list[str] = []
    real_open = Image.open

    def counting_open(fp: Any, *args: Any, **kwargs: Any) -> Image.Image:
        opened.append(Path(getattr(fp, "name", fp)).suffix)  # a path, or the page's file opened once
        return real_open(fp, *args, **kwargs)

    monkeypatch.setattr(Image, "open", counting_open)
    for name, fmt in (("a_p0.jpg", "JPEG"), ("b_p0.png", "PNG")):
        good = tmp_path / name
        Image.new("RGB", (640, 480), (10, 20, 30)).save(good, format=fmt)
        opened.clear()
        checked = check_image(good)
        assert checked == Verified(640, 480)
        assert len(opened) == (1 if fmt == "JPEG" else 2), (fmt, opened)
        cut = tmp_path / f"cut_{name}"
        cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
        assert isinstance(check_image(cut), str), fmt


def test_a_jpeg_carrying_more_pictures_is_verified_by_its_first(tmp_path: Path) -> None:
    """A JPEG with more pictures after its first (MPO: a phone's depth or gain map, a stereo
    pair) is what any JPEG reader shows as its first picture: a deliverable image, its first
    picture decoded at 1/8 scale — until 2026-12-05 it was refused as not an image, the work
    lost for a file shape curaflow did not know. The pictures after the first are not the
    check: one whose picture index is wrong (Pillow's own writer gets it wrong past two
    pictures) still shows, and is verified; so does one with a trailer after its last
    picture (phones append their own data). A transfer cut short is the download's check
    (``Content-Length``), as for any page."""
    mpo = tmp_path / "a_p0.jpg"
    first, second = Image.new("RGB", (1600, 1200), (10, 20, 30)), Image.new("RGB", (400, 300), (90, 90, 90))
    first.save(mpo, format="MPO", save_all=True, append_images=[second])
    with Image.open(mpo) as opened:
        assert (opened.format, getattr(opened, "n_frames", 1)) == ("MPO", 2)
    meter = DecodeBudget().meter()
    assert check_image(mpo, meter=meter) == Verified(1600, 1200)
    assert (meter.frames, meter.pixels) == (1, 200 * 150)  # its first picture, at 1/8 scale
    trailer = tmp_path / "trailer_p0.jpg"
    trailer.write_bytes(mpo.read_bytes() + b"SEFH" + bytes(64) + b"SEFT")
    assert check_image(trailer) == Verified(1600, 1200)
    many = tmp_path / "many_p0.jpg"
    pictures = [Image.new("RGB", (64, 48), (i * 40, 0, 0)) for i in range(5)]
    pictures[0].save(many, format="MPO", save_all=True, append_images=pictures[1:])
    assert check_image(many) == Verified(64, 48)


def _picture(fmt: str, **options: Any) -> bytes:
    """A 64x64 noisy JPEG, or an MPO with that picture first."""
    first = Image.frombytes("RGB", (64, 64), os.urandom(64 * 64 * 3))
    buf = io.BytesIO()
    if fmt == "MPO":
        first.save(buf, "MPO", save_all=True, append_images=[Image.new("RGB", (16, 16))], **options)
    else:
        first.save(buf, "JPEG", **options)
    return buf.getvalue()


def _scans_of_their_own(data: bytes) -> bytes:
    """``data`` (a sequential three-component JPEG) with its scan rewritten to hold its first
    component only: what libjpeg then reads as a file whose components come in scans of
    their own."""
    sos = data.index(b"\xff\xda")
    length = struct.unpack(">H", data[sos + 2 : sos + 4])[0]
    count = data[sos + 4]
    first = data[sos + 5 : sos + 7]
    spectral = data[sos + 5 + 2 * count : sos + 2 + length]  # Ss, Se, Ah/Al
    return data[:sos] + b"\xff\xda" + struct.pack(">H", 8) + b"\x01" + first + spectral + data[sos + 2 + length :]


@pytest.mark.parametrize("fmt", ["JPEG", "MPO"])
@pytest.mark.parametrize("shape", ["progressive", "scans"])
def test_a_small_picture_claiming_13000_square_in_several_scans_is_refused_before_it_allocates(
    tmp_path: Path, fmt: str, shape: str
) -> None:
    """A JPEG read in several scans — progressive, or a sequential one whose components
    come in scans of their own — is not decoded at 1/8 of its size: libjpeg keeps every
    coefficient of the picture at full size (2 bytes × 3 components × 169 M here) whatever
    ``draft`` scales the output to. Counted at 1/8, ~1.6 KB claiming 13 000 px square was
    verified after ~940 MiB (found by a break-it pass, 2026-12-05); counted at its size, it
    is over the frame bound before anything is decoded."""
    data = _picture(fmt, progressive=shape == "progressive", subsampling=0)
    if shape == "scans":
        data = _scans_of_their_own(data)
    sof = data.index(b"\xff\xc2" if shape == "progressive" else b"\xff\xc0")
    path = tmp_path / "p0.jpg"
    path.write_bytes(data[: sof + 5] + struct.pack(">HH", 13000, 13000) + data[sof + 9 :])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Pillow's own guard defers to the budget: no warning
        with Image.open(path) as image:
            assert (image.format, image.size) == (fmt, (13000, 13000))
    result = checked_in_a_process(path)
    assert result["checked"].startswith("Refused(") and "OVER_BUDGET" in result["checked"], result
    assert result["grew_kib"] < 64 * 1024, result


def test_one_scan_reads_the_markers_not_what_an_app_segment_holds(tmp_path: Path) -> None:
    """A photo's EXIF thumbnail is a whole JPEG, scan included, inside an APP1 segment: it
    is skipped by its length, so the picture itself is still one scan (charged 1/8)."""
    thumbnail = _picture("JPEG")
    photo = io.BytesIO()
    Image.new("RGB", (1600, 1200), (10, 20, 30)).save(photo, "JPEG")
    app1 = b"Exif\x00\x00" + thumbnail
    data = photo.getvalue()
    path = tmp_path / "exif_p0.jpg"
    path.write_bytes(data[:2] + b"\xff\xe1" + struct.pack(">H", len(app1) + 2) + app1 + data[2:])
    assert one_scan(path)
    meter = DecodeBudget().meter()
    assert check_image(path, meter=meter) == Verified(1600, 1200)
    assert meter.pixels == 200 * 150
    separate = tmp_path / "separate_p0.jpg"
    separate.write_bytes(_scans_of_their_own(data))
    assert not one_scan(separate)
    for broken in (b"", b"\xff\xd8", b"\xff\xd8\xff\xe1\x00", b"\x89PNG\r\n", data[:20]):
        cut = tmp_path / "cut_p0.jpg"
        cut.write_bytes(broken)
        assert not one_scan(cut), broken


def test_a_progressive_picture_is_charged_its_full_size_a_baseline_one_an_eighth(tmp_path: Path) -> None:
    for progressive, charged in ((False, 200 * 150), (True, 1600 * 1200)):
        path = tmp_path / f"p{int(progressive)}_p0.jpg"
        Image.new("RGB", (1600, 1200), (10, 20, 30)).save(path, "JPEG", progressive=progressive)
        meter = DecodeBudget().meter()
        assert check_image(path, meter=meter) == Verified(1600, 1200)
        assert meter.pixels == charged, progressive


def _png_chunks(data: bytes) -> list[tuple[bytes, bytes, bytes]]:
    """The chunks of a PNG: (type, data, stored CRC), in order."""
    chunks, at = [], 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        chunks.append((kind, body, data[at + 8 + length : at + 12 + length]))
        at += 12 + length
    return chunks


def _png_of(chunks: list[tuple[bytes, bytes, bytes]]) -> bytes:
    return b"\x89PNG\r\n\x1a\n" + b"".join(struct.pack(">I", len(body)) + k + body + crc for k, body, crc in chunks)


def _png_with_text(where: str, bad_crc_of: bytes) -> bytes:
    """A 640x480 PNG with a ``tEXt`` chunk before its pixels (``where="head"``) or after
    them (``"tail"``), the CRC of the chunk of type ``bad_crc_of`` wrong."""
    buf = io.BytesIO()
    Image.new("RGB", (640, 480), (10, 20, 30)).save(buf, "PNG")
    chunks = _png_chunks(buf.getvalue())
    text = b"Comment\x00made by a phone"
    chunk = (b"tEXt", text, struct.pack(">I", zlib.crc32(b"tEXt" + text)))
    chunks.insert(1 if where == "head" else len(chunks) - 1, chunk)
    return _png_of(
        [
            (kind, body, struct.pack(">I", zlib.crc32(kind + body) ^ 1) if kind == bad_crc_of else crc)
            for kind, body, crc in chunks
        ]
    )


@pytest.mark.parametrize("where", ["head", "tail"])
def test_a_png_whose_ancillary_chunk_has_a_wrong_crc_is_verified(tmp_path: Path, where: str) -> None:
    """An ancillary chunk (a text, a colour profile: its type's first letter lower case,
    PNG spec 5.4) with a wrong CRC is what libpng — and so every browser — drops with a
    warning, showing the picture: a deliverable image. Pillow refuses the whole file, so
    until 2026-12-05 such a page was refused, its work lost for good (``not_an_image``
    before the pixels, ``undecodable`` after them) for a shape readers accept."""
    path = tmp_path / "p0.png"
    path.write_bytes(_png_with_text(where, b"tEXt"))
    with pytest.raises((SyntaxError, OSError)), Image.open(path) as image:  # Pillow's own verdict on the file
        image.verify()
    meter = DecodeBudget().meter()
    assert check_image(path, meter=meter) == Verified(640, 480)
    assert (meter.frames, meter.pixels) == (1, 640 * 480)
    assert path.read_bytes() == _png_with_text(where, b"tEXt")  # the page itself is untouched


@pytest.mark.parametrize("critical", [b"IHDR", b"IDAT"])
def test_a_png_whose_critical_chunk_has_a_wrong_crc_is_still_not_verified(tmp_path: Path, critical: bytes) -> None:
    """A critical chunk (header, pixels) with a wrong CRC is an error for libpng too: the
    page is not verified, whatever ancillary chunk beside it is also wrong."""
    path = tmp_path / "p0.png"
    path.write_bytes(_png_with_text("head", critical))
    assert not isinstance(check_image(path), Verified)
    data = _png_chunks(_png_with_text("head", critical))
    both = [(k, b, struct.pack(">I", zlib.crc32(k + b) ^ 1) if k == b"tEXt" else c) for k, b, c in data]
    path.write_bytes(_png_of(both))
    assert not isinstance(check_image(path), Verified)
    cut = tmp_path / "cut_p0.png"
    cut.write_bytes(_png_with_text("tail", b"tEXt")[:-40])  # cut short: retried, as any page
    assert isinstance(check_image(cut), str)


def _chunk(kind: bytes, body: bytes, *, good: bool = True) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) ^ (0 if good else 1))


def _noisy_png_chunks() -> list[tuple[bytes, bytes, bytes]]:
    buf = io.BytesIO()
    Image.effect_noise((64, 48), 60).convert("RGB").save(buf, "PNG")
    return _png_chunks(buf.getvalue())


def _shape(name: str) -> bytes:
    """A 64x48 PNG of a shape libpng refuses, its one ancillary chunk's CRC wrong."""
    chunks = _noisy_png_chunks()
    ihdr, pixels = chunks[0][1], b"".join(body for kind, body, _ in chunks if kind == b"IDAT")
    text = _chunk(b"tEXt", b"Comment\x00x", good=False)
    sig = b"\x89PNG\r\n\x1a\n"
    if name == "between-idats":  # libpng: "Not enough image data"
        half = len(pixels) // 2
        return (
            sig
            + _chunk(b"IHDR", ihdr)
            + _chunk(b"IDAT", pixels[:half])
            + text
            + _chunk(b"IDAT", pixels[half:])
            + _chunk(b"IEND", b"")
        )
    if name == "type-not-letters":  # libpng: "invalid chunk type"
        return (
            sig
            + _chunk(b"IHDR", ihdr)
            + _chunk(b"1bcd", b"x", good=False)
            + _chunk(b"IDAT", pixels)
            + _chunk(b"IEND", b"")
        )
    if name == "before-ihdr":  # libpng: "missing IHDR"
        return sig + text + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", pixels) + _chunk(b"IEND", b"")
    raise AssertionError(name)


@pytest.mark.parametrize("shape", ["between-idats", "type-not-letters", "before-ihdr"])
def test_forgiving_an_ancillary_crc_never_verifies_a_shape_libpng_refuses(tmp_path: Path, shape: str) -> None:
    """Dropping the chunk whose CRC is wrong must not make a file libpng refuses readable:
    a text between two ``IDAT`` chunks (dropped, the pixels would join up), a chunk type
    that is not letters, a chunk before ``IHDR``. Found by a break-it pass on the first
    version, which verified all three."""
    path = tmp_path / "p0.png"
    path.write_bytes(_shape(shape))
    assert not isinstance(check_image(path), Verified)
    zipped = tmp_path / "f.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("000000.png", _shape(shape))
    meta = parse_metadata(
        {
            "ugoira_metadata": {
                "zip_urls": {"medium": "https://i.pximg.net/z/1_ugoira600x600.zip"},
                "frames": [{"file": "000000.png", "delay": 100}],
            }
        }
    )
    with pytest.raises(UnusableAnimation):
        encode_gif(zipped, meta, tmp_path / "1_ugoira.gif")


def _many_chunks(count: int, *, last_good: bool) -> bytes:
    """A PNG claiming 13 000 px square, a tiny ``IDAT``, then ``count`` empty ancillary chunks."""
    head = (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", struct.pack(">IIBBBBB", 13000, 13000, 8, 2, 0, 0, 0))
        + _chunk(b"IDAT", zlib.compress(b"\0" * 100))
    )
    return head + _chunk(b"zzZz", b"") * count + _chunk(b"zzZz", b"", good=last_good) + _chunk(b"IEND", b"")


def test_the_walk_of_a_pngs_chunks_is_bounded_and_stoppable(tmp_path: Path) -> None:
    """Millions of empty chunks (64 MiB, the download bound) are not walked one Python object
    each: the first version grew ~1.4 GiB and ran ~10 s of uncharged CPU that a cancel could
    not stop. Past :data:`PNG_MAX_CHUNKS` the file's verdict stands; the walk calls the
    meter's check as it goes."""
    page = tmp_path / "p0.png"
    page.write_bytes(_many_chunks(64 * 1024 * 1024 // 12, last_good=False))
    result = checked_in_a_process(page)
    assert result["checked"].startswith("Refused(") and "OVER_BUDGET" in result["checked"], result
    assert result["grew_kib"] < 160 * 1024, result  # the file read once, and one copy at most
    checks: list[int] = []
    assert png_without_bad_ancillary(_many_chunks(20_000, last_good=False), lambda: checks.append(1)) is not None
    assert len(checks) >= 20_000 // 4096
    assert png_without_bad_ancillary(_many_chunks(PNG_MAX_CHUNKS, last_good=False)) is None

"""Pixiv's ugoira metadata, and the generic frames → animated GIF conversion with its bounds (pure, on disk)."""

from __future__ import annotations

import io
import random
import struct
import tracemalloc
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from bench.chaos import bombs
from curaflow.sources import animation
from curaflow.sources.animation import UnusableAnimation, encode_gif
from curaflow.sources.decoding import DecodeBudget, OverBudget
from curaflow.sources.pixiv.ugoira import UnrecognisedMetadata, parse_metadata


def answer(frames: list[dict[str, Any]]) -> dict[str, Any]:
    return {"ugoira_metadata": {"zip_urls": {"medium": "https://i.pximg.net/z/1_ugoira600x600.zip"}, "frames": frames}}


def frames_zip(path: Path, count: int, size: tuple[int, int] = (32, 24)) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for i in range(count):
            buf = io.BytesIO()
            Image.new("RGB", size, (40 * i % 256, 90, 200)).save(buf, "JPEG")
            archive.writestr(f"{i:06d}.jpg", buf.getvalue())
    return path


def test_metadata_gives_the_zip_and_each_frames_delay() -> None:
    meta = parse_metadata(answer([{"file": "000000.jpg", "delay": 70}, {"file": "000001.jpg", "delay": 5}]))
    assert meta.zip_url == "https://i.pximg.net/z/1_ugoira600x600.zip"
    assert meta.delays_ms == [70, animation.MIN_DELAY_MS]  # a delay below what viewers honour is raised


@pytest.mark.parametrize(
    "body",
    [
        answer([]),
        answer([{"file": "../../etc/passwd", "delay": 10}]),
        answer([{"file": "000000.jpg", "delay": "ten"}]),
        answer([{"file": "000000.jpg", "delay": None}]),
        answer([{"file": "000000.jpg", "delay": float("nan")}]),
        {"ugoira_metadata": {"zip_urls": {}, "frames": [{"file": "000000.jpg", "delay": 10}]}},
    ],
    ids=["no-frames", "path-in-name", "delay-not-a-number", "no-delay", "delay-nan", "no-zip"],
)
def test_metadata_that_is_not_a_usable_animation_is_refused(body: dict[str, Any]) -> None:
    with pytest.raises(UnusableAnimation):
        parse_metadata(body)


def test_a_delay_or_a_zip_written_another_way_is_read_not_the_work_refused() -> None:
    # A delay of 100.0 or "100", or a zip under a size key never seen, made the work an
    # unusable animation, remembered for the account: every ugoira once the format drifts.
    meta = parse_metadata(answer([{"file": "000000.jpg", "delay": 100.0}, {"file": "000001.jpg", "delay": "120"}]))
    assert meta.delays_ms == [100, 120]
    other = {"ugoira_metadata": {"zip_urls": {"1920x1080": "https://i.pximg.net/z/1_ugoira1920x1080.zip"}}}
    other["ugoira_metadata"]["frames"] = [{"file": "000000.jpg", "delay": 80}]  # type: ignore[index]
    assert parse_metadata(other).zip_url == "https://i.pximg.net/z/1_ugoira1920x1080.zip"


def test_frames_become_one_looping_gif_with_the_delays(tmp_path: Path) -> None:
    meta = parse_metadata(answer([{"file": f"{i:06d}.jpg", "delay": 100 + 10 * i} for i in range(4)]))
    dest = tmp_path / "1_ugoira.gif"
    assert encode_gif(frames_zip(tmp_path / "f.zip", 4), meta, dest) == (32, 24)
    with Image.open(dest) as gif:
        assert (gif.format, gif.n_frames, gif.info.get("loop")) == ("GIF", 4, 0)
        delays = []
        for i in range(gif.n_frames):
            gif.seek(i)
            delays.append(gif.info["duration"])
    assert delays == [100, 110, 120, 130]
    assert not list(tmp_path.glob(".*.part"))


def test_a_frame_that_is_a_jpeg_carrying_more_pictures_is_a_frame(tmp_path: Path) -> None:
    """A frame written as an MPO (a JPEG with more pictures after its first) is a JPEG
    frame: its first picture. It made the work an unusable animation until 2026-12-05."""
    zipped = tmp_path / "f.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        for i in range(2):
            buf = io.BytesIO()
            first = Image.new("RGB", (32, 24), (40 * i, 90, 200))
            first.save(buf, "MPO", save_all=True, append_images=[Image.new("RGB", (8, 6))])
            archive.writestr(f"{i:06d}.jpg", buf.getvalue())
    meta = parse_metadata(answer([{"file": f"{i:06d}.jpg", "delay": 100} for i in range(2)]))
    dest = tmp_path / "1_ugoira.gif"
    assert encode_gif(zipped, meta, dest) == (32, 24)
    with Image.open(dest) as gif:
        assert (gif.format, gif.n_frames) == ("GIF", 2)


def _png_frame(shade: int, *, bad_crc_of: bytes) -> bytes:
    """A 32x24 PNG frame with a text chunk before its pixels, the CRC of the chunk of type
    ``bad_crc_of`` wrong."""
    info = PngInfo()
    info.add_text("Comment", "frame")
    buf = io.BytesIO()
    Image.new("RGB", (32, 24), (shade, 90, 200)).save(buf, "PNG", pnginfo=info)
    data = bytearray(buf.getvalue())
    at = data.index(bad_crc_of) - 4
    end = at + 12 + int.from_bytes(data[at : at + 4], "big")
    data[end - 1] ^= 1
    return bytes(data)


def test_a_png_frame_whose_ancillary_chunk_has_a_wrong_crc_is_a_frame(tmp_path: Path) -> None:
    """A PNG frame with a wrong CRC on an ancillary chunk (a text) is what libpng shows
    (the chunk dropped): a frame. Pillow refuses to open it, so until 2026-12-05 it made
    the work an unusable animation, lost for good."""
    meta = parse_metadata(answer([{"file": f"{i:06d}.png", "delay": 100} for i in range(2)]))
    zipped = tmp_path / "f.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        for i in range(2):
            archive.writestr(f"{i:06d}.png", _png_frame(40 * i, bad_crc_of=b"tEXt"))
    dest = tmp_path / "1_ugoira.gif"
    assert encode_gif(zipped, meta, dest) == (32, 24)
    with Image.open(dest) as gif:
        assert (gif.format, gif.n_frames) == ("GIF", 2)
        assert gif.convert("RGB").getpixel((0, 0)) == (0, 90, 200)


def test_bounds_missing_frames_and_broken_zips_are_refused_and_leave_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dest = tmp_path / "1_ugoira.gif"
    three = frames_zip(tmp_path / "f.zip", 3)
    missing = parse_metadata(answer([{"file": f"{i:06d}.jpg", "delay": 50} for i in range(4)]))
    with pytest.raises(UnusableAnimation, match="not in the zip"):
        encode_gif(three, missing, dest)
    meta = parse_metadata(answer([{"file": f"{i:06d}.jpg", "delay": 50} for i in range(3)]))
    with pytest.raises(OverBudget, match="pixels"):
        encode_gif(three, meta, dest, meter=DecodeBudget(max_pixels=32 * 24 * 3 - 1).meter())
    monkeypatch.setattr(animation, "MAX_FRAME_BYTES", 10)
    with pytest.raises(OverBudget, match="bytes"):
        encode_gif(three, meta, dest)
    (tmp_path / "bad.zip").write_bytes(b"not a zip")
    with pytest.raises(UnusableAnimation, match="not a zip"):
        encode_gif(tmp_path / "bad.zip", meta, dest)
    assert not dest.exists() and not list(tmp_path.glob(".*.part"))


@pytest.mark.parametrize("kind", bombs.UNUSABLE_ANIMATIONS)
@pytest.mark.parametrize("seed", range(6))
def test_metadata_of_the_app_api_s_shape_describing_no_animation_is_the_work_s(kind: str, seed: int) -> None:
    body = bombs.unusable_metadata(random.Random(seed), kind, "https://i.pximg.net/img-zip-ugoira/1_ugoira600x600.zip")
    with pytest.raises(UnusableAnimation) as caught:
        parse_metadata(body)
    assert not isinstance(caught.value, UnrecognisedMetadata)


@pytest.mark.parametrize(
    "body",
    [{}, {"ugoira_metadata": None}, {"ugoira_metadata": "x"}, [], "ugoira", {"illust": {"id": 1}}],
    ids=["empty", "null", "string", "list", "text", "another-answer"],
)
def test_an_answer_that_is_not_the_app_api_s_metadata_is_the_source_s(body: Any) -> None:
    # not the work's fault: the source answered something curaflow does not recognise
    with pytest.raises(UnrecognisedMetadata):
        parse_metadata(body)


def _zip_headers(data: bytearray, mutate: Any) -> bytes:
    """``data`` (a zip) with ``mutate(data, offset, central)`` applied to every local
    (``central`` False) and central directory (True) header."""
    for signature, central in ((b"PK\x03\x04", False), (b"PK\x01\x02", True)):
        at = data.find(signature)
        while at >= 0:
            mutate(data, at, central)
            at = data.find(signature, at + 4)
    return bytes(data)


def _encrypted(data: bytearray, at: int, central: bool) -> None:
    data[at + (8 if central else 6)] |= 1  # general purpose flag bit 0: encrypted


def _method(code: int) -> Any:
    def mutate(data: bytearray, at: int, central: bool) -> None:
        data[at + (10 if central else 8) : at + (12 if central else 10)] = code.to_bytes(2, "little")

    return mutate


@pytest.mark.parametrize(
    "mutate",
    [_encrypted, _method(9), _method(99)],
    ids=["encrypted", "deflate64", "aes-or-unknown-method"],
)
def test_a_frame_the_zip_reader_cannot_open_is_unusable_and_not_recognised(tmp_path: Path, mutate: Any) -> None:
    # A frame stored encrypted, or by a compression method Python's zip reader does not
    # implement (Deflate64, which Windows' own zip writes; AES's method 99): zipfile
    # raises RuntimeError / NotImplementedError, which escaped encode_gif — the fetch
    # failed as curaflow's own error attempt after attempt and the work, released, was
    # bound first again by every job of the target. What the host's zip is made of says
    # nothing of the work (a change of the host's packer would do it to every animated
    # work): unusable, not recognised, held back briefly — and no file left behind.
    dest = tmp_path / "1_ugoira.gif"
    path = frames_zip(tmp_path / "f.zip", 2)
    path.write_bytes(_zip_headers(bytearray(path.read_bytes()), mutate))
    meta = parse_metadata(answer([{"file": f"{i:06d}.jpg", "delay": 50} for i in range(2)]))
    with pytest.raises(UnusableAnimation) as caught:
        encode_gif(path, meta, dest)
    assert caught.value.recognised is False
    assert not dest.exists() and not list(tmp_path.glob(".*.part"))


@pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA], ids=str)
def test_a_frame_whose_compressed_stream_breaks_is_retried_not_the_works(tmp_path: Path, method: int) -> None:
    # A member's checksum is checked at its end: bytes broken in a compressed stream show
    # first as the decompressor's own error — zlib.error for Deflate (which escaped
    # encode_gif: the fetch failed as curaflow's error in every attempt), an OSError
    # without errno for bzip2 (read as the frame's "no readable header": the work refused
    # for the week). A body whose bytes do not survive is maybe the transfer: retried.
    dest = tmp_path / "1_ugoira.gif"
    path = tmp_path / "f.zip"
    with zipfile.ZipFile(path, "w", compression=method) as archive:
        for i in range(2):
            buf = io.BytesIO()
            Image.new("RGB", (64, 64), (40 * i, 90, 200)).save(buf, "PNG")
            archive.writestr(f"{i:06d}.png", buf.getvalue() * 3)
        infos = archive.infolist()
    data = bytearray(path.read_bytes())
    second = infos[1]
    start = second.header_offset + 30 + len(second.filename.encode())
    for at in range(start + second.compress_size // 3, start + second.compress_size // 3 + 8):
        data[at] ^= 0xFF  # eight bytes inside the stream of the second frame
    path.write_bytes(bytes(data))
    meta = parse_metadata(answer([{"file": f"{i:06d}.png", "delay": 50} for i in range(2)]))
    with pytest.raises(animation.AnimationBroken):
        encode_gif(path, meta, dest)
    assert not dest.exists() and not list(tmp_path.glob(".*.part"))


def _directory_bomb(path: Path, entries: int) -> Path:
    """A zip of one stored JPEG frame ``000000.jpg`` whose central directory lists it
    ``entries`` times (47 bytes an entry: a million fit in 45 MiB, under the zip's byte
    cap); the end record's entry count says at most 65 535, which zipfile does not read."""
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (0, 90, 200)).save(buf, "JPEG")
    frame, name = buf.getvalue(), b"000000.jpg"
    crc = zlib.crc32(frame)
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0, crc, len(frame), len(frame), len(name), 0)
    central = struct.pack(
        "<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 0, 0, 0, crc, len(frame), len(frame), len(name), 0, 0, 0, 0, 0, 0
    )
    directory = (central + name) * entries
    count = min(entries, 0xFFFF)
    end = struct.pack(
        "<4s4H2LH", b"PK\x05\x06", 0, 0, count, count, len(directory), len(local) + len(name) + len(frame), 0
    )
    path.write_bytes(local + name + frame + directory + end)
    return path


def test_a_zip_listing_far_more_entries_than_frames_is_refused_before_its_directory_is_read(tmp_path: Path) -> None:
    # zipfile builds one ZipInfo per entry its central directory lists as it opens the zip
    # (~370 bytes each, whatever the end record's count says): a frames zip listing a
    # million tiny entries, 45 MiB under the 64 MiB cap, held ~360 MiB and 3.8 s of CPU in
    # the worker before any frame was looked at. The zip is refused from its bytes first;
    # what the image host served disagrees with the metadata's frames (a broken host or
    # mirror could serve it for every work): unusable, not recognised as the work's.
    dest = tmp_path / "1_ugoira.gif"
    meta = parse_metadata(answer([{"file": "000000.jpg", "delay": 50}]))
    ok = _directory_bomb(tmp_path / "ok.zip", animation.max_zip_entries(1))
    assert encode_gif(ok, meta, dest) == (8, 8)  # a directory within the bound is read
    bomb = _directory_bomb(tmp_path / "bomb.zip", 100_000)
    tracemalloc.start()
    try:
        with pytest.raises(animation.UnreadableDirectory, match="entries") as caught:
            encode_gif(bomb, meta, tmp_path / "2_ugoira.gif")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert caught.value.recognised is False
    assert peak < 2 * 1024 * 1024  # 100 000 ZipInfo objects alone are ~37 MiB
    assert not (tmp_path / "2_ugoira.gif").exists() and not list(tmp_path.glob(".*.part"))


def _version_70(data: bytearray, at: int, central: bool) -> None:
    if central:
        data[at + 6] = 70  # version needed to extract: 7.0, which zipfile refuses as it opens


def _bad_utf8_name(data: bytearray, at: int, central: bool) -> None:
    if central:
        data[at + 9] |= 0x08  # general purpose flag bit 11: the name is UTF-8
        data[at + 46] = 0xFF  # and its first byte is none


@pytest.mark.parametrize("mutate", [_version_70, _bad_utf8_name], ids=["zip-version", "name-not-utf8"])
def test_a_directory_the_zip_reader_refuses_as_it_opens_is_unusable_and_not_recognised(
    tmp_path: Path, mutate: Any
) -> None:
    # zipfile raises NotImplementedError (a version it does not implement) and
    # UnicodeDecodeError (a name flagged UTF-8 that is not) while it reads the directory,
    # as ZipFile() opens it: neither was caught there, so the fetch failed as curaflow's
    # own error in every attempt. The host's packing, not the work's bytes, as a frame the
    # reader cannot open: unusable, not recognised.
    dest = tmp_path / "1_ugoira.gif"
    path = frames_zip(tmp_path / "f.zip", 2)
    path.write_bytes(_zip_headers(bytearray(path.read_bytes()), mutate))
    meta = parse_metadata(answer([{"file": f"{i:06d}.jpg", "delay": 50} for i in range(2)]))
    with pytest.raises(animation.UnreadableDirectory) as caught:
        encode_gif(path, meta, dest)
    assert caught.value.recognised is False
    assert not dest.exists() and not list(tmp_path.glob(".*.part"))


def _image_bytes(fmt: str) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 40, 40)).save(buf, fmt)
    return buf.getvalue()


def one_frame_refusal(tmp_path: Path, frame: bytes) -> UnusableAnimation:
    """What encoding a frames zip of the one frame ``frame`` refuses with."""
    path = tmp_path / "f.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("000000.jpg", frame)
    meta = parse_metadata(answer([{"file": "000000.jpg", "delay": 50}]))
    with pytest.raises(UnusableAnimation) as caught:
        encode_gif(path, meta, tmp_path / "1_ugoira.gif")
    return caught.value


@pytest.mark.parametrize(
    "frame",
    [
        b"<!DOCTYPE html><html><body>Service Unavailable</body></html>",
        b'{"error": {"message": "not found"}}',
        b"",
        b"\x00\x00\x00\x1cftypavif\x00\x00\x00\x00avifmif1miaf" + b"\x00" * 64,  # a format never seen
        _image_bytes("BMP"),
        _image_bytes("TIFF"),
    ],
    ids=["html", "json", "empty", "avif-like", "bmp", "tiff"],
)
def test_a_frame_signing_no_format_curaflow_takes_is_not_recognised_as_the_works(tmp_path: Path, frame: bytes) -> None:
    # A frame whose bytes sign none of the frame formats (a page where the frame was, a
    # format never seen: what a change of the host's packing would give every animated
    # work) is what the source answered, as a page that is no image is (not_an_image):
    # unusable, held back briefly. Until 2026-12-06 it was the work's, the week.
    assert one_frame_refusal(tmp_path, frame).recognised is False


@pytest.mark.parametrize(
    "frame",
    [b"\xff\xd8\xff\xe0 not a frame at all", b"\x89PNG\r\n\x1a\n" + b"\x00" * 40, b"GIF89a" + b"\x00" * 40],
    ids=["jpeg", "png", "gif"],
)
def test_a_frame_signing_a_format_it_does_not_hold_is_the_works(tmp_path: Path, frame: bytes) -> None:
    # Its CRC matched (the zip holds these bytes) and they sign a frame format without
    # being one: the host holds a broken frame — the work's, as before.
    assert one_frame_refusal(tmp_path, frame).recognised is True


@pytest.mark.parametrize("delay", [-1, -100.0, -(10**30)], ids=["int", "float", "huge"])
def test_a_negative_delay_is_no_delay_not_the_shortest(delay: float) -> None:
    """A frame's delay below zero is no duration the app-api sends: as a word (``"-100"``)
    it was refused already, as a number it was raised to the shortest delay and the work
    delivered with timings curaflow made up (then never sent again). Now it is metadata
    that describes no animation — an unusable animation, not recognised as the work's
    (the client holds the work back briefly)."""
    with pytest.raises(UnusableAnimation, match="delay"):
        parse_metadata(answer([{"file": "000000.jpg", "delay": 50}, {"file": "000001.jpg", "delay": delay}]))


@pytest.mark.parametrize("delay", [655_351, 10**9, 1e300, "99999999999"], ids=["int", "billion", "float", "text"])
def test_a_delay_longer_than_a_gif_holds_is_no_delay_not_the_longest(delay: object) -> None:
    """A frame's delay longer than a GIF frame can last (655 350 ms: 65 535 centiseconds)
    is no duration the app-api sends either: it was lowered to the longest delay and the
    work delivered with timings curaflow made up (then never sent again), as a delay
    below zero was raised to the shortest until 2026-12-06. Now it is metadata that
    describes no animation curaflow can deliver as stated — an unusable animation, not
    recognised as the work's (the client holds the work back briefly)."""
    with pytest.raises(UnusableAnimation, match="delay"):
        parse_metadata(answer([{"file": "000000.jpg", "delay": 50}, {"file": "000001.jpg", "delay": delay}]))


def test_the_longest_delay_a_gif_holds_is_still_read() -> None:
    meta = parse_metadata(answer([{"file": "000000.jpg", "delay": 655_350}, {"file": "000001.jpg", "delay": 5}]))
    assert meta.delays_ms == [655_350, 20]


def test_a_zip_holding_a_frame_twice_is_not_read_as_either(tmp_path: Path) -> None:
    """Two entries of one frame's name (an archive appended to, a packer's bug): which one
    is the frame is not said — zipfile reads the last, another reader the first. The frame
    was taken from the last and the work delivered so, never sent again; now it is a
    directory curaflow does not read (not recognised as the work's: held back briefly)."""
    path = tmp_path / "twice.zip"
    with zipfile.ZipFile(path, "w") as archive, pytest.warns(UserWarning, match="Duplicate name"):
        for i, shade in ((0, 10), (1, 90), (1, 200)):
            buf = io.BytesIO()
            Image.new("RGB", (32, 24), (shade, shade, shade)).save(buf, "JPEG")
            archive.writestr(f"{i:06d}.jpg", buf.getvalue())
    meta = parse_metadata(answer([{"file": f"{i:06d}.jpg", "delay": 50} for i in range(2)]))
    dest = tmp_path / "1_ugoira.gif"
    with pytest.raises(animation.UnreadableDirectory, match=r"000001\.jpg twice") as caught:
        encode_gif(path, meta, dest)
    assert not caught.value.recognised
    assert not dest.exists()

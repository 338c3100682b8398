"""Every decode has a budget (curaflow.sources.decoding): pixels summed over every frame,
a frame count and CPU time, checked from the headers before any pixel is decoded and
again between frames, and stopped by its attempt.

The bombs are made here with Pillow (:mod:`bench.chaos.bombs`): a GIF of 20 000 1×1
frames on a 4000×4000 canvas (~500 KB, ~16 min of CPU on main), a few 1×1 frames on a
canvas near a page's bound, an ugoira zip whose first frame is 1×1 and whose later ones
are 13000×13000.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import threading
import time
import tracemalloc
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageFile

from bench.chaos import bombs
from curaflow.artifacts import ArtifactStore, Refused, verify_image
from curaflow.domain.models import Work, WorkPage
from curaflow.sources.animation import Animation, AnimationBroken, UnusableAnimation, encode_gif
from curaflow.sources.decoding import DecodeBudget, DecodeStopped, OverBudget
from curaflow.sources.errors import SourceError, UnavailableKind, WorkUnavailable
from curaflow.sources.pixiv.ugoira import parse_metadata


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The size of every frame whose pixels were decoded (``ImageFile.load``), in order."""
    calls: list[tuple[int, int]] = []
    real = ImageFile.ImageFile.load

    def load(self: ImageFile.ImageFile) -> Any:
        frame = (id(self), getattr(self, "tell", lambda: 0)())
        if getattr(self, "_counted", None) != frame:  # a frame loaded again (convert) is one frame
            self._counted = frame  # type: ignore[attr-defined]
            calls.append(self.size)
        return real(self)

    monkeypatch.setattr(ImageFile.ImageFile, "load", load)
    return calls


def over_budget(problem: object) -> bool:
    return isinstance(problem, Refused) and problem.kind == UnavailableKind.OVER_BUDGET


# ---- still pages and animated pages ------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "bomb",
    [
        pytest.param(lambda: bombs.many_frame_gif(20_000, (4000, 4000)), id="20000-frames-of-1x1-on-4000x4000"),
        pytest.param(lambda: bombs.huge_canvas_gif((6000, 6000), 4), id="4-frames-on-6000x6000"),
        pytest.param(lambda: bombs.huge_canvas_gif((20_000, 20_000), 1), id="one-frame-on-20000x20000"),
    ],
)
def test_an_animated_gif_bomb_is_refused_from_its_headers_before_any_pixel_is_decoded(
    tmp_path: Path, decoded: list[tuple[int, int]], bomb: Any
) -> None:
    path = tmp_path / "bomb_p0.gif"
    path.write_bytes(bomb())
    problem = verify_image(path)
    assert over_budget(problem), problem
    assert decoded == []  # not one frame was decoded


@pytest.mark.parametrize("fmt", ["PNG", "WEBP", "GIF"])
def test_every_animated_format_counts_its_frames_before_decoding(
    tmp_path: Path, decoded: list[tuple[int, int]], fmt: str
) -> None:
    frames = [Image.new("RGB", (16, 16), (i * 20, 0, 0)) for i in range(12)]
    path = tmp_path / f"anim_p0.{fmt.lower()}"
    frames[0].save(path, format=fmt, save_all=True, append_images=frames[1:], duration=50)
    assert verify_image(path, budget=DecodeBudget(max_frames=20)) is None

    decoded.clear()
    problem = verify_image(path, budget=DecodeBudget(max_frames=10))
    assert over_budget(problem) and "frames" in problem.why, problem  # type: ignore[union-attr]
    assert decoded == []


def test_a_decode_is_charged_between_frames_and_stops_at_its_cpu_budget(
    tmp_path: Path, decoded: list[tuple[int, int]]
) -> None:
    path = tmp_path / "anim_p0.gif"
    path.write_bytes(bombs.gif((400, 400), 50))
    # a CPU clock that says each decoded frame cost 10 s: the headers cost nothing
    meter = DecodeBudget(max_cpu_s=15.0).meter(clock=lambda: 10.0 * len(decoded))
    problem = verify_image(path, meter=meter)
    assert over_budget(problem) and "CPU" in problem.why, problem  # type: ignore[union-attr]
    assert len(decoded) == 2  # the second frame's CPU time was counted before the third


def test_a_decode_over_its_cpu_time_is_not_recognised_as_the_works(tmp_path: Path) -> None:
    """The CPU time a decode takes measures the machine as much as the bytes (a slower CPU,
    another build of libjpeg or zlib): over ``decode_max_cpu_ms`` the work is held back
    briefly, never remembered for the week (until 2026-12-07 it was, the costliest works the
    pixel budget admits lost for the week on a machine a few times slower). What the bytes
    say — pixels, frames — stays the work's."""
    path = tmp_path / "anim_p0.gif"
    path.write_bytes(bombs.gif((400, 400), 50))
    clock = iter(range(0, 10**6, 10))  # each read of the CPU clock 10 s later
    problem = verify_image(path, meter=DecodeBudget(max_cpu_s=15.0).meter(clock=lambda: float(next(clock))))
    assert over_budget(problem) and "CPU" in problem.why, problem  # type: ignore[union-attr]
    assert not problem.recognised  # type: ignore[union-attr]

    problem = verify_image(path, budget=DecodeBudget(max_frames=10))
    assert over_budget(problem) and "frames" in problem.why and problem.recognised  # type: ignore[union-attr]


@pytest.mark.timeout(240)
async def test_a_page_or_an_animation_over_the_cpu_time_is_held_back_not_the_works(
    tmp_path: Path, scan_bomb: bytes
) -> None:
    store = ArtifactStore(tmp_path, budget=DecodeBudget(max_cpu_s=0.5))
    with pytest.raises(WorkUnavailable) as caught:
        await store.fetch(OneFile(scan_bomb), WORK, "job", "t")  # type: ignore[arg-type]
    assert (caught.value.kind, caught.value.recognised) == (UnavailableKind.OVER_BUDGET, False), caught.value

    zip_path = tmp_path / "z.zip"
    with zipfile.ZipFile(zip_path, "w") as archive:
        archive.writestr("000000.jpg", scan_bomb)
    meta = ugoira([{"file": "000000.jpg", "delay": 50}])
    with pytest.raises(WorkUnavailable) as caught:
        await store.fetch(OneFile(zip_path.read_bytes(), meta), WORK, "job", "u")  # type: ignore[arg-type]
    assert (caught.value.kind, caught.value.recognised) == (UnavailableKind.OVER_BUDGET, False), caught.value

    body, frames = bombs.ugoira_zip(2, (9000, 9000))  # over the pixels: the work's bytes
    with pytest.raises(WorkUnavailable) as caught:
        await store.fetch(OneFile(body, ugoira(frames)), WORK, "job", "v")  # type: ignore[arg-type]
    assert (caught.value.kind, caught.value.recognised) == (UnavailableKind.OVER_BUDGET, True)


def test_a_stopped_decode_ends_at_the_next_frame_and_blames_nobody(
    tmp_path: Path, decoded: list[tuple[int, int]]
) -> None:
    path = tmp_path / "anim_p0.gif"
    path.write_bytes(bombs.gif((400, 400), 50))
    meter = DecodeBudget().meter()
    meter.stop()
    with pytest.raises(DecodeStopped):
        verify_image(path, meter=meter)
    assert decoded == []

    past = DecodeBudget().meter(deadline=0.0)  # the attempt's deadline (monotonic) has passed
    with pytest.raises(DecodeStopped, match="deadline"):
        verify_image(path, meter=past)


#: How long a decode the meter must stop may go on past the stop (wall seconds, on a
#: loaded machine): the scan bomb below decodes whole in ~100 s of CPU.
STOPPED_WITHIN_S = 20.0


@pytest.fixture(scope="module")
def scan_bomb() -> bytes:
    """A progressive JPEG of 4000x4000 repeating its refinement scan 8 000 times (~250 KB):
    every scan visits every block of the picture, inside the one frame's decode."""
    return bombs.many_scan_jpeg((4000, 4000), 8_000)


def _stopping(how: str) -> tuple[Any, type[Exception], str]:
    """A meter that stops a decode about a second in (``how``: its CPU budget, the
    attempt's deadline, the attempt's cancel), and what the stop raises."""
    if how == "cpu":
        return DecodeBudget(max_cpu_s=1.0).meter(), OverBudget, "CPU"
    if how == "deadline":
        return DecodeBudget().meter(deadline=time.monotonic() + 1.0), DecodeStopped, "deadline"
    meter = DecodeBudget().meter()
    threading.Timer(1.0, meter.stop).start()
    return meter, DecodeStopped, "cancelled"


@pytest.mark.timeout(240)
@pytest.mark.parametrize("how", ["cpu", "deadline", "cancelled"])
def test_a_frame_whose_scans_repeat_is_stopped_inside_its_decode(tmp_path: Path, scan_bomb: bytes, how: str) -> None:
    """A single frame's cost is not bounded by its pixels: a progressive JPEG's scans each
    visit every block for a few bytes. Until 2026-12-07 the meter was checked only between
    frames, so the CPU budget, the job's deadline and the attempt's cancel waited for the
    whole frame (~100 s of CPU here; hours for a 64 MiB page), the account's source slot
    held meanwhile, and the decoding thread went on after its attempt was cancelled."""
    path = tmp_path / "scans_p0.jpg"
    path.write_bytes(scan_bomb)
    meter, raised, words = _stopping(how)
    started = time.monotonic()
    if raised is OverBudget:
        problem = verify_image(path, meter=meter)
        assert over_budget(problem) and words in problem.why, problem  # type: ignore[union-attr]
    else:
        with pytest.raises(raised, match=words):
            verify_image(path, meter=meter)
    assert time.monotonic() - started < STOPPED_WITHIN_S


@pytest.mark.timeout(240)
@pytest.mark.parametrize("how", ["cpu", "deadline", "cancelled"])
def test_an_ugoira_frame_whose_scans_repeat_is_stopped_inside_its_decode(
    tmp_path: Path, scan_bomb: bytes, how: str
) -> None:
    zip_path = tmp_path / "z.zip"
    with zipfile.ZipFile(zip_path, "w") as archive:
        archive.writestr("000000.jpg", scan_bomb)
    meter, raised, words = _stopping(how)
    started = time.monotonic()
    with pytest.raises(raised, match=words):
        encode_gif(zip_path, ugoira([{"file": "000000.jpg", "delay": 50}]), tmp_path / "o.gif", meter=meter)
    assert time.monotonic() - started < STOPPED_WITHIN_S


@pytest.fixture(scope="module")
def arithmetic_scan_bomb() -> bytes:
    """A sequential arithmetic-coded JPEG of 4000x4000 repeating a component's scan 6 000
    times (~60 KB, ~80 s of CPU here): each scan is a 10-byte header whose data libjpeg
    reads as zeros, a whole pass over every block of the component — and the file is not
    progressive."""
    return bombs.many_scan_arithmetic_jpeg((4000, 4000), 6_000)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("how", ["cpu", "deadline", "cancelled"])
def test_a_sequential_arithmetic_frame_whose_scans_repeat_is_stopped_inside_its_decode(
    tmp_path: Path, arithmetic_scan_bomb: bytes, how: str
) -> None:
    """A frame's cost is not bounded by its bytes in any JPEG whose scans are not Huffman
    sequential: an arithmetic-coded scan of every block of the picture takes a few bytes —
    none at all, libjpeg reading zeros up to the next marker — so a sequential (``SOF9``)
    file repeating a component's scan is the same bomb as a progressive one. Until
    2026-12-07 only a progressive JPEG was fed to libjpeg a small block at a time: this
    one went in Pillow's 64 KiB blocks, the whole page in one, and the CPU budget, the
    job's deadline and the attempt's cancel waited for the whole frame (~80 s here; a
    64 MiB page of such scans is a day of CPU with a check every ~90 s)."""
    path = tmp_path / "arith_p0.jpg"
    path.write_bytes(arithmetic_scan_bomb)
    meter, raised, words = _stopping(how)
    started = time.monotonic()
    if raised is OverBudget:
        problem = verify_image(path, meter=meter)
        assert over_budget(problem) and words in problem.why, problem  # type: ignore[union-attr]
    else:
        with pytest.raises(raised, match=words):
            verify_image(path, meter=meter)
    assert time.monotonic() - started < STOPPED_WITHIN_S


@pytest.mark.timeout(240)
def test_an_ugoira_frame_of_repeated_arithmetic_scans_is_stopped_inside_its_decode(
    tmp_path: Path, arithmetic_scan_bomb: bytes
) -> None:
    zip_path = tmp_path / "z.zip"
    with zipfile.ZipFile(zip_path, "w") as archive:
        archive.writestr("000000.jpg", arithmetic_scan_bomb)
    meter, raised, words = _stopping("cancelled")
    started = time.monotonic()
    with pytest.raises(raised, match=words):
        encode_gif(zip_path, ugoira([{"file": "000000.jpg", "delay": 50}]), tmp_path / "o.gif", meter=meter)
    assert time.monotonic() - started < STOPPED_WITHIN_S


def test_jpegs_of_every_coding_still_decode_whole(tmp_path: Path) -> None:
    """Every JPEG fed in small blocks still decodes: an arithmetic-coded one of few scans,
    a baseline and a progressive one."""
    pages = {
        "arith_p0.jpg": bombs.many_scan_arithmetic_jpeg((640, 480), 1),
        "base_p0.jpg": _jpeg(progressive=False),
        "prog_p0.jpg": _jpeg(progressive=True),
    }
    for name, data in pages.items():
        path = tmp_path / name
        path.write_bytes(data)
        meter = DecodeBudget().meter()
        assert verify_image(path, meter=meter) is None, name
        assert meter.frames == 1, name


def _jpeg(*, progressive: bool) -> bytes:
    buf = io.BytesIO()
    Image.effect_noise((640, 480), 60).convert("RGB").save(buf, "JPEG", progressive=progressive, quality=90)
    return buf.getvalue()


def test_a_progressive_page_still_decodes_whole(tmp_path: Path) -> None:
    path = tmp_path / "p_p0.jpg"
    Image.effect_noise((900, 700), 60).convert("RGB").save(path, "JPEG", progressive=True, quality=90)
    meter = DecodeBudget().meter()
    assert verify_image(path, meter=meter) is None
    assert (meter.frames, meter.pixels) == (1, 900 * 700)  # a progressive JPEG at its full size


def test_an_ordinary_page_is_whole_and_costs_its_own_pixels(tmp_path: Path) -> None:
    png, jpeg = tmp_path / "a_p0.png", tmp_path / "b_p0.jpg"
    Image.new("RGB", (800, 600), (10, 20, 30)).save(png)
    Image.new("RGB", (1600, 1200), (10, 20, 30)).save(jpeg)
    meter = DecodeBudget().meter()
    assert verify_image(png, meter=meter) is None
    assert (meter.frames, meter.pixels) == (1, 800 * 600)
    meter = DecodeBudget().meter()
    assert verify_image(jpeg, meter=meter) is None
    assert (meter.frames, meter.pixels) == (1, 200 * 150)  # a JPEG is checked at 1/8 scale


def test_a_page_whole_by_its_framing_that_does_not_decode_is_the_works_and_a_cut_one_is_retried(
    tmp_path: Path,
) -> None:
    good = tmp_path / "ok_p0.png"
    Image.new("RGB", (300, 200), (10, 20, 30)).save(good)
    data = good.read_bytes()
    # the same length, every chunk's CRC right, but the pixel data is not zlib: the
    # image host holds these bytes (a transfer cannot produce valid CRCs around garbage)
    import struct
    import zlib

    def chunk(kind: bytes, payload: bytes) -> bytes:
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))

    ihdr = data[8 : 8 + 25]
    broken = tmp_path / "broken_p0.png"
    broken.write_bytes(data[:8] + ihdr + chunk(b"IDAT", b"\x78\x9c" + b"\xff" * 500) + chunk(b"IEND", b""))
    problem = verify_image(broken)
    assert isinstance(problem, Refused) and problem.kind == UnavailableKind.UNDECODABLE, problem

    cut = tmp_path / "cut_p0.png"
    cut.write_bytes(data[: len(data) // 2])
    assert isinstance(verify_image(cut), str)  # maybe the transfer: another download may succeed
    gif_cut = tmp_path / "cut_p0.gif"
    gif_cut.write_bytes(bombs.gif((40, 40), 3, frame=(40, 40))[:-20])
    assert isinstance(verify_image(gif_cut), str)


# ---- ugoira: every frame's header before any frame's pixels --------------------------------


@pytest.mark.parametrize(
    "bomb",
    [
        pytest.param(lambda: bombs.many_marker_jpeg(200_000), id="jpeg-200000-app-markers"),
        pytest.param(lambda: bombs.many_marker_jpeg(200_000, b"\xff\xc4"), id="jpeg-200000-empty-dht"),
        pytest.param(lambda: bombs.many_chunk_png(200_000), id="png-200000-unknown-chunks"),
    ],
)
def test_a_page_whose_headers_pillow_walks_one_by_one_is_refused_before_it_opens(
    tmp_path: Path, decoded: list[tuple[int, int]], bomb: Any
) -> None:
    # Pillow reads a JPEG's segments up to its first scan, and a PNG's chunks, one by one
    # in Python as it opens the file (before any frame is charged), keeping every APPn /
    # COM segment: 4 MB of empty APP1 markers held ~130 MB and 1 s of CPU, a 64 MiB page
    # ~2 GiB and 16 s; 1 M unknown PNG chunks (11 MB) ~100 MB and 1.9 s. Counted from the
    # bytes first, over the bound: over the budget, nothing opened.
    path = tmp_path / "bomb_p0.img"
    path.write_bytes(bomb())
    tracemalloc.start()
    try:
        problem = verify_image(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert over_budget(problem), problem
    assert decoded == []
    assert peak < 2 * 1024 * 1024  # Pillow's walk of the JPEG's 200 000 APP1 kept ~26 MB


@pytest.mark.parametrize(
    "page",
    [
        pytest.param(lambda: bombs.many_marker_jpeg(2_000, b"\xff\xe2"), id="jpeg-2000-app2"),
        pytest.param(lambda: bombs.many_chunk_png(8_000, b"tIME"), id="png-8000-chunks"),
    ],
)
def test_a_page_with_many_segments_within_the_bound_is_whole(tmp_path: Path, page: Any) -> None:
    # An ICC profile split in 255 APP2 segments, 8 192 IDAT chunks of a 64 MiB PNG:
    # headers longer than usual, far under the bound.
    path = tmp_path / "p0.img"
    path.write_bytes(page())
    assert verify_image(path) is None


def test_an_ugoira_frame_whose_headers_pillow_walks_one_by_one_is_refused_before_it_opens(
    tmp_path: Path, decoded: list[tuple[int, int]]
) -> None:
    zip_path = tmp_path / "1_ugoira.zip"
    with zipfile.ZipFile(zip_path, "w") as archive:
        archive.writestr("000000.jpg", bombs.many_marker_jpeg(200_000))
    dest = tmp_path / "1_ugoira.gif"
    with pytest.raises(OverBudget, match="segments"):
        encode_gif(zip_path, ugoira([{"file": "000000.jpg", "delay": 50}]), dest)
    assert decoded == [] and not dest.exists()


def ugoira(frames: list[dict[str, Any]]) -> Any:
    return parse_metadata(
        {"ugoira_metadata": {"zip_urls": {"medium": "https://i.pximg.net/z/1.zip"}, "frames": frames}}
    )


@pytest.mark.timeout(120)
def test_an_ugoira_whose_later_frame_is_huge_is_refused_before_any_frame_is_decoded(
    tmp_path: Path, decoded: list[tuple[int, int]]
) -> None:
    body, frames = bombs.ugoira_zip(3, (13000, 13000))
    assert len(body) < 400_000
    zip_path = tmp_path / "1_ugoira.zip"
    zip_path.write_bytes(body)
    dest = tmp_path / "1_ugoira.gif"
    with pytest.raises(OverBudget, match="13000"):
        encode_gif(zip_path, ugoira(frames), dest)
    assert decoded == [] and not dest.exists()


def ugoira_frames_zip(path: Path, sizes: list[tuple[int, int]]) -> list[dict[str, Any]]:
    with zipfile.ZipFile(path, "w") as archive:
        for i, size in enumerate(sizes):
            buf = io.BytesIO()
            Image.new("RGB", size, (i * 30 % 256, 90, 200)).save(buf, "JPEG")
            archive.writestr(f"{i:06d}.jpg", buf.getvalue())
    return [{"file": f"{i:06d}.jpg", "delay": 50} for i in range(len(sizes))]


def test_an_ugoira_s_frames_are_summed_and_charged_as_they_are_encoded(
    tmp_path: Path, decoded: list[tuple[int, int]]
) -> None:
    zip_path, dest = tmp_path / "1.zip", tmp_path / "1.gif"
    frames = ugoira_frames_zip(zip_path, [(100, 100)] * 6)
    meter = DecodeBudget().meter()
    assert encode_gif(zip_path, ugoira(frames), dest, meter=meter) == (100, 100)
    assert (meter.frames, meter.pixels) == (6, 6 * 100 * 100)

    decoded.clear()
    with pytest.raises(OverBudget, match="pixels"):  # 6 × 10 000 together
        encode_gif(zip_path, ugoira(frames), dest, meter=DecodeBudget(max_pixels=59_999).meter())
    assert decoded == []
    decoded.clear()
    meter = DecodeBudget(max_cpu_s=15.0).meter(clock=lambda: 10.0 * len(decoded))
    with pytest.raises(OverBudget, match="CPU"):
        encode_gif(zip_path, ugoira(frames), dest, meter=meter)
    assert len(decoded) == 2
    stopped = DecodeBudget().meter()
    stopped.stop()
    with pytest.raises(DecodeStopped):
        encode_gif(zip_path, ugoira(frames), dest, meter=stopped)


def test_a_zip_that_is_not_one_is_the_works_and_a_cut_zip_is_retried(tmp_path: Path) -> None:
    zip_path, dest = tmp_path / "1.zip", tmp_path / "1.gif"
    frames = ugoira_frames_zip(zip_path, [(40, 40)] * 3)
    whole = zip_path.read_bytes()
    zip_path.write_bytes(whole[: len(whole) - 30])  # the central directory is cut off
    with pytest.raises(AnimationBroken):
        encode_gif(zip_path, ugoira(frames), dest)
    zip_path.write_bytes(b'{"error": "not a zip"}')
    with pytest.raises(UnusableAnimation):
        encode_gif(zip_path, ugoira(frames), dest)
    zip_path.write_bytes(whole)
    missing = [*frames, {"file": "000009.jpg", "delay": 50}]
    with pytest.raises(UnusableAnimation, match="not in the zip"):
        encode_gif(zip_path, ugoira(missing), dest)


# ---- the artifact store: a work's failure, and a decode that never outlives its attempt ----


class OneFile:
    """A source of one page (or one ugoira) whose bytes are ``body``."""

    def __init__(self, body: bytes, animation: Any = None) -> None:
        self.body = body
        self._animation = animation

    @contextlib.asynccontextmanager
    async def download(self, url: str) -> AsyncIterator[Any]:
        data = self.body

        class Body:
            expected_bytes = len(data)

            async def chunks(self) -> AsyncIterator[bytes]:
                yield data

        yield Body()

    async def animation(self, work: Work) -> Any:
        return self._animation


WORK = Work(work_id="42", title="t", url="https://www.pixiv.net/artworks/42", pages=[WorkPage(index=0, url="x_p0.gif")])


async def test_a_bomb_makes_the_work_unavailable_with_its_kind(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    with pytest.raises(WorkUnavailable) as caught:
        await store.fetch(OneFile(bombs.many_frame_gif(5000)), WORK, "job", "t")  # type: ignore[arg-type]
    assert caught.value.kind == UnavailableKind.OVER_BUDGET

    body, frames = bombs.ugoira_zip(2, (9000, 9000))
    meta = ugoira(frames)
    with pytest.raises(WorkUnavailable) as caught:
        await store.fetch(OneFile(body, meta), WORK.model_copy(update={"kind": "ugoira"}), "job", "t")  # type: ignore[arg-type]
    assert caught.value.kind == UnavailableKind.OVER_BUDGET


async def test_an_ugoira_zip_over_its_byte_limit_is_the_works_not_a_failed_download(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from curaflow import artifacts

    zip_path = tmp_path / "z.zip"
    frames = ugoira_frames_zip(zip_path, [(40, 40)] * 3)
    monkeypatch.setattr(artifacts.store, "MAX_ZIP_BYTES", 100)
    with pytest.raises(WorkUnavailable) as caught:
        await ArtifactStore(tmp_path / "a").fetch(OneFile(zip_path.read_bytes(), ugoira(frames)), WORK, "j", "t")  # type: ignore[arg-type]
    assert caught.value.kind == UnavailableKind.TOO_LARGE


async def test_a_cancelled_fetch_stops_its_decode_at_the_next_frame(
    tmp_path: Path, decoded: list[tuple[int, int]]
) -> None:
    frames = 400
    source = OneFile(bombs.gif((600, 600), frames))
    store = ArtifactStore(tmp_path, budget=DecodeBudget(max_pixels=10**12, max_frames=10**4, max_cpu_s=600))
    fetching = asyncio.create_task(store.fetch(source, WORK, "job", "t"))  # type: ignore[arg-type]
    while len(decoded) < 2:
        await asyncio.sleep(0.01)
    fetching.cancel()
    with pytest.raises(asyncio.CancelledError):
        await fetching
    # the cancel returns once the decoding thread let go of the file: it stopped, not finished
    assert len(decoded) < frames
    assert not any(p.name.endswith(".part") for p in store.folder("job", "t").iterdir())


async def test_a_deadline_that_passes_while_decoding_is_not_the_works(tmp_path: Path) -> None:
    from curaflow.outbound import attempt_deadline

    store = ArtifactStore(tmp_path)
    with attempt_deadline(0), pytest.raises(SourceError) as caught:
        await store.fetch(OneFile(bombs.gif((100, 100), 3)), WORK, "job", "t")  # type: ignore[arg-type]
    assert caught.value.retryable and "deadline" in str(caught.value)


async def test_a_work_listing_no_page_is_the_works_never_an_empty_artifact(tmp_path: Path) -> None:
    with pytest.raises(WorkUnavailable) as caught:
        await ArtifactStore(tmp_path).fetch(OneFile(b""), WORK.model_copy(update={"pages": []}), "job", "t")  # type: ignore[arg-type]
    assert caught.value.kind == UnavailableKind.NO_FILE


async def test_an_animation_a_source_built_without_frames_is_the_works_before_its_zip_is_fetched(
    tmp_path: Path,
) -> None:
    source = OneFile(b"never asked", Animation(zip_url="https://i.pximg.net/z.zip", frames=[]))
    with pytest.raises(WorkUnavailable) as caught:
        await ArtifactStore(tmp_path).fetch(source, WORK, "job", "t")  # type: ignore[arg-type]
    assert caught.value.kind == UnavailableKind.UNUSABLE_ANIMATION
    with pytest.raises(UnusableAnimation, match="no frames"):
        encode_gif(tmp_path / "absent.zip", Animation(zip_url="https://x/z.zip", frames=[]), tmp_path / "o.gif")


async def test_a_whole_zip_lacking_a_frame_the_metadata_names_is_not_recognised_as_the_works(tmp_path: Path) -> None:
    """The metadata (the app-api's answer) names frames the zip (the image host's) does not
    hold: two answers of the source disagreeing — what a renamed frame file, or a zip of
    another size served for the URL, would look like for every ugoira. Until 2026-12-05
    each such work was remembered unusable for the week; now it is held back briefly. A
    frame that is in the zip and does not decode stays the work's (the host holds it)."""
    zip_path = tmp_path / "z.zip"
    frames = ugoira_frames_zip(zip_path, [(40, 40)] * 3)
    renamed = [{"file": f"{i}.jpg", "delay": 50} for i in range(3)]
    with pytest.raises(WorkUnavailable) as caught:
        await ArtifactStore(tmp_path / "a").fetch(OneFile(zip_path.read_bytes(), ugoira(renamed)), WORK, "j", "t")  # type: ignore[arg-type]
    assert (caught.value.kind, caught.value.recognised) == (UnavailableKind.UNUSABLE_ANIMATION, False)

    with zipfile.ZipFile(zip_path, "a") as archive:
        archive.writestr("000003.jpg", b"\xff\xd8\xff\xe0 not a frame at all")
    broken = [*frames, {"file": "000003.jpg", "delay": 50}]
    with pytest.raises(WorkUnavailable) as caught:
        await ArtifactStore(tmp_path / "b").fetch(OneFile(zip_path.read_bytes(), ugoira(broken)), WORK, "j", "t")  # type: ignore[arg-type]
    assert (caught.value.kind, caught.value.recognised) == (UnavailableKind.UNUSABLE_ANIMATION, True)

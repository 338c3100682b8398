"""A work's pages in the artifact store: a page completes (fsync, decode check, rename, in
a thread) while the next page downloads, and nothing of that changes what a fetch
returns or raises.

* The next page is asked of the source while the page before it is still being checked
  (a source slot is not held by the disk and the decoder).
* Pages complete in order; the first failure in page order is the one raised — at once,
  not after the download under way — and no part file of a page that was received but
  never completed is left behind: after a page's failure, a download's failure, a cancel,
  or a progress hook that fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

import curaflow.artifacts.files as files_module
from curaflow.artifacts import ArtifactStore
from curaflow.artifacts.files import WRITE_BATCH
from curaflow.domain.models import Work, WorkPage
from curaflow.domain.reasons import TerminalReason
from curaflow.sources.errors import SourceError, UnavailableKind, WorkUnavailable
from tests.unit.test_decode_budget import OneFile
from tests.unit.test_disk_fault_sweep import META, UGOIRA, ZIP


def png(shade: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 6), (shade, shade, shade)).save(buf, format="PNG")
    return buf.getvalue()


@functools.cache
def big_png() -> bytes:
    """A PNG over one write batch: its part file is on disk as soon as it is received."""
    buf = io.BytesIO()
    Image.frombytes("RGB", (800, 800), bytes(range(256)) * 7500).save(buf, format="PNG", compress_level=0)
    assert len(buf.getvalue()) > WRITE_BATCH
    return buf.getvalue()


def work(pages: int) -> Work:
    return Work(
        work_id="42",
        url="https://www.pixiv.net/artworks/42",
        page_count=pages,
        pages=[WorkPage(index=i, url=f"https://i.pximg.net/img-original/42_p{i}.png") for i in range(pages)],
    )


class Pages:
    """A source of a work's pages: ``bodies[i]`` for page ``i`` (an exception is raised
    instead of answering); every request is logged, with an event set per page asked."""

    def __init__(self, bodies: list[bytes | Exception], *, stall: int | None = None) -> None:
        self.bodies = bodies
        self.asked: list[int] = []
        self.asked_event = [threading.Event() for _ in bodies]
        self.stall = stall  # a page whose body never ends (a cancel must reach it)

    @contextlib.asynccontextmanager
    async def download(self, url: str) -> AsyncIterator[Any]:
        page = int(url.rsplit("_p", 1)[1].split(".")[0])
        self.asked.append(page)
        self.asked_event[page].set()
        body = self.bodies[page]
        if isinstance(body, Exception):
            raise body
        data: bytes = body
        stall = self.stall == page

        class Body:
            expected_bytes = None if stall else len(data)

            async def chunks(self) -> AsyncIterator[bytes]:
                yield data[:4]
                if stall:
                    await asyncio.Event().wait()
                yield data[4:]

        yield Body()

    async def animation(self, work: Work) -> Any:
        return None


def left_behind(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.is_file() and p.name != ".store-id")


@pytest.fixture
def slow_check(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Page 0's decode check waits (in its thread) until the source was asked for page 1,
    or 5 s; records whether it saw that request."""
    seen: dict[str, Any] = {"source": None, "overlapped": None}
    check = files_module.check_image

    def waiting(path: Path, **kwargs: Any) -> Any:
        if "_p0." in path.name and seen["source"] is not None:
            seen["overlapped"] = seen["source"].asked_event[1].wait(5)
        return check(path, **kwargs)

    monkeypatch.setattr(files_module, "check_image", waiting)
    return seen


async def test_the_next_page_downloads_while_a_page_is_checked(tmp_path: Path, slow_check: dict[str, Any]) -> None:
    source = Pages([png(10), png(20), png(30)])
    slow_check["source"] = source
    progress: list[tuple[int, int]] = []

    async def on_page(done: int, total: int) -> None:
        progress.append((done, total))

    artifact = await ArtifactStore(tmp_path).fetch(source, work(3), "job@x", "t", on_page=on_page)  # type: ignore[arg-type]

    assert slow_check["overlapped"] is True  # page 1 was asked while page 0 was being checked
    assert [f.page for f in artifact.files] == [0, 1, 2]
    assert [Path(f.path).read_bytes() for f in artifact.files] == [png(10), png(20), png(30)]
    assert progress == [(1, 3), (2, 3), (3, 3)]
    assert left_behind(tmp_path) == ["42_p0.png", "42_p1.png", "42_p2.png"]


async def test_a_pages_failure_is_raised_and_the_next_page_received_meanwhile_is_discarded(tmp_path: Path) -> None:
    source = Pages([b"not an image at all", png(20), png(30)])

    with pytest.raises(WorkUnavailable, match="page 0"):
        await ArtifactStore(tmp_path).fetch(source, work(3), "job@x", "t")  # type: ignore[arg-type]

    assert 2 not in source.asked  # nothing asked after the failure was known
    assert left_behind(tmp_path) == []


async def test_the_first_failure_in_page_order_is_raised(tmp_path: Path) -> None:
    # Page 0 is not an image (the work's failure); page 1's download fails meanwhile.
    source = Pages([b"not an image at all", SourceError(TerminalReason.DOWNLOAD_FAILED, "reset by peer")])

    with pytest.raises(WorkUnavailable, match="page 0"):
        await ArtifactStore(tmp_path).fetch(source, work(2), "job@x", "t")  # type: ignore[arg-type]
    assert left_behind(tmp_path) == []

    # The other way round: page 0 completes, page 1's download fails: the download's failure.
    source = Pages([png(10), SourceError(TerminalReason.DOWNLOAD_FAILED, "reset by peer")])
    with pytest.raises(SourceError, match="reset by peer"):
        await ArtifactStore(tmp_path / "b").fetch(source, work(2), "job@x", "t")  # type: ignore[arg-type]
    assert left_behind(tmp_path / "b") == ["42_p0.png"]  # a complete page is kept for the retry


async def test_a_cancel_during_a_download_leaves_no_part_and_no_task(tmp_path: Path) -> None:
    source = Pages([png(10), png(20), png(30)], stall=1)
    store = ArtifactStore(tmp_path)
    fetch = asyncio.create_task(store.fetch(source, work(3), "job@x", "t"))  # type: ignore[arg-type]
    while 1 not in source.asked:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    before = asyncio.all_tasks()
    fetch.cancel()
    with pytest.raises(asyncio.CancelledError):
        await fetch
    await asyncio.sleep(0)
    assert not [t for t in before - {fetch} if not t.done() and t is not asyncio.current_task()]
    assert all(not name.endswith(".part") for name in left_behind(tmp_path))
    assert 2 not in source.asked


class Boom(Exception):
    pass


async def test_a_failing_progress_hook_leaves_no_part_of_the_next_page(tmp_path: Path) -> None:
    async def on_page(done: int, total: int) -> None:
        raise Boom

    with pytest.raises(Boom):
        await ArtifactStore(tmp_path).fetch(Pages([png(10), big_png()]), work(2), "job@x", "t", on_page=on_page)  # type: ignore[arg-type]
    assert [n for n in left_behind(tmp_path) if n.endswith(".part")] == []


async def test_a_cancel_in_the_progress_hook_leaves_no_part_of_the_next_page(tmp_path: Path) -> None:
    entered = asyncio.Event()

    async def on_page(done: int, total: int) -> None:
        entered.set()
        await asyncio.Event().wait()

    source = Pages([png(10), big_png()])
    fetch = asyncio.create_task(ArtifactStore(tmp_path).fetch(source, work(2), "job@x", "t", on_page=on_page))  # type: ignore[arg-type]
    await asyncio.wait_for(entered.wait(), 10)
    await asyncio.sleep(0.05)
    fetch.cancel()
    with pytest.raises(asyncio.CancelledError):
        await fetch
    assert [n for n in left_behind(tmp_path) if n.endswith(".part")] == []


async def test_a_kept_pages_failure_does_not_come_before_an_earlier_pages(tmp_path: Path) -> None:
    folder = ArtifactStore(tmp_path).folder("job@x", "t")
    folder.mkdir(parents=True)
    (folder / "42_p1.png").mkdir()  # "complete on disk", and unreadable as a file

    with pytest.raises(WorkUnavailable, match="page 0"):
        await ArtifactStore(tmp_path).fetch(Pages([b"not an image at all", png(20)]), work(2), "job@x", "t")  # type: ignore[arg-type]


async def test_a_pages_failure_stops_the_download_under_way(tmp_path: Path) -> None:
    source = Pages([b"not an image at all", png(20)], stall=1)  # page 1's body never ends

    with pytest.raises(WorkUnavailable, match="page 0"):
        await asyncio.wait_for(ArtifactStore(tmp_path).fetch(source, work(2), "job@x", "t"), 5)  # type: ignore[arg-type]
    assert left_behind(tmp_path) == []


def part_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*.part"))


def _in_settle(task: asyncio.Task[Any]) -> bool:
    """True while ``task`` awaits inside the store's cleanup (``_settle``)."""
    coro: Any = task.get_coro()
    while coro is not None:
        if getattr(getattr(coro, "cr_code", None), "co_name", "") == "_settle":
            return True
        coro = getattr(coro, "cr_await", None)
    return False


async def test_one_cancel_during_the_cleanup_of_a_pages_failure_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = Pages([b"not an image at all", big_png()])
    received = threading.Event()
    check = files_module.check_image

    def waiting(path: Path, **kwargs: Any) -> Any:
        if "_p0." in path.name:
            received.wait(5)  # page 0's check fails only once page 1 is received
        return check(path, **kwargs)

    monkeypatch.setattr(files_module, "check_image", waiting)
    before = asyncio.all_tasks()
    fetch = asyncio.create_task(ArtifactStore(tmp_path).fetch(source, work(2), "job@x", "t"))  # type: ignore[arg-type]
    while not part_files(tmp_path) or 1 not in source.asked:
        await asyncio.sleep(0.005)
    await asyncio.sleep(0.05)
    received.set()
    for _ in range(100_000):  # one cancel, while the fetch cleans up after page 0's failure
        if fetch.done() or _in_settle(fetch):
            fetch.cancel()
            break
        await asyncio.sleep(0)
    with pytest.raises(BaseException):  # noqa: B017 - the cancel or page 0's failure, as it lands
        await fetch
    assert [t for t in asyncio.all_tasks() - before if not t.done() and t is not asyncio.current_task()] == []
    assert part_files(tmp_path) == []


async def test_one_cancel_at_any_moment_after_a_pages_failure_leaves_nothing(tmp_path: Path) -> None:
    for i in range(120):
        folder = tmp_path / str(i)
        source = Pages([b"not an image at all", big_png(), big_png()])
        before = asyncio.all_tasks()
        fetch = asyncio.create_task(ArtifactStore(folder).fetch(source, work(3), "job@x", "t"))  # type: ignore[arg-type]
        await asyncio.sleep(i * 0.0002)
        fetch.cancel()
        with pytest.raises(BaseException):  # noqa: B017 - the cancel or page 0's failure, as it lands
            await fetch
        left = [t for t in asyncio.all_tasks() - before if not t.done() and t is not asyncio.current_task()]
        assert (i, left, part_files(folder)) == (i, [], [])


class _OverLimit(Pages):
    """Every page's body begins as a PNG and goes over a 64 MiB limit (the size rule weighs
    only a body that begins as an image: ``test_source_answers_never_seen.py``)."""

    @contextlib.asynccontextmanager
    async def download(self, url: str) -> AsyncIterator[Any]:
        class Body:
            expected_bytes = None

            async def chunks(self) -> AsyncIterator[bytes]:
                yield b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
                raise WorkUnavailable(
                    "42",
                    "an image page is larger than 67108864 bytes",
                    UnavailableKind.TOO_LARGE,
                    recognised=True,
                    limit_bytes=64 * 1024 * 1024,
                )

        yield Body()


@pytest.mark.parametrize(
    ("size", "recognised"),
    [
        ((1200, 1600), False),  # at most ~19 MB as an image: the body is the host's (until 2026-12-05: the week)
        (None, False),  # a later page of a multi-page work: the source gives no size
        ((0, 5), False),
        ((10_000, 10_000), True),  # 800 MB as an uncompressed 16-bit RGBA PNG: it may be the work's
    ],
)
async def test_a_body_over_the_limit_is_the_works_only_when_an_image_of_its_size_could_be_so_large(
    tmp_path: Path, size: tuple[int, int] | None, recognised: bool
) -> None:
    one = work(1)
    if size is not None:
        one.pages[0].width, one.pages[0].height = size
    with pytest.raises(WorkUnavailable) as raised:
        await ArtifactStore(tmp_path).fetch(_OverLimit([b""]), one, "j", "t")
    assert raised.value.kind == UnavailableKind.TOO_LARGE
    assert raised.value.recognised is recognised


class _LaterPageOverLimit(Pages):
    """Page 0 answers an image; every later page's body is over a 64 MiB limit."""

    @contextlib.asynccontextmanager
    async def download(self, url: str) -> AsyncIterator[Any]:
        if url.endswith("_p0.png"):
            async with super().download(url) as body:
                yield body
            return
        async with _OverLimit([]).download(url) as body:
            yield body


@pytest.mark.parametrize(
    ("first", "own", "recognised"),
    [
        # Pixiv lists page 0's size alone: a later page is taken to be of that size. Until
        # 2026-12-05 it was always the host's: a huge page held an hour, fetched every hour.
        ((10_000, 10_000), None, True),
        ((1200, 1600), None, False),  # a page of page 0's size is at most ~19 MB: the host's
        (None, None, False),  # no size at all: the host's
        ((10_000, 10_000), (1200, 1600), False),  # the page's own size, when listed, decides
    ],
)
async def test_a_later_page_over_the_limit_is_judged_by_the_first_pages_size(
    tmp_path: Path, first: tuple[int, int] | None, own: tuple[int, int] | None, recognised: bool
) -> None:
    two = work(2)
    if first is not None:
        two.pages[0].width, two.pages[0].height = first
    if own is not None:
        two.pages[1].width, two.pages[1].height = own
    with pytest.raises(WorkUnavailable) as raised:
        await ArtifactStore(tmp_path).fetch(_LaterPageOverLimit([png(1), b""]), two, "j", "t")
    assert raised.value.kind == UnavailableKind.TOO_LARGE
    assert raised.value.recognised is recognised, raised.value.why


async def test_part_files_a_killed_attempt_left_are_removed_by_the_next(tmp_path: Path) -> None:
    # A process killed mid-fetch (SIGKILL, the OOM killer) leaves the part files of the page
    # it was receiving and of the one it was completing (up to download_max_bytes each),
    # under names of their own: until 2026-12-05 each crash added its parts to the cell's
    # folder, which a persistent store keeps for good. The next attempt holds the cell's
    # lease (no other attempt writes the folder): it removes them before its first byte.
    store = ArtifactStore(tmp_path)
    folder = store.folder("job@1", "t")
    folder.mkdir(parents=True)
    (folder / ".42_p0.png.k1ll3d.part").write_bytes(b"\x89PNG" + b"\0" * 4096)
    (folder / ".42_p1.png.0ther1.part").write_bytes(b"\x89PNG")
    (folder / ".42_ugoira.zip.part").write_bytes(b"PK")

    artifact = await store.fetch(Pages([png(1), png(2)]), work(2), "job@1", "t")

    assert len(artifact.files) == 2
    assert left_behind(tmp_path) == ["42_p0.png", "42_p1.png"]


async def test_a_frames_zip_an_attempt_could_not_remove_is_removed_by_the_next_beside_its_kept_gif(
    tmp_path: Path,
) -> None:
    # An animated work's frames zip is removed once its GIF is encoded; a removal that
    # failed (a disk's error) or a process killed between the two left `<id>_ugoira.zip`
    # beside the GIF, and every later attempt kept the GIF and never met the zip again: it
    # stayed for good (2026-12-07, the disk-fault sweep's ugoira case). The next attempt
    # removes this work's zip before anything else; nothing that is not the store's is touched.
    store = ArtifactStore(tmp_path)
    await store.fetch(OneFile(ZIP, META), UGOIRA, "job@1", "t")
    folder = store.folder("job@1", "t")
    (folder / "7_ugoira.zip").write_bytes(ZIP)  # what the failed removal left
    (folder / "8_ugoira.zip").write_bytes(ZIP)  # not this work's
    (folder / "notes.txt").write_text("an operator's")

    artifact = await store.fetch(OneFile(ZIP, META), UGOIRA, "job@1", "t")

    assert [Path(f.path).name for f in artifact.files] == ["7_ugoira.gif"]
    assert left_behind(tmp_path) == ["7_ugoira.gif", "8_ugoira.zip", "notes.txt"]


class _Sent(Pages):
    """Pages whose page 1 sets ``sent`` once its last byte was taken (and written)."""

    def __init__(self, bodies: list[bytes | Exception]) -> None:
        super().__init__(bodies)
        self.sent = threading.Event()

    @contextlib.asynccontextmanager
    async def download(self, url: str) -> AsyncIterator[Any]:
        async with super().download(url) as body:
            if not url.endswith("_p1.png"):
                yield body
                return
            sent = self.sent

            class Signalled:
                expected_bytes = body.expected_bytes

                async def chunks(self) -> AsyncIterator[bytes]:
                    async for chunk in body.chunks():
                        yield chunk
                    sent.set()

            yield Signalled()


async def test_one_cancel_while_a_part_file_is_removed_waits_for_its_removal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Page 0 fails once page 1 is received; the disk is slow removing page 1's part file,
    # and the fetch is cancelled (once) meanwhile. Until 2026-12-05 the fetch ended at once,
    # its part file still on disk and the thread removing it running on: the part counted
    # as removed as soon as its removal began.
    source = _Sent([b"not an image at all", big_png()])
    check = files_module.check_image

    def waiting(path: Path, **kwargs: Any) -> Any:
        if "_p0." in path.name:
            source.sent.wait(5)  # page 0's check fails only once page 1 is received
        return check(path, **kwargs)

    removing, removed = threading.Event(), threading.Event()
    unlink = Path.unlink

    def slow_unlink(self: Path, missing_ok: bool = False) -> None:
        if self.name.startswith(".42_p1.png.") and self.name.endswith(".part"):
            removing.set()
            removed.wait(5)
        unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(files_module, "check_image", waiting)
    monkeypatch.setattr(Path, "unlink", slow_unlink)
    before = asyncio.all_tasks()
    fetch = asyncio.create_task(ArtifactStore(tmp_path).fetch(source, work(2), "job@x", "t"))  # type: ignore[arg-type]
    assert await asyncio.to_thread(removing.wait, 5)
    fetch.cancel()
    for _ in range(1000):  # loop turns: a fetch that does not wait for the removal ends here
        if fetch.done():
            break
        await asyncio.sleep(0)
    ended_with = part_files(tmp_path) if fetch.done() else None
    removed.set()
    with pytest.raises(BaseException):  # noqa: B017 - the cancel or page 0's failure, as it lands
        await fetch
    assert ended_with in (None, [])  # never ended while its part file was on disk
    assert [t for t in asyncio.all_tasks() - before if not t.done() and t is not asyncio.current_task()] == []
    assert part_files(tmp_path) == []

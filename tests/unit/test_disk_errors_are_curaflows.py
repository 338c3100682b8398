"""A failure of curaflow's own machine while a page or an animation is checked is never the
work's verdict.

The decode check reads the page's file from the artifacts directory (``open``, ``read``,
``mmap``) and an animation's frames from the frames zip on that disk. The operating
system can refuse any of those: an I/O error of the disk (``EIO``), a map the process
may not make (``ENOMEM``: its map count or address space at its limit), too many open
files (``EMFILE``). Pillow raises ``OSError`` for bytes it cannot decode too, so the
check must tell them apart: the machine's answer carries an ``errno`` (Pillow's never
does); it is raised as it came — the ``fetch`` activity retries it (``storage_full``
for a full disk), curaflow's — and never becomes ``undecodable`` / ``unusable_animation``
(the work refused for a week) nor ``download_failed`` (the source's). The only
``errno`` bytes can cause is a seek's ``EINVAL`` (an offset a header names, before the
file's start): a decoder's seek says so itself, without an ``errno``
(:class:`~curaflow.sources.decoding.SeekBeforeStart`), so every ``EINVAL`` the disk answers
— a read, an open, a map — is the machine's too.
"""

from __future__ import annotations

import builtins
import errno
import io
import os
import struct
import zipfile
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

import curaflow.artifacts.images as images
import curaflow.sources.decoding as decoding
from curaflow.artifacts import ArtifactStore
from curaflow.artifacts.files import describe
from curaflow.artifacts.images import check_image
from curaflow.domain.models import Work, WorkPage
from curaflow.sources.animation import Animation, AnimationBroken, AnimationFrame, encode_gif
from curaflow.sources.decoding import machine_cause, machine_error
from tests.unit.test_decode_budget import OneFile


def big_png(path: Path) -> Path:
    """A whole PNG over the size the check maps rather than reads (256 KiB)."""
    Image.frombytes("RGB", (400, 400), os.urandom(400 * 400 * 3)).save(path, format="PNG", compress_level=0)
    assert path.stat().st_size > 256 * 1024
    return path


class _FailingReads(io.FileIO):
    """A file whose reads past its first bytes fail as a failing disk answers (``code``:
    ``EIO`` unless a test says otherwise)."""

    code = errno.EIO

    def read(self, size: int = -1, /) -> bytes:
        if self.tell() >= 64:
            raise OSError(self.code, os.strerror(self.code))
        return super().read(size)

    def readinto(self, buffer: Any, /) -> int | None:  # type: ignore[override]
        if self.tell() >= 64:
            raise OSError(self.code, os.strerror(self.code))
        return super().readinto(buffer)


class _EinvalReads(_FailingReads):
    """Reads failing with ``EINVAL``: what a disk answers a read it cannot serve (a FUSE or
    network file system, a device under a direct-I/O mount), never the bytes'."""

    code = errno.EINVAL


def _failing_once(monkeypatch: pytest.MonkeyPatch, reads: type[_FailingReads]) -> dict[str, int]:
    seen = {"opens": 0}

    def opening(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        seen["opens"] += 1
        if seen["opens"] == 1 and mode == "rb":
            return io.BufferedReader(reads(file, "r"))
        return builtins.open(file, mode, *args, **kwargs)

    monkeypatch.setattr(images, "open", opening, raising=False)
    return seen


@pytest.fixture
def eio_once(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """The first ``open`` of a page by the check gets a file whose reads fail with ``EIO``
    (a transient disk error: later opens read the file as it is)."""
    return _failing_once(monkeypatch, _FailingReads)


@pytest.fixture
def einval_once(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """As :func:`eio_once`, the reads failing with the disk's ``EINVAL``."""
    return _failing_once(monkeypatch, _EinvalReads)


def test_the_machine_s_errors_are_told_from_the_bytes() -> None:
    assert machine_error(OSError(errno.EIO, "Input/output error"))
    assert machine_error(OSError(errno.ENOMEM, "Cannot allocate memory"))
    assert machine_error(OSError(errno.EMFILE, "Too many open files"))
    assert machine_error(OSError(errno.ENOSPC, "No space left on device"))
    assert not machine_error(OSError("broken data stream when reading image file"))  # Pillow's
    assert machine_error(OSError(errno.EINVAL, "Invalid argument"))  # the disk's (a read's, an open's)
    assert not machine_error(decoding.SeekBeforeStart("a seek to -8 before the file's start"))  # a header's
    assert not machine_error(ValueError("x"))


def test_an_io_error_reading_a_whole_page_is_raised_not_the_page_refused(tmp_path: Path, eio_once: Any) -> None:
    page = big_png(tmp_path / "p0.png")
    with pytest.raises(OSError) as caught:
        check_image(page)
    assert caught.value.errno == errno.EIO


def test_an_einval_of_the_disk_reading_a_whole_page_is_raised_not_the_page_refused(
    tmp_path: Path, einval_once: Any
) -> None:
    # The disk's EINVAL on a read was taken for a seek a header names: the whole page
    # "does not decode" — undecodable, recognised, the work refused for the week.
    page = big_png(tmp_path / "p0.png")
    with pytest.raises(OSError) as caught:
        check_image(page)
    assert caught.value.errno == errno.EINVAL
    assert isinstance(check_image(page), images.Verified)  # the disk reads again: the page is whole


def test_an_einval_of_the_disk_describing_a_kept_page_is_raised_not_the_size_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A page kept from an earlier attempt is described again: the disk's EINVAL as Pillow
    # read its header recorded it with no width and height (as "not an image") for good.
    page = tmp_path / "p0.jpg"
    Image.new("RGB", (40, 30), (9, 9, 9)).save(page, format="JPEG", comment=b"c" * 60000)  # a header past a buffer
    whole = describe(page, 0)
    real_open = builtins.open

    def einval_reading(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if Path(file) == page and mode == "rb":
            return io.BufferedReader(_EinvalReads(file, "r"))
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", einval_reading)
    with pytest.raises(OSError) as caught:
        describe(page, 0, sha256=whole.sha256, size=whole.bytes)  # its head read whole, Pillow's read fails
    assert caught.value.errno == errno.EINVAL
    monkeypatch.setattr(builtins, "open", real_open)
    assert (whole.width, whole.height) == (40, 30)


def test_a_map_the_process_may_not_make_is_raised_not_the_page_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = big_png(tmp_path / "p0.png")

    def no_map(*_: Any, **__: Any) -> Any:
        raise OSError(errno.ENOMEM, "Cannot allocate memory")

    monkeypatch.setattr(decoding.mmap, "mmap", no_map)  # the map of decoding.viewed
    with pytest.raises(OSError) as caught:
        check_image(page)
    assert caught.value.errno == errno.ENOMEM


async def test_a_fetch_whose_check_meets_a_disk_error_raises_it_and_leaves_no_part(
    tmp_path: Path, eio_once: Any
) -> None:
    body = big_png(tmp_path / "source.png").read_bytes()
    work = Work(
        work_id="42",
        url="https://www.pixiv.net/artworks/42",
        page_count=1,
        pages=[WorkPage(index=0, url="https://i.pximg.net/img-original/42_p0.png")],
    )
    store = ArtifactStore(tmp_path / "artifacts")
    with pytest.raises(OSError) as caught:
        await store.fetch(OneFile(body), work, "job@1", "t")
    assert caught.value.errno == errno.EIO  # curaflow's (retried), not WorkUnavailable
    assert [p.name for p in store.folder("job@1", "t").iterdir()] == []
    # the same page is whole once the disk reads again
    artifact = await store.fetch(OneFile(body), work, "job@1", "t")
    assert [f.bytes for f in artifact.files] == [len(body)]


def frames(path: Path) -> tuple[Path, Animation]:
    with zipfile.ZipFile(path, "w") as archive:
        for i in range(2):
            buf = io.BytesIO()
            Image.new("RGB", (16, 12), (i * 90, 0, 0)).save(buf, format="PNG")
            archive.writestr(f"{i:06d}.png", buf.getvalue())
    meta = Animation(
        zip_url="https://i.pximg.net/img-zip-ugoira/1_ugoira600x600.zip",
        frames=[AnimationFrame(file=f"{i:06d}.png", delay_ms=100) for i in range(2)],
    )
    return path, meta


def test_an_io_error_reading_the_frames_zip_is_raised_not_the_animation_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    zip_path, meta = frames(tmp_path / "1_ugoira.zip")
    opened = zipfile.ZipFile.open
    calls = {"n": 0}

    def failing_once(self: zipfile.ZipFile, *args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError(errno.EIO, "Input/output error")
        return opened(self, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", failing_once)
    dest = tmp_path / "1_ugoira.gif"
    with pytest.raises(OSError) as caught:
        encode_gif(zip_path, meta, dest)
    assert caught.value.errno == errno.EIO
    assert not dest.exists()


def test_a_frames_zip_the_disk_cannot_open_is_raised_not_the_transfer_blamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    zip_path, meta = frames(tmp_path / "1_ugoira.zip")
    real = zipfile.ZipFile.__init__

    def no_files_left(self: zipfile.ZipFile, *args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(zipfile.ZipFile, "__init__", no_files_left)
    with pytest.raises(OSError) as caught:
        encode_gif(zip_path, meta, tmp_path / "1_ugoira.gif")
    assert caught.value.errno == errno.EMFILE
    monkeypatch.setattr(zipfile.ZipFile, "__init__", real)
    assert encode_gif(zip_path, meta, tmp_path / "1_ugoira.gif") == (16, 12)


def _encode_gif_of_a_zip_read_as(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reads: type[_FailingReads]
) -> OSError:
    """``encode_gif`` of a frames zip (:func:`frames`, in ``tmp_path``) whose every opening
    for reading (``open``, ``io.open``) gets a file whose reads fail as ``reads``' do (other
    files open as they are); the ``OSError`` it raised (a test fails if it raised none)."""
    zip_path, meta = frames(tmp_path / "1_ugoira.zip")
    real_open = builtins.open

    def failing_reads_of_the_zip(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if Path(file) == zip_path and mode == "rb":
            return io.BufferedReader(reads(file, "r"))
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(io, "open", failing_reads_of_the_zip)
    monkeypatch.setattr(builtins, "open", failing_reads_of_the_zip)
    with pytest.raises(OSError) as caught:
        encode_gif(zip_path, meta, tmp_path / "1_ugoira.gif")
    return caught.value


def test_an_io_error_zipfile_raises_as_not_a_zip_is_raised_not_the_transfer_blamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # zipfile reads the end record of the zip as it opens it and turns an OSError of that
    # read into its own BadZipFile("File is not a zip file"): the disk's EIO was taken for
    # a zip cut short (AnimationBroken: download_failed, the source's).
    raised = _encode_gif_of_a_zip_read_as(tmp_path, monkeypatch, _FailingReads)
    assert raised.errno == errno.EIO
    assert not (tmp_path / "1_ugoira.gif").exists()


def test_an_einval_of_the_disk_reading_the_frames_zip_is_raised_not_the_transfer_blamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The disk's EINVAL reading the zip's end record: zipfile raises "File is not a zip
    # file" over it, which was read as a zip cut short (AnimationBroken: download_failed,
    # the source's; its attempts spent, the work held back) for curaflow's own disk.
    raised = _encode_gif_of_a_zip_read_as(tmp_path, monkeypatch, _EinvalReads)
    assert raised.errno == errno.EINVAL
    assert not (tmp_path / "1_ugoira.gif").exists()


def test_a_seek_a_frames_zip_names_before_its_start_stays_the_zips_verdict(tmp_path: Path) -> None:
    # Guard: the one EINVAL bytes cause — a zip64 locator naming a record before the file's
    # start (zipfile seeks there, the kernel answers EINVAL) — is the zip's, never the
    # machine's: read as a zip cut short, as before.
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, 0, 1)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, 0, 0, 0)
    zip_path = tmp_path / "1_ugoira.zip"
    zip_path.write_bytes(b"PK\x03\x04" + locator + end)
    _, meta = frames(tmp_path / "frames.zip")
    with pytest.raises(AnimationBroken):
        encode_gif(zip_path, meta, tmp_path / "1_ugoira.gif")


def test_a_decoders_seek_before_the_files_start_is_the_bytes_verdict(tmp_path: Path) -> None:
    # The file a decoder reads says a seek before its start itself (no errno): the bytes'.
    path = tmp_path / "p0.png"
    path.write_bytes(b"0123456789")
    with builtins.open(path, "rb") as fh:
        view = decoding.DelegatedReads(fh)
        with pytest.raises(decoding.SeekBeforeStart) as caught:
            view.seek(-8)
        assert not machine_error(caught.value) and machine_cause(caught.value) is None
        with pytest.raises(decoding.SeekBeforeStart):
            view.seek(-20, io.SEEK_END)
        assert view.seek(4) == 4 and view.read(2) == b"45"


def test_a_machine_error_a_library_raised_as_its_own_is_found() -> None:
    try:
        try:
            raise OSError(errno.EIO, "Input/output error")
        except OSError:
            raise zipfile.BadZipFile("File is not a zip file")  # noqa: B904 - as zipfile does
    except zipfile.BadZipFile as err:
        wrapped = err
    cause = machine_cause(wrapped)
    assert cause is not None and cause.errno == errno.EIO
    assert machine_cause(zipfile.BadZipFile("File is not a zip file")) is None
    assert machine_cause(OSError("broken data stream when reading image file")) is None

"""The ``directory`` route reports a work delivered only once its names are on the disk.

A file's bytes are fsynced before its rename, but a rename is a change of its *folder*:
until the folder itself is synced, a crash or a power cut after the report can take the
manifest (and the pages) back out of the directory — the ledger says ``delivered`` for
good, the directory has nothing, and no one sends the work again. And the manifest that
decides "delivered" is judged by what was opened (one regular file, bounded), not by a
look at its name before. Probed by wrapping the OS calls only (``os.fsync`` /
``os.replace`` / ``os.open`` / ``os.stat``), with the real errno where one fails, and a
real FIFO.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from activities.deliver.sending import _guarded
from curaflow.domain.reasons import TerminalReason
from curaflow.routes.base import RouteError, answer_key
from curaflow.routes.directory import MANIFEST_MAX_BYTES, DirectoryRoute
from tests.unit.test_unknown_is_cheap_at_routes import dir_failure, dir_request


class Disk:
    """Records ``os.replace`` (``os.link``: the manifest's) and ``os.fsync`` in order; a
    folder's sync may be made to fail."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: list[tuple[str, Any]] = []
        self.fail_folder_sync: int | None = None  # an errno, raised by the next sync of a folder
        self.fail_file_sync: int | None = None  # an errno, raised by every sync of a regular file
        real_replace, real_link, real_fsync = os.replace, os.link, os.fsync

        def replace(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
            real_replace(src, dst, *args, **kwargs)
            self.events.append(("replace", Path(dst).name))

        def link(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
            # The manifest is published by a link (never over another's): its name's
            # change, as a rename is.
            real_link(src, dst, *args, **kwargs)
            self.events.append(("replace", Path(dst).name))

        def fsync(fd: Any) -> None:
            info = os.fstat(fd)
            if stat.S_ISDIR(info.st_mode) and self.fail_folder_sync is not None:
                code, self.fail_folder_sync = self.fail_folder_sync, None
                raise OSError(code, os.strerror(code))
            if stat.S_ISREG(info.st_mode) and self.fail_file_sync is not None:
                raise OSError(self.fail_file_sync, os.strerror(self.fail_file_sync))
            real_fsync(fd)
            self.events.append(("fsync", info.st_ino))

        monkeypatch.setattr(os, "replace", replace)
        monkeypatch.setattr(os, "link", link)
        monkeypatch.setattr(os, "fsync", fsync)

    def synced_after(self, folder: Path, renamed: str) -> bool:
        """Whether ``folder`` was synced after the last rename to ``renamed`` (or at all,
        when nothing was renamed)."""
        ino = folder.stat().st_ino
        names = [i for i, e in enumerate(self.events) if e == ("replace", renamed)]
        start = names[-1] if names else -1
        return any(e == ("fsync", ino) for e in self.events[start + 1 :])


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[Disk]:
    yield Disk(monkeypatch)


async def test_a_written_work_is_reported_only_once_its_folder_and_the_directory_are_synced(
    tmp_path: Path, disk: Disk
) -> None:
    route = DirectoryRoute("out", tmp_path / "out")
    receipt = await route.deliver(dir_request(tmp_path))
    assert receipt.remote_status == "written"
    root, folder = tmp_path / "out", tmp_path / "out" / "4242"
    assert disk.synced_after(folder, "manifest.json"), "the manifest's rename synced before the report"
    assert disk.synced_after(root, "manifest.json"), "the work's folder's own name synced before the report"


async def test_a_replay_syncs_what_it_finds_before_reporting_it(tmp_path: Path, disk: Disk) -> None:
    # An attempt killed between the manifest's rename and the report: the next finds the
    # manifest of its own delivery — in the page cache, perhaps not yet on the disk.
    route = DirectoryRoute("out", tmp_path / "out")
    request = dir_request(tmp_path)
    await route.deliver(request)
    disk.events.clear()
    assert (await route.deliver(request)).remote_status == "replayed"
    assert disk.synced_after(tmp_path / "out" / "4242", "manifest.json")
    assert disk.synced_after(tmp_path / "out", "manifest.json")


async def test_an_io_error_syncing_the_folder_is_retried_never_reported_delivered(tmp_path: Path, disk: Disk) -> None:
    # EIO at a folder's fsync: the names may not be on the disk although every call before
    # succeeded — one retried attempt (delivery_failed), never a delivery.
    route = DirectoryRoute("out", tmp_path / "out")
    request = dir_request(tmp_path)
    disk.fail_folder_sync = errno.EIO
    with pytest.raises(RouteError) as caught:
        await _guarded(route, request)
    err = caught.value
    assert err.reason == TerminalReason.DELIVERY_FAILED and not err.permanent and not err.ambiguous, (err.reason, err)
    disk.events.clear()
    assert (await route.deliver(request)).remote_status == "replayed"
    assert disk.synced_after(tmp_path / "out" / "4242", "manifest.json")


@pytest.mark.parametrize("code", [errno.EINVAL, errno.EOPNOTSUPP], ids=["EINVAL", "EOPNOTSUPP"])
async def test_a_disk_that_cannot_sync_a_folder_still_delivers(tmp_path: Path, disk: Disk, code: int) -> None:
    # Some file systems answer a directory's fsync "not supported": nothing more can be
    # done there — the route is not refused for it (its every work would be, for good).
    route = DirectoryRoute("out", tmp_path / "out")
    disk.fail_folder_sync = code
    assert (await route.deliver(dir_request(tmp_path))).remote_status == "written"


@pytest.mark.parametrize("code", [errno.EINVAL, errno.EOPNOTSUPP], ids=["EINVAL", "EOPNOTSUPP"])
async def test_a_disk_that_cannot_sync_a_file_still_delivers(tmp_path: Path, disk: Disk, code: int) -> None:
    # A disk that answers every file's fsync "not supported" (a VirtualBox shared folder's
    # EINVAL, a network share's or a FUSE file system's EOPNOTSUPP) refused every work of
    # the route with that answer — three in a row paused it, every resume paused it again:
    # the route blocked for good by its disk's "I cannot", nothing it could fix. The files
    # are as durable as that disk makes them, as its folders' names already were.
    route = DirectoryRoute("out", tmp_path / "out")
    request = dir_request(tmp_path)
    disk.fail_file_sync = code
    assert (await _guarded(route, request)).remote_status == "written"
    folder = tmp_path / "out" / "4242"
    manifest = json.loads((folder / "manifest.json").read_bytes())
    for f, entry in zip(request.artifact.files, manifest["files"], strict=True):
        assert (folder / entry["name"]).read_bytes() == Path(f.path).read_bytes()
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]
    assert disk.synced_after(folder, "manifest.json")  # the names still synced where the disk can


@pytest.mark.parametrize("code", [errno.EIO, errno.ENOSPC], ids=["EIO", "ENOSPC"])
async def test_a_file_sync_that_fails_otherwise_is_never_a_delivery(tmp_path: Path, disk: Disk, code: int) -> None:
    # Guard: EIO (the bytes may be lost) is one retried attempt, ENOSPC the route's disk
    # full: neither is reported delivered, nothing is left under a final name.
    route = DirectoryRoute("out", tmp_path / "out")
    disk.fail_file_sync = code
    with pytest.raises(RouteError) as caught:
        await _guarded(route, dir_request(tmp_path))
    err = caught.value
    expected = TerminalReason.DELIVERY_FAILED if code == errno.EIO else TerminalReason.ROUTE_REFUSED
    assert err.reason == expected, (err.reason, str(err))
    assert not (tmp_path / "out" / "4242" / "manifest.json").exists()


async def test_a_route_directory_this_process_may_write_but_not_read_still_delivers(
    tmp_path: Path, disk: Disk, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A drop-box directory (0333: write and search, no read) cannot be opened to be synced
    # (EACCES): the delivery worked before and still does; the work's own folder, which
    # curaflow made, is synced.
    root = tmp_path / "out"
    root.mkdir()
    real_open = os.open

    def open_(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        # Its handle for the *at calls (O_PATH) needs no read right: opened as on such a disk.
        if flags & os.O_DIRECTORY and not flags & getattr(os, "O_PATH", 0) and Path(path) == root:
            raise OSError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)
    route = DirectoryRoute("out", root)
    assert (await route.deliver(dir_request(tmp_path))).remote_status == "written"
    assert disk.synced_after(root / "4242", "manifest.json")


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS], ids=["ENOSPC", "EROFS"])
async def test_a_folder_sync_the_disk_refuses_is_the_routes(tmp_path: Path, disk: Disk, code: int) -> None:
    route = DirectoryRoute("out", tmp_path / "out")
    disk.fail_folder_sync = code
    with pytest.raises(RouteError) as caught:
        await _guarded(route, dir_request(tmp_path))
    err = caught.value
    assert err.reason == TerminalReason.ROUTE_REFUSED and err.answer == answer_key(f"directory {errno.errorcode[code]}")


# ---- the manifest read: one regular file, bounded -------------------------------------------------


def mine(request: Any) -> bytes:
    return json.dumps({"idempotency_key": request.idempotency_key}).encode()


async def test_a_fifo_swapped_in_after_the_check_is_never_read_as_the_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # manifest.json is a regular file when looked at, a FIFO when opened (swapped in
    # between): its reader blocked for good on an open that no writer answers (an executor
    # thread lost, the attempt hung), or read what a writer fed it — here this delivery's
    # own key, a "replayed" delivery of a work the directory does not have.
    request = dir_request(tmp_path)
    folder = tmp_path / "out" / "4242"
    folder.mkdir(parents=True)
    manifest = folder / "manifest.json"
    os.mkfifo(manifest)
    regular = (tmp_path / "regular.json").resolve()
    regular.write_bytes(mine(request))
    real_stat = os.stat

    real_lstat = os.lstat

    def stat_(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if Path(path) == manifest:  # the check's view: the file before the swap
            return real_stat(regular)
        return real_stat(path, *args, **kwargs)

    def lstat_(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        # The look by the work's folder's handle (2026-12-08): the name in it.
        if Path(path) == manifest or (kwargs.get("dir_fd") is not None and path == manifest.name):
            return real_stat(regular)
        return real_lstat(path, *args, **kwargs)

    def feed() -> None:
        with contextlib.suppress(OSError), open(manifest, "wb") as fifo:  # blocks until a reader opens
            fifo.write(mine(request))

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    monkeypatch.setattr(os, "stat", stat_)
    monkeypatch.setattr(os, "lstat", lstat_)
    try:
        err = await dir_failure(tmp_path, request)
    finally:
        monkeypatch.undo()
        # Release a writer still waiting for a reader — until it has ended: a writer whose
        # thread had not yet reached its open() when a single release came and went waited
        # for ever (the suite's run hung here until its timeout on a busy machine).
        while writer.is_alive():
            with contextlib.suppress(OSError):
                os.close(os.open(manifest, os.O_RDONLY | os.O_NONBLOCK))
            writer.join(timeout=0.05)
    assert err.reason == TerminalReason.ROUTE_REFUSED and "manifest" in str(err), (err.reason, str(err))


async def test_a_manifest_larger_than_any_curaflow_writes_is_not_read_whole(tmp_path: Path) -> None:
    # A huge file at manifest.json (a link to a disk image, a log): read whole into the
    # worker's memory. Refused unread past the bound: it is no manifest of curaflow's.
    request = dir_request(tmp_path)
    folder = tmp_path / "out" / "4242"
    folder.mkdir(parents=True)
    body = mine(request)[:-1] + b', "pad": "' + b"x" * MANIFEST_MAX_BYTES + b'"}'
    (folder / "manifest.json").write_bytes(body)
    err = await dir_failure(tmp_path, request)
    assert err.reason == TerminalReason.ROUTE_REFUSED and "manifest" in str(err), (err.reason, str(err))


# ---- what a killed attempt left in the work's folder ----------------------------------------------


async def test_the_temporary_files_a_killed_attempt_left_are_removed_by_the_next(tmp_path: Path) -> None:
    # A worker killed (SIGKILL, the OOM killer) while it copied a page or wrote the
    # manifest leaves its temporary file (mkstemp's name) in the work's folder. The next
    # attempt wrote new ones beside it and the old stayed in the route's directory for
    # good — one page's bytes a death, hidden by its leading dot.
    request = dir_request(tmp_path)
    folder = tmp_path / "out" / "4242"
    folder.mkdir(parents=True)
    names = [Path(f.path).name for f in request.artifact.files] + ["manifest.json"]
    left = []
    for name in names:
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)  # as the route names them
        os.write(fd, b"half a page")
        os.close(fd)
        left.append(Path(tmp))
    theirs = [folder / ".notes.tmp", folder / f".{names[0]}.mine.tmp", folder / "draft.tmp"]
    for path in theirs:
        path.write_text("not curaflow's")
    route = DirectoryRoute("out", tmp_path / "out")
    assert (await route.deliver(request)).remote_status == "written"
    assert not [p.name for p in left if p.exists()], "a killed attempt's temporary files removed"
    assert all(p.exists() for p in theirs), "files curaflow did not name are left alone"
    assert sorted(p.name for p in folder.iterdir() if p not in theirs) == sorted(names)


async def test_the_temporary_file_of_a_live_writer_is_never_removed(tmp_path: Path) -> None:
    # Another delivery writing the work's folder at this moment (a fenced attempt still
    # alive, a second route configured on the same path): its temporary file is no
    # leftover — removed, its rename would fail (ENOENT), an attempt lost.
    request = dir_request(tmp_path)
    folder = tmp_path / "out" / "4242"
    folder.mkdir(parents=True)
    name = Path(request.artifact.files[0].path).name
    writer = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(writer, fcntl.LOCK_SH)  # what a delivery writing the folder holds
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
        os.close(fd)
        route = DirectoryRoute("out", tmp_path / "out")
        assert (await route.deliver(request)).remote_status == "written"
        assert Path(tmp).exists()
    finally:
        os.close(writer)


# ---- a disk that keeps no permissions -----------------------------------------------------------


def refusing_fchmod(monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    def fchmod(fd: int, mode: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fchmod", fchmod)


@pytest.mark.parametrize("code", [errno.EPERM, errno.EOPNOTSUPP], ids=["EPERM", "EOPNOTSUPP"])
async def test_a_disk_that_keeps_no_permissions_still_takes_the_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    # A route directory on a FAT / exFAT disk (a USB drive, a camera card) answers a chmod
    # to a mode it cannot keep with EPERM: every delivery was route_refused — the route
    # paused, every work held back — though the files could be written. No mode was
    # asked for (file_mode unset): the files keep the mode that disk gives, as cp's would.
    refusing_fchmod(monkeypatch, code)
    route = DirectoryRoute("out", tmp_path / "out")
    assert (await route.deliver(dir_request(tmp_path))).remote_status == "written"
    assert (tmp_path / "out" / "4242" / "manifest.json").is_file()


async def test_a_mode_asked_for_that_the_disk_cannot_keep_is_the_routes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # file_mode set: the operator asked for it — a disk that cannot keep it refuses the
    # route (its answer counted), nothing delivered without the mode asked.
    refusing_fchmod(monkeypatch, errno.EPERM)
    route = DirectoryRoute("out", tmp_path / "out", file_mode=0o640)
    with pytest.raises(RouteError) as caught:
        await _guarded(route, dir_request(tmp_path))
    assert caught.value.reason == TerminalReason.ROUTE_REFUSED
    assert not (tmp_path / "out" / "4242" / "manifest.json").exists()


# ---- a name removed under the write -------------------------------------------------------------


async def test_the_works_folder_moved_away_mid_write_is_retried_not_the_routes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A consumer that takes each file as it lands moves the work's folder away while the
    # route writes it: the rename meets ENOENT. Nothing is wrong with the route's directory
    # (the next attempt makes the folder again): one retried attempt, never route_refused
    # counted in the streak that pauses the route. (A page takes its name by a link since
    # 2026-12-07, a rename where the disk makes no links.)
    request = dir_request(tmp_path)
    folder = tmp_path / "out" / "4242"
    real_replace, real_link = os.replace, os.link
    moved: list[Path] = []

    def moving(real: Any) -> Any:
        def call(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
            if not moved:
                moved.append(folder.rename(tmp_path / "taken"))
            real(src, dst, *args, **kwargs)

        return call

    monkeypatch.setattr(os, "replace", moving(real_replace))
    monkeypatch.setattr(os, "link", moving(real_link))
    with pytest.raises(RouteError) as caught:
        await _guarded(DirectoryRoute("out", tmp_path / "out"), request)
    err = caught.value
    assert err.reason == TerminalReason.DELIVERY_FAILED and not err.permanent and err.answer is None, (err.reason, err)
    monkeypatch.undo()
    assert (await DirectoryRoute("out", tmp_path / "out").deliver(request)).remote_status == "written"

"""A ``directory`` delivery never replaces a manifest another delivery wrote, nor reports
one it replaced.

Two deliveries of one work into one directory — two routes configured on the same path
(each its own intent in the ledger), or two works whose folder names the disk holds for
one (a case-insensitive disk: ``Abc`` and ``abc``) — each look for the work's
``manifest.json`` before they write. When both look before either has renamed its
manifest into place, the second rename replaced the first's manifest and both reported
the work written: the directory kept one delivery's manifest (or another work's), the
other delivery reported where its manifest no longer is. Probed by letting the second
delivery's look run before the first's write (the interleaving two threads give), on
the real disk.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest

from activities.deliver.sending import _guarded
from curaflow.domain.reasons import TerminalReason
from curaflow.routes.base import RouteError
from curaflow.routes.directory import DirectoryRoute
from tests.unit.test_unknown_is_cheap_at_routes import dir_request


def looked_before_the_other_wrote(monkeypatch: pytest.MonkeyPatch) -> None:
    """The next look for a manifest finds none, as a look made before another delivery's
    rename does; every later look sees the disk."""
    real = DirectoryRoute._manifest_present
    missed = [False]

    def present(path: Path) -> bool:
        if not missed[0]:
            missed[0] = True
            return False
        return real(path)

    monkeypatch.setattr(DirectoryRoute, "_manifest_present", staticmethod(present))


def case_folding_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """A case-insensitive disk simulated: the folder name ``abc`` the route gives a call by a
    folder's handle is found as the ``Abc`` the disk already holds (until
    2026-12-08 a symbolic link ``abc`` → ``Abc`` stood for it: the route now refuses a link
    in its directory, never follows it)."""

    def folding(real: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("dir_fd") is not None or kwargs.get("dst_dir_fd") is not None:
                args = tuple("Abc" if a == "abc" else a for a in args)
            return real(*args, **kwargs)

        return call

    for name in ("mkdir", "open", "lstat", "link", "replace", "unlink"):
        monkeypatch.setattr(os, name, folding(getattr(os, name)))


async def test_a_second_route_on_the_same_path_never_replaces_the_first_ones_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = DirectoryRoute("out", tmp_path / "out"), DirectoryRoute("archive", tmp_path / "out")
    mine = dir_request(tmp_path)
    theirs = dataclasses.replace(mine, route="archive", idempotency_key="curaflow:archive:illustration:4242:j:t")
    assert (await first.deliver(mine)).remote_status == "written"
    looked_before_the_other_wrote(monkeypatch)
    receipt = await second.deliver(theirs)
    manifest = json.loads((tmp_path / "out" / "4242" / "manifest.json").read_text())
    assert manifest["idempotency_key"] == mine.idempotency_key, "the first delivery's manifest was replaced"
    assert receipt.duplicate and receipt.remote_status == "exists"
    assert [p.name for p in (tmp_path / "out" / "4242").iterdir() if p.name.startswith(".")] == []


async def test_a_work_whose_folder_the_disk_holds_for_another_works_never_replaces_its_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A case-insensitive disk simulated: work "abc" finds the folder of work "Abc".
    route = DirectoryRoute("out", tmp_path / "out")
    upper = dir_request(tmp_path, work_id="Abc")
    assert (await route.deliver(upper)).remote_status == "written"
    case_folding_disk(monkeypatch)
    lower = dir_request(tmp_path, work_id="abc")
    looked_before_the_other_wrote(monkeypatch)
    with pytest.raises(RouteError) as caught:
        await _guarded(route, lower)
    assert caught.value.reason == TerminalReason.OVER_ROUTE_LIMIT  # the next test
    manifest = json.loads((tmp_path / "out" / "Abc" / "manifest.json").read_text())
    assert manifest["work"]["work_id"] == "Abc", "another work's manifest replaced this one's"


async def test_a_work_whose_folder_the_disk_folds_into_another_works_is_the_works_on_this_route(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A source's work ids may hold letters (paging.WORK_ID): "abc" and "Abc" are one folder
    # on a case-insensitive disk, whatever the route does — their pages' names fold alike.
    # Until 2026-12-07 the second found the first's manifest and was route_refused ("no
    # manifest curaflow wrote for this work"): held back for good, and three such works
    # paused the route for works it takes. Now it is the work's on this route
    # (over_route_limit: the disk cannot hold it apart), named so; nothing is written.
    from tests.unit.test_unknown_is_cheap_at_routes import verdict_of

    route = DirectoryRoute("out", tmp_path / "out")
    assert (await route.deliver(dir_request(tmp_path, work_id="Abc"))).remote_status == "written"
    before = sorted((p.name, p.stat().st_ino) for p in (tmp_path / "out" / "Abc").iterdir())
    case_folding_disk(monkeypatch)  # the disk's folding of the two names
    with pytest.raises(RouteError) as caught:
        await _guarded(route, dir_request(tmp_path, work_id="abc"))
    monkeypatch.undo()
    err = caught.value
    assert err.reason == TerminalReason.OVER_ROUTE_LIMIT and err.permanent, (err.reason, err)
    assert "'abc'" in str(err) and "'Abc'" in str(err) and "letter case" in str(err)
    assert not verdict_of(err, resend_safe=True).hold
    assert sorted((p.name, p.stat().st_ino) for p in (tmp_path / "out" / "Abc").iterdir()) == before


@pytest.mark.parametrize("code", [errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS], ids=errno.errorcode.get)
async def test_a_disk_that_makes_no_hard_links_still_takes_the_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    # FAT and exFAT answer EPERM to a link, some network shares and FUSE disks EOPNOTSUPP
    # or ENOSYS: the manifest is renamed into place there, as before.
    def link(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "link", link)
    route = DirectoryRoute("out", tmp_path / "out")
    request = dir_request(tmp_path)
    assert (await route.deliver(request)).remote_status == "written"
    folder = tmp_path / "out" / "4242"
    assert json.loads((folder / "manifest.json").read_text())["idempotency_key"] == request.idempotency_key
    assert sorted(p.name for p in folder.iterdir()) == ["4242_p0.jpg", "manifest.json"]
    assert (await route.deliver(request)).remote_status == "replayed"


async def test_a_link_the_disk_refuses_otherwise_is_the_routes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def link(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "link", link)
    with pytest.raises(RouteError) as caught:
        await _guarded(DirectoryRoute("out", tmp_path / "out"), dir_request(tmp_path))
    assert caught.value.reason == TerminalReason.ROUTE_REFUSED and "ENOSPC" in str(caught.value)
    assert not (tmp_path / "out" / "4242" / "manifest.json").exists()
    assert [p.name for p in (tmp_path / "out" / "4242").iterdir() if p.name.startswith(".")] == []


# ---- a page's name: never over a file another wrote (2026-12-07) ------------------------------


def page_path(tmp_path: Path, request: Any) -> Path:
    return tmp_path / "out" / request.work.work_id / Path(request.artifact.files[0].path).name


def temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def no_links(monkeypatch: pytest.MonkeyPatch) -> None:
    # FAT and exFAT answer EPERM to a link: names are given by a rename there.
    def link(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EPERM, os.strerror(errno.EPERM))

    monkeypatch.setattr(os, "link", link)


@pytest.mark.parametrize("links", [True, False], ids=["links", "no-links"])
async def test_a_file_at_a_pages_name_that_curaflow_did_not_write_is_never_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, links: bool
) -> None:
    # A user's file (or another delivery's other bytes) where the page goes: until
    # 2026-12-07 the page was renamed over it, destroying it. Now the route refuses
    # (held back, never the work refused), naming the path.
    if not links:
        no_links(monkeypatch)
    request = dir_request(tmp_path)
    theirs = page_path(tmp_path, request)
    theirs.parent.mkdir(parents=True)
    theirs.write_bytes(b"the directory owner's own file")
    with pytest.raises(RouteError) as caught:
        await _guarded(DirectoryRoute("out", tmp_path / "out"), request)
    assert theirs.read_bytes() == b"the directory owner's own file", "a file curaflow did not write was replaced"
    assert caught.value.reason == TerminalReason.ROUTE_REFUSED and caught.value.answer is not None
    assert str(theirs) in str(caught.value), "the refusal names the path"
    assert not (theirs.parent / "manifest.json").exists()
    assert temporaries(theirs.parent) == []


async def test_a_link_at_a_pages_name_is_never_followed_nor_replaced(tmp_path: Path) -> None:
    # A symbolic link at the page's name, to a file of the very bytes: not a page curaflow
    # wrote (what it leads to may change) — refused, the link and its file kept. (One
    # leading out of the work's folder is refused before: paths.inside.)
    request = dir_request(tmp_path)
    name = page_path(tmp_path, request)
    name.parent.mkdir(parents=True)
    elsewhere = name.parent / "a copy.jpg"
    elsewhere.write_bytes(Path(request.artifact.files[0].path).read_bytes())
    name.symlink_to(elsewhere)
    with pytest.raises(RouteError) as caught:
        await _guarded(DirectoryRoute("out", tmp_path / "out"), request)
    assert caught.value.reason == TerminalReason.ROUTE_REFUSED
    assert name.is_symlink() and name.resolve() == elsewhere


@pytest.mark.parametrize("links", [True, False], ids=["links", "no-links"])
async def test_a_page_already_there_with_the_very_bytes_is_kept_not_rewritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, links: bool
) -> None:
    # A killed attempt's page (or another delivery's of the same artifact): the same bytes
    # at the name — keeping it destroys nothing, and the work is delivered.
    if not links:
        no_links(monkeypatch)
    request = dir_request(tmp_path)
    there = page_path(tmp_path, request)
    there.parent.mkdir(parents=True)
    there.write_bytes(Path(request.artifact.files[0].path).read_bytes())
    before = there.stat().st_ino
    assert (await DirectoryRoute("out", tmp_path / "out").deliver(request)).remote_status == "written"
    assert there.stat().st_ino == before, "the file at the page's name was kept, not replaced"
    assert json.loads((there.parent / "manifest.json").read_text())["files"][0]["name"] == there.name
    assert temporaries(there.parent) == []


# ---- a kill between a name's link and its temporary name's removal ----------------------------


class Killed(BaseException):
    """The process killed at this instant: nothing of it runs further (SIGKILL)."""


def killed_at_unlink(monkeypatch: pytest.MonkeyPatch, prefix: str) -> None:
    """The process dies as it removes its temporary file named ``prefix``… (after the link
    gave the file its name): that removal, and every later one of the attempt, never runs."""
    real = os.unlink
    dead = [False]

    def unlink(path: Any, *args: Any, **kwargs: Any) -> None:
        if dead[0] or Path(path).name.startswith(prefix):
            dead[0] = True
            raise Killed(str(path))
        real(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink)


async def test_a_kill_between_the_manifests_link_and_its_temporarys_removal_leaves_nothing_after_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Until 2026-12-07 the next attempt found the manifest and returned: the temporary
    # name (a second link of the manifest) stayed in the route's directory for good.
    request = dir_request(tmp_path)
    folder = tmp_path / "out" / "4242"
    with monkeypatch.context() as m:
        killed_at_unlink(m, ".manifest.json.")
        with pytest.raises(Killed):
            await DirectoryRoute("out", tmp_path / "out").deliver(request)
    assert len(temporaries(folder)) == 1 and (folder / "manifest.json").exists()
    assert (await DirectoryRoute("out", tmp_path / "out").deliver(request)).remote_status == "replayed"
    assert temporaries(folder) == []
    assert json.loads((folder / "manifest.json").read_text())["idempotency_key"] == request.idempotency_key


async def test_kills_at_every_step_of_retries_leave_no_temporary_files_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each attempt killed after a page's link (its temporary name left), then one killed
    # after the manifest's: the leftovers never add up, and the last attempt leaves none.
    request = dir_request(tmp_path)
    folder = tmp_path / "out" / "4242"
    page = Path(request.artifact.files[0].path).name
    for prefix in (f".{page}.", f".{page}.", ".manifest.json."):
        with monkeypatch.context() as m:
            killed_at_unlink(m, prefix)
            with pytest.raises(Killed):
                await DirectoryRoute("out", tmp_path / "out").deliver(request)
        assert len(temporaries(folder)) == 1, "one attempt's leftover at most"
    assert (await DirectoryRoute("out", tmp_path / "out").deliver(request)).remote_status == "replayed"
    assert temporaries(folder) == []
    assert sorted(p.name for p in folder.iterdir()) == [page, "manifest.json"]


async def test_a_replay_never_removes_the_temporary_file_of_a_live_writer(tmp_path: Path) -> None:
    # A second route on the same path writing the work's folder now (its shared lock
    # held): a replay that finds the manifest leaves its temporary file alone.
    import fcntl
    import tempfile

    request = dir_request(tmp_path)
    route = DirectoryRoute("out", tmp_path / "out")
    assert (await route.deliver(request)).remote_status == "written"
    folder = tmp_path / "out" / "4242"
    writer = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(writer, fcntl.LOCK_SH)
        fd, tmp = tempfile.mkstemp(prefix=".manifest.json.", suffix=".tmp", dir=folder)
        os.close(fd)
        assert (await route.deliver(request)).remote_status == "replayed"
        assert Path(tmp).exists()
    finally:
        os.close(writer)


async def test_a_page_an_earlier_delivery_of_the_work_left_with_other_bytes_is_reported_as_what_it_may_be(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An attempt killed after its page's link, before its manifest; the job ended, and a
    # later job fetched the work again after its artist replaced the image: the page's
    # name holds curaflow's own earlier page, other bytes. It is kept (curaflow cannot tell
    # it from the directory owner's file), the work held back — and the refusal says what
    # the file may be. Until 2026-12-07 it said "a file curaflow did not write": the
    # operator was told the page was someone else's, not that deleting it (no manifest
    # beside it: never reported delivered) lets the work through.
    earlier = dir_request(tmp_path)
    killed_at_unlink(monkeypatch, ".manifest.json.")
    with pytest.raises(Killed):
        await DirectoryRoute("out", tmp_path / "out").deliver(earlier)
    monkeypatch.undo()
    (page_path(tmp_path, earlier).parent / "manifest.json").unlink()  # the kill came before its manifest
    later = dir_request(tmp_path)
    later = dataclasses.replace(later, idempotency_key=later.idempotency_key.replace(":j:", ":j2:"))
    Path(later.artifact.files[0].path).write_bytes(b"the artist's new image")
    with pytest.raises(RouteError) as caught:
        await _guarded(DirectoryRoute("out", tmp_path / "out"), later)
    said = str(caught.value)
    assert caught.value.reason == TerminalReason.ROUTE_REFUSED
    assert "curaflow did not write" not in said, said
    assert "earlier delivery of this work" in said and "no manifest.json" in said, said


@pytest.mark.parametrize("links", [True, False], ids=["links", "no-links"])
async def test_a_folder_at_a_pages_name_is_a_name_taken_named_and_nothing_left_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, links: bool
) -> None:
    # A folder where the page goes is no regular file: the page's name taken, its path
    # named, as a FIFO's or a link's. Until 2026-12-07 the comparison opened it and Python
    # refused a folder as a file (EISDIR) with the descriptor left open — the refusal an
    # errno's ("a name in the way", no path), one descriptor lost each attempt.
    if not links:
        no_links(monkeypatch)
    request = dir_request(tmp_path)
    name = page_path(tmp_path, request)
    name.mkdir(parents=True)
    opened = len(os.listdir("/proc/self/fd")) if Path("/proc/self/fd").is_dir() else None
    with pytest.raises(RouteError) as caught:
        await _guarded(DirectoryRoute("out", tmp_path / "out"), request)
    assert caught.value.reason == TerminalReason.ROUTE_REFUSED
    assert caught.value.answer == "directory page name taken", caught.value.answer
    assert str(name) in str(caught.value)
    assert name.is_dir() and not any(name.iterdir())
    if opened is not None:
        assert len(os.listdir("/proc/self/fd")) <= opened, "a descriptor was left open"

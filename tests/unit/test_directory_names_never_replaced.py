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
    # A case-insensitive disk simulated: work "abc" finds the folder of work "Abc" (a
    # symbolic link in the root stands for the disk's folding of the two names).
    route = DirectoryRoute("out", tmp_path / "out")
    upper = dir_request(tmp_path, work_id="Abc")
    assert (await route.deliver(upper)).remote_status == "written"
    (tmp_path / "out" / "abc").symlink_to("Abc")
    lower = dir_request(tmp_path, work_id="abc")
    looked_before_the_other_wrote(monkeypatch)
    with pytest.raises(RouteError) as caught:
        await _guarded(route, lower)
    assert caught.value.reason == TerminalReason.ROUTE_REFUSED
    manifest = json.loads((tmp_path / "out" / "Abc" / "manifest.json").read_text())
    assert manifest["work"]["work_id"] == "Abc", "another work's manifest replaced this one's"


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

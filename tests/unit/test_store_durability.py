"""The artifact store on a disk that cannot sync a file: as durable as that disk makes it.

Every file the store completes — a page, an animation's GIF, the store's own id — is
fsynced before its rename. Some disks answer a regular file's ``fsync`` "I cannot"
(a VirtualBox shared folder's ``EINVAL``, a network share's or a FUSE file system's
``EOPNOTSUPP``): nothing more can be done there, and the ``directory`` route delivers on
such a disk (2026-12-07). The store failed every page and every GIF with it (curaflow's
error, retried, every attempt alike: each job ``internal_error``), and a worker whose
artifacts directory is such a disk could not name its store and did not start. Probed by
wrapping ``os.fsync`` (:class:`tests.unit.test_directory_durability.Disk`), the real errno.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from curaflow.artifacts import STORE_ID_FILE, ArtifactStore
from curaflow.domain.models import Artifact
from tests.faultdisk import leftovers
from tests.unit.test_directory_durability import Disk
from tests.unit.test_disk_fault_sweep import PAGES, UGOIRA, WORK, _source

UNSYNCABLE = [errno.EINVAL, errno.EOPNOTSUPP]
UNSYNCABLE_IDS = ["EINVAL", "EOPNOTSUPP"]


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[Disk]:
    yield Disk(monkeypatch)


async def _fetch(store: ArtifactStore, case: str) -> Artifact:
    source, work = _source(case)
    return await store.fetch(source, work, "job@1", "t")


def _whole(artifact: Artifact, case: str) -> None:
    if case == "pages":
        assert [Path(f.path).read_bytes() for f in artifact.files] == [PAGES[p.url] for p in WORK.pages]
    else:
        assert [Path(f.path).name for f in artifact.files] == [f"{UGOIRA.work_id}_ugoira.gif"]
    assert all(f.width and f.height for f in artifact.files)


@pytest.mark.parametrize("code", UNSYNCABLE, ids=UNSYNCABLE_IDS)
@pytest.mark.parametrize("case", ["pages", "ugoira"])
async def test_a_store_on_a_disk_that_cannot_sync_a_file_still_completes_it(
    tmp_path: Path, disk: Disk, case: str, code: int
) -> None:
    disk.fail_file_sync = code
    store = ArtifactStore(tmp_path / "artifacts")
    artifact = await _fetch(store, case)
    _whole(artifact, case)
    assert not leftovers(tmp_path / "artifacts")


@pytest.mark.parametrize("code", UNSYNCABLE, ids=UNSYNCABLE_IDS)
def test_a_store_on_a_disk_that_cannot_sync_a_file_is_still_named(tmp_path: Path, disk: Disk, code: int) -> None:
    # The worker names its store at start (activities.deps): it did not start at all.
    disk.fail_file_sync = code
    store_id, _ = ArtifactStore(tmp_path / "artifacts").identity()
    assert store_id
    assert (tmp_path / "artifacts" / STORE_ID_FILE).read_text().strip() == store_id
    assert ArtifactStore(tmp_path / "artifacts").identity()[0] == store_id


@pytest.mark.parametrize("code", [errno.EIO, errno.ENOSPC], ids=["EIO", "ENOSPC"])
@pytest.mark.parametrize("case", ["pages", "ugoira"])
async def test_a_file_sync_that_fails_otherwise_is_raised_never_a_complete_file(
    tmp_path: Path, disk: Disk, case: str, code: int
) -> None:
    # Guard: EIO (the bytes may be lost: retried) and ENOSPC (storage_full) stay the
    # machine's error as it came; nothing is left under a final name or a part name.
    disk.fail_file_sync = code
    store = ArtifactStore(tmp_path / "artifacts")
    with pytest.raises(OSError) as caught:
        await _fetch(store, case)
    assert caught.value.errno == code
    folder = store.folder("job@1", "t")
    left: list[Any] = sorted(p.name for p in folder.iterdir()) if folder.exists() else []
    assert left == []

"""``storage_mode = "cache"`` frees the disk of the host that fetched, whichever host delivered.

Workers share no disk: the fetch writes the cell's files into its own artifacts directory
and copies them into the ledger; a deliver attempt on another host restores that copy into
a transfer folder of its own, removed after the send. The cell's files on the fetching host
go too once the cell is ``submitted``: the delivery records that the cell's folders are no
longer needed (``artifact_holdings.done_at``), and the fetching host's retention pass —
which every worker runs, ``retention.days`` or not — deletes its folder. Until 2026-12-05
only the delivering host's own folder was deleted: with two hosts, about half of the cache
mode's folders stayed on the fetchers' disks for good.

The activities run in the test process (``ActivityEnvironment``) with two workers' real
dependencies — one ledger, the replay source over real HTTP, an artifacts directory each.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from activities.deliver import DeliverActivity
from activities.deps import ActivityDeps, close_deps, open_deps
from activities.finish import FinishActivity
from curaflow.domain.cells import CellState
from curaflow.domain.messages import FinishInput
from curaflow.ledger.retention import prune_tick
from tests.conftest import StackFactory
from tests.deps_support import acquired
from tests.fakes.replay import ReplayServer
from tests.support import Stack, run_as_job, short_id

pytestmark = pytest.mark.integration


@pytest.fixture
async def hosts(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> AsyncIterator[tuple[Stack, ActivityDeps, ActivityDeps]]:
    """A stack with a ``cache`` and a ``persistent`` target, and two workers' dependencies,
    each with an artifacts directory of its own (two hosts)."""
    out = f"out-{short_id()}"
    target = {"query": {"mode": "ranking"}, "routes": [out], "scan_limit": 30}
    stack = make_stack(
        {
            "pixiv": replay.config(),
            "routes": {out: {"kind": "directory", "path": str(tmp_path / "delivered")}},
            "targets": [
                {"id": "cached", "storage_mode": "cache", **target},
                {"id": "kept", "storage_mode": "persistent", **target},
            ],
        }
    )
    fetcher = await open_deps(stack.settings, None, replay_url=replay.url)
    other = stack.settings.model_copy(update={"artifacts_dir": tmp_path / "other-host"})
    deliverer = await open_deps(other, None, replay_url=replay.url)
    try:
        assert fetcher.store.identity()[0] != deliverer.store.identity()[0]
        yield stack, fetcher, deliverer
    finally:
        await close_deps(deliverer)
        await close_deps(fetcher)


async def fetched_here_delivered_there(
    stack: Stack, fetcher: ActivityDeps, deliverer: ActivityDeps, target_id: str
) -> tuple[str, Path]:
    """One job of ``target_id``: acquired by ``fetcher``, delivered by ``deliverer`` (from the
    ledger's copy), finished. Returns the job id and the fetcher's folder of the cell."""
    inp = await acquired(stack, fetcher, target_id)
    folder = fetcher.store.folder(inp.job_id, target_id)
    assert any(folder.iterdir())
    delivered = await run_as_job(DeliverActivity(deliverer).deliver, inp)
    assert delivered.cell.state == CellState.SUBMITTED
    final = await run_as_job(FinishActivity(deliverer).finish, FinishInput(job_id=inp.job_id))
    assert final.status == "succeeded"
    return inp.job_id, folder


async def test_a_cached_cell_delivered_by_another_host_leaves_no_file_on_the_fetchers_disk(
    hosts: tuple[Stack, ActivityDeps, ActivityDeps],
) -> None:
    stack, fetcher, deliverer = hosts
    job_id, folder = await fetched_here_delivered_there(stack, fetcher, deliverer, "cached")
    assert deliverer.store.folder(job_id, "cached").exists() is False  # nothing on the deliverer's disk

    await prune_tick(deliverer.pool, deliverer.store, None)  # another host's pass: not its files
    assert folder.exists()
    await prune_tick(fetcher.pool, fetcher.store, None)  # the fetcher's own pass (no retention.days)

    assert not folder.exists()
    assert not folder.parent.exists()  # the job's folder too, once empty
    held = await fetcher.pool.fetchval("SELECT count(*) FROM artifact_holdings WHERE job_id = $1", job_id)
    assert held == 0  # forgotten once deleted: the next pass does nothing for it


async def test_a_persistent_cell_keeps_its_files_on_the_fetchers_disk(
    hosts: tuple[Stack, ActivityDeps, ActivityDeps],
) -> None:
    stack, fetcher, deliverer = hosts
    _, folder = await fetched_here_delivered_there(stack, fetcher, deliverer, "kept")

    await prune_tick(fetcher.pool, fetcher.store, None)

    assert any(folder.iterdir())  # the artifacts directory is the archive: until retention


async def test_a_cached_cell_whose_job_folder_an_operator_moved_behind_a_link_is_delivered_and_its_folder_said(
    hosts: tuple[Stack, ActivityDeps, ActivityDeps], tmp_path: Path
) -> None:
    # An operator moved the job's folder to another disk and linked it back: the cleanup
    # after the recorded delivery must not follow the link out of the root, nor fail the step.
    stack, fetcher, _ = hosts
    inp = await acquired(stack, fetcher, "cached")
    job_id, target = inp.job_id, inp.target
    job_folder = fetcher.store.folder(job_id, target.target_id).parent
    elsewhere = tmp_path / "other-disk" / job_folder.name
    elsewhere.parent.mkdir()
    shutil.move(job_folder, elsewhere)
    os.symlink(elsewhere, job_folder)
    files = sorted(p.name for p in (elsewhere / target.target_id).iterdir())
    assert files

    with capture_logs() as logs:
        delivered = await run_as_job(DeliverActivity(fetcher).deliver, inp)

    assert delivered.cell.state == CellState.SUBMITTED
    assert sorted(p.name for p in (elsewhere / target.target_id).iterdir()) == files  # nothing outside the root
    [said] = [e for e in logs if e["event"] == "artifact.cache_folder_refused"]
    assert (said["job_id"], said["target_id"]) == (job_id, target.target_id)
    assert "LinkEscape" in said["error"]
    # the store's next pass tries it again and says it, as for any folder it cannot free
    report = await prune_tick(fetcher.pool, fetcher.store, None)
    assert [e for e in report.errors if e.startswith(f"{job_id}/{target.target_id}: LinkEscape")], report.errors
    assert await fetcher.pool.fetchval("SELECT count(*) FROM artifact_holdings WHERE job_id = $1", job_id) == 1
    os.unlink(job_folder)  # the operator's fix: the next pass forgets it
    assert not (await prune_tick(fetcher.pool, fetcher.store, None)).errors
    assert await fetcher.pool.fetchval("SELECT count(*) FROM artifact_holdings WHERE job_id = $1", job_id) == 0
    final = await run_as_job(FinishActivity(fetcher).finish, FinishInput(job_id=job_id))
    assert final.status == "succeeded"

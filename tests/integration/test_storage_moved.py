"""A job's folder an operator moved out of the artifact store behind a symbolic link.

curaflow writes nothing outside its artifacts directory and follows no link out of it
(:func:`curaflow.paths.inside`). A fetch that meets such a folder is the artifact store's
state, set by whoever moved it — never the work's, never the source's, never a bug: the
cell ends with its own reason, ``storage_moved`` (owner ``operator``), naming the folder;
a work released meanwhile is released as any (its folder left as it is, said by the
store's retention pass, as ``curaflow prune`` says every folder it could not free).

The ``fetch`` activity runs in the test process with a worker's real dependencies (the
PostgreSQL ledger, the replay source over real HTTP, the artifact store on disk).
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError

from activities.fetch import FetchActivity
from curaflow.artifacts import ArtifactStore
from curaflow.domain.messages import FetchInput, TargetSpec
from curaflow.domain.models import CandidateReport
from curaflow.domain.reasons import Owner, TerminalReason, reason_info
from curaflow.domain.verdicts import NON_RETRYABLE_TYPES
from curaflow.ledger import cells
from curaflow.sources.errors import UnavailableKind, WorkUnavailable
from curaflow.sources.pixiv.client import parse_work
from curaflow.sources.pixiv.replay.data import recorded_works
from tests.conftest import StackFactory
from tests.deps_support import opened_deps
from tests.fakes.replay import ReplayServer
from tests.support import Stack, ledger_job, run_as_job

pytestmark = pytest.mark.integration


@pytest.fixture
async def deps(make_stack: StackFactory, tmp_path: Path, replay: ReplayServer) -> AsyncIterator[tuple[Stack, Any]]:
    async with opened_deps(make_stack, tmp_path, replay) as opened:
        yield opened


def move_behind_a_link(store: ArtifactStore, job_id: str, elsewhere: Path) -> Path:
    """What an operator does to free a disk: the job's folder moved to ``elsewhere`` (another
    disk) and a symbolic link left in its place. Returns the folder's new place."""
    folder = store.root / job_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kept-by-the-operator").write_bytes(b"x")
    moved = elsewhere / job_id
    moved.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(folder), str(moved))
    folder.symlink_to(moved, target_is_directory=True)
    return moved


async def bound_job(stack: Stack, opened: Any, label: str, works: int) -> tuple[str, TargetSpec]:
    settings = stack.settings
    target = TargetSpec(target_id="demo", routes=settings.route_refs(settings.targets[0]))
    job_id = await ledger_job(opened.pool, target, label=label)
    candidates = [parse_work(w) for w in recorded_works()[:works]]
    async with opened.pool.acquire() as conn, conn.transaction():
        await cells.bind_work(conn, job_id, target, candidates, CandidateReport())
    return job_id, target


def assert_storage_moved(err: ApplicationError, moved: Path) -> None:
    assert err.type == "storage_moved" and err.non_retryable, (err.type, err)
    assert "symbolic link" in str(err), err
    assert "storage_moved" in NON_RETRYABLE_TYPES
    info = reason_info(TerminalReason.STORAGE_MOVED)
    assert info.owner == Owner.OPERATOR and info.protocol_code == "internal_error"
    assert "link" in info.message_en and "move" in info.message_en
    assert (moved / "kept-by-the-operator").read_bytes() == b"x"  # nothing outside the root touched


async def test_a_fetch_into_a_job_folder_moved_behind_a_link_is_storage_moved(
    deps: tuple[Stack, Any], tmp_path: Path
) -> None:
    # Until 2026-12-07: internal_error, "ids are validated at the source: a bug".
    stack, opened = deps
    job_id, target = await bound_job(stack, opened, "moved", 1)
    moved = move_behind_a_link(opened.store, job_id, tmp_path / "other-disk")

    with pytest.raises(ApplicationError) as caught:
        await run_as_job(
            FetchActivity(opened).fetch, FetchInput(job_id=job_id, target=target, heartbeat_interval_ms=1000)
        )
    assert_storage_moved(caught.value, moved)


async def test_a_work_released_while_its_job_folder_was_moved_is_released_and_the_fetch_named(
    deps: tuple[Stack, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first candidate turns out unavailable while an operator moves the job's folder to
    # another disk. Until 2026-12-07 the release's ArtifactStore.delete raised LinkEscape:
    # the attempt failed untyped (internal_error once retried), the work was neither
    # remembered nor released.
    stack, opened = deps
    job_id, target = await bound_job(stack, opened, "released", 2)
    store: ArtifactStore = opened.store
    fetch = store.fetch
    moves: list[Path] = []

    async def unavailable_while_moved(source: Any, work: Any, *args: Any, **kwargs: Any) -> Any:
        if not moves:
            store.folder(job_id, target.target_id).mkdir(parents=True, exist_ok=True)
            moves.append(move_behind_a_link(store, job_id, tmp_path / "other-disk"))
            raise WorkUnavailable(
                work.work_id, "its page does not decode", UnavailableKind.UNDECODABLE, recognised=True
            )
        return await fetch(source, work, *args, **kwargs)

    monkeypatch.setattr(store, "fetch", unavailable_while_moved)
    first = recorded_works()[0]["id"]

    with pytest.raises(ApplicationError) as caught:
        await run_as_job(
            FetchActivity(opened).fetch, FetchInput(job_id=job_id, target=target, heartbeat_interval_ms=1000)
        )
    assert_storage_moved(caught.value, moves[0])
    async with opened.pool.acquire() as conn:
        remembered = await conn.fetchval(
            "SELECT count(*) FROM unavailable_works WHERE work_id = $1 AND job_id = $2", str(first), job_id
        )
        bound = await conn.fetchval(
            "SELECT work_id FROM cells WHERE job_id = $1 AND target_id = $2", job_id, target.target_id
        )
    assert remembered == 1  # released as any unavailable work, and remembered
    assert bound == str(recorded_works()[1]["id"])  # the next candidate bound, its fetch named the folder

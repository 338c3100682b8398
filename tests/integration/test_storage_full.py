"""A full artifact disk is curaflow's own failure, with its own reason.

The ``fetch`` activity runs in the test process (``ActivityEnvironment``) with a worker's
real dependencies (the PostgreSQL ledger, the replay source over real HTTP, the artifact
store on disk); only the disk's answer is replaced: every write of the store fails with
``ENOSPC``, as the kernel answers on a full file system.
"""

from __future__ import annotations

import errno
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError

from activities.deliver import DeliverActivity
from activities.deps import close_deps, open_deps
from activities.fetch import FetchActivity
from curaflow import artifacts
from curaflow.domain.cells import CellState
from curaflow.domain.messages import FetchInput, TargetSpec
from curaflow.domain.models import CandidateReport
from curaflow.domain.reasons import Owner, TerminalReason, reason_info
from curaflow.domain.verdicts import NON_RETRYABLE_TYPES
from curaflow.ledger import artifacts as ledger_artifacts
from curaflow.ledger import cells
from curaflow.sources.pixiv.client import parse_work
from curaflow.sources.pixiv.replay.data import recorded_works
from tests.conftest import StackFactory
from tests.deps_support import acquired, opened_deps
from tests.fakes.replay import ReplayServer
from tests.support import Stack, ledger_job, run_as_job

pytestmark = pytest.mark.integration


@pytest.fixture
async def deps(make_stack: StackFactory, tmp_path: Path, replay: ReplayServer) -> AsyncIterator[tuple[Stack, Any]]:
    async with opened_deps(make_stack, tmp_path, replay) as opened:
        yield opened


async def test_a_full_artifact_disk_is_storage_full_at_once(
    deps: tuple[Stack, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    stack, opened = deps

    def no_space(*_: Any, **__: Any) -> Any:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(artifacts._PartFile, "write", no_space)
    monkeypatch.setattr(artifacts._PartFile, "finish", no_space)
    settings = stack.settings
    target = TargetSpec(target_id="demo", routes=settings.route_refs(settings.targets[0]))
    job_id = await ledger_job(opened.pool, target, label="full")
    work = parse_work(recorded_works()[0])
    async with opened.pool.acquire() as conn, conn.transaction():
        await cells.bind_work(conn, job_id, target, [work], CandidateReport())

    with pytest.raises(ApplicationError) as caught:
        await run_as_job(
            FetchActivity(opened).fetch, FetchInput(job_id=job_id, target=target, heartbeat_interval_ms=1000)
        )
    err = caught.value
    assert err.type == TerminalReason.STORAGE_FULL and err.non_retryable  # no ~30 s of retries
    assert "storage_full" in NON_RETRYABLE_TYPES
    info = reason_info(TerminalReason.STORAGE_FULL)
    assert info.owner == Owner.CURAFLOW and "disk" in info.message_en and "retry later" not in info.message_en


async def test_a_full_disk_restoring_the_ledgers_copy_is_storage_full_at_once(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A deliver attempt on a worker that does not hold the files writes the ledger's copy
    # into a transfer folder of its own artifacts directory — the same disk, the same owner
    # as the fetch's. Until 2026-12-07 its ENOSPC went out of the activity as it came:
    # retried on every delivery attempt (the backoff's minutes), then internal_error ("read
    # the worker's log"), where the fetch says storage_full at once.
    async with opened_deps(make_stack, tmp_path, replay) as (stack, fetcher):
        other = stack.settings.model_copy(update={"artifacts_dir": tmp_path / "other-host"})
        deliverer = await open_deps(other, None, replay_url=replay.url)
        try:
            inp = await acquired(stack, fetcher, "demo")

            def no_space(*_: Any, **__: Any) -> Any:
                raise OSError(errno.ENOSPC, "No space left on device")

            monkeypatch.setattr(deliverer.store, "holds", lambda artifact: False)  # another host's disk
            monkeypatch.setattr(ledger_artifacts, "_write", no_space)
            with pytest.raises(ApplicationError) as caught:
                await run_as_job(DeliverActivity(deliverer).deliver, inp)
            err = caught.value
            assert err.type == TerminalReason.STORAGE_FULL and err.non_retryable, (err.type, err)
            assert "artifact store" in str(err)
            transfers = tmp_path / "other-host" / artifacts.TRANSFER_DIR
            assert not any(transfers.iterdir())  # the attempt's folder removed
        finally:
            await close_deps(deliverer)


async def test_a_page_larger_than_the_artifact_disk_takes_holds_the_work_back_and_binds_the_next(
    deps: tuple[Stack, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # EFBIG: a page over the file size this machine's artifacts disk or process takes (a
    # ulimit -f, a FUSE disk's per-file limit). Until 2026-12-07 it went out as it came:
    # every attempt downloaded the page again through the account's gate and failed alike,
    # the cell ended internal_error, and nothing was remembered — the target's next job
    # bound the same work first again, and failed on it again, for good. It is this
    # machine's limit, not the work's verdict: the work is held back briefly (not the
    # week) and the cell binds its next candidate.
    stack, opened = deps
    settings = stack.settings
    target = TargetSpec(target_id="demo", routes=settings.route_refs(settings.targets[0]))
    job_id = await ledger_job(opened.pool, target, label="efbig")
    first, second = (parse_work(w) for w in recorded_works()[:2])
    async with opened.pool.acquire() as conn, conn.transaction():
        await cells.bind_work(conn, job_id, target, [first, second], CandidateReport())
    write, finish = artifacts._PartFile.write, artifacts._PartFile.finish

    def too_large(part: Any) -> None:
        if part.dest.name.startswith(f"{first.work_id}_"):
            raise OSError(errno.EFBIG, "File too large")

    def write_limited(part: Any, *args: Any, **kwargs: Any) -> Any:
        too_large(part)
        return write(part, *args, **kwargs)

    def finish_limited(part: Any, *args: Any, **kwargs: Any) -> Any:
        too_large(part)
        return finish(part, *args, **kwargs)

    monkeypatch.setattr(artifacts._PartFile, "write", write_limited)
    monkeypatch.setattr(artifacts._PartFile, "finish", finish_limited)

    step = await run_as_job(
        FetchActivity(opened).fetch, FetchInput(job_id=job_id, target=target, heartbeat_interval_ms=1000)
    )
    assert step.cell.state == CellState.ARTIFACT_READY and step.cell.work_id == second.work_id, step.cell
    async with opened.pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT held, until - seen_at AS kept_ms, why FROM unavailable_works WHERE work_id = $1 AND job_id = $2",
            first.work_id,
            job_id,
        )
    assert row is not None and row["held"], row  # held back: no verdict on the work
    assert row["kept_ms"] <= settings.pixiv.unrecognised_hold_ms, row  # briefly, never the week
    assert "EFBIG" in row["why"], row

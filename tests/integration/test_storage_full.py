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

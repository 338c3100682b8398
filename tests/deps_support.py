"""A worker's activity dependencies opened on a test stack, for activities run in the test
process (``ActivityEnvironment``) against the real ledger, the replay source over real
HTTP and the artifact store on disk."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from activities.acquire import AcquireActivity
from activities.deps import ActivityDeps, close_deps, open_deps
from curaflow.domain.cells import CellState
from curaflow.domain.messages import AcquireInput, DeliverInput
from curaflow.jobs.admission import Admitter
from tests.conftest import StackFactory
from tests.fakes.replay import ReplayServer
from tests.support import Stack, run_as_job, short_id


@asynccontextmanager
async def opened_deps(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer, **pixiv: Any
) -> AsyncIterator[tuple[Stack, Any]]:
    """A stack (target ``demo`` searching the replay, one directory route under
    ``tmp_path``; ``pixiv`` fields over the replay's ``[pixiv]``) and a worker's
    dependencies opened on it, closed on exit."""
    out = f"out-{short_id()}"
    stack = make_stack(
        {
            "pixiv": {**replay.config(), **pixiv},
            "routes": {out: {"kind": "directory", "path": str(tmp_path / "delivered")}},
            "targets": [{"id": "demo", "query": {"tags": ["x"]}, "routes": [out]}],
        }
    )
    opened = await open_deps(stack.settings, None, replay_url=replay.url)
    try:
        yield stack, opened
    finally:
        await close_deps(opened)


@pytest.fixture
async def deps(make_stack: StackFactory, tmp_path: Path, replay: ReplayServer) -> AsyncIterator[tuple[Stack, Any]]:
    """:func:`opened_deps` over the replay's own settings, as a fixture (import it into the module)."""
    async with opened_deps(make_stack, tmp_path, replay) as opened:
        yield opened


async def acquired(stack: Stack, deps: ActivityDeps, target_id: str) -> DeliverInput:
    """Admit a one-cell job of ``target_id`` (not started: no workflow) and run its acquire
    step with ``deps`` in this process, asserting the cell ``artifact_ready``: the input of
    its deliver step, on the target's first route (heartbeat interval 30 000 ms)."""
    admitted = await Admitter(stack.settings, deps.pool, None).admit(stack.task(target_id=target_id), start=False)
    assert admitted.job_input is not None
    job_id, target = admitted.job_id, admitted.job_input.targets[0]
    step = await run_as_job(
        AcquireActivity(deps).acquire, AcquireInput(job_id=job_id, target=target, heartbeat_interval_ms=30_000)
    )
    assert step.cell.state == CellState.ARTIFACT_READY
    return DeliverInput(job_id=job_id, target=target, route=target.routes[0], heartbeat_interval_ms=30_000)


def unrecognised_count(kind: str, account: str = "default") -> float:
    """This process's ``curaflow_source_unrecognised_answers_total`` of ``account`` and
    ``kind`` (0 before the first count)."""
    value = REGISTRY.get_sample_value("curaflow_source_unrecognised_answers_total", {"account": account, "kind": kind})
    return value or 0.0

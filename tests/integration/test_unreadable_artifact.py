"""A page of curaflow's own artifact that its disk will not open is delivered from the
ledger's copy, never blamed on the route.

A deliver attempt sends the files the artifact store holds when they are at their
recorded paths (``ArtifactStore.holds``), else the ledger's copy restored into a transfer
folder. Until 2026-12-07 "holds" was a ``stat`` of each file: a page that is there, of
its size, but that curaflow's disk will not open (``EACCES`` — an operator's ``chmod``, a
file another user's —, ``EPERM``, ``EISDIR`` …) was read by the route on every attempt
and failed alike (``delivery_failed``: nothing sent, retried), until the attempts ran out
and the cell ended ``delivery_abandoned`` — owner the route, "check the route's
receiver" — for curaflow's own disk, the ledger holding the whole copy all along.

The activities run in the test process (``ActivityEnvironment``) with a worker's real
dependencies (the PostgreSQL ledger, the replay source over real HTTP, the store on
disk); only the disk's answer to opening the cell's pages is replaced, as the kernel
answers it.
"""

from __future__ import annotations

import builtins
import errno
import io
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from activities.deliver import DeliverActivity
from curaflow.domain.cells import CellState
from tests.conftest import StackFactory
from tests.deps_support import acquired, opened_deps
from tests.fakes.replay import ReplayServer
from tests.support import Stack, run_as_job

pytestmark = pytest.mark.integration


@pytest.fixture
async def deps(make_stack: StackFactory, tmp_path: Path, replay: ReplayServer) -> AsyncIterator[tuple[Stack, Any]]:
    async with opened_deps(make_stack, tmp_path, replay) as opened:
        yield opened


def refuse_opening(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """Every open of a file in ``folder`` fails ``EACCES`` (its ``stat`` still answers)."""

    def refused(path: Any) -> bool:
        try:
            return Path(os.fsdecode(path)).parent == folder
        except TypeError:  # a descriptor
            return False

    real_os_open, real_open = os.open, builtins.open

    def os_open(path: Any, *args: Any, **kwargs: Any) -> int:
        if refused(path):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_os_open(path, *args, **kwargs)

    def opening(path: Any, *args: Any, **kwargs: Any) -> Any:
        if refused(path):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(builtins, "open", opening)
    monkeypatch.setattr(io, "open", opening)


async def test_a_page_the_disk_will_not_open_is_delivered_from_the_ledgers_copy(
    deps: tuple[Stack, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    stack, opened = deps
    inp = await acquired(stack, opened, "demo")
    folder = opened.store.folder(inp.job_id, inp.target.target_id)
    assert any(folder.iterdir())
    refuse_opening(monkeypatch, folder)

    with capture_logs() as logs:
        delivered = await run_as_job(DeliverActivity(opened).deliver, inp)

    assert delivered.cell.state == CellState.SUBMITTED, delivered.cell
    assert [e for e in logs if e["event"] == "artifact.restored_from_ledger"], [e["event"] for e in logs]
    written = stack.settings.routes[inp.route.name]
    manifests = list(Path(written.path).glob("*/manifest.json"))  # type: ignore[attr-defined]
    assert len(manifests) == 1

"""Foreign input to a job whose ``foreign-input`` patch answers False (DESIGN.md "Foreign input").

``workflow.patched`` answers the same for a whole run once asked: a job started before
``foreign-input`` that *took* a forged terminal ``cell_progress`` snapshot then replays
that signal with the patch answering False — and keeps that answer after the upgrade.
Input that failed the workflow task before the patch (a signal with too few or too many
arguments, a step "completed" with junk) was never part of a completed task of any
history, so such a job must still drop it: failing the task would leave the job stuck
until its execution timeout. Here the patch is made to answer False for a new execution
(an unsandboxed worker, the SDK's function replaced for the test, as in
``test_versions.py``) and the forged snapshot is taken as before the patch.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import temporalio.workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from curaflow.domain.cells import CellState
from curaflow.domain.models import CellSnapshot
from tests.workflow.fakes import Act
from tests.workflow.harness import Env, workers
from workflows.job import FOREIGN_INPUT

pytestmark = pytest.mark.integration


@pytest.fixture
async def before_foreign_input(
    temporal_client: Client, temporal_address: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Env]:
    """An :class:`Env` whose executions answer False to ``foreign-input``, as one that
    replayed a forged snapshot taken before the patch does for the rest of its run."""
    real = temporalio.workflow.patched
    monkeypatch.setattr(temporalio.workflow, "patched", lambda patch_id: patch_id != FOREIGN_INPUT and real(patch_id))
    env = Env(temporal_client, temporal_address)
    async with workers(env, sandboxed=False):
        yield env


@pytest.mark.parametrize(
    ("name", "args", "status"),
    [("cell_progress", [], "succeeded"), ("cancel", ["1", "2"], "cancelled")],
    ids=["progress-none", "cancel-two"],
)
async def test_a_job_whose_patch_answered_false_still_drops_input_that_failed_the_task(
    before_foreign_input: Env, name: str, args: list[Any], status: str
) -> None:
    env = before_foreign_input
    env.fakes.on("search", "t", Act("held"))
    handle = await env.start(env.job())
    await env.status_until(handle, lambda s: s.stage == "searching", "searching")

    forged = CellSnapshot(target_id="t", state=CellState.SUBMITTED, stage="done", work_id="forged")
    await handle.signal("cell_progress", forged)  # taken, as before the patch
    await env.status_until(handle, lambda s: s.cells[0].state == "submitted", "the forged snapshot taken")

    await handle.signal(name, args=args)
    env.fakes.release("search")
    # A task that fails is retried for ever: the job would never end.
    await env.closed(handle, timeout_s=30)
    assert await env.events(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED) == []
    assert (await env.status(handle)).status == status

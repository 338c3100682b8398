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

import json
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


async def test_a_job_that_gets_no_foreign_input_records_no_marker(env: Env) -> None:
    # Guard: the acquire step's own cell_progress (a dict to the handler now) still moves
    # the live state, and nothing records foreign-input.
    env.fakes.on("fetch", "t", Act("held"))
    handle = await env.start(env.job())
    fetching = await env.status_until(handle, lambda s: s.stage == "fetching", "fetching")
    assert (fetching.cells[0].state, fetching.cells[0].work_id) == ("selected", "w-t")
    assert "stage *fetching*" in await env.details(handle)
    env.fakes.release("fetch")
    assert (await handle.result()).status == "succeeded"
    markers = [
        json.loads(e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)["id"]
        for e in (await handle.fetch_history()).events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
        and e.marker_recorded_event_attributes.marker_name == "core_patch"
    ]
    assert FOREIGN_INPUT not in markers and markers, markers

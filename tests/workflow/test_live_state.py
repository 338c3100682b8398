"""What a running ``JobWorkflow`` shows: the ``status`` query, the ``cell_progress`` signal,
the ``JobStatus`` / ``BusinessStatus`` search attributes and the UI's current details.

Each step is ``held`` by the fakes until the test releases it, so every stage is read while
it runs, never after a pause.
"""

from __future__ import annotations

import pytest
from temporalio.client import WorkflowExecutionStatus

from curaflow.domain.cells import CellState
from curaflow.domain.models import CellSnapshot
from tests.workflow.fakes import Act
from tests.workflow.harness import Env

pytestmark = pytest.mark.integration


async def test_status_search_attributes_and_details_follow_every_stage(env: Env) -> None:
    env.fakes.on("search", "t", Act("held")).on("fetch", "t", Act("held")).on("deliver", "t", Act("held"), route="a")
    handle = await env.start(env.job())

    searching = await env.status_until(handle, lambda s: s.stage == "searching", "searching")
    assert (searching.status, searching.cells[0].stage, searching.cells[0].work_id) == ("queued", "searching", None)
    assert (await env.search_attributes(handle))["JobStatus"] == "queued"
    assert "status **queued**, stage *searching*" in await env.details(handle)

    # acquire binds its work and signals cell_progress before it fetches: the live state
    # says fetching while the same activity still runs.
    env.fakes.release("search")
    fetching = await env.status_until(handle, lambda s: s.stage == "fetching", "fetching")
    assert (fetching.status, fetching.cells[0].state, fetching.cells[0].work_id) == ("running", "selected", "w-t")
    assert [c.step for c in env.fakes.calls] == ["search", "fetch"]  # one acquire attempt
    assert (await env.search_attributes(handle))["JobStatus"] == "running"
    details = await env.details(handle)
    assert "status **running**, stage *fetching*" in details and "- work: w-t scripted" in details

    env.fakes.release("fetch")
    delivering = await env.status_until(handle, lambda s: s.stage == "delivering", "delivering")
    assert delivering.cells[0].state == "artifact_ready"
    assert "stage *delivering*" in await env.details(handle)

    env.fakes.release("deliver", route="a")
    final = await handle.result()
    assert final.status == "succeeded" and await env.status(handle) == final
    attributes = await env.search_attributes(handle)
    assert (attributes["JobStatus"], attributes["BusinessStatus"]) == ("succeeded", "success")
    assert attributes["TargetIds"] == ["t"] and attributes["JobType"] == "candidate_search"
    details = await env.details(handle)
    assert "status **succeeded**" in details and "business status: **success**" in details
    assert "delivered: `w-t` → t" in details and "- deliveries: a: delivered" in details


async def test_the_status_query_shows_each_cell_of_a_multi_cell_job(env: Env) -> None:
    targets = {"one": ["a"], "two": ["a", "b"]}
    env.fakes.on("search", "one", Act("held")).on("deliver", "two", Act("held"), route="b")
    handle = await env.start(env.job(targets))

    state = await env.status_until(
        handle,
        lambda s: s.deliveries != [] and s.cells[0].stage == "searching",
        "cell one searching while cell two delivered to a",
    )
    assert [(c.target_id, c.stage) for c in state.cells] == [("one", "searching"), ("two", "delivering")]
    assert [(d.target_id, d.route, d.status) for d in state.deliveries] == [("two", "a", "delivered")]
    assert state.status == "running"
    details = await env.details(handle)
    assert "**one**: pending" in details and "**two**: delivery_pending" in details

    env.fakes.release("search", "one")
    env.fakes.release("deliver", "two", route="b")
    final = await handle.result()
    assert [(c.target_id, c.state) for c in final.cells] == [("one", "submitted"), ("two", "submitted")]
    assert sorted((d.target_id, d.route) for d in final.deliveries) == [("one", "a"), ("two", "a"), ("two", "b")]


async def test_a_progress_signal_never_moves_a_cell_back_nor_names_an_unknown_one(env: Env) -> None:
    env.fakes.on("deliver", "t", Act("held"), route="a")
    handle = await env.start(env.job())
    await env.status_until(handle, lambda s: s.stage == "delivering", "delivering")

    stale = CellSnapshot(target_id="t", state=CellState.SELECTED, stage="fetching", work_id="another")
    await handle.signal("cell_progress", stale)
    await handle.signal("cell_progress", CellSnapshot(target_id="nobody", state=CellState.SELECTED, work_id="x"))

    state = await env.status(handle)  # a query is answered after the signals before it
    assert [(c.target_id, c.state, c.stage, c.work_id) for c in state.cells] == [
        ("t", "artifact_ready", "delivering", "w-t")
    ]
    env.fakes.release("deliver", route="a")
    assert (await handle.result()).status == "succeeded"


async def test_a_progress_signal_after_a_cancel_changes_nothing(env: Env) -> None:
    env.fakes.on("search", "t", Act("hang"))
    env.fakes.cancel_acts = [Act("held")]  # the cancel is being recorded in the ledger
    handle = await env.start(env.job())
    await env.called("search")

    await handle.signal("cancel", {"reason": "enough"})
    cancelling = await env.status_until(handle, lambda s: s.stage == "cancelling", "cancelling")
    assert cancelling.cancel_requested and cancelling.status == "queued"
    assert "cancel requested" in await env.details(handle)
    await handle.signal("cell_progress", CellSnapshot(target_id="t", state=CellState.SELECTED, work_id="late"))

    assert (await env.status(handle)).cells[0].work_id is None
    env.fakes.release("request_cancel")
    assert await env.closed(handle) == WorkflowExecutionStatus.CANCELED
    final = await env.status(handle)
    assert (final.status, final.cells[0].work_id, final.cells[0].reason) == ("cancelled", None, "cancelled_by_consumer")
    attributes = await env.search_attributes(handle)
    assert (attributes["JobStatus"], attributes["BusinessStatus"]) == ("cancelled", "cancelled")

"""A step's result: foreign results end the step, a bug in reading ours fails the task.

``JobWorkflow`` reads each step's result itself (``workflows.steps.step_result``). A
result no worker of curaflow returns — a step completed from outside curaflow with a
value that is no ``CellUpdate``, in any encoding a client may send — counts as a step
ended by hand (DESIGN.md "Foreign input"). Anything else raised while reading a result is
a bug of curaflow: it fails the workflow *task* (retried until a fixed worker replays),
never the job (docs/temporal.md "Only expected failures become outcomes").
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import temporalio.workflow
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus

from curaflow.domain.messages import CellUpdate
from tests.support import eventually
from tests.workflow.fakes import Act
from tests.workflow.harness import Env, pending_step_id, serving

pytestmark = pytest.mark.integration


async def fails_its_task_and_stays_open(env: Env, handle: Any) -> None:
    """The job's workflow task failed (a bug is no outcome) and its execution waits, open,
    for a fixed worker: nothing finished it."""

    async def task_failed() -> bool:
        return bool(await env.events(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED))

    await eventually(task_failed, timeout_s=20, interval_s=0.1, what="a failed workflow task")
    assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
    assert env.fakes.finishes == []


@pytest.mark.parametrize("result", [None, b"junk"], ids=["binary-null", "binary-plain"])
async def test_a_step_completed_from_outside_in_another_encoding_ends_the_job(env: Env, result: Any) -> None:
    # Another SDK (or this one's async activity handle) completing a step with None or
    # bytes sends a binary/null or binary/plain payload: the SDK's converter decodes it
    # without error into None / bytes, whatever type is asked, and reading the result
    # then raised AttributeError — a failed workflow task on every replay, the job stuck
    # until its execution timeout. It is a step ended by hand, as a JSON result that is
    # no CellUpdate is.
    env.fakes.on("search", "t", Act("held"))
    handle = await env.start(env.job())
    await env.called("search")
    step = await pending_step_id(handle, "search")
    await env.client.get_async_activity_handle(workflow_id=handle.id, run_id=None, activity_id=step).complete(result)
    assert await env.closed(handle, timeout_s=30) == WorkflowExecutionStatus.FAILED
    assert await env.events(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED) == []
    cell = (await env.status(handle)).cells[0]
    assert (cell.state, cell.reason) == ("failed", "step_ended_by_hand"), cell


class BrokenReader:
    """A payload converter that decodes like the worker's, except that reading a
    ``CellUpdate`` hits a bug of curaflow (a ``TypeError``)."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def from_payload(self, payload: Payload, type_hint: Any = None) -> Any:
        if type_hint is CellUpdate:
            raise TypeError("a bug while reading the step's result")
        return self._real.from_payload(payload, type_hint)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


@pytest.fixture
async def broken_reader(
    temporal_client: Client, temporal_address: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Env]:
    """An :class:`Env` whose workflow worker (unsandboxed, so the SDK's function can be
    replaced for the test) hits a bug when it reads a step's result."""
    real = temporalio.workflow.payload_converter
    monkeypatch.setattr(temporalio.workflow, "payload_converter", lambda: BrokenReader(real()))
    async with serving(temporal_client, temporal_address, sandboxed=False) as env:
        yield env


async def test_a_bug_reading_a_steps_result_fails_the_workflow_task_not_the_job(broken_reader: Env) -> None:
    # A bug is no outcome: reading the step's result caught every exception and ended the
    # cell step_ended_by_hand (an operator's, in the job's report) and the job failed.
    # Now the workflow task fails and the job waits, open, for a fixed worker.
    env = broken_reader
    handle = await env.start(env.job())
    await fails_its_task_and_stays_open(env, handle)


@pytest.fixture
async def broken_pusher(
    temporal_client: Client, temporal_address: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Env]:
    """An :class:`Env` whose workflow worker (unsandboxed) hits a bug when it schedules a
    callback push (``workflows.event_push.push_options`` raises)."""
    import workflows.event_push

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise TypeError("a bug while scheduling a push")

    monkeypatch.setattr(workflows.event_push, "push_options", broken)
    async with serving(temporal_client, temporal_address, sandboxed=False) as env:
        yield env


async def test_a_bug_in_the_callback_pusher_fails_the_workflow_task_not_unseen(broken_pusher: Env) -> None:
    # The pusher runs in a task of its own: a bug there ended that task, the next request
    # started another one, and the job's end took a dead task for "every push settled" —
    # the job completed, its pushes left to the sweeper for ever, the bug seen nowhere.
    env = broken_pusher
    handle = await env.start(env.job(callback=True))
    await fails_its_task_and_stays_open(env, handle)


@pytest.fixture
async def broken_details(
    temporal_client: Client, temporal_address: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Env]:
    """An :class:`Env` whose workflow worker (unsandboxed) hits a bug when it renders the
    job's current details (``workflows.job.render_details`` raises)."""
    import workflows.job

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise TypeError("a bug while rendering the details")

    monkeypatch.setattr(workflows.job, "render_details", broken)
    async with serving(temporal_client, temporal_address, sandboxed=False) as env:
        yield env


async def test_a_bug_rendering_the_details_fails_the_workflow_task_not_unseen(broken_details: Env) -> None:
    # The details render in a task of their own (once per activation): a bug there ended
    # that task unseen — the details stayed as they were for the rest of the job, which
    # ran on as if nothing happened. Rendered inline before, the bug failed the task.
    env = broken_details
    handle = await env.start(env.job())
    await fails_its_task_and_stays_open(env, handle)

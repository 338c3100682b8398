"""A job of many targets runs: the work of one workflow activation grows linearly with
the job's cells, so its first workflow task (which starts every cell) stays far under the
SDK's deadlock detector (2 s a task).

The real workflow, sandboxed as in production, on the session's dev server with the fakes
of :mod:`tests.workflow.fakes`.
"""

from __future__ import annotations

import pytest
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.client import WorkflowExecutionStatus

from curaflow.domain.execution import MAX_JOB_TARGETS
from tests.workflow.harness import Env

pytestmark = pytest.mark.integration


#: Twice the most targets a schedule's job may have (:data:`MAX_JOB_TARGETS`): the margin.
MANY = 2 * MAX_JOB_TARGETS


@pytest.mark.slow
async def test_a_job_of_many_targets_runs_without_its_workflow_task_failing(env: Env) -> None:
    """A job of :data:`MANY` (1 000) targets runs to its end and no workflow task fails on
    the worker. Before, each cell's first step re-rendered the job's status and UI details
    over every cell — quadratic in the first activation, which starts every cell: it passed
    the SDK's 2 s deadlock detector (1 000 targets: ~4 s) and failed the task for ever. The
    server's own failures of a task (``FORCE_CLOSE_COMMAND`` by the history service: more
    activity results buffered while a task ran than it holds) are retried and allowed."""
    targets = {f"t{n:04d}": ["a"] for n in range(MANY)}
    # Steps may wait their turn on the fake workers: a queued budget that outlasts the queue.
    budgets = env.job().budgets.model_copy(update={"queued_timeout_ms": 120_000, "stall_timeout_ms": 120_000})
    handle = await env.start(env.job(targets, deadline_ms=300_000, budgets=budgets))

    assert await env.closed(handle, timeout_s=240) == WorkflowExecutionStatus.COMPLETED
    history = await handle.fetch_history()
    failed = [
        (e.event_id, e.workflow_task_failed_event_attributes)
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]
    by_worker = [
        (event_id, attributes.failure.message)
        for event_id, attributes in failed
        if attributes.cause != WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND
    ]
    assert by_worker == []
    final = await env.status(handle)
    assert (final.status, len(final.cells)) == ("succeeded", MANY)
    assert {c.state for c in final.cells} == {"submitted"}

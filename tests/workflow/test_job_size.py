"""A job of many targets runs: the work of one workflow activation grows linearly with
the job's cells, so its first workflow task (which starts every cell) stays far under the
SDK's deadlock detector (2 s a task).

Two tests: the rule itself, load-independent — the UI's details, a walk of every cell, are
rendered at most once per activation whatever the job's size; and the largest job a
schedule may have (:data:`MAX_JOB_TARGETS`) run to its end on the session's dev server,
sandboxed as in production, with the fakes of :mod:`tests.workflow.fakes`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
import temporalio.workflow
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.client import Client, WorkflowExecutionStatus

import workflows.job
from curaflow.domain.execution import MAX_JOB_TARGETS
from curaflow.domain.messages import JobState
from tests.workflow.harness import Env, serving

pytestmark = pytest.mark.integration

#: Targets of the rule's job: enough that a walk of every cell per cell would show.
SOME = 40


@pytest.fixture
async def counted_renders(
    temporal_client: Client, temporal_address: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Env, Counter[int]]]:
    """An :class:`Env` on unsandboxed workers whose ``render_details`` counts its calls by
    the history length of the activation that made them."""
    renders: Counter[int] = Counter()
    real = workflows.job.render_details

    def counting(*args: Any) -> str:
        renders[temporalio.workflow.info().get_current_history_length()] += 1
        return real(*args)

    monkeypatch.setattr(workflows.job, "render_details", counting)
    async with serving(temporal_client, temporal_address, sandboxed=False) as env:
        yield env, renders


async def test_one_activation_renders_the_details_at_most_once_whatever_the_jobs_size(
    counted_renders: tuple[Env, Counter[int]],
) -> None:
    """The details are rendered once the activation's ready work has run. Before, each
    cell's first step re-rendered them (and re-read every cell for ``JobStatus``): the first
    activation, which starts every cell, rendered them once per cell — quadratic in the
    job's size, and a job of 1 000 targets passed the deadlock detector (~4 s) and failed
    its first task for ever (failed first on that tree: 41 renders in the first activation
    of a 40-target job)."""
    env, renders = counted_renders
    handle = await env.start(env.job({f"t{n:02d}": ["a"] for n in range(SOME)}))
    assert await env.closed(handle, timeout_s=60) == WorkflowExecutionStatus.COMPLETED
    assert renders, "the details were never rendered"
    first = min(renders)  # the activation that started every cell
    assert renders[first] == 1, sorted(renders.items())
    # At most twice in any activation: its cells' state, and the job's end when the same
    # activation ended it — never once per cell.
    assert max(renders.values()) <= 2, sorted(renders.items())


@pytest.mark.slow
async def test_the_largest_job_runs_to_its_end(env: Env) -> None:
    """A job of :data:`MAX_JOB_TARGETS` (500) targets runs to its end, every cell
    submitted, and no workflow task fails but for time: the server's own failures of a
    task (``FORCE_CLOSE_COMMAND`` by the history service: more activity results buffered
    while a task ran than it holds) and the SDK's deadlock detector on a machine so busy
    that one activation's ~0.2 s took 2 s (a wall-clock guard, not the job's work: the
    work per activation is the test above) are retried and allowed."""
    targets = {f"t{n:04d}": ["a"] for n in range(MAX_JOB_TARGETS)}
    # Steps may wait their turn on the fake workers: a queued budget that outlasts the queue.
    budgets = env.job().budgets.model_copy(update={"queued_timeout_ms": 120_000, "stall_timeout_ms": 120_000})
    handle = await env.start(env.job(targets, deadline_ms=300_000, budgets=budgets))

    assert await env.closed(handle, timeout_s=240) == WorkflowExecutionStatus.COMPLETED
    history = await handle.fetch_history()
    by_worker = [
        (e.event_id, e.workflow_task_failed_event_attributes.failure.message)
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
        and e.workflow_task_failed_event_attributes.cause
        != WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND
        and "Potential deadlock detected" not in e.workflow_task_failed_event_attributes.failure.message
    ]
    assert by_worker == []
    # The job's end as the run returned it: a query of the closed run replays its whole
    # history in one activation, which the SDK's 2 s deadlock guard failed on a busy machine
    # (the CI of 2026-12-07, twice) — the guard's time, not the job's.
    final = JobState.model_validate(await handle.result())
    assert (final.status, len(final.cells)) == ("succeeded", MAX_JOB_TARGETS)
    assert {c.state for c in final.cells} == {"submitted"}

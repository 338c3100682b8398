"""Cancelling a schedule's occurrence (its trampoline) never cancels the job it started.

The trampoline (``ScheduledJobWorkflow``) starts the occurrence's job as its child with
parent close policy ``ABANDON`` — "cancelling or terminating the trampoline never touches
the job" (docs/operations.md) — and waits for it. A terminate closes the trampoline
without its code, and the policy leaves the job. A cancel (the UI's "Request
Cancellation" on the occurrence, an overlap policy an operator set to ``CANCEL_OTHER``)
reaches the trampoline's code while it awaits the child, and the SDK forwards a cancel
to a child being awaited (its cancellation type, ``WAIT_CANCELLATION_COMPLETED`` by
default): the job was cancelled — its cells ``cancelled_by_consumer`` — and the
trampoline completed reporting a cancelled job. Since ``occurrence-abandons-its-job``
(:data:`workflows.scheduled.ABANDON_JOB_ON_CANCEL`) the child is started with
cancellation type ``ABANDON``: the trampoline ends *Canceled* and the job runs on. The
old branch runs live in ``tests/workflow/test_versions.py``; both histories replay.
"""

from __future__ import annotations

import pytest
from temporalio.client import WorkflowExecutionStatus

from curaflow.domain.occurrence import OccurrenceInput
from tests.support import eventually, short_id
from tests.workflow.fakes import Act
from tests.workflow.harness import Env
from tests.workflow.test_push_bound import record
from tests.workflow.test_start_metadata import callers
from workflows.scheduled import ScheduledJobWorkflow

pytestmark = pytest.mark.integration


async def cancel_mid_job(env: Env, *, sandboxed: bool = True) -> tuple[str, str]:
    """Start an occurrence whose job's search is held, cancel the trampoline while the job
    runs, then release the search; returns ``(trampoline id, job id)`` once both closed."""
    job = env.job(job_id=f"plan@{short_id()}", schedule_id="plan", trigger="schedule")
    env.fakes.jobs[job.job_id] = job
    env.fakes.on("search", "t", Act("held"))
    async with callers(env, job, sandboxed=sandboxed) as queue:
        trampoline = await env.client.start_workflow(
            ScheduledJobWorkflow.run,
            OccurrenceInput(schedule_id="plan", cron=["0 3 * * *"], task_queue=env.queue),
            id=f"occ-{short_id()}",
            task_queue=queue,
        )
        await env.called("search")
        await trampoline.cancel()
        await eventually(
            lambda: _closed(env, trampoline.id), timeout_s=20, interval_s=0.05, what="the trampoline closed"
        )
        env.fakes.release("search")
        await env.closed(env.client.get_workflow_handle(job.job_id), timeout_s=30)
    return trampoline.id, job.job_id


async def _closed(env: Env, workflow_id: str) -> bool:
    described = await env.client.get_workflow_handle(workflow_id).describe()
    return described.status != WorkflowExecutionStatus.RUNNING


async def test_cancelling_an_occurrence_leaves_its_job_running(env: Env) -> None:
    trampoline_id, job_id = await cancel_mid_job(env)
    record(env, trampoline_id, "scheduled_occurrence_cancelled")

    trampoline = await env.client.get_workflow_handle(trampoline_id).describe()
    job = await env.client.get_workflow_handle(job_id).describe()
    assert (trampoline.status, job.status) == (WorkflowExecutionStatus.CANCELED, WorkflowExecutionStatus.COMPLETED)
    assert (await env.client.get_workflow_handle(job_id).result())["status"] == "succeeded"
    assert "request_cancel" not in env.fakes.steps()

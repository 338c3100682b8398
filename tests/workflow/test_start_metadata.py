"""What a workflow puts in the static summary and details of the job it starts (the Temporal
UI renders them as markdown): the text it holds shows as text.

Two workflows start jobs as children: a schedule's trampoline (its job's targets and tags,
from the configuration) and a user's workflow through ``workflows.callers.run_job`` (the
consumer's Task: key, tags, correlation id). Their summary and details are the child start's
command, so the change is behind ``workflow.patched("escaped-start-metadata")``
(:data:`workflows.presentation_frozen.ESCAPED_METADATA`); the old branch is tested live in
``tests/workflow/test_versions.py`` and its recorded histories replay.

A start whose text holds nothing markdown reads shows the same text as before and asks
no patch: its history gains no marker (:func:`test_a_plain_scheduled_job_records_no_marker`).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio import activity
from temporalio.client import WorkflowExecutionStatus
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from curaflow.domain.messages import JobInput, TargetQuery
from curaflow.domain.occurrence import AdmitOccurrenceInput, OccurrenceAdmission, OccurrenceInput
from curaflow.process.worker import sandbox_runner
from curaflow.protocol.task import manual_job_id
from examples.child_job import OneNewWork, OneNewWorkInput
from tests.markdown_support import HOSTILE, as_one_line, shown
from tests.support import short_id
from tests.workflow.harness import Env
from tests.workflow.test_push_bound import patches, record
from workflows.presentation_frozen import ESCAPED_METADATA
from workflows.scheduled import ScheduledJobWorkflow

pytestmark = pytest.mark.integration

#: What the summary and details may render: curaflow's own markup, nothing of the text's.
OWN_MARKUP = frozenset({"p", "strong", "code", "ul", "li"})
#: A Task key holding markup (the job id holds it lowercased).
HOSTILE_KEY = "k-[click](http://evil.test/x) ![i](http://127.0.0.1:1/k.png) <b>b</b> `tick"


@contextlib.asynccontextmanager
async def callers(env: Env, job: JobInput | None = None, *, sandboxed: bool = True) -> AsyncIterator[str]:
    """A worker of the schedule's trampoline (its ``admit_occurrence`` admits ``job``) and of
    ``OneNewWork`` (examples/child_job.py), on a queue of its own (yielded); their jobs run
    on ``env``'s workers."""

    @activity.defn(name="admit_occurrence")
    async def admit_occurrence(_: AdmitOccurrenceInput) -> OccurrenceAdmission:
        assert job is not None
        return OccurrenceAdmission(job_id=job.job_id, created=True, job_input=job)

    queue = f"{env.queue}-callers"
    async with Worker(
        env.client,
        task_queue=queue,
        workflows=[ScheduledJobWorkflow, OneNewWork],
        activities=[admit_occurrence],
        workflow_runner=sandbox_runner() if sandboxed else UnsandboxedWorkflowRunner(),
    ):
        yield queue


def hostile_job(env: Env) -> JobInput:
    """A scheduled job of target ``t`` whose tags hold markup (an operator's tags may hold
    any character: Pixiv's tags hold brackets, asterisks, underscores)."""
    inp = env.job(job_id=f"plan@{uuid.uuid4().hex[:8]}", schedule_id="plan", trigger="schedule")
    target = inp.targets[0].model_copy(update={"query": TargetQuery(tags=list(HOSTILE))})
    env.fakes.jobs[inp.job_id] = inp.model_copy(update={"targets": [target]})
    return env.fakes.jobs[inp.job_id]


async def run_trampoline(env: Env, queue: str) -> str:
    """Run one occurrence of plan ``plan`` to its end; returns its workflow id."""
    trampoline = await env.client.start_workflow(
        ScheduledJobWorkflow.run,
        OccurrenceInput(schedule_id="plan", cron=["0 3 * * *"], task_queue=env.queue),
        id=f"occ-{short_id()}",
        task_queue=queue,
    )
    assert await env.closed(trampoline, timeout_s=30) == WorkflowExecutionStatus.COMPLETED
    return trampoline.id


def hostile_task(env: Env) -> dict[str, Any]:
    """A Task whose key, tags and correlation id hold markup; its admission creates a job of
    ``env`` under the Task's job id."""
    key = f"{HOSTILE_KEY} {short_id()}"
    env.fakes.admit_as(env.job(job_id=manual_job_id("t", key), trigger="temporal"))
    return {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": key,
        "correlation_id": "![c](http://127.0.0.1:1/c.png) `x`",
        "params": {"target_id": "t", "query": {"tags": list(HOSTILE)}},
    }


async def run_one_new_work(env: Env, queue: str, body: dict[str, Any]) -> str:
    """Run ``OneNewWork`` for ``body`` to its end (``run_job``: the job as its child);
    returns its workflow id."""
    parent = await env.client.start_workflow(
        "OneNewWork", OneNewWorkInput(task=body, curaflow_queue=env.queue), id=f"parent-{short_id()}", task_queue=queue
    )
    assert await env.closed(parent, timeout_s=30) == WorkflowExecutionStatus.COMPLETED
    return parent.id


async def metadata(env: Env, workflow_id: str) -> tuple[str, str]:
    """The execution's static summary and details."""
    described = await env.client.get_workflow_handle(workflow_id).describe()
    return await described.static_summary() or "", await described.static_details() or ""


async def test_a_scheduled_jobs_summary_and_details_show_its_tags_as_text(env: Env) -> None:
    job = hostile_job(env)
    async with callers(env, job) as queue:
        trampoline = await run_trampoline(env, queue)
    summary, details = await metadata(env, job.job_id)
    record(env, trampoline, "scheduled_occurrence_escaped_metadata")

    assert ESCAPED_METADATA in await patches(env.client.get_workflow_handle(trampoline))

    for text in (summary, details):
        assert shown(text).tags <= OWN_MARKUP, text  # no link, image, heading or HTML of a tag's
    assert all(as_one_line(tag) in shown(summary).text for tag in HOSTILE), summary
    assert "plan" in shown(details).codes and "t" in shown(details).codes


async def test_run_jobs_child_shows_the_tasks_text_as_text(env: Env) -> None:
    body = hostile_task(env)
    async with callers(env) as queue:
        parent = await run_one_new_work(env, queue, body)
    job_id = manual_job_id("t", body["idempotency_key"])
    summary, details = await metadata(env, job_id)
    record(env, parent, "one_new_work_escaped_metadata")

    assert ESCAPED_METADATA in await patches(env.client.get_workflow_handle(parent))

    for text in (summary, details):
        assert shown(text).tags <= OWN_MARKUP, text
    assert all(as_one_line(tag) in shown(summary).text for tag in HOSTILE), summary
    # the job id, the key and the correlation id each one code span, exactly as given
    assert {job_id, body["idempotency_key"], body["correlation_id"]} <= set(shown(details).codes), details


async def test_a_plain_scheduled_job_records_no_marker(env: Env) -> None:
    """Tags and ids holding no markdown show as they did: no ``escaped-start-metadata``
    marker in the trampoline's history."""
    job = env.job(job_id=f"plan@{uuid.uuid4().hex[:8]}", schedule_id="plan", trigger="schedule")
    env.fakes.jobs[job.job_id] = job
    async with callers(env, job) as queue:
        trampoline = await run_trampoline(env, queue)
    summary, _ = await metadata(env, job.job_id)

    assert summary == "candidate_search (schedule plan) — t: (no tags)"
    assert ESCAPED_METADATA not in await patches(env.client.get_workflow_handle(trampoline))

"""A job's activities run only for the job's own execution: a foreign caller gets nothing done.

Every activity that takes a job's input is registered on curaflow's task queues under a
plain name, so anything that may schedule an activity in the namespace can name it: a
workflow of another type, a ``JobWorkflow`` started under another id, a standalone
activity (``temporal activity start``, no workflow at all). Here each of them calls the
job's steps by name — ``acquire``, ``deliver``, ``finish`` (and ``search``, ``request_cancel``,
``admit``, ``push_events``) — with the input of another job, on a real worker process
(the dev server, PostgreSQL, the Pixiv replay, a directory route). The other job was
admitted and no run of its own works on it, so every row it has in the ledger is what a
foreign step would change: none may change (no binding, no download, no send, no event,
no end), nothing is delivered, and every step fails at once, non-retryably, with
``foreign_caller`` naming the job and the caller (``activities.caller``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import asyncpg
import pytest
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, RetryState
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from activities.caller import FOREIGN_CALLER
from curaflow.domain.messages import (
    AcquireInput,
    CancelRequest,
    DeliverInput,
    FinishInput,
    JobInput,
    PushInput,
    SubmitInput,
)
from curaflow.jobs.admission import Admitter
from curaflow.jobs.submit import job_id_for
from curaflow.ledger.jobs import mark_workflow_started
from tests.support import DemoStack, demo_stack, short_id

pytestmark = pytest.mark.integration

#: Attempts the foreign caller allows each step: a refusal must not need them.
ATTEMPTS = 3


def task(key: str) -> dict[str, Any]:
    return {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": key,
        "params": {"target_id": "demo"},
    }


def refusal(err: BaseException) -> dict[str, Any]:
    """What a foreign caller learns of a step that failed: its type, message, retry state."""
    cause: BaseException | None = err
    retry_state = None
    while cause is not None and not isinstance(cause, ApplicationError):
        retry_state = getattr(cause, "retry_state", retry_state)
        cause = cause.__cause__ or getattr(cause, "cause", None)
    if cause is None:
        return {"type": type(err).__name__, "message": str(err), "retry_state": None}
    state = retry_state.name if isinstance(retry_state, RetryState) else retry_state
    return {"type": cause.type, "message": cause.message, "non_retryable": cause.non_retryable, "retry_state": state}


async def run_steps(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Schedule each step by name on its queue (``ATTEMPTS`` attempts); what each answered."""
    answers: list[dict[str, Any]] = []
    for step in steps:
        try:
            await workflow.execute_activity(
                step["name"],
                step["input"],
                task_queue=step["queue"],
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=ATTEMPTS),
            )
            answers.append({"name": step["name"], "completed": True})
        except ActivityError as err:
            answers.append({"name": step["name"], **refusal(err)})
        except asyncio.CancelledError:  # a ``request_cancel`` that was obeyed cancels its caller
            answers.append({"name": step["name"], "cancelled": True})
            break
    return answers


@workflow.defn(name="RogueSteps")
class RogueSteps:
    """A workflow of another type that runs the named steps of any job it is given."""

    @workflow.run
    async def run(self, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return await run_steps(steps)


@workflow.defn(name="JobWorkflow")
class RogueJobWorkflow:
    """A workflow that calls itself ``JobWorkflow`` (on its own queue) under an id that is no job's."""

    @workflow.run
    async def run(self, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return await run_steps(steps)


Env = tuple[DemoStack, str]


@pytest.fixture(scope="module")
async def env(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str, ledger_pool: Any
) -> AsyncIterator[Env]:
    rogue_queue = f"rogue-{short_id()}"
    async with (
        demo_stack(tmp_path_factory.mktemp("foreign"), temporal_address, database_url) as demo,
        Worker(
            demo.client,
            task_queue=rogue_queue,
            workflows=[RogueSteps, RogueJobWorkflow],
            workflow_runner=UnsandboxedWorkflowRunner(),
        ),
    ):
        yield demo, rogue_queue


async def ledger_rows(pool: asyncpg.Pool, job_id: str) -> dict[str, list[str]]:
    """Every row of every ledger table that holds ``job_id`` (as sorted JSON)."""
    tables = await pool.fetch(
        """SELECT table_name FROM information_schema.columns
           WHERE column_name = 'job_id' AND table_schema = current_schema() ORDER BY table_name"""
    )
    rows: dict[str, list[str]] = {}
    for (table,) in tables:
        found = await pool.fetch(f'SELECT to_jsonb(t)::text FROM "{table}" t WHERE job_id = $1', job_id)
        rows[table] = sorted(row[0] for row in found)
    return rows


async def victim(demo: DemoStack, pool: asyncpg.Pool) -> JobInput:
    """A job admitted in the ledger with no run of its own (marked started, so the
    reconciler starts none): only a foreign step could change its rows."""
    admitted = await Admitter(demo.stack.settings, pool, None).admit(task(f"victim-{short_id()}"), start=False)
    assert admitted.job_input is not None
    async with pool.acquire() as conn:
        await mark_workflow_started(conn, admitted.job_id)
    return admitted.job_input


def steps_of(demo: DemoStack, job: JobInput) -> list[dict[str, Any]]:
    """The job's steps as its own run would schedule them (input, queue), in order."""
    main = demo.stack.task_queue
    target = job.targets[0]
    source = job.source_task_queues.get(target.account) or f"{main}-source-{target.account}"
    route = target.routes[0]
    other = task(f"other-{short_id()}")

    def dumped(model: Any) -> dict[str, Any]:
        return json.loads(model.model_dump_json())

    return [
        {
            "name": "acquire",
            "queue": source,
            "input": dumped(AcquireInput(job_id=job.job_id, target=target, heartbeat_interval_ms=30_000)),
        },
        {"name": "search", "queue": source, "input": dumped(AcquireInput(job_id=job.job_id, target=target))},
        {
            "name": "deliver",
            "queue": route.task_queue or main,
            "input": dumped(DeliverInput(job_id=job.job_id, target=target, route=route, heartbeat_interval_ms=30_000)),
        },
        {"name": "push_events", "queue": main, "input": dumped(PushInput(job_id=job.job_id))},
        # A Task admitted under an id the caller names, not its own.
        {"name": "admit", "queue": main, "input": dumped(SubmitInput(task=other, workflow_id=job_id_for(other)))},
        {"name": "finish", "queue": main, "input": dumped(FinishInput(job_id=job.job_id))},
        # ``request_cancel`` takes the job from the calling execution's id.
        {"name": "request_cancel", "queue": main, "input": dumped(CancelRequest())},
    ]


def assert_refused(answers: list[dict[str, Any]], steps: list[dict[str, Any]], job_id: str, caller: str) -> None:
    assert [answer["name"] for answer in answers] == [step["name"] for step in steps], answers
    for answer in answers:
        assert answer.get("type") == FOREIGN_CALLER, answer
        assert answer["non_retryable"] is True, answer
        assert answer["retry_state"] == RetryState.NON_RETRYABLE_FAILURE.name, answer
        assert caller in answer["message"], answer
        if answer["name"] not in ("admit", "request_cancel"):
            assert job_id in answer["message"], answer


async def what_changed(pool: asyncpg.Pool, job_id: str) -> dict[str, Any]:
    """The job as a foreign caller left it: its end, its cell, its intents and events."""

    async def rows(table: str, *keys: str) -> list[dict[str, Any]]:
        found = await pool.fetch(f'SELECT to_jsonb(t)::text FROM "{table}" t WHERE job_id = $1', job_id)
        return [{k: v for k, v in json.loads(r[0]).items() if k in keys} for r in found]

    return {
        "job": await rows("jobs", "state", "status", "business_status", "completed_at"),
        "cells": await rows("cells", "state", "terminal_reason_code", "work_id"),
        "intents": await rows("delivery_intents", "route", "status"),
        "events": [e["type"] for e in await rows("job_events", "type")],
    }


async def assert_untouched(
    demo: DemoStack,
    pool: asyncpg.Pool,
    job: JobInput,
    before: dict[str, list[str]],
    admit_input: dict[str, Any],
    answers: list[dict[str, Any]],
) -> None:
    after = await ledger_rows(pool, job.job_id)
    if after != before:
        changed = sorted(table for table in after if after[table] != before.get(table))
        summary = {
            "answers": answers,
            "tables changed": changed,
            "job afterwards": await what_changed(pool, job.job_id),
        }
        pytest.fail(f"a foreign caller changed the job's rows: {json.dumps(summary, ensure_ascii=False)}")
    other_id = admit_input["workflow_id"]
    assert await pool.fetchval("SELECT count(*) FROM jobs WHERE job_id = $1", other_id) == 0
    assert not [path for path in demo.out.rglob("*") if path.is_file()], "something was delivered"


@pytest.mark.parametrize("caller", ["another_type", "job_workflow_under_another_id", "another_type_under_the_job_id"])
async def test_a_foreign_workflow_runs_none_of_a_jobs_steps(env: Env, ledger_pool: asyncpg.Pool, caller: str) -> None:
    demo, rogue_queue = env
    job = await victim(demo, ledger_pool)
    before = await ledger_rows(ledger_pool, job.job_id)
    assert before["jobs"] and before["cells"], before
    rogue_id = job.job_id if caller == "another_type_under_the_job_id" else f"rogue-{short_id()}"
    steps = steps_of(demo, job)
    workflow_type = "JobWorkflow" if caller == "job_workflow_under_another_id" else "RogueSteps"
    if workflow_type == "JobWorkflow":
        # ``request_cancel`` names no job: a JobWorkflow's call asks for its own id's.
        steps = [step for step in steps if step["name"] != "request_cancel"]

    handle = await demo.client.start_workflow(
        workflow_type, steps, id=rogue_id, task_queue=rogue_queue, execution_timeout=timedelta(minutes=5)
    )
    answers = await handle.result()

    await assert_untouched(demo, ledger_pool, job, before, steps[4]["input"], answers)
    assert_refused(answers, steps, job.job_id, rogue_id)


async def test_a_standalone_activity_runs_none_of_a_jobs_steps(env: Env, ledger_pool: asyncpg.Pool) -> None:
    """``temporal activity start`` (the SDK's ``Client.start_activity``): no workflow at all."""
    demo, _ = env
    job = await victim(demo, ledger_pool)
    before = await ledger_rows(ledger_pool, job.job_id)
    steps = [step for step in steps_of(demo, job) if step["name"] != "request_cancel"]

    answers: list[dict[str, Any]] = []
    for step in steps:
        try:
            await demo.client.execute_activity(
                step["name"],
                step["input"],
                id=f"standalone-{step['name']}-{short_id()}",
                task_queue=step["queue"],
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=ATTEMPTS),
            )
            answers.append({"name": step["name"], "completed": True})
        except Exception as err:  # noqa: BLE001 - what the client was told
            answers.append({"name": step["name"], **refusal(err)})

    await assert_untouched(demo, ledger_pool, job, before, steps[4]["input"], answers)
    for answer in answers:
        assert answer.get("type") == FOREIGN_CALLER, answer
        assert answer["non_retryable"] is True, answer
        assert "standalone activity" in answer["message"], answer

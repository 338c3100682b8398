"""A multi-target job's status under a cancel, end to end (real worker process, real HTTP).

The reported case: a two-target job cancelled while one cell's webhook send was out and
the other cell had delivered answered ``200 status: succeeded``; its events ended with
``job.succeeded`` and ``cancelled_by_consumer`` appeared nowhere. The rule
(:func:`curaflow.domain.projection.job_status`): the cancel stopped a cell, so the job is
``cancelled`` — with what landed reported — whoever reads it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus

from curaflow.domain.messages import JobInput
from curaflow.ledger.db import now_ms
from curaflow.ledger.jobs import NewJob, insert_job, mark_workflow_started
from curaflow.temporal.connection import connect, start_job_workflow
from tests.fakes.webhook import Reply, WebhookReceiver
from tests.jobs_support import WebhookEnv, spec_for, webhook_env, webhook_route
from tests.support import Stack, closed_status, eventually, short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]


Env = WebhookEnv


@pytest.fixture(scope="module")
async def env(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str, ledger_pool: Any
) -> AsyncIterator[Env]:
    fast, held = f"fast-{short_id()}", f"held-{short_id()}"

    def config(hook: WebhookReceiver) -> dict[str, Any]:
        return {
            "api": {"cancel_wait_ms": 20_000},
            "routes": {fast: webhook_route(hook, "/fast"), held: webhook_route(hook, "/held")},
            "targets": [
                {"id": "t1", "query": {"tags": ["オリジナル"]}, "routes": [fast]},
                {"id": "t2", "query": {"tags": ["風景"]}, "routes": [held]},
            ],
        }

    async with webhook_env(tmp_path_factory.mktemp("cancelstatus"), temporal_address, database_url, config) as opened:
        yield opened


async def start_two_target_job(stack: Stack) -> str:
    """Admit and start a job of the targets ``t1`` and ``t2`` (one cell each), as a plan does."""
    created = now_ms()
    job_id = f"pair@2026-01-01T{short_id()}"
    inp = JobInput(
        job_id=job_id,
        plan_id="pair",
        schedule_id="pair",
        trigger="schedule",
        created_at_ms=created,
        deadline_at_ms=created + stack.settings.budgets.default_deadline_ms,
        targets=[spec_for(stack, "t1"), spec_for(stack, "t2")],
        budgets=stack.settings.budgets_model(),
        source_task_queues=stack.settings.source_task_queues(),
    )
    pool = await stack.ledger()
    async with pool.acquire() as conn:
        await insert_job(conn, NewJob(job_input=inp))
    assert stack.settings.temporal.address
    client = await connect(stack.settings.temporal.address)
    await start_job_workflow(client, inp, stack.settings.temporal.task_queue)
    async with pool.acquire() as conn:
        await mark_workflow_started(conn, job_id)
    return job_id


async def test_a_cancel_while_one_send_is_out_and_the_other_cell_delivered_is_cancelled(env: Env) -> None:
    env.hook.script["/held"] = [Reply(delay_s=60)]  # t2's send stays out: the cancel cuts it
    job_id = await start_two_target_job(env.stack)
    await eventually(lambda: env.hook.at("/fast") and env.hook.at("/held"), timeout_s=60, what="both sends out")
    pool = await env.stack.ledger()
    await eventually(
        lambda: pool.fetchval("SELECT state = 'submitted' FROM cells WHERE job_id = $1 AND target_id = 't1'", job_id),
        what="t1 delivered",
    )

    answer = await env.http.post(f"/jobs/{job_id}/cancel")

    assert answer.status_code == 200
    job = answer.json()
    assert job["status"] == "cancelled", job
    assert (job["error"]["code"], job["error"]["retryable"]) == ("cancelled_by_consumer", False)
    assert job["error"]["detail"]["business_status"] == "partial_success"
    deliveries = {d["target_id"]: d["status"] for d in job["error"]["detail"]["deliveries"]}
    assert deliveries == {"t1": "delivered", "t2": "unknown"}  # what landed, and the cut send
    assert "result" not in job

    events = (await env.http.get(f"/jobs/{job_id}/events")).json()["events"]
    assert events[-1]["type"] == "job.cancelled"
    assert "job.succeeded" not in [e["type"] for e in events]
    assert events[-1]["payload"]["error"]["code"] == "cancelled_by_consumer"
    assert (await env.http.get(f"/jobs/{job_id}")).json() == job  # every reader says the same
    row = await pool.fetchrow("SELECT business_status, alertable FROM outcomes WHERE job_id = $1", job_id)
    assert (row["business_status"], row["alertable"]) == ("partial_success", False)
    assert await closed_status(env.client, job_id) == WorkflowExecutionStatus.CANCELED
    state = await env.client.get_workflow_handle(job_id).query("status")
    assert state["status"] == "cancelled"

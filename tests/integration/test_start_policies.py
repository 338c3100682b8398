"""What a Temporal client's start under a running job's id may do to the job.

A Temporal client chooses its start's conflict and reuse policies: ``TERMINATE_EXISTING``
(or the reuse policy ``TERMINATE_IF_RUNNING``) terminates the job's running run and starts
another under the job id, with the same Task or another. A real worker, the API in the
test process, the Pixiv replay and a webhook receiver that holds a send out.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import WorkflowExecutionStatus
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy

from curaflow.jobs.submit import job_id_for
from curaflow.protocol.models import Task
from tests.fakes.webhook import Reply
from tests.integration.test_temporal_clients import task
from tests.jobs_support import WebhookEnv, one_hook, webhook_env
from tests.support import eventually, job_in_stage, short_id, temporal_workflow, terminal_job
from workflows.job import JobWorkflow

pytestmark = [pytest.mark.integration, pytest.mark.slow]


Env = WebhookEnv


@pytest.fixture(scope="module")
async def env(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str, ledger_pool: Any
) -> AsyncIterator[Env]:
    async with webhook_env(tmp_path_factory.mktemp("policies"), temporal_address, database_url, one_hook()) as opened:
        yield opened


async def start(env: Env, submitted: Task, **policy: Any) -> Any:
    return await env.client.start_workflow(
        JobWorkflow.run,
        submitted,
        id=job_id_for(submitted),
        task_queue=env.stack.task_queue,
        **policy,
    )


async def admitted(env: Env, job_id: str) -> bool:
    return (await env.http.get(f"/jobs/{job_id}")).status_code == 200


POLICIES = {
    "terminate-existing": {
        "id_conflict_policy": WorkflowIDConflictPolicy.TERMINATE_EXISTING,
        "id_reuse_policy": WorkflowIDReusePolicy.ALLOW_DUPLICATE,
    },
    "terminate-if-running": {"id_reuse_policy": WorkflowIDReusePolicy.TERMINATE_IF_RUNNING},
}


def temporal_cli(env: Env, *args: str) -> subprocess.CompletedProcess[str]:
    return temporal_workflow(env.temporal_address, *args)


def posts(env: Env, job_id: str) -> list[Any]:
    """The requests of the job's work the receiver got."""
    return [r for r in env.hook.received if job_id in r.headers.get("webhook-id", "") or job_id in str(r.body)]


async def deliver_started(env: Env, job_id: str, run_id: str | None) -> bool:
    """The run ``run_id`` of the job has a ``deliver`` attempt running (it claims at once),
    or has sent the work already (the receiver got it a second time)."""
    if len(posts(env, job_id)) > 1:
        return True
    described = await env.client.get_workflow_handle(job_id, run_id=run_id).describe()
    return any(
        a.activity_type.name == "deliver" and a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
        for a in described.raw_description.pending_activities
    )


async def first_send_out(env: Env, submitted: Task) -> tuple[Any, asyncio.Event]:
    """Start ``submitted`` and return its handle once its send is out; the receiver holds
    that send until the returned event is set (or the route's timeout, 20 s)."""
    release = asyncio.Event()
    env.hook.script["/hook"] = [Reply(delay_s=60.0, released=release)]
    env.hook.arrived.clear()
    handle = await start(env, submitted, id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                         id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE)  # fmt: skip
    await asyncio.wait_for(env.hook.arrived.wait(), 30)  # the first run's send is out
    return handle, release


async def one_delivery(env: Env, job_id: str) -> dict[str, Any]:
    """The job's end once the webhook answered it, asserting the work reached the receiver once."""
    job = await terminal_job(env.http, job_id, timeout_s=90)
    await eventually(lambda: any(job_id in a for a in env.hook.answered), timeout_s=30, what="answered")
    pool = await env.stack.ledger()
    intents = await pool.fetch("SELECT work_id, status, attempts FROM delivery_intents WHERE job_id = $1", job_id)
    sent = posts(env, job_id)
    assert len(sent) == 1, f"the work was sent {len(sent)} times: {[r.headers.get('webhook-id') for r in sent]}"
    assert [(r["status"], r["attempts"]) for r in intents] == [("delivered", 1)], intents
    return job


@pytest.mark.parametrize("policy", list(POLICIES))
@pytest.mark.parametrize("second", ["same", "other"])
async def test_a_start_that_terminates_a_running_job_leaves_one_delivery_and_a_truthful_job(
    env: Env, policy: str, second: str
) -> None:
    # The first run's send is out (the receiver holds its answer) when the start terminates
    # it. With the same Task the new run goes on with the job and reaches its deliver while
    # that send is still out (until 2026-12-05 it sent the work again: the receiver had it
    # twice, ~60 ms apart); with another Task it refuses its Task. Either way the work
    # reaches the receiver once and the job's end is what landed.
    key = f"term-{policy[:6]}-{second}-{short_id()}"
    first = task(key)
    job_id = job_id_for(first)
    handle, release = await first_send_out(env, first)

    again = first if second == "same" else task(key, query={"tags": ["オリジナル"]})
    later = await start(env, again, **POLICIES[policy])
    assert later.result_run_id != handle.result_run_id
    old = await env.client.get_workflow_handle(job_id, run_id=handle.result_run_id).describe()
    assert old.status == WorkflowExecutionStatus.TERMINATED
    if second == "same":
        # The new run's deliver claims while the first send is still out.
        await eventually(
            lambda: deliver_started(env, job_id, later.result_run_id), timeout_s=30, what="the new run's deliver"
        )
        await asyncio.sleep(1.0)
    release.set()

    job = await one_delivery(env, job_id)
    assert job["status"] in ("succeeded", "cancelled"), job
    if second == "same":
        assert job["status"] == "succeeded", job  # the new run went on with the job: delivered


async def test_a_reset_while_the_send_is_out_leaves_one_delivery(env: Env) -> None:
    # `temporal workflow reset` during a send terminates the run; the new run replays to the
    # reset point and schedules its steps again: its deliver meets the send still out.
    first = task(f"reset-send-{short_id()}")
    job_id = job_id_for(first)
    handle, release = await first_send_out(env, first)

    reset = await asyncio.to_thread(
        temporal_cli, env, "reset", "-w", job_id, "--type", "LastWorkflowTask", "--reason", "operator: test"
    )
    assert reset.returncode == 0, reset.stderr
    new_run = (await env.client.get_workflow_handle(job_id).describe()).run_id
    assert new_run != handle.result_run_id
    await eventually(lambda: deliver_started(env, job_id, new_run), timeout_s=30, what="the new run's deliver")
    await asyncio.sleep(1.0)
    release.set()

    job = await one_delivery(env, job_id)
    assert job["status"] == "succeeded", job


@pytest.mark.parametrize("policy", list(POLICIES))
async def test_a_start_with_another_task_that_terminates_a_searching_job_ends_it_as_terminated(
    env: Env, policy: str
) -> None:
    # The new run refuses its Task (other params: idempotency_conflict) and fails. The
    # reconciler judged that latest run, which never held the job, and ended the job
    # `failed / internal_error` ("read the worker's log"): the job's own run was terminated.
    key = f"term-search-{policy[:6]}-{short_id()}"
    first = task(key)
    job_id = job_id_for(first)
    env.replay.faults.search_delay_s = 30
    try:
        await start(env, first, id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                    id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE)  # fmt: skip
        await eventually(lambda: admitted(env, job_id), timeout_s=20, what=f"{job_id} admitted")
        await job_in_stage(env.http, job_id, "searching")
        await start(env, task(key, query={"tags": ["オリジナル"]}), **POLICIES[policy])
        job = await terminal_job(env.http, job_id, timeout_s=60)
    finally:
        env.replay.faults.search_delay_s = 0
    assert (job["status"], job["error"]["detail"]["internal_code"]) == ("cancelled", "execution_terminated"), job

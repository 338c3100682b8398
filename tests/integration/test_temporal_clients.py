"""Workflow clients start jobs: a Temporal client starts ``JobWorkflow`` with a Task.

A real worker process, the API in the test process, the Pixiv replay and a directory
route. The Python client starts typed (``JobWorkflow.run`` with the protocol ``Task``);
the ``temporal`` CLI (a Go client) starts with the Task as JSON. Both get the admission of
``POST /jobs``: one key is one job and one execution whoever uses it first.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError

from curaflow.devstack.temporal import temporal_binary
from curaflow.domain.messages import JobInput, JobState
from curaflow.protocol.models import Task
from curaflow.submit import JOB_START_OPTIONS, job_id_for, start_job
from tests.fakes.replay import ReplayServer
from tests.support import Stack, closed_status, short_id
from workflows.job import JobWorkflow

pytestmark = pytest.mark.integration


@dataclass
class Env:
    stack: Stack
    http: httpx.AsyncClient
    client: Client
    address: str
    out: Path


@pytest.fixture(scope="module")
async def env(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str, ledger_pool: Any
) -> AsyncIterator[Env]:
    tmp = tmp_path_factory.mktemp("tclients")
    replay = await ReplayServer().start()
    out = f"out-{short_id()}"
    stack = Stack(
        tmp,
        temporal_address,
        database_url,
        {
            "pixiv": {"api_url": replay.url},
            "routes": {out: {"kind": "directory", "path": str(tmp / "out")}},
            "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [out]}],
        },
    )
    await stack.start_worker()
    http = await stack.start_api()
    from curaflow.temporal import connect

    client = await connect(temporal_address)
    try:
        yield Env(stack, http, client, temporal_address, tmp / "out")
    finally:
        await stack.stop()
        await replay.stop()


def task(key: str, **params: Any) -> Task:
    return Task.model_validate(
        {
            "protocol_version": "1",
            "job_type": "candidate_search",
            "idempotency_key": key,
            "params": {"target_id": "demo", **params},
        }
    )


async def job_row(env: Env, job_id: str) -> Any:
    pool = await env.stack.ledger()
    return await pool.fetchrow("SELECT trigger, params, completed_at FROM jobs WHERE job_id = $1", job_id)


async def executions(env: Env, job_id: str) -> int:
    return len([w async for w in env.client.list_workflows(f"WorkflowId = '{job_id}'")])


def cli(env: Env, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [temporal_binary(), "workflow", *args, "--address", env.address],
        capture_output=True,
        text=True,
        timeout=120,
    )


# ---- Python, typed ----------------------------------------------------------------------


async def test_a_typed_start_runs_the_job_like_post_jobs(env: Env) -> None:
    submitted = task(f"tc-{short_id()}")
    handle = await env.client.start_workflow(
        JobWorkflow.run,
        submitted,
        id=job_id_for(submitted),
        task_queue=env.stack.task_queue,
        **JOB_START_OPTIONS,
    )
    state: JobState = await handle.result()

    assert state.status == "succeeded"
    job = (await env.http.get(f"/jobs/{handle.id}")).json()
    assert job["status"] == "succeeded" and job["idempotency_key"] == submitted.idempotency_key
    events = [e["type"] for e in (await env.http.get(f"/jobs/{handle.id}/events")).json()["events"]]
    assert events[0] == "job.accepted" and events[-1] == "job.succeeded"
    assert (await job_row(env, handle.id))["trigger"] == "temporal"
    pool = await env.stack.ledger()
    assert await pool.fetchval("SELECT business_status FROM outcomes WHERE job_id = $1", handle.id) == "success"
    assert state.deliveries and state.deliveries[0].status == "delivered"
    # The UI's filters work for it like for an HTTP job.
    described = await handle.describe()
    assert described.typed_search_attributes is not None


async def test_the_same_key_over_http_and_temporal_at_once_is_one_job_and_one_execution(env: Env) -> None:
    submitted = task(f"both-{short_id()}")
    body = submitted.model_dump(mode="json", exclude_none=True)

    http_answer, handle = await asyncio.gather(
        env.http.post("/jobs", json=body),
        start_job(env.client, submitted, task_queue=env.stack.task_queue),
    )

    assert http_answer.status_code in (200, 202)
    assert http_answer.json()["job"]["job_id"] == handle.id
    state = JobState.model_validate(await env.client.get_workflow_handle(handle.id).result())
    assert state.status == "succeeded"
    assert await executions(env, handle.id) == 1
    # And the reverse order later: HTTP replays the Temporal-admitted job.
    again = await env.http.post("/jobs", json=body)
    assert again.status_code == 200 and again.json()["job"]["job_id"] == handle.id


async def test_other_params_under_a_key_are_an_idempotency_conflict_and_change_nothing(env: Env) -> None:
    key = f"conflict-{short_id()}"
    first = await env.http.post("/jobs", json=task(key).model_dump(mode="json", exclude_none=True))
    assert first.status_code == 202
    job_id = first.json()["job"]["job_id"]
    await env.stack.wait_terminal(job_id)
    # the ledger is terminal once ``finish`` ran; the run closes a moment later
    await closed_status(env.client, job_id)
    before = await job_row(env, job_id)

    other = task(key, query={"tags": ["風景"]})
    handle = await env.client.start_workflow(
        JobWorkflow.run,
        other,
        id=job_id,
        task_queue=env.stack.task_queue,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
    )
    with pytest.raises(WorkflowFailureError) as failure:
        await handle.result()

    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "idempotency_conflict"
    assert cause.non_retryable
    assert await job_row(env, job_id) == before


# ---- refusals fail fast, write nothing, never poison the id ------------------------------


async def test_an_invalid_task_fails_fast_with_the_field_and_the_id_stays_usable(env: Env) -> None:
    key = f"bad-{short_id()}"
    bad = {"protocol_version": "1", "job_type": "candidate_search", "idempotency_key": key,
           "params": {"target_id": "demo", "constraints": {"limit": "many"}}}  # fmt: skip
    job_id = f"demo@manual-{key}"
    started = time.monotonic()
    handle = await env.client.start_workflow(
        JobWorkflow.run, bad, id=job_id, task_queue=env.stack.task_queue, **JOB_START_OPTIONS
    )
    with pytest.raises(WorkflowFailureError) as failure:
        await handle.result()

    assert time.monotonic() - started < 15
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "invalid_params" and cause.non_retryable
    assert cause.details[0]["detail"]["field"] == "params.constraints.limit"
    assert await job_row(env, job_id) is None
    # The failed execution does not block the id: the valid Task runs under it.
    good = await env.http.post("/jobs", json={**bad, "params": {"target_id": "demo"}})
    assert good.status_code == 202 and good.json()["job"]["job_id"] == job_id
    record = await env.stack.wait_terminal(job_id, 60)
    assert record.cells[0].state == "submitted", record.cells[0]


async def test_a_workflow_id_that_is_not_the_job_id_is_refused(env: Env) -> None:
    submitted = task(f"wid-{short_id()}")
    handle = await env.client.start_workflow(
        JobWorkflow.run, submitted, id=f"not-the-job-{short_id()}", task_queue=env.stack.task_queue
    )
    with pytest.raises(WorkflowFailureError) as failure:
        await handle.result()
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "invalid_params"
    assert cause.details[0]["detail"]["field"] == "workflow_id"
    assert cause.details[0]["detail"]["expected"] == job_id_for(submitted)
    assert await job_row(env, job_id_for(submitted)) is None


async def test_input_that_is_not_a_task_fails_the_execution_not_the_workflow_task(env: Env) -> None:
    job_id = f"demo@manual-junk-{short_id()}"
    result = await asyncio.to_thread(
        cli, env, "start", "--type", "JobWorkflow", "--task-queue", env.stack.task_queue, "--workflow-id", job_id,
        "--input", '"just a string"',
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    # still running after 15 s would be a zombie
    assert await closed_status(env.client, job_id, timeout_s=15) == WorkflowExecutionStatus.FAILED


async def test_a_stale_job_input_fails_fast_and_does_not_poison_the_id(env: Env) -> None:
    key = f"stale-{short_id()}"
    job_id = f"demo@manual-{key}"
    now = int(time.time() * 1000)
    stale = JobInput.model_validate(
        {"job_id": job_id, "plan_id": "demo", "created_at_ms": now, "deadline_at_ms": now + 600_000,
         "targets": [{"target_id": "demo", "routes": [{"name": "nowhere", "kind": "directory"}]}]}
    )  # fmt: skip
    started = time.monotonic()
    handle = await env.client.start_workflow(JobWorkflow.run, stale, id=job_id, task_queue=env.stack.task_queue)
    with pytest.raises(WorkflowFailureError) as failure:
        await handle.result()
    assert time.monotonic() - started < 15
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "unknown_job"
    assert "not in the ledger" in str(cause)
    assert await job_row(env, job_id) is None

    later = await env.http.post("/jobs", json=task(key).model_dump(mode="json", exclude_none=True))
    assert later.status_code == 202
    record = await env.stack.wait_terminal(job_id, 60)
    assert record.cells[0].state == "submitted"


# ---- any language: the temporal CLI (a Go client) ----------------------------------------


async def test_the_temporal_cli_starts_and_executes_a_job_with_a_json_task(env: Env) -> None:
    key = f"cli-{short_id()}"
    body = json.dumps(task(key).model_dump(mode="json", exclude_none=True))
    job_id = f"demo@manual-{key}"

    result = await asyncio.to_thread(
        cli, env, "execute", "--type", "JobWorkflow", "--task-queue", env.stack.task_queue,
        "--workflow-id", job_id, "--input", body, "--output", "json",
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed["status"] == "COMPLETED", printed
    assert printed["result"]["status"] == "succeeded"
    assert printed["result"]["deliveries"][0]["status"] == "delivered"
    job = (await env.http.get(f"/jobs/{job_id}")).json()
    assert job["status"] == "succeeded"


async def test_the_python_example_starts_follows_and_reports_a_job(env: Env) -> None:
    import sys

    root = Path(__file__).resolve().parents[2]
    key = f"example-{short_id()}"
    result = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, str(root / "examples" / "start_job.py"), "--address", env.address,
         "--task-queue", env.stack.task_queue, "--key", key],
        capture_output=True, text=True, timeout=120, cwd=root,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f"job demo@manual-{key} started" in result.stdout
    assert "succeeded (business status success)" in result.stdout
    assert ": delivered " in result.stdout

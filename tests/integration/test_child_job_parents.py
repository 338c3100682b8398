"""A parent's run closing while its child job runs (docs/temporal.md "From another workflow").

What each way a parent's run closes does to a child job, on the dev server, with a real
worker, the API and the Pixiv replay (images slowed while the job must be fetching):
``run_job``'s parent continuing as new (Temporal applies the parent close policy
``REQUEST_CANCEL``: the job is cancelled, and the new run reports it so) and being reset
(no close policy: the job runs on); a hand-written child with each parent close policy
(``ABANDON`` runs on; ``TERMINATE`` ends it ``cancelled / execution_terminated``;
``REQUEST_CANCEL`` cancels it when the parent completes). Each case checks what the job
reports: ``GET /jobs/{id}``, the ledger's cells and the execution's status.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from curaflow.devstack.temporal import temporal_binary
from curaflow.process.worker import sandbox_runner
from examples.child_job import OneNewWork, OneNewWorkInput, OneNewWorkResult
from tests.child_parents import ContinuingParent, HandWrittenParent, Squatter
from tests.support import DemoStack, closed_status, demo_stack, eventually, short_id

pytestmark = pytest.mark.integration


@dataclass
class Env(DemoStack):
    """The module's stack and a worker of the parents (tests/child_parents.py)."""

    parents: Client
    parent_queue: str


@pytest.fixture(scope="module")
async def env(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str, ledger_pool: Any
) -> AsyncIterator[Env]:
    async with demo_stack(tmp_path_factory.mktemp("child-parents"), temporal_address, database_url) as demo:
        parents = await Client.connect(temporal_address, data_converter=pydantic_data_converter)
        parent_queue = f"child-parents-{demo.stack.suffix}"
        async with Worker(
            parents,
            task_queue=parent_queue,
            workflows=[ContinuingParent, HandWrittenParent, Squatter, OneNewWork],
            workflow_runner=sandbox_runner(),
        ):
            yield Env(**vars(demo), parents=parents, parent_queue=parent_queue)


@pytest.fixture(autouse=True)
def no_faults(env: Env) -> None:
    env.replay.faults.slow_images_s = 0.0


def task(key: str) -> dict[str, Any]:
    return {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": key,
        "params": {"target_id": "demo"},
    }


async def fetching(env: Env, job_id: str) -> None:
    """Once ``job_id`` exists and fetches (the child admits its Task a moment after its start)."""

    async def probe() -> bool:
        answer = await env.http.get(f"/jobs/{job_id}")
        job = answer.json()
        return answer.status_code == 200 and job["progress"]["stage"] == "fetching" and bool(job["lease_active"])

    await eventually(probe, timeout_s=30, interval_s=0.1, what=f"{job_id} fetching")


async def reported(env: Env, job_id: str) -> tuple[str, str | None, str, WorkflowExecutionStatus | None]:
    """(GET /jobs/{id}'s status, the cell's reason, the ledger's business status, the
    execution's status) once the job ended."""
    record = await env.stack.wait_terminal(job_id, 90)
    job = (await env.http.get(f"/jobs/{job_id}")).json()
    return job["status"], record.cells[0].reason, record.business_status, await closed_status(env.client, job_id)


async def test_a_run_job_parent_continuing_as_new_cancels_its_child_job(env: Env) -> None:
    # Temporal applies the parent close policy when a parent's run continues as new, as at
    # any close of its run: run_job's REQUEST_CANCEL cancels the job. The new run, asking
    # again, attaches to the ended job and is told it was cancelled — as GET /jobs says.
    env.replay.faults.slow_images_s = 30.0
    body = task(f"can-{short_id()}")
    job_id = f"demo@manual-{body['idempotency_key']}"
    handle = await env.parents.start_workflow(
        "ContinuingParent", {"task": body, "queue": env.stack.task_queue}, id=f"can-{short_id()}",
        task_queue=env.parent_queue,
    )  # fmt: skip
    await fetching(env, job_id)
    await handle.signal("proceed")
    result = await handle.result()

    assert (result["job_id"], result["status"]) == (job_id, "cancelled")
    assert await reported(env, job_id) == (
        "cancelled",
        "cancelled_by_consumer",
        "cancelled",
        WorkflowExecutionStatus.CANCELED,
    )


async def test_a_reset_run_job_parent_leaves_its_child_job_running(env: Env) -> None:
    # A reset terminates the parent's run without its close policy: the job runs on, and
    # the new run attaches to it and gets its outcome.
    env.replay.faults.slow_images_s = 30.0
    body = task(f"reset-{short_id()}")
    job_id = f"demo@manual-{body['idempotency_key']}"
    handle = await env.parents.start_workflow(
        "ContinuingParent", {"task": body, "queue": env.stack.task_queue}, id=f"reset-{short_id()}",
        task_queue=env.parent_queue,
    )  # fmt: skip
    await fetching(env, job_id)
    done = subprocess.run(
        [temporal_binary(), "workflow", "reset", "-w", handle.id, "--type", "FirstWorkflowTask", "--reason", "test",
         "--address", env.address],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    env.replay.faults.slow_images_s = 0.0
    assert await reported(env, job_id) == ("succeeded", None, "success", WorkflowExecutionStatus.COMPLETED)
    result = await env.parents.get_workflow_handle(handle.id).result()
    assert (result["job_id"], result["status"]) == (job_id, "succeeded")


COMPLETED, TERMINATED, CANCELED = (
    WorkflowExecutionStatus.COMPLETED,
    WorkflowExecutionStatus.TERMINATED,
    WorkflowExecutionStatus.CANCELED,
)


@pytest.mark.parametrize(
    ("policy", "end", "expected"),
    [
        ("ABANDON", "complete", ("succeeded", None, "success", COMPLETED)),
        ("TERMINATE", "complete", ("cancelled", "execution_terminated", "cancelled", TERMINATED)),
        ("TERMINATE", "cancel", ("cancelled", "execution_terminated", "cancelled", TERMINATED)),
        ("REQUEST_CANCEL", "complete", ("cancelled", "cancelled_by_consumer", "cancelled", CANCELED)),
    ],
)  # fmt: skip
async def test_a_hand_written_child_job_under_each_parent_close_policy(
    env: Env, policy: str, end: str, expected: tuple[Any, ...]
) -> None:
    env.replay.faults.slow_images_s = 30.0
    body = task(f"pcp-{policy.lower()}-{end}-{short_id()}")
    job_id = f"demo@manual-{body['idempotency_key']}"
    handle = await env.parents.start_workflow(
        "HandWrittenParent",
        {"task": body, "queue": env.stack.task_queue, "parent_close_policy": policy, "wait": True},
        id=f"pcp-{short_id()}", task_queue=env.parent_queue,
    )  # fmt: skip
    await fetching(env, job_id)
    if end == "complete":
        await handle.signal("proceed")
        await handle.result()
    else:
        await handle.cancel()
    env.replay.faults.slow_images_s = 0.0
    assert await reported(env, job_id) == expected


async def test_a_job_whose_id_a_workflow_of_another_kind_holds_runs_once_that_run_closes(env: Env) -> None:
    # A start with conflict policy USE_EXISTING attaches to whatever runs under the id:
    # a workflow of another type there (a user's, named in curaflow's id scheme) took the
    # job — its start recorded, nothing ran it, a run_job parent attached to it, and once
    # that workflow completed nothing started the job: it waited for its queued budget.
    body = task(f"held-{short_id()}")
    job_id = f"demo@manual-{body['idempotency_key']}"
    squatter = await env.parents.start_workflow(Squatter.run, id=job_id, task_queue=env.parent_queue)
    assert (await env.http.post("/jobs", json=body)).status_code == 202
    parent = await env.parents.start_workflow(
        OneNewWork.run,
        OneNewWorkInput(task=body, curaflow_queue=env.stack.task_queue),
        id=f"held-parent-{short_id()}",
        task_queue=env.parent_queue,
        result_type=OneNewWorkResult,
    )

    async def following() -> bool:  # the parent's child start was refused: it follows the job
        pending = (await parent.describe()).raw_description.pending_activities
        return any(a.activity_type.name == "follow_job" and a.HasField("last_started_time") for a in pending)

    await eventually(following, timeout_s=30, what="the parent following the job")
    record = await env.stack.job(job_id)
    assert (record.completed_at, record.workflow_started_at) == (None, None), record  # held off, not taken
    assert (await squatter.describe()).status == WorkflowExecutionStatus.RUNNING  # untouched

    await squatter.signal(Squatter.proceed)
    assert await squatter.result() == "done"
    result: OneNewWorkResult = await parent.result()
    assert (result.job_id, result.status, result.business_status) == (job_id, "succeeded", "success")
    assert await reported(env, job_id) == ("succeeded", None, "success", WorkflowExecutionStatus.COMPLETED)
    described = await env.client.get_workflow_handle(job_id).describe()
    assert described.workflow_type == "JobWorkflow"


async def test_a_parent_whose_own_id_is_its_jobs_id_is_refused_at_once(env: Env) -> None:
    # A parent named after the job it runs: its child start is refused (the id is its
    # own), run_job attaches through follow_job — and waited for a job that could only
    # run under the id the parent itself holds: until the job's queued budget (30 min),
    # then the job expired queued_too_long having never run.
    body = task(f"self-{short_id()}")
    job_id = f"demo@manual-{body['idempotency_key']}"
    parent = await env.parents.start_workflow(
        OneNewWork.run,
        OneNewWorkInput(task=body, curaflow_queue=env.stack.task_queue),
        id=job_id,
        task_queue=env.parent_queue,
        result_type=OneNewWorkResult,
    )
    result = await asyncio.wait_for(parent.result(), 60)
    assert (result.refused, result.job_id) == ("invalid_params", None), result
    assert job_id in (result.message or "")
    assert (await env.http.get(f"/jobs/{job_id}")).status_code == 404  # nothing written

    # The key is usable once the parent is gone: the job runs under its id.
    assert (await env.http.post("/jobs", json=body)).status_code == 202
    assert await reported(env, job_id) == ("succeeded", None, "success", WorkflowExecutionStatus.COMPLETED)

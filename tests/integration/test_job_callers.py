"""Other workflows run jobs: as a child, attached to a running job, and through Nexus from another namespace.

A real worker process (it registers the Nexus service), the API in the test process, the
Pixiv replay (its images slowed down while a job must be fetching) and a directory route.
The callers are the examples' workflows, each on a worker in this process:
``OneNewWork`` (``examples/child_job.py``) in curaflow's namespace, ``TeamStep``
(``examples/nexus_caller.py``) in a second namespace of the dev server, calling through
a real Nexus endpoint created by the setup code (:func:`curaflow.temporal.namespace.ensure_nexus_endpoint`).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from temporalio.activity import ActivityCancellationDetails
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment
from temporalio.worker import Worker

from activities.follow import POLL_S, FollowActivity
from curaflow.devstack.temporal import temporal_binary
from curaflow.domain.messages import FollowJob, JobState
from curaflow.jobs.submit import JOB_START_OPTIONS, start_job
from curaflow.process.worker import sandbox_runner
from curaflow.temporal.namespace import ensure_nexus_endpoint
from curaflow.temporal.refusals import refusal_of
from examples.child_job import OneNewWork, OneNewWorkInput, OneNewWorkResult
from examples.nexus_caller import TeamStep, TeamStepInput, TeamStepResult
from tests.child_parents import Squatter
from tests.conftest import CALLERS_NAMESPACE
from tests.nexus_callers import BoundedCaller, CancelJobCaller, FollowingParent, RawCaller
from tests.support import DemoStack, activity_attempts, closed_status, demo_stack, eventually, short_id

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Env(DemoStack):
    """The module's stack, a Nexus endpoint to its queue, and workers of the callers'
    workflows: a parent in this namespace, a team's step in ``curaflow-callers``."""

    callers: Client
    endpoint: str
    parent_queue: str
    caller_queue: str


@pytest.fixture(scope="module")
async def env(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str, ledger_pool: Any
) -> AsyncIterator[Env]:
    async with demo_stack(tmp_path_factory.mktemp("callers"), temporal_address, database_url) as demo:
        endpoint = f"curaflow-jobs-{demo.stack.suffix}"
        created, problem = await ensure_nexus_endpoint(
            demo.client, endpoint, task_queue=demo.stack.task_queue, deadline=time.monotonic() + 30
        )
        assert created and problem is None, problem
        callers = await Client.connect(
            temporal_address, namespace=CALLERS_NAMESPACE, data_converter=pydantic_data_converter
        )
        parents = await Client.connect(temporal_address, data_converter=pydantic_data_converter)
        parent_queue, caller_queue = f"parents-{demo.stack.suffix}", f"team-{demo.stack.suffix}"
        async with (
            Worker(
                parents,
                task_queue=parent_queue,
                workflows=[OneNewWork, FollowingParent, Squatter],
                workflow_runner=sandbox_runner(),
            ),
            Worker(
                callers,
                task_queue=caller_queue,
                workflows=[TeamStep, CancelJobCaller, BoundedCaller, RawCaller],
                workflow_runner=sandbox_runner(),
            ),
        ):
            yield Env(
                **vars(demo), callers=callers, endpoint=endpoint, parent_queue=parent_queue, caller_queue=caller_queue
            )


@pytest.fixture(autouse=True)
def no_faults(env: Env) -> None:
    env.replay.faults.slow_images_s = 0.0


def task(key: str, **params: Any) -> dict[str, Any]:
    return {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": key,
        "params": {"target_id": "demo", **params},
    }


async def runs_of(env: Env, job_id: str) -> list[str]:
    """Every run Temporal lists under ``job_id`` (visibility: give it a moment)."""
    await asyncio.sleep(0.5)
    return [w.run_id async for w in env.client.list_workflows(f'WorkflowId = "{job_id}"')]


async def parent(env: Env, body: dict[str, Any]) -> Any:
    """Start ``OneNewWork`` (examples/child_job.py) for ``body``; returns its handle."""
    return await env.client.start_workflow(
        "OneNewWork",
        OneNewWorkInput(task=body, curaflow_queue=env.stack.task_queue),
        id=f"parent-{short_id()}",
        task_queue=env.parent_queue,
        result_type=OneNewWorkResult,
    )


async def team_step(env: Env, body: dict[str, Any]) -> Any:
    """Start ``TeamStep`` (examples/nexus_caller.py) in the callers' namespace; returns its handle."""
    return await env.callers.start_workflow(
        TeamStep.run,
        TeamStepInput(task=body, endpoint=env.endpoint),
        id=f"team-{short_id()}",
        task_queue=env.caller_queue,
    )


async def fetching(env: Env, job_id: str) -> None:
    """Once ``job_id`` exists and fetches (a child or an operation admits it a moment after its start)."""

    async def probe() -> bool:
        answer = await env.http.get(f"/jobs/{job_id}")
        job = answer.json()
        return answer.status_code == 200 and job["progress"]["stage"] == "fetching" and bool(job["lease_active"])

    await eventually(probe, timeout_s=30, interval_s=0.1, what=f"{job_id} fetching")


async def ended_cancelled_by_consumer(env: Env, job_id: str) -> None:
    record = await env.stack.wait_terminal(job_id, 60)
    assert (record.cells[0].state, record.cells[0].reason) == ("failed", "cancelled_by_consumer"), record.cells[0]
    assert await closed_status(env.client, job_id) == WorkflowExecutionStatus.CANCELED
    job = (await env.http.get(f"/jobs/{job_id}")).json()
    assert job["status"] == "cancelled"


# ---- a parent workflow starts the job as its child ---------------------------------------


async def test_a_parent_runs_the_job_as_its_child_and_gets_its_outcome(env: Env) -> None:
    body = task(f"child-{short_id()}")
    handle = await parent(env, body)
    result: OneNewWorkResult = await handle.result()

    job_id = f"demo@manual-{body['idempotency_key']}"
    assert (result.job_id, result.status, result.business_status) == (job_id, "succeeded", "success")
    assert result.deliveries and "delivered" in result.deliveries[0]
    described = await env.client.get_workflow_handle(job_id).describe()
    assert described.parent_id == handle.id  # the job is the parent's child in the UI
    assert len(await runs_of(env, job_id)) == 1
    job = (await env.http.get(f"/jobs/{job_id}")).json()
    assert job["status"] == "succeeded"


async def test_a_parent_gets_the_refusal_with_its_protocol_code(env: Env) -> None:
    invalid = task(f"child-bad-{short_id()}", constraints={"limit": "many"})
    refused: OneNewWorkResult = await (await parent(env, invalid)).result()
    assert refused.refused == "invalid_params"  # refused in the parent: no child at all
    assert await runs_of(env, f"demo@manual-{invalid['idempotency_key']}") == []

    unknown = task(f"child-unknown-{short_id()}")
    unknown["params"]["target_id"] = "no-such-target"
    nowhere: OneNewWorkResult = await (await parent(env, unknown)).result()
    assert nowhere.refused == "invalid_params" and "unknown target" in (nowhere.message or "")


async def test_cancelling_the_parent_cancels_its_child_job(env: Env) -> None:
    env.replay.faults.slow_images_s = 30.0
    body = task(f"child-cancel-{short_id()}")
    handle = await parent(env, body)
    job_id = f"demo@manual-{body['idempotency_key']}"
    await fetching(env, job_id)

    await handle.cancel()
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    assert await closed_status(env.client, handle.id) == WorkflowExecutionStatus.CANCELED
    await ended_cancelled_by_consumer(env, job_id)


async def test_terminating_the_parent_cancels_its_child_job(env: Env) -> None:
    env.replay.faults.slow_images_s = 30.0
    body = task(f"child-term-{short_id()}")
    handle = await parent(env, body)
    job_id = f"demo@manual-{body['idempotency_key']}"
    await fetching(env, job_id)

    await handle.terminate(reason="operator: test")
    await ended_cancelled_by_consumer(env, job_id)


# ---- a parent attaches to a job that already runs, or already ended ----------------------


async def test_a_parent_attaches_to_a_running_http_job_and_gets_its_outcome(env: Env) -> None:
    env.replay.faults.slow_images_s = 4.0
    body = task(f"attach-{short_id()}")
    answer = await env.http.post("/jobs", json=body)
    assert answer.status_code == 202
    job_id = answer.json()["job"]["job_id"]
    await fetching(env, job_id)

    handle = await parent(env, body)
    other = await parent(env, task(body["idempotency_key"], query={"tags": ["風景"]}))
    await eventually(lambda: following(env, handle.id), timeout_s=30, what="the parent follows the job")
    env.replay.faults.slow_images_s = 0.0
    result: OneNewWorkResult = await handle.result()

    assert (result.job_id, result.status) == (job_id, "succeeded")
    http_job = (await env.http.get(f"/jobs/{job_id}")).json()
    assert http_job["status"] == "succeeded"
    assert [d.split()[-1] for d in result.deliveries] == [d["work_id"] for d in http_job["result"]["deliveries"]]
    assert len(await runs_of(env, job_id)) == 1  # no second execution
    assert (await env.client.get_workflow_handle(job_id).describe()).parent_id is None
    refused: OneNewWorkResult = await other.result()
    assert refused.refused == "idempotency_conflict"


async def following(env: Env, parent_id: str) -> bool:
    """Whether the parent's ``follow_job`` activity is running (it attached to the job)."""
    described = await env.client.get_workflow_handle(parent_id).describe()
    return any(a.activity_type.name == "follow_job" for a in described.raw_description.pending_activities)


async def follower_of_a_running_http_job(env: Env) -> tuple[str, str, str]:
    """An HTTP job fetching slowly and a parent attached to it: (job id, parent id, the
    parent's ``follow_job`` activity id)."""
    env.replay.faults.slow_images_s = 30.0
    body = task(f"follower-{short_id()}")
    answer = await env.http.post("/jobs", json=body)
    job_id = answer.json()["job"]["job_id"]
    await fetching(env, job_id)
    handle = await parent(env, body)
    await eventually(lambda: following(env, handle.id), timeout_s=30, what="the parent follows the job")
    described = await env.client.get_workflow_handle(handle.id).describe()
    [follower] = [a for a in described.raw_description.pending_activities if a.activity_type.name == "follow_job"]
    return job_id, handle.id, follower.activity_id


def temporal_cli(env: Env, *args: str) -> None:
    done = subprocess.run(
        [temporal_binary(), *args, "--address", env.address], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


async def test_pausing_the_parents_follower_leaves_the_job_running(env: Env) -> None:
    # An operator pauses the parent's follow_job (the UI's "Pause"): the SDK hands the
    # attempt the pause as a cancel. The job is the HTTP caller's as much as the parent's:
    # it runs on, and once unpaused the parent gets its outcome.
    job_id, parent_id, follower = await follower_of_a_running_http_job(env)
    temporal_cli(env, "activity", "pause", "-w", parent_id, "-a", follower)
    await eventually(lambda: follower_paused(env, parent_id), timeout_s=30, what="the follower paused")
    await asyncio.sleep(2 * POLL_S)  # a cancel it passed on reaches the ledger within a poll

    record = await env.stack.job(job_id)
    assert (record.completed_at, record.cancel_requested_at) == (None, None), record
    env.replay.faults.slow_images_s = 0.0
    temporal_cli(env, "activity", "unpause", "-w", parent_id, "-a", follower)
    result: OneNewWorkResult = await env.client.get_workflow_handle(parent_id, result_type=OneNewWorkResult).result()
    assert (result.job_id, result.status) == (job_id, "succeeded")
    assert (await env.http.get(f"/jobs/{job_id}")).json()["status"] == "succeeded"


async def test_resetting_the_parent_leaves_the_followed_job_running(env: Env) -> None:
    # An operator resets the parent (the UI's "Reset"): its run is terminated and a new
    # one starts — as it does for a child job, whose parent's reset cancels nothing. The
    # old run's follow_job hears "not found", as for a parent gone for good, and cancelled
    # the HTTP caller's job; the new run then reported it cancelled.
    job_id, parent_id, _ = await follower_of_a_running_http_job(env)
    temporal_cli(env, "workflow", "reset", "-w", parent_id, "--type", "FirstWorkflowTask", "--reason", "test")
    await asyncio.sleep(3 * POLL_S)  # the old run's follower hears of it at its next heartbeat

    record = await env.stack.job(job_id)
    assert (record.completed_at, record.cancel_requested_at) == (None, None), record
    env.replay.faults.slow_images_s = 0.0
    result: OneNewWorkResult = await env.client.get_workflow_handle(parent_id, result_type=OneNewWorkResult).result()
    assert (result.job_id, result.status) == (job_id, "succeeded")
    assert len(await runs_of(env, job_id)) == 1


async def test_terminating_the_parent_cancels_the_job_it_follows(env: Env) -> None:
    # Gone for good (no newer run): as a child's REQUEST_CANCEL, the followed job is cancelled.
    job_id, parent_id, _ = await follower_of_a_running_http_job(env)
    await env.client.get_workflow_handle(parent_id).terminate(reason="operator: test")
    await ended_cancelled_by_consumer(env, job_id)


async def test_a_worker_shutting_down_under_the_follower_leaves_the_job_running(env: Env) -> None:
    # The follower's activity runs on a worker of its own queue, which shuts down (a
    # deploy) with no grace: the SDK cancels the attempt (worker_shutdown). The job runs
    # on; the next attempt, on the worker that replaces it, follows it to its success.
    env.replay.faults.slow_images_s = 30.0
    body = task(f"follow-shutdown-{short_id()}")
    job_id = (await env.http.post("/jobs", json=body)).json()["job"]["job_id"]
    await fetching(env, job_id)
    deps = SimpleNamespace(settings=env.stack.settings, pool=await env.stack.ledger(), client=env.client)
    queue = f"followers-{short_id()}"

    def follower_worker() -> Worker:
        return Worker(
            env.client,
            task_queue=queue,
            activities=[FollowActivity(deps).follow_job],  # type: ignore[arg-type]
            graceful_shutdown_timeout=timedelta(0),
        )

    async with follower_worker():
        handle = await env.client.start_workflow(
            FollowingParent.run,
            {"task": body, "queue": queue},
            id=f"following-{short_id()}",
            task_queue=env.parent_queue,
        )
        await eventually(lambda: following(env, handle.id), timeout_s=30, what="the parent follows the job")
        await asyncio.sleep(2 * POLL_S)  # the attempt is waiting, heartbeating
    await asyncio.sleep(2 * POLL_S)
    record = await env.stack.job(job_id)
    assert (record.completed_at, record.cancel_requested_at) == (None, None), record

    env.replay.faults.slow_images_s = 0.0
    async with follower_worker():
        state: JobState = await handle.result()
    assert (state.job_id, str(state.status)) == (job_id, "succeeded")
    assert (await activity_attempts(env.client, handle.id))["follow_job"] >= 2


async def test_a_follower_retried_on_a_worker_configured_otherwise_still_follows_its_job(env: Env) -> None:
    # A deploy that changes the configuration restarts the workers: the follower's attempt
    # is stopped (worker_shutdown) and the next one runs on a worker whose configuration no
    # longer admits new jobs of the target (accept_jobs = false; or lists it no more). That
    # attempt admitted the Task again, as a new caller's, and was refused non-retryably —
    # the parent told "refused" of a job that ran on and succeeded. A retry follows the job
    # its attempt was attached to (its heartbeat names it).
    env.replay.faults.slow_images_s = 30.0
    body = task(f"follow-reconfigured-{short_id()}")
    job_id = (await env.http.post("/jobs", json=body)).json()["job"]["job_id"]
    await fetching(env, job_id)
    pool = await env.stack.ledger()
    settings = env.stack.settings
    closed = settings.model_copy(
        update={"targets": [t.model_copy(update={"accept_jobs": False}) for t in settings.targets]}
    )
    queue = f"followers-{short_id()}"

    def follower_worker(configured: Any) -> Worker:
        deps = SimpleNamespace(settings=configured, pool=pool, client=env.client)
        return Worker(
            env.client,
            task_queue=queue,
            activities=[FollowActivity(deps).follow_job],  # type: ignore[arg-type]
            graceful_shutdown_timeout=timedelta(0),
        )

    async with follower_worker(settings):
        handle = await env.client.start_workflow(
            FollowingParent.run,
            {"task": body, "queue": queue},
            id=f"following-{short_id()}",
            task_queue=env.parent_queue,
        )
        await eventually(lambda: following(env, handle.id), timeout_s=30, what="the parent follows the job")
        await asyncio.sleep(2 * POLL_S)  # the attempt is waiting, heartbeating
    assert (await env.http.post("/jobs", json=task(f"new-{short_id()}"))).status_code == 202  # still open here

    env.replay.faults.slow_images_s = 0.0
    async with follower_worker(closed):
        state: JobState = await handle.result()
    assert (state.job_id, str(state.status)) == (job_id, "succeeded")
    assert (await activity_attempts(env.client, handle.id))["follow_job"] >= 2


async def follower_paused(env: Env, parent_id: str) -> bool:
    described = await env.client.get_workflow_handle(parent_id).describe()
    return any(a.paused for a in described.raw_description.pending_activities)


@pytest.mark.parametrize(
    ("why", "cancels_the_job"),
    [
        ("cancel_requested", True),  # the parent was cancelled
        ("not_found", True),  # the parent is gone: terminated, timed out, reset (as a child's REQUEST_CANCEL)
        ("worker_shutdown", False),  # the worker running the follower stops (a deploy)
        ("timed_out", False),  # its heartbeat was late: Temporal runs another attempt
        ("paused", False),  # an operator's pause
        ("reset", False),  # an operator's reset of the activity
    ],
)
async def test_only_the_parents_own_cancel_cancels_the_followed_job(env: Env, why: str, cancels_the_job: bool) -> None:
    env.replay.faults.slow_images_s = 30.0
    body = task(f"follow-{why}-{short_id()}")
    job_id = (await env.http.post("/jobs", json=body)).json()["job"]["job_id"]
    await fetching(env, job_id)
    pool = await env.stack.ledger()
    deps = SimpleNamespace(settings=env.stack.settings, pool=pool, client=env.client)
    activity_env = ActivityEnvironment()
    follow = asyncio.ensure_future(activity_env.run(FollowActivity(deps).follow_job, FollowJob(task=body)))  # type: ignore[arg-type]
    await asyncio.sleep(POLL_S)  # admitted, waiting
    assert not follow.done()

    activity_env.cancel(ActivityCancellationDetails(**{why: True}))
    with pytest.raises((asyncio.CancelledError, ApplicationError)) as stopped:
        await asyncio.wait_for(follow, 60)
    if cancels_the_job:
        await ended_cancelled_by_consumer(env, job_id)
        return
    # Not the parent's wish: the job runs on, and the attempt fails retryable (or as
    # Temporal's pause / reset) so that a next attempt follows it again.
    if isinstance(stopped.value, ApplicationError):
        assert not stopped.value.non_retryable
    await asyncio.sleep(2 * POLL_S)
    record = await env.stack.job(job_id)
    assert (record.completed_at, record.cancel_requested_at) == (None, None), record
    env.replay.faults.slow_images_s = 0.0
    assert (await env.stack.wait_terminal(job_id, 60)).business_status == "success"


async def test_a_parent_of_an_ended_job_gets_its_outcome_and_adds_no_run(env: Env) -> None:
    body = task(f"attach-ended-{short_id()}")
    handle = await start_job(env.client, body, task_queue=env.stack.task_queue)
    first: JobState = await handle.result()
    runs = await runs_of(env, handle.id)

    result: OneNewWorkResult = await (await parent(env, body)).result()
    assert (result.job_id, result.status) == (handle.id, "succeeded")
    assert [d.split()[-1] for d in result.deliveries] == [d.work_id for d in first.deliveries]
    assert await runs_of(env, handle.id) == runs


async def test_the_child_example_runs_a_job_then_attaches_to_it(env: Env) -> None:
    key = f"example-child-{short_id()}"

    def example() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(ROOT / "examples" / "child_job.py"), "--address", env.address,
             "--task-queue", env.stack.task_queue, "--key", key],
            capture_output=True, text=True, timeout=120, cwd=ROOT,
        )  # fmt: skip

    first = await asyncio.to_thread(example)
    assert first.returncode == 0, first.stdout + first.stderr
    assert f"job demo@manual-{key}: succeeded (business status success)" in first.stdout
    again = await asyncio.to_thread(example)
    assert again.returncode == 0, again.stdout + again.stderr
    assert first.stdout.splitlines()[1:] == again.stdout.splitlines()[1:]  # the same job, the same outcome
    assert len(await runs_of(env, f"demo@manual-{key}")) == 1


# ---- a workflow in another namespace, through the Nexus endpoint --------------------------


async def test_a_caller_in_another_namespace_runs_a_job_through_nexus(env: Env) -> None:
    body = task(f"nexus-{short_id()}")
    result: TeamStepResult = await (await team_step(env, body)).result()

    job_id = f"demo@manual-{body['idempotency_key']}"
    assert (result.job_id, result.status, result.business_status) == (job_id, "succeeded", "success")
    job = (await env.http.get(f"/jobs/{job_id}")).json()
    assert job["status"] == "succeeded" and job["idempotency_key"] == body["idempotency_key"]
    assert [d.split()[-1] for d in result.deliveries] == [d["work_id"] for d in job["result"]["deliveries"]]
    assert len(await runs_of(env, job_id)) == 1


async def test_nexus_refusals_carry_the_protocol_code(env: Env) -> None:
    invalid = task(f"nexus-bad-{short_id()}", constraints={"limit": "many"})
    refused: TeamStepResult = await (await team_step(env, invalid)).result()
    assert refused.refused == "invalid_params"
    assert await runs_of(env, f"demo@manual-{invalid['idempotency_key']}") == []

    used = task(f"nexus-used-{short_id()}")
    assert (await (await team_step(env, used)).result()).status == "succeeded"
    other = task(used["idempotency_key"], query={"tags": ["風景"]})
    conflict: TeamStepResult = await (await team_step(env, other)).result()
    assert conflict.refused == "idempotency_conflict"


async def test_a_task_larger_than_post_jobs_takes_is_refused_by_every_caller(env: Env) -> None:
    # POST /jobs refuses a body over api.max_body_bytes (413 invalid_params); the same
    # Task through Nexus, a child start or follow_job is refused alike — before, its
    # labels (the one unbounded member) were stored in the ledger whole, up to
    # Temporal's payload limit.
    limit = env.stack.settings.api.max_body_bytes
    big = task(f"big-{short_id()}")
    big["labels"] = {"note": "x" * limit}
    assert (await env.http.post("/jobs", json=big)).status_code == 413

    through_nexus: TeamStepResult = await (await team_step(env, big)).result()
    assert through_nexus.refused == "invalid_params" and str(limit) in (through_nexus.message or "")
    as_child: OneNewWorkResult = await (await parent(env, {**big, "idempotency_key": f"big-{short_id()}"})).result()
    assert as_child.refused == "invalid_params" and str(limit) in (as_child.message or "")
    pool = await env.stack.ledger()
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM jobs WHERE idempotency_key LIKE 'big-%'") == 0

    # A Task under the limit is admitted whatever the way.
    fits = task(f"fits-{short_id()}")
    fits["labels"] = {"note": "x" * (limit // 2)}
    assert (await (await team_step(env, fits)).result()).status == "succeeded"


async def test_a_nexus_caller_of_a_job_whose_id_another_workflow_holds_gets_the_job_once_it_runs(env: Env) -> None:
    # A running workflow of another type under the job's id (a user's, named in curaflow's
    # id scheme): the operation's start attached its completion to that workflow — the
    # job never ran, and the caller was handed that workflow's result. Now the start is
    # retried until the id is free; the reconciler starts the job and the caller gets it.
    body = task(f"nexus-held-{short_id()}")
    job_id = f"demo@manual-{body['idempotency_key']}"
    squatter = await env.client.start_workflow(Squatter.run, id=job_id, task_queue=env.parent_queue)
    handle = await team_step(env, body)

    async def admitted() -> bool:
        return (await env.http.get(f"/jobs/{job_id}")).status_code == 200

    await eventually(admitted, timeout_s=30, what="the job admitted")
    assert (await env.stack.job(job_id)).workflow_started_at is None  # nothing attached to the workflow
    await squatter.signal(Squatter.proceed)
    result: TeamStepResult = await handle.result()
    assert (result.job_id, result.status, result.business_status) == (job_id, "succeeded", "success")
    assert (await env.client.get_workflow_handle(job_id).describe()).workflow_type == "JobWorkflow"


@pytest.mark.parametrize("ended", ["refused", "cancelled"])
async def test_a_nexus_caller_whose_start_met_a_task_run_that_never_held_the_job_gets_its_jobs_outcome(
    env: Env, ended: str
) -> None:
    # Another client's Task run waits out its start delay under the job id (a JobWorkflow,
    # not yet admitted: it holds no job). A Nexus `start_job` with the same key and other
    # params is admitted, and its start attached the operation's completion to that run
    # (USE_EXISTING). When the run admitted ITS Task it failed `idempotency_conflict` (or its
    # client cancelled it first) — and the caller was handed that run's end: told its Task
    # was refused while its job, admitted, was then run by the reconciler. Now the start
    # waits (retried) until the run holds the job or closed; the caller gets its job's outcome.
    key = f"nexus-delayed-{ended[:3]}-{short_id()}"
    job_id = f"demo@manual-{key}"
    foreign = await env.client.start_workflow(
        "JobWorkflow", task(key, query={"tags": ["風景"]}), id=job_id, task_queue=env.stack.task_queue,
        start_delay=timedelta(seconds=4), **JOB_START_OPTIONS,
    )  # fmt: skip
    handle = await team_step(env, task(key))

    async def admitted() -> bool:
        return (await env.http.get(f"/jobs/{job_id}")).status_code == 200

    await eventually(admitted, timeout_s=30, what="the job admitted")
    if ended == "cancelled":
        await foreign.cancel()
    with pytest.raises(WorkflowFailureError):
        await foreign.result()
    result: TeamStepResult = await handle.result()
    assert (result.refused, result.job_id, result.status) == (None, job_id, "succeeded"), result
    await env.stack.wait_terminal(job_id, 60)
    assert (await env.http.get(f"/jobs/{job_id}")).json()["status"] == "succeeded"
    assert await closed_status(env.client, job_id) == WorkflowExecutionStatus.COMPLETED  # the job's own run


async def test_the_same_key_twice_through_nexus_is_one_job_and_one_outcome(env: Env) -> None:
    env.replay.faults.slow_images_s = 3.0
    body = task(f"nexus-twice-{short_id()}")
    first, second = await team_step(env, body), await team_step(env, body)
    one, two = await asyncio.gather(first.result(), second.result())
    env.replay.faults.slow_images_s = 0.0

    job_id = f"demo@manual-{body['idempotency_key']}"
    assert one == two and one.status == "succeeded" and one.job_id == job_id
    assert len(await runs_of(env, job_id)) == 1
    # Once the job ended, the same key answers at once with the same outcome, adding nothing.
    started = time.monotonic()
    third: TeamStepResult = await (await team_step(env, body)).result()
    assert third == one and time.monotonic() - started < 15
    assert len(await runs_of(env, job_id)) == 1


async def test_a_failed_job_reaches_the_nexus_caller_with_its_final_state(env: Env) -> None:
    body = task(f"nexus-none-{short_id()}", query={"tags": ["no-such-tag-anywhere"]})
    result: TeamStepResult = await (await team_step(env, body)).result()
    assert result.status == "failed" and result.business_status == "no_candidate"
    again: TeamStepResult = await (await team_step(env, body)).result()  # ended: answered at once
    assert again == result


async def test_cancelling_the_nexus_caller_mid_fetch_cancels_the_job(env: Env) -> None:
    env.replay.faults.slow_images_s = 30.0
    body = task(f"nexus-cancel-{short_id()}")
    handle = await team_step(env, body)
    job_id = f"demo@manual-{body['idempotency_key']}"
    await fetching(env, job_id)

    await handle.cancel()
    await ended_cancelled_by_consumer(env, job_id)
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED


async def bounded(env: Env, body: dict[str, Any], **options: Any) -> Any:
    """Start ``BoundedCaller`` for ``body`` with the Nexus ``options``; returns its handle."""
    return await env.callers.start_workflow(
        BoundedCaller.run,
        {"endpoint": env.endpoint, "task": body, **options},
        id=f"bounded-{short_id()}",
        task_queue=env.caller_queue,
    )


async def test_a_caller_that_stops_waiting_leaves_the_job_running_and_its_key_answers_it(env: Env) -> None:
    # What Nexus gives a handler no word of: the operation's schedule-to-close timeout,
    # and the caller's run ending while the job runs (terminated here; timed out, or
    # ended after a TRY_CANCEL / ABANDON, alike). The caller was told no outcome; the job
    # runs to its end; the same Task again answers that end at once (docs/temporal.md).
    env.replay.faults.slow_images_s = 30.0
    timed, ended = task(f"nexus-s2c-{short_id()}"), task(f"nexus-term-{short_id()}")
    # Long enough for the operation to start (a timeout before that starts nothing: the
    # handler admits the job within a second), far shorter than the job, held by its slow
    # images until released below. The test waits it out (10 s before: 13.6 s a run).
    short = await bounded(env, timed, schedule_to_close_s=5)
    gone = await bounded(env, ended)
    await fetching(env, f"demo@manual-{timed['idempotency_key']}")
    await fetching(env, f"demo@manual-{ended['idempotency_key']}")
    assert await short.result() == {"failed": "TimeoutError"}
    await gone.terminate(reason="test: the caller goes away")
    await asyncio.sleep(2 * POLL_S)
    for body in (timed, ended):
        record = await env.stack.job(f"demo@manual-{body['idempotency_key']}")
        assert (record.completed_at, record.cancel_requested_at) == (None, None), record

    env.replay.faults.slow_images_s = 0.0
    for body in (timed, ended):
        job_id = f"demo@manual-{body['idempotency_key']}"
        assert (await env.stack.wait_terminal(job_id, 60)).business_status == "success"
        again: TeamStepResult = await (await team_step(env, body)).result()
        assert (again.job_id, again.status) == (job_id, "succeeded")
        assert len(await runs_of(env, job_id)) == 1


async def test_the_cancel_job_operation_cancels_a_running_http_job(env: Env) -> None:
    env.replay.faults.slow_images_s = 30.0
    answer = await env.http.post("/jobs", json=task(f"nexus-cancel-op-{short_id()}"))
    job_id = answer.json()["job"]["job_id"]
    await fetching(env, job_id)

    state: JobState = await env.callers.execute_workflow(
        CancelJobCaller.run,
        {"endpoint": env.endpoint, "job_id": job_id},
        id=f"cancel-op-{short_id()}",
        task_queue=env.caller_queue,
    )
    assert state.job_id == job_id and state.cancel_requested
    await ended_cancelled_by_consumer(env, job_id)


@pytest.mark.parametrize("job_id", ["demo@manual-nul\x00key", "no-such-job"])
async def test_the_cancel_job_operation_refuses_an_id_no_job_has_at_once(env: Env, job_id: str) -> None:
    # POST /jobs/{id}/cancel answers 404 unknown_job for an id no job can have (a NUL:
    # PostgreSQL text cannot hold it) as for an id no job has. Through Nexus the NUL
    # failed the handler's ledger read, a retryable internal error: the operation was
    # retried until the caller's own timeout, the caller told only that.
    with pytest.raises(WorkflowFailureError) as failed:
        await env.callers.execute_workflow(
            CancelJobCaller.run,
            {"endpoint": env.endpoint, "job_id": job_id},
            id=f"cancel-op-{short_id()}",
            task_queue=env.caller_queue,
            execution_timeout=timedelta(seconds=30),
        )
    refusal = refusal_of(failed.value)
    assert refusal is not None, failed.value.cause
    assert (refusal.code, refusal.http_status, refusal.detail["reason"]) == ("invalid_params", 404, "unknown_job")
    assert "\x00" not in refusal.detail["job_id"]


async def test_the_nexus_example_runs_a_job_from_another_namespace(env: Env) -> None:
    key = f"example-nexus-{short_id()}"
    result = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, str(ROOT / "examples" / "nexus_caller.py"), "--address", env.address,
         "--namespace", CALLERS_NAMESPACE, "--endpoint", env.endpoint, "--key", key],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"job demo@manual-{key}: succeeded (business status success)" in result.stdout

    async def listed() -> bool:
        return [w async for w in env.client.list_workflows(f'WorkflowId = "demo@manual-{key}"')] != []

    await eventually(listed, timeout_s=10, what="the job in curaflow's namespace")


async def raw_call(env: Env, operation: str, text: str) -> Any:
    """``RawCaller``: ``operation`` with ``text`` as its input's JSON text; its result, or
    the refusal it failed with (None when it failed without one)."""
    try:
        return await env.callers.execute_workflow(
            RawCaller.run,
            {"endpoint": env.endpoint, "operation": operation, "text": text},
            id=f"raw-{short_id()}",
            task_queue=env.caller_queue,
            execution_timeout=timedelta(seconds=60),
        )
    except WorkflowFailureError as err:
        return refusal_of(err)


@pytest.mark.parametrize(
    ("written", "reason"),
    [
        ('"constraints":{"limit":1,"limit":2}', "duplicate_member"),
        ('"constraints":{"limit":2},"constraints":{"limit":1}', "duplicate_member"),
        ('"query":{"tags":["風景"]},"unknown":NaN', "not_json_number"),
        ('"unknown":1e400', "number_out_of_range"),
        ('"unknown":-Infinity', "not_json_number"),
    ],
)
async def test_a_nexus_input_whose_json_text_has_no_one_meaning_is_refused_as_post_jobs_refuses_it(
    env: Env, written: str, reason: str
) -> None:
    # A caller's own SDK writes its input, and not every caller writes JSON with one
    # meaning (a hand-built payload, another SDK's raw JSON, a proxy). POST /jobs and a
    # Temporal start refuse such a text; through Nexus the SDK's decoder took one reading
    # of it — the last of a member given twice, NaN and 1e400 of a member nobody reads —
    # and the job was admitted and ran.
    key = f"raw-{short_id()}"
    text = (
        '{"protocol_version":"1","job_type":"candidate_search","idempotency_key":"' + key + '",'
        '"params":{"target_id":"demo",' + written + "}}"
    )
    over_http = await env.http.post("/jobs", content=text.encode(), headers={"Content-Type": "application/json"})
    assert over_http.status_code == 400 and over_http.json()["error"]["detail"]["reason"] == reason

    refused = await raw_call(env, "start_job", text)
    assert refused is not None and not isinstance(refused, dict), refused
    assert (refused.code, refused.http_status, refused.detail["reason"]) == ("invalid_params", 400, reason)
    assert refused.message == over_http.json()["error"]["message"]
    pool = await env.stack.ledger()
    assert await pool.fetchval("SELECT count(*) FROM jobs WHERE idempotency_key = $1", key) == 0
    assert await runs_of(env, f"demo@manual-{key}") == []

    # The same Task written once is admitted and runs: the key was left usable.
    state = await raw_call(env, "start_job", text.replace(written, '"constraints":{"limit":1}'))
    assert isinstance(state, dict) and state["status"] == "succeeded", state


async def test_a_nexus_cancel_whose_json_text_names_two_jobs_cancels_neither(env: Env) -> None:
    env.replay.faults.slow_images_s = 30.0
    ids = [(await env.http.post("/jobs", json=task(f"raw-cancel-{short_id()}"))).json()["job"]["job_id"] for _ in "12"]
    first, second = ids
    await fetching(env, first)
    await fetching(env, second)

    refused = await raw_call(env, "cancel_job", f'{{"job_id":"{first}","job_id":"{second}"}}')
    assert refused is not None and not isinstance(refused, dict), refused
    assert (refused.code, refused.detail["reason"], refused.detail["member"]) == (
        "invalid_params",
        "duplicate_member",
        "job_id",
    )
    for job_id in (first, second):
        record = await env.stack.job(job_id)
        assert (record.completed_at, record.cancel_requested_at) == (None, None), record

    state = await raw_call(env, "cancel_job", f'{{"job_id":"{first}"}}')  # written once: that job
    assert isinstance(state, dict) and state["job_id"] == first and state["cancel_requested"], state
    await ended_cancelled_by_consumer(env, first)
    assert (await env.stack.job(second)).cancel_requested_at is None

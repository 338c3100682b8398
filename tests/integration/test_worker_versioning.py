"""Temporal Worker Versioning (``temporal.deployment_name`` / ``temporal.build_id``) on the
dev server: real worker processes, one PostgreSQL, the replay source.

Each build's workers poll as their Worker Deployment Version; a job's execution is
PINNED to the version current when it started and finishes there, while the account's
single source-queue owner (unversioned, whichever process holds the lease) serves the
``acquire`` / ``search`` / ``fetch`` activities of every version.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import TaskQueueType, VersioningBehavior
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest, SetWorkerDeploymentCurrentVersionRequest
from temporalio.client import Client
from temporalio.common import VersioningBehavior as Behavior
from temporalio.common import WorkerDeploymentVersion
from temporalio.service import RPCError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker, WorkerDeploymentConfig

from curaflow.domain.projection import job_status
from tests.conftest import StackFactory
from tests.fakes.replay import ReplayServer
from tests.fakes.webhook import Reply, WebhookReceiver
from tests.support import Stack, eventually, short_id, temporal_workflow, whsec

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def versioned(tmp_path: Path, deployment: str, build_id: str, task_queue: str | None = None) -> dict[str, Any]:
    out = "out"
    temporal: dict[str, Any] = {"deployment_name": deployment, "build_id": build_id}
    if task_queue:
        temporal["task_queue"] = task_queue
    return {
        "temporal": temporal,
        "routes": {out: {"kind": "directory", "path": str(tmp_path / f"delivered-{build_id}")}},
        "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [out]}],
    }


# Temporal's default ``matching.numTaskqueueReadPartitions``: the dev server splits each task queue in four.
PARTITIONS = 4


async def make_current(client: Client, deployment: str, build_id: str, task_queue: str) -> None:
    """Set the deployment's current version once its workers have polled (as the CLI's
    ``temporal worker deployment set-current-version`` does), then wait until every partition
    of ``task_queue``'s workflow queue routes to it.

    The set returns once the root partition holds the new routing; the other partitions
    learn it asynchronously, and a job started meanwhile is pinned to the previous version
    by whichever partition takes its first workflow task (a start "during" the rollout).
    """

    async def done() -> bool:
        try:
            await client.workflow_service.set_worker_deployment_current_version(
                SetWorkerDeploymentCurrentVersionRequest(
                    namespace=client.namespace, deployment_name=deployment, build_id=build_id
                )
            )
        except RPCError:
            return False  # the version is not registered yet
        return True

    await eventually(done, timeout_s=30, what=lambda: f"{deployment}.{build_id} current")

    async def routed() -> bool:
        for partition in range(PARTITIONS):
            name = task_queue if partition == 0 else f"/_sys/{task_queue}/{partition}"
            described = await client.workflow_service.describe_task_queue(
                DescribeTaskQueueRequest(
                    namespace=client.namespace,
                    task_queue=TaskQueue(name=name),
                    task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
                )
            )
            if described.versioning_info.current_deployment_version.build_id != build_id:
                return False
        return True

    await eventually(routed, timeout_s=30, what=lambda: f"every partition of {task_queue} on {build_id}")


async def pinned_build(client: Client, job_id: str) -> tuple[int, str]:
    info = (await client.get_workflow_handle(job_id).describe()).raw_description.workflow_execution_info
    return info.versioning_info.behavior, info.versioning_info.deployment_version.build_id


async def test_a_job_in_flight_finishes_on_its_build_after_the_next_build_became_current(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client, webhook: WebhookReceiver
) -> None:
    deployment = f"curaflow-{short_id()}"
    config = versioned(tmp_path, deployment, "1")
    config["routes"]["hook"] = {"kind": "webhook", "url": webhook.url + "/slow", "secret": whsec()}
    config["targets"][0]["routes"] = ["out", "hook"]
    webhook.script["/slow"] = [Reply(200, delay_s=12.0)]  # held while the rollout happens
    old: Stack = make_stack(config)
    await old.start_worker()
    await make_current(temporal_client, deployment, "1", old.task_queue)
    first = await old.admit(old.task(query={"tags": ["オリジナル"]}))
    await asyncio.wait_for(webhook.arrived.wait(), timeout=60)  # its delivery is in flight

    # The rollout: the next build's workers join the same task queue, then become current.
    new: Stack = make_stack(versioned(tmp_path, deployment, "2", task_queue=old.task_queue))
    await new.start_worker()
    await make_current(temporal_client, deployment, "2", old.task_queue)
    second = await new.admit(new.task(query={"tags": ["オリジナル"]}))
    record = await new.wait_terminal(second)
    assert record.cells[0].state == "submitted", record
    assert (await old.job(first)).completed_at is None  # still in flight when build 2 took over

    record = await old.wait_terminal(first)
    assert record.cells[0].state == "submitted", record
    assert [r.path for r in webhook.received] == ["/slow"]
    # The last workflow task of each (its finish, after the switch for the first) was
    # completed by the build its execution is pinned to.
    assert await pinned_build(temporal_client, first) == (VersioningBehavior.VERSIONING_BEHAVIOR_PINNED, "1")
    assert await pinned_build(temporal_client, second) == (VersioningBehavior.VERSIONING_BEHAVIOR_PINNED, "2")


@workflow.defn(name="NothingPinned")
class NothingPinned:
    """The one workflow of a build that runs nothing: its worker only makes its version known."""

    @workflow.run
    async def run(self) -> None:
        return None


async def test_a_job_pinned_to_a_build_no_worker_runs_ends_naming_the_pin_not_the_deadline(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client, replay: ReplayServer
) -> None:
    """An operator pins a running job's execution to a build (``temporal workflow
    update-options --versioning-override-behavior pinned``) whose workers are then gone: its
    next workflow task waits for a worker of that build that never comes, and the reconciler
    ends the job at its deadline. It said ``expired`` / ``execution_timeout``, "The job ran
    past its deadline; retry with a longer deadline_ms": a remedy that does not help. The
    job still expires (``deadline_exceeded``), under the reason that names the pin:
    ``pinned_build_unserved`` (owner ``operator``)."""
    stack: Stack = make_stack(
        {
            "pixiv": {"api_url": replay.url},
            "routes": {"out": {"kind": "directory", "path": str(tmp_path / "delivered")}},
            "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": ["out"]}],
        }
    )
    await stack.start_worker()
    deployment, build = f"gone-{short_id()}", "gone-build"
    gone = Worker(
        temporal_client,
        task_queue=stack.task_queue,
        workflows=[NothingPinned],
        workflow_runner=UnsandboxedWorkflowRunner(),  # it runs nothing; the sandbox would import this module
        deployment_config=WorkerDeploymentConfig(
            version=WorkerDeploymentVersion(deployment_name=deployment, build_id=build),
            use_worker_versioning=True,
            default_versioning_behavior=Behavior.PINNED,
        ),
    )
    replay.faults.slow_images_s = 8.0  # the download outlasts the pin; it ends well before the deadline
    try:
        async with gone:  # the build's worker polls the job's queue: Temporal knows the version there
            job_id = await stack.admit({**stack.task(query={"tags": ["オリジナル"]}), "deadline_ms": 25_000})

            def pinned() -> bool:
                done = temporal_workflow(
                    stack.settings.temporal.address or "", "update-options", "-w", job_id,
                    "--versioning-override-behavior", "pinned", "--versioning-override-deployment-name", deployment,
                    "--versioning-override-build-id", build,
                )  # fmt: skip
                return done.returncode == 0

            await eventually(lambda: asyncio.to_thread(pinned), timeout_s=20, interval_s=0.5, what="the pin")
        # The build's worker is gone. The download ends on the (unversioned) source queue; the
        # workflow task it schedules waits for a worker of the pinned build.
        record = await stack.wait_terminal(job_id, timeout_s=90)
    finally:
        replay.faults.slow_images_s = 0.0
    cell = record.cells[0]
    assert (cell.state, cell.reason) == ("failed", "pinned_build_unserved"), cell
    assert cell.reason_message is not None and "retry with a longer deadline_ms" not in cell.reason_message, cell
    assert (
        "pinned (Worker Versioning) to a build none of whose workers took its workflow task" in cell.reason_message
    ), cell
    assert job_status(record.cells) == "expired", record  # deadline_exceeded: still the deadline's code
    # The sentence cannot name the build (it is the run's); the reconciler's log does.
    logged = [line for line in stack.worker_log().splitlines() if "reconciler.pinned_build_unserved" in line]
    assert logged and deployment in logged[0] and build in logged[0], logged
    await temporal_client.get_workflow_handle(job_id).terminate(reason="test: the pinned run")

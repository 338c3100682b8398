"""Which closed run is a verdict on a job (:mod:`curaflow.ledger.reconciler.executions`)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.deployment.v1 import WorkerDeploymentVersion
from temporalio.api.enums.v1 import VersioningBehavior
from temporalio.api.workflow.v1 import (
    PendingWorkflowTaskInfo,
    VersioningOverride,
    WorkflowExecutionInfo,
    WorkflowExecutionVersioningInfo,
)
from temporalio.api.workflowservice.v1 import DescribeWorkflowExecutionResponse
from temporalio.client import WorkflowExecutionStatus
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from curaflow.domain.execution import JOB_STATUS, JOB_TYPE
from curaflow.domain.verdicts import FinishCause
from curaflow.ledger.reconciler import Execution, PinnedBuild, describe_execution, pinned_build, run_held_a_job


def described(*pairs: SearchAttributePair[Any]) -> Any:
    return SimpleNamespace(typed_search_attributes=TypedSearchAttributes(list(pairs)))


@pytest.mark.parametrize(
    ("pairs", "held"),
    [
        ((), False),  # a Task run that refused its Task, or stopped before admitting it
        ((SearchAttributePair(JOB_TYPE, "candidate_search"),), True),  # started with, or admitted, a job
        ((SearchAttributePair(JOB_STATUS, "running"),), True),  # a job's own run started without attributes
    ],
)
def test_a_run_held_a_job_when_it_carries_the_jobs_type_or_status(pairs: tuple[Any, ...], held: bool) -> None:
    assert run_held_a_job(described(*pairs)) is held


def test_a_run_that_closed_after_the_job_without_holding_it_is_told_apart() -> None:
    refused = Execution(exists=True, close_cause=FinishCause.WORKFLOW_FAILED, closed_at_ms=2_000, held_job=False)
    assert refused.closed_without_job(1_000)
    assert not refused.closed_without_job(3_000)  # an earlier run under the id: not the job's at all
    assert refused.closed_cause_for(1_000) == FinishCause.WORKFLOW_FAILED  # the cause, asked second
    held = Execution(exists=True, close_cause=FinishCause.TERMINATED, closed_at_ms=2_000)
    assert not held.closed_without_job(1_000)
    assert held.closed_cause_for(1_000) == FinishCause.TERMINATED
    assert not Execution(exists=True).closed_without_job(0)  # running
    assert not Execution(exists=False).closed_without_job(0)


def test_a_run_refused_as_not_the_jobs_is_no_verdict_whatever_steps_it_ran() -> None:
    # A Task run that never admitted its Task ran nothing: no verdict on a job it did not start.
    unadmitted = Execution(exists=True, close_cause=FinishCause.WORKFLOW_FAILED, closed_at_ms=2_000, held_job=False)
    assert unadmitted.no_verdict(1_000, started=False)
    assert not unadmitted.no_verdict(1_000, started=True)  # another run started the job
    # A run refused as not the job's (its input was not the stored one) may have run the
    # job's own steps first: its failure is still no verdict (2026-12-07; it ended the job
    # internal_error before).
    refused = Execution(
        exists=True, close_cause=FinishCause.WORKFLOW_FAILED, closed_at_ms=2_000, held_job=False, refused=True
    )
    assert refused.no_verdict(1_000, started=False) and refused.no_verdict(1_000, started=True)
    assert not refused.no_verdict(3_000, started=True)  # an earlier run under the id
    held = Execution(exists=True, close_cause=FinishCause.TERMINATED, closed_at_ms=2_000)
    assert not held.no_verdict(1_000, started=False) and not held.no_verdict(1_000, started=True)


GONE = WorkerDeploymentVersion(deployment_name="curaflow", build_id="b1")
PINNED = VersioningBehavior.VERSIONING_BEHAVIOR_PINNED
AUTO = VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE


@pytest.mark.parametrize(
    ("info", "pinned"),
    [
        # an operator's override (temporal workflow update-options --versioning-override-behavior pinned)
        (
            WorkflowExecutionVersioningInfo(
                versioning_override=VersioningOverride(
                    pinned=VersioningOverride.PinnedOverride(
                        behavior=VersioningOverride.PINNED_OVERRIDE_BEHAVIOR_PINNED, version=GONE
                    )
                )
            ),
            PinnedBuild("curaflow", "b1", override=True),
        ),
        # one_time: pinned until a workflow task completes on that version
        (
            WorkflowExecutionVersioningInfo(
                behavior=AUTO,
                versioning_override=VersioningOverride(
                    one_time=VersioningOverride.OneTimeOverride(target_deployment_version=GONE)
                ),
            ),
            PinnedBuild("curaflow", "b1", override=True),
        ),
        # the build that started it pinned it (curaflow's versioned workers: every workflow PINNED)
        (
            WorkflowExecutionVersioningInfo(behavior=PINNED, deployment_version=GONE),
            PinnedBuild("curaflow", "b1", False),
        ),
        # an auto_upgrade override unpins a PINNED run; an AUTO_UPGRADE run, an unversioned one: not pinned
        (
            WorkflowExecutionVersioningInfo(
                behavior=PINNED, deployment_version=GONE, versioning_override=VersioningOverride(auto_upgrade=True)
            ),
            None,
        ),
        (WorkflowExecutionVersioningInfo(behavior=AUTO, deployment_version=GONE), None),
        (WorkflowExecutionVersioningInfo(), None),
    ],
    ids=[
        "override-pinned",
        "override-one-time",
        "pinned-by-its-build",
        "override-auto-upgrade",
        "auto-upgrade",
        "unversioned",
    ],
)
def test_the_build_a_run_is_pinned_to_is_read_from_its_versioning_info(
    info: WorkflowExecutionVersioningInfo, pinned: PinnedBuild | None
) -> None:
    assert pinned_build(info) == pinned


def test_only_a_pinned_runs_waiting_workflow_task_is_read_as_its_build_unserved() -> None:
    build = PinnedBuild("curaflow", "b1", override=True)
    assert Execution(exists=True, waiting_since_ms=5_000, pinned=build).pinned_unserved_since_ms == 5_000
    assert Execution(exists=True, waiting_since_ms=5_000).pinned_unserved_since_ms is None  # not pinned
    assert Execution(exists=True, pinned=build).pinned_unserved_since_ms is None  # no task waits


def running(raw: DescribeWorkflowExecutionResponse) -> Any:
    """A client whose describe of any id answers ``raw`` for a running run."""
    described = SimpleNamespace(status=WorkflowExecutionStatus.RUNNING, raw_description=raw)

    async def describe() -> Any:
        return described

    return SimpleNamespace(get_workflow_handle=lambda job_id: SimpleNamespace(describe=describe))


def pinned_waiting(*, attempt: int, started: bool = False) -> DescribeWorkflowExecutionResponse:
    """A run an override pinned to build ``b1`` whose workflow task was scheduled at 5 s (first at 4 s)."""
    override = VersioningOverride(
        pinned=VersioningOverride.PinnedOverride(
            behavior=VersioningOverride.PINNED_OVERRIDE_BEHAVIOR_PINNED, version=GONE
        )
    )
    raw = DescribeWorkflowExecutionResponse(
        workflow_execution_info=WorkflowExecutionInfo(
            versioning_info=WorkflowExecutionVersioningInfo(versioning_override=override)
        ),
        pending_workflow_task=PendingWorkflowTaskInfo(
            scheduled_time=Timestamp(seconds=5), original_scheduled_time=Timestamp(seconds=4), attempt=attempt
        ),
    )
    if started:
        raw.pending_workflow_task.started_time.CopyFrom(Timestamp(seconds=6))
    return raw


async def test_a_pinned_runs_first_workflow_task_no_worker_took_is_read_from_the_describe() -> None:
    # never taken (a sticky timeout counts no attempt): unserved since its original scheduled time
    execution = await describe_execution(running(pinned_waiting(attempt=1)), "j", now=60_000)
    assert execution.pinned == PinnedBuild("curaflow", "b1", override=True)
    assert execution.pinned_unserved_since_ms == 4_000 and execution.waiting_for_worker_ms == 56_000
    # an earlier attempt was taken and failed (a bad deploy's worker, or an unpinned worker
    # holding it when the pin came: Temporal failed it), this attempt no worker took: unserved
    # since this attempt was scheduled, not since the first
    retried = await describe_execution(running(pinned_waiting(attempt=3)), "j", now=60_000)
    assert retried.pinned_unserved_since_ms == 5_000 and retried.waiting_for_worker_ms == 56_000
    # a worker holds it now
    held = await describe_execution(running(pinned_waiting(attempt=1, started=True)), "j", now=60_000)
    assert held.pinned_unserved_since_ms is None

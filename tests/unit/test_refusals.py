"""A refusal travels as a Temporal failure and is read back at any depth; a job's identity decides a replay."""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError, ChildWorkflowError, NexusOperationError, RetryState

from curaflow.domain.job_failure import job_failure, state_of
from curaflow.domain.messages import JobState
from curaflow.domain.verdicts.failures import attempt_detail
from curaflow.protocol.errors import ProtocolError, invalid_params
from curaflow.protocol.task import identity_conflict, validate_task
from curaflow.temporal.refusals import as_failure, refusal_of


def wrapped(inner: BaseException, depth: int) -> BaseException:
    """``inner`` under a ``NexusOperationError`` and ``depth`` more layers, as a caller gets
    it (a handler's ``OperationError`` adds one)."""
    error = inner
    for n in range(depth):
        outer = ApplicationError(f"layer {n}", type="OperationError")
        outer.__cause__ = error
        error = outer
    nexus = NexusOperationError(
        "nexus operation completed unsuccessfully",
        scheduled_event_id=1,
        endpoint="e",
        service="s",
        operation="o",
        operation_token="",
    )
    nexus.__cause__ = error
    return nexus


@pytest.mark.parametrize("depth", [0, 1, 2])
def test_a_refusal_is_read_back_at_any_depth(depth: int) -> None:
    refused = invalid_params("params.constraints.limit must be an integer >= 1", field="params.constraints.limit")
    error = wrapped(as_failure(refused), depth)
    read = refusal_of(error)
    assert read is not None
    assert (read.code, read.http_status, read.message, read.detail) == (
        "invalid_params",
        400,
        refused.message,
        {"field": "params.constraints.limit"},
    )


def test_a_refusal_through_a_child_workflow_error() -> None:
    conflict = ProtocolError("idempotency_conflict", 409, "first used with different params", {"job_id": "j"})
    child = ChildWorkflowError(
        "Child Workflow execution failed",
        namespace="default",
        workflow_id="j",
        run_id="r",
        workflow_type="JobWorkflow",
        initiated_event_id=1,
        started_event_id=2,
        retry_state=RetryState.NON_RETRYABLE_FAILURE,
    )
    child.__cause__ = as_failure(conflict)
    read = refusal_of(child)
    assert read is not None and (read.code, read.http_status) == ("idempotency_conflict", 409)


def test_a_jobs_own_failure_is_no_refusal_and_its_state_is_read_at_any_depth() -> None:
    state = JobState(job_id="j", status="failed", stage="failed", business_status="no_candidate")  # type: ignore[arg-type]
    for depth in (0, 1, 2):
        error = wrapped(job_failure(state), depth)
        assert refusal_of(error) is None
        assert state_of(error) == state
    assert state_of(ApplicationError("x", type="invalid_params")) is None
    assert refusal_of(ApplicationError("a bug", type="KeyError")) is None


@pytest.mark.parametrize("depth", [0, 1, 2])
def test_a_steps_retryable_failure_carrying_its_attempt_is_no_refusal(depth: int) -> None:
    # A cell's step fails retryably typed by a reason that is also a protocol code, its
    # first detail the attempt's number (curaflow.process.telemetry.AttemptOnFailure): a
    # dict, as a refusal's is. A refusal is never retryable (as_failure).
    step = ApplicationError("route answered 502", attempt_detail(3), type="delivery_failed")
    assert refusal_of(wrapped(step, depth)) is None


KEY = "Night-1"
JOB = "demo@manual-night-1"


def check(task_params: dict[str, object], *, key: str | None = KEY, params: dict[str, object] | None = None,
          target: str = "demo", task_key: str = KEY) -> str | None:  # fmt: skip
    task = validate_task({"protocol_version": "1", "job_type": "candidate_search", "idempotency_key": task_key,
                          "params": {"target_id": target, **task_params}})  # fmt: skip
    conflict = identity_conflict(JOB, key=key, target_ids=["demo"], params=params, task=task, target_id=target)
    return None if conflict is None else str(conflict.detail and conflict.message)


def test_the_identity_of_a_replay() -> None:
    stored = validate_task({"protocol_version": "1", "job_type": "candidate_search", "idempotency_key": KEY,
                            "params": {"target_id": "demo", "query": {"tags": ["a"]}}}).params  # fmt: skip
    assert check({"query": {"tags": ["a"]}}, params=stored) is None
    assert (
        check({"query": {"tags": ["b"]}}, params=stored) == "the idempotency key was first used with different params"
    )
    assert check({}, params=None) is None  # a job that keeps no params compares none
    assert check({}, task_key="night-1") == "the job id is owned by a different idempotency key"
    assert check({}, key=None, task_key="night-1") is None  # no key carried: the job id (lowercased) decides
    assert check({}, target="other") == "the idempotency key was first used for a different target"

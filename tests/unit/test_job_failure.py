"""How a failed / expired job ends its execution, and how a client reads its state back."""

from __future__ import annotations

import pytest
from temporalio.api.failure.v1 import Failure
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError, ChildWorkflowError, RetryState

from curaflow.domain.job_failure import JOB_FAILURE_TYPES, job_failure, state_of
from curaflow.domain.messages import JobState
from curaflow.domain.models import CellSnapshot
from curaflow.temporal.connection import DATA_CONVERTER


def failed_state(status: str) -> JobState:
    cell = CellSnapshot(target_id="demo", state="failed", reason="no_candidate")  # type: ignore[arg-type]
    return JobState(job_id="demo@manual-k", status=status, business_status="no_candidate", cells=[cell])  # type: ignore[arg-type]


@pytest.mark.parametrize("status", ["failed", "expired"])
async def test_a_failed_job_fails_with_its_state_and_a_client_reads_it_back(status: str) -> None:
    state = failed_state(status)
    error = job_failure(state)
    assert error.type == JOB_FAILURE_TYPES[status] and error.non_retryable
    assert error.message == f"job demo@manual-k {status} (business status no_candidate; demo: no_candidate)"
    # Through the wire, as a client gets it: the details decode as plain JSON.
    failure = Failure()
    await DATA_CONVERTER.encode_failure(error, failure)
    decoded = await DATA_CONVERTER.decode_failure(failure)
    assert isinstance(decoded, ApplicationError)
    assert state_of(WorkflowFailureError(cause=decoded)) == state
    child = ChildWorkflowError("child failed", namespace="default", workflow_id="w", run_id="r",
                               workflow_type="JobWorkflow", initiated_event_id=1, started_event_id=2,
                               retry_state=RetryState.NON_RETRYABLE_FAILURE)  # fmt: skip
    child.__cause__ = decoded
    assert state_of(child) == state


def test_other_failures_carry_no_job_state() -> None:
    refused = ApplicationError("bad", {"code": "invalid_params"}, type="invalid_params", non_retryable=True)
    assert state_of(WorkflowFailureError(cause=refused)) is None
    assert state_of(None) is None
    with pytest.raises(KeyError):
        job_failure(failed_state("succeeded"))

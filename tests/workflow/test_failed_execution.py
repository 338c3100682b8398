"""How a job's end becomes its execution's end (DESIGN.md decision 15, :mod:`curaflow.domain.job_failure`).

``succeeded`` completes with the final ``JobState``; ``cancelled`` by a cancel ends
``Canceled``; ``failed`` / ``expired`` fail the execution with a non-retryable
``job_failed`` / ``job_expired`` whose first detail is the final state — the same state
the ``status`` query answers, and the search attributes say.
"""

from __future__ import annotations

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from curaflow.domain.job_failure import state_of
from curaflow.domain.messages import JobState
from tests.workflow.fakes import Act
from tests.workflow.harness import Env

pytestmark = pytest.mark.integration


async def failure_of(env: Env, handle: object) -> tuple[ApplicationError, JobState]:
    """The execution's failure and the job state it carries."""
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()  # type: ignore[attr-defined]
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError), cause
    state = state_of(failed.value)
    assert state is not None, cause
    return cause, state


async def test_a_failed_job_fails_its_execution_with_its_final_state(env: Env) -> None:
    env.fakes.on("search", "t", Act("fail", error_type="auth_failed", non_retryable=True))
    handle = await env.start(env.job())

    cause, state = await failure_of(env, handle)

    assert (cause.type, cause.non_retryable) == ("job_failed", True)
    assert cause.message == f"job {handle.id} failed (business status failed; t: auth_failed)"
    assert state == await env.status(handle)  # the query and the failure agree
    assert (state.status, state.business_status, state.alertable) == ("failed", "failed", True)
    assert [(c.state, c.reason) for c in state.cells] == [("failed", "auth_failed")]
    assert (await env.closed(handle)) == WorkflowExecutionStatus.FAILED
    attributes = await env.search_attributes(handle)
    assert (attributes["JobStatus"], attributes["BusinessStatus"]) == ("failed", "failed")


async def test_an_expired_job_fails_its_execution_as_job_expired(env: Env) -> None:
    env.fakes.on("fetch", "t", Act("hang"))
    handle = await env.start(env.job(deadline_ms=1500))

    cause, state = await failure_of(env, handle)

    assert (cause.type, cause.non_retryable) == ("job_expired", True)
    assert (state.status, [c.reason for c in state.cells]) == ("expired", ["execution_timeout"])
    assert (await env.search_attributes(handle))["JobStatus"] == "expired"


async def test_a_job_with_one_cell_delivered_succeeds_though_another_failed(env: Env) -> None:
    env.fakes.on("deliver", "two", Act("fail", error_type="route_refused", non_retryable=True), route="a")
    handle = await env.start(env.job({"one": ["a"], "two": ["a"]}))

    final = await handle.result()  # completes: the job succeeded, in part

    assert (final.status, final.business_status) == ("succeeded", "partial_success")
    assert [(c.target_id, c.state, c.reason) for c in final.cells] == [
        ("one", "submitted", None),
        ("two", "failed", "route_refused"),
    ]
    attributes = await env.search_attributes(handle)
    assert (attributes["JobStatus"], attributes["BusinessStatus"]) == ("succeeded", "partial_success")


async def test_a_job_whose_every_cell_found_nothing_new_fails_unalerted_as_no_candidate(env: Env) -> None:
    env.fakes.on("search", "t", Act("no_candidate"))
    handle = await env.start(env.job())

    cause, state = await failure_of(env, handle)

    assert cause.type == "job_failed"
    assert (state.business_status, state.alertable, state.cells[0].reason) == ("no_candidate", False, "no_candidate")
    assert env.fakes.steps() == ["search"]  # nothing to fetch or deliver

"""How a job's end becomes its execution's end (DESIGN.md decision 15, :mod:`curaflow.domain.job_failure`).

``succeeded`` completes with the final ``JobState``; ``cancelled`` by a cancel ends
``Canceled``; ``failed`` / ``expired`` fail the execution with a non-retryable
``job_failed`` / ``job_expired`` whose first detail is the final state — the same state
the ``status`` query answers, and the search attributes say.
"""

from __future__ import annotations

import json
from typing import Any

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


async def patches_and_state_upserts(handle: object) -> tuple[list[str], list[dict[str, Any]]]:
    """The patch ids the execution recorded and each ``JobStatus`` / ``BusinessStatus``
    upsert it made (name → value, None for an unset), in order."""
    patches: list[str] = []
    upserts: list[dict[str, Any]] = []
    async for event in handle.fetch_history_events():  # type: ignore[attr-defined]
        if event.HasField("marker_recorded_event_attributes"):
            attrs = event.marker_recorded_event_attributes
            if attrs.marker_name == "core_patch":
                patches.append(json.loads(attrs.details["patch-data"].payloads[0].data)["id"])
        elif event.HasField("upsert_workflow_search_attributes_event_attributes"):
            fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
            said = {
                name: json.loads(payload.data) if payload.data else None
                for name, payload in fields.items()
                if name in ("JobStatus", "BusinessStatus")
            }
            if said:
                upserts.append(said)
    return patches, upserts


async def test_a_run_added_under_an_ended_jobs_id_with_its_job_input_reports_it_and_publishes_no_state(
    env: Env,
) -> None:
    """A run started with a job's ``JobInput`` after the job ended (a reset of the job's
    closed run, a start under its id with Temporal's default reuse policy): its first step
    finds the job ended and held by another run. Before ``job-input-reporting-run`` it
    published ``running`` and the job's end, so the failed jobs' list named the job twice;
    now it ends as the job did and carries no ``JobStatus`` (the ``queued`` it was started
    with is removed before anything else is said)."""
    env.fakes.on("search", "t", Act("ended_in_another_run"))
    handle = await env.start(env.job())

    cause, state = await failure_of(env, handle)

    assert (cause.type, state.status, state.business_status) == ("job_failed", "failed", "no_candidate")
    assert state == await env.status(handle)
    attributes = await env.search_attributes(handle)
    assert "JobStatus" not in attributes and "BusinessStatus" not in attributes
    assert attributes["JobType"] == "candidate_search"
    patches, upserts = await patches_and_state_upserts(handle)
    assert patches == ["core-v3", "job-input-reporting-run"]
    assert upserts == [{"JobStatus": None}]
    assert env.fakes.steps() == ["search"]


async def test_a_job_that_finds_nothing_records_no_reporting_marker(env: Env) -> None:
    """The normal path pays nothing for the rule above: one marker, the state published."""
    env.fakes.on("search", "t", Act("no_candidate"))
    handle = await env.start(env.job())
    await failure_of(env, handle)

    patches, upserts = await patches_and_state_upserts(handle)
    assert patches == ["core-v3"]
    assert upserts == [{"JobStatus": "running"}, {"JobStatus": "failed", "BusinessStatus": "no_candidate"}]

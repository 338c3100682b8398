"""A Temporal client's start: ``JobWorkflow`` admits its own Task (the ``admit`` local
activity) and answers the ``admission`` update (update-with-start, :func:`curaflow.jobs.submit.start_job`).

The fake ``admit`` answers as the ledger's admission does (:meth:`tests.workflow.fakes.Fakes.admit_as`);
the refusals are the real ones (:func:`activities.admit.refusal`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

from curaflow.domain.cells import CellState
from curaflow.domain.messages import JobState
from curaflow.domain.models import CellSnapshot
from curaflow.jobs.submit import ADMISSION_UPDATE, start_job
from curaflow.protocol.errors import ProtocolError
from curaflow.protocol.task import manual_job_id
from curaflow.temporal.refusals import admission_failure, ledger_outage, refusal_of
from tests.support import short_id
from tests.workflow.fakes import Act
from tests.workflow.harness import Env, admitting, ends_as_the_job_did, serving, task_for
from tests.workflow.test_push_bound import record

pytestmark = pytest.mark.integration


async def test_update_with_start_admits_once_and_runs_the_job(env: Env) -> None:
    body = admitting(env, f"k-{short_id()}")

    handle = await start_job(env.client, body, task_queue=env.queue)

    final: JobState = JobState.model_validate(await handle.result())
    assert final.status == "succeeded" and final.job_id == handle.id
    assert env.fakes.admits == [body]  # the execution admitted its own Task; the update did not again
    assert env.fakes.steps() == ["search", "fetch", "deliver"]
    attributes = await env.search_attributes(handle)
    assert (attributes["JobStatus"], attributes["TargetIds"]) == ("succeeded", ["t"])


async def test_the_same_task_again_is_the_same_job_and_another_is_refused(env: Env) -> None:
    key = f"k-{short_id()}"
    body = admitting(env, key)
    env.fakes.on("search", "t", Act("held"))
    handle = await start_job(env.client, body, task_queue=env.queue)

    again = await start_job(env.client, dict(body), task_queue=env.queue)  # while it runs
    assert again.id == handle.id
    with pytest.raises(ProtocolError) as refused:
        await start_job(env.client, task_for(key, query={"tags": ["other"]}), task_queue=env.queue)
    assert (refused.value.code, refused.value.http_status) == ("idempotency_conflict", 409)
    assert refused.value.detail == {"reason": "idempotency_conflict", "job_id": handle.id}

    env.fakes.release("search")
    assert JobState.model_validate(await handle.result()).status == "succeeded"
    assert len(env.fakes.admits) == 2  # the start's Task, then the other Task (refused)
    assert env.fakes.steps() == ["search", "fetch", "deliver"]  # one job ran, once


async def test_an_invalid_update_input_is_rejected_without_a_trace(env: Env) -> None:
    body = admitting(env, f"k-{short_id()}")
    env.fakes.on("search", "t", Act("held"))
    handle = await start_job(env.client, body, task_queue=env.queue)

    for not_a_task in ("a string", 5, ["a", "list"]):
        with pytest.raises(WorkflowUpdateFailedError) as rejected:
            await handle.execute_update(ADMISSION_UPDATE, not_a_task)
        cause = rejected.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == "invalid_params", cause

    env.fakes.release("search")
    await handle.result()
    accepted = await env.events(handle, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)
    assert len(accepted) == 1  # the start's own update; a rejected one leaves no event


@pytest.mark.parametrize(
    ("change", "code", "detail"),
    [
        ({"params": {"target_id": ""}}, "invalid_params", {"field": "params.target_id"}),
        ({"deadline_ms": 5}, "invalid_params", {"field": "deadline_ms"}),
        ({"protocol_version": "9"}, "unsupported_protocol_version", {"received": "9", "supported": ["1"]}),
    ],
    ids=["target", "deadline", "version"],
)
async def test_a_refused_task_fails_the_execution_with_the_protocol_code(
    env: Env, change: dict[str, Any], code: str, detail: dict[str, Any]
) -> None:
    key = f"k-{short_id()}"
    body = {**admitting(env, key), **change}
    handle = await env.client.start_workflow("JobWorkflow", body, id=f"t@manual-{key}", task_queue=env.queue)

    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and (cause.type, cause.non_retryable) == (code, True)
    assert cause.details[0]["detail"] == detail, cause.details
    assert env.fakes.steps() == [] and env.fakes.finishes == []  # no job: nothing ran, nothing finished
    assert await env.events(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED) == []  # never the task


async def test_until_its_task_is_admitted_the_execution_holds_no_job(env: Env) -> None:
    body = admitting(env, f"k-{short_id()}")
    env.fakes.admit_hold = asyncio.Event()  # a slow ledger
    job_id = manual_job_id("t", body["idempotency_key"])
    handle: WorkflowHandle[Any, Any] = await env.client.start_workflow(
        "JobWorkflow", body, id=job_id, task_queue=env.queue
    )

    state = await env.status_until(handle, lambda s: s.stage == "admitting", "admitting")
    assert (state.job_id, state.cells, state.cancel_requested) == (job_id, [], False)
    # No job yet: a progress signal has no cell to move, and the cancel waits for the job.
    await handle.signal("cell_progress", CellSnapshot(target_id="t", state=CellState.SELECTED, work_id="x"))
    await handle.signal("cancel")
    assert (await env.status(handle)).cancel_requested

    env.fakes.admit_hold.set()
    assert await env.closed(handle) == WorkflowExecutionStatus.CANCELED
    assert env.fakes.steps() == []  # admitted behind the barrier: no step opened
    assert [f.cause for f in env.fakes.finishes] == ["cancelled"] and len(env.fakes.cancels) == 1
    assert (await env.status(handle)).status == "cancelled"


@pytest.mark.parametrize(
    ("status", "failure"),
    [("succeeded", None), ("cancelled", None), ("failed", "job_failed"), ("expired", "job_expired")],
)
async def test_a_task_of_a_job_that_already_ended_answers_its_final_state(
    env: Env, status: str, failure: str | None
) -> None:
    key = f"k-{short_id()}"
    ended = JobState(job_id=manual_job_id("t", key), status=status, stage="done", business_status="x")
    body = admitting(env, key, final=ended)

    handle = await start_job(env.client, body, task_queue=env.queue)  # the update answers the final state

    if status == "cancelled":  # the result contract: a cancelled job ends Canceled (it completed before)
        with pytest.raises(WorkflowFailureError) as cancelled:
            await handle.result()
        assert isinstance(cancelled.value.cause, CancelledError)
        assert len(env.fakes.cancels) == 1  # the run asked for its own cancel
        assert JobState.model_validate(await handle.query("status")) == ended
    else:  # succeeded: its state; failed or expired fails this execution too (decision 15), its state in the failure
        await ends_as_the_job_did(handle, ended, failure)
    assert env.fakes.steps() == [] and env.fakes.finishes == []  # nothing runs again
    # a run that reports an ended job is not the job: it publishes no state of its own
    attributes = await env.search_attributes(handle)
    assert "JobStatus" not in attributes and "BusinessStatus" not in attributes
    assert attributes["TargetIds"] == ["t"]


@pytest.mark.parametrize(("status", "failure"), [("succeeded", None), ("expired", "job_expired")])
async def test_the_jobs_own_run_admitting_after_the_job_ended_publishes_its_end(
    env: Env, status: str, failure: str | None
) -> None:
    """Admission says the job ended and that this run is the job's own nevertheless
    (``Admitted.own_run``: the run a reset started from the job's open run, the job's only
    run admitting late): the run publishes the job's end as the job's, runs nothing, and
    ends as the job did."""
    key = f"k-{short_id()}"
    ended = JobState(job_id=manual_job_id("t", key), status=status, stage="done", business_status="x")
    body = admitting(env, key, final=ended, own_run=True)

    handle = await start_job(env.client, body, task_queue=env.queue)

    await ends_as_the_job_did(handle, ended, failure)
    assert env.fakes.steps() == [] and env.fakes.finishes == []  # nothing runs again
    attributes = await env.search_attributes(handle)
    assert (attributes["JobStatus"], attributes["BusinessStatus"]) == (status, "x")
    assert attributes["TargetIds"] == ["t"]


@pytest.mark.parametrize(
    ("args", "detail"),
    [([], {"arguments": 0}), (["a string"], {"received": "string"}), ([{}, {}], {"arguments": 2})],
    ids=["none", "string", "two"],
)
async def test_a_start_that_is_not_one_json_object_fails_at_once(
    env: Env, args: list[Any], detail: dict[str, Any]
) -> None:
    handle = await env.client.start_workflow("JobWorkflow", args=args, id=f"bad-{short_id()}", task_queue=env.queue)

    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "invalid_params"
    assert cause.details[0]["detail"] == {"reason": "workflow_input", **detail}
    assert env.fakes.admits == [] and env.fakes.steps() == []
    assert await env.events(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED) == []  # never the task


async def test_a_job_input_under_an_id_that_is_not_its_job_id_is_refused_at_once(env: Env) -> None:
    # A copy of a job's input under a fresh id (the UI's "start workflow like this one"):
    # it ran the job's steps and finished the job. Refused now, as a Task under another id.
    inp = env.job()
    env.fakes.jobs[inp.job_id] = inp
    copy_id = f"copy-{short_id()}"
    handle = await env.client.start_workflow("JobWorkflow", inp, id=copy_id, task_queue=env.queue)

    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and (cause.type, cause.non_retryable) == ("invalid_params", True)
    assert cause.details[0]["detail"] == {"field": "workflow_id", "expected": inp.job_id, "received": copy_id}
    assert env.fakes.steps() == [] and env.fakes.finishes == [] and env.fakes.cancels == []
    assert await env.events(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED) == []
    assert "JobStatus" not in await env.search_attributes(handle)


def json_payload(text: bytes) -> Any:
    """``text`` as another client sends it: a ``json/plain`` payload, bytes as written."""
    from temporalio.api.common.v1 import Payload
    from temporalio.common import RawValue

    return RawValue(Payload(metadata={"encoding": b"json/plain"}, data=text))


def task_text(key: str, params: str) -> bytes:
    """A Task's JSON text for target ``t`` under ``key`` with ``params`` written as given."""
    head = f'{{"protocol_version":"1","job_type":"candidate_search","idempotency_key":"{key}","params":'
    return f"{head}{params}}}".encode()


#: Texts ``POST /jobs`` refuses (``curaflow.protocol.json_text``), with the detail it answers.
NO_ONE_MEANING = {
    "duplicate-member": (
        '{"target_id":"t","constraints":{"limit":0,"limit":2}}',
        {"reason": "duplicate_member", "member": "limit"},
    ),
    "nan": ('{"target_id":"t","constraints":{"limit":NaN}}', {"reason": "not_json_number"}),
    "infinity": ('{"target_id":"t","constraints":{"limit":-Infinity}}', {"reason": "not_json_number"}),
    "out-of-range": ('{"target_id":"t","constraints":{"limit":1e400}}', {"reason": "number_out_of_range"}),
    "huge-integer": ('{"target_id":"t","constraints":{"limit":' + "9" * 5000 + "}}", {"reason": "number_out_of_range"}),
}  # fmt: skip


@pytest.mark.parametrize("case", list(NO_ONE_MEANING))
async def test_a_start_whose_json_text_has_no_one_meaning_fails_at_once_with_the_http_refusal(
    env: Env, case: str
) -> None:
    # A decoder that reads such a text anyway takes one reading of it (the last member, inf,
    # the integer) — POST /jobs refuses it, so the start must too, before anything is admitted.
    key = f"k-{short_id()}"
    admitting(env, key)
    params, detail = NO_ONE_MEANING[case]
    handle = await env.client.start_workflow(
        "JobWorkflow", json_payload(task_text(key, params)), id=f"t@manual-{key}", task_queue=env.queue
    )

    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and (cause.type, cause.non_retryable) == ("invalid_params", True)
    assert cause.details[0]["detail"]["reason"] == detail["reason"] and cause.details[0]["detail"] == (
        cause.details[0]["detail"] | detail
    )
    assert env.fakes.admits == [] and env.fakes.steps() == [] and env.fakes.finishes == []
    assert await env.events(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED) == []  # never the task


async def test_a_job_input_whose_json_text_has_no_one_meaning_is_refused_at_once(env: Env) -> None:
    # Any start input is read as POST /jobs reads a body, a job's own JobInput included: one
    # written with a member twice was run as its last reading.
    inp = env.job()
    env.fakes.jobs[inp.job_id] = inp
    text = b'{"plan_id":"another",' + inp.model_dump_json().encode()[1:]
    handle = await env.client.start_workflow("JobWorkflow", json_payload(text), id=inp.job_id, task_queue=env.queue)

    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "invalid_params"
    assert cause.details[0]["detail"] == {"reason": "duplicate_member", "member": "plan_id"}
    assert env.fakes.steps() == [] and env.fakes.finishes == []


async def test_a_json_start_that_post_jobs_cannot_read_gets_its_refusal(env: Env) -> None:
    # Bytes that are no UTF-8 were refused "request body must be a JSON object", which says
    # nothing of what was wrong; POST /jobs names it.
    key = f"k-{short_id()}"
    text = b"\xff" + task_text(key, '{"target_id":"t"}')
    handle = await env.client.start_workflow(
        "JobWorkflow", json_payload(text), id=f"t@manual-{key}", task_queue=env.queue
    )

    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "invalid_params"
    assert cause.details[0]["detail"] == {"reason": "not_utf8", "offset": 0}
    assert env.fakes.admits == []


async def test_an_update_or_query_task_with_no_one_meaning_is_refused_and_changes_nothing(env: Env) -> None:
    body = admitting(env, f"k-{short_id()}")
    handle = await start_job(env.client, body, task_queue=env.queue)
    await handle.result()
    key = body["idempotency_key"]
    # The job's own Task, its key written twice: the last reading is the job's.
    twice = task_text(key, '{"target_id":"t"}').replace(
        b'"idempotency_key"', b'"idempotency_key":"x","idempotency_key"'
    )
    detail = {"reason": "duplicate_member", "member": "idempotency_key"}

    answer = await handle.query("admission_answer", json_payload(twice))
    assert answer["state"] is None and answer["refusal"]["detail"] == detail, answer
    # A closed run takes no update; an open one's validator refuses it (no history event).
    second = admitting(env, f"k-{short_id()}")
    env.fakes.admit_hold = asyncio.Event()
    running = await env.client.start_workflow(
        "JobWorkflow", second, id=manual_job_id("t", second["idempotency_key"]), task_queue=env.queue
    )
    again = task_text(second["idempotency_key"], '{"target_id":"t"}').replace(
        b'"idempotency_key"', b'"idempotency_key":"x","idempotency_key"'
    )
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await running.execute_update(ADMISSION_UPDATE, json_payload(again))
    cause = refused.value.cause
    assert isinstance(cause, ApplicationError) and cause.details[0]["detail"] == detail
    env.fakes.admit_hold.set()
    assert JobState.model_validate(await running.result()).status == "succeeded"
    assert env.fakes.admits == [body, second]
    assert await env.events(running, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED) == []


async def test_a_run_that_holds_no_job_answers_no_job_state_but_its_refusal(env: Env) -> None:
    # The `status` query of a run that refused its input answered {status: queued, stage:
    # admitting} for ever (a worker replays the closed run): `temporal workflow query
    # --type status` of the id said a job was queued where nothing was, and GET /jobs/{id}
    # answers 404. Likewise a stale JobInput's run, failed unknown_job, said queued/searching.
    from temporalio.client import WorkflowQueryFailedError

    key = f"k-{short_id()}"
    bad = {**admitting(env, key), "deadline_ms": 5}
    refused = await env.client.start_workflow("JobWorkflow", bad, id=f"t@manual-{key}", task_queue=env.queue)
    junk = await env.client.start_workflow("JobWorkflow", "junk", id=f"junk-{short_id()}", task_queue=env.queue)
    env.fakes.finish_error = "unknown_job"  # a stale JobInput: the ledger does not know its job
    unknown = await env.start(env.job())
    for handle in (refused, junk, unknown):
        assert await env.closed(handle) == WorkflowExecutionStatus.FAILED
    env.fakes.finish_error = None
    for handle, code in ((refused, "invalid_params"), (junk, "invalid_params"), (unknown, "unknown_job")):
        with pytest.raises(WorkflowQueryFailedError) as failed:
            await handle.query("status")
        assert code in str(failed.value) and "holds no job" in str(failed.value), failed.value

    # Guard: while its Task is being admitted, a run says so (it may yet hold the job).
    body = admitting(env, f"k-{short_id()}")
    env.fakes.admit_hold = asyncio.Event()
    waiting = await env.client.start_workflow(
        "JobWorkflow", body, id=manual_job_id("t", body["idempotency_key"]), task_queue=env.queue
    )
    await env.status_until(waiting, lambda s: s.stage == "admitting", "admitting")
    env.fakes.admit_hold.set()
    assert JobState.model_validate(await waiting.result()).status == "succeeded"


@pytest.mark.parametrize(
    ("status", "closed"),
    [
        ("succeeded", WorkflowExecutionStatus.COMPLETED),
        ("cancelled", WorkflowExecutionStatus.CANCELED),
        ("failed", WorkflowExecutionStatus.FAILED),
    ],
)
async def test_a_signal_with_start_cancel_of_an_ended_jobs_id_ends_as_the_job_did(
    env: Env, status: str, closed: WorkflowExecutionStatus
) -> None:
    """A signal-with-start of ``cancel`` under an ended job's id (Temporal's default reuse
    policy adds a run): the run admits its Task, finds the job ended and only reports it —
    the cancel has nothing left to stop. Before ``reporting-run-cancel`` the run of a job
    that ended ``cancelled`` waited, open for ever, for a Temporal cancel request no one
    would send (it never asked for one): the id read Running with the job long ended."""
    key = f"k-{short_id()}"
    job_id = manual_job_id("t", key)
    ended = JobState(job_id=job_id, status=status, stage="done", business_status="x")
    body = admitting(env, key, final=ended)

    handle: WorkflowHandle[Any, Any] = await env.client.start_workflow(
        "JobWorkflow", body, id=job_id, task_queue=env.queue, start_signal="cancel"
    )

    assert await env.closed(handle) == closed
    assert JobState.model_validate(await handle.query("status")) == ended
    assert env.fakes.steps() == [] and env.fakes.finishes == []  # nothing runs again
    if status == "cancelled":
        record(env, job_id, "job_reporting_run_cancel_signal_core_v3")


#: ``admit``'s budget at the test's scale: the deployment's retry policy
#: (``workflows.steps.ADMIT_CONFIG``, 5 minutes of retries) bounded by two attempts.
TWO_ADMIT_ATTEMPTS = workflow.LocalActivityConfig(
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_attempts=2),
    summary="admit the task",
)


@pytest.fixture
async def short_admission(
    temporal_client: Client, temporal_address: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Env]:
    """An :class:`Env` whose workers run ``JobWorkflow`` unsandboxed, with ``admit``'s
    budget :data:`TWO_ADMIT_ATTEMPTS` (the sandbox would import its own ``workflows.job``)."""
    monkeypatch.setattr("workflows.job.ADMIT_CONFIG", TWO_ADMIT_ATTEMPTS)
    async with serving(temporal_client, temporal_address, sandboxed=False) as env:
        yield env


async def test_a_ledger_away_for_the_whole_admission_is_curaflows_failure_never_the_tasks_refusal(
    short_admission: Env,
) -> None:
    # A run whose `admit` step ran out of its budget on the ledger's outage failed
    # non-retryable with the step's failure type (asyncpg's ConnectionFailureError before
    # the activity named it ledger_unavailable), and its `status` query said "this run holds
    # no job: ConnectionFailureError": the ledger's outage reported as the Task's refusal.
    env = short_admission
    env.fakes.admit_outage = True
    body = admitting(env, f"k-{short_id()}")
    handle: WorkflowHandle[Any, Any] = await env.client.start_workflow(
        "JobWorkflow", body, id=manual_job_id("t", body["idempotency_key"]), task_queue=env.queue
    )

    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError), cause
    assert (cause.type, cause.non_retryable) == ("ledger_unavailable", False), (cause.type, cause.message)
    assert cause.details[0] == {
        "owner": "curaflow",
        "reason": "ledger_unavailable",
        "retryable": True,
        "cause": "ledger_unavailable",
    }, cause.details
    assert refusal_of(failed.value) is None  # no protocol refusal: a caller may start again
    assert len(env.fakes.admits) == 2 and env.fakes.steps() == []  # the whole budget; no job ran

    with pytest.raises(WorkflowQueryFailedError) as queried:
        await handle.query("status")
    assert "ledger_unavailable" in str(queried.value), queried.value
    assert "ConnectionFailureError" not in str(queried.value), queried.value

    # Guard: the same budget ended by the Task's refusal stays the Task's.
    env.fakes.admit_outage = False
    refused_body = {**admitting(env, f"k-{short_id()}"), "deadline_ms": 5}
    refused = await env.client.start_workflow(
        "JobWorkflow", refused_body, id=manual_job_id("t", refused_body["idempotency_key"]), task_queue=env.queue
    )
    with pytest.raises(WorkflowFailureError) as refused_failure:
        await refused.result()
    refusal = refusal_of(refused_failure.value)
    assert refusal is not None and refusal.code == "invalid_params", refused_failure.value


@pytest.mark.parametrize(
    ("err", "kind", "cause"),
    [
        (ledger_outage(OSError("connection refused")), "ledger_unavailable", "ledger_unavailable"),
        (ApplicationError("boom", type="AssertionError"), "internal_error", "AssertionError"),
        (
            ApplicationError("x", {"n": 1}, type="ConnectionFailureError", non_retryable=True),
            "internal_error",
            "ConnectionFailureError",
        ),
        (
            ActivityError(
                "timed out",
                scheduled_event_id=1,
                started_event_id=1,
                identity="",
                activity_type="admit",
                activity_id="1",
                retry_state=None,
            ),
            "internal_error",
            "ActivityError",
        ),
    ],
    ids=["ledger", "bug", "unclassified", "activity-error"],
)
def test_an_admission_failure_that_is_no_refusal_is_curaflows_and_retryable(
    err: BaseException, kind: str, cause: str
) -> None:
    failure = admission_failure(err)
    assert (failure.type, failure.non_retryable) == (kind, False)
    assert failure.details[0]["owner"] == "curaflow" and failure.details[0]["cause"] == cause
    assert refusal_of(failure) is None

"""Workflow clients start jobs: a Temporal client starts ``JobWorkflow`` with a Task.

A real worker process, the API in the test process, the Pixiv replay and a directory
route. The Python client starts typed (``JobWorkflow.run`` with the protocol ``Task``);
the ``temporal`` CLI (a Go client) starts with the Task as JSON. Both get the admission of
``POST /jobs``: one key is one job and one execution whoever uses it first.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.common import RetryPolicy, SearchAttributePair, TypedSearchAttributes, WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from curaflow.domain.execution import (
    BUSINESS_STATUS,
    JOB_STATUS,
    JOB_TYPE,
    RUN_END_MARGIN,
    SCHEDULE_ID,
    TARGET_IDS,
    run_end_room_ms,
)
from curaflow.domain.messages import JobInput, JobState
from curaflow.jobs.submit import JOB_START_OPTIONS, job_id_for, start_job
from curaflow.ledger.db import now_ms
from curaflow.ledger.reconciler import FOREIGN_QUEUE_WAIT_MS, unserved_foreign_run
from curaflow.protocol.models import MAX_DEADLINE_MS, Task
from tests.support import (
    DemoStack,
    closed_status,
    demo_stack,
    eventually,
    job_in_stage,
    recorded_history,
    short_id,
    temporal_workflow,
    terminal_job,
)
from workflows.job import JobWorkflow

pytestmark = pytest.mark.integration


Env = DemoStack


@pytest.fixture(scope="module")
async def env(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str, ledger_pool: Any
) -> AsyncIterator[Env]:
    # A run on a queue no worker polls is taken for a mistyped `--task-queue` after
    # FOREIGN_WAIT_MS here instead of the default 20 s, which the foreign-queue test waited
    # for real (no other test of the module leaves a queued job on another queue).
    config = {"foreign_queue_wait_ms": FOREIGN_WAIT_MS}
    async with demo_stack(tmp_path_factory.mktemp("tclients"), temporal_address, database_url, config) as env:
        yield env


#: This module's ``foreign_queue_wait_ms`` (the default: ``FOREIGN_QUEUE_WAIT_MS``, 20 s).
FOREIGN_WAIT_MS = 2_000


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


async def pollers(env: Env, queue: str) -> bool:
    """Whether Temporal lists a poller of ``queue``'s workflow tasks."""
    answer = await env.client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=env.client.namespace,
            task_queue=TaskQueue(name=queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    return bool(answer.pollers)


def cli(env: Env, *args: str) -> subprocess.CompletedProcess[str]:
    return temporal_workflow(env.address, *args)


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


async def test_a_temporal_start_reads_the_key_as_http_does(env: Env) -> None:
    # The key is read by one function on every path: a start whose key is the HTTP job's
    # with other Unicode whitespace around it (U+2028, U+3000) is that job, not another.
    key = f"ws-{short_id()}"
    body = task(key).model_dump(mode="json", exclude_none=True)
    admitted = await env.http.post("/jobs", json=body)
    assert admitted.status_code == 202
    job_id = admitted.json()["job"]["job_id"]

    handle = await start_job(
        env.client, {**body, "idempotency_key": f"\u2028 {key}\u3000"}, task_queue=env.stack.task_queue
    )

    assert handle.id == job_id
    state = JobState.model_validate(await env.client.get_workflow_handle(job_id).result())
    assert state.status == "succeeded"
    listed = await env.http.get("/jobs", params={"idempotency_key": f"{key}\u2028"})
    assert [j["job_id"] for j in listed.json()["jobs"]] == [job_id]
    pool = await env.stack.ledger()
    assert await pool.fetchval("SELECT count(*) FROM jobs WHERE idempotency_key = $1", key) == 1


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
    # The id names no job, and its run says so: its `status` query answered `queued` /
    # `admitting` for ever, where GET /jobs/{id} answers 404.
    asked = await asyncio.to_thread(cli, env, "query", "-w", job_id, "--type", "status")
    said = asked.stdout + asked.stderr
    assert asked.returncode != 0 and "holds no job" in said and "params.constraints.limit" in said, said
    assert (await env.http.get(f"/jobs/{job_id}")).status_code == 404
    # The failed execution does not block the id: the valid Task runs under it.
    good = await env.http.post("/jobs", json={**bad, "params": {"target_id": "demo"}})
    assert good.status_code == 202 and good.json()["job"]["job_id"] == job_id
    record = await env.stack.wait_terminal(job_id, 60)
    assert record.cells[0].state == "submitted", record.cells[0]
    asked = await asyncio.to_thread(cli, env, "query", "-w", job_id, "--type", "status", "--output", "json")
    assert asked.returncode == 0 and '"succeeded"' in asked.stdout, asked.stdout + asked.stderr


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


async def refused_start(env: Env, job_id: str) -> ApplicationError:
    """The failure a refused start ended with; still running after 15 s would be a zombie."""
    assert await closed_status(env.client, job_id, timeout_s=15) == WorkflowExecutionStatus.FAILED
    with pytest.raises(WorkflowFailureError) as failure:
        await env.client.get_workflow_handle(job_id).result()
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.non_retryable
    return cause


async def the_id_stays_usable(env: Env, key: str) -> None:
    """``POST /jobs`` with the key of a refused start runs a job under that id."""
    answer = await env.http.post("/jobs", json=task(key).model_dump(mode="json", exclude_none=True))
    assert answer.status_code == 202, answer.text
    record = await env.stack.wait_terminal(answer.json()["job"]["job_id"], 60)
    assert record.cells[0].state == "submitted", record.cells[0]


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param(["--input", '"just a string"'], id="a-string"),
        pytest.param(["--input", "42"], id="a-number"),
        pytest.param(["--input", "[1, 2]"], id="an-array"),
        pytest.param([], id="no-input"),
        pytest.param(["--input", "{}", "--input", "{}"], id="two-arguments"),
        pytest.param(["--input", '"x"', "--input-meta", "encoding=application/x-unknown"], id="unknown-encoding"),
    ],
)
async def test_any_input_that_is_not_one_json_object_ends_at_once_with_the_http_answer(
    env: Env, extra: list[str]
) -> None:
    key = f"junk-{short_id()}"
    job_id = f"demo@manual-{key}"
    result = await asyncio.to_thread(
        cli, env, "start", "--type", "JobWorkflow", "--task-queue", env.stack.task_queue, "--workflow-id", job_id,
        *extra,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr

    cause = await refused_start(env, job_id)
    # The code and message POST /jobs answers a body that is not a JSON object.
    assert cause.type == "invalid_params"
    assert cause.message == "request body must be a JSON object"
    assert cause.details[0]["detail"]["reason"] == "workflow_input"
    assert "JobInput" not in str(cause.details)
    assert await job_row(env, job_id) is None
    await the_id_stays_usable(env, key)


async def test_two_typed_arguments_and_an_undecodable_payload_end_at_once(env: Env) -> None:
    from temporalio.api.common.v1 import Payload
    from temporalio.common import RawValue

    for args in (
        [task("x").model_dump(mode="json"), task("x").model_dump(mode="json")],
        [RawValue(Payload(metadata={"encoding": b"binary/x-custom"}, data=b"\x00\x01"))],
    ):
        key = f"args-{short_id()}"
        job_id = f"demo@manual-{key}"
        await env.client.start_workflow("JobWorkflow", args=args, id=job_id, task_queue=env.stack.task_queue)
        cause = await refused_start(env, job_id)
        assert cause.type == "invalid_params" and cause.message == "request body must be a JSON object"
        await the_id_stays_usable(env, key)


async def test_a_task_that_also_carries_job_input_fields_is_admitted(env: Env) -> None:
    """The start input is resolved explicitly: any Task member makes it a Task to admit,
    even when the object would also validate as an admitted job's ``JobInput``."""
    key = f"mixed-{short_id()}"
    job_id = f"demo@manual-{key}"
    now = int(time.time() * 1000)
    mixed = {
        **task(key).model_dump(mode="json", exclude_none=True),
        "job_id": job_id, "plan_id": "demo", "created_at_ms": now, "deadline_at_ms": now + 600_000,
        "targets": [{"target_id": "demo", "routes": [{"name": "nowhere", "kind": "directory"}]}],
    }  # fmt: skip
    handle = await env.client.start_workflow(
        "JobWorkflow", mixed, id=job_id, task_queue=env.stack.task_queue, result_type=JobState
    )
    state = await handle.result()
    assert state.status == "succeeded"
    row = await job_row(env, job_id)
    assert row is not None and row["trigger"] == "temporal"


#: Tasks whose JSON text has no one meaning (``curaflow.protocol.json_text``): ``POST /jobs``
#: refuses each with its ``detail.reason``; a parser that reads them anyway takes one reading
#: (the last ``limit``, ``inf``) that the client may not have meant.
AMBIGUOUS_PARAMS = {
    "duplicate-member": '{"target_id":"demo","constraints":{"limit":0,"limit":2}}',
    "out-of-range": '{"target_id":"demo","constraints":{"limit":1e400}}',
    "not-a-json-number": '{"target_id":"demo","constraints":{"limit":Infinity}}',
}


def ambiguous_task(key: str, case: str) -> bytes:
    """A Task's JSON text under ``key`` whose params are :data:`AMBIGUOUS_PARAMS` ``case``."""
    head = f'{{"protocol_version":"1","job_type":"candidate_search","idempotency_key":"{key}","params":'
    return f"{head}{AMBIGUOUS_PARAMS[case]}}}".encode()


async def http_refusal(env: Env, body: bytes) -> dict[str, Any]:
    """What ``POST /jobs`` answers ``body``: its ``code``, ``message`` and ``detail``."""
    answer = await env.http.post("/jobs", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    return {name: error[name] for name in ("code", "message", "detail")}


def refusal_of(cause: ApplicationError) -> dict[str, Any]:
    """The protocol refusal a refused execution or update carries (its first detail)."""
    return {name: cause.details[0][name] for name in ("code", "message", "detail")}


@pytest.mark.parametrize(
    ("case", "client"),
    [
        ("duplicate-member", "cli"),  # the CLI sends --input as written (Go's json.Valid takes it)
        ("out-of-range", "cli"),
        ("not-a-json-number", "python"),  # the SDK's default JSON converter writes inf as Infinity
    ],
)
async def test_a_task_whose_json_has_no_one_meaning_is_refused_as_post_jobs_refuses_it(
    env: Env, case: str, client: str
) -> None:
    # `temporal workflow start --input` of a Task with "limit":0,"limit":2 was admitted with
    # the last limit, 1e400 and Infinity as a limit nobody asked for (dropped: the job ran
    # with the default), while POST /jobs refuses the very same bytes (duplicate_member,
    # number_out_of_range, not_json_number): two readings of one Task, one per door.
    key = f"onemeaning-{short_id()}"
    job_id = f"demo@manual-{key}"
    body = ambiguous_task(key, case)
    if client == "cli":
        started = await asyncio.to_thread(
            cli, env, "start", "--type", "JobWorkflow", "--task-queue", env.stack.task_queue,
            "--workflow-id", job_id, "--id-reuse-policy", "RejectDuplicate", "--input", body.decode(),
        )  # fmt: skip
        assert started.returncode == 0, started.stderr
    else:
        from temporalio.client import Client

        plain = await Client.connect(env.address)  # the SDK's default data converter
        sent = json.loads(body.replace(b"Infinity", b'"inf"'))
        sent["params"]["constraints"]["limit"] = float("inf")
        await plain.start_workflow("JobWorkflow", sent, id=job_id, task_queue=env.stack.task_queue)
    await closed_status(env.client, job_id, timeout_s=30)
    if case == "duplicate-member":
        record_history(env, job_id, "job_ambiguous_task_core_v3")

    cause = await refused_start(env, job_id)
    assert cause.type == "invalid_params"
    assert refusal_of(cause) == await http_refusal(env, body)
    assert await job_row(env, job_id) is None
    await the_id_stays_usable(env, key)


async def test_an_update_or_query_carrying_a_task_with_no_one_meaning_is_refused(env: Env) -> None:
    # The admission update of update-with-start and the admission_answer query read their Task
    # as the start does: a Task that names its key twice is refused by POST /jobs, and was
    # admitted by the update and answered "the same job" by the query (the last key won).
    key = f"onemeaning-uws-{short_id()}"
    job_id = f"demo@manual-{key}"
    body = ambiguous_task(key, "duplicate-member")
    expected = await http_refusal(env, body)
    done = await asyncio.to_thread(
        cli, env, "execute-update-with-start", "--update-name", "admission", "--update-input", body.decode(),
        "--workflow-id", job_id, "--type", "JobWorkflow", "--task-queue", env.stack.task_queue,
        "--id-conflict-policy", "UseExisting", "--id-reuse-policy", "RejectDuplicate", "--input", body.decode(),
    )  # fmt: skip
    assert done.returncode != 0 and expected["message"] in done.stdout + done.stderr, done.stdout + done.stderr
    assert refusal_of(await refused_start(env, job_id)) == expected
    assert await job_row(env, job_id) is None

    ended = f"onemeaning-q-{short_id()}"
    answer = await env.http.post("/jobs", json=task(ended).model_dump(mode="json", exclude_none=True))
    assert answer.status_code == 202, answer.text
    ended_id = answer.json()["job"]["job_id"]
    await env.stack.wait_terminal(ended_id, 60)
    await closed_status(env.client, ended_id)
    twice = (
        '{"protocol_version":"1","job_type":"candidate_search","idempotency_key":"x",'
        f'"idempotency_key":"{ended}","params":{{"target_id":"demo"}}}}'
    ).encode()
    asked = await asyncio.to_thread(
        cli, env, "query", "-w", ended_id, "--type", "admission_answer", "--input", twice.decode(), "--output", "json"
    )
    assert asked.returncode == 0, asked.stderr
    printed = json.loads(asked.stdout)
    answered = printed.get("queryResult", printed)
    answered = answered[0] if isinstance(answered, list) else answered
    assert answered["state"] is None, answered
    assert {name: answered["refusal"][name] for name in ("code", "message", "detail")} == await http_refusal(env, twice)


@pytest.mark.parametrize(
    "args",
    [
        pytest.param([], id="no-input"),
        pytest.param([{}], id="an-empty-object"),
        pytest.param(["push"], id="a-string"),
        pytest.param([{"job_id": 5}], id="a-wrong-type"),
        pytest.param([{"job_id": "x"}, {"job_id": "x"}], id="two-arguments"),
        pytest.param(["unknown-encoding"], id="unknown-encoding"),
    ],
)
async def test_a_push_run_started_by_hand_with_junk_ends_at_once_and_frees_the_push_id(
    env: Env, args: list[Any]
) -> None:
    # EventPushWorkflow decoded its input with the SDK (typed PushInput): a client starting it
    # by hand — under the sweeper's id push-events:<job id>, from the UI's "start workflow
    # like this one" or the CLI — with anything else failed its workflow task for ever. The
    # run stayed Running, and the push sweeper, finding "push-events:<job id>" running,
    # started no push of that job's events at any later tick.
    from temporalio.api.common.v1 import Payload
    from temporalio.api.enums.v1 import EventType
    from temporalio.common import RawValue

    from curaflow.jobs.pushes import push_workflow_id

    if args == ["unknown-encoding"]:
        args = [RawValue(Payload(metadata={"encoding": b"binary/x-custom"}, data=b"\x00"))]
    push_id = push_workflow_id(f"demo@manual-push-{short_id()}")
    await env.client.start_workflow("EventPushWorkflow", args=args, id=push_id, task_queue=env.stack.task_queue)

    cause = await refused_start(env, push_id)
    assert cause.type == "invalid_push_input" and "PushInput" in cause.message, cause.message
    failed_tasks = [
        e async for e in env.client.get_workflow_handle(push_id).fetch_history_events()
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]  # fmt: skip
    assert failed_tasks == []


@pytest.mark.parametrize(
    ("text", "client", "reason"),
    [
        pytest.param('{"job_id":"x","job_id":"%s"}', "cli", "duplicate_member", id="a-member-twice"),
        pytest.param('{"job_id":"%s","after":NaN}', "python", "not_json_number", id="not-a-json-number"),
    ],
)
async def test_a_push_run_started_by_hand_with_json_of_no_one_meaning_pushes_nothing(
    env: Env, text: str, client: str, reason: str
) -> None:
    # `temporal workflow start --type EventPushWorkflow --input '{"job_id":"a","job_id":"b"}'`
    # pushed job b's events: the run read the SDK decoder's reading of a text POST /jobs
    # refuses (the last member given twice; 1e400 or NaN in a member it ignores), where the
    # job workflow refuses that text (one-meaning-input).
    from temporalio.api.common.v1 import Payload
    from temporalio.api.enums.v1 import EventType
    from temporalio.common import RawValue

    from curaflow.jobs.pushes import push_workflow_id
    from curaflow.protocol.json_text import json_text_refusal

    job_id = f"demo@manual-push-{short_id()}"
    body = text.replace("%s", job_id)
    refusal = json_text_refusal(body.encode())
    assert refusal is not None and refusal.detail["reason"] == reason
    push_id = push_workflow_id(job_id)
    if client == "cli":
        started = await asyncio.to_thread(
            cli, env, "start", "--type", "EventPushWorkflow", "--task-queue", env.stack.task_queue,
            "--workflow-id", push_id, "--input", body,
        )  # fmt: skip
        assert started.returncode == 0, started.stderr
    else:
        raw = RawValue(Payload(metadata={"encoding": b"json/plain"}, data=body.encode()))
        await env.client.start_workflow("EventPushWorkflow", raw, id=push_id, task_queue=env.stack.task_queue)
    await closed_status(env.client, push_id, timeout_s=30)
    if reason == "duplicate_member":
        record_history(env, push_id, "event_push_ambiguous_input")

    cause = await refused_start(env, push_id)
    assert cause.type == "invalid_push_input" and refusal.message in cause.message, cause.message
    kinds = {e.event_type async for e in env.client.get_workflow_handle(push_id).fetch_history_events()}
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED not in kinds  # nothing pushed
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in kinds


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


async def started_input(env: Env, job_id: str) -> dict[str, Any]:
    """The input the job's execution was started with, as the UI and ``workflow show`` list it."""
    async for event in env.client.get_workflow_handle(job_id).fetch_history_events():
        [payload] = event.workflow_execution_started_event_attributes.input.payloads
        return dict(json.loads(payload.data))
    raise AssertionError(f"{job_id}: no history")


async def activity_events(env: Env, workflow_id: str) -> list[str]:
    """The steps (activities, local activities) the execution ran or scheduled."""
    names = []
    async for event in env.client.get_workflow_handle(workflow_id).fetch_history_events():
        if event.HasField("activity_task_scheduled_event_attributes"):
            names.append(event.activity_task_scheduled_event_attributes.activity_type.name)
        elif event.HasField("marker_recorded_event_attributes") and (
            event.marker_recorded_event_attributes.marker_name == "core_local_activity"
        ):
            names.append("local activity")
    return names


@pytest.mark.parametrize("job", ["running", "ended"])
async def test_a_copy_of_a_jobs_input_under_another_id_is_refused_and_leaves_the_job_alone(env: Env, job: str) -> None:
    """The UI's "start workflow like this one" (or a copied ``--input``) under a fresh id:
    the copy ran the job's steps and finished it — a cancel of the copy ended the job
    ``cancelled`` while the job's own run completed, and a copy of an ended job published
    a ``JobStatus`` under an id that is no job. A Task under another id is refused
    (``workflow_id``); the job's ``JobInput`` is now refused the same way, at once."""
    key = f"copy-{short_id()}"
    if job == "running":
        env.replay.faults.slow_images_s = 4.0
    answer = await env.http.post("/jobs", json=task(key).model_dump(mode="json", exclude_none=True))
    assert answer.status_code == 202, answer.text
    job_id = answer.json()["job"]["job_id"]
    if job == "running":
        await job_in_stage(env.http, job_id, "fetching", timeout_s=30)
    else:
        await env.stack.wait_terminal(job_id, 60)
    copy_id = f"copy-of-{short_id()}"

    await env.client.start_workflow(
        "JobWorkflow", await started_input(env, job_id), id=copy_id, task_queue=env.stack.task_queue
    )

    cause = await refused_start(env, copy_id)
    assert (cause.type, cause.details[0]["detail"]["field"]) == ("invalid_params", "workflow_id"), cause
    assert (cause.details[0]["detail"]["expected"], cause.details[0]["detail"]["received"]) == (job_id, copy_id)
    assert await activity_events(env, copy_id) == []  # no step of the job, no finish
    env.replay.faults.slow_images_s = 0.0
    record = await env.stack.wait_terminal(job_id, 60)
    assert (record.business_status, [d.status for d in record.cells[0].deliveries]) == ("success", ["delivered"])
    final = JobState.model_validate(await env.client.get_workflow_handle(job_id).result())
    assert (final.status, final.deliveries[0].status) == ("succeeded", "delivered")
    if job == "ended":
        record_history(env, copy_id, "job_input_under_another_id_core_v3")


def record_history(env: Env, workflow_id: str, name: str, run_id: str | None = None) -> None:
    """Write the execution's history (its latest run, or ``run_id``) to tests/histories
    (``CURAFLOW_RECORD_HISTORIES=1``)."""
    if os.environ.get("CURAFLOW_RECORD_HISTORIES") != "1":
        return
    done = cli(env, "show", "-w", workflow_id, *(("-r", run_id) if run_id else ()), "-o", "json")
    assert done.returncode == 0, done.stderr
    (Path(__file__).resolve().parents[1] / "histories" / f"{name}.json").write_text(recorded_history(done.stdout))


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
    # A plain start by another client has no static summary (only a starter sets one),
    # but the workflow's own current details, as for an HTTP job.
    metadata = await env.client.get_workflow_handle(job_id).query("__temporal_workflow_metadata")
    assert "status **succeeded**" in str(metadata), metadata


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


# ---- one key, one job: every entry point, every state of the first job -----------------


async def test_start_job_refuses_another_task_under_a_used_key_while_it_runs_and_after(env: Env) -> None:
    from curaflow.protocol.errors import ProtocolError

    key = f"idem-{short_id()}"
    first, other = task(key), task(key, query={"tags": ["風景"]})
    env.replay.faults.slow_images_s = 3.0  # the first job is still fetching while we try
    try:
        handle = await start_job(env.client, first, task_queue=env.stack.task_queue)
        with pytest.raises(ProtocolError) as running:
            await start_job(env.client, other, task_queue=env.stack.task_queue)
        assert running.value.code == "idempotency_conflict" and running.value.http_status == 409
        # The same Task attaches to the running job.
        again = await start_job(env.client, first, task_queue=env.stack.task_queue)
        assert again.id == handle.id
        assert (await job_row(env, handle.id))["completed_at"] is None
    finally:
        env.replay.faults.slow_images_s = 0.0
    state: JobState = await handle.result()
    assert state.status == "succeeded"

    with pytest.raises(ProtocolError) as completed:
        await start_job(env.client, other, task_queue=env.stack.task_queue)
    assert completed.value.code == "idempotency_conflict"
    # The same Task after completion answers with the job, like a replayed POST /jobs.
    replayed = await start_job(env.client, first, task_queue=env.stack.task_queue)
    assert replayed.id == handle.id
    final = JobState.model_validate(await replayed.result())
    assert final.status == "succeeded" and final.deliveries == state.deliveries
    http = await env.http.post("/jobs", json=other.model_dump(mode="json", exclude_none=True))
    assert http.status_code == 409 and http.json()["error"]["code"] == "idempotency_conflict"
    assert (await env.http.get(f"/jobs/{handle.id}")).json()["status"] == "succeeded"


async def test_start_job_of_an_http_job_compares_params_and_a_cancelled_job_stays_refused(env: Env) -> None:
    from curaflow.protocol.errors import ProtocolError

    key = f"idem-http-{short_id()}"
    body = task(key).model_dump(mode="json", exclude_none=True)
    env.replay.faults.slow_images_s = 3.0
    try:
        answer = await env.http.post("/jobs", json=body)
        assert answer.status_code == 202
        job_id = answer.json()["job"]["job_id"]
        await closed_or_open(env, job_id)
        with pytest.raises(ProtocolError) as running:
            await start_job(env.client, task(key, query={"tags": ["風景"]}), task_queue=env.stack.task_queue)
        assert running.value.code == "idempotency_conflict"
        same = await start_job(env.client, body, task_queue=env.stack.task_queue)
        assert same.id == job_id
        cancel = await env.http.post(f"/jobs/{job_id}/cancel", json={"reason": "test"})
        assert cancel.status_code in (200, 202)
    finally:
        env.replay.faults.slow_images_s = 0.0
    await env.stack.wait_terminal(job_id)
    await closed_status(env.client, job_id)
    with pytest.raises(ProtocolError) as cancelled:
        await start_job(env.client, task(key, query={"tags": ["風景"]}), task_queue=env.stack.task_queue)
    assert cancelled.value.code == "idempotency_conflict"
    runs = await executions(env, job_id)
    replayed = await start_job(env.client, body, task_queue=env.stack.task_queue)
    # The handle of the job's own (Canceled) execution: result() raises, the query answers.
    with pytest.raises(WorkflowFailureError):
        await replayed.result()
    assert (await replayed.query(JobWorkflow.status)).status == "cancelled"
    assert await executions(env, job_id) == runs == 1


async def closed_or_open(env: Env, job_id: str) -> None:
    """Wait until the API's background start created the execution."""

    async def started() -> bool:
        return await executions(env, job_id) > 0

    from tests.support import eventually

    await eventually(started, timeout_s=15, what=f"an execution of {job_id}")


async def test_the_cli_update_with_start_is_idempotent_and_refuses_another_task(env: Env) -> None:
    key = f"cli-uws-{short_id()}"
    job_id = f"demo@manual-{key}"
    same = json.dumps(task(key).model_dump(mode="json", exclude_none=True))
    other = json.dumps(task(key, query={"tags": ["風景"]}).model_dump(mode="json", exclude_none=True))

    def update_with_start(body: str, *reuse: str) -> subprocess.CompletedProcess[str]:
        return cli(
            env, "execute-update-with-start", "--update-name", "admission", "--update-input", body,
            "--workflow-id", job_id, "--type", "JobWorkflow", "--task-queue", env.stack.task_queue,
            "--id-conflict-policy", "UseExisting", *reuse, "--input", body, "--output", "json",
        )  # fmt: skip

    documented = ("--id-reuse-policy", "RejectDuplicate")
    env.replay.faults.slow_images_s = 3.0  # the job is still running when the other Task arrives
    try:
        first = await asyncio.to_thread(update_with_start, same, *documented)
        assert first.returncode == 0, first.stderr
        refused = await asyncio.to_thread(update_with_start, other, *documented)
        assert refused.returncode != 0 and "idempotency" in (refused.stdout + refused.stderr)
    finally:
        env.replay.faults.slow_images_s = 0.0
    await env.stack.wait_terminal(job_id)
    await closed_status(env.client, job_id)
    again = await asyncio.to_thread(update_with_start, same, *documented)
    assert again.returncode != 0 and "already finished" in (again.stdout + again.stderr)
    assert await executions(env, job_id) == 1
    # Without the documented policy (Temporal's default, AllowDuplicate) Temporal adds a run:
    # it only reports the job — the same Task answers with it, another is refused — and
    # publishes no JobStatus, so the job is still listed once, by its own run.
    raw = await asyncio.to_thread(update_with_start, same)
    assert raw.returncode == 0, raw.stderr
    assert '"succeeded"' in raw.stdout, raw.stdout
    refused = await asyncio.to_thread(update_with_start, other)
    assert refused.returncode != 0 and "idempotency" in (refused.stdout + refused.stderr)
    listed = [w async for w in env.client.list_workflows(f'WorkflowId = "{job_id}" AND JobStatus = "succeeded"')]
    assert len(listed) == 1


# ---- what Temporal shows follows the ledger ----------------------------------------------


async def test_while_a_cell_fetches_the_query_the_search_attribute_and_the_details_say_running(env: Env) -> None:
    from activities.acquire import PROGRESS_SIGNAL_DELAY_S
    from tests.support import eventually

    submitted = task(f"live-{short_id()}")
    env.replay.faults.slow_images_s = 6.0
    try:
        handle = await start_job(env.client, submitted, task_queue=env.stack.task_queue)

        async def fetching() -> bool:
            job = (await env.http.get(f"/jobs/{handle.id}")).json()
            return bool(job.get("status") == "running" and job.get("progress", {}).get("stage") == "fetching")

        await eventually(fetching, timeout_s=30, what="GET says running/fetching")

        async def live() -> bool:
            # The download outlasts the progress signal's delay: the workflow follows the
            # ledger within it (activities.acquire.PROGRESS_SIGNAL_DELAY_S).
            state = await handle.query(JobWorkflow.status)
            return (state.status, state.stage) == ("running", "fetching")

        await eventually(live, timeout_s=PROGRESS_SIGNAL_DELAY_S + 5, what="the status query says running/fetching")

        async def listed() -> bool:
            query = f'WorkflowId = "{handle.id}" AND ExecutionStatus = "Running" AND JobStatus = "running"'
            return [w async for w in env.client.list_workflows(query)] != []

        await eventually(listed, timeout_s=10, what="the open-jobs query lists the job")
        described = await handle.describe()
        details = await described.static_details()
        summary = await described.static_summary()
        assert summary and "(temporal)" in summary and "demo" in summary
        assert details and submitted.idempotency_key in details
        assert (await job_row(env, handle.id))["completed_at"] is None
    finally:
        env.replay.faults.slow_images_s = 0.0
    assert (await handle.result()).status == "succeeded"


async def test_start_job_of_an_invalid_task_raises_the_protocol_error_and_leaves_the_id_usable(env: Env) -> None:
    from curaflow.protocol.errors import ProtocolError

    key = f"sj-bad-{short_id()}"
    bad = {**task(key).model_dump(mode="json", exclude_none=True)}
    bad["params"] = {"target_id": "demo", "constraints": {"limit": "many"}}
    started = time.monotonic()
    with pytest.raises(ProtocolError) as refused:
        await start_job(env.client, bad, task_queue=env.stack.task_queue)
    assert time.monotonic() - started < 15
    assert (refused.value.code, refused.value.http_status) == ("invalid_params", 400)
    assert refused.value.detail["field"] == "params.constraints.limit"
    assert await job_row(env, f"demo@manual-{key}") is None
    handle = await start_job(env.client, task(key), task_queue=env.stack.task_queue)
    assert (await handle.result()).status == "succeeded"
    # A Task only admission can refuse: the execution's own admission answers the update.
    unknown = task(f"sj-unknown-{short_id()}").model_dump(mode="json", exclude_none=True)
    unknown["params"]["target_id"] = "no-such-target"
    with pytest.raises(ProtocolError) as nowhere:
        await start_job(env.client, unknown, task_queue=env.stack.task_queue)
    assert (nowhere.value.code, nowhere.value.http_status) == ("invalid_params", 404)
    assert nowhere.value.detail["reason"] == "unknown_target"
    job_id = f"no-such-target@manual-{unknown['idempotency_key']}"
    assert await closed_status(env.client, job_id, timeout_s=15) == WorkflowExecutionStatus.FAILED


# ---- search attributes a starter set ----------------------------------------------------


def forged(**values: Any) -> TypedSearchAttributes:
    """curaflow's own search attributes as a foreign starter may set them at start
    (``temporal workflow start --search-attribute 'JobStatus="failed"'``)."""
    keys = {"JobStatus": JOB_STATUS, "BusinessStatus": BUSINESS_STATUS, "JobType": JOB_TYPE,
            "TargetIds": TARGET_IDS, "ScheduleId": SCHEDULE_ID}  # fmt: skip
    return TypedSearchAttributes([SearchAttributePair(keys[name], value) for name, value in values.items()])


def owned(described: Any) -> dict[str, Any]:
    """curaflow's own search attributes of a described run (the ones it carries)."""
    carried = described.typed_search_attributes
    keys = (JOB_STATUS, BUSINESS_STATUS, JOB_TYPE, TARGET_IDS, SCHEDULE_ID)
    return {key.name: carried.get(key) for key in keys if carried.get(key) is not None}


async def test_a_refused_run_keeps_no_job_attributes_its_starter_forged_and_its_key_stays_usable(env: Env) -> None:
    # A refused Task started with JobType / JobStatus set by its starter: the run kept them
    # — the failed jobs' list (ExecutionStatus = "Failed" AND JobStatus = "failed") named a
    # run that held no job, and the JobType made it look like the job's own run, so every
    # later start under the key (HTTP, start_job) answered "the job's run closed" and none
    # ran: the job POST /jobs admitted stayed queued until the reconciler's queued budget.
    key = f"forged-bad-{short_id()}"
    job_id = f"demo@manual-{key}"
    bad = {**task(key).model_dump(mode="json", exclude_none=True)}
    bad["params"] = {"target_id": "demo", "constraints": {"limit": "many"}}
    handle = await env.client.start_workflow(
        JobWorkflow.run, bad, id=job_id, task_queue=env.stack.task_queue,
        search_attributes=forged(JobType="candidate_search", JobStatus="failed", BusinessStatus="failed",
                                 TargetIds=["demo"], ScheduleId="nightly"),
        **JOB_START_OPTIONS,
    )  # fmt: skip
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    record_history(env, job_id, "job_forged_attributes_refused_core_v3")
    assert owned(await handle.describe()) == {}

    good = await env.http.post("/jobs", json={**bad, "params": {"target_id": "demo"}})
    assert good.status_code == 202, good.text
    record = await env.stack.wait_terminal(job_id, 60)
    assert (record.cells[0].state, record.business_status) == ("submitted", "success"), record.cells[0]


async def test_a_jobs_run_carries_the_jobs_attributes_whatever_its_starter_set(env: Env) -> None:
    # A valid Task started with a ScheduleId, a BusinessStatus and a JobStatus of its
    # starter's: the job has no schedule, yet its run stayed in `ScheduleId = "nightly"`
    # for good, and said `success` while it ran. The job's own values replace them.
    key = f"forged-ok-{short_id()}"
    handle = await env.client.start_workflow(
        JobWorkflow.run, task(key), id=f"demo@manual-{key}", task_queue=env.stack.task_queue,
        search_attributes=forged(JobStatus="succeeded", BusinessStatus="success", ScheduleId="nightly",
                                 TargetIds=["elsewhere"], JobType="another_type"),
        **JOB_START_OPTIONS,
    )  # fmt: skip
    assert (await handle.result()).status == "succeeded"
    record_history(env, handle.id, "job_forged_attributes_core_v3")
    assert owned(await handle.describe()) == {
        "JobStatus": "succeeded",
        "BusinessStatus": "success",
        "JobType": "candidate_search",
        "TargetIds": ["demo"],
    }


async def test_a_cron_start_is_refused_at_once_and_adds_no_run_after_it(env: Env) -> None:
    # `temporal workflow start --cron` of a Task: the first run ran the job; then Temporal
    # added a run under the job id at every occurrence, for ever — each one only the same
    # Task again (the same key is the same job: it reported the job, never a new one), and
    # between them an open run held the id (starts attached to it, the admission update
    # waited for the next occurrence). A job runs once: the start is refused, nothing is
    # written, the chain ends with that run, and the id stays usable.
    key = f"cron-{short_id()}"
    job_id = f"demo@manual-{key}"
    body = json.dumps(task(key).model_dump(mode="json", exclude_none=True))

    started = await asyncio.to_thread(
        cli, env, "start", "--type", "JobWorkflow", "--task-queue", env.stack.task_queue,
        "--workflow-id", job_id, "--input", body, "--cron", "@every 2s",
        "--id-reuse-policy", "RejectDuplicate",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr

    # The latest run of the id is the refused one: a cron run that closed any other way
    # has its next run started with it, at once (that run would be the id's latest).
    status = await closed_status(env.client, job_id, timeout_s=30)
    assert status == WorkflowExecutionStatus.CANCELED, status
    assert await job_row(env, job_id) is None
    details = await env.client.get_workflow_handle(job_id).query("__temporal_workflow_metadata")
    assert "cron_schedule" in str(details) and "invalid_params" in str(details), details
    record_history(env, job_id, "job_cron_refused_core_v3")
    # The id stays usable: the Task runs as one job under it.
    handle = await start_job(env.client, task(key), task_queue=env.stack.task_queue)
    assert (await handle.result()).status == "succeeded"
    assert await executions(env, job_id) == 2


# ---- timeouts a starter set --------------------------------------------------------------


async def ended_job(env: Env, job_id: str, timeout_s: float) -> dict[str, Any]:
    """``GET /jobs/{id}`` once the job exists (a Task's run admits it) and ended."""

    async def ended() -> dict[str, Any] | None:
        answer = await env.http.get(f"/jobs/{job_id}")
        return None if answer.status_code == 404 else await terminal_job(env.http, job_id, timeout_s)

    return await eventually(ended, timeout_s=timeout_s, what=f"{job_id} admitted")


@pytest.mark.parametrize("timeout", ["run_timeout", "execution_timeout"])
async def test_a_run_timeout_a_starter_set_bounds_the_jobs_deadline_and_the_job_runs_once(
    env: Env, timeout: str
) -> None:
    # A Task started with a run timeout shorter than its deadline and a workflow retry
    # policy: Temporal timed the run out mid-download and started another run under the
    # job id, which admitted the same Task, found the job open and ran it again — three
    # runs, each cut, each left `JobStatus = running` on a TimedOut run (the failed jobs'
    # list named the job three times). With an execution timeout, no retry, but the job
    # was reported "ran past its deadline" with its deadline still 30 min ahead. Now the
    # job's deadline is the run's end less the time the job needs to end itself: it
    # expires on its own, in its one run, and its deadline says when.
    key = f"limit-{timeout[:3]}-{short_id()}"
    job_id = f"demo@manual-{key}"
    env.replay.faults.slow_images_s = 120.0  # the download outlasts the run
    try:
        handle = await env.client.start_workflow(
            JobWorkflow.run, task(key), id=job_id, task_queue=env.stack.task_queue,
            **{timeout: timedelta(seconds=36)},
            retry_policy=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(seconds=1)),
            **JOB_START_OPTIONS,
        )  # fmt: skip
        job = await ended_job(env, job_id, timeout_s=60)
    finally:
        env.replay.faults.slow_images_s = 0.0
    started_ms = int((await handle.describe()).start_time.timestamp() * 1000)
    assert job["status"] == "expired", job
    room_ms = run_end_room_ms(env.stack.settings.budgets_model().heartbeat_timeout_ms)
    assert job["deadline_at"] <= started_ms + 36_000 - room_ms, job
    assert job["deadline_at"] <= job["updated_at"], job
    assert await closed_status(env.client, job_id, timeout_s=30) == WorkflowExecutionStatus.FAILED
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    assert isinstance(failed.value.cause, ApplicationError) and failed.value.cause.type == "job_expired"
    assert await executions(env, job_id) == 1
    if timeout == "run_timeout":
        record_history(env, job_id, "job_run_limit_core_v3")


async def test_a_run_limit_just_past_the_longest_deadline_still_bounds_it(env: Env) -> None:
    # The workflow passed a starter's run limit to admission only below RUN_LIMIT_FLOOR, the
    # longest deadline plus RUN_END_MARGIN (30 s) — the room a job needed before its room
    # took in a step's heartbeat timeout. An execution timeout of 7 days + 60 s with
    # deadline_ms at its 7-day maximum (60 s heartbeat timeout by default) left the job
    # 60 s after its deadline, not the 90 s (heartbeat timeout + 30 s) it needs to end
    # itself: a worker lost at the deadline left the job to be timed out by Temporal. The
    # floor is now the longest deadline plus the longest room any configuration asks for
    # (EXECUTION_GRACE).
    key = f"limit-floor-{short_id()}"
    job_id = f"demo@manual-{key}"
    heartbeat_timeout_ms = env.stack.settings.budgets_model().heartbeat_timeout_ms
    # past the old floor, short of the room the job needs (half its heartbeat timeout short)
    limit = timedelta(milliseconds=MAX_DEADLINE_MS) + RUN_END_MARGIN + timedelta(milliseconds=heartbeat_timeout_ms / 2)
    handle = await env.client.start_workflow(
        JobWorkflow.run, task(key).model_copy(update={"deadline_ms": MAX_DEADLINE_MS}), id=job_id,
        task_queue=env.stack.task_queue, execution_timeout=limit, **JOB_START_OPTIONS,
    )  # fmt: skip
    job = await ended_job(env, job_id, timeout_s=60)
    started_ms = int((await handle.describe()).start_time.timestamp() * 1000)
    room_ms = run_end_room_ms(heartbeat_timeout_ms)
    assert job["deadline_at"] <= started_ms + int(limit.total_seconds() * 1000) - room_ms, job


async def test_a_run_too_short_for_any_deadline_is_refused_and_the_id_stays_usable(env: Env) -> None:
    key = f"limit-short-{short_id()}"
    job_id = f"demo@manual-{key}"
    handle = await env.client.start_workflow(
        JobWorkflow.run, task(key), id=job_id, task_queue=env.stack.task_queue,
        run_timeout=timedelta(seconds=20), **JOB_START_OPTIONS,
    )  # fmt: skip
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    refused = failed.value.cause
    assert isinstance(refused, ApplicationError) and refused.type == "invalid_params", refused
    assert refused.details[0]["detail"]["field"] == "run_timeout", refused.details
    assert await job_row(env, job_id) is None
    await the_id_stays_usable(env, key)


@pytest.mark.parametrize("ended", ["refused", "cancelled"])
async def test_an_http_job_attached_to_a_task_run_that_never_held_it_runs_and_ends_truthfully(
    env: Env, ended: str
) -> None:
    # A Temporal client starts a Task with a start delay; during the delay POST /jobs with
    # the same key and other params is admitted (202) and its start attaches to the
    # waiting run (conflict policy USE_EXISTING). When the delay ends the run admits ITS
    # Task, finds the key's job with other params and fails `idempotency_conflict` (or
    # its client cancels it first: it fails before admitting anything). That run never
    # held the HTTP job: the reconciler used to end the job `failed / internal_error` (a
    # job nothing ran, reported failed). It starts the job's own run now, as for a job
    # whose start never happened, and the job runs once.
    key = f"delayed-{ended[:3]}-{short_id()}"
    job_id = f"demo@manual-{key}"
    handle = await env.client.start_workflow(
        JobWorkflow.run, task(key), id=job_id, task_queue=env.stack.task_queue,
        start_delay=timedelta(seconds=4), **JOB_START_OPTIONS,
    )  # fmt: skip
    answer = await env.http.post("/jobs", json=task(key, query={"tags": ["風景"]}).model_dump(mode="json"))
    assert answer.status_code == 202, answer.text
    assert (answer.json()["job"]["job_id"], answer.json()["job"]["status"]) == (job_id, "queued")
    if ended == "cancelled":
        await handle.cancel()

    with pytest.raises(WorkflowFailureError) as refused:
        await handle.result()
    if ended == "refused":
        cause = refused.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == "idempotency_conflict", cause
    job = await terminal_job(env.http, job_id, timeout_s=60)

    assert job["status"] == "succeeded", job
    assert (await job_row(env, job_id))["trigger"] != "temporal"
    pool = await env.stack.ledger()
    sends = await pool.fetch("SELECT work_id, status, attempts FROM delivery_intents WHERE job_id = $1", job_id)
    assert sends and all(s["status"] == "delivered" for s in sends), sends
    assert len({s["work_id"] for s in sends}) == len(sends)
    # The ledger says the job ended (finish's commit) a moment before its run closes: wait
    # for the close (read at once, it was still RUNNING in a loaded CI run).
    assert await closed_status(env.client, job_id) == WorkflowExecutionStatus.COMPLETED
    latest = await env.client.get_workflow_handle(job_id).describe()
    assert latest.run_id != handle.result_run_id and latest.status == WorkflowExecutionStatus.COMPLETED
    first = await env.client.get_workflow_handle(job_id, run_id=handle.result_run_id).describe()
    assert first.status == WorkflowExecutionStatus.FAILED


async def test_an_http_job_attached_to_a_task_run_on_a_queue_no_worker_serves_runs_on_curaflows_queue(
    env: Env,
) -> None:
    # A Temporal client starts the Task on a task queue no worker polls (a typo of
    # `--task-queue`); POST /jobs with the same key is admitted (202) and its start attaches
    # to that run (conflict policy USE_EXISTING). Nothing would ever run the job: it stayed
    # `queued` until the queued budget ended it `failed / queued_too_long` (probed: still
    # queued after 2 min, the run waiting on its queue). The reconciler recognises such a run
    # — it held no job and its first workflow task waited on another queue than curaflow's —,
    # terminates it with a reason that names both queues, and starts the job's own run.
    key = f"wrongq-{short_id()}"
    job_id = f"demo@manual-{key}"
    wrong_queue = f"nobody-polls-{short_id()}"
    started = await asyncio.to_thread(
        cli, env, "start", "--type", "JobWorkflow", "--task-queue", wrong_queue, "--workflow-id", job_id,
        "--id-reuse-policy", "RejectDuplicate", "--input", task(key).model_dump_json(exclude_none=True),
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    foreign_run = (await env.client.get_workflow_handle(job_id).describe()).run_id
    answer = await env.http.post("/jobs", json=task(key).model_dump(mode="json"))
    assert answer.status_code == 202, answer.text

    job = await terminal_job(env.http, job_id, timeout_s=90)

    assert job["status"] == "succeeded", job
    foreign = await env.client.get_workflow_handle(job_id, run_id=foreign_run).describe()
    assert foreign.status == WorkflowExecutionStatus.TERMINATED
    history = await env.client.get_workflow_handle(job_id, run_id=foreign_run).fetch_history()
    reason = history.events[-1].workflow_execution_terminated_event_attributes.reason
    assert wrong_queue in reason and env.stack.task_queue in reason, reason
    # Taken after the stack's own `foreign_queue_wait_ms`, not the default's 20 s.
    waited_s = int(re.search(r"waited (\d+) s", reason).group(1))  # type: ignore[union-attr]
    assert FOREIGN_WAIT_MS // 1000 <= waited_s < FOREIGN_QUEUE_WAIT_MS // 1000, reason
    # The run closes a moment after the ledger says the job ended: wait for the close.
    assert await closed_status(env.client, job_id) == WorkflowExecutionStatus.COMPLETED
    own = await env.client.get_workflow_handle(job_id).describe()
    assert own.run_id != foreign_run and own.status == WorkflowExecutionStatus.COMPLETED
    assert own.task_queue == env.stack.task_queue
    assert own.typed_search_attributes.get(JOB_STATUS) == "succeeded"
    pool = await env.stack.ledger()
    sends = await pool.fetch("SELECT work_id, status FROM delivery_intents WHERE job_id = $1", job_id)
    assert sends and all(s["status"] == "delivered" for s in sends), sends


async def test_a_task_run_on_a_queue_a_worker_polls_is_never_taken_for_one_no_worker_serves(env: Env) -> None:
    # Terminating a run is destructive: only a run on a queue no worker polls may be taken
    # for a mistyped `--task-queue`. A queue that another deployment's workers serve — its
    # workers restarting for a deploy, stopped (SIGSTOP), or behind a backlog longer than
    # FOREIGN_QUEUE_WAIT_MS, or this deployment's own old queue during a rolling change of
    # `temporal.task_queue` — has its workflow task untaken just as long, and such a run was
    # terminated (and its Task's job run here instead). Temporal lists the queue's recent
    # pollers: a queue that lists one is served, and its run waits.
    served = f"restarting-{short_id()}"
    async with Worker(env.client, task_queue=served, workflows=[JobWorkflow]):
        await eventually(lambda: pollers(env, served), timeout_s=10)
    runs = {}
    for queue in (served, f"nobody-polls-{short_id()}"):
        key = f"polled-{short_id()}"
        handle = await env.client.start_workflow(
            JobWorkflow.run, task(key), id=f"demo@manual-{key}", task_queue=queue, **JOB_START_OPTIONS
        )
        runs[queue] = handle
    later = now_ms() + FOREIGN_QUEUE_WAIT_MS + 60_000  # both first workflow tasks waited that long
    try:
        assert await unserved_foreign_run(env.client, runs[served].id, env.stack.task_queue, later) is None
        unpolled = next(queue for queue in runs if queue != served)
        found = await unserved_foreign_run(env.client, runs[unpolled].id, env.stack.task_queue, later)
        assert found is not None and found.task_queue == unpolled
    finally:
        for handle in runs.values():
            await handle.terminate(reason="test over")

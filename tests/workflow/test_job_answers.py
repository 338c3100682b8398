"""``JobWorkflow`` answers for its job after it closed, and a run added under an ended job only reports it.

The real workflow on the session's dev server, with fake activities (:mod:`tests.workflow.fakes`)
plus a fake ``admit`` (the admission's answer is scripted). Covered:

* the ``admission_answer`` query — on the job's *closed* run, with no I/O: the job's own
  Task → its state; another Task under the key → ``idempotency_conflict``; an invalid
  Task → its ``invalid_params`` with the field; a job that carries no identity (admitted
  before identities were carried) → the key read from the job id;
* the ``admission_answer`` query of a Task run that holds no job: while it waits out its
  ``start_delay`` Temporal itself refuses the query (no workflow task yet); while it admits
  its Task, ``unanswered: admitting``; once it refused its own Task, ``unanswered: no_job``
  (until 2026-12-07 both answered ``{state: null, refusal: null}``, undocumented);
* a run another client added under an ended job's id (Temporal's default reuse policy):
  it reports the job's final state, its execution ends as the job's did, and it publishes
  no ``JobStatus`` / ``BusinessStatus`` — the list queries keep listing the job's own run.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from temporalio import activity
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from curaflow.domain.execution import BUSINESS_STATUS, JOB_STATUS, JOB_TYPE
from curaflow.domain.messages import AdmissionAnswer, Admitted, JobIdentity, JobState, SubmitInput
from curaflow.process.worker import sandbox_runner
from tests.workflow.fakes import Fakes, job_input
from tests.workflow.harness import ends_as_the_job_did, task_for
from workflows.job import JobWorkflow

pytestmark = pytest.mark.integration


class Env:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.fakes = Fakes()
        self.queue = f"answers-{uuid.uuid4().hex[:8]}"
        self.admitted: dict[str, Admitted] = {}  # job id → what the fake admission answers
        self.admitting: asyncio.Event | None = None  # set: admit waits for it (a slow ledger)


@pytest.fixture
async def env(temporal_client: Client) -> AsyncIterator[Env]:
    env = Env(temporal_client)

    @activity.defn(name="admit")
    async def admit(inp: SubmitInput) -> Admitted:
        if env.admitting is not None:
            await asyncio.wait_for(env.admitting.wait(), timeout=25)
        if inp.workflow_id not in env.admitted:  # the key's job has other params
            detail = {"code": "idempotency_conflict", "message": "key reused", "detail": None, "http_status": 409}
            raise ApplicationError("key reused", detail, type="idempotency_conflict", non_retryable=True)
        return env.admitted[inp.workflow_id]

    # the fakes' own ``admit`` (tests.workflow.fakes) gives way to this module's scripted one
    acts = [
        a for a in env.fakes.activities(lambda: env.client) if a.__name__ not in ("acquire", "search", "fetch", "admit")
    ]
    source = [a for a in env.fakes.activities(lambda: env.client) if a.__name__ in ("acquire", "search", "fetch")]
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(
            Worker(
                env.client,
                task_queue=env.queue,
                workflows=[JobWorkflow],
                activities=[*acts, admit],
                workflow_runner=sandbox_runner(),
            )
        )
        await stack.enter_async_context(Worker(env.client, task_queue=f"{env.queue}-source", activities=source))
        yield env


async def answer(env: Env, job_id: str, body: dict[str, Any]) -> AdmissionAnswer:
    return await env.client.get_workflow_handle(job_id).query(
        JobWorkflow.admission_answer, body, result_type=AdmissionAnswer
    )


@pytest.mark.parametrize("carried", [True, False], ids=["identity-carried", "identity-from-the-job-id"])
async def test_a_closed_job_answers_a_task_as_admission_would(env: Env, carried: bool) -> None:
    key = f"Key-{uuid.uuid4().hex[:6]}"
    inp = job_input(f"t@manual-{key.lower()}", {"t": ["a"]}, source_queue=f"{env.queue}-source")
    if carried:
        inp.identity = JobIdentity(idempotency_key=key, params={})
    handle = await env.client.start_workflow(
        JobWorkflow.run, inp, id=inp.job_id, task_queue=env.queue, execution_timeout=timedelta(minutes=2)
    )
    final: JobState = JobState.model_validate(await handle.result())
    assert final.status == "succeeded"

    same = await answer(env, inp.job_id, task_for(key))
    assert same.refusal is None and same.state is not None and same.state.status == "succeeded"
    other = await answer(env, inp.job_id, task_for(key, query={"tags": ["風景"]}))
    if carried:
        assert other.refusal is not None and other.refusal["code"] == "idempotency_conflict"
        assert other.refusal["http_status"] == 409
        cased = await answer(env, inp.job_id, task_for(key.lower()))  # the key is exact, the job id lowercased
        assert cased.refusal is not None and cased.refusal["code"] == "idempotency_conflict"
    else:  # no identity carried: the key is read from the job id, params are not compared
        assert other.refusal is None
        unrelated = await answer(env, inp.job_id, task_for("another-key"))
        assert unrelated.refusal is not None and unrelated.refusal["code"] == "idempotency_conflict"
    invalid = await answer(env, inp.job_id, task_for(key, constraints={"limit": "many"}))
    assert invalid.refusal is not None and invalid.refusal["code"] == "invalid_params"
    assert invalid.refusal["detail"]["field"] == "params.constraints.limit"


@pytest.mark.parametrize("status", ["succeeded", "failed"])
async def test_a_run_added_under_an_ended_jobs_id_reports_it_and_publishes_no_job_state(env: Env, status: str) -> None:
    key = f"rep-{uuid.uuid4().hex[:6]}"
    job_id = f"t@manual-{key}"
    inp = job_input(job_id, {"t": ["a"]}, source_queue=f"{env.queue}-source")
    final = JobState(job_id=job_id, status=status, stage="done", business_status="success")  # type: ignore[arg-type]
    env.admitted[job_id] = Admitted(job_input=inp, created=False, final=final)

    handle = await env.client.start_workflow(
        "JobWorkflow", task_for(key), id=job_id, task_queue=env.queue, execution_timeout=timedelta(minutes=2)
    )
    await ends_as_the_job_did(handle, final, None if status == "succeeded" else "job_failed")
    attributes = (await handle.describe()).typed_search_attributes
    assert attributes.get(JOB_TYPE) == "candidate_search"  # it concerns a job (never "no job": see job_runs)
    assert attributes.get(JOB_STATUS) is None and attributes.get(BUSINESS_STATUS) is None
    assert JobState.model_validate(await handle.query("status")) == final


async def test_a_task_run_that_holds_no_job_says_why_it_cannot_answer(env: Env) -> None:
    key = f"adm-{uuid.uuid4().hex[:6]}"
    job_id = f"t@manual-{key}"
    inp = job_input(job_id, {"t": ["a"]}, source_queue=f"{env.queue}-source")
    inp.identity = JobIdentity(idempotency_key=key, params={})
    env.admitted[job_id] = Admitted(job_input=inp, created=True)
    env.admitting = asyncio.Event()

    # While the run waits out its start delay it has no workflow task: Temporal answers the
    # query itself, before any worker (curaflow's code never sees it).
    delayed = await env.client.start_workflow(
        "JobWorkflow", task_for(f"{key}-d"), id=f"t@manual-{key}-d", task_queue=env.queue,
        start_delay=timedelta(minutes=10), execution_timeout=timedelta(minutes=20),
    )  # fmt: skip
    with pytest.raises(RPCError) as not_yet:
        await answer(env, delayed.id, task_for(f"{key}-d"))
    assert not_yet.value.status == RPCStatusCode.FAILED_PRECONDITION, not_yet.value
    assert "Workflow task is not scheduled yet" in not_yet.value.message
    await delayed.terminate(reason="test: the delayed run")

    # Its delay over, it admits its Task (here: a slow ledger): no answer yet, and it says so.
    handle = await env.client.start_workflow(
        "JobWorkflow", task_for(key), id=job_id, task_queue=env.queue, execution_timeout=timedelta(minutes=2)
    )
    admitting = await answer(env, job_id, task_for(key))
    assert (admitting.state, admitting.refusal, admitting.unanswered) == (None, None, "admitting"), admitting
    # an invalid Task needs no job to be refused (what POST /jobs answers it)
    invalid = await answer(env, job_id, task_for(key, constraints={"limit": "many"}))
    assert invalid.refusal is not None and invalid.refusal["detail"]["field"] == "params.constraints.limit"
    assert invalid.unanswered is None
    env.admitting.set()
    assert JobState.model_validate(await handle.result()).status == "succeeded"
    own = await answer(env, job_id, task_for(key))
    assert own.state is not None and own.unanswered is None

    # A run that refused its own Task (admission: the key's job has other params) holds no
    # job, and never will.
    refused_id = f"t@manual-{key}-r"
    refused = await env.client.start_workflow(
        "JobWorkflow", task_for(f"{key}-r"), id=refused_id, task_queue=env.queue, execution_timeout=timedelta(minutes=2)
    )
    with pytest.raises(WorkflowFailureError) as failed:
        await refused.result()
    assert isinstance(failed.value.cause, ApplicationError) and failed.value.cause.type == "idempotency_conflict"
    no_job = await answer(env, refused_id, task_for(f"{key}-r"))
    assert (no_job.state, no_job.refusal, no_job.unanswered) == (None, None, "no_job"), no_job

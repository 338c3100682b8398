"""An operator deletes a running job's execution (``temporal workflow delete``, the UI).

Deleting a running execution terminates it and removes every trace of it from Temporal:
no run is left for the reconciler's closed-execution rule to find. Before, the job stayed
``running`` in the ledger until its stall budget or deadline ran out and then ended
``stalled_no_heartbeat`` / ``delivery_abandoned`` — a worker's fault that never
happened. Now the reconciler recognises a started job whose execution Temporal positively
does not know, once no attempt of it still holds a lease (a send out at the deletion lands
and is recorded first), and ends it ``execution_deleted``.

The guard: a process configured with the wrong namespace sees every job "not found". It
ends nothing there: the namespace must hold an execution of a job this ledger knows.

One real worker process, the API in the test process, the Pixiv replay server and a
webhook receiver that holds its answer while the test deletes the execution.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from curaflow.devstack.ports import free_port
from curaflow.domain.occurrence import AdmitOccurrenceInput, OccurrenceAdmission, OccurrenceInput
from curaflow.ledger.db import DB_NOW_MS
from curaflow.ledger.reconciler import TickReport, tick
from curaflow.ledger.reconciler.ticks import START_GRACE_MS
from curaflow.process.worker import sandbox_runner
from curaflow.schedules import admit_occurrence
from curaflow.temporal.connection import connect
from curaflow.temporal.namespace import prepare_namespace
from tests.conftest import StackFactory
from tests.fakes.replay import ReplayServer
from tests.fakes.webhook import Reply, WebhookReceiver
from tests.jobs_support import WebhookEnv, webhook_env
from tests.support import eventually, short_id, whsec
from workflows.scheduled import ScheduledJobWorkflow

pytestmark = [pytest.mark.integration, pytest.mark.slow]


Env = WebhookEnv


@pytest.fixture(scope="module")
async def env(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str, ledger_pool: Any
) -> AsyncIterator[Env]:
    # a route nobody answers: its sends are not sent and retried, so its cell keeps a
    # delivery open (between attempts no attempt holds a lease)
    nobody = f"http://127.0.0.1:{free_port()}/hook"
    web, broken = f"hook-{short_id()}", f"broken-{short_id()}"

    def config(hook: WebhookReceiver) -> dict[str, Any]:
        return {
            "delivery": {"max_attempts": 1000},
            "routes": {
                web: {"kind": "webhook", "url": hook.url + "/hook", "secret": whsec(), "timeout_ms": 8000},
                broken: {"kind": "webhook", "url": nobody, "secret": whsec(), "timeout_ms": 8000},
            },
            "targets": [
                {"id": "solo", "query": {"tags": ["風景"]}, "routes": [web]},
                {"id": "pair", "query": {"tags": ["オリジナル"]}, "routes": [web, broken]},
                {"id": "stuck", "query": {"tags": ["風景"]}, "routes": [broken]},
            ],
        }

    async with webhook_env(tmp_path_factory.mktemp("deleted"), temporal_address, database_url, config) as opened:
        yield opened


async def submit(env: Env, target: str) -> str:
    response = await env.http.post("/jobs", json=env.stack.task(target_id=target))
    assert response.status_code == 202, response.text
    return str(response.json()["job"]["job_id"])


async def delete_execution(client: Client, job_id: str) -> None:
    """What ``temporal workflow delete --workflow-id <job id>`` does (the UI's "Delete"):
    the execution is terminated and removed, with its history and its visibility row."""
    await client.workflow_service.delete_workflow_execution(
        DeleteWorkflowExecutionRequest(
            namespace=client.namespace, workflow_execution=WorkflowExecution(workflow_id=job_id)
        )
    )

    async def gone() -> bool:
        try:
            await client.get_workflow_handle(job_id).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return True
            raise
        return False

    await eventually(gone, timeout_s=30, interval_s=0.2, what=f"Temporal removed {job_id}'s execution")


async def test_an_execution_deleted_before_its_first_step_converges_with_its_own_reason(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    """An operator deletes a job's execution while the job waits for its first step (its
    account's source queue busy; here: no worker at all). The job used to stay queued
    until its queued budget ended it ``expired`` / ``queued_too_long``, alertable, "check
    that workers are running" — a verdict on curaflow's workers for what an operator did.
    The job's start was recorded (``workflow_started_at``: the execution existed), so
    Temporal's "not found" is as positive as after a step: it ends ``execution_deleted``."""
    stack = make_stack(
        {
            "routes": {"out": {"kind": "directory", "path": str(tmp_path / "out")}},
            "targets": [{"id": "demo", "query": {"tags": ["風景"]}, "routes": ["out"]}],
        }
    )
    http = await stack.start_api()
    pool = await stack.ledger()
    client = await connect(stack.settings.temporal.address or "")

    async def started(job_id: str) -> bool:
        return bool(await pool.fetchval("SELECT workflow_started_at IS NOT NULL FROM jobs WHERE job_id = $1", job_id))

    # a job of this ledger whose execution exists, never started a step either: the witness
    witness = (await http.post("/jobs", json=stack.task(target_id="demo"))).json()["job"]["job_id"]
    job_id = (await http.post("/jobs", json=stack.task(target_id="demo"))).json()["job"]["job_id"]
    for each in (witness, job_id):
        await eventually(lambda each=each: started(each), timeout_s=30, what=f"{each}'s execution started")

    await delete_execution(client, job_id)
    # The queued budget (30 min) and the deadline are far off: only the deletion rule ends it.
    record = await stack.wait_terminal(job_id, 30)

    cell = record.cells[0]
    assert (cell.state, cell.reason) == ("failed", "execution_deleted"), cell
    job = (await http.get(f"/jobs/{job_id}")).json()
    assert job["status"] == "cancelled", job
    assert job["error"]["code"] == "cancelled_by_consumer", job
    assert job["error"]["detail"]["internal_code"] == "execution_deleted", job
    assert await pool.fetchval("SELECT alertable FROM outcomes WHERE job_id = $1", job_id) is False
    events = (await http.get(f"/jobs/{job_id}/events")).json()["events"]
    assert [e["type"] for e in events] == ["job.accepted", "job.cancelled"], events
    assert (await http.get(f"/jobs/{witness}")).json()["status"] == "queued"  # its execution exists


async def test_a_scheduled_job_whose_trampoline_has_not_started_it_yet_is_never_taken_for_deleted(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    """A scheduled occurrence's job is admitted by the trampoline's ``admit_occurrence``
    *before* the trampoline starts the job's execution as its child. Between the two — the
    trampoline's worker stopped or killed right after the admit's commit, its next workflow
    task waiting for a worker — Temporal knows no execution under the job's id. The
    admission once recorded the start there (``workflow_started_at``), and the
    deleted-execution rule, once it covered jobs that never ran a step, ended the job
    ``execution_deleted`` after ``START_GRACE_MS``: the job its trampoline then started
    found itself ended, the occurrence lost. A job that would have run is never ended so:
    since 2026-12-07 the admission records no start (the reconciler's rule 1 starts an
    occurrence's job its trampoline has not started within ``START_GRACE_MS``), and rule 4
    leaves a scheduled job that never ran a step to its queued budget.

    The trampoline here is the real ``ScheduledJobWorkflow`` in the test process whose
    ``admit_occurrence`` runs the real admission and then waits until the test lets it
    answer (a worker stopped after the commit). A job admitted through the API whose
    execution the test deletes is ended ``execution_deleted`` by the same ticks: rule 4
    looked at never-stepped jobs."""
    replay = await ReplayServer().start()
    try:
        stack = make_stack(
            {
                "pixiv": {"api_url": replay.url},
                "routes": {"out": {"kind": "directory", "path": str(tmp_path / "out")}},
                "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": ["out"]}],
            }
        )
        pool = await stack.ledger()
        client = await connect(stack.settings.temporal.address or "")
        # Jobs admitted as POST /jobs admits them, their executions started (no worker
        # yet): the namespace's witness, and one whose execution the test deletes.
        await stack.admit(stack.task(target_id="demo"))
        deleted = await stack.admit(stack.task(target_id="demo"))
        await delete_execution(client, deleted)

        released = asyncio.Event()

        @activity.defn(name="admit_occurrence")
        async def admit_then_stall(inp: AdmitOccurrenceInput) -> OccurrenceAdmission:
            admission = await admit_occurrence(pool, stack.settings, inp)  # the worker's own admission
            await released.wait()  # the worker stopped after the commit
            return admission

        plan_id = f"plan-{short_id()}"
        trampolines = f"{stack.task_queue}-trampolines"
        async with Worker(
            client,
            task_queue=trampolines,
            workflows=[ScheduledJobWorkflow],
            activities=[admit_then_stall],
            workflow_runner=sandbox_runner(),
        ):
            trampoline = await client.start_workflow(
                ScheduledJobWorkflow.run,
                OccurrenceInput(
                    schedule_id=plan_id, cron=["0 3 * * *"], target_ids=["demo"], task_queue=stack.task_queue
                ),
                id=f"occ-{short_id()}",
                task_queue=trampolines,
            )

            async def admitted() -> str | None:
                job: str | None = await pool.fetchval(
                    f"""SELECT job_id FROM jobs WHERE schedule_id = $1
                        AND created_at <= {DB_NOW_MS} - {START_GRACE_MS}""",
                    plan_id,
                )
                return job

            job_id = await eventually(admitted, timeout_s=30, what="the occurrence admitted START_GRACE_MS ago")
            reports: list[TickReport] = []

            async def ticked() -> bool:
                reports.append(await tick(pool, None, client))
                return any(deleted in r.deleted for r in reports)

            await eventually(ticked, timeout_s=30, interval_s=0.3, what="a tick's rule 4 ended the deleted job")
            assert all(job_id not in r.deleted for r in reports), reports
            assert (await stack.job(job_id)).completed_at is None, "the occurrence's job was ended before it started"

            released.set()  # the trampoline's worker is back: it starts the job's execution
            await stack.start_worker()
            record = await stack.wait_terminal(job_id, 60)
            assert record.cells[0].state == "submitted", record  # it ran: delivered
            assert (await trampoline.result()).job_id == job_id
    finally:
        await replay.stop()


async def test_a_deleted_execution_converges_with_its_own_reason_after_the_send_that_was_out(env: Env) -> None:
    # a job this ledger knows, in this namespace: the namespace is curaflow's
    witness = await submit(env, "solo")
    await env.stack.wait_terminal(witness, 60)

    env.hook.script["/hook"] = [Reply(delay_s=4.0)]
    env.hook.arrived.clear()
    job_id = await submit(env, "pair")
    await asyncio.wait_for(env.hook.arrived.wait(), 30)  # the send to the webhook is out

    await delete_execution(env.client, job_id)
    # The send lands 4 s after it left; the reconciler ticks every 0.5 s. The stall budget
    # (minutes) and the deadline are far off: only the deletion rule ends the job here.
    record = await env.stack.wait_terminal(job_id, 30)

    pool = await env.stack.ledger()
    intents = {
        r["route"]: r["status"]
        for r in await pool.fetch("SELECT route, status FROM delivery_intents WHERE job_id = $1", job_id)
    }
    web = next(r for r in intents if r.startswith("hook-"))
    broken = next(r for r in intents if r.startswith("broken-"))
    assert intents[web] == "delivered", intents  # what landed stays delivered
    assert intents[broken] != "delivered" and intents[broken] not in ("pending", "sending"), intents
    cell = record.cells[0]
    assert (cell.state, cell.reason) == ("failed", "execution_deleted"), cell
    assert "deleted" in (cell.reason_message or "").lower(), cell.reason_message

    job = (await env.http.get(f"/jobs/{job_id}")).json()
    assert job["status"] == "cancelled", job
    assert job["error"]["code"] == "cancelled_by_consumer", job
    assert job["error"]["detail"]["internal_code"] == "execution_deleted", job
    assert "deleted" in job["error"]["message"].lower(), job
    landed = {d["route"]: d["status"] for d in job["error"]["detail"]["deliveries"]}
    assert landed[web] == "delivered", job
    row = await pool.fetchrow("SELECT alertable, record FROM outcomes WHERE job_id = $1", job_id)
    assert row["alertable"] is False
    outcome = json.loads(row["record"]) if isinstance(row["record"], str) else row["record"]
    assert "execution_deleted" in json.dumps(outcome), outcome
    events = (await env.http.get(f"/jobs/{job_id}/events")).json()["events"]
    assert events[-1]["type"] == "job.cancelled", [e["type"] for e in events]


async def test_a_process_in_the_wrong_namespace_ends_nothing(env: Env) -> None:
    """A reconciler whose client is in a namespace that holds none of this ledger's jobs
    (a worker configured with a wrong ``temporal.namespace``: it registers that namespace
    at start) finds every job's execution "not found". It must not take that for a
    deletion: the job runs on in its own namespace."""
    job_id = await submit(env, "stuck")
    pool = await env.stack.ledger()
    # its sends are tried and retried (nobody answers); between two attempts no lease is held
    await eventually(
        lambda: pool.fetchval("SELECT max(attempts) > 1 FROM delivery_intents WHERE job_id = $1", job_id),
        timeout_s=60,
        what="the job's sends are retried",
    )
    wrong = await connect(env.temporal_address, namespace=f"wrong-{short_id()}")
    await prepare_namespace(wrong, timeout_s=60)

    reports: list[TickReport] = []

    async def judged() -> bool:
        reports.append(await tick(pool, None, wrong))
        return any(job_id in r.unconfirmed or job_id in r.deleted for r in reports)

    await eventually(judged, timeout_s=30, interval_s=0.3, what="the wrong namespace's tick looked at the job")
    assert all(job_id not in r.deleted for r in reports), reports
    assert (await env.stack.job(job_id)).completed_at is None
    assert (await env.client.get_workflow_handle(job_id).describe()).status is not None  # runs on

    cancelled = await env.http.post(f"/jobs/{job_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    await env.stack.wait_terminal(job_id, 30)


async def test_the_namespace_is_witnessed_by_this_ledger_s_jobs_whatever_else_runs_there(env: Env) -> None:
    """The proof that the namespace holds this ledger's jobs was looked for among the
    namespace's latest job executions only: when the last :data:`WITNESS_SAMPLE` were
    another ledger's (a namespace shared with another deployment, a Temporal client's
    refused starts, the suite's other modules), a deleted execution was never taken for
    deleted (``reconciler.namespace_unconfirmed`` on every tick). Now the ledger's own latest
    started jobs are looked up too."""
    from curaflow.ledger.reconciler.executions import WITNESS_SAMPLE, namespace_holds_jobs

    job_id = await submit(env, "solo")
    await env.stack.wait_terminal(job_id, 60)
    foreign = [f"foreign-{short_id()}" for _ in range(WITNESS_SAMPLE + 1)]
    queue = f"nobody-{short_id()}"  # no worker: they stay open, untouched
    for workflow_id in foreign:
        await env.client.start_workflow("JobWorkflow", {"protocol_version": "1"}, id=workflow_id, task_queue=queue)
    try:

        async def swamped() -> bool:
            latest = [
                w.id async for w in env.client.list_workflows("WorkflowType = 'JobWorkflow'", limit=WITNESS_SAMPLE)
            ]
            return set(latest) <= set(foreign) and len(latest) == WITNESS_SAMPLE

        await eventually(swamped, timeout_s=30, interval_s=0.3, what="the latest job executions are all foreign")
        pool = await env.stack.ledger()
        async with pool.acquire() as conn:
            assert await namespace_holds_jobs(conn, env.client, {}) is True
    finally:
        for workflow_id in foreign:
            await env.client.get_workflow_handle(workflow_id).terminate(reason="test: foreign executions")

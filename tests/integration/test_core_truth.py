"""The core tells the truth under cancels, deadlines, terminates and worker kills.

One real worker process with the default heartbeat interval (30 s: an activity does not
hear a cancel through its heartbeats for a while, as in production), the API in the test
process, the Pixiv replay server and a webhook receiver in the test process.

* a delivery that landed is reported whatever the terminal status (Job, terminal event,
  outcome record, ``status`` query);
* the deadline and every cancel path (HTTP, the ``cancel`` signal, a Temporal cancel
  request) are barriers: no step that searches, fetches or sends is scheduled after them,
  and every path records the cancel in the ledger;
* an operator's terminate converges at once with its own reason, not as a stall.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus

from curaflow.devstack.ports import free_port
from curaflow.devstack.temporal import temporal_binary
from tests.fakes.replay import ReplayServer
from tests.fakes.webhook import WebhookReceiver
from tests.jobs_support import WebhookEnv, webhook_env
from tests.support import Stack, activity_attempts, closed_status, eventually, job_in_stage, short_id, whsec

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: Activities that search, fetch or send: none may be scheduled after a barrier.
WORK_ACTIVITIES = {"acquire", "search", "fetch", "deliver"}


@dataclass
class Env(WebhookEnv):
    """:class:`~tests.jobs_support.WebhookEnv` with the module's two routes' names."""

    hook_route: str = ""
    broken_route: str = ""


@pytest.fixture(scope="module")
async def env(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str, ledger_pool: Any
) -> AsyncIterator[Env]:
    # a route that keeps failing without an answer: nothing listens on its port (not sent,
    # retried); a directory under a regular file is route_refused at once since 2026-12-05
    nobody = f"http://127.0.0.1:{free_port()}/hook"
    web, broken = f"hook-{short_id()}", f"broken-{short_id()}"

    def config(hook: WebhookReceiver) -> dict[str, Any]:
        return {
            "api": {"cancel_wait_ms": 8000},
            # The production default: a cancel reaches an activity only with a heartbeat.
            "budgets": {"heartbeat_interval_ms": 30_000},
            "delivery": {"max_attempts": 1000},
            "routes": {
                web: {"kind": "webhook", "url": hook.url + "/hook", "secret": whsec(), "timeout_ms": 8000},
                broken: {"kind": "webhook", "url": nobody, "secret": whsec(), "timeout_ms": 8000},
            },
            "targets": [
                {"id": "p1", "query": {"tags": ["オリジナル"]}, "routes": [web, broken]},
                {"id": "demo", "query": {"tags": ["風景"]}, "routes": [web]},
            ],
        }

    async with webhook_env(tmp_path_factory.mktemp("truth"), temporal_address, database_url, config) as opened:
        yield Env(**vars(opened), hook_route=web, broken_route=broken)


@pytest.fixture(autouse=True)
def reset_faults(env: Env) -> None:
    env.replay.faults.search_delay_s = 0.0
    env.replay.faults.slow_images_s = 0.0
    env.hook.script.clear()
    env.hook.arrived.clear()


async def submit(env: Env, target: str, **extra: Any) -> str:
    body = {**env.stack.task(target_id=target), **extra}
    response = await env.http.post("/jobs", json=body)
    assert response.status_code == 202, response.text
    return str(response.json()["job"]["job_id"])


async def cancel_by(env: Env, path: str, job_id: str) -> None:
    """Cancel ``job_id`` the way a consumer or an operator does: ``http``, ``signal``
    (``temporal workflow signal --name cancel``) or ``temporal`` (``temporal workflow cancel``)."""
    if path == "http":
        response = await env.http.post(f"/jobs/{job_id}/cancel")
        assert response.status_code == 200, response.text
        return
    verb = ["signal", "--name", "cancel"] if path == "signal" else ["cancel"]
    await asyncio.to_thread(
        subprocess.run,
        [temporal_binary(), "workflow", *verb, "--address", env.temporal_address, "-w", job_id],
        check=True,
        capture_output=True,
        timeout=30,
    )


async def work_scheduled_after_barrier(env: Env, job_id: str) -> list[str]:
    """Activities that search/fetch/send scheduled after the job's first barrier event
    (a cancel signal, a Temporal cancel request, or the deadline timer firing)."""
    history = await env.client.get_workflow_handle(job_id).fetch_history()
    barrier_seen = False
    late: list[str] = []
    for event in history.events:
        if event.event_type in (
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED,
            EventType.EVENT_TYPE_TIMER_FIRED,
        ) or (
            event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
            and event.workflow_execution_signaled_event_attributes.signal_name == "cancel"
        ):
            barrier_seen = True
        elif barrier_seen and event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            name = event.activity_task_scheduled_event_attributes.activity_type.name
            if name in WORK_ACTIVITIES:
                late.append(f"{name} (event {event.event_id})")
    return late


def posts_for(env: Env, job_id: str) -> list[Any]:
    return [r for r in env.hook.received if job_id in r.headers.get("webhook-id", "")]


# ---- 1. what landed is reported, whatever the terminal status ----------------------


@pytest.mark.parametrize("path", ["http", "signal", "temporal"])
async def test_a_cancelled_job_reports_the_delivery_that_landed(env: Env, path: str) -> None:
    job_id = await submit(env, "p1")
    await asyncio.wait_for(env.hook.arrived.wait(), 30)  # the webhook has the work
    pool = await env.stack.ledger()

    async def hook_delivered() -> bool:  # its answer is recorded; the broken route keeps failing
        status = await pool.fetchval(
            "SELECT status FROM delivery_intents WHERE job_id = $1 AND route = $2", job_id, env.hook_route
        )
        return bool(status == "delivered")

    await eventually(hook_delivered, what="the webhook's delivery recorded")

    await cancel_by(env, path, job_id)

    assert await closed_status(env.client, job_id) == WorkflowExecutionStatus.CANCELED
    record = await env.stack.wait_terminal(job_id, 30)
    work_id = record.cells[0].work_id
    job = (await env.http.get(f"/jobs/{job_id}")).json()
    assert job["status"] == "cancelled", job
    deliveries = {d["route"]: d for d in job["error"]["detail"]["deliveries"]}
    assert deliveries[env.hook_route]["status"] == "delivered"
    assert deliveries[env.hook_route]["work_id"] == work_id
    assert deliveries[env.hook_route]["target_id"] == "p1"
    assert deliveries[env.broken_route]["status"] in ("released", "failed")
    assert len(posts_for(env, job_id)) == 1

    # The terminal event carries the same report.
    events = (await env.http.get(f"/jobs/{job_id}/events")).json()["events"]
    terminal = events[-1]
    assert terminal["type"] == "job.cancelled"
    assert terminal["payload"]["error"]["detail"]["deliveries"] == job["error"]["detail"]["deliveries"]

    # The outcome record does not say that nothing went out.
    row = await pool.fetchrow("SELECT business_status, alertable, record FROM outcomes WHERE job_id = $1", job_id)
    outcome = row["record"]
    assert row["business_status"] == "partial_success", outcome
    assert row["alertable"] is False
    assert outcome["cells"]["partially_delivered"] == 1
    landed = [d for d in outcome["deliveries"] if d["status"] == "delivered"]
    assert [(d["route"], d["work_id"]) for d in landed] == [(env.hook_route, work_id)]

    # ... nor does the workflow's status query.
    state = await env.client.get_workflow_handle(job_id).query("status")
    assert state["status"] == "cancelled"
    assert {(d["route"], d["status"]) for d in state["deliveries"]} >= {(env.hook_route, "delivered")}


# ---- 2. the deadline is a barrier -----------------------------------------------------


async def test_nothing_is_fetched_or_sent_after_the_deadline(env: Env) -> None:
    env.replay.faults.slow_images_s = 4  # the fetch is in flight when the deadline fires
    job_id = await submit(env, "demo", deadline_ms=2500)

    assert await closed_status(env.client, job_id) != WorkflowExecutionStatus.RUNNING
    record = await env.stack.wait_terminal(job_id, 30)

    assert await work_scheduled_after_barrier(env, job_id) == []
    assert posts_for(env, job_id) == []
    job = (await env.http.get(f"/jobs/{job_id}")).json()
    assert job["status"] == "expired", job
    assert job["error"]["code"] == "deadline_exceeded"
    assert record.completed_at is not None and record.deadline_at is not None
    # The job ends within moments of its deadline: the in-flight fetch was cancelled,
    # not waited out.
    assert record.completed_at - record.deadline_at < 3000, record.completed_at - record.deadline_at


# ---- 3. every cancel path is a barrier and is recorded in the ledger -------------------


@pytest.mark.parametrize("path", ["http", "signal", "temporal"])
async def test_every_cancel_path_is_a_barrier(env: Env, path: str) -> None:
    env.replay.faults.slow_images_s = 3  # the fetch is in flight when the cancel comes
    job_id = await submit(env, "demo")
    await job_in_stage(env.http, job_id, "fetching")

    await cancel_by(env, path, job_id)

    assert await closed_status(env.client, job_id) == WorkflowExecutionStatus.CANCELED
    record = await env.stack.wait_terminal(job_id, 30)
    assert "deliver" not in await activity_attempts(env.client, job_id)
    assert record.cancel_requested_at is not None, "the cancel was not recorded in the ledger"
    assert await work_scheduled_after_barrier(env, job_id) == []
    assert posts_for(env, job_id) == []
    assert (record.cells[0].state, record.cells[0].reason) == ("failed", "cancelled_by_consumer")
    pool = await env.stack.ledger()
    sent = await pool.fetchval("SELECT count(*) FROM delivery_intents WHERE job_id = $1 AND attempts > 0", job_id)
    assert sent == 0


# ---- 4. an operator's terminate is not a stall ------------------------------------------


async def test_a_terminated_run_converges_at_once_with_its_own_reason(env: Env) -> None:
    env.replay.faults.search_delay_s = 30
    job_id = await submit(env, "demo")
    await job_in_stage(env.http, job_id, "searching")

    await env.client.get_workflow_handle(job_id).terminate(reason="operator: wrong query")
    started = time.monotonic()
    record = await env.stack.wait_terminal(job_id, 15)
    took = time.monotonic() - started

    assert took < 5, f"converged after {took:.1f}s (reconcile interval 0.5 s)"
    cell = record.cells[0]
    assert (cell.state, cell.reason) == ("failed", "execution_terminated")
    assert "terminated" in (cell.reason_message or "").lower()
    job = (await env.http.get(f"/jobs/{job_id}")).json()
    assert job["error"]["code"] == "cancelled_by_consumer"
    assert job["error"]["detail"]["internal_code"] == "execution_terminated"
    pool = await env.stack.ledger()
    row = await pool.fetchrow("SELECT business_status, alertable FROM outcomes WHERE job_id = $1", job_id)
    assert row["alertable"] is False


@pytest.mark.parametrize(
    ("answer_after_s", "landed"),
    [(0.3, "delivered"), (4.0, "delivered"), (12.0, "unknown")],
    ids=["answer-at-once", "answer-after-the-cancel-grace", "no-answer-within-the-route-timeout"],
)
async def test_a_terminate_while_a_send_is_out_waits_for_it_and_reports_what_landed(
    env: Env, answer_after_s: float, landed: str
) -> None:
    """The reconciler closes a terminated job only when no attempt of it can still land:
    a send already out when the execution is terminated finishes within its route's own
    time limit (nothing waits for the attempt but the reconciler, so it is not cut after
    the cancel grace) and is reported delivered; one the route's time limit ends (8 s
    here) is reported unknown. Either way the outcome record, the terminal event and GET
    tell the same story, for good."""
    from tests.fakes.webhook import Reply

    # The answer unsent at the close is let go then: past the route's time limit, no one
    # reads it (a send still out at the close would take it, and the story would change).
    # Waited out whole, the unanswered case took 12 s.
    closed = asyncio.Event()
    env.hook.script["/hook"] = [Reply(delay_s=answer_after_s, released=closed)]
    env.hook.arrived.clear()
    job_id = await submit(env, "demo")
    await asyncio.wait_for(env.hook.arrived.wait(), 30)  # the send is out

    await env.client.get_workflow_handle(job_id).terminate(reason="operator: during a send")
    record = await env.stack.wait_terminal(job_id, 30)
    at_close = (await env.http.get(f"/jobs/{job_id}")).json()
    closed.set()

    pool = await env.stack.ledger()
    outcome = await pool.fetchval("SELECT record FROM outcomes WHERE job_id = $1", job_id)
    import json as _json

    outcome = _json.loads(outcome) if isinstance(outcome, str) else outcome

    # Any answer has arrived by now, whatever the reconciler did: the receiver has ended the
    # request (answered it, or seen its client go).
    await eventually(
        lambda: any(job_id in answered for answered in env.hook.answered),
        timeout_s=answer_after_s + 30,
        what="the receiver ended the send",
    )
    job = (await env.http.get(f"/jobs/{job_id}")).json()
    intents = await pool.fetch("SELECT status FROM delivery_intents WHERE job_id = $1", job_id)
    assert [r["status"] for r in intents] == [landed]
    assert (job["status"], job.get("deliveries"), job.get("error")) == (
        at_close["status"],
        at_close.get("deliveries"),
        at_close.get("error"),
    ), (at_close, job)
    events = (await env.http.get(f"/jobs/{job_id}/events")).json()["events"]
    assert events[-1]["type"] == f"job.{job['status']}", [e["type"] for e in events]
    if landed == "delivered":
        assert record.cells[0].state == "submitted", record.cells[0]
        assert job["status"] == "succeeded", job
        assert "unknown" not in str(outcome), outcome
    else:
        assert record.cells[0].state != "submitted", record.cells[0]
        assert "unknown" in str(outcome), outcome
        assert "delivered" not in str(job.get("deliveries")), job


async def test_a_consumer_cancel_after_a_terminate_waits_for_the_send_that_is_out(env: Env) -> None:
    """An operator terminates the job while its send is out, and its consumer, seeing it
    hang, cancels it over HTTP at once. The execution is closed: no workflow acts on the
    cancel, so the job is converged — but only once the send that is out has ended, and
    with the cause Temporal gives (the terminate), as the reconciler converges it. Before,
    the HTTP cancel finished the job at once (``cancelled_by_consumer``, the delivery
    ``unknown``) while the receiver took the work a moment later."""
    from tests.fakes.webhook import Reply

    env.hook.script["/hook"] = [Reply(delay_s=4.0)]
    env.hook.arrived.clear()
    job_id = await submit(env, "demo")
    await asyncio.wait_for(env.hook.arrived.wait(), 30)  # the send is out

    await env.client.get_workflow_handle(job_id).terminate(reason="operator: during a send")
    cancelled = await env.http.post(f"/jobs/{job_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    await env.stack.wait_terminal(job_id, 30)
    await eventually(
        lambda: any(job_id in answered for answered in env.hook.answered),
        timeout_s=30,
        what="the receiver answered the send",
    )
    job = (await env.http.get(f"/jobs/{job_id}")).json()
    pool = await env.stack.ledger()
    intents = await pool.fetch("SELECT status FROM delivery_intents WHERE job_id = $1", job_id)
    assert [r["status"] for r in intents] == ["delivered"]
    assert job["status"] == "succeeded", job
    assert [d["status"] for d in job["result"]["deliveries"]] == ["delivered"], job
    outcome = await pool.fetchval("SELECT record::text FROM outcomes WHERE job_id = $1", job_id)
    assert "unknown" not in outcome, outcome
    events = (await env.http.get(f"/jobs/{job_id}/events")).json()["events"]
    assert events[-1]["type"] == "job.succeeded" and events[-1]["payload"]["job"] == job


# ---- 5. a worker killed during finish costs a heartbeat timeout, not a minute ----------


async def test_finish_resumes_quickly_after_its_worker_is_killed(
    tmp_path: Path, temporal_address: str, database_url: str, ledger_pool: Any
) -> None:
    replay = await ReplayServer().start()
    out = f"out-{short_id()}"
    stack = Stack(
        tmp_path,
        temporal_address,
        database_url,
        {
            "pixiv": {"api_url": replay.url},
            "routes": {out: {"kind": "directory", "path": str(tmp_path / "out")}},
            "targets": [{"id": "demo", "query": {"tags": ["風景"]}, "routes": [out]}],
        },
    )
    workers = [await stack.start_worker(), await stack.start_worker()]
    client = await stack_client(temporal_address)
    pool = await stack.ledger()
    blocker = await pool.acquire()
    tx = blocker.transaction()
    try:
        await tx.start()
        # finish writes the outcome record last: it blocks here, holding its attempt open.
        await blocker.execute("LOCK TABLE outcomes IN SHARE ROW EXCLUSIVE MODE")
        job_id = await stack.admit(stack.task(target_id="demo"))
        handle = client.get_workflow_handle(job_id)
        # finish (a local activity, inside a workflow task) waits for the lock on outcomes
        await eventually(
            lambda: pool.fetchval(
                "SELECT count(*) FROM pg_locks WHERE relation = 'outcomes'::regclass AND NOT granted"
            ),
            what="finish waiting for the lock on outcomes",
        )
        history = await handle.fetch_history()
        started = [
            e.workflow_task_started_event_attributes.identity
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED
        ]
        identity = started[-1]  # the worker running the workflow task that runs finish
        pid = int(identity.split("@", 1)[0])
        victim = next(w for w in workers if w.pid == pid)
        victim.kill()
        await tx.rollback()
        killed = time.monotonic()
        record = await stack.wait_terminal(job_id, 90)
        took = time.monotonic() - killed
    finally:
        await pool.release(blocker)
        await stack.stop()
        await replay.stop()
    assert record.cells[0].state == "submitted"
    # the job's workflow task timeout (5 s) and a replay on the other worker: well under the
    # 60 s finish's start-to-close timeout cost before
    assert took < 15, f"finish resumed after {took:.1f}s"


async def stack_client(address: str) -> Client:
    from curaflow.temporal.connection import connect

    return await connect(address)


@pytest.mark.parametrize(
    ("order", "reason", "status", "code"),
    [
        ("terminate-then-cancel", "execution_terminated", "cancelled", "cancelled_by_consumer"),
        ("timeout-then-cancel", "execution_timeout", "expired", "deadline_exceeded"),
        # The rule it keeps: a cancel recorded before the close is what stopped the job.
        ("cancel-then-terminate", "cancelled_by_consumer", "cancelled", "cancelled_by_consumer"),
    ],
)
async def test_a_consumer_cancel_after_the_execution_closed_keeps_the_close_as_the_reason(
    env: Env, order: str, reason: str, status: str, code: str
) -> None:
    """Temporal closed the job's execution (an operator's terminate, the execution timeout)
    while an attempt still held its cell's lease; then the consumer, seeing the job hang,
    cancels it over HTTP. The cancel stopped nothing — the execution was already closed —
    so the job ends as the close made it end: ``execution_terminated`` (job cancelled) or
    ``execution_timeout`` (job expired), as docs/http-api.md says ("A consumer's
    ``POST /jobs/{id}/cancel`` of such a job changes neither"). Before, the cancel recorded
    on the way rewrote the close's reason into ``cancelled_by_consumer`` once the lease
    ended, and a timed-out job was reported cancelled, not expired. A cancel recorded
    before the close still is the job's reason."""
    from datetime import timedelta

    from curaflow.domain.presentation import job_search_attributes
    from curaflow.jobs.admission import Admitter
    from curaflow.ledger.jobs import mark_workflow_started

    pool = await env.stack.ledger()
    body = env.stack.task(target_id="demo")
    admission = await Admitter(env.stack.settings, pool, None).admit(body, start=False)
    inp = admission.job_input
    assert inp is not None
    # An attempt of the job holds its cell's lease (a worker frozen in a step, a send out).
    await pool.execute(
        "UPDATE cells SET lease_until = $2 WHERE job_id = $1", inp.job_id, int(time.time() * 1000) + 600_000
    )
    handle = await env.client.start_workflow(
        "JobWorkflow",
        inp,
        id=inp.job_id,
        task_queue=f"unserved-{short_id()}",  # no worker: the execution makes no step
        execution_timeout=timedelta(seconds=2) if order.startswith("timeout") else None,
        search_attributes=job_search_attributes(inp),
    )
    async with pool.acquire() as conn:
        await mark_workflow_started(conn, inp.job_id)

    async def cancel() -> asyncio.Task[httpx.Response]:
        sent = asyncio.create_task(env.http.post(f"/jobs/{inp.job_id}/cancel"))
        await eventually(
            lambda: pool.fetchval("SELECT cancel_requested_at IS NOT NULL FROM jobs WHERE job_id = $1", inp.job_id),
            timeout_s=10,
            what="the cancel recorded",
        )
        return sent

    if order.startswith("cancel"):
        cancelled = await cancel()
        await asyncio.sleep(0.05)  # the close comes strictly after the cancel, on every clock
    if "terminate" in order:
        await handle.terminate(reason="operator: wrong query")
    expected = WorkflowExecutionStatus.TIMED_OUT if order.startswith("timeout") else WorkflowExecutionStatus.TERMINATED
    assert await closed_status(env.client, inp.job_id) == expected
    if not order.startswith("cancel"):
        cancelled = await cancel()
    assert (await env.stack.job(inp.job_id)).completed_at is None  # the lease holds the convergence
    await pool.execute("UPDATE cells SET lease_until = NULL WHERE job_id = $1", inp.job_id)  # the attempt ended
    answered = await cancelled
    assert answered.status_code == 200, answered.text

    record = await env.stack.wait_terminal(inp.job_id, 30)
    assert (record.cells[0].state, record.cells[0].reason) == ("failed", reason), record.cells[0]
    job = (await env.http.get(f"/jobs/{inp.job_id}")).json()
    assert (job["status"], job["error"]["code"], job["error"]["detail"]["internal_code"]) == (
        status,
        code,
        reason,
    ), job
    events = (await env.http.get(f"/jobs/{inp.job_id}/events")).json()["events"]
    assert events[-1]["type"] == f"job.{status}", [e["type"] for e in events]

"""Pushing events to a job's ``callback_url`` (reference §4.7; curaflow.jobs.pushes).

A real worker runs the ``push_events`` activity; the consumer is a real HTTP receiver
on 127.0.0.1 scripted to answer 503 / 429 / slow / 409 / 400 / 500. The tests on the
common callback settings share one worker process and the API (:func:`shared`); the others
(another callback budget, another network policy, no worker at first) have their own.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs
from temporalio.client import Client, WorkflowExecutionStatus

from curaflow.domain.execution import end_push_wait
from curaflow.jobs.pushes import push_workflow_id, sweep_once
from curaflow.ledger.event_pushes import push_states
from tests.conftest import StackFactory
from tests.fakes.hostile import Behaviour, HostileParty
from tests.fakes.webhook import Reply, WebhookReceiver
from tests.support import Stack, closed_status, eventually, push_config, shared_stack, short_id, terminal_job

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TERMINAL = ("job.succeeded", "job.failed", "job.expired", "job.cancelled")


def callback_config(tmp_path: Path) -> dict[str, Any]:
    """:func:`push_config` with a consumer's push answered within 1 s and retried after
    100 ms, at most 300 ms apart; its target queries ``オリジナル``."""
    return push_config(
        tmp_path,
        tags=("オリジナル",),
        callback_timeout_ms=1000,
        callback_retry_initial_interval_ms=100,
        callback_retry_max_interval_ms=300,
    )


@pytest.fixture(scope="module")
async def module_stack(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str, ledger_pool: Any
) -> AsyncIterator[Stack]:
    tmp = tmp_path_factory.mktemp("callbacks")
    async with shared_stack(tmp, temporal_address, database_url, callback_config(tmp), api=True) as stack:
        yield stack


@pytest.fixture
def shared(module_stack: Stack, webhook: WebhookReceiver) -> Stack:
    """The module's worker and API on :func:`callback_config` (each test its own callback path)."""
    return module_stack


async def all_events(stack: Stack, job_id: str) -> list[dict[str, Any]]:
    assert stack.http is not None
    return list((await stack.http.get(f"/jobs/{job_id}/events")).json()["events"])


async def wait_settled(stack: Stack, job_id: str, timeout_s: float = 60) -> list[dict[str, Any]]:
    """Wait until the job is terminal and every push row is delivered or dead."""
    pool = await stack.ledger()

    async def settled() -> list[dict[str, Any]] | None:
        states = await push_states(pool, job_id)
        events = await all_events(stack, job_id)
        terminal = bool(events) and events[-1]["type"] in TERMINAL
        if terminal and len(states) == len(events) and all(s["status"] != "pending" for s in states):
            return states
        return None

    return await eventually(settled, timeout_s=timeout_s, interval_s=0.2, what=f"pushes of {job_id} settled")


async def test_events_written_without_a_workflow_are_pushed_by_the_sweeper(
    make_stack: StackFactory, tmp_path: Path, webhook: WebhookReceiver, temporal_client: Client
) -> None:
    stack = make_stack(callback_config(tmp_path))
    http = await stack.start_api()
    body = stack.task(query={"tags": ["オリジナル"]})
    body["callback_url"] = webhook.url + "/swept"
    job_id = (await http.post("/jobs", json=body)).json()["job"]["job_id"]

    # The API starts the workflow in the background once the job is durable.
    async def workflow_started() -> bool:
        return (await stack.job(job_id)).workflow_started_at is not None

    await eventually(workflow_started, interval_s=0.05, what="the workflow started")
    # Its workflow is gone before any worker ran it; the HTTP cancel converges the ledger.
    await temporal_client.get_workflow_handle(job_id).terminate(reason="test: no workflow serves this job")
    cancelled = await http.post(f"/jobs/{job_id}/cancel")
    assert cancelled.json()["status"] == "cancelled"
    assert webhook.at("/swept") == []

    await stack.start_worker()
    states = await wait_settled(stack, job_id, timeout_s=60)

    events = await all_events(stack, job_id)
    assert [e["type"] for e in events] == ["job.accepted", "job.cancelled"]
    assert [s["status"] for s in states] == ["delivered", "delivered"]
    assert [json.loads(r.body)["event_id"] for r in webhook.at("/swept")] == [e["event_id"] for e in events]
    described = await temporal_client.get_workflow_handle(push_workflow_id(job_id)).describe()
    assert described.workflow_type == "EventPushWorkflow"
    status = await closed_status(temporal_client, push_workflow_id(job_id), timeout_s=10)
    assert status == WorkflowExecutionStatus.COMPLETED


async def test_a_push_run_never_takes_the_id_of_another_job(
    make_stack: StackFactory, tmp_path: Path, webhook: WebhookReceiver, temporal_client: Client
) -> None:
    # A key may hold "/": the job of key "K/push-events" must run its own JobWorkflow even
    # while the sweeper's push run of the job of key "K" is open. Before, that run's id was
    # "<job of K>/push-events" — the other job's id — so the new job's start attached to
    # the push run (USE_EXISTING) and the job never ran.
    stack = make_stack(callback_config(tmp_path))
    http = await stack.start_api()  # no worker: the push run stays open
    key = f"k-{short_id()}"
    body = stack.task(key=key, query={"tags": ["オリジナル"]})
    body["callback_url"] = webhook.url + "/collide"
    job_id = (await http.post("/jobs", json=body)).json()["job"]["job_id"]

    async def workflow_started(job: str) -> bool:
        return (await stack.job(job)).workflow_started_at is not None

    await eventually(lambda: workflow_started(job_id), interval_s=0.05, what="the workflow started")
    await temporal_client.get_workflow_handle(job_id).terminate(reason="test: no workflow serves this job")
    assert (await http.post(f"/jobs/{job_id}/cancel")).json()["status"] == "cancelled"
    pool = await stack.ledger()
    await pool.execute("UPDATE event_pushes SET updated_at = 0 WHERE job_id = $1", job_id)  # stale now
    with capture_logs() as logs:
        assert job_id in await sweep_once(pool, temporal_client, stack.settings)
        # The push run is still open (no worker): the next sweep finds it running and says
        # so — it logged `push.sweep_started` again, a run that was never started.
        assert job_id in await sweep_once(pool, temporal_client, stack.settings)
    said = [(e["event"], e.get("run_id")) for e in logs if e["event"].startswith("push.sweep")]
    run_id = (await temporal_client.get_workflow_handle(push_workflow_id(job_id)).describe()).run_id
    assert said == [("push.sweep_started", run_id), ("push.sweep_found_running", run_id)], said

    other = stack.task(key=f"{key}/push-events", query={"tags": ["オリジナル"]})
    answer = await http.post("/jobs", json=other)
    assert answer.status_code == 202, answer.text
    other_id = answer.json()["job"]["job_id"]
    assert other_id != job_id
    await eventually(lambda: workflow_started(other_id), interval_s=0.05, what="the other job's workflow started")
    described = await temporal_client.get_workflow_handle(other_id).describe()
    assert described.workflow_type == "JobWorkflow", described.workflow_type
    pushing = await temporal_client.get_workflow_handle(push_workflow_id(job_id)).describe()
    assert pushing.workflow_type == "EventPushWorkflow"
    await temporal_client.get_workflow_handle(push_workflow_id(job_id)).terminate(reason="test: done")


async def test_a_down_receiver_gets_the_rest_from_the_sweeper_in_order_after_the_jobs_end(
    make_stack: StackFactory, tmp_path: Path, webhook: WebhookReceiver, temporal_client: Client
) -> None:
    # The receiver hangs every request (each push cut at callback_timeout_ms, 1 s): the job's
    # execution closes with its result end_push_wait (1 s + 5 s) after the job ended, not
    # after every event used its eight attempts; once the receiver is back, the sweeper
    # pushes what was left, oldest first, within each event's attempts.
    recovered = asyncio.Event()
    webhook.script["/down"] = [Reply(200, delay_s=120, released=recovered) for _ in range(100)]
    conf = callback_config(tmp_path)
    conf["api"].update(callback_retry_initial_interval_ms=1000, callback_retry_max_interval_ms=2000)
    stack = make_stack(conf)
    await stack.start_worker()
    http = await stack.start_api()
    body = stack.task(query={"tags": ["オリジナル"]})
    body["callback_url"] = webhook.url + "/down"
    job_id = (await http.post("/jobs", json=body)).json()["job"]["job_id"]

    assert (await terminal_job(http, job_id, timeout_s=60))["status"] == "succeeded"
    bound = end_push_wait(stack.settings.push_policy().timeout_ms, None)
    status = await closed_status(temporal_client, job_id, timeout_s=bound.total_seconds() + 10)
    assert status == WorkflowExecutionStatus.COMPLETED  # before: Running while the pushes were retried
    pool = await stack.ledger()
    left = await push_states(pool, job_id)
    assert [s["status"] for s in left] == ["pending"] * len(left) and len(left) >= 3
    first = left[0]["event_id"]
    assert {r.headers["idempotency-key"] for r in webhook.at("/down")} == {first}  # in order: nothing passed it

    back_at = time.time()
    webhook.script["/down"].clear()
    recovered.set()
    states = await wait_settled(stack, job_id, timeout_s=90)

    events = await all_events(stack, job_id)
    assert [s["status"] for s in states] == ["delivered"] * len(events)
    assert 2 <= states[0]["attempts"] <= stack.settings.api.callback_max_attempts
    assert all(s["attempts"] == 1 for s in states[1:])  # never sent before the ones before them
    after = [r.headers["idempotency-key"] for r in webhook.at("/down") if r.at >= back_at]
    assert after == [e["event_id"] for e in events]  # every event once, in order
    pushing = await temporal_client.get_workflow_handle(push_workflow_id(job_id)).describe()
    assert pushing.workflow_type == "EventPushWorkflow"


#: What a push attempt logs once it is over (settled, lost its claim, or ended by the SDK).
ATTEMPT_OVER = (
    "callback.claim_lost",
    "callback.retry_scheduled",
    "callback.delivered",
    "callback.dead",
    "Completing activity",
)


async def test_a_worker_stopped_in_the_push_wait_never_undoes_what_the_sweeper_delivered(
    make_stack: StackFactory, tmp_path: Path, webhook: WebhookReceiver, temporal_client: Client
) -> None:
    # The receiver holds every request: the job's first push is out when the job ends, and
    # its worker is stopped (SIGSTOP) in the push wait. Another worker closes the job's run
    # at the bound; the receiver comes back, and that worker's sweeper delivers every event
    # in order. Then the stopped worker resumes and its send, long past its lease, ends
    # (cut, or answered 200 late): it must settle nothing. Before, its late timeout put the
    # delivered first event back to pending and the sweeper sent it again after the last.
    held = asyncio.Event()
    webhook.script["/stopped"] = [Reply(200, delay_s=300, released=held) for _ in range(100)]
    stack = make_stack(callback_config(tmp_path))
    stopped = await stack.start_worker()
    http = await stack.start_api()
    body = stack.task(query={"tags": ["オリジナル"]})
    body["callback_url"] = webhook.url + "/stopped"
    job_id = (await http.post("/jobs", json=body)).json()["job"]["job_id"]
    assert (await terminal_job(http, job_id, timeout_s=60))["status"] == "succeeded"
    # Stopped while a send is out: at the next request to reach the receiver (each is cut
    # by the 1 s limit, then retried after 100-300 ms). Stopped at the job's end instead, the
    # stop could fall between two attempts (a -n 6 run, 2026-12-06): the stopped worker then
    # had no send out, its retry found nothing left to claim on waking and ended without a
    # line, and the wait for its attempt's end below timed out.
    sent = len(webhook.at("/stopped"))
    await eventually(lambda: len(webhook.at("/stopped")) > sent, timeout_s=30, interval_s=0.01, what="a push out")
    stopped.pause()
    try:
        await stack.start_worker()
        assert await closed_status(temporal_client, job_id, timeout_s=60) == WorkflowExecutionStatus.COMPLETED
        back_at = time.time()
        webhook.script["/stopped"].clear()  # up again for every new request; the stopped send stays held
        delivered = await wait_settled(stack, job_id, timeout_s=90)
        events = [e["event_id"] for e in await all_events(stack, job_id)]
        assert [s["status"] for s in delivered] == ["delivered"] * len(events)
        seen = len(stack.worker_log(1))
    finally:
        stopped.resume()
    held.set()  # the stopped worker's send is answered, long after its lease

    def over() -> bool:
        return any(line in stack.worker_log(1)[seen:] for line in ATTEMPT_OVER)

    await eventually(over, timeout_s=30, what="the stopped worker's push attempt ended")
    pool = await stack.ledger()
    assert await push_states(pool, job_id) == delivered  # nothing settled again, nothing pending
    after = [r.headers["idempotency-key"] for r in webhook.at("/stopped") if r.at >= back_at]
    assert after == events  # every event once, in order


# ---- the outbound layer: signed, bounded, guarded pushes ---------------------------------


async def test_a_receiver_sending_its_headers_slowly_costs_exactly_its_attempts(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    # The first two connections send their status line and headers a byte every 0.5 s
    # (50 s of headers, each byte within the 1 s read timeout, longer than the push's
    # heartbeat timeout); with callback_max_attempts = 2 the first event is tried exactly
    # twice, each cut at callback_timeout_ms (1 s total), then dead-lettered, and the
    # job's later events are still pushed.
    party = await HostileParty(
        script=[Behaviour("slow_headers", interval_s=0.5), Behaviour("slow_headers", interval_s=0.5)],
        default=Behaviour("ok", body=b'{"ok": true}'),
    ).start()
    try:
        conf = callback_config(tmp_path)
        conf["api"]["callback_max_attempts"] = 2
        stack = make_stack(conf)
        await stack.start_worker()
        http = await stack.start_api()
        body = stack.task(query={"tags": ["オリジナル"]})
        body["callback_url"] = party.url + "/slow"
        job_id = (await http.post("/jobs", json=body)).json()["job"]["job_id"]

        states = await wait_settled(stack, job_id, timeout_s=60)
        assert (states[0]["status"], states[0]["attempts"]) == ("dead", 2)
        assert all((s["status"], s["attempts"]) == ("delivered", 1) for s in states[1:]) and len(states) > 1
        first = states[0]["event_id"]
        keys = [c.headers.get("idempotency-key") for c in party.connections]
        assert keys.count(first) == 2
        assert [k for k in keys if k != first] == [s["event_id"] for s in states[1:]]
    finally:
        await party.stop()


async def test_a_callback_name_resolving_to_loopback_is_refused(make_stack: StackFactory, tmp_path: Path) -> None:
    # "localhost" is allowed by name, but it resolves to 127.0.0.1 and no network allows
    # that address: nothing is ever sent there, whatever the port. Each send is one failed
    # attempt (a lookup's answer, not the consumer's refusal): every event is dead once
    # its callback_max_attempts are spent (until 2026-12-07 at its first attempt).
    party = await HostileParty().start()
    try:
        conf = callback_config(tmp_path)
        conf["api"]["callback_allowed_hosts"] = ["localhost:*"]
        conf["api"]["callback_max_attempts"] = 2
        conf["outbound"] = {"private_networks": []}
        stack = make_stack(conf)
        await stack.start_worker()
        http = await stack.start_api()
        body = stack.task(query={"tags": ["オリジナル"]})
        body["callback_url"] = f"http://localhost:{party.port}/cb"
        answer = await http.post("/jobs", json=body)
        assert answer.status_code in (200, 201, 202), answer.text
        job_id = answer.json()["job"]["job_id"]

        states = await wait_settled(stack, job_id)
        assert all(s["status"] == "dead" and s["attempts"] == 2 for s in states), states
        assert "destination refused at connect time" in states[0]["last_error"]
        assert party.connections == []
    finally:
        await party.stop()


async def test_a_callback_rate_limit_without_a_delay_backs_off_for_seconds(
    make_stack: StackFactory, tmp_path: Path, webhook: WebhookReceiver
) -> None:
    # A 429 without Retry-After: the push waits the backoff of an unknown delay (5 s),
    # not the retry policy's 100 ms first interval.
    webhook.script["/slow-down"] = [Reply(429, {"error": "slow down"})]
    config = callback_config(tmp_path)
    config["api"]["callback_retry_max_interval_ms"] = 60_000
    stack = make_stack(config)
    await stack.start_worker()
    http = await stack.start_api()
    body = stack.task(query={"tags": ["オリジナル"]})
    body["callback_url"] = webhook.url + "/slow-down"
    job_id = (await http.post("/jobs", json=body)).json()["job"]["job_id"]

    states = await wait_settled(stack, job_id, timeout_s=90)
    assert all(s["status"] == "delivered" for s in states)
    first, second = webhook.at("/slow-down")[:2]
    assert first.headers["idempotency-key"] == second.headers["idempotency-key"]
    assert second.at - first.at >= 4.5  # the backoff's first step, never the policy's 0.1 s


# ---- on the shared worker: order, retries, dead letters, signatures ----------------------


async def test_every_event_is_pushed_once_in_order_with_retries(
    shared: Stack, webhook: WebhookReceiver, temporal_client: Client
) -> None:
    # event 1: 503, 429, a reply slower than the 1 s timeout, then 409 ("already had it")
    webhook.script["/cb"] = [Reply(503), Reply(429), Reply(200, delay_s=1.6), Reply(409)]
    stack = shared
    http = stack.http
    assert http is not None
    body = stack.task(query={"tags": ["オリジナル"]})
    body.update(callback_url=webhook.url + "/cb", correlation_id="corr-cb")
    job_id = (await http.post("/jobs", json=body)).json()["job"]["job_id"]

    states = await wait_settled(stack, job_id)
    await temporal_client.get_workflow_handle(job_id).result()  # the execution closes once pushes settled

    events = await all_events(stack, job_id)
    assert [s["status"] for s in states] == ["delivered"] * len(events)
    assert states[0]["attempts"] == 4 and states[0]["last_status"] == 409
    assert all(s["attempts"] == 1 and s["last_status"] == 200 for s in states[1:])
    got = webhook.at("/cb")
    first = events[0]["event_id"]
    assert [r.headers["idempotency-key"] for r in got[:4]] == [first] * 4
    # after the retries every event arrives exactly once, in order, as the Event JSON
    assert [r.headers["idempotency-key"] for r in got[3:]] == [e["event_id"] for e in events]
    by_id = {r.headers["idempotency-key"]: r for r in got}
    for event in events:
        received = by_id[event["event_id"]]
        assert received.json() == event
        assert received.headers["content-type"] == "application/json"
        assert received.headers["x-idempotency-key"] == f"job-event:{job_id}:{event['event_id']}"
    assert events[-1]["type"] == "job.succeeded" and events[-1]["correlation_id"] == "corr-cb"
    # push and pull are independent: nothing was acked, the job is as it ended
    page = (await http.get(f"/jobs/{job_id}/events")).json()
    assert page["unacked"] == len(events)
    assert (await http.get(f"/jobs/{job_id}")).json() == events[-1]["payload"]["job"]


async def test_4xx_dead_letters_at_once_and_5xx_after_eight_attempts(shared: Stack, webhook: WebhookReceiver) -> None:
    webhook.script["/dead"] = [Reply(400, {"error": "no"})] + [Reply(500)] * 8
    stack = shared
    http = stack.http
    assert http is not None
    body = stack.task(query={"tags": ["オリジナル"]})
    body["callback_url"] = webhook.url + "/dead"
    job_id = (await http.post("/jobs", json=body)).json()["job"]["job_id"]

    states = await wait_settled(stack, job_id)

    assert (states[0]["status"], states[0]["attempts"], states[0]["last_status"]) == ("dead", 1, 400)
    assert (states[1]["status"], states[1]["attempts"], states[1]["last_status"]) == ("dead", 8, 500)
    assert all(s["status"] == "delivered" for s in states[2:])
    keys = [r.headers["idempotency-key"] for r in webhook.at("/dead")]
    assert keys.count(states[1]["event_id"]) == 8
    assert keys.count(states[0]["event_id"]) == 1
    assert (await http.get(f"/jobs/{job_id}")).json()["status"] == "succeeded"


async def test_pushes_are_signed_like_the_webhook_route(shared: Stack, webhook: WebhookReceiver) -> None:
    stack = shared
    http = stack.http
    assert http is not None
    body = stack.task(query={"tags": ["オリジナル"]})
    body["callback_url"] = webhook.url + "/signed"
    job_id = (await http.post("/jobs", json=body)).json()["job"]["job_id"]
    await wait_settled(stack, job_id)

    got = webhook.at("/signed")
    assert got and all(r.signature_ok for r in got)  # verified with the standardwebhooks library
    assert [r.headers["webhook-id"] for r in got] == [r.headers["idempotency-key"] for r in got]


async def test_the_status_line_is_the_answer_whatever_the_body_does(shared: Stack) -> None:
    # A push is judged by its status alone (2xx / 409 delivered, 4xx dead, 429 / 5xx
    # retried). Once the status line and headers are in, a body that never ends (cut by
    # the 1 s callback timeout) or is cut mid-way changes nothing: the receiver said 200,
    # so the event is delivered once — not sent again up to callback_max_attempts times
    # and then reported dead-lettered — and a 410 trickled after its status is dead at once.
    party = await HostileParty(
        script=[
            Behaviour("trickle_body", status=200, chunk=1, interval_s=0.2, body=b" "),
            Behaviour("cut_body", status=200, body=b'{"ok": true}'),
            Behaviour("trickle_body", status=410, chunk=1, interval_s=0.2, body=b" "),
        ],
        default=Behaviour("ok", body=b'{"ok": true}'),
    ).start()
    try:
        stack = shared
        assert stack.http is not None
        body = stack.task(query={"tags": ["オリジナル"]})
        body["callback_url"] = party.url + "/body"
        job_id = (await stack.http.post("/jobs", json=body)).json()["job"]["job_id"]

        states = await wait_settled(stack, job_id)
        got = [(s["status"], s["attempts"], s["last_status"]) for s in states]
        assert got[:3] == [("delivered", 1, 200), ("delivered", 1, 200), ("dead", 1, 410)], got
        assert all(s == ("delivered", 1, 200) for s in got[3:]) and len(got) > 3, got
        keys = [c.headers.get("idempotency-key") for c in party.connections]
        assert keys == [s["event_id"] for s in states]  # each event sent once, in order
    finally:
        await party.stop()

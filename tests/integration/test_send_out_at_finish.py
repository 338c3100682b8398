"""A job's end while one of its sends is still out from an attempt the workflow stopped
waiting for.

An operator's ``temporal activity update-options`` that shortens the running ``deliver``
step's start-to-close timeout (one attempt): Temporal times the attempt out while its
send is out to a slow receiver, the workflow goes on to its ``finish`` — and the attempt,
which hears "not found" and lets its send end by its own bounds, then gets the receiver's
200. Until 2026-12-05 the finish ended the job at once (``delivery_abandoned``, the
delivery ``unknown`` in the outcome record) and the late 200 then moved the intent to
``delivered``: ``GET /jobs/{id}`` and the outcome said different things. Now the finish
waits for a send out from a live attempt (its send lease) and ends the job with its
answer — a consumer cancel meanwhile included (nothing cuts that send: ended at once, the
job said ``unknown`` and the late 200 made the intent ``delivered`` all the same). DESIGN.md
"A send still out when the workflow finishes".

A real worker, the API in the test process, the Pixiv replay and a webhook receiver that
holds the answer (:func:`tests.jobs_support.webhook_env`).
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from temporalio.api.enums.v1 import PendingActivityState

from curaflow.devstack.temporal import temporal_binary
from curaflow.jobs.submit import job_id_for
from tests.fakes.webhook import Reply, WebhookReceiver
from tests.integration.test_start_policies import first_send_out, posts, start
from tests.integration.test_temporal_clients import task
from tests.jobs_support import WebhookEnv, one_hook, webhook_env
from tests.operator_support import pending_step
from tests.support import eventually, short_id, terminal_job, whsec

pytestmark = [pytest.mark.integration, pytest.mark.slow]

Env = WebhookEnv


@pytest.fixture(scope="module")
async def env(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str, ledger_pool: Any
) -> AsyncIterator[Env]:
    async with webhook_env(tmp_path_factory.mktemp("send-out"), temporal_address, database_url, one_hook()) as opened:
        yield opened


def activity_cli(env: Env, *args: str) -> subprocess.CompletedProcess[str]:
    """``temporal activity <args>`` against the session's server (not checked)."""
    return subprocess.run(
        [temporal_binary(), "activity", *args, "--address", env.temporal_address],
        capture_output=True,
        text=True,
        timeout=120,
    )


async def deliver_gone(env: Env, job_id: str) -> bool:
    """Temporal holds no running ``deliver`` of the job any more (it timed the attempt out)."""
    described = await env.client.get_workflow_handle(job_id).describe()
    return not any(
        a.activity_type.name == "deliver" and a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
        for a in described.raw_description.pending_activities
    )


async def finish_reached(env: Env, job_id: str) -> bool:
    """The job's ``finish`` ran: the job ended in the ledger, or a finish found its send out."""
    pool = await env.stack.ledger()
    ended = await pool.fetchval("SELECT completed_at IS NOT NULL FROM jobs WHERE job_id = $1", job_id)
    return bool(ended) or any(
        "finish.awaiting_send" in line and job_id in line for line in env.stack.worker_log().splitlines()
    )


#: What the operator does to the running ``deliver`` step while its send is out.
STOPS = {
    # shortened start-to-close timeout, one attempt: Temporal times the attempt out
    "update-options": ("update-options", "--start-to-close-timeout", "1s", "--retry-maximum-attempts", "1"),
    # the step ended by hand (DESIGN.md "Foreign input")
    "fail": ("fail", "--reason", "operator: test"),
    "complete": ("complete", "--result", '"junk"'),
}


async def cancel(env: Env, job_id: str) -> httpx.Response:
    """``POST /jobs/{id}/cancel`` as a consumer sends it: again after a 503 (the ledger did
    not answer in time — a retryable answer, protocol §errors; seen once in a loaded CI run,
    a statement of the cancel waited past the API's statement timeout), at most five times."""
    for _ in range(4):
        answer = await env.http.post(f"/jobs/{job_id}/cancel")
        if answer.status_code != 503:
            return answer
        await asyncio.sleep(0.5)
    return await env.http.post(f"/jobs/{job_id}/cancel")


@pytest.mark.parametrize("stop", list(STOPS))
async def test_a_deliver_the_workflow_stopped_waiting_for_while_its_send_is_out_ends_the_job_with_the_answer(
    env: Env, stop: str
) -> None:
    # The receiver holds the first send; the operator ends the workflow's wait for the step
    # (Temporal times the attempt out, or the step is failed or completed by hand): the
    # workflow finishes while the send is still out. The receiver then answers 200: the job
    # ends with it.
    first = task(f"finish-send-out-{stop[:6]}-{short_id()}")
    job_id = job_id_for(first)
    _, release = await first_send_out(env, first)
    step = await pending_step(env.client, job_id, "deliver")
    verb, *options = STOPS[stop]
    changed = await asyncio.to_thread(activity_cli, env, verb, "-w", job_id, "-a", step, *options)
    assert changed.returncode == 0, changed.stderr
    await eventually(lambda: deliver_gone(env, job_id), timeout_s=30, what="the deliver attempt timed out")
    await eventually(lambda: finish_reached(env, job_id), timeout_s=30, what="the job's finish")
    release.set()

    pool = await env.stack.ledger()

    async def recorded() -> bool:  # the receiver's 200, recorded by the attempt that sent it
        status = await pool.fetchval("SELECT status FROM delivery_intents WHERE job_id = $1", job_id)
        return bool(status == "delivered")

    await eventually(recorded, timeout_s=30, what="the answer recorded")
    job = await terminal_job(env.http, job_id, timeout_s=60)
    assert len(posts(env, job_id)) == 1
    outcome = await pool.fetchval("SELECT record FROM outcomes WHERE job_id = $1", job_id)
    # GET /jobs/{id}, the outcome record and the ledger say the same: delivered.
    assert job["status"] == "succeeded", job
    assert [d["status"] for d in job["result"]["deliveries"]] == ["delivered"], job
    assert outcome["business_status"] == "success", outcome
    assert [t["status"] for t in outcome["cells"]["targets"]] == ["submitted"], outcome
    assert [d["status"] for d in outcome["deliveries"]] == ["delivered"], outcome


async def test_a_consumer_cancel_while_the_finish_waits_for_a_send_out_still_ends_the_job_with_the_answer(
    env: Env,
) -> None:
    # The finish waits for the send the workflow stopped waiting for; the consumer cancels.
    # Nothing can cut that send (its attempt heard "not found" and outlives it within its
    # own bounds): until 2026-12-05 the cancel ended the job at once — `failed`,
    # delivery_abandoned, the delivery `unknown` in the outcome record — and the
    # receiver's 200 then made the intent `delivered`: GET /jobs/{id} said delivered
    # under a failed job, the outcome unknown. The cancel now waits for that answer, as
    # the reconciler's convergence of a cancel waits for a live attempt.
    first = task(f"finish-send-out-cancel-{short_id()}")
    job_id = job_id_for(first)
    _, release = await first_send_out(env, first)
    try:
        step = await pending_step(env.client, job_id, "deliver")
        verb, *options = STOPS["update-options"]
        changed = await asyncio.to_thread(activity_cli, env, verb, "-w", job_id, "-a", step, *options)
        assert changed.returncode == 0, changed.stderr
        await eventually(lambda: finish_reached(env, job_id), timeout_s=30, what="the job's finish")
        assert (await cancel(env, job_id)).status_code in (200, 202)
        pool = await env.stack.ledger()
        await eventually(
            lambda: pool.fetchval("SELECT cancel_requested_at IS NOT NULL FROM jobs WHERE job_id = $1", job_id),
            timeout_s=30,
            what="the cancel recorded",
        )
        # The receiver still holds the send: the job has not ended.
        assert await pool.fetchval("SELECT completed_at FROM jobs WHERE job_id = $1", job_id) is None
    finally:
        release.set()
    job = await terminal_job(env.http, job_id, timeout_s=60)
    await eventually(lambda: any(job_id in a for a in env.hook.answered), timeout_s=30, what="answered")
    outcome = await pool.fetchval("SELECT record FROM outcomes WHERE job_id = $1", job_id)
    intent = await pool.fetchval("SELECT status FROM delivery_intents WHERE job_id = $1", job_id)
    # GET /jobs/{id}, the outcome record and the ledger say the same: delivered (the
    # cancel came after the workflow's finish and stopped nothing).
    assert (intent, job["status"]) == ("delivered", "succeeded"), job
    assert [d["status"] for d in outcome["deliveries"]] == ["delivered"], outcome
    assert [t["status"] for t in outcome["cells"]["targets"]] == ["submitted"], outcome


@pytest.fixture(scope="module")
async def two_routes(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str, ledger_pool: Any
) -> AsyncIterator[Env]:
    """One target delivered on two webhook routes, ``/a`` (listed first) and ``/b``."""

    def config(hook: WebhookReceiver) -> dict[str, Any]:
        routes = {
            f"{path}-{short_id()}": {
                "kind": "webhook",
                "url": hook.url + "/" + path,
                "secret": whsec(),
                "timeout_ms": 20000,
            }
            for path in ("a", "b")
        }
        return {"routes": routes, "targets": [{"id": "demo", "query": {"tags": ["風景"]}, "routes": list(routes)}]}

    async with webhook_env(tmp_path_factory.mktemp("send-out-2"), temporal_address, database_url, config) as opened:
        yield opened


async def test_a_cancel_waits_for_a_send_out_the_workflow_stopped_waiting_for_while_its_other_sends_are_cut(
    two_routes: Env,
) -> None:
    # Both routes' sends are out; the operator times route a's step out (its attempt outlives
    # its send), then the consumer cancels: the workflow cancels route b's step (its send cut
    # within the grace) and finishes `cancelled`. Until 2026-12-05 that finish ended the job
    # at once, route a's delivery `unknown`, and the receiver's 200 then made it `delivered`.
    env = two_routes
    first = task(f"finish-send-out-two-{short_id()}")
    job_id = job_id_for(first)
    held = {path: asyncio.Event() for path in ("/a", "/b")}
    for path, release in held.items():
        env.hook.script[path] = [Reply(delay_s=60.0, released=release)]
    try:
        await start(env, first)
        await eventually(lambda: bool(env.hook.at("/a") and env.hook.at("/b")), timeout_s=30, what="both sends out")
        described = await env.client.get_workflow_handle(job_id).describe()
        steps = sorted(
            (int(a.activity_id), a.activity_id)
            for a in described.raw_description.pending_activities
            if a.activity_type.name == "deliver"
        )
        assert len(steps) == 2, steps
        verb, *options = STOPS["update-options"]
        changed = await asyncio.to_thread(activity_cli, env, verb, "-w", job_id, "-a", steps[0][1], *options)
        assert changed.returncode == 0, changed.stderr
        pool = await env.stack.ledger()

        async def one_step_left() -> bool:
            described = await env.client.get_workflow_handle(job_id).describe()
            return [a.activity_id for a in described.raw_description.pending_activities] == [steps[1][1]]

        await eventually(one_step_left, timeout_s=30, what="route a's step timed out")
        assert (await cancel(env, job_id)).status_code in (200, 202)
        await eventually(lambda: finish_reached(env, job_id), timeout_s=30, what="the job's finish")
        # Route a's receiver still holds its send: the job has not ended.
        assert await pool.fetchval("SELECT completed_at FROM jobs WHERE job_id = $1", job_id) is None
    finally:
        for release in held.values():
            release.set()
    job = await terminal_job(env.http, job_id, timeout_s=60)
    outcome = await pool.fetchval("SELECT record FROM outcomes WHERE job_id = $1", job_id)
    intents = dict(
        await pool.fetch("SELECT route, status FROM delivery_intents WHERE job_id = $1 ORDER BY route", job_id)
    )
    reported = {d["route"]: d["status"] for d in outcome["deliveries"]}
    answered = {d["route"]: d["status"] for d in job["error"]["detail"]["deliveries"]} if "error" in job else {}
    route_a = min(intents)
    # Route a's answer is in the outcome record as the ledger holds it; GET /jobs/{id} agrees.
    assert (intents[route_a], reported[route_a]) == ("delivered", "delivered"), (intents, outcome)
    assert answered.get(route_a, "delivered") == "delivered", job

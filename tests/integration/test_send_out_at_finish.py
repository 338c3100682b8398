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
answer. DESIGN.md "A send still out when the workflow finishes".

A real worker, the API in the test process, the Pixiv replay and a webhook receiver that
holds the answer (:func:`tests.jobs_support.webhook_env`).
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.api.enums.v1 import PendingActivityState

from curaflow.devstack.temporal import temporal_binary
from curaflow.jobs.submit import job_id_for
from tests.fakes.webhook import WebhookReceiver
from tests.integration.test_start_policies import first_send_out, posts
from tests.integration.test_temporal_clients import task
from tests.jobs_support import WebhookEnv, webhook_env
from tests.operator_support import pending_step
from tests.support import eventually, short_id, terminal_job, whsec

pytestmark = [pytest.mark.integration, pytest.mark.slow]

Env = WebhookEnv


@pytest.fixture(scope="module")
async def env(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str, ledger_pool: Any
) -> AsyncIterator[Env]:
    web = f"hook-{short_id()}"

    def config(hook: WebhookReceiver) -> dict[str, Any]:
        return {
            "routes": {web: {"kind": "webhook", "url": hook.url + "/hook", "secret": whsec(), "timeout_ms": 20000}},
            "targets": [{"id": "demo", "query": {"tags": ["風景"]}, "routes": [web]}],
        }

    async with webhook_env(tmp_path_factory.mktemp("send-out"), temporal_address, database_url, config) as opened:
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


async def test_a_consumer_cancel_ends_a_job_whose_finish_waits_for_a_send_out(env: Env) -> None:
    # The finish waits for the send the workflow stopped waiting for; the consumer cancels:
    # the job ends at once, the receiver still holding the send (its fate unknown).
    first = task(f"finish-send-out-cancel-{short_id()}")
    job_id = job_id_for(first)
    _, release = await first_send_out(env, first)
    try:
        step = await pending_step(env.client, job_id, "deliver")
        verb, *options = STOPS["update-options"]
        changed = await asyncio.to_thread(activity_cli, env, verb, "-w", job_id, "-a", step, *options)
        assert changed.returncode == 0, changed.stderr
        await eventually(lambda: finish_reached(env, job_id), timeout_s=30, what="the job's finish")
        assert (await env.http.post(f"/jobs/{job_id}/cancel")).status_code == 200

        job = await terminal_job(env.http, job_id, timeout_s=30)
        assert not release.is_set() and not any(job_id in a for a in env.hook.answered)  # still held
    finally:
        release.set()
    pool = await env.stack.ledger()
    outcome = await pool.fetchval("SELECT record FROM outcomes WHERE job_id = $1", job_id)
    # The step's failure decides, as before the finish waited: the cancel stopped nothing.
    assert (job["status"], outcome["cells"]["targets"][0]["terminal_reason_code"]) == (
        "failed",
        "delivery_abandoned",
    ), outcome
    assert [d["status"] for d in outcome["deliveries"]] == ["unknown"], outcome

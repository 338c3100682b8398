"""An operator pauses (or resets) a job's running step in the Temporal UI or CLI.

``temporal activity pause`` says the running attempt "will run until the next time it
fails, completes, or times out, at which point the pause will kick in"; the SDK passes
the pause to the attempt as a cancel (``activity.cancellation_details().paused``). A
pause is not the job being stopped: what the attempt has out goes on and is recorded,
nothing is cut, and once unpaused the job ends as it would have without the pause.

The stack of :mod:`tests.operator_support` (a real worker process, the replay, a webhook
receiver, the fake Telegram).
"""

from __future__ import annotations

import asyncio

import pytest

from tests.fakes.telegram import TgReply
from tests.fakes.webhook import Reply
from tests.operator_support import OperatorEnv, cli, env, no_faults_left, running_step, submit
from tests.support import job_in_stage

pytestmark = [pytest.mark.integration, pytest.mark.slow]

Env = OperatorEnv
__all__ = ["env", "no_faults_left"]  # the module's fixtures (tests.operator_support)


def operator(env: Env, verb: str, job_id: str, activity_id: str) -> None:
    done = cli(env, "activity", verb, "-w", job_id, "-a", activity_id)
    assert done.returncode == 0, done.stderr


async def test_a_pause_during_a_send_lets_it_land_and_the_job_delivers(env: Env) -> None:
    # The receiver answers 4 s after it got the request. Paused meanwhile, the attempt is
    # not cut (a job's cancel gives a send 1 s): the answer is recorded, the attempt
    # completes — the pause would only have held a next attempt — and the job delivers,
    # with no unpause.
    job_id, step = await webhook_send_out(env)

    operator(env, "pause", job_id, step)

    record = await env.stack.wait_terminal(job_id, 30)
    assert (record.cells[0].state, record.business_status) == ("submitted", "success"), record.cells[0]
    assert len([r for r in env.hook.received if job_id in r.headers["webhook-id"]]) == 1
    assert await intent_status(env, job_id) == "delivered"


async def test_a_pause_during_a_telegram_send_lets_it_land_and_the_job_delivers(env: Env) -> None:
    # Telegram has no idempotency key: a send cut while out is never sent again
    # (``on_ambiguous = "fail"``), so cutting it for a pause would end the work on the
    # route as unknown for good. The answer comes 4 s after the message was posted.
    job_id, step = await telegram_send_out(env, TgReply("stall", stall_s=4))

    operator(env, "pause", job_id, step)

    record = await env.stack.wait_terminal(job_id, 30)
    assert (record.cells[0].state, record.business_status) == ("submitted", "success"), record.cells[0]
    assert len(env.telegram.posted()) == 1
    assert await intent_status(env, job_id) == "delivered"


async def test_a_pause_during_a_download_resumes_once_unpaused(env: Env) -> None:
    env.replay.faults.slow_images_s = 4
    job_id = await submit(env, "dir")
    await job_in_stage(env.http, job_id, "fetching")
    step = await running_step(env, job_id, "acquire")

    operator(env, "pause", job_id, step)
    await asyncio.sleep(6)
    env.replay.faults.slow_images_s = 0.0
    operator(env, "unpause", job_id, step)

    record = await env.stack.wait_terminal(job_id, 30)
    assert (record.cells[0].state, record.business_status) == ("submitted", "success"), record


async def test_a_reset_during_a_telegram_send_never_posts_the_work_twice(env: Env) -> None:
    # A reset cancels the attempt and Temporal starts another: the send, cut while out,
    # may have landed, and Telegram has no idempotency key — the next attempt must not
    # post it again (it did: the intent went back to `reserved`, and only an intent left
    # `sending` was held back). The work ends `delivery_unknown` on the route, as a
    # timeout after sending does.
    job_id, step = await telegram_send_out(env, TgReply("stall", stall_s=4))

    operator(env, "reset", job_id, step)

    record = await env.stack.wait_terminal(job_id, 30)
    sends = [r.method for r in env.telegram.requests if r.method.startswith("send")]
    assert len(sends) == 1, sends
    assert (record.cells[0].state, record.cells[0].reason) == ("failed", "delivery_unknown"), record.cells[0]
    assert await intent_status(env, job_id) == "unknown"


async def test_a_pause_then_a_reset_during_a_telegram_send_posts_once_and_reports_one_truth(env: Env) -> None:
    # Paused, then reset while the send is out. Which comes first — the reset's cancel
    # reaching the paused attempt (its send cut after the grace: the next attempt finds it
    # possibly landed, `unknown`) or the send's answer (recorded: `delivered`) — is the
    # server's timing (both measured). Either way the work is posted once, and intent,
    # cell and the Job's deliveries say the same. A receipt that still comes after the
    # cell ended keeps it so (`tests/integration/test_resume_after_cut.py`).
    job_id, step = await telegram_send_out(env, TgReply("stall", stall_s=6))

    operator(env, "pause", job_id, step)
    operator(env, "reset", job_id, step)

    await env.stack.wait_terminal(job_id, 30)
    await asyncio.sleep(7)  # past the first send's answer, had it been awaited
    sends = [r.method for r in env.telegram.requests if r.method.startswith("send")]
    assert len(sends) == 1, sends
    cell = (await env.stack.job(job_id)).cells[0]
    job = (await env.http.get(f"/jobs/{job_id}")).json()
    reported = [d["status"] for d in (job.get("result") or job.get("error", {}).get("detail", {}))["deliveries"]]
    truth = (cell.state, cell.reason, await intent_status(env, job_id), reported)
    assert truth in (
        ("submitted", None, "delivered", ["delivered"]),
        ("failed", "delivery_unknown", "unknown", ["unknown"]),
    ), truth


async def test_a_reset_during_a_webhook_send_sends_it_again_under_its_key(env: Env) -> None:
    # A webhook carries a stable idempotency key (``webhook-id``): a send that may have
    # landed is sent again under it, and the receiver keeps one.
    job_id, step = await webhook_send_out(env)

    operator(env, "reset", job_id, step)

    record = await env.stack.wait_terminal(job_id, 30)
    assert record.cells[0].state == "submitted", record.cells[0]
    keys = {r.headers["webhook-id"] for r in env.hook.received if job_id in r.headers["webhook-id"]}
    assert len(keys) == 1
    assert await intent_status(env, job_id) == "delivered"


async def test_a_send_that_fails_while_paused_is_retried_once_unpaused(env: Env) -> None:
    # Paused while the send is out, the send is not cut: it fails by its own answer (a
    # rate limit, nothing posted), the attempt fails as it would have, and the pause holds
    # the next attempt until the operator unpauses — then the work is posted once.
    answer = asyncio.Event()
    job_id, step = await telegram_send_out(env, TgReply("429", after=answer), TgReply("ok"))

    operator(env, "pause", job_id, step)
    answer.set()
    await asyncio.sleep(3)  # the 429 is recorded and the next attempt held by the pause
    assert len(env.telegram.posted()) == 0
    operator(env, "unpause", job_id, step)

    record = await env.stack.wait_terminal(job_id, 30)
    assert (record.cells[0].state, record.business_status) == ("submitted", "success"), record.cells[0]
    sends = [r.method for r in env.telegram.requests if r.method.startswith("send")]
    assert len(sends) == 2, sends  # the rate-limited one, then the one after the unpause
    assert len({m.get("media_group_id", m["message_id"]) for m in env.telegram.posted()}) == 1  # posted once
    assert await intent_status(env, job_id) == "delivered"


async def webhook_send_out(env: Env) -> tuple[str, str]:
    """A job of the webhook target whose send is out (the receiver answers 4 s after it got
    the request): its job id and its ``deliver`` step's activity id."""
    env.hook.script["/slow"] = [Reply(200, {"status": "accepted"}, delay_s=4)]
    job_id = await submit(env, "hook")
    await asyncio.wait_for(env.hook.arrived.wait(), 20)
    env.hook.arrived.clear()
    return job_id, await running_step(env, job_id, "deliver")


async def telegram_send_out(env: Env, *replies: TgReply) -> tuple[str, str]:
    """A job of the Telegram target whose send is out (the fake Telegram got its request;
    it answers with ``replies`` in turn): its job id and its ``deliver`` step's activity id."""
    env.telegram.script["*"] = list(replies)
    job_id = await submit(env, "tg")
    step = await running_step(env, job_id, "deliver")
    for _ in range(200):
        if env.telegram.requests:
            return job_id, step
        await asyncio.sleep(0.05)
    raise TimeoutError("no request reached the fake Telegram")


async def intent_status(env: Env, job_id: str) -> str:
    pool = await env.stack.ledger()
    return str(await pool.fetchval("SELECT status FROM delivery_intents WHERE job_id = $1", job_id))

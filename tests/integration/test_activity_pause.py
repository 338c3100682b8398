"""An operator pauses (or resets) a job's running step in the Temporal UI or CLI.

``temporal activity pause`` says the running attempt "will run until the next time it
fails, completes, or times out, at which point the pause will kick in"; the SDK passes
the pause to the attempt as a cancel (``activity.cancellation_details().paused``). A
pause is not the job being stopped: what the attempt has out goes on and is recorded,
nothing is cut, and once unpaused the job ends as it would have without the pause.

One real worker process, the API in the test process, the Pixiv replay server and a
webhook receiver in the test process.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from curaflow.devstack.temporal import temporal_binary
from tests.fakes.replay import ReplayServer
from tests.fakes.telegram import FakeTelegram, TgReply
from tests.fakes.webhook import Reply, WebhookReceiver
from tests.jobs_support import telegram_route
from tests.support import Stack, job_in_stage, short_id, whsec

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@dataclass
class Env:
    stack: Stack
    http: httpx.AsyncClient
    replay: ReplayServer
    hook: WebhookReceiver
    telegram: FakeTelegram
    client: Client
    address: str


@pytest.fixture(scope="module")
async def env(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str, ledger_pool: Any
) -> AsyncIterator[Env]:
    tmp = tmp_path_factory.mktemp("pause")
    replay = await ReplayServer().start()
    hook = await WebhookReceiver(whsec()).start()
    telegram = await FakeTelegram().start()
    out, web, tg = f"out-{short_id()}", f"hook-{short_id()}", f"tg-{short_id()}"
    stack = Stack(
        tmp,
        temporal_address,
        database_url,
        {
            "pixiv": {"api_url": replay.url},
            "routes": {
                out: {"kind": "directory", "path": str(tmp / "out")},
                web: {"kind": "webhook", "url": hook.url + "/slow", "secret": whsec()},
                tg: telegram_route(telegram),
            },
            "targets": [
                {"id": "dir", "query": {"tags": ["オリジナル"]}, "routes": [out]},
                {"id": "hook", "query": {"tags": ["風景"]}, "routes": [web]},
                {"id": "tg", "query": {"tags": ["オリジナル"]}, "routes": [tg]},
            ],
        },
    )
    await stack.start_worker()
    http = await stack.start_api()
    from curaflow.temporal.connection import connect

    client = await connect(temporal_address)
    try:
        yield Env(stack, http, replay, hook, telegram, client, temporal_address)
    finally:
        await stack.stop()
        await replay.stop()
        await hook.stop()
        await telegram.stop()


@pytest.fixture(autouse=True)
def reset_faults(env: Env) -> None:
    env.replay.faults.search_delay_s = 0.0
    env.replay.faults.slow_images_s = 0.0
    env.hook.script.clear()
    env.telegram.reset()


async def submit(env: Env, target: str) -> str:
    response = await env.http.post("/jobs", json=env.stack.task(target_id=target))
    assert response.status_code == 202, response.text
    return response.json()["job"]["job_id"]


async def running_step(env: Env, job_id: str, activity_type: str) -> str:
    """The activity id of the job's pending ``activity_type`` step (the API starts a job's
    execution in the background: it may not exist yet)."""
    for _ in range(100):
        try:
            described = await env.client.get_workflow_handle(job_id).describe()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            await asyncio.sleep(0.1)
            continue
        for pending in described.raw_description.pending_activities:
            if pending.activity_type.name == activity_type:
                return str(pending.activity_id)
        await asyncio.sleep(0.1)
    raise TimeoutError(f"no pending {activity_type} in {job_id}")


def operator(env: Env, verb: str, job_id: str, activity_id: str) -> None:
    subprocess.run(
        [temporal_binary(), "activity", verb, "--address", env.address, "-w", job_id, "-a", activity_id],
        check=True,
        capture_output=True,
        timeout=30,
    )


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

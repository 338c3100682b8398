"""Process faults at the moments a send acts: the worker killed (SIGKILL), frozen
(SIGSTOP past the heartbeat timeout, then SIGCONT) or told to stop while a send is out —
alone or while an operator paused the step — and the reconciler finishing a job whose
worker died while a rate limit held its send.

What must hold (DESIGN.md "A cancel that is not the job's", "What a job and its cells
end as"): an at-most-once route (Telegram) never posts a work twice; a webhook sends it
again under its one key; the report says ``unknown`` when the send may have landed and
``delivered`` when its answer was recorded; no job is left open; a hold is named by the
reconciler's finish as by the workflow's.

Real worker processes (one stack per test: each kills its worker), the Temporal dev
server, PostgreSQL, the Pixiv replay and fakes speaking Telegram's and the webhook's wire
formats on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
from typing import Any

import pytest
from temporalio.client import Client

from curaflow.devstack.temporal import temporal_binary
from curaflow.ledger.reconciler import ticks
from curaflow.ledger.reconciler.ticks import tick
from curaflow.temporal.connection import connect
from tests.conftest import StackFactory
from tests.fakes.replay import ReplayServer
from tests.fakes.telegram import FakeTelegram, TgReply
from tests.fakes.webhook import Reply, WebhookReceiver
from tests.jobs_support import intents, telegram_route, webhook_route
from tests.operator_support import pending_step
from tests.support import Stack, eventually, short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TAGS = ["オリジナル"]
#: The Telegram route's name, this module's own (a route's gate is shared by name).
TG = f"tg-{short_id()}"
HOOK = f"hook-{short_id()}"


def tg_stack(make_stack: StackFactory, replay: ReplayServer, telegram: FakeTelegram, **extra: Any) -> Stack:
    return make_stack(
        {
            "pixiv": replay.config(),
            "routes": {TG: telegram_route(telegram, timeout_ms=30_000)},
            "targets": [{"id": "demo", "query": {"tags": TAGS}, "routes": [TG]}],
            **extra,
        }
    )


async def deliver_step(client: Client, job_id: str) -> str:
    """The activity id of the job's pending ``deliver`` step."""
    return await pending_step(client, job_id, "deliver")


def operator(address: str, verb: str, job_id: str, activity_id: str, *, unless_completed: bool = False) -> None:
    """``temporal activity <verb>``; ``unless_completed``: the execution, or the activity
    (its completion accepted, the workflow still running), may have ended already."""
    done = subprocess.run(
        [temporal_binary(), "activity", verb, "--address", address, "-w", job_id, "-a", activity_id],
        capture_output=True,
        text=True,
        timeout=30,
    )
    ended = ("workflow execution already completed", "activity already completed")
    if unless_completed and any(words in done.stderr for words in ended):
        return
    assert done.returncode == 0, (verb, done.stdout, done.stderr)


def tg_sends(telegram: FakeTelegram) -> list[str]:
    return [r.method for r in telegram.requests if r.method.startswith("send")]


def posts(telegram: FakeTelegram) -> int:
    """How many times the work was posted (an album is one post of several messages)."""
    return len({m.get("media_group_id", m["message_id"]) for m in telegram.messages})


async def test_a_paused_send_whose_worker_is_killed_is_unknown_and_never_re_posted(
    make_stack: StackFactory, replay: ReplayServer, telegram: FakeTelegram, temporal_address: str
) -> None:
    # An operator pauses the step while its Telegram send is out (posted, unanswered);
    # the worker dies. Once unpaused, the next attempt finds the request possibly landed:
    # never posted again, the work unknown on the route, the job ends.
    telegram.script["*"] = [TgReply("stall", stall_s=6)]
    stack = tg_stack(make_stack, replay, telegram)
    doomed = await stack.start_worker()
    client = await connect(temporal_address)
    job_id = await stack.admit(stack.task(query={"tags": TAGS}))
    step = await deliver_step(client, job_id)
    await eventually(lambda: telegram.messages, interval_s=0.05, what="the post landed")
    operator(temporal_address, "pause", job_id, step)
    doomed.kill()
    await stack.start_worker()
    operator(temporal_address, "unpause", job_id, step)

    record = await stack.wait_terminal(job_id, timeout_s=90)
    assert len(tg_sends(telegram)) == 1 and posts(telegram) == 1, tg_sends(telegram)
    cell = record.cells[0]
    assert (cell.state, cell.reason) == ("failed", "delivery_unknown"), cell
    assert (await intents(await stack.ledger(), job_id))[TG]["status"] == "unknown"


async def test_a_paused_send_whose_worker_froze_past_its_heartbeat_is_recorded_once_thawed(
    make_stack: StackFactory, replay: ReplayServer, telegram: FakeTelegram, temporal_address: str
) -> None:
    # Paused while out, then the worker frozen past the step's heartbeat timeout (2 s
    # here); Telegram answers meanwhile. Thawed, the attempt gets the answer and the pause
    # at once: the pause reached the recording of the answer and cut it (the intent left
    # `sending`: the next attempt found it ambiguous, the work `unknown` though posted).
    # Now the answer is recorded whatever cancel comes; the job ends delivered, posted once.
    telegram.script["*"] = [TgReply("stall", stall_s=2)]
    stack = tg_stack(make_stack, replay, telegram)
    worker = await stack.start_worker()
    client = await connect(temporal_address)
    job_id = await stack.admit(stack.task(query={"tags": TAGS}))
    step = await deliver_step(client, job_id)
    await eventually(lambda: telegram.messages, interval_s=0.05, what="the post landed")
    operator(temporal_address, "pause", job_id, step)
    worker.pause()
    try:
        await asyncio.sleep(6)  # past the heartbeat timeout (2 s) and Telegram's answer (2 s)
    finally:
        worker.resume()
    await eventually(lambda: _status(stack, job_id), timeout_s=30, what="the thawed attempt recorded the answer")
    # The thawed attempt's completion may already have ended the step or the job (Temporal
    # accepted it): nothing is left to unpause then.
    operator(temporal_address, "unpause", job_id, step, unless_completed=True)

    record = await stack.wait_terminal(job_id, timeout_s=90)
    assert (record.cells[0].state, record.business_status) == ("submitted", "success"), record.cells[0]
    intent = (await intents(await stack.ledger(), job_id))[TG]
    assert (intent["status"], intent["attempts"]) == ("delivered", 1)  # one send, never a second
    assert posts(telegram) == len(tg_sends(telegram))  # each part (album chunk) posted once


async def _status(stack: Stack, job_id: str) -> bool:
    recorded = await intents(await stack.ledger(), job_id)
    return recorded[TG]["status"] not in ("sending", "reserved")


async def test_a_telegram_send_cut_by_the_workers_shutdown_is_never_re_posted(
    make_stack: StackFactory, replay: ReplayServer, telegram: FakeTelegram
) -> None:
    # SIGTERM with a short graceful shutdown cuts the send while out (maybe_delivered, the
    # intent back to reserved); the next worker's attempt must not post it again.
    telegram.script["*"] = [TgReply("stall", stall_s=8)]
    stack = tg_stack(make_stack, replay, telegram, temporal={"graceful_shutdown_ms": 1000})
    doomed = await stack.start_worker()
    job_id = await stack.admit(stack.task(query={"tags": TAGS}))
    await eventually(lambda: telegram.messages, interval_s=0.05, what="the post landed")
    assert doomed.process is not None
    doomed.process.send_signal(signal.SIGTERM)
    await asyncio.to_thread(doomed.process.wait, 60)
    await stack.start_worker()

    record = await stack.wait_terminal(job_id, timeout_s=90)
    assert len(tg_sends(telegram)) == 1 and posts(telegram) == 1, tg_sends(telegram)
    cell = record.cells[0]
    assert (cell.state, cell.reason) == ("failed", "delivery_unknown"), cell
    assert (await intents(await stack.ledger(), job_id))[TG]["status"] == "unknown"


async def test_a_webhook_send_whose_worker_is_killed_is_sent_again_under_its_key(
    make_stack: StackFactory, replay: ReplayServer, webhook: WebhookReceiver
) -> None:
    # The webhook's stable key makes a re-send safe: after a SIGKILL mid-send the next
    # worker sends it again under the same webhook-id and the job delivers.
    webhook.script["/hook"] = [Reply(200, delay_s=6), Reply(200)]
    stack = make_stack(
        {
            "pixiv": replay.config(),
            "routes": {HOOK: webhook_route(webhook)},
            "targets": [{"id": "demo", "query": {"tags": TAGS}, "routes": [HOOK]}],
        }
    )
    doomed = await stack.start_worker()
    job_id = await stack.admit(stack.task(query={"tags": TAGS}))
    await eventually(lambda: bool(webhook.at("/hook")), timeout_s=60, what="the send reached the webhook")
    doomed.kill()
    await stack.start_worker()

    record = await stack.wait_terminal(job_id, timeout_s=90)
    assert (record.cells[0].state, record.business_status) == ("submitted", "success"), record.cells[0]
    keys = [r.headers["webhook-id"] for r in webhook.at("/hook")]
    assert len(keys) == 2 and len(set(keys)) == 1, keys
    assert (await intents(await stack.ledger(), job_id))[HOOK]["status"] == "delivered"


async def test_the_reconciler_names_the_rate_limit_of_a_job_whose_worker_died(
    make_stack: StackFactory,
    replay: ReplayServer,
    telegram: FakeTelegram,
    temporal_address: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Telegram states a flood wait of 5 min; the worker dies in the wait; nothing runs
    # the workflow when the deadline passes, so the reconciler finishes the job: its
    # report names the route's limit, as the workflow's finish does.
    # The reconciler's grace after a deadline (10 s) is the time it leaves the workflow's
    # own timer to end the job; no worker runs the workflow here, so this test's ticks
    # (the only reconciler it runs) leave it 1 s: the job is finished 1 s after its
    # deadline instead of 10 s (the test took 25 s).
    monkeypatch.setattr(ticks, "DEADLINE_GRACE_MS", 1_000)
    telegram.script["*"] = [TgReply("429", retry_after=300)]
    stack = tg_stack(make_stack, replay, telegram)
    doomed = await stack.start_worker()
    # long enough for the worker's start, the search, the download and the send (3 to 4 s)
    job_id = await stack.admit({**stack.task(query={"tags": TAGS}), "deadline_ms": 10_000})
    pool = await stack.ledger()

    async def held() -> bool:
        row = await pool.fetchrow("SELECT held_until FROM delivery_intents WHERE job_id = $1", job_id)
        return row is not None and row["held_until"] is not None

    await eventually(held, timeout_s=30, what="the 429 recorded")
    doomed.kill()
    client = await connect(temporal_address)

    reconciled: list[str] = []

    async def finished() -> bool:
        reconciled.extend((await tick(pool, None, client)).deadline)
        return (await stack.job(job_id)).completed_at is not None

    await eventually(finished, timeout_s=60, interval_s=0.5, what="the reconciler finished the job")
    assert reconciled == [job_id]  # the reconciler's deadline rule, no worker
    cell = (await stack.job(job_id)).cells[0]
    assert cell.reason == "execution_timeout", cell
    assert cell.held_by is not None and (cell.held_by.name, cell.held_by.kind) == (TG, "rate_limited"), cell
    assert TG in (cell.reason_message or ""), cell.reason_message

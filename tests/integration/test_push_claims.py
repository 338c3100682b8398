"""A push's claim (``event_pushes.claimed_by`` / ``claimed_until``) is its attempt's own.

An attempt that outlived its lease — its worker stopped (SIGSTOP, a long pause) with a
send out, or its send cut at a job's end (the push-bound wait) and its answer read late —
comes back after another attempt (the job's next one, the sweeper's ``push-events:<job_id>``
run) claimed the same event. What the late attempt settles must never undo what the
current one did nor free the event while the current one is sending it: the event would
be sent again after the events that follow it (out of order), or by two attempts at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from activities.deps import ActivityDeps, close_deps, open_deps
from activities.push_events import PushActivity
from curaflow.domain.messages import CallbackPolicy, PushInput, PushReport
from curaflow.ledger import event_pushes
from curaflow.ledger.db import DB_NOW_MS
from tests.conftest import StackFactory
from tests.fakes.hostile import Behaviour, HostileParty
from tests.fakes.webhook import Reply, WebhookReceiver
from tests.support import eventually, job_env, job_owing_pushes, push_config

pytestmark = pytest.mark.integration

#: A callback URL no push of these tests reaches (nothing listens on port 9, discard).
NOWHERE = "http://127.0.0.1:9/hook"


async def _states(pool: asyncpg.Pool, job_id: str) -> list[str]:
    return [row["status"] for row in await event_pushes.push_states(pool, job_id)]


@pytest.mark.parametrize("late", [event_pushes.PENDING, event_pushes.DEAD, event_pushes.DELIVERED])
async def test_a_late_attempt_never_undoes_what_the_current_attempt_settled(
    ledger_pool: asyncpg.Pool, late: str
) -> None:
    job_id = await job_owing_pushes(ledger_pool, NOWHERE, label="claims", count=2)
    stale = (await event_pushes.claim_next(ledger_pool, job_id, "stale", 0)).push  # its lease lapses at once
    assert stale is not None
    for _ in range(2):  # the current attempt sends both events, the receiver has them
        push = (await event_pushes.claim_next(ledger_pool, job_id, "current", 60_000)).push
        assert push is not None
        await event_pushes.record_push(ledger_pool, push, event_pushes.DELIVERED, http_status=200, error=None)
    settled = await event_pushes.push_states(ledger_pool, job_id)

    # The stale attempt's send comes back (a timeout, a 4xx, a late 200).
    await event_pushes.record_push(ledger_pool, stale, late, http_status=None, error="timeout")

    assert await event_pushes.push_states(ledger_pool, job_id) == settled
    assert (await event_pushes.claim_next(ledger_pool, job_id, "next", 60_000)).push is None


@pytest.mark.parametrize("late", [event_pushes.PENDING, event_pushes.DEAD, event_pushes.DELIVERED])
async def test_a_late_attempt_never_frees_an_event_another_attempt_is_sending(
    ledger_pool: asyncpg.Pool, late: str
) -> None:
    job_id = await job_owing_pushes(ledger_pool, NOWHERE, label="claims")
    stale = (await event_pushes.claim_next(ledger_pool, job_id, "stale", 0)).push
    assert stale is not None
    sending = (await event_pushes.claim_next(ledger_pool, job_id, "current", 60_000)).push
    assert sending is not None and sending.attempts == 2

    await event_pushes.record_push(ledger_pool, stale, late, http_status=None, error="timeout")

    # The event is still the current attempt's: no third attempt sends it alongside.
    assert await _states(ledger_pool, job_id) == [event_pushes.PENDING]
    assert (await event_pushes.claim_next(ledger_pool, job_id, "third", 60_000)).busy
    await event_pushes.record_push(ledger_pool, sending, event_pushes.DELIVERED, http_status=200, error=None)
    assert await _states(ledger_pool, job_id) == [event_pushes.DELIVERED]


async def test_a_reset_jobs_new_run_never_sends_an_event_its_old_run_has_out(
    make_stack: StackFactory, tmp_path: Path, ledger_pool: asyncpg.Pool, webhook: WebhookReceiver
) -> None:
    """A Temporal reset (or a terminate and a new run) during a job's push wait: the new
    run schedules ``push_events`` with the activity id the old run's had (the SDK numbers a
    run's activities from its history), on the same worker, at attempt 1. While the old
    run's send is out, the new run's attempt is another attempt: it waits (``busy``), it
    never sends the same event alongside."""
    stack = make_stack(push_config(tmp_path))
    deps = await open_deps(stack.settings, None)
    try:
        job_id = await job_owing_pushes(ledger_pool, f"{webhook.url}/hook", label="claims")
        held = asyncio.Event()
        webhook.script["/hook"] = [Reply(delay_s=60, released=held)]
        policy = CallbackPolicy(timeout_ms=30_000)
        old = asyncio.create_task(run_attempt(deps, job_id, "run-old", policy))
        try:
            await eventually(lambda: len(webhook.received) == 1 or None, what="the old run's send")

            report = await run_attempt(deps, job_id, "run-new", policy)

            sent = [r.headers.get("webhook-id") for r in webhook.received]
            assert report.busy and len(sent) == 1, sent
            held.set()
            assert (await old).delivered == 1
            assert await _states(ledger_pool, job_id) == [event_pushes.DELIVERED]
        finally:
            held.set()
            await asyncio.gather(old, return_exceptions=True)
    finally:
        await close_deps(deps)


def attempt_env(job_id: str, run_id: str) -> Any:
    """The activity environment of attempt 1 of the job's ``push_events``, scheduled as
    activity ``7`` of run ``run_id``."""
    env = job_env(job_id)
    env.info = dataclasses.replace(env.info, workflow_run_id=run_id, activity_id="7", attempt=1)
    return env


async def run_attempt(deps: ActivityDeps, job_id: str, run_id: str, policy: CallbackPolicy) -> PushReport:
    """Attempt 1 of the job's ``push_events`` scheduled as activity ``7`` of run ``run_id``."""
    return await attempt_env(job_id, run_id).run(
        PushActivity(deps).push_events, PushInput(job_id=job_id, policy=policy)
    )


async def test_a_cancel_that_comes_after_the_receivers_answer_never_loses_it(
    make_stack: StackFactory, tmp_path: Path, ledger_pool: asyncpg.Pool
) -> None:
    """The job's end stops waiting for its pushes and cancels the push run (the push-bound
    wait, ``TRY_CANCEL``); the cancel reaches the attempt while the receiver's answer —
    its status line, 200 — is in and its body still arriving. The answer settles the
    event before the cancel is honoured: the event is delivered, not left claimed and
    pending for the sweeper to send again (a second send of an event the receiver had;
    until 2026-12-07)."""
    party = await HostileParty(
        default=Behaviour("trickle_body", status=200, chunk=1, interval_s=0.1, body=b" ")
    ).start()
    stack = make_stack(push_config(tmp_path))
    deps = await open_deps(stack.settings, None)
    try:
        job_id = await job_owing_pushes(ledger_pool, f"{party.url}/hook", label="claims")
        env = attempt_env(job_id, "run-1")
        attempt = asyncio.create_task(
            env.run(PushActivity(deps).push_events, PushInput(job_id=job_id, policy=CallbackPolicy(timeout_ms=30_000)))
        )
        await eventually(
            lambda: bool(party.connections) and party.connections[0].written > 0,
            interval_s=0.02,
            what="the receiver's status line sent",
        )
        # Two of the body's bytes after it (0.1 s apart): the status line has had time to be
        # read. Cancelled as soon as it was written, the attempt could still be waiting for
        # it — no answer, rightly left pending (a flake on a loaded machine).
        head = party.connections[0].written
        await eventually(
            lambda: party.connections[0].written >= head + 2, interval_s=0.02, what="two bytes of the body sent"
        )
        env.cancel()
        with pytest.raises(asyncio.CancelledError):
            await attempt
        rows = await event_pushes.push_states(ledger_pool, job_id)
        assert [(r["status"], r["last_status"]) for r in rows] == [(event_pushes.DELIVERED, 200)], rows
    finally:
        await close_deps(deps)
        await party.stop()


async def test_a_cancel_that_comes_while_the_answer_is_recorded_never_loses_it(
    make_stack: StackFactory, tmp_path: Path, ledger_pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The receiver answered 200; the cancel of the job's end reaches the attempt while it
    writes that answer to the ledger. The write is finished before the cancel is
    honoured: the event is delivered, never left claimed and pending for the sweeper to
    send again (until 2026-12-07 the write was cancelled with the attempt)."""
    import activities.push_events as module

    party = await HostileParty(default=Behaviour("ok", status=200, body=b"{}")).start()
    stack = make_stack(push_config(tmp_path))
    deps = await open_deps(stack.settings, None)
    writing = asyncio.Event()
    go_on = asyncio.Event()
    real = module.record_push

    async def slow_record(*args: Any, **kwargs: Any) -> bool:
        writing.set()
        await go_on.wait()
        return await real(*args, **kwargs)

    monkeypatch.setattr(module, "record_push", slow_record)
    try:
        job_id = await job_owing_pushes(ledger_pool, f"{party.url}/hook", label="claims")
        env = attempt_env(job_id, "run-1")
        attempt = asyncio.create_task(
            env.run(PushActivity(deps).push_events, PushInput(job_id=job_id, policy=CallbackPolicy(timeout_ms=30_000)))
        )
        await asyncio.wait_for(writing.wait(), 30)
        env.cancel()  # cancels the wait the write is in: delivered however go_on is set
        go_on.set()
        with pytest.raises(asyncio.CancelledError):
            await attempt
        rows = await event_pushes.push_states(ledger_pool, job_id)
        assert [(r["status"], r["last_status"]) for r in rows] == [(event_pushes.DELIVERED, 200)], rows
    finally:
        go_on.set()
        await close_deps(deps)
        await party.stop()


def _ledger_fault(kind: str) -> BaseException:
    """What asyncpg raises when the ledger fails a statement: a PostgreSQL restart ending the
    backend (57P01), a connection lost under the call, the pool's bounded wait elapsed."""
    if kind == "admin_shutdown":
        return asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator command")
    if kind == "connection_lost":
        return asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation")
    return TimeoutError()


@pytest.mark.parametrize("committed", [False, True], ids=["refused", "commit_unacknowledged"])
@pytest.mark.parametrize("kind", ["admin_shutdown", "connection_lost", "timeout"])
async def test_a_receivers_answer_the_ledger_fails_to_record_once_is_recorded(
    make_stack: StackFactory,
    tmp_path: Path,
    ledger_pool: asyncpg.Pool,
    monkeypatch: pytest.MonkeyPatch,
    webhook: WebhookReceiver,
    kind: str,
    committed: bool,
) -> None:
    """The receiver answered 200; the ledger fails the write of that answer once (a restart,
    a connection lost — after its ``COMMIT`` went through or before —, a bounded wait). The
    answer is the receiver's fact: it is written when the ledger answers again, in the
    attempt. Until 2026-12-07 the attempt failed with the ledger's error, the event stayed
    claimed and pending, and — its one attempt (``callback_max_attempts``) counted at the
    claim — the next claim dead-lettered it "its last attempt ended without an answer":
    a push the receiver had taken, dead, on curaflow's database's blip."""
    import activities.push_events as module

    stack = make_stack(push_config(tmp_path))
    deps = await open_deps(stack.settings, None)
    real = module.record_push
    failed: list[BaseException] = []

    async def failing_once(*args: Any, **kwargs: Any) -> bool:
        if not failed:
            failed.append(_ledger_fault(kind))
            if committed:
                await real(*args, **kwargs)
            raise failed[0]
        return await real(*args, **kwargs)

    monkeypatch.setattr(module, "record_push", failing_once)
    policy = CallbackPolicy(timeout_ms=5_000, max_attempts=1)
    try:
        job_id = await job_owing_pushes(ledger_pool, f"{webhook.url}/hook", label="claims")
        with contextlib.suppress(Exception):
            await run_attempt(deps, job_id, "run-1", policy)
        # The attempt's claim lapses (its lease: the push's timeout and a margin); the job's
        # next attempt (the sweeper's) finds the event as the first attempt left it.
        await ledger_pool.execute(
            "UPDATE event_pushes SET claimed_until = 0 WHERE job_id = $1 AND claimed_until IS NOT NULL", job_id
        )
        with contextlib.suppress(Exception):
            await attempt_env(job_id, "run-2").run(
                PushActivity(deps).push_events, PushInput(job_id=job_id, policy=policy)
            )

        assert failed, "the fault was never injected"
        rows = await event_pushes.push_states(ledger_pool, job_id)
        assert [(r["status"], r["last_status"], r["attempts"]) for r in rows] == [(event_pushes.DELIVERED, 200, 1)], (
            rows
        )
        assert len(webhook.received) == 1
    finally:
        await close_deps(deps)


@pytest.mark.parametrize("kind", ["admin_shutdown", "connection_lost", "timeout"])
async def test_a_claim_whose_commit_was_not_acknowledged_is_the_attempts_own(
    make_stack: StackFactory,
    tmp_path: Path,
    ledger_pool: asyncpg.Pool,
    monkeypatch: pytest.MonkeyPatch,
    webhook: WebhookReceiver,
    kind: str,
) -> None:
    """The claim of the event (its attempt counted, the lease the attempt's) commits and the
    ledger's answer is lost (a restart, a connection lost after ``COMMIT``, a bounded wait).
    The attempt reads the claim it made and sends the event under it. Until 2026-12-07 the
    attempt failed with the ledger's error having sent nothing, its claim held the event
    until its lease lapsed, and — the attempt counted — the next claim dead-lettered it "its
    last attempt ended without an answer" (``callback_max_attempts = 1``): an event never
    sent, dead on curaflow's database's blip."""
    import activities.push_events as module

    stack = make_stack(push_config(tmp_path))
    deps = await open_deps(stack.settings, None)
    real = module.claim_next
    failed: list[BaseException] = []

    async def unacknowledged_once(*args: Any, **kwargs: Any) -> event_pushes.Claim:
        claim = await real(*args, **kwargs)
        if not failed and claim.push is not None:
            failed.append(_ledger_fault(kind))
            raise failed[0]
        return claim

    monkeypatch.setattr(module, "claim_next", unacknowledged_once)
    policy = CallbackPolicy(timeout_ms=5_000, max_attempts=1)
    try:
        job_id = await job_owing_pushes(ledger_pool, f"{webhook.url}/hook", label="claims")
        with contextlib.suppress(Exception):
            await run_attempt(deps, job_id, "run-1", policy)
        await ledger_pool.execute(  # the attempt's claim lapses; the next attempt finds the event as it was left
            "UPDATE event_pushes SET claimed_until = 0 WHERE job_id = $1 AND claimed_until IS NOT NULL", job_id
        )
        with contextlib.suppress(Exception):
            await attempt_env(job_id, "run-2").run(
                PushActivity(deps).push_events, PushInput(job_id=job_id, policy=policy)
            )

        assert failed, "the fault was never injected"
        rows = await event_pushes.push_states(ledger_pool, job_id)
        assert [(r["status"], r["last_status"], r["attempts"]) for r in rows] == [(event_pushes.DELIVERED, 200, 1)], (
            rows
        )
        assert len(webhook.received) == 1
    finally:
        await close_deps(deps)


@pytest.mark.parametrize("left_ms", [100, 0], ids=["nearly_lapsed", "lapsed"])
async def test_the_attempts_own_claim_found_again_protects_its_send_for_a_whole_lease(
    ledger_pool: asyncpg.Pool, left_ms: int
) -> None:
    """The answer to a claim's ``COMMIT`` is lost and the attempt finds its claim again
    after the ledger's wait (the pool's bounded wait is ``database.statement_timeout_ms``,
    30 s, and its tries of ``RECORD_RETRY_S`` follow): the claim's lease, set when it was
    made, is nearly over or over. The send that follows is protected for a whole lease (no
    other attempt sends the event alongside it), and a lapsed claim of its own is still the
    attempt's, counted once — never its "last attempt ended without an answer". Until
    2026-12-07 the claim was returned with what was left of its lease (another attempt could
    claim the event and send it while this one's send was out), and once lapsed it was
    counted again, or dead-lettered unsent with ``callback_max_attempts = 1``."""
    job_id = await job_owing_pushes(ledger_pool, NOWHERE, label="claims")
    made = (await event_pushes.claim_next(ledger_pool, job_id, "attempt", 60_000, max_attempts=1)).push
    assert made is not None and made.attempts == 1
    await ledger_pool.execute(
        f"UPDATE event_pushes SET claimed_until = {DB_NOW_MS} + $2::bigint WHERE job_id = $1", job_id, left_ms
    )
    await asyncio.sleep(0.01 if left_ms == 0 else 0)

    again = await event_pushes.claim_next(ledger_pool, job_id, "attempt", 60_000, max_attempts=1)

    assert again.push is not None and again.push.attempts == 1 and again.dead == 0, again
    lease_left = await ledger_pool.fetchval(
        f"SELECT claimed_until - {DB_NOW_MS} FROM event_pushes WHERE job_id = $1", job_id
    )
    assert lease_left > 50_000, lease_left
    assert (await event_pushes.claim_next(ledger_pool, job_id, "another", 60_000, max_attempts=1)).busy

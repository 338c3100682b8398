"""A send that is out belongs to the attempt that claimed it, while that attempt lives.

A new run of a job (a Temporal client's start that terminated the running one with the
same Task, an operator's ``temporal workflow reset``) schedules the ``deliver`` again while
the run before still has its send out. Until 2026-12-05 the new attempt found the intent
``sending``, took it for a send that may have landed and, on a route that tolerates a
re-send (a webhook), sent the work a second time (``test_start_policies``); on a route that
does not, it ended the cell ``delivery_unknown`` although the first send was about to be
answered. Now the claim names its attempt and how long it is live
(``delivery_intents.send_owner`` / ``send_until``, kept by its ledger beats), and another
attempt's claim while it is live is ``awaiting``: it waits for that answer. The job's
finish waits for it too (:class:`curaflow.ledger.finish.SendStillOut`): a workflow that
stopped waiting for the sending attempt ends the job with that send's answer
(``test_send_out_at_finish`` runs it with a real worker).

The ledger's rule on the session's real PostgreSQL; the ``deliver`` activity in the test
process with a worker's real dependencies (a directory route on disk).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from temporalio.testing import ActivityEnvironment

from activities.deliver import DeliverActivity
from activities.deliver.recording import RECORD_RETRY_S
from activities.deps import ActivityDeps
from activities.heartbeat import Heartbeater
from curaflow.config.delivery import ROUTE_RATE_LIMIT_CAP_MS
from curaflow.domain.cells import CellStage, CellState
from curaflow.domain.messages import DeliverInput, RouteRef, TargetSpec
from curaflow.domain.models import CandidateReport, Work
from curaflow.domain.verdicts import FinishCause
from curaflow.ledger import cells, deliveries
from curaflow.ledger.deliveries import SendClaim
from curaflow.ledger.finish import FinishedJob, SendStillOut, finish_job
from tests.deps_support import deps
from tests.integration.test_ledger_fault_at_answer import LONGER, RECEIPT, ledger_fails
from tests.support import Stack, eventually, ledger_job, run_as_job, short_id

pytestmark = pytest.mark.integration

__all__ = ["deps"]  # the module's fixture (tests.deps_support)

FIRST = "run-first:4:1"  # the run before's deliver attempt
SECOND = "run-second:4:1"  # the new run's


async def _bound(pool: asyncpg.Pool, route: RouteRef) -> str:
    """A job whose one cell's work is fetched (no files): ready to deliver on ``route``."""
    target = TargetSpec(target_id="demo", routes=[route])
    job_id = await ledger_job(pool, target, label="lease")
    work = Work(work_id=f"w{short_id()}")
    async with pool.acquire() as conn, conn.transaction():
        await cells.bind_work(conn, job_id, target, [work], CandidateReport())
        await cells.artifact_ready(conn, job_id, "demo", work.work_id, {"work_id": work.work_id, "files": []})
    return job_id


async def _claim(
    pool: asyncpg.Pool, job_id: str, route: RouteRef, owner: str | None, *, lease_ms: int = 60_000, tolerant: bool
) -> SendClaim:
    async with pool.acquire() as conn, conn.transaction():
        cell, *_ = await cells.start_step(
            conn, job_id, "demo", stage=CellStage.DELIVERING, attempt=1, lease_ms=60_000, owner="w"
        )
        return await deliveries.claim_send(
            conn,
            job_id,
            "demo",
            route.name,
            rate_limit_cap_ms=ROUTE_RATE_LIMIT_CAP_MS,
            ambiguous_ok=tolerant,
            opened=cell,
            owner=owner,
            lease_ms=lease_ms,
        )


async def _intent(pool: asyncpg.Pool, job_id: str) -> dict[str, Any]:
    row = await pool.fetchrow(
        "SELECT status, attempts, maybe_delivered, send_owner, send_until FROM delivery_intents WHERE job_id = $1",
        job_id,
    )
    assert row is not None
    return dict(row)


def _route(kind: str = "webhook") -> RouteRef:
    return RouteRef(name=f"{kind[:3]}-{uuid.uuid4().hex[:6]}", kind=kind)


@pytest.mark.parametrize("tolerant", [True, False], ids=["resend-safe", "at-most-once"])
async def test_a_claim_waits_while_another_attempts_send_is_out(ledger_pool: asyncpg.Pool, tolerant: bool) -> None:
    route = _route()
    job_id = await _bound(ledger_pool, route)
    first = await _claim(ledger_pool, job_id, route, FIRST, tolerant=tolerant)
    assert first.decision == "send"
    before = await _intent(ledger_pool, job_id)
    assert (before["status"], before["attempts"], before["send_owner"]) == ("sending", 1, FIRST)

    second = await _claim(ledger_pool, job_id, route, SECOND, tolerant=tolerant)

    # Neither sent again (the webhook) nor judged ambiguous (an at-most-once route): waited.
    assert second.decision == "awaiting", second
    assert 0 < second.wait_ms <= 60_000
    assert await _intent(ledger_pool, job_id) == before  # nothing written


async def test_the_sending_attempt_itself_and_a_caller_naming_none_are_not_held(ledger_pool: asyncpg.Pool) -> None:
    route = _route()
    job_id = await _bound(ledger_pool, route)
    assert (await _claim(ledger_pool, job_id, route, FIRST, tolerant=True)).decision == "send"
    # The owner's own claim is no other attempt; a claim naming no attempt keeps the rule of before.
    assert (await _claim(ledger_pool, job_id, route, FIRST, tolerant=True)).decision == "send"
    assert (await _claim(ledger_pool, job_id, route, None, tolerant=False)).decision == "ambiguous"


@pytest.mark.parametrize(("tolerant", "decision"), [(True, "send"), (False, "ambiguous")])
async def test_once_the_sending_attempts_lease_lapsed_the_rule_of_before_holds(
    ledger_pool: asyncpg.Pool, tolerant: bool, decision: str
) -> None:
    # The attempt stopped beating (a killed worker): Temporal retries it only after the
    # heartbeat timeout, the lease; its send may have landed.
    route = _route()
    job_id = await _bound(ledger_pool, route)
    await _claim(ledger_pool, job_id, route, FIRST, tolerant=tolerant)
    await ledger_pool.execute("UPDATE delivery_intents SET send_until = send_until - 61000 WHERE job_id = $1", job_id)

    second = await _claim(ledger_pool, job_id, route, SECOND, tolerant=tolerant)

    assert second.decision == decision, second
    if decision == "send":
        intent = await _intent(ledger_pool, job_id)
        assert (intent["attempts"], intent["maybe_delivered"], intent["send_owner"]) == (2, True, SECOND)


async def test_the_sending_attempts_beats_keep_its_send_live(ledger_pool: asyncpg.Pool) -> None:
    route = _route()
    job_id = await _bound(ledger_pool, route)
    first = await _claim(ledger_pool, job_id, route, FIRST, lease_ms=1, tolerant=True)
    await asyncio.sleep(0.05)
    # Another attempt's beat (the new run's, its cell lease) does not keep FIRST's send live.
    await cells.heartbeat(ledger_pool, job_id, "demo", 60_000, send=(first.idempotency_key or "", SECOND))
    assert (await _intent(ledger_pool, job_id))["send_until"] is not None
    lapsed = await ledger_pool.fetchval(
        "SELECT send_until < (extract(epoch from clock_timestamp()) * 1000)::bigint FROM delivery_intents "
        "WHERE job_id = $1",
        job_id,
    )
    assert lapsed
    # Its own beat does.
    await cells.heartbeat(ledger_pool, job_id, "demo", 60_000, send=(first.idempotency_key or "", FIRST))
    assert (await _claim(ledger_pool, job_id, route, SECOND, tolerant=True)).decision == "awaiting"


async def test_a_beat_after_the_sends_answer_is_recorded_leases_nothing_again(ledger_pool: asyncpg.Pool) -> None:
    # The attempt records its send's answer while its heartbeater beats (since 2026-12-06):
    # a beat under way as the receipt is recorded — which ends the cell and the attempt's
    # lease — keeps neither the send nor the ended cell leased.
    route = _route()
    job_id = await _bound(ledger_pool, route)
    key = (await _claim(ledger_pool, job_id, route, FIRST, tolerant=True)).idempotency_key or ""
    async with ledger_pool.acquire() as conn, conn.transaction():
        await deliveries.record_delivered(conn, job_id, "demo", key, remote_id="r-1")

    await cells.heartbeat(ledger_pool, job_id, "demo", 60_000, send=(key, FIRST))

    cell = await ledger_pool.fetchrow("SELECT state, lease_until FROM cells WHERE job_id = $1", job_id)
    assert cell is not None and (cell["state"], cell["lease_until"]) == ("submitted", None), dict(cell or {})


async def test_once_the_send_out_is_answered_the_waiting_claim_is_done(ledger_pool: asyncpg.Pool) -> None:
    route = _route()
    job_id = await _bound(ledger_pool, route)
    first = await _claim(ledger_pool, job_id, route, FIRST, tolerant=True)
    async with ledger_pool.acquire() as conn, conn.transaction():
        await deliveries.record_delivered(conn, job_id, "demo", first.idempotency_key or "", remote_id="r-1")

    second = await _claim(ledger_pool, job_id, route, SECOND, tolerant=True)

    assert (second.decision, second.remote_id) == ("done", "r-1")


async def test_a_deliver_attempt_waits_for_the_send_another_run_has_out_and_sends_nothing(
    deps: tuple[Stack, ActivityDeps], tmp_path: Path
) -> None:
    stack, opened = deps
    settings = stack.settings
    target = TargetSpec(target_id="demo", routes=settings.route_refs(settings.targets[0]))
    route = target.routes[0]  # a directory route: at most once (a re-send is never safe)
    job_id = await _bound(opened.pool, route)
    first = await _claim(opened.pool, job_id, route, FIRST, tolerant=False)
    assert first.decision == "send"

    inp = DeliverInput(job_id=job_id, target=target, route=route, heartbeat_interval_ms=1000)
    attempt = asyncio.ensure_future(run_as_job(DeliverActivity(opened).deliver, inp))
    await asyncio.sleep(1.5)
    assert not attempt.done()  # waiting (until 2026-12-05: ended `delivery_unknown` at once)
    # The run before's send is answered and recorded.
    async with opened.pool.acquire() as conn, conn.transaction():
        await deliveries.record_delivered(conn, job_id, "demo", first.idempotency_key or "", remote_id="r-1")
    update = await asyncio.wait_for(attempt, 10)

    assert update.cell.state == CellState.SUBMITTED, update
    assert update.delivery is not None and (update.delivery.status, update.delivery.remote_id) == ("delivered", "r-1")
    assert not (tmp_path / "delivered").exists() or not any((tmp_path / "delivered").rglob("*"))  # sent nothing
    intent = await _intent(opened.pool, job_id)
    assert (intent["status"], intent["attempts"]) == ("delivered", 1)


class _FlakyBeats:
    """A ledger pool whose first ledger beat fails at once (a backend ended under it — a
    PostgreSQL restart, a failover); every beat that gets through first reads how long
    the send it keeps live had left (``left_ms``, the database's clock)."""

    def __init__(self, pool: asyncpg.Pool, key: str) -> None:
        self._pool = pool
        self._key = key
        self.failed = 0
        self.left_ms: list[int] = []

    async def execute(self, query: str, *args: Any) -> str:
        if "send_until" in query and self.failed == 0:
            self.failed += 1
            raise asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation")
        if "send_until" in query:
            self.left_ms.append(
                await self._pool.fetchval(
                    "SELECT send_until - (extract(epoch from clock_timestamp()) * 1000)::bigint "
                    "FROM delivery_intents WHERE idempotency_key = $1",
                    self._key,
                )
            )
        return str(await self._pool.execute(query, *args))

    def acquire(self) -> Any:
        return self._pool.acquire()


async def test_one_failed_ledger_beat_does_not_lapse_the_send_of_a_live_attempt(ledger_pool: asyncpg.Pool) -> None:
    # The lease is two intervals and the sending attempt beats once per interval: a beat
    # that failed was tried again only an interval later — after the lease had lapsed
    # (until 2026-12-05), when a new run's claim (polling every 0.5 s) took the send
    # still out for one that may have landed: sent twice on a webhook, `delivery_unknown`
    # on Telegram. A failed beat is tried again at the next Temporal beat.
    route = _route()
    job_id = await _bound(ledger_pool, route)
    interval_s = 1.0
    first = await _claim(ledger_pool, job_id, route, FIRST, lease_ms=int(interval_s * 2000), tolerant=True)
    flaky = _FlakyBeats(ledger_pool, first.idempotency_key or "")

    async def sending() -> None:
        async with Heartbeater(
            flaky,  # type: ignore[arg-type]
            job_id,
            "demo",
            interval_s,
            int(interval_s * 2000),
            send=(first.idempotency_key or "", FIRST),
        ):
            await asyncio.sleep(interval_s * 2.6)

    await ActivityEnvironment().run(sending)

    assert flaky.failed == 1
    assert flaky.left_ms, "no beat got through"
    assert all(left > 0 for left in flaky.left_ms), f"the send's lease lapsed while its attempt beat: {flaky.left_ms}"


@pytest.mark.parametrize("tolerant", [True, False], ids=["resend-safe", "at-most-once"])
async def test_an_attempt_that_ended_with_its_send_unrecorded_is_not_waited_for(
    ledger_pool: asyncpg.Pool, tolerant: bool
) -> None:
    # The attempt ended (its send's answer could not be recorded: the ledger failed, a
    # cancel between the claim and the send) and Temporal retries it at once: nothing of
    # it is out any more, so the retry decides by the rule of before, at once — until
    # 2026-12-05 it waited for the ended attempt's lease (up to two heartbeat intervals,
    # a minute by default) for an answer no one would record.
    route = _route()
    job_id = await _bound(ledger_pool, route)
    first = await _claim(ledger_pool, job_id, route, FIRST, tolerant=tolerant)

    async def failing() -> None:
        async with Heartbeater(ledger_pool, job_id, "demo", 30.0, 60_000, send=(first.idempotency_key or "", FIRST)):
            raise asyncpg.exceptions.QueryCanceledError("canceling statement due to statement timeout")

    with pytest.raises(asyncpg.exceptions.QueryCanceledError):
        await ActivityEnvironment().run(failing)

    retry = await _claim(ledger_pool, job_id, route, SECOND, tolerant=tolerant)
    assert retry.decision == ("send" if tolerant else "ambiguous"), retry


# ---- the job's end waits for a send still out (curaflow.ledger.finish) -----------------


async def _finish(
    pool: asyncpg.Pool, job_id: str, cause: FinishCause, *, by_workflow: bool = True
) -> FinishedJob | None:
    async with pool.acquire() as conn:
        return await finish_job(conn, job_id, cause=cause, by_workflow=by_workflow)


@pytest.mark.parametrize("cancel", ["none", "cancel-cause", "cancel-recorded"])
async def test_a_workflows_finish_waits_for_a_send_out_from_a_live_attempt_and_ends_with_its_answer(
    ledger_pool: asyncpg.Pool, cancel: str
) -> None:
    # The workflow stopped waiting for the deliver attempt (an operator timed it out, or
    # completed or failed it by hand) while its send is out. Until 2026-12-05 the finish
    # ended the cell then (the intent `unknown`) and the late 200 made the intent
    # `delivered` under a failed job — and a consumer cancel (the workflow's cause, or one
    # recorded while the finish waited) still did so: nothing cuts that send.
    route = _route()
    job_id = await _bound(ledger_pool, route)
    first = await _claim(ledger_pool, job_id, route, FIRST, tolerant=True)
    cause = FinishCause.CANCELLED if cancel == "cancel-cause" else FinishCause.COMPLETED
    if cancel != "none":
        await ledger_pool.execute("UPDATE jobs SET cancel_requested_at = created_at WHERE job_id = $1", job_id)
    before = await _intent(ledger_pool, job_id)

    with pytest.raises(SendStillOut) as waited:
        await _finish(ledger_pool, job_id, cause)

    assert waited.value.job_id == job_id and 0 < waited.value.wait_ms <= 60_000
    assert await _intent(ledger_pool, job_id) == before  # nothing written
    assert await ledger_pool.fetchval("SELECT completed_at FROM jobs WHERE job_id = $1", job_id) is None
    assert await ledger_pool.fetchval("SELECT count(*) FROM outcomes WHERE job_id = $1", job_id) == 0
    # The send's answer comes and is recorded; the finish then ends the job with it.
    async with ledger_pool.acquire() as conn, conn.transaction():
        await deliveries.record_delivered(conn, job_id, "demo", first.idempotency_key or "", remote_id="r-1")
    finished = await _finish(ledger_pool, job_id, cause)

    assert finished is not None and finished.outcome is not None
    assert finished.record.cells[0].state == "submitted"
    assert [d["status"] for d in finished.outcome["deliveries"]] == ["delivered"]
    if cancel == "none":
        assert finished.record.business_status == "success"


@pytest.mark.parametrize(
    "stop",
    ["deadline-cause", "deadline-passed", "lease-lapsed", "reconciler", "reconciler-cancel"],
)
async def test_a_finish_at_the_deadline_or_after_the_lease_lapsed_ends_the_job_at_once(
    ledger_pool: asyncpg.Pool, stop: str
) -> None:
    # The job's deadline ends the job promptly (the outbound layer cuts every send there);
    # a send whose attempt stopped beating is no send out; the reconciler finishes only
    # once no attempt holds a live cell lease (its own rule: it never asks).
    route = _route()
    job_id = await _bound(ledger_pool, route)
    await _claim(ledger_pool, job_id, route, FIRST, tolerant=True)
    cause = {
        "deadline-cause": FinishCause.DEADLINE,
        "reconciler": FinishCause.STALLED,
        "reconciler-cancel": FinishCause.CANCELLED,
    }.get(stop, FinishCause.COMPLETED)
    if stop == "deadline-passed":
        await ledger_pool.execute("UPDATE jobs SET deadline_at = created_at WHERE job_id = $1", job_id)
    if stop == "lease-lapsed":
        await ledger_pool.execute(
            "UPDATE delivery_intents SET send_until = send_until - 61000 WHERE job_id = $1", job_id
        )

    finished = await _finish(ledger_pool, job_id, cause, by_workflow=not stop.startswith("reconciler"))

    assert finished is not None and finished.outcome is not None
    assert finished.record.completed_at is not None
    # What the send did is unknown: reported so, never delivered nor released.
    assert (await _intent(ledger_pool, job_id))["status"] == "unknown"


# ---- the send stays out while its attempt still records the answer ---------------------

#: The receipt's record fails this many times (fast: a statement timeout): its last failure
#: comes 3.1 s after the route answered, and the try after it, 3.2 s later, records it
#: (:data:`activities.deliver.recording.RECORD_RETRY_S`).
RECEIPT_FAILS = len(RECORD_RETRY_S)
#: The sending attempt's own ledger beats (its send's ``send_until`` extended).
OWN_BEAT = (
    "OLD.status = 'sending' AND NEW.status = 'sending' AND NEW.send_owner IS NOT DISTINCT FROM OLD.send_owner "
    "AND NEW.send_until IS NOT NULL AND NEW.send_until IS DISTINCT FROM OLD.send_until"
)
#: A short heartbeat interval (two intervals: one second), as a test's or an impatient
#: operator's configuration sets it; the configuration accepts 100 ms.
SHORT_INTERVAL_MS = 500


def _directory_step(stack: Stack) -> tuple[TargetSpec, RouteRef]:
    settings = stack.settings
    target = TargetSpec(target_id="demo", routes=settings.route_refs(settings.targets[0]))
    return target, target.routes[0]  # a directory route: at most once


async def _settled(attempt: asyncio.Future[Any]) -> None:
    """A test that failed midway leaves no attempt behind (its recording runs to its end)."""
    if not attempt.done():
        attempt.cancel()
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(attempt, 15)


async def _delivered_once(pool: asyncpg.Pool, job_id: str, update: Any, tmp_path: Path) -> None:
    assert update.cell.state == CellState.SUBMITTED, update
    assert update.delivery is not None and update.delivery.status == "delivered", update
    intent = await _intent(pool, job_id)
    assert (intent["status"], intent["attempts"]) == ("delivered", 1), intent  # sent once
    assert len(list((tmp_path / "delivered").rglob("manifest.json"))) == 1


@pytest.mark.parametrize("outage", ["receipt", "every-write"])
async def test_a_send_stays_out_while_its_attempt_still_records_the_answer(
    deps: tuple[Stack, ActivityDeps], tmp_path: Path, outage: str
) -> None:
    # The route answered; the ledger fails the receipt's record and the attempt tries it
    # again for up to 6.3 s. Until 2026-12-06 the recording ran after the send's
    # heartbeater had stopped and the lease was two intervals: with a heartbeat interval
    # of a few seconds it lapsed while the answer was still being recorded, and another
    # run's deliver took the send (a webhook: sent again; elsewhere `delivery_unknown`),
    # the job's finish stopped waiting (the delivery `unknown`). `every-write`: the
    # attempt's own beats fail too (the ledger down for it) — the lease itself must
    # outlast the recording's retries.
    stack, opened = deps
    target, route = _directory_step(stack)
    job_id = await _bound(opened.pool, route)
    inp = DeliverInput(job_id=job_id, target=target, route=route, heartbeat_interval_ms=SHORT_INTERVAL_MS)
    async with contextlib.AsyncExitStack() as faults:
        tried = await faults.enter_async_context(ledger_fails(opened.pool, route.name, RECEIPT, times=RECEIPT_FAILS))
        if outage == "every-write":
            await faults.enter_async_context(ledger_fails(opened.pool, route.name, OWN_BEAT, times=1_000_000))
        attempt = asyncio.ensure_future(run_as_job(DeliverActivity(opened).deliver, inp))
        try:

            async def failed_enough() -> bool:
                return await tried() >= RECEIPT_FAILS

            await eventually(failed_enough, timeout_s=20, what="the receipt's record failing")
            # More than three seconds since the answer (past two intervals); the attempt
            # records it at its next try, 3.2 s on.
            other = await _claim(opened.pool, job_id, route, SECOND, tolerant=True)
            assert other.decision == "awaiting", f"another run's deliver took the send out: {other}"
            with pytest.raises(SendStillOut):
                await _finish(opened.pool, job_id, FinishCause.COMPLETED)
            update = await asyncio.wait_for(attempt, 30)
        finally:
            await _settled(attempt)

    await _delivered_once(opened.pool, job_id, update, tmp_path)


async def test_a_send_stays_out_while_a_try_of_its_record_hangs(
    deps: tuple[Stack, ActivityDeps], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A try that hangs (a statement waiting on a lock until the statement timeout, 30 s by
    # default) outlasts any lease of a minute's order: the lease is extended while the
    # attempt records, by its beats (which need none of the record's locks).
    stack, opened = deps
    target, route = _directory_step(stack)
    job_id = await _bound(opened.pool, route)
    entered, go_on = asyncio.Event(), asyncio.Event()
    real = deliveries.record_delivered

    async def hanging(*args: Any, **kwargs: Any) -> Any:
        if not entered.is_set():
            entered.set()
            await go_on.wait()
            raise asyncpg.exceptions.QueryCanceledError("canceling statement due to statement timeout")
        return await real(*args, **kwargs)

    monkeypatch.setattr(deliveries, "record_delivered", hanging)
    inp = DeliverInput(job_id=job_id, target=target, route=route, heartbeat_interval_ms=SHORT_INTERVAL_MS)
    attempt = asyncio.ensure_future(run_as_job(DeliverActivity(opened).deliver, inp))
    try:
        await asyncio.wait_for(entered.wait(), 20)
        at_answer = (await _intent(opened.pool, job_id))["send_until"]

        async def extended() -> bool:
            return bool((await _intent(opened.pool, job_id))["send_until"] > at_answer)

        await eventually(extended, timeout_s=5, what="a beat extending the send while its answer is recorded")
        assert (await _claim(opened.pool, job_id, route, SECOND, tolerant=True)).decision == "awaiting"
        go_on.set()
        update = await asyncio.wait_for(attempt, 30)
    finally:
        go_on.set()
        await _settled(attempt)

    await _delivered_once(opened.pool, job_id, update, tmp_path)


async def test_an_attempt_that_gave_up_recording_its_receipt_releases_its_send(
    deps: tuple[Stack, ActivityDeps],
) -> None:
    # The ledger failed every try of the receipt's record: the attempt ends (Temporal
    # retries it; the receipt is its last heartbeat, which the retry records, whatever
    # the lease). Nothing of its send is out any more and no one else will record its
    # answer, so its lease ends with it, as after a failure's record gave up — until
    # 2026-12-06 it held for the rest of the lease, and a new run's deliver or the job's
    # finish waited for an answer no one would record.
    stack, opened = deps
    target, route = _directory_step(stack)
    job_id = await _bound(opened.pool, route)
    inp = DeliverInput(job_id=job_id, target=target, route=route, heartbeat_interval_ms=SHORT_INTERVAL_MS)
    async with ledger_fails(opened.pool, route.name, RECEIPT, times=LONGER):
        with pytest.raises(asyncpg.exceptions.QueryCanceledError):
            await run_as_job(DeliverActivity(opened).deliver, inp)

    intent = await _intent(opened.pool, job_id)
    assert (intent["status"], intent["attempts"], intent["send_until"]) == ("sending", 1, None), intent

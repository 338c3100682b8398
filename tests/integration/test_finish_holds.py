"""What the finish says held a cell it ends (``cells.held_by``, DESIGN.md "What a job and its
cells end as"): the ledger's facts straight into :func:`curaflow.ledger.finish.finish_job`,
no workflow. The end-to-end cases (a Telegram flood wait, Discord's global limit) are in
``test_delivery_attribution.py``."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any, Literal

import asyncpg
import pytest
from pydantic import BaseModel

from activities.deliver import DeliveryRecords
from curaflow.config.delivery import ROUTE_RATE_LIMIT_CAP_MS, DeliverySettings
from curaflow.domain.cells import CellStage, CellState
from curaflow.domain.holds import Hold, HoldCaps
from curaflow.domain.messages import DeliverInput, RouteRef, TargetSpec
from curaflow.domain.models import Artifact, CandidateReport, CellSnapshot, Work
from curaflow.domain.ratelimit import LADDER_CAP_MS
from curaflow.domain.reasons import TerminalReason
from curaflow.domain.verdicts import FailureKind, FinishCause, StepFailure
from curaflow.ledger import cells, deliveries, route_gates
from curaflow.ledger.db import DB_NOW_MS, create_pool
from curaflow.ledger.finish import FinishedJob, finish_job
from curaflow.ledger.records import load_cells
from curaflow.ledger.statements import StatementCounter
from curaflow.protocol.projection import project_job
from curaflow.routes.base import DeliveryRequest, RouteError
from tests.support import ledger_job, run_as_job

pytestmark = pytest.mark.integration

HOUR_MS = 3_600_000


def _routes(*names: str) -> list[RouteRef]:
    return [RouteRef(name=f"{n}-{uuid.uuid4().hex[:6]}", kind="directory") for n in names]


async def _bound(pool: asyncpg.Pool, routes: list[RouteRef], *, fetched: bool = True, **job: int) -> str:
    """A one-cell job whose work is bound (its intents reserved on ``routes``) and, with
    ``fetched``, stored: the cell waits for its deliveries."""
    target = TargetSpec(target_id="demo", routes=routes)
    work = Work(work_id=f"w{uuid.uuid4().hex[:8]}")
    job_id = await ledger_job(pool, target, label="holds", **job)
    async with pool.acquire() as conn, conn.transaction():
        await cells.bind_work(conn, job_id, target, [work], CandidateReport())
        if fetched:
            await cells.artifact_ready(conn, job_id, "demo", work.work_id, {"work_id": work.work_id, "files": []})
    return job_id


async def _claim(pool: asyncpg.Pool, job_id: str, route: str) -> str:
    async with pool.acquire() as conn, conn.transaction():
        cell, *_ = await cells.start_step(
            conn, job_id, "demo", stage=CellStage.DELIVERING, attempt=1, lease_ms=60_000, owner=route
        )
        claim = await deliveries.claim_send(
            conn, job_id, "demo", route, rate_limit_cap_ms=ROUTE_RATE_LIMIT_CAP_MS, opened=cell
        )
    assert claim.decision == "send" and claim.idempotency_key
    return claim.idempotency_key


async def _rate_limited(pool: asyncpg.Pool, job_id: str, key: str, delay_ms: int) -> None:
    """The send answered a rate limit of ``delay_ms``: recorded as the deliver attempt does."""
    async with pool.acquire() as conn, conn.transaction():
        await deliveries.record_failed(conn, job_id, "demo", key, reason="rate_limited", error="429", permanent=False)
        await deliveries.hold_intent(conn, key, delay_ms)


async def _finished(
    pool: asyncpg.Pool,
    job_id: str,
    cause: FinishCause = FinishCause.DEADLINE,
    *,
    failure: StepFailure | None = None,
    caps: HoldCaps | None = None,
) -> FinishedJob:
    async with pool.acquire() as conn:
        finished = await finish_job(
            conn, job_id, cause=cause, failures={"demo": failure} if failure else None, caps=caps
        )
    assert finished is not None
    return finished


async def _finish(
    pool: asyncpg.Pool,
    job_id: str,
    cause: FinishCause = FinishCause.DEADLINE,
    *,
    failure: StepFailure | None = None,
    caps: HoldCaps | None = None,
) -> CellSnapshot:
    return (await _finished(pool, job_id, cause, failure=failure, caps=caps)).record.cells[0]


async def _cooling(pool: asyncpg.Pool, route: str, ahead_ms: int) -> None:
    """``route`` cools down ``ahead_ms`` from now, as the row holds it (whatever the cap)."""
    async with pool.acquire() as conn, conn.transaction():
        await route_gates.rate_limited(
            conn, route=route, stated_ms=1000, route_wide=True, cap_ms=ROUTE_RATE_LIMIT_CAP_MS
        )
        await conn.execute(
            f"UPDATE route_gates SET cooldown_until = {DB_NOW_MS} + $2 WHERE route = $1", route, ahead_ms
        )


async def test_the_route_that_held_names_the_cell_not_the_one_that_delivered(ledger_pool: asyncpg.Pool) -> None:
    # Guard: route a delivered, route b's receiver stated a wait of 2 h.
    a, b = _routes("a", "b")
    job_id = await _bound(ledger_pool, [a, b])
    async with ledger_pool.acquire() as conn, conn.transaction():
        await deliveries.record_delivered(conn, job_id, "demo", await _claim(ledger_pool, job_id, a.name))
    await _rate_limited(ledger_pool, job_id, await _claim(ledger_pool, job_id, b.name), 2 * HOUR_MS)
    cell = await _finish(ledger_pool, job_id)
    assert cell.held_by is not None and (cell.held_by.name, cell.held_by.kind) == (b.name, "rate_limited")
    assert b.name in (cell.reason_message or "") and a.name not in (cell.reason_message or "")


async def test_a_held_send_delivered_by_its_retry_holds_nothing(ledger_pool: asyncpg.Pool) -> None:
    # Guard: b was rate-limited for 2 h, then its retry delivered (held_until is left on
    # the row); a is still reserved when the job ends. Nothing held the cell.
    a, b = _routes("a", "b")
    job_id = await _bound(ledger_pool, [a, b])
    key = await _claim(ledger_pool, job_id, b.name)
    await _rate_limited(ledger_pool, job_id, key, 2 * HOUR_MS)
    async with ledger_pool.acquire() as conn, conn.transaction():
        await deliveries.record_delivered(conn, job_id, "demo", await _claim(ledger_pool, job_id, b.name))
    cell = await _finish(ledger_pool, job_id)
    assert (cell.state, cell.held_by) == (CellState.FAILED, None)
    assert b.name not in (cell.reason_message or "")


async def test_a_cell_still_fetching_is_not_held_by_its_routes(ledger_pool: asyncpg.Pool) -> None:
    # The work was bound (its intents reserved) but never stored when the deadline came:
    # the download held the cell, not the route that cools down meanwhile — the deadline's
    # remedy (a longer deadline, a narrower query) is the one that helps.
    (a,) = _routes("a")
    job_id = await _bound(ledger_pool, [a], fetched=False)
    await _cooling(ledger_pool, a.name, HOUR_MS // 2)
    cell = await _finish(ledger_pool, job_id)
    assert (cell.state, cell.reason, cell.held_by) == (CellState.FAILED, "execution_timeout", None)
    assert a.name not in (cell.reason_message or "")


@pytest.mark.parametrize(
    ("cause", "held"),
    [(FinishCause.TIMED_OUT, True), (FinishCause.TERMINATED, False), (FinishCause.CANCELLED, False)],
)
async def test_the_reconciler_finish_says_a_hold_as_the_workflow_finish_does(
    ledger_pool: asyncpg.Pool, cause: FinishCause, held: bool
) -> None:
    # Guard: one owner (finish_job) for every cause; a cell an operator stopped is not held.
    (a,) = _routes("a")
    job_id = await _bound(ledger_pool, [a])
    await _rate_limited(ledger_pool, job_id, await _claim(ledger_pool, job_id, a.name), 2 * HOUR_MS)
    cell = await _finish(ledger_pool, job_id, cause)
    assert (cell.held_by is not None) == held, cell


async def _answered(
    pool: asyncpg.Pool, err: RouteError, *, max_attempts: int = 5, key: tuple[str, RouteRef] | None = None
) -> tuple[str, str]:
    """A one-cell job on one route whose send answered ``err``, recorded as the deliver
    attempt records it (``DeliveryRecords._record_error``, attempt 1 of ``max_attempts``);
    with ``key`` (a job and its route), that job's next send instead. Returns the job id
    and the intent's key."""
    if key is None:
        (route,) = _routes("a")
        job_id = await _bound(pool, [route])
    else:
        job_id, route = key
    idem = await _claim(pool, job_id, route.name)
    work = (await pool.fetchrow("SELECT work_id FROM delivery_intents WHERE idempotency_key = $1", idem))[0]
    records: Any = DeliveryRecords()
    records.deps = SimpleNamespace(
        pool=pool,
        route=lambda name: SimpleNamespace(name=name, resend_safe=False),
        settings=SimpleNamespace(delivery=DeliverySettings()),
    )
    target = TargetSpec(target_id="demo", routes=[route])
    request = DeliveryRequest(
        job_id=job_id,
        target_id="demo",
        route=route.name,
        idempotency_key=idem,
        work=Work(work_id=work),
        artifact=Artifact(work_id=work),
        attempt=await pool.fetchval("SELECT attempts FROM delivery_intents WHERE idempotency_key = $1", idem),
    )
    await run_as_job(
        records._record_error,
        DeliverInput(job_id=job_id, target=target, route=route),
        request,
        err,
        max_attempts=max_attempts,
    )
    return job_id, idem


async def _held_of(pool: asyncpg.Pool, key: str) -> tuple[int | None, str | None]:
    row = await pool.fetchrow("SELECT held_until, held_kind FROM delivery_intents WHERE idempotency_key = $1", key)
    return row["held_until"], row["held_kind"]


@pytest.mark.parametrize(("route_wide", "kind"), [(True, "cooling"), (False, "rate_limited")])
async def test_a_rate_limit_is_named_as_the_receiver_stated_it(
    ledger_pool: asyncpg.Pool, route_wide: bool, kind: str
) -> None:
    # A route-wide limit (Discord's global one) cools the whole route down: the report says
    # "cooling". The intent's own time, written a moment after the cooldown on the
    # database's clock, ended a millisecond later and named it "this send" whenever the
    # two statements were a millisecond apart (a loaded machine).
    err = RouteError(
        TerminalReason.DELIVERY_FAILED, "429", retry_after_s=1800, rate_limited=True, route_wide=route_wide
    )
    job_id, key = await _answered(ledger_pool, err)
    route = await ledger_pool.fetchval("SELECT route FROM delivery_intents WHERE idempotency_key = $1", key)
    cell = await _finish(ledger_pool, job_id)
    assert cell.held_by is not None and (cell.held_by.name, cell.held_by.kind) == (route, kind), cell.held_by
    held_until, held_kind = await _held_of(ledger_pool, key)
    assert (held_until is None) == route_wide
    assert held_kind == (None if route_wide else "rate_limited")


# ---- a receiver that is unavailable and said when to come back ----------------------------


async def test_a_receiver_unavailable_past_the_deadline_is_named_as_it_asked(ledger_pool: asyncpg.Pool) -> None:
    # A 503 with a Retry-After of 30 min: the next attempt waits it (route_failure), and
    # only a rate limit's wait was remembered — the job ending in it said "a longer
    # deadline". Now the wait is on the intent, with its kind, in the recording's own
    # statement, and the report names the receiver's unavailability, not a rate limit.
    err = RouteError(TerminalReason.DELIVERY_FAILED, "webhook answered HTTP 503", retry_after_s=1800)
    before = await _db_now(ledger_pool)
    job_id, key = await _answered(ledger_pool, err)
    held_until, held_kind = await _held_of(ledger_pool, key)
    assert held_kind == "unavailable" and held_until is not None
    assert before + 1800_000 <= held_until <= await _db_now(ledger_pool) + 1800_000
    route = await ledger_pool.fetchval("SELECT route FROM delivery_intents WHERE idempotency_key = $1", key)
    finished = await _finished(ledger_pool, job_id)
    cell = finished.record.cells[0]
    assert (cell.reason, cell.held_by) == (
        "execution_timeout",
        Hold(name=route, kind="unavailable", until=held_until),
    )
    assert project_job(finished.record)["error"]["detail"]["held_by"]["kind"] == "unavailable"
    assert "unavailable" in (cell.reason_message or "") and "rate limit" not in (cell.reason_message or "")


@pytest.mark.parametrize(
    ("err", "max_attempts"),
    [
        # no stated wait: Temporal's backoff, nothing the receiver asked
        (RouteError(TerminalReason.DELIVERY_FAILED, "webhook answered HTTP 503"), 5),
        # the last attempt: no next one to wait for
        (RouteError(TerminalReason.DELIVERY_FAILED, "webhook answered HTTP 503", retry_after_s=1800), 1),
        # a refusal for good carries no wait
        (
            RouteError(TerminalReason.ROUTE_REFUSED, "webhook answered HTTP 401", permanent=True, answer="HTTP 401"),
            5,
        ),
    ],
    ids=["503_without_retry_after", "503_on_the_last_attempt", "401"],
)
async def test_a_failure_with_no_wait_to_keep_holds_nothing(
    ledger_pool: asyncpg.Pool, err: RouteError, max_attempts: int
) -> None:
    job_id, key = await _answered(ledger_pool, err, max_attempts=max_attempts)
    assert await _held_of(ledger_pool, key) == (None, None)
    assert (await _finish(ledger_pool, job_id)).held_by is None


async def test_the_next_answer_replaces_a_receivers_stated_wait(ledger_pool: asyncpg.Pool) -> None:
    # A 503 with a Retry-After, then the retry met a 500 with none: the wait is over, and
    # the report no longer names it. A rate limit after it is named a rate limit.
    unavailable = RouteError(TerminalReason.DELIVERY_FAILED, "webhook answered HTTP 503", retry_after_s=1800)
    job_id, key = await _answered(ledger_pool, unavailable)
    name = await ledger_pool.fetchval("SELECT route FROM delivery_intents WHERE idempotency_key = $1", key)
    route = RouteRef(name=name, kind="directory")
    plain = RouteError(TerminalReason.DELIVERY_FAILED, "webhook answered HTTP 500")
    await _answered(ledger_pool, plain, key=(job_id, route))
    assert await _held_of(ledger_pool, key) == (None, None)
    limited = RouteError(TerminalReason.DELIVERY_FAILED, "429", retry_after_s=1800, rate_limited=True)
    await _answered(ledger_pool, limited, key=(job_id, route))
    assert (await _held_of(ledger_pool, key))[1] == "rate_limited"
    cell = await _finish(ledger_pool, job_id)
    assert cell.held_by is not None and cell.held_by.kind == "rate_limited"


async def test_a_receivers_stated_wait_costs_no_statement(ledger_pool: asyncpg.Pool, database_url: str) -> None:
    # The wait is written by the statement that records the failure: a 503 with a
    # Retry-After costs the ledger what one without costs (and a delivery nothing more:
    # test_job_statements.py).
    counter = StatementCounter()
    pool = await create_pool(database_url, min_size=1, max_size=1, counter=counter)
    try:
        costs = []
        for stated in (None, 1800, None):
            before = counter.totals()
            err = RouteError(TerminalReason.DELIVERY_FAILED, "webhook answered HTTP 503", retry_after_s=stated)
            _, key = await _answered(pool, err)
            after = counter.totals()
            costs.append((after[0] - before[0], after[1] - before[1]))
            assert (await _held_of(pool, key))[1] == ("unavailable" if stated else None)
    finally:
        await pool.close()
    assert costs[0] == costs[1] == costs[2], costs


async def test_a_stored_hold_of_a_later_builds_kind_is_read_without_it(ledger_pool: asyncpg.Pool) -> None:
    # Additive: a kind a later build writes (a rolling upgrade) costs the structured hold
    # only — the job and its cells are read, the cell's message still says it.
    (route,) = _routes("a")
    job_id = await _bound(ledger_pool, [route])
    await _finish(ledger_pool, job_id)
    await ledger_pool.execute(
        """UPDATE cells SET held_by = '{"owner": "route", "name": "x", "kind": "a-later-kind", "until": 1}'::jsonb
           WHERE job_id = $1""",
        job_id,
    )
    async with ledger_pool.acquire() as conn:
        (cell,) = await load_cells(conn, job_id)
    assert (cell.state, cell.held_by) == (CellState.FAILED, None)


class _HoldBefore47(BaseModel):
    """``cells.held_by`` as every build before migration 0047 reads it (frozen copy of the
    previous release's :class:`~curaflow.domain.holds.Hold`): a closed list of kinds, so
    any other kind failed the whole read — ``GET /jobs/{id}``, a cancel, a schedule's
    ``follow``, a retried ``finish`` — of such a build still running during a rolling
    upgrade, or rolled back to."""

    owner: Literal["route", "account"] = "route"
    name: str
    kind: Literal["rate_limited", "cooling", "paused"]
    until: int


def _read_before_47(value: Any) -> _HoldBefore47 | None:
    """The previous release's ``ledger.records._held``, unchanged."""
    if not value:
        return None
    return _HoldBefore47.model_validate_json(value) if isinstance(value, str) else _HoldBefore47.model_validate(value)


@pytest.mark.parametrize(
    ("err", "kind"),
    [
        (RouteError(TerminalReason.DELIVERY_FAILED, "webhook answered HTTP 503", retry_after_s=1800), "unavailable"),
        (RouteError(TerminalReason.DELIVERY_FAILED, "429", retry_after_s=1800, rate_limited=True), "rate_limited"),
    ],
    ids=["unavailable", "rate_limited"],
)
async def test_a_hold_is_stored_where_the_previous_release_reads_it_without_failing(
    ledger_pool: asyncpg.Pool, err: RouteError, kind: str
) -> None:
    # Rolling upgrade (or a rollback): the previous release's API and workers read
    # cells.held_by with a closed list of kinds. A hold of a kind it lists stays where it
    # reads it; one of a kind added since (unavailable) must not make it fail: it reads no
    # structured hold there (the cell's message still says it), this build reads it whole.
    job_id, key = await _answered(ledger_pool, err)
    held_until = (await _held_of(ledger_pool, key))[0]
    route = await ledger_pool.fetchval("SELECT route FROM delivery_intents WHERE idempotency_key = $1", key)
    cell = await _finish(ledger_pool, job_id)
    assert cell.held_by == Hold(name=route, kind=kind, until=held_until)
    stored = await ledger_pool.fetchval("SELECT held_by FROM cells WHERE job_id = $1", job_id)
    before = _read_before_47(stored)  # raised ValidationError for "unavailable"
    if kind == "unavailable":
        assert before is None
    else:
        assert before is not None and (before.name, before.kind, before.until) == (route, kind, held_until)
    async with ledger_pool.acquire() as conn:
        (again,) = await load_cells(conn, job_id)
    assert again.held_by == cell.held_by


# ---- a cell held by another route than the one that failed it ----------------------------


def _deliver_failure(route: str, error_type: str, retry_state: str) -> StepFailure:
    """What the workflow saw of a ``deliver`` step of ``route`` that failed (its facts)."""
    return StepFailure(
        step="deliver", kind=FailureKind.APPLICATION, error_type=error_type, retry_state=retry_state, route=route
    )


async def test_a_cell_failed_by_one_route_does_not_name_the_wait_of_another(ledger_pool: asyncpg.Pool) -> None:
    # Route a's sends ran out of attempts (the cell's reason: a's failure, delivery_abandoned);
    # route b's receiver stated a wait of 2 h meanwhile. b's wait did not end the cell — a's
    # failure did, whatever b waited for: naming b's wait instead said the report was b's.
    a, b = _routes("a", "b")
    job_id = await _bound(ledger_pool, [a, b])
    await _rate_limited(ledger_pool, job_id, await _claim(ledger_pool, job_id, b.name), 2 * HOUR_MS)
    failed = _deliver_failure(a.name, "delivery_failed", "MAXIMUM_ATTEMPTS_REACHED")
    cell = await _finish(ledger_pool, job_id, FinishCause.DEADLINE, failure=failed)
    assert (cell.state, cell.reason, cell.held_by) == (CellState.FAILED, "delivery_abandoned", None)
    assert b.name not in (cell.reason_message or "")


async def test_a_routes_own_failure_past_the_execution_names_its_own_wait(ledger_pool: asyncpg.Pool) -> None:
    # Guard: route b's wait outlasted the execution (Temporal took no retry: b's failure,
    # retry state TIMEOUT) — b's wait is what held the cell, and is named.
    a, b = _routes("a", "b")
    job_id = await _bound(ledger_pool, [a, b])
    await _rate_limited(ledger_pool, job_id, await _claim(ledger_pool, job_id, b.name), 2 * HOUR_MS)
    failed = _deliver_failure(b.name, "telegram_failed", "TIMEOUT")
    cell = await _finish(ledger_pool, job_id, FinishCause.COMPLETED, failure=failed)
    assert cell.reason == "telegram_failed"
    assert cell.held_by is not None and (cell.held_by.name, cell.held_by.kind) == (b.name, "rate_limited")


# ---- a route's cooldown stored beyond its cap --------------------------------------------


async def test_a_route_cooldown_stored_beyond_the_cap_is_named_as_the_claim_holds_it(
    ledger_pool: asyncpg.Pool,
) -> None:
    # A week written before the cap (never claimed since): the next claim holds the route
    # at most the cap from now (claim_send), so the report says that, not the week.
    (a,) = _routes("a")
    job_id = await _bound(ledger_pool, [a])
    await _cooling(ledger_pool, a.name, 7 * 24 * HOUR_MS)
    cell = await _finish(ledger_pool, job_id, caps=HoldCaps(route_cooldown_ms=ROUTE_RATE_LIMIT_CAP_MS))
    after = await _db_now(ledger_pool)
    assert cell.held_by is not None and (cell.held_by.name, cell.held_by.kind) == (a.name, "cooling")
    assert cell.held_by.until <= after + ROUTE_RATE_LIMIT_CAP_MS


# ---- a cell its source account held -------------------------------------------------------


async def _db_now(pool: asyncpg.Pool) -> int:
    return int(await pool.fetchval(f"SELECT {DB_NOW_MS}"))


async def _account_job(
    pool: asyncpg.Pool, *, deadline_in_ms: int = HOUR_MS, stored: bool = False
) -> tuple[str, str, str]:
    """A one-cell job on an account of its own, its search started (or, with ``stored``,
    its work stored); returns the job id, the account and its gate's key."""
    account = f"acc-{uuid.uuid4().hex[:6]}"
    gate = f"holds-source-{account}"
    (route,) = _routes("a")
    target = TargetSpec(target_id="demo", account=account, routes=[route])
    job_id = await ledger_job(
        pool, target, label="holds", deadline_in_ms=deadline_in_ms, source_task_queues={account: gate}
    )
    async with pool.acquire() as conn, conn.transaction():
        if stored:
            work = Work(work_id=f"w{uuid.uuid4().hex[:8]}")
            await cells.bind_work(conn, job_id, target, [work], CandidateReport())
            await cells.artifact_ready(conn, job_id, "demo", work.work_id, {"work_id": work.work_id, "files": []})
        else:
            await cells.start_step(
                conn, job_id, "demo", stage=CellStage.SEARCHING, attempt=1, lease_ms=60_000, owner="acquire"
            )
    return job_id, account, gate


async def _account_gate(
    pool: asyncpg.Pool, gate: str, *, cooldown_ms: int = 0, paused_ms: int = 0, limited_in_ms: int = 0
) -> None:
    """The account's gate row: cooling down ``cooldown_ms`` and paused ``paused_ms`` from now
    (0: not), its last rate limit ``limited_in_ms`` from now."""
    await pool.execute(
        f"""INSERT INTO source_gates (gate, cooldown_until, paused_until, pause_reason, last_rate_limit_at,
                                      next_at, updated_at)
            SELECT $1, CASE WHEN $2 > 0 THEN now + $2 ELSE 0 END, CASE WHEN $3 > 0 THEN now + $3 ELSE 0 END,
                   CASE WHEN $3 > 0 THEN 'restricted' END, now + $4, 0, now
            FROM (SELECT {DB_NOW_MS} AS now) clock""",
        gate,
        cooldown_ms,
        paused_ms,
        limited_in_ms,
    )


@pytest.mark.parametrize(
    ("kind", "gate"),
    [("cooling", {"cooldown_ms": 10 * 60_000}), ("paused", {"paused_ms": HOUR_MS})],
)
async def test_a_cell_its_account_held_past_the_deadline_names_the_account(
    ledger_pool: asyncpg.Pool, kind: str, gate: dict[str, int]
) -> None:
    # The account's gate refused every request (a rate limit's cooldown, a pause after
    # "Your access is currently restricted.") past the job's deadline: the cell read only
    # "ran past its deadline … a narrower query". The finish finds the account's gate
    # through the job's stored source queues and names it as it names a route.
    job_id, account, key = await _account_job(ledger_pool)
    await _account_gate(ledger_pool, key, **gate)
    stored = await ledger_pool.fetchrow("SELECT cooldown_until, paused_until FROM source_gates WHERE gate = $1", key)
    finished = await _finished(ledger_pool, job_id)
    cell = finished.record.cells[0]
    assert (cell.state, cell.reason) == (CellState.FAILED, "execution_timeout")  # the code is unchanged
    held = cell.held_by
    assert held is not None and (held.owner, held.name, held.kind) == ("account", account, kind), held
    assert held.until == (stored["cooldown_until"] if kind == "cooling" else stored["paused_until"])
    error = project_job(finished.record)["error"]
    assert error["detail"]["held_by"] == held.model_dump()
    assert finished.outcome is not None
    target = finished.outcome["cells"]["targets"][0]
    assert target["held_by"] == held.model_dump()
    for text in (cell.reason_message or "", error["message"], finished.outcome["user_message"]["en"]):
        assert account in text and "narrower query" not in text, text
    assert account in finished.outcome["user_message"]["zh"]


async def test_an_account_cooldown_stored_beyond_its_cap_is_named_as_the_gate_holds_it(
    ledger_pool: asyncpg.Pool,
) -> None:
    # A cooldown a week ahead (written before the ladder's cap): the gate holds the account
    # at most the cap from the next request (gates.reserve) — the report says that.
    job_id, account, key = await _account_job(ledger_pool)
    await _account_gate(ledger_pool, key, cooldown_ms=7 * 24 * HOUR_MS)
    cell = await _finish(ledger_pool, job_id, caps=HoldCaps(account_cooldown_ms={account: LADDER_CAP_MS}))
    assert cell.held_by is not None and cell.held_by.kind == "cooling"
    assert cell.held_by.until <= await _db_now(ledger_pool) + LADDER_CAP_MS


async def test_an_account_does_not_hold_a_cell_whose_work_is_stored(ledger_pool: asyncpg.Pool) -> None:
    # Guard: the work is stored, its source is done with it — the account cooling down
    # meanwhile did not hold the cell (its routes may have).
    job_id, account, key = await _account_job(ledger_pool, stored=True)
    await _account_gate(ledger_pool, key, cooldown_ms=10 * 60_000)
    cell = await _finish(ledger_pool, job_id)
    assert (cell.reason, cell.held_by) == ("execution_timeout", None)
    assert account not in (cell.reason_message or "")


async def test_an_account_rate_limited_after_the_deadline_did_not_hold_the_cell(ledger_pool: asyncpg.Pool) -> None:
    # Guard: the deadline passed a minute ago and the account met its rate limit (another
    # job's request) only now — a late finish (the reconciler's) must not name it.
    job_id, _, key = await _account_job(ledger_pool, deadline_in_ms=-60_000)
    await _account_gate(ledger_pool, key, cooldown_ms=10 * 60_000)
    cell = await _finish(ledger_pool, job_id, FinishCause.TIMED_OUT)
    assert (cell.reason, cell.held_by) == ("execution_timeout", None)


@pytest.mark.parametrize(("error_type", "held"), [("rate_limited", True), ("remote_http_error", False)])
async def test_a_source_failure_names_the_accounts_hold_only_when_it_is_the_accounts(
    ledger_pool: asyncpg.Pool, error_type: str, held: bool
) -> None:
    # Temporal took no retry of the search, due after the execution's end. Its last failure
    # the account's rate limit: the account's cooldown held the cell. The source's own
    # error (a 5xx) is the cell's reason, and the account's cooldown meanwhile is not it.
    job_id, account, key = await _account_job(ledger_pool)
    await _account_gate(ledger_pool, key, cooldown_ms=10 * 60_000)
    failure = StepFailure(step="acquire", kind=FailureKind.APPLICATION, error_type=error_type, retry_state="TIMEOUT")
    cell = await _finish(ledger_pool, job_id, FinishCause.COMPLETED, failure=failure)
    assert cell.reason == error_type
    assert (cell.held_by is not None) == held, cell.held_by
    if held:
        assert cell.held_by is not None and (cell.held_by.owner, cell.held_by.name) == ("account", account)


async def test_a_cancel_is_what_stopped_a_cell_its_account_held(ledger_pool: asyncpg.Pool) -> None:
    job_id, _, key = await _account_job(ledger_pool)
    await _account_gate(ledger_pool, key, paused_ms=HOUR_MS)
    cell = await _finish(ledger_pool, job_id, FinishCause.CANCELLED)
    assert (cell.reason, cell.held_by) == ("cancelled_by_consumer", None)


# ---- a cell whose step waited in its account's source queue behind other jobs ---------------


async def _queue_holder(
    pool: asyncpg.Pool, account: str, gate: str, *, opened_ago_ms: int = 60_000, lease_ms: int = 60_000
) -> str:
    """Another job on ``account`` (its queue ``gate``) whose ``acquire`` holds the queue: its
    step opened ``opened_ago_ms`` ago, its lease ``lease_ms`` ahead (negative: lapsed)."""
    (route,) = _routes("h")
    target = TargetSpec(target_id="demo", account=account, routes=[route])
    job_id = await ledger_job(pool, target, label="holder", source_task_queues={account: gate})
    async with pool.acquire() as conn, conn.transaction():
        await cells.start_step(
            conn, job_id, "demo", stage=CellStage.SEARCHING, attempt=1, lease_ms=60_000, owner="acquire"
        )
        await conn.execute(
            f"""UPDATE cells SET updated_at = updated_at - $2, lease_until = {DB_NOW_MS} + $3
                WHERE job_id = $1""",
            job_id,
            opened_ago_ms,
            lease_ms,
        )
    return job_id


async def _queued_job(
    pool: asyncpg.Pool, *, deadline_in_ms: int = -1000, account: str | None = None
) -> tuple[str, str, str]:
    """A one-cell job on an account of its own (``account``: a name of the test's; default
    ``acc-<6 hex>``) whose ``acquire`` never started (no step opened), its deadline
    ``deadline_in_ms`` from now; returns the job id, the account and its queue (its gate's
    key, the row present: other jobs asked the account before)."""
    account = account or f"acc-{uuid.uuid4().hex[:6]}"
    gate = f"holds-source-{account}"
    (route,) = _routes("a")
    target = TargetSpec(target_id="demo", account=account, routes=[route])
    job_id = await ledger_job(
        pool, target, label="queued", deadline_in_ms=deadline_in_ms, source_task_queues={account: gate}
    )
    await _account_gate(pool, gate)
    return job_id, account, gate


async def test_a_cell_queued_behind_another_jobs_step_past_the_deadline_names_the_busy_account(
    ledger_pool: asyncpg.Pool,
) -> None:
    # Found 2026-12-05: a job's first acquire waited in its account's source queue (one
    # source step at a time) behind another job's download, and the deadline passed: it
    # expired "retry with a longer deadline_ms or a narrower query", naming nothing.
    job_id, account, gate = await _queued_job(ledger_pool)
    await _queue_holder(ledger_pool, account, gate)
    finished = await _finished(ledger_pool, job_id, caps=HoldCaps(account_concurrency={account: 1}))
    cell = finished.record.cells[0]
    assert (cell.state, cell.reason) == (CellState.FAILED, "execution_timeout")  # the code is unchanged
    held = cell.held_by
    assert held is not None and (held.owner, held.name, held.kind) == ("account", account, "busy"), held
    assert finished.record.deadline_at is not None and held.until > finished.record.deadline_at
    error = project_job(finished.record)["error"]
    assert error["detail"]["held_by"] == held.model_dump()
    assert finished.outcome is not None
    assert finished.outcome["cells"]["targets"][0]["held_by"] == held.model_dump()
    for text in (cell.reason_message or "", error["message"], finished.outcome["user_message"]["en"]):
        assert account in text and "max_concurrency" in text and "narrower query" not in text, text
    # A kind added since 0046: where the previous release reads no structured hold.
    stored = await ledger_pool.fetchrow("SELECT held_by, held_by_added FROM cells WHERE job_id = $1", job_id)
    assert stored["held_by"] is None and _read_before_47(stored["held_by"]) is None
    assert stored["held_by_added"] is not None


@pytest.mark.parametrize(
    ("case", "concurrency"),
    [
        ("started", 1),  # the cell's own step opened once (a retry, a later pass): no queue proven
        ("a_slot_free", 2),  # two slots, one taken: the step could have started
        ("opened_after_the_deadline", 1),  # the holder took the slot after the deadline
        ("lease_lapsed", 1),  # the holder's worker stopped beating: no live step
        ("another_account", 1),  # the holder's queue is another account's
        ("concurrency_unknown", 0),  # no caps for the account (the HTTP cancel's convergence)
    ],
)
async def test_a_busy_account_is_named_only_when_other_jobs_held_every_slot(
    ledger_pool: asyncpg.Pool, case: str, concurrency: int
) -> None:
    job_id, account, gate = await _queued_job(ledger_pool)
    if case == "started":
        async with ledger_pool.acquire() as conn, conn.transaction():
            await conn.execute("UPDATE cells SET heartbeat_at = updated_at WHERE job_id = $1", job_id)
    if case == "another_account":
        other = f"acc-{uuid.uuid4().hex[:6]}"
        await _queue_holder(ledger_pool, other, f"holds-source-{other}")
    else:
        await _queue_holder(
            ledger_pool,
            account,
            gate,
            opened_ago_ms=-1000 if case == "opened_after_the_deadline" else 60_000,
            lease_ms=-1000 if case == "lease_lapsed" else 60_000,
        )
    caps = HoldCaps(account_concurrency={account: concurrency} if concurrency else {})
    cell = await _finish(ledger_pool, job_id, caps=caps)
    assert (cell.reason, cell.held_by) == ("execution_timeout", None)
    assert "narrower query" in (cell.reason_message or "")


async def test_a_cancel_is_what_stopped_a_cell_queued_behind_another_job(ledger_pool: asyncpg.Pool) -> None:
    job_id, account, gate = await _queued_job(ledger_pool)
    await _queue_holder(ledger_pool, account, gate)
    cell = await _finish(ledger_pool, job_id, FinishCause.CANCELLED, caps=HoldCaps(account_concurrency={account: 1}))
    assert (cell.reason, cell.held_by) == ("cancelled_by_consumer", None)


async def test_a_hold_naming_a_long_account_ends_the_cell_with_its_message_bounded(
    ledger_pool: asyncpg.Pool,
) -> None:
    # Found 2026-12-06: a cell held by a busy account whose name is 38 characters or more
    # (64 is a legal [sources] name; a Pixiv account's name had no bound) got a sentence of
    # over 400 characters, the width of cells.terminal_reason_message (reference: at most
    # 400): the finish's UPDATE failed (22001 string_data_right_truncation) on every
    # attempt, the workflow's and the reconciler's, and the job never ended.
    account = f"acc-{uuid.uuid4().hex[:6]}-" + "a" * 53
    assert len(account) == 64
    job_id, account, gate = await _queued_job(ledger_pool, account=account)
    await _queue_holder(ledger_pool, account, gate)
    finished = await _finished(ledger_pool, job_id, caps=HoldCaps(account_concurrency={account: 1}))
    cell = finished.record.cells[0]
    assert (cell.state, cell.reason) == (CellState.FAILED, "execution_timeout")
    assert cell.held_by is not None and (cell.held_by.name, cell.held_by.kind) == (account, "busy")
    message = cell.reason_message or ""
    assert account in message and len(message) <= 400, message
    assert finished.outcome is not None and account in finished.outcome["user_message"]["en"]

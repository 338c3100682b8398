"""What the finish says held a cell it ends (``cells.held_by``, DESIGN.md "What a job and its
cells end as"): the ledger's facts straight into :func:`curaflow.ledger.finish.finish_job`,
no workflow. The end-to-end cases (a Telegram flood wait, Discord's global limit) are in
``test_delivery_attribution.py``."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import asyncpg
import pytest
from temporalio.testing import ActivityEnvironment

from activities.deliver import DeliveryRecords
from curaflow.config.delivery import ROUTE_RATE_LIMIT_CAP_MS, DeliverySettings
from curaflow.domain.cells import CellStage, CellState
from curaflow.domain.messages import DeliverInput, RouteRef, TargetSpec
from curaflow.domain.models import Artifact, CandidateReport, CellSnapshot, Work
from curaflow.domain.reasons import TerminalReason
from curaflow.domain.verdicts import FinishCause
from curaflow.ledger import cells, deliveries, route_gates
from curaflow.ledger.finish import finish_job
from curaflow.ledger.gates import DB_NOW_MS
from curaflow.routes.base import DeliveryRequest, RouteError
from tests.support import ledger_job

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


async def _finish(pool: asyncpg.Pool, job_id: str, cause: FinishCause = FinishCause.DEADLINE) -> CellSnapshot:
    async with pool.acquire() as conn:
        finished = await finish_job(conn, job_id, cause=cause)
    assert finished is not None
    return finished.record.cells[0]


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


@pytest.mark.parametrize(("route_wide", "kind"), [(True, "cooling"), (False, "rate_limited")])
async def test_a_rate_limit_is_named_as_the_receiver_stated_it(
    ledger_pool: asyncpg.Pool, route_wide: bool, kind: str
) -> None:
    # A route-wide limit (Discord's global one) cools the whole route down: the report says
    # "cooling". The intent's own time, written a moment after the cooldown on the
    # database's clock, ended a millisecond later and named it "this send" whenever the
    # two statements were a millisecond apart (a loaded machine).
    (route,) = _routes("a")
    job_id = await _bound(ledger_pool, [route])
    key = await _claim(ledger_pool, job_id, route.name)
    work = (await ledger_pool.fetchrow("SELECT work_id FROM delivery_intents WHERE idempotency_key = $1", key))[0]
    records: Any = DeliveryRecords()
    records.deps = SimpleNamespace(
        pool=ledger_pool,
        route=lambda name: SimpleNamespace(name=name, resend_safe=False),
        settings=SimpleNamespace(delivery=DeliverySettings()),
    )
    target = TargetSpec(target_id="demo", routes=[route])
    request = DeliveryRequest(
        job_id=job_id,
        target_id="demo",
        route=route.name,
        idempotency_key=key,
        work=Work(work_id=work),
        artifact=Artifact(work_id=work),
    )
    err = RouteError(
        TerminalReason.DELIVERY_FAILED, "429", retry_after_s=1800, rate_limited=True, route_wide=route_wide
    )
    await ActivityEnvironment().run(
        records._record_error, DeliverInput(job_id=job_id, target=target, route=route), request, err, max_attempts=5
    )
    cell = await _finish(ledger_pool, job_id)
    assert cell.held_by is not None and (cell.held_by.name, cell.held_by.kind) == (route.name, kind), cell.held_by
    held_until = await ledger_pool.fetchval("SELECT held_until FROM delivery_intents WHERE idempotency_key = $1", key)
    assert (held_until is None) == route_wide

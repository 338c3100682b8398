"""Recording a send's outcome outside a worker, on the session's real PostgreSQL: a send
claimed for one work on one route (:func:`claimed_send`), the activity's recording with
the settings it reads (:func:`delivery_records`), and the activity context it runs in
(:func:`in_an_attempt`) — shared by the tests of ``activities.deliver.recording``.
"""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import asyncpg
import pytest

from activities.deliver import DeliveryRecords, recording
from curaflow.config.delivery import ROUTE_RATE_LIMIT_CAP_MS
from curaflow.domain.cells import CellStage
from curaflow.domain.messages import DeliverInput, RouteRef, TargetSpec
from curaflow.domain.models import Artifact, CandidateReport, Work
from curaflow.ledger import cells, deliveries
from curaflow.routes.base import DeliveryRequest
from tests.support import ledger_job


def telegram_route() -> RouteRef:
    """A Telegram route of a name of its own (its gate and memory the test's alone)."""
    return RouteRef(name=f"tg-{uuid.uuid4().hex[:6]}", kind="telegram")


def in_an_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    """The recording as in an activity's first attempt (its heartbeat and info), retried at once."""
    monkeypatch.setattr(recording, "RECORD_RETRY_S", (0.0,))
    monkeypatch.setattr(recording.activity, "heartbeat", lambda *details: None)
    monkeypatch.setattr(recording.activity, "info", lambda: SimpleNamespace(workflow_id="j", attempt=1))


async def claimed_send(pool: asyncpg.Pool, route: RouteRef, work_id: str) -> tuple[DeliverInput, DeliveryRequest]:
    """A job of one target (``demo``) on ``route`` whose cell holds ``work_id``, its send claimed."""
    target = TargetSpec(target_id="demo", routes=[route])
    work = Work(work_id=work_id)
    job_id = await ledger_job(pool, target, label="once")
    async with pool.acquire() as conn, conn.transaction():
        await cells.bind_work(conn, job_id, target, [work], CandidateReport())
        await cells.artifact_ready(conn, job_id, "demo", work.work_id, {"work_id": work.work_id, "files": []})
    async with pool.acquire() as conn, conn.transaction():
        cell, *_ = await cells.start_step(
            conn, job_id, "demo", stage=CellStage.DELIVERING, attempt=1, lease_ms=60_000, owner="w"
        )
        claim = await deliveries.claim_send(
            conn, job_id, "demo", route.name, rate_limit_cap_ms=ROUTE_RATE_LIMIT_CAP_MS, opened=cell
        )
    assert claim.decision == "send", claim
    inp = DeliverInput(job_id=job_id, target=target, route=route)
    request = DeliveryRequest(
        job_id=job_id,
        target_id="demo",
        route=route.name,
        idempotency_key=claim.idempotency_key or "",
        work=work,
        artifact=Artifact(work_id=work.work_id),
        attempt=claim.attempts + 1,
    )
    return inp, request


def delivery_records(pool: Any, *, streak: int = 3) -> Any:
    """The activity's recording over ``pool``, its route's pause after ``streak`` refusals."""
    records: Any = DeliveryRecords()
    delivery = SimpleNamespace(
        refusal_streak=streak,
        route_pause_ms=600_000,
        route_hold_ms=3_600_000,
        route_rate_limit_cap_ms=ROUTE_RATE_LIMIT_CAP_MS,
    )
    records.deps = SimpleNamespace(
        pool=pool,
        settings=SimpleNamespace(delivery=delivery),
        route=lambda name: SimpleNamespace(resend_safe=False),
    )
    return records

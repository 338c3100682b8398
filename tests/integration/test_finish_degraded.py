"""A value the ledger refuses never keeps a job from ending (DESIGN.md "Safe defaults at the
edges: the ledger under an activity", owner :func:`curaflow.ledger.finish.finish_job`).

Each known value is bounded where it is made (a reason's sentence, a hold's date:
``test_finish_worst_values.py``); these tests stand for the values nobody has named yet:
one is forced into the finish (a test's patch of the function that makes it) and the ledger,
the real PostgreSQL, refuses it. The job then ends once, degraded — its free text the
marker, no hold named, its status, reasons, counts and deliveries kept —, through the
workflow's ``finish`` activity and the reconciler's convergence alike; a degraded write that
fails too is a non-retryable failure naming it; an outage is never degraded.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import asyncpg
import pytest
from prometheus_client import REGISTRY
from structlog.testing import capture_logs
from temporalio.exceptions import ApplicationError

import curaflow.ledger.cells.transitions as transitions
import curaflow.ledger.finish as finish
from activities.finish import FINISH_NOT_STORABLE, FinishActivity
from curaflow.config.delivery import ROUTE_RATE_LIMIT_CAP_MS
from curaflow.domain.cells import CellStage, CellState
from curaflow.domain.holds import HoldCaps
from curaflow.domain.messages import FinishInput, RouteRef, TargetSpec
from curaflow.domain.models import CandidateReport, Work
from curaflow.domain.verdicts import FinishCause
from curaflow.ledger import cells, deliveries
from curaflow.ledger.finish import NOT_STORABLE_MESSAGE, FinishNotStorable
from curaflow.ledger.reconciler import convergence
from curaflow.protocol.models import TERMINAL_EVENT_TYPES
from tests.support import ledger_job, run_as_job

pytestmark = pytest.mark.integration

HOUR_MS = 3_600_000


def _degraded(value: str, result: str = "degraded") -> float:
    return REGISTRY.get_sample_value("curaflow_finish_degraded_total", {"value": value, "result": result}) or 0.0


async def _delivered_and_held(pool: asyncpg.Pool) -> tuple[str, str, str]:
    """A one-cell job past its deadline whose work route ``a`` delivered and route ``b``'s
    receiver holds for 2 h (a rate limit): the finish ends the cell failed, naming ``b``'s
    hold (a sentence and a date of its own). Returns the job and the two routes."""
    a, b = (RouteRef(name=f"{n}-{uuid.uuid4().hex[:6]}", kind="directory") for n in "ab")
    target = TargetSpec(target_id="demo", routes=[a, b])
    work = Work(work_id=f"w{uuid.uuid4().hex[:8]}")
    job_id = await ledger_job(pool, target, label="degraded", deadline_in_ms=-1000)
    async with pool.acquire() as conn, conn.transaction():
        await cells.bind_work(conn, job_id, target, [work], CandidateReport())
        await cells.artifact_ready(conn, job_id, "demo", work.work_id, {"work_id": work.work_id, "files": []})
    for route in (a, b):
        async with pool.acquire() as conn, conn.transaction():
            cell, *_ = await cells.start_step(
                conn, job_id, "demo", stage=CellStage.DELIVERING, attempt=1, lease_ms=60_000, owner=route.name
            )
            claim = await deliveries.claim_send(
                conn, job_id, "demo", route.name, rate_limit_cap_ms=ROUTE_RATE_LIMIT_CAP_MS, opened=cell
            )
            assert claim.idempotency_key is not None
            if route is a:
                await deliveries.record_delivered(conn, job_id, "demo", claim.idempotency_key)
            else:
                await deliveries.record_failed(
                    conn, job_id, "demo", claim.idempotency_key, reason="rate_limited", error="429", permanent=False
                )
                await deliveries.hold_intent(conn, claim.idempotency_key, 2 * HOUR_MS)
    await pool.execute("UPDATE cells SET lease_until = NULL WHERE job_id = $1", job_id)
    return job_id, a.name, b.name


def _nul_in_message(monkeypatch: pytest.MonkeyPatch) -> str:
    said = finish.cell_message
    monkeypatch.setattr(finish, "cell_message", lambda *a, **k: said(*a, **k) + "\x00")  # PostgreSQL: 22021
    return "cell"


def _message_past_its_column(monkeypatch: pytest.MonkeyPatch) -> str:
    said = finish.cell_message
    monkeypatch.setattr(finish, "cell_message", lambda *a, **k: said(*a, **k) + " " + "x" * 420)
    monkeypatch.setattr(transitions, "bounded_reason_message", lambda m: m)  # the bound forgotten: 22001
    return "cell"


def _lone_surrogate_in_message(monkeypatch: pytest.MonkeyPatch) -> str:
    said = finish.cell_message
    monkeypatch.setattr(finish, "cell_message", lambda *a, **k: said(*a, **k) + "\ud800")  # not UTF-8
    return "cell"


def _date_past_any_calendar(monkeypatch: pytest.MonkeyPatch) -> str:
    def overflow(*_: Any, **__: Any) -> None:
        raise OverflowError("date value out of range")  # as hold_sentence's datetime.fromtimestamp did

    monkeypatch.setattr(finish, "held_by", overflow)
    return "hold"


def _nul_in_outcome(monkeypatch: pytest.MonkeyPatch) -> str:
    built = finish.build_outcome_record

    def with_nul(**kwargs: Any) -> dict[str, Any]:
        record = built(**kwargs)
        record["user_message"] = {k: v + "\x00" for k, v in record["user_message"].items()}  # jsonb: 22P05
        return record

    monkeypatch.setattr(finish, "build_outcome_record", with_nul)
    return "outcome"


INJECTIONS: dict[str, Callable[[pytest.MonkeyPatch], str]] = {
    "nul-in-message": _nul_in_message,
    "message-past-its-column": _message_past_its_column,
    "lone-surrogate-in-message": _lone_surrogate_in_message,
    "date-past-any-calendar": _date_past_any_calendar,
    "nul-in-outcome": _nul_in_outcome,
}


async def _by_workflow(pool: asyncpg.Pool, job_id: str) -> None:
    activity = FinishActivity(SimpleNamespace(pool=pool, client=None))  # type: ignore[arg-type]
    activity._caps = HoldCaps()
    await run_as_job(activity.finish, FinishInput(job_id=job_id, cause=FinishCause.DEADLINE))


async def _by_reconciler(pool: asyncpg.Pool, job_id: str) -> None:
    await convergence.converge(pool, job_id, FinishCause.DEADLINE)


CALLERS = {"workflow": _by_workflow, "reconciler": _by_reconciler}


@pytest.mark.parametrize("caller", list(CALLERS))
@pytest.mark.parametrize("injected", list(INJECTIONS))
async def test_a_value_the_ledger_refuses_ends_the_job_degraded_once_with_its_deliveries(
    ledger_pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch, injected: str, caller: str
) -> None:
    whole_id, _, _ = await _delivered_and_held(ledger_pool)
    await CALLERS[caller](ledger_pool, whole_id)  # the same job, no value refused: the truth to keep
    whole = await ledger_pool.fetchrow(
        """SELECT j.business_status, c.state, c.terminal_reason_code, c.held_by, o.record FROM jobs j
           JOIN cells c USING (job_id) JOIN outcomes o USING (job_id) WHERE job_id = $1""",
        whole_id,
    )
    assert whole["held_by"] is not None  # the whole finish names route b's hold: a date of its own
    job_id, delivered, holding = await _delivered_and_held(ledger_pool)
    value = INJECTIONS[injected](monkeypatch)
    before = _degraded(value)
    with capture_logs() as logs:
        for _ in range(2):  # the repeat finds the job ended: nothing more written, nothing counted
            await CALLERS[caller](ledger_pool, job_id)

    job = await ledger_pool.fetchrow("SELECT completed_at, business_status FROM jobs WHERE job_id = $1", job_id)
    assert job["completed_at"] is not None, "the job never ended"
    assert job["business_status"] == whole["business_status"]  # the truth stays
    cell = await ledger_pool.fetchrow(
        """SELECT state, terminal_reason_code, terminal_reason_message, held_by, held_by_added
           FROM cells WHERE job_id = $1""",
        job_id,
    )
    assert (cell["state"], cell["terminal_reason_code"]) == (whole["state"], whole["terminal_reason_code"])
    assert cell["state"] == CellState.FAILED.value
    assert cell["terminal_reason_message"] == NOT_STORABLE_MESSAGE
    assert (cell["held_by"], cell["held_by_added"]) == (None, None)  # no derived date
    intents = {
        r["route"]: (r["status"], r["delivered_at"] is not None)
        for r in await ledger_pool.fetch(
            "SELECT route, status, delivered_at FROM delivery_intents WHERE job_id = $1", job_id
        )
    }
    assert intents[delivered] == ("delivered", True) and intents[holding][0] == "released"
    outcomes = await ledger_pool.fetch("SELECT record FROM outcomes WHERE job_id = $1", job_id)
    assert len(outcomes) == 1
    record = outcomes[0]["record"]
    assert record["user_message"] == {"zh": NOT_STORABLE_MESSAGE, "en": NOT_STORABLE_MESSAGE}
    assert [d["route"] for d in record["deliveries"] if d["status"] == "delivered"] == [delivered]
    kept = ("status", "business_status", "alertable")
    assert {k: record[k] for k in kept} == {k: whole["record"][k] for k in kept}
    assert [d["status"] for d in record["deliveries"]] == [d["status"] for d in whole["record"]["deliveries"]]
    counts = {k: v for k, v in record["cells"].items() if k != "targets"}
    assert counts == {k: v for k, v in whole["record"]["cells"].items() if k != "targets"}
    ended = await ledger_pool.fetchval(
        "SELECT count(*) FROM job_events WHERE job_id = $1 AND type = ANY($2::text[])",
        job_id,
        list(TERMINAL_EVENT_TYPES.values()),
    )
    assert ended == 1
    assert _degraded(value) == before + 1
    lines = [e for e in logs if e["event"] == "finish.degraded"]
    assert len(lines) == 1 and lines[0]["log_level"] == "error"
    assert (lines[0]["job_id"], lines[0]["value"]) == (job_id, value) and lines[0]["sqlstate"], lines[0]


async def test_a_value_still_refused_when_degraded_is_a_non_retryable_failure_naming_it(
    ledger_pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id, _, _ = await _delivered_and_held(ledger_pool)

    def refused(*_: Any, **__: Any) -> dict[str, Any]:
        raise ValueError("a value no form of the finish can store")

    monkeypatch.setattr(finish, "project_job", refused)  # the terminal event's body, degraded or not
    before = _degraded("event", "not_stored")
    with pytest.raises(FinishNotStorable) as raised:
        async with ledger_pool.acquire() as conn:
            await finish.finish_job(conn, job_id, cause=FinishCause.DEADLINE)
    assert (raised.value.job_id, raised.value.value) == (job_id, "event")
    with pytest.raises(ApplicationError) as failed:
        await _by_workflow(ledger_pool, job_id)
    assert failed.value.type == FINISH_NOT_STORABLE and failed.value.non_retryable
    assert "event" in str(failed.value) and job_id in str(failed.value)
    # The reconciler leaves it after one try in its process: no endless retry, no tick failed.
    assert await convergence.converge(ledger_pool, job_id, FinishCause.DEADLINE) is None
    assert await convergence.converge(ledger_pool, job_id, FinishCause.DEADLINE) is None
    assert _degraded("event", "not_stored") == before + 3
    job = await ledger_pool.fetchrow("SELECT completed_at FROM jobs WHERE job_id = $1", job_id)
    assert job["completed_at"] is None  # nothing written: the stuck job's alert and an operator's
    monkeypatch.undo()
    convergence.NOT_STORED.discard(job_id)  # the conftest closes it


@pytest.mark.parametrize(
    ("note", "sqlstate"),
    [
        ("\x00", "22P05"),  # PostgreSQL refuses it binding the parameter
        ("\ud800", "22000"),  # a lone surrogate: asyncpg cannot encode it, nothing is sent
    ],
    ids=["nul-refused-by-postgresql", "lone-surrogate-refused-client-side"],
)
async def test_a_terminal_event_the_ledger_refuses_is_named_the_event_not_the_outcome(
    ledger_pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch, note: str, sqlstate: str
) -> None:
    # The outcome record and the terminal event are written by one statement
    # (curaflow_finish_job): a value refused in the event's body is still named the event,
    # whether PostgreSQL refused it or asyncpg could not encode it.
    job_id, _, _ = await _delivered_and_held(ledger_pool)
    projected = finish.project_job

    def with_refused(record: Any) -> dict[str, Any]:
        body = projected(record)
        body["labels"] = {"note": note}  # in the event's body only
        return body

    monkeypatch.setattr(finish, "project_job", with_refused)
    before = _degraded("event", "not_stored")
    with pytest.raises(FinishNotStorable) as raised:
        async with ledger_pool.acquire() as conn:
            await finish.finish_job(conn, job_id, cause=FinishCause.DEADLINE)
    assert (raised.value.job_id, raised.value.value, raised.value.sqlstate) == (job_id, "event", sqlstate)
    assert _degraded("event", "not_stored") == before + 1
    outcome = await ledger_pool.fetchval("SELECT count(*) FROM outcomes WHERE job_id = $1", job_id)
    assert outcome == 0  # nothing written
    monkeypatch.undo()


@pytest.mark.parametrize(
    "outage",
    [
        asyncpg.exceptions.ConnectionFailureError("connection failure"),
        asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator command"),
        asyncpg.exceptions.TooManyConnectionsError("sorry, too many clients already"),
    ],
    ids=["08006", "57P01", "53300"],
)
async def test_an_outage_at_the_finish_is_never_degraded(
    ledger_pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch, outage: Exception
) -> None:
    job_id, _, _ = await _delivered_and_held(ledger_pool)

    async def away(*_: Any, **__: Any) -> None:
        raise outage

    state = await ledger_pool.fetchval("SELECT state FROM cells WHERE job_id = $1", job_id)
    monkeypatch.setattr(finish, "finish_cell", away)
    counted = sum(_degraded(v, r) for v in finish.FINISH_VALUES for r in ("degraded", "not_stored"))
    with capture_logs() as logs:
        for _ in range(2):  # every attempt: the outage as it is, for Temporal to retry
            with pytest.raises(type(outage)):
                await _by_workflow(ledger_pool, job_id)
    assert not [e for e in logs if e["event"].startswith("finish.")]
    assert sum(_degraded(v, r) for v in finish.FINISH_VALUES for r in ("degraded", "not_stored")) == counted
    cell = await ledger_pool.fetchrow("SELECT state, terminal_reason_message FROM cells WHERE job_id = $1", job_id)
    assert (cell["state"], cell["terminal_reason_message"]) == (state, None)  # nothing written
    monkeypatch.undo()  # the ledger is back: the finish ends it whole
    await _by_workflow(ledger_pool, job_id)
    held = await ledger_pool.fetchrow("SELECT terminal_reason_message, held_by FROM cells WHERE job_id = $1", job_id)
    assert held["held_by"] is not None and held["terminal_reason_message"] != NOT_STORABLE_MESSAGE

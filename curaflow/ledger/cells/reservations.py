"""Reserving a work on every route of a target, all or none (DESIGN.md decision 6): the
delivery intents' keys and the reservation statement."""

from __future__ import annotations

from typing import Any

import asyncpg

from curaflow.domain.messages import RouteRef
from curaflow.domain.models import Work
from curaflow.ledger.cells.barriers import lock_job_and_cell_sql
from curaflow.ledger.db import now_ms

#: The intent states that hold a work on a route: a reservation no other job may take.
LIVE_INTENT_STATES = ("reserved", "sending", "delivered", "duplicate", "unknown")
#: Of :data:`LIVE_INTENT_STATES`, those not final: the work is held by an open job that
#: may still release it (a failed send, a passed deadline, a cancellation). A scan tells
#: such a work ``in_flight``, never the lasting ``duplicate``
#: (:func:`curaflow.ledger.remembered.known_works`).
IN_FLIGHT_INTENT_STATES = ("reserved", "sending")


def intent_key(route: str, work_type: str, work_id: str, job_id: str, target_id: str) -> str:
    """The stable delivery idempotency key (DESIGN.md decision 6)."""
    return f"curaflow:{route}:{work_type}:{work_id}:{job_id}:{target_id}"


_RESERVE = "curaflow_reserve_work($1::text[], $2::text[], $3::text[], $4, $5, $6, $7, $8)"
#: The job row locked, the cell locked and read, and — only while the cell is bindable
#: (open, no work) — the first candidate's reservation, in one statement
#: (:func:`~curaflow.ledger.cells.barriers.lock_job_and_cell_sql`): the parameters of
#: :func:`reserve_args`, then the terminal states' names (``$9``). The reservation reads
#: the intents in the function's own statements, after both locks.
LOCK_JOB_CELL_AND_RESERVE = lock_job_and_cell_sql(
    "$6", "$7", f"CASE WHEN c.work_id IS NULL AND NOT (c.state = ANY($9::text[])) THEN {_RESERVE} END"
)


def reserve_args(job_id: str, target_id: str, work: Work, routes: list[RouteRef]) -> list[Any]:
    routes = list({r.name: r for r in routes}.values())
    return [
        [intent_key(r.name, work.work_type, work.work_id, job_id, target_id) for r in routes],
        [r.name for r in routes],
        [r.kind for r in routes],
        work.work_type,
        work.work_id,
        job_id,
        target_id,
        now_ms(),
    ]


async def reserve(conn: asyncpg.Connection, job_id: str, target_id: str, work: Work, routes: list[RouteRef]) -> bool:
    """Reserve ``work`` on every route, all or none; False if any route holds it live.

    One statement: the function ``curaflow_reserve_work`` (migration 0031) inserts the
    intents and turns a unique violation into False, rolling back its own inserts. A route
    named twice counts once (one ``INSERT … ON CONFLICT`` cannot touch a key twice).
    """
    return bool(await conn.fetchval(f"SELECT {_RESERVE}", *reserve_args(job_id, target_id, work, routes)))

"""Seeding a target's delivery history straight into the ledger (the ``history`` scenario and its tests).

A long-lived target is one whose routes already received many works. Rather than run
thousands of jobs, :func:`seed_deliveries` writes what they would have left: one finished
job row and one ``delivered`` intent per (route, work), as the ``deliver`` activity
records them (idempotency key ``curaflow:<route>:<work_type>:<work_id>:<job_id>:<target_id>``).
"""

from __future__ import annotations

import asyncpg

from curaflow.ledger.db import now_ms


async def seed_deliveries(
    pool: asyncpg.Pool,
    *,
    target_id: str,
    routes: dict[str, str],
    work_ids: list[str],
    work_type: str = "illustration",
    job_id: str = "history-seed",
) -> None:
    """Record ``work_ids`` as delivered to every route of ``routes`` (name → kind) by one finished job.

    Raises:
        asyncpg.UniqueViolationError: a work is already live on one of the routes.
    """
    now = now_ms()
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            """INSERT INTO jobs (job_id, job_type, plan_id, trigger, target_ids, workflow_input,
                                 business_status, created_at, updated_at, completed_at)
               VALUES ($1, 'candidate_search', 'history', 'seed', ARRAY[$2], '{}'::jsonb,
                       'success', $3, $3, $3)
               ON CONFLICT (job_id) DO NOTHING""",
            job_id,
            target_id,
            now,
        )
        for route, kind in routes.items():
            await conn.execute(
                """INSERT INTO delivery_intents (idempotency_key, route, route_kind, work_type, work_id, job_id,
                                                 target_id, status, created_at, updated_at, delivered_at)
                   SELECT 'curaflow:' || $1 || ':' || $3 || ':' || w || ':' || $5 || ':' || $6,
                          $1, $2, $3, w, $5, $6, 'delivered', $7, $7, $7
                   FROM unnest($4::text[]) AS w""",
                route,
                kind,
                work_type,
                work_ids,
                job_id,
                target_id,
                now,
            )

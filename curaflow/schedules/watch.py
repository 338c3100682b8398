"""Missed and skipped occurrences: Temporal's counters → one log line and metric per miss.

:func:`watch_tick` turns Temporal's per-schedule counters of missed (outside the catch-up
window) and overlap-skipped occurrences into a ``schedule.occurrence_missed`` log line
and the ``curaflow_schedule_occurrences_missed_total`` metric, once per miss across all
processes (counters stored in the ledger, under an advisory lock).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import asyncpg
from temporalio.client import Client

from curaflow import metrics
from curaflow.config import Settings
from curaflow.domain.occurrence import CATCHUP_WINDOW_S
from curaflow.ledger.db import now_ms, session_lock
from curaflow.logs import get_logger
from curaflow.schedules.sync import describe_schedule
from curaflow.supervision import Supervisor

WATCH_LOCK_KEY = 0x6375726177617463  # "curawatc"
log = get_logger("curaflow.schedules")


@dataclass
class Missed:
    """Occurrences newly found missed on one schedule in one watch tick."""

    schedule_id: str
    missed_catchup: int
    skipped_overlap: int


async def watch_tick(pool: asyncpg.Pool, client: Client, settings: Settings) -> list[Missed]:
    """Compare Temporal's missed/skipped counters with the ledger's and report the increase.

    Runs in every worker at the reconcile interval; one process at a time does the work
    (advisory lock), and the ledger remembers the last counters, so each miss is logged
    and counted exactly once (a restart does not repeat them).

    Returns:
        The schedules with new misses (empty when another process holds the lock).
    """
    found: list[Missed] = []
    async with session_lock(pool, WATCH_LOCK_KEY) as conn:
        if conn is None:
            return found
        for plan in settings.schedules:
            desc = await describe_schedule(client, plan.id)
            if desc is None:
                continue
            missed = desc.info.num_actions_missed_catchup_window
            skipped = desc.info.num_actions_skipped_overlap
            row = await conn.fetchrow(
                "SELECT missed_catchup, skipped_overlap FROM schedule_watch WHERE schedule_id = $1", plan.id
            )
            await conn.execute(
                """INSERT INTO schedule_watch (schedule_id, missed_catchup, skipped_overlap, updated_at)
                   VALUES ($1, $2, $3, $4)
                   ON CONFLICT (schedule_id) DO UPDATE SET missed_catchup = EXCLUDED.missed_catchup,
                       skipped_overlap = EXCLUDED.skipped_overlap, updated_at = EXCLUDED.updated_at""",
                plan.id,
                missed,
                skipped,
                now_ms(),
            )
            # A recreated schedule restarts its counters at zero: count from there.
            before_missed = row["missed_catchup"] if row and row["missed_catchup"] <= missed else 0
            before_skipped = row["skipped_overlap"] if row and row["skipped_overlap"] <= skipped else 0
            new = Missed(plan.id, missed - before_missed, skipped - before_skipped)
            if new.missed_catchup or new.skipped_overlap:
                found.append(new)
                metrics.record_missed(plan.id, "missed_catchup_window", new.missed_catchup)
                metrics.record_missed(plan.id, "skipped_overlap", new.skipped_overlap)
                log.warning(
                    "schedule.occurrence_missed",
                    schedule_id=plan.id,
                    missed_catchup_window=new.missed_catchup,
                    skipped_overlap=new.skipped_overlap,
                    catchup_window_s=CATCHUP_WINDOW_S,
                    total_missed_catchup_window=missed,
                    total_skipped_overlap=skipped,
                )
    return found


async def watch_forever(
    pool: asyncpg.Pool,
    client: Client,
    settings: Settings,
    interval_s: float,
    stop: asyncio.Event,
    *,
    supervisor: Supervisor | None = None,
) -> None:
    """Run :func:`watch_tick` every ``interval_s`` seconds until ``stop``; nothing without plans.

    A supervised loop named ``schedule_watcher`` (:mod:`curaflow.supervision`): any
    failure is logged, counted and retried with backoff; one that does not recover
    fails the process through ``supervisor`` (None: a private supervisor that only logs).
    """
    if not settings.schedules:
        return
    sup = supervisor or Supervisor(stop)
    await sup.run_every("schedule_watcher", interval_s, lambda: watch_tick(pool, client, settings))

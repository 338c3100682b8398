"""The operator verbs on recurring plans: ``curaflow schedules list|trigger|pause|unpause``.

The acting verbs (``trigger``, ``pause``, ``unpause``) act only on a plan curaflow manages
on the configured task queue (:func:`curaflow.schedules.sync.managed_schedule`, the rule
``sync`` keeps to): never on another application's schedule in the namespace, nor on
another stack's plan.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime

import asyncpg
from temporalio.client import Client

from curaflow.config import Settings
from curaflow.domain.occurrence import legacy_occurrence_job_id, occurrence_job_id, occurrence_minute_ms
from curaflow.ledger.jobs import occurrence_of
from curaflow.schedules.sync import (
    ScheduleError,
    current_input,
    describe_schedule,
    managed_schedule,
    owned_schedule_ids,
)


@dataclass
class ScheduleView:
    """What ``curaflow schedules list`` shows of one schedule (times UTC)."""

    schedule_id: str
    cron: list[str]
    timezone: str
    target_ids: list[str]
    paused: bool
    note: str
    next_runs: list[datetime]
    recent: list[tuple[datetime, str]]
    actions: int
    missed_catchup: int
    skipped_overlap: int
    configured: bool


async def describe_schedules(client: Client, settings: Settings) -> list[ScheduleView]:
    """Every configured or owned schedule, described."""
    ids = [p.id for p in settings.schedules]
    for sid in await owned_schedule_ids(client, settings.temporal.task_queue):
        if sid not in ids:
            ids.append(sid)
    views: list[ScheduleView] = []
    for sid in ids:
        desc = await describe_schedule(client, sid)
        if desc is None:
            continue
        inp = await current_input(client, desc)
        info = desc.info
        views.append(
            ScheduleView(
                schedule_id=sid,
                cron=inp.cron if inp else [],
                timezone=inp.timezone if inp else "",
                target_ids=inp.target_ids if inp else [],
                paused=desc.schedule.state.paused,
                note=desc.schedule.state.note or "",
                next_runs=list(info.next_action_times[:3]),
                recent=[(a.scheduled_at, getattr(a.action, "workflow_id", "")) for a in info.recent_actions[-3:]],
                actions=info.num_actions,
                missed_catchup=info.num_actions_missed_catchup_window,
                skipped_overlap=info.num_actions_skipped_overlap,
                configured=any(p.id == sid for p in settings.schedules),
            )
        )
    return views


@dataclass
class Triggered:
    """The occurrence a trigger started: its nominal time and its job id."""

    scheduled_at: datetime
    job_id: str


async def trigger(
    client: Client, schedule_id: str, *, task_queue: str, wait_s: float = 10.0, pool: asyncpg.Pool | None = None
) -> Triggered | None:
    """Start an occurrence now and tell which job it is.

    The occurrence's nominal time is read from the action Temporal records for the
    trigger. Its job is the one the admission joins or creates: with ``pool``, the job the
    ledger already holds for that minute of the plan
    (:func:`~curaflow.ledger.jobs.occurrence_of`, the admission's own lookup: a job
    admitted under the plan's zone before a change of it, or under the legacy id);
    else, and when there is none yet, the id the admission writes — the nominal time in
    the plan's zone (:func:`~curaflow.domain.occurrence.occurrence_job_id`). Until
    2026-12-07 it was always the latter, not the job's when the occurrence joined one.

    Args:
        task_queue: curaflow's main task queue (``temporal.task_queue``): the plan must be
            curaflow's there (:func:`~curaflow.schedules.sync.managed_schedule`).
        wait_s: how long to wait for Temporal to record the action.
        pool: the ledger, to name the job the occurrence joins.

    Returns:
        The occurrence, or None when Temporal recorded no new action in time (the
        overlap policy skipped it because the previous occurrence still runs).

    Raises:
        ScheduleError: unknown schedule, one that is not curaflow's on ``task_queue``
            (another application's, another stack's plan), or curaflow's whose action is no
            plan (edited by hand): nothing is triggered. Until 2026-12-07 the action was
            started and a job id printed in UTC, a job that never exists (the trampoline
            refuses the input, admitting nothing).
    """
    desc, inp = await managed_schedule(client, schedule_id, task_queue)
    handle = client.get_schedule_handle(schedule_id)
    seen = {(a.scheduled_at, getattr(a.action, "workflow_id", "")) for a in desc.info.recent_actions}
    skipped = desc.info.num_actions_skipped_overlap
    if inp is None:
        raise ScheduleError(
            f"schedule {schedule_id!r}: its action is no curaflow plan (edited by hand, or not curaflow's), "
            "so an occurrence would admit no job; nothing triggered (`curaflow schedules sync` restores a "
            "configured plan's action)"
        )
    timezone = inp.timezone
    await handle.trigger()
    deadline = asyncio.get_running_loop().time() + wait_s
    while asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.2)
        desc = await handle.describe()
        new = [
            a for a in desc.info.recent_actions if (a.scheduled_at, getattr(a.action, "workflow_id", "")) not in seen
        ]
        if new:
            at = new[-1].scheduled_at
            return Triggered(scheduled_at=at, job_id=await _occurrence_job_id(pool, schedule_id, at, timezone))
        if desc.info.num_actions_skipped_overlap > skipped:
            return None
    return None


async def _occurrence_job_id(pool: asyncpg.Pool | None, schedule_id: str, at: datetime, timezone: str) -> str:
    """The id of the job the occurrence at ``at`` is (:func:`trigger`)."""
    job_id = occurrence_job_id(schedule_id, at, timezone)[0]
    if pool is None:
        return job_id
    legacy_id = legacy_occurrence_job_id(schedule_id, at, timezone)
    ids = [job_id] if legacy_id is None else [job_id, legacy_id]
    minute = occurrence_minute_ms(int(at.timestamp() * 1000))
    async with pool.acquire() as conn:
        return await occurrence_of(conn, schedule_id, minute, ids) or job_id


async def pause(
    client: Client, schedule_id: str, note: str = "paused by curaflow schedules pause", *, task_queue: str
) -> None:
    """Pause a plan curaflow manages on ``task_queue`` (``sync`` restores the configured state).

    Raises:
        ScheduleError: unknown schedule, or one that is not curaflow's on ``task_queue``
            (:func:`~curaflow.schedules.sync.managed_schedule`): nothing is paused.
    """
    await managed_schedule(client, schedule_id, task_queue)
    await client.get_schedule_handle(schedule_id).pause(note=note)


async def unpause(
    client: Client, schedule_id: str, note: str = "unpaused by curaflow schedules unpause", *, task_queue: str
) -> None:
    """Unpause a plan curaflow manages on ``task_queue``.

    Raises:
        ScheduleError: unknown schedule, or one that is not curaflow's on ``task_queue``
            (:func:`~curaflow.schedules.sync.managed_schedule`): nothing is unpaused.
    """
    await managed_schedule(client, schedule_id, task_queue)
    await client.get_schedule_handle(schedule_id).unpause(note=note)

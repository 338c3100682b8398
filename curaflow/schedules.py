"""Recurring plans on Temporal Schedules: sync with the configuration, admit occurrences, watch misses.

A plan (``[[schedules]]``: id, cron list, time zone, target ids, jitter, paused) is one
Temporal Schedule with the same id whose action starts ``ScheduledJobWorkflow`` (the
trampoline, :mod:`workflows.scheduled`) on the main task queue with an
:class:`~curaflow.domain.occurrence.OccurrenceInput`. Policies: overlap ``SKIP``, a
catch-up window of 90 minutes, no back-fill beyond it (``sync`` never back-fills).

* :func:`sync_schedules` creates, updates and deletes schedules to match the
  configuration (idempotent) and returns the diff. Only schedules curaflow owns on this
  task queue are considered (memo ``curaflow_task_queue``), so plans of other
  applications or stacks sharing the namespace are never touched.
* :func:`admit_occurrence` is the ledger side of an occurrence (called by the
  ``admit_occurrence`` activity).
* :func:`watch_tick` turns Temporal's per-schedule counters of missed (outside the
  catch-up window) and overlap-skipped occurrences into a ``schedule.occurrence_missed``
  log line and the ``curaflow_schedule_occurrences_missed_total`` metric, once per miss
  across all processes (counters stored in the ledger, under an advisory lock).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleDescription,
    ScheduleHandle,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode

from curaflow import metrics
from curaflow.config import ScheduleConfig, Settings, TargetConfig
from curaflow.domain.execution import SCHEDULED_WORKFLOW
from curaflow.domain.messages import JobInput, TargetSpec
from curaflow.domain.occurrence import (
    CATCHUP_WINDOW_S,
    AdmitOccurrenceInput,
    OccurrenceAdmission,
    OccurrenceInput,
    occurrence_job_id,
)
from curaflow.domain.presentation import SCHEDULE_ID
from curaflow.ledger.db import now_ms
from curaflow.ledger.jobs import NewJob, insert_job, mark_workflow_started, workflow_input
from curaflow.logs import get_logger
from curaflow.supervision import Supervisor

MEMO_TASK_QUEUE = "curaflow_task_queue"
WATCH_LOCK_KEY = 0x6375726177617463  # "curawatc"
log = get_logger("curaflow.schedules")


class ScheduleError(Exception):
    """A schedule operation failed (unknown schedule, server refused); ``str()`` is readable."""


# ---- configuration → Temporal ---------------------------------------------------------


def occurrence_input(settings: Settings, plan: ScheduleConfig) -> OccurrenceInput:
    """The trampoline argument (and sync fingerprint) of a configured plan."""
    return OccurrenceInput(
        schedule_id=plan.id,
        cron=list(plan.cron),
        timezone=plan.timezone,
        target_ids=list(plan.target_ids),
        jitter_ms=plan.jitter_ms,
        task_queue=settings.temporal.task_queue,
    )


def build_schedule(settings: Settings, plan: ScheduleConfig) -> Schedule:
    """The Temporal :class:`Schedule` of a configured plan (overlap SKIP, 90 min catch-up)."""
    inp = occurrence_input(settings, plan)
    return Schedule(
        action=ScheduleActionStartWorkflow(
            SCHEDULED_WORKFLOW,
            args=[inp],
            id=f"{plan.id}@occurrence",
            task_queue=settings.temporal.task_queue,
            typed_search_attributes=TypedSearchAttributes([SearchAttributePair(SCHEDULE_ID, plan.id)]),
            static_summary=f"occurrence of plan {plan.id} ({', '.join(plan.cron)} {plan.timezone})",
        ),
        spec=ScheduleSpec(
            cron_expressions=list(plan.cron),
            time_zone_name=plan.timezone,
            jitter=timedelta(milliseconds=plan.jitter_ms) if plan.jitter_ms else None,
        ),
        policy=SchedulePolicy(
            overlap=ScheduleOverlapPolicy.SKIP,
            catchup_window=timedelta(seconds=CATCHUP_WINDOW_S),
            pause_on_failure=False,
        ),
        state=ScheduleState(paused=plan.paused, note="paused in the configuration" if plan.paused else ""),
    )


@dataclass
class Change:
    """One line of the sync diff.

    Attributes:
        action: ``create`` | ``update`` | ``delete`` | ``unchanged``.
        changes: for ``update``: field → ``(current, desired)``.
    """

    schedule_id: str
    action: str
    changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    def render(self) -> str:
        """``+ id``, ``- id``, ``~ id: field a → b; …`` or ``= id``."""
        mark = {"create": "+", "delete": "-", "update": "~", "unchanged": "="}[self.action]
        text = f"{mark} {self.schedule_id}"
        if self.changes:
            text += ": " + "; ".join(f"{k} {a!r} → {b!r}" for k, (a, b) in self.changes.items())
        return text


async def _current_input(client: Client, desc: ScheduleDescription) -> OccurrenceInput | None:
    action = desc.schedule.action
    if not isinstance(action, ScheduleActionStartWorkflow) or action.workflow != SCHEDULED_WORKFLOW or not action.args:
        return None
    raw = action.args[0]
    try:
        if isinstance(raw, OccurrenceInput):
            return raw
        if isinstance(raw, dict):
            return OccurrenceInput.model_validate(raw)
        values = await client.data_converter.decode([raw])  # type: ignore[list-item]
        return OccurrenceInput.model_validate(values[0])
    except (ValueError, TypeError):
        return None


def _diff(
    current: OccurrenceInput | None, paused: bool, desired: OccurrenceInput, plan: ScheduleConfig
) -> dict[str, Any]:
    changes: dict[str, tuple[Any, Any]] = {}
    cur = current.model_dump() if current else {}
    for key, value in desired.model_dump().items():
        if cur.get(key) != value:
            changes[key] = (cur.get(key), value)
    if paused != plan.paused:
        changes["paused"] = (paused, plan.paused)
    return changes


async def owned_schedule_ids(client: Client, task_queue: str) -> list[str]:
    """Ids of the schedules curaflow created for ``task_queue`` (from the visibility store)."""
    ids: list[str] = []
    async for entry in await client.list_schedules():
        with contextlib.suppress(Exception):
            memo = await entry.memo()
            if memo.get(MEMO_TASK_QUEUE) == task_queue:
                ids.append(entry.id)
    return sorted(ids)


async def _describe(client: Client, schedule_id: str) -> ScheduleDescription | None:
    try:
        return await client.get_schedule_handle(schedule_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


async def sync_schedules(client: Client, settings: Settings, *, dry_run: bool = False) -> list[Change]:
    """Make Temporal's schedules match ``settings.schedules`` (idempotent).

    Args:
        client: Temporal client of the configured namespace.
        settings: the configuration.
        dry_run: compute the diff only.

    Returns:
        One :class:`Change` per configured plan (in config order), then one ``delete``
        per owned schedule no longer configured.

    Raises:
        ScheduleError: a schedule belongs to another task queue or application, or the
            server refused a change.
    """
    tq = settings.temporal.task_queue
    out: list[Change] = []
    configured = {p.id for p in settings.schedules}
    for plan in settings.schedules:
        desired = occurrence_input(settings, plan)
        desc = await _describe(client, plan.id)
        if desc is None:
            out.append(Change(plan.id, "create"))
            if not dry_run:
                try:
                    await client.create_schedule(
                        plan.id,
                        build_schedule(settings, plan),
                        memo={MEMO_TASK_QUEUE: tq},
                        search_attributes=TypedSearchAttributes([SearchAttributePair(SCHEDULE_ID, plan.id)]),
                    )
                except Exception as err:
                    raise ScheduleError(f"cannot create schedule {plan.id!r}: {err}") from err
                log.info("schedule.created", schedule_id=plan.id, cron=plan.cron, timezone=plan.timezone)
            continue
        current = await _current_input(client, desc)
        if current is None or current.task_queue != tq:
            raise ScheduleError(
                f"schedule {plan.id!r} exists but is not a curaflow plan on task queue {tq!r}; "
                "rename the plan or delete that schedule"
            )
        changes = _diff(current, desc.schedule.state.paused, desired, plan)
        if not changes:
            out.append(Change(plan.id, "unchanged"))
            continue
        out.append(Change(plan.id, "update", changes))
        if not dry_run:
            wanted = build_schedule(settings, plan)

            def updater(_: ScheduleUpdateInput, wanted: Schedule = wanted) -> ScheduleUpdate:
                return ScheduleUpdate(schedule=wanted)

            await client.get_schedule_handle(plan.id).update(updater)
            log.info("schedule.updated", schedule_id=plan.id, changes=sorted(changes))
    for sid in await owned_schedule_ids(client, tq):
        if sid in configured:
            continue
        out.append(Change(sid, "delete"))
        if not dry_run:
            with contextlib.suppress(RPCError):
                await client.get_schedule_handle(sid).delete()
            log.info("schedule.deleted", schedule_id=sid)
    return out


# ---- operator verbs ------------------------------------------------------------------


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
        desc = await _describe(client, sid)
        if desc is None:
            continue
        inp = await _current_input(client, desc)
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


async def _handle(client: Client, schedule_id: str) -> ScheduleHandle:
    if await _describe(client, schedule_id) is None:
        raise ScheduleError(f"no schedule {schedule_id!r} (run `curaflow schedules sync` first)")
    return client.get_schedule_handle(schedule_id)


@dataclass
class Triggered:
    """The occurrence a trigger started: its nominal time and its job id."""

    scheduled_at: datetime
    job_id: str


async def trigger(client: Client, schedule_id: str, wait_s: float = 10.0) -> Triggered | None:
    """Start an occurrence now and tell which job it is.

    The job id is the occurrence's nominal time in the plan's zone
    (:func:`~curaflow.domain.occurrence.occurrence_job_id`), read from the action
    Temporal records for the trigger.

    Args:
        wait_s: how long to wait for Temporal to record the action.

    Returns:
        The occurrence, or None when Temporal recorded no new action in time (the
        overlap policy skipped it because the previous occurrence still runs).

    Raises:
        ScheduleError: unknown schedule.
    """
    handle = await _handle(client, schedule_id)
    desc = await handle.describe()
    seen = {(a.scheduled_at, getattr(a.action, "workflow_id", "")) for a in desc.info.recent_actions}
    skipped = desc.info.num_actions_skipped_overlap
    inp = await _current_input(client, desc)
    timezone = inp.timezone if inp else "UTC"
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
            return Triggered(scheduled_at=at, job_id=occurrence_job_id(schedule_id, at, timezone)[0])
        if desc.info.num_actions_skipped_overlap > skipped:
            return None
    return None


async def pause(client: Client, schedule_id: str, note: str = "paused by curaflow schedules pause") -> None:
    """Pause a schedule (``sync`` restores the configured state).

    Raises:
        ScheduleError: unknown schedule.
    """
    await (await _handle(client, schedule_id)).pause(note=note)


async def unpause(client: Client, schedule_id: str, note: str = "unpaused by curaflow schedules unpause") -> None:
    """Unpause a schedule.

    Raises:
        ScheduleError: unknown schedule.
    """
    await (await _handle(client, schedule_id)).unpause(note=note)


# ---- occurrences: the ledger side ------------------------------------------------------


def target_spec(settings: Settings, target: TargetConfig) -> TargetSpec:
    """A configured target as a scheduled job runs it (no per-job view)."""
    return TargetSpec(
        target_id=target.id,
        account=target.account,
        work_type=target.work_type,
        query=target.query,
        filters=target.filters,
        limit=target.limit,
        scan_limit=target.scan_limit,
        storage_mode=target.storage_mode,
        routes=settings.route_refs(target),
    )


class OccurrenceConfigError(Exception):
    """An occurrence cannot run with the live configuration (no known target)."""


async def admit_occurrence(pool: asyncpg.Pool, settings: Settings, req: AdmitOccurrenceInput) -> OccurrenceAdmission:
    """Insert an occurrence's job into the ledger if absent.

    The job id comes from the nominal time in the plan's time zone (the zone the
    schedule fired in, i.e. ``req.occurrence.timezone``). Targets are resolved from the
    live configuration: the plan's current ``target_ids`` if the plan is still
    configured, else those recorded at sync time; an empty list means every configured
    target; unknown ids are skipped with a warning.

    Returns:
        The admission; ``created=False`` and the stored workflow argument when the job
        already existed.

    Raises:
        OccurrenceConfigError: none of the targets is configured.
    """
    occ = req.occurrence
    scheduled = datetime.fromtimestamp(req.scheduled_at_ms / 1000, tz=UTC)
    job_id, occurrence_date = occurrence_job_id(occ.schedule_id, scheduled, occ.timezone)
    lag_s = (now_ms() - req.scheduled_at_ms) / 1000
    async with pool.acquire() as conn:
        stored = await workflow_input(conn, job_id)
        if stored is not None:
            log.info("schedule.occurrence_duplicate", schedule_id=occ.schedule_id, job_id=job_id, lag_s=round(lag_s, 3))
            metrics.record_occurrence(occ.schedule_id, "duplicate")
            return OccurrenceAdmission(job_id=job_id, created=False, job_input=stored)
        plan = next((p for p in settings.schedules if p.id == occ.schedule_id), None)
        wanted = list(plan.target_ids if plan is not None else occ.target_ids) or [t.id for t in settings.targets]
        targets = [t for t in (settings.target(tid) for tid in wanted) if t is not None]
        unknown = [tid for tid in wanted if settings.target(tid) is None]
        if unknown:
            log.warning("schedule.unknown_targets", schedule_id=occ.schedule_id, job_id=job_id, target_ids=unknown)
        if not targets:
            raise OccurrenceConfigError(f"schedule {occ.schedule_id!r}: none of the targets {wanted} is configured")
        created_at = now_ms()
        inp = JobInput(
            job_id=job_id,
            plan_id=occ.schedule_id,
            schedule_id=occ.schedule_id,
            trigger="schedule",
            created_at_ms=created_at,
            deadline_at_ms=created_at + settings.budgets.default_deadline_ms,
            targets=[target_spec(settings, t) for t in targets],
            budgets=settings.budgets_model(),
            max_fallback_stages=max(1, settings.max_fallback_passes),
            source_task_queues=settings.source_task_queues(),
        )
        row = await insert_job(conn, NewJob(job_input=inp, occurrence_date=occurrence_date))
        if not row.created:  # lost a race with a concurrent trigger of the same minute
            stored = await workflow_input(conn, job_id)
            assert stored is not None
            metrics.record_occurrence(occ.schedule_id, "duplicate")
            return OccurrenceAdmission(job_id=job_id, created=False, job_input=stored)
        # The trampoline starts the workflow right after this activity: the reconciler
        # must not start a second, top-level one meanwhile.
        await mark_workflow_started(conn, job_id)
    metrics.record_admitted("schedule")
    metrics.record_occurrence(occ.schedule_id, "started", lag_s)
    log.info(
        "schedule.occurrence_admitted",
        schedule_id=occ.schedule_id,
        job_id=job_id,
        occurrence_date=occurrence_date,
        scheduled_at=scheduled.isoformat(),
        lag_s=round(lag_s, 3),
        target_ids=[t.id for t in targets],
    )
    return OccurrenceAdmission(job_id=job_id, created=True, job_input=inp)


# ---- missed and skipped occurrences ------------------------------------------------------


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
    async with pool.acquire() as conn:
        if not await conn.fetchval("SELECT pg_try_advisory_lock($1)", WATCH_LOCK_KEY):
            return found
        try:
            for plan in settings.schedules:
                desc = await _describe(client, plan.id)
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
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", WATCH_LOCK_KEY)
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

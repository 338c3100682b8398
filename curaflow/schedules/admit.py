"""An occurrence's job in the ledger: the ``admit_occurrence`` activity's logic.

The trampoline (:mod:`workflows.scheduled`) admits each occurrence through the
``admit_occurrence`` activity before it starts the job's ``JobWorkflow``: the job id is
the occurrence's nominal time in the plan's zone, so two triggers of one minute converge
on one job.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfoNotFoundError

import asyncpg

from curaflow.config import Settings, TargetConfig
from curaflow.domain.messages import JobInput, TargetSpec
from curaflow.domain.occurrence import (
    AdmitOccurrenceInput,
    MissCause,
    OccurrenceAdmission,
    legacy_occurrence_job_id,
    occurrence_job_id,
    occurrence_minute_ms,
)
from curaflow.ledger.db import now_ms
from curaflow.ledger.jobs import NewJob, insert_job, lock_occurrence, occurrence_of, workflow_input
from curaflow.observability import metrics
from curaflow.observability.logs import get_logger
from curaflow.schedules.watch import record_misses, withdraw_not_admitted

log = get_logger("curaflow.schedules")


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


async def _name_unadmitted(
    conn: asyncpg.Connection, schedule_id: str, scheduled_at_ms: int, job_id: str, problem: str, *, configured: bool
) -> None:
    """Name an occurrence Temporal started that cannot be admitted: a miss of cause
    ``configuration_error`` under its nominal minute, recorded, logged and counted once
    (under the plan's label when this process configures the plan, else under
    :data:`~curaflow.observability.metrics.UNCONFIGURED_PLAN`; the log keeps the id)."""
    nominal = occurrence_minute_ms(scheduled_at_ms)
    cause = MissCause.CONFIGURATION_ERROR
    if not await record_misses(conn, schedule_id, [(nominal, cause)], now_ms()):
        return  # named before (another trampoline of the same minute)
    metrics.record_missed(schedule_id, str(cause), 1, configured=configured)
    at = datetime.fromtimestamp(nominal / 1000, tz=UTC).isoformat().replace("+00:00", "Z")
    log.warning(
        "schedule.occurrence_missed",
        schedule_id=schedule_id,
        job_id=job_id,
        dropped=[{"at": at, "why": str(cause)}],
        detail=problem,
    )


async def admit_occurrence(pool: asyncpg.Pool, settings: Settings, req: AdmitOccurrenceInput) -> OccurrenceAdmission:
    """Insert an occurrence's job into the ledger if absent.

    The job id comes from the nominal instant in the plan's time zone (the zone the
    schedule fired in, i.e. ``req.occurrence.timezone``); a job admitted under the
    instant's legacy id (:func:`~curaflow.domain.occurrence.legacy_occurrence_job_id`,
    before ids carried the offset), or any job of the plan whose nominal time falls in the
    same minute (:func:`~curaflow.ledger.jobs.occurrence_of`: an id written in the plan's
    zone before a change of it — ``T0200+0000`` in UTC is ``T0300+0100`` in Europe/Berlin),
    is the same occurrence: one job per nominal minute of the plan (DESIGN.md "Scheduled
    occurrences"), looked up and inserted under that minute's lock
    (:func:`~curaflow.ledger.jobs.lock_occurrence`). The job row keeps the
    nominal time (``jobs.occurrence_at``: the outcome's ``occurrence_at``). Targets are resolved from the
    live configuration: the plan's current ``target_ids`` if the plan is still
    configured, else those recorded at sync time; an empty list means every configured
    target; unknown ids are skipped with a warning. The job's ``created_at`` and deadline
    (``budgets.default_deadline_ms`` later) are the database's clock, read by the insert
    (docs/DESIGN.md "Ledger times are the database's clock"); the returned workflow
    argument carries them.

    Returns:
        The admission; ``created=False`` and the stored workflow argument when the job
        already existed.

    Raises:
        OccurrenceConfigError: none of the targets is configured on this worker, or the
            action's time zone is none it knows (an action edited by hand). The
            occurrence is then a named miss (``schedule_misses``, ``configuration_error``:
            ``schedule.occurrence_missed``, ``curaflow_schedule_occurrences_missed_total``),
            once per nominal minute: Temporal started it, so the watch never sees it dropped.
    """
    occ = req.occurrence
    scheduled = datetime.fromtimestamp(req.scheduled_at_ms / 1000, tz=UTC)
    lag_s = (now_ms() - req.scheduled_at_ms) / 1000
    plan = next((p for p in settings.schedules if p.id == occ.schedule_id), None)
    configured = plan is not None  # the metrics' label: a configured plan's id, or one value for any other
    try:
        job_id, occurrence_date = occurrence_job_id(occ.schedule_id, scheduled, occ.timezone)
        legacy_id = legacy_occurrence_job_id(occ.schedule_id, scheduled, occ.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        # The action's zone is none this worker knows (an action edited by hand: sync writes
        # the configuration's, checked at load). Until 2026-12-07 the zone database's error
        # was retried until the occurrence timed out, every later time skipped behind it.
        problem = (
            f"schedule {occ.schedule_id!r}: the action's time zone {occ.timezone!r} is no time zone "
            "this worker knows, so the occurrence's job cannot be named (an action edited by hand: "
            "`curaflow schedules sync` restores the plan's)"
        )
        async with pool.acquire() as conn:
            await _name_unadmitted(
                conn, occ.schedule_id, req.scheduled_at_ms, req.trampoline_id, problem, configured=configured
            )
        raise OccurrenceConfigError(problem) from None
    minute = occurrence_minute_ms(req.scheduled_at_ms)
    async with pool.acquire() as conn, conn.transaction():
        # One job per nominal minute of the plan: under the minute's lock, a job stored under
        # this id, under its legacy id, or under another id of the same instant (written in
        # the plan's zone before a change of it: UTC's ``T0200+0000`` is Berlin's
        # ``T0300+0100``) is this occurrence's.
        await lock_occurrence(conn, occ.schedule_id, minute)
        ids = [job_id] if legacy_id is None else [job_id, legacy_id]
        found = await occurrence_of(conn, occ.schedule_id, minute, ids)
        stored = await workflow_input(conn, found) if found is not None else None
        if stored is not None:
            job_id = stored.job_id
            log.info("schedule.occurrence_duplicate", schedule_id=occ.schedule_id, job_id=job_id, lag_s=round(lag_s, 3))
            metrics.record_occurrence(occ.schedule_id, "duplicate", configured=configured)
            return OccurrenceAdmission(job_id=job_id, created=False, job_input=stored)
        wanted = list(plan.target_ids if plan is not None else occ.target_ids) or [t.id for t in settings.targets]
        targets = [t for t in (settings.target(tid) for tid in wanted) if t is not None]
        unknown = [tid for tid in wanted if settings.target(tid) is None]
        if unknown:
            log.warning("schedule.unknown_targets", schedule_id=occ.schedule_id, job_id=job_id, target_ids=unknown)
        unadmitted: str | None = None
        if not targets:
            unadmitted = (
                f"schedule {occ.schedule_id!r}: none of the targets {wanted} is configured on this worker "
                "(workers with different configurations, or a plan removed from the configuration "
                "and not synced: `curaflow schedules sync`)"
            )
            await _name_unadmitted(
                conn, occ.schedule_id, req.scheduled_at_ms, job_id, unadmitted, configured=configured
            )
        else:
            dated = JobInput(  # dated by the insert, on the database's clock: stand-in times until then
                job_id=job_id,
                plan_id=occ.schedule_id,
                schedule_id=occ.schedule_id,
                trigger="schedule",
                created_at_ms=0,
                deadline_at_ms=0,
                targets=[target_spec(settings, t) for t in targets],
                budgets=settings.budgets_model(),
                max_fallback_stages=max(1, settings.max_fallback_passes),
                source_task_queues=settings.source_task_queues(),
                max_task_bytes=settings.api.max_body_bytes,
            )
            row = await insert_job(
                conn,
                NewJob(
                    job_input=dated,
                    occurrence_date=occurrence_date,
                    occurrence_at=req.scheduled_at_ms,
                    deadline_ms=settings.budgets.default_deadline_ms,
                ),
            )
            if row.job_input is not None and await withdraw_not_admitted(conn, occ.schedule_id, minute):
                # its trampoline closed while this admission ran, and the watch named the minute
                log.info("schedule.miss_withdrawn", schedule_id=occ.schedule_id, job_id=job_id, why="not_admitted")
    if unadmitted is not None:  # raised once the miss is committed
        raise OccurrenceConfigError(unadmitted)
    if row.job_input is None:  # lost a race with a concurrent trigger of the same minute
        async with pool.acquire() as conn:
            stored = await workflow_input(conn, job_id)
        assert stored is not None
        metrics.record_occurrence(occ.schedule_id, "duplicate", configured=configured)
        return OccurrenceAdmission(job_id=job_id, created=False, job_input=stored)
    # No start is recorded here: the trampoline starts the job's run after this
    # activity, and one it never starts (cancelled or terminated before it could, its
    # activity done all the same: it hears no cancel) is started by the reconciler's
    # rule 1 like any admitted job whose start was lost — which attaches to the child
    # run the trampoline started and records it (until 2026-12-07 the start was
    # recorded here, and such a job was never run).
    inp = row.job_input
    metrics.record_admitted("schedule", inp.job_type)
    metrics.record_occurrence(occ.schedule_id, "started", lag_s, configured=configured)
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

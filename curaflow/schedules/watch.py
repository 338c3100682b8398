"""Missed and skipped occurrences: each one named by its nominal time and its real cause.

Temporal counts, per schedule, the times it dropped: beyond the catch-up window, or
skipped by the overlap policy — and it counts as "overlap" every time skipped behind an
occurrence that was still open, also when that occurrence was only open because the
server or every worker was down. :func:`watch_tick` turns an increase of those counters
into named misses: the times the plan's spec matched (Temporal's
``ListScheduleMatchingTimes``) that Temporal has processed and that started nothing are
the dropped times; :func:`curaflow.domain.occurrence.name_misses` gives each its cause
(beyond the catch-up window, overlap with an open job of the plan, or outage). Each miss
is recorded once in ``schedule_misses`` (``curaflow schedules misses``), logged as
``schedule.occurrence_missed`` and counted in ``curaflow_schedule_occurrences_missed_total``,
once across all processes (counters and the accounted-for horizon stored in the ledger,
under an advisory lock). A plan whose schedule runs nothing of it — deleted by hand, its
action edited to something that is no plan — is logged on every tick and exported as
``curaflow_schedule_broken`` by the process holding the lock (alert
``CuraflowScheduleBroken``); so is one whose schedule, not paused, will never start
another occurrence (``schedule.never_runs``: no next action time).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from datetime import UTC, datetime

import asyncpg
from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.enums.v1 import WorkflowExecutionStatus
from temporalio.api.schedule.v1 import ScheduleActionResult
from temporalio.api.workflowservice.v1 import ListScheduleMatchingTimesRequest
from temporalio.client import Client, ScheduleDescription

from curaflow.config import ScheduleConfig, Settings
from curaflow.domain.occurrence import CATCHUP_WINDOW_S, MissCause, name_misses, occurrence_minute_ms
from curaflow.ledger.db import LEADER_IDLE_MS, now_ms, session_lock
from curaflow.ledger.jobs import lock_occurrence, occurrence_job
from curaflow.ledger.retention import retention_cutoff
from curaflow.observability import metrics
from curaflow.observability.logs import get_logger
from curaflow.observability.supervision import Supervisor
from curaflow.schedules.sync import NEVER_RUNS, current_input, describe_schedule, never_runs

WATCH_LOCK_KEY = 0x6375726177617463  # "curawatc"
#: How far back one tick looks for dropped times (a watcher down longer names the
#: times of the last week only; Temporal's counts stay complete).
LOOKBACK_MS = 7 * 24 * 3600 * 1000
#: How long Temporal's scheduler may take to act on a due time (ms): the watch keeps
#: looking at the times of this last span again (a skip is counted a moment after its
#: time), naming each one once.
SETTLE_MS = 60_000
#: How far an action's or a job's time may lie from the nominal time it is for (ms), on
#: top of the plan's jitter.
MATCH_SLACK_MS = 500
log = get_logger("curaflow.schedules")


@dataclass
class Missed:
    """Occurrences newly found missed on one schedule in one watch tick.

    Attributes:
        missed_catchup / skipped_overlap / skipped_outage / not_admitted: how many, by cause
            (:class:`~curaflow.domain.occurrence.MissCause`). A skip Temporal counted
            whose time is not a time of the spec (a ``schedules trigger`` skipped behind
            a running occurrence) keeps Temporal's label and is not named.
        dropped: the named ones, ``(nominal time UTC, cause)`` ascending.
    """

    schedule_id: str
    missed_catchup: int
    skipped_overlap: int
    skipped_outage: int = 0
    not_admitted: int = 0
    dropped: list[tuple[datetime, MissCause]] = field(default_factory=list)


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def processed_until(desc: ScheduleDescription, now: int) -> int:
    """Epoch ms before which Temporal has acted on every time of the spec.

    The scheduler's next action time is the first time it has not processed yet (after an
    outage it still lies in the past until the scheduler caught up); without one, now.
    """
    nxt = desc.info.next_action_times
    return min(now, _ms(nxt[0])) if nxt else now


async def matching_times(client: Client, schedule_id: str, start_ms: int, end_ms: int) -> list[int]:
    """The times (epoch ms, UTC) the schedule's spec matches in ``[start_ms, end_ms)``."""
    start, end = Timestamp(), Timestamp()
    start.FromMilliseconds(start_ms)
    end.FromMilliseconds(end_ms)
    resp = await client.workflow_service.list_schedule_matching_times(
        ListScheduleMatchingTimesRequest(
            namespace=client.namespace, schedule_id=schedule_id, start_time=start, end_time=end
        )
    )
    return sorted(t for t in (ts.ToMilliseconds() for ts in resp.start_time) if start_ms <= t < end_ms)


async def dropped_times(
    conn: asyncpg.Connection,
    client: Client,
    plan: ScheduleConfig,
    desc: ScheduleDescription,
    start_ms: int,
    end_ms: int,
) -> tuple[list[int], list[tuple[int, int | None]]]:
    """The spec's times in ``[start_ms, end_ms)`` that started nothing and are not named
    yet, and the plan's jobs open in that span as ``(admitted_at, completed_at)`` (epoch ms)."""
    matched = await matching_times(client, plan.id, start_ms, end_ms)
    named = {
        r["nominal_at"]
        for r in await conn.fetch(
            "SELECT nominal_at FROM schedule_misses WHERE schedule_id = $1 AND nominal_at >= $2 AND nominal_at < $3",
            plan.id,
            start_ms,
            end_ms,
        )
    }
    matched = [t for t in matched if t not in named]
    slack = plan.jitter_ms + MATCH_SLACK_MS
    rows = await conn.fetch(
        """SELECT occurrence_at, created_at, completed_at FROM jobs
           WHERE schedule_id = $1 AND created_at < $3::bigint + $4::bigint
             AND (completed_at IS NULL OR completed_at >= $2::bigint - $4::bigint)""",
        plan.id,
        start_ms,
        end_ms,
        slack,
    )
    taken = [_ms(a.scheduled_at) for a in desc.info.recent_actions]
    taken += [r["occurrence_at"] for r in rows if r["occurrence_at"] is not None]
    dropped = [t for t in matched if not any(t - MATCH_SLACK_MS <= a <= t + slack for a in taken)]
    return dropped, [(r["created_at"], r["completed_at"]) for r in rows]


#: How a trampoline Temporal started may close before its job was admitted (its run's
#: status as the schedule's recent actions give it): everything but running and completed
#: (a completed trampoline admitted its job, or converged on the minute's job).
CLOSED_UNCOMPLETED = frozenset(
    {
        WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_FAILED,
        WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_CANCELED,
        WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_TERMINATED,
        WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_TIMED_OUT,
    }
)


def nominal_ms(action: ScheduleActionResult) -> int:
    """The nominal time (epoch ms, UTC) of one of a schedule's recent actions: the time the
    trampoline it started admits its job under.

    Temporal names each workflow a schedule starts ``<action's workflow id>-<nominal time>``
    (RFC 3339, UTC, to the second: ``nightly@occurrence-2026-12-07T09:00:00Z``) — the value
    it gives that workflow as ``TemporalScheduledStartTime``, which the trampoline reads. The
    action's ``schedule_time`` is not it: it includes the plan's jitter (measured on the dev
    server, jitter 3.5 s: nominal 19:53:40, ``schedule_time`` 19:53:41.443), which may carry
    it into the next minute. An id without that ending (never seen) gives ``schedule_time``.
    """
    workflow_id = action.start_workflow_result.workflow_id
    stamp = workflow_id[-len("2026-12-07T09:00:00Z") :]
    if workflow_id[: -len(stamp)].endswith("-"):
        with contextlib.suppress(ValueError):
            return _ms(datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC))
    return int(action.schedule_time.ToMilliseconds())


async def unadmitted_actions(
    conn: asyncpg.Connection, plan_id: str, desc: ScheduleDescription, kept_since_ms: int | None = None
) -> list[int]:
    """The nominal minutes (epoch ms, UTC, ascending) of the schedule's recent actions whose
    occurrence closed without completing and of which the ledger holds no job: times
    Temporal started that ran nothing (:attr:`MissCause.NOT_ADMITTED`).

    Temporal counts such a time as an action taken, never as a miss, so :func:`dropped_times`
    never sees it: the occurrence that waited for a worker at the first time of an outage
    longer than its bound (:func:`~curaflow.domain.occurrence.occurrence_timeout`) timed out
    with no job, and only the times skipped behind it were named (until 2026-12-07).
    Its minute is the one the admission would have named
    (:func:`~curaflow.domain.occurrence.occurrence_minute_ms` of the nominal time,
    :func:`nominal_ms` — not of the action's jittered time —, as
    :func:`~curaflow.schedules.admit.admit_occurrence` names a ``configuration_error``), so
    a trampoline the admission refused is named once. The run's status is the server's
    (``start_workflow_status``; a server that does not give it names nothing here). Cost: one
    indexed ledger read per recent action so closed (Temporal keeps the last ten actions),
    no Temporal call beyond the watch's describe.

    A minute before ``kept_since_ms`` (epoch ms, UTC: the retention cutoff,
    :func:`~curaflow.ledger.retention.retention_cutoff`; None: no retention) is not
    answered: retention deletes its miss, and Temporal lists the action for as long as it
    is one of the last ten (ten days of a daily plan), so each tick after each retention
    pass named it anew — logged, counted, alerted again (until 2026-12-07). A time that old
    is never named here (a watch back after an outage longer than ``retention.days`` does
    not name the first time of it).
    """
    closed = {
        minute
        for action in desc.raw_description.info.recent_actions
        if action.start_workflow_status in CLOSED_UNCOMPLETED
        for minute in (occurrence_minute_ms(nominal_ms(action)),)
        if kept_since_ms is None or minute >= kept_since_ms
    }
    return [minute for minute in sorted(closed) if await occurrence_job(conn, plan_id, minute) is None]


async def still_unadmitted(conn: asyncpg.Connection, plan_id: str, minutes: list[int]) -> list[int]:
    """Of ``minutes`` (nominal minutes, epoch ms, UTC: :func:`unadmitted_actions`' answer),
    those of which the ledger holds no job of the plan, each read under the minute's lock
    (:func:`~curaflow.ledger.jobs.lock_occurrence`, held until the caller's transaction —
    the one that records their misses — ends). The admission commits a minute's job under
    that lock and takes back its ``not_admitted`` miss there (:func:`withdraw_not_admitted`):
    a job committed after :func:`unadmitted_actions` read the minute and before the miss was
    recorded found no miss to take back, and the ledger held the time both run and missed
    (until 2026-12-07). Locked in ascending order; the admission holds one minute's lock.
    """
    kept: list[int] = []
    for minute in sorted(minutes):
        await lock_occurrence(conn, plan_id, minute)
        if await occurrence_job(conn, plan_id, minute) is None:
            kept.append(minute)
    return kept


#: How long a plan counts as broken (``curaflow_schedule_broken{why="configuration_error"}``)
#: after an occurrence of it could not be admitted (ms): the missed-occurrence alert's window.
UNADMITTED_WINDOW_MS = 3600 * 1000
CONFIGURATION_ERROR = str(MissCause.CONFIGURATION_ERROR)
#: Whether this process (the holder of the watch's lock) last exported
#: ``curaflow_schedule_broken{schedule_id="(unconfigured)"}``: set back to 0 once the window
#: of every such plan passed.
_unconfigured_broken: dict[str, bool] = {"exported": False}


async def unadmitted_plans(conn: asyncpg.Connection, since_ms: int) -> set[str]:
    """Plans with an occurrence recorded since ``since_ms`` (epoch ms) that no worker could
    admit (a miss of cause ``configuration_error``), configured here or not."""
    rows = await conn.fetch(
        "SELECT DISTINCT schedule_id FROM schedule_misses WHERE why = $1 AND recorded_at >= $2",
        CONFIGURATION_ERROR,
        since_ms,
    )
    return {r["schedule_id"] for r in rows}


async def record_misses(
    conn: asyncpg.Connection, schedule_id: str, named: list[tuple[int, MissCause]], now: int
) -> list[int]:
    """Record named misses of one plan in ``schedule_misses``, each nominal time once.

    The one writer of the table: the watch (times Temporal dropped) and the admission
    (times it started that no worker could admit, :class:`MissCause.CONFIGURATION_ERROR`).

    Args:
        named: ``(nominal time epoch ms UTC, cause)``.
        now: the record's time (epoch ms).

    Returns:
        The nominal times recorded by this call (not named before): the caller logs and
        counts those only, so a time named twice is counted once.
    """
    if not named:
        return []
    rows = await conn.fetch(
        """INSERT INTO schedule_misses (schedule_id, nominal_at, why, recorded_at)
           SELECT $1, t, w, $4 FROM unnest($2::bigint[], $3::text[]) AS u(t, w)
           ON CONFLICT DO NOTHING RETURNING nominal_at""",
        schedule_id,
        [t for t, _ in named],
        [str(c) for _, c in named],
        now,
    )
    return sorted(r["nominal_at"] for r in rows)


async def withdraw_not_admitted(conn: asyncpg.Connection, schedule_id: str, minute_ms: int) -> bool:
    """Take back the ``not_admitted`` miss of one nominal minute of a plan, called by the
    admission that commits that minute's job (in its transaction): a trampoline cancelled or
    terminated while its ``admit_occurrence`` ran closes at once, and the activity — which
    hears no cancel — commits the job a moment later (the reconciler's rule 1 then starts
    it); a watch tick in between named the minute (:func:`unadmitted_actions`). The only
    other writer of ``schedule_misses`` beside :func:`record_misses`; the log line and the
    counter already emitted stay (a counter only grows). Returns whether one was taken back.
    """
    status = await conn.execute(
        "DELETE FROM schedule_misses WHERE schedule_id = $1 AND nominal_at = $2 AND why = $3",
        schedule_id,
        minute_ms,
        str(MissCause.NOT_ADMITTED),
    )
    return status.endswith(" 1")


async def watch_tick(pool: asyncpg.Pool, client: Client, settings: Settings) -> list[Missed]:
    """Compare Temporal's missed/skipped counters with the ledger's; name and report the increase.

    Runs in every worker at the reconcile interval; one process at a time does the work
    (advisory lock, lost by a holder that hangs: :data:`~curaflow.ledger.db.LEADER_IDLE_MS`),
    and the ledger remembers the last counters and up to which nominal time they were
    accounted for, so each miss is logged, counted and recorded exactly once (a restart
    does not repeat them; the record is written on the lock's connection, so a holder
    that lost its session records nothing).

    Returns:
        The schedules with new misses (empty when another process holds the lock).
    """
    found: list[Missed] = []
    async with session_lock(pool, WATCH_LOCK_KEY, idle_timeout_ms=LEADER_IDLE_MS) as conn:
        if conn is None:
            metrics.clear_schedule_broken()  # the holder of the lock says what is broken
            _unconfigured_broken["exported"] = False
            return found
        unadmitted = await unadmitted_plans(conn, now_ms() - UNADMITTED_WINDOW_MS)
        configured = {plan.id for plan in settings.schedules}
        # a plan this process does not configure (another worker's, or removed and not
        # synced) whose occurrences no worker could admit: said too, while it lasts, under
        # one label (the ids came from trampolines' arguments: `curaflow schedules misses`
        # and the admission's `schedule.occurrence_missed` warning name them)
        unconfigured = sorted(unadmitted - configured)
        if unconfigured or _unconfigured_broken["exported"]:
            metrics.set_schedule_broken(metrics.UNCONFIGURED_PLAN, CONFIGURATION_ERROR if unconfigured else None)
            _unconfigured_broken["exported"] = bool(unconfigured)

        for plan in settings.schedules:
            desc = await describe_schedule(client, plan.id)
            if desc is None:
                # deleted by hand (the UI, `temporal schedule delete`): the plan runs
                # nothing until `sync` recreates it — said on every tick, not silently skipped
                log.warning(
                    "schedule.not_found",
                    schedule_id=plan.id,
                    detail="the configured plan has no Temporal Schedule; run `curaflow schedules sync`",
                )
                metrics.set_schedule_broken(plan.id, "not_found")
                continue
            if await current_input(client, desc) is None:
                log.warning(
                    "schedule.action_not_a_plan",
                    schedule_id=plan.id,
                    detail="the schedule's action was edited and its occurrences fail; run `curaflow schedules sync`",
                )
                metrics.set_schedule_broken(plan.id, "action_not_a_plan")
            elif never_runs(desc):
                # not paused, and no next action time: a cron at the edge of the calendar
                # (the 30th of February), a spec emptied or ended by hand, its remaining
                # actions used up — the plan has stopped for good (2026-12-06: said nowhere)
                log.warning("schedule.never_runs", schedule_id=plan.id, cron=plan.cron, detail=NEVER_RUNS)
                metrics.set_schedule_broken(plan.id, "never_runs")
            elif plan.id in unadmitted:
                log.warning(
                    "schedule.occurrences_not_admitted",
                    schedule_id=plan.id,
                    detail="an occurrence of the last hour found none of its targets configured on the worker "
                    "that admitted it (`curaflow schedules misses`); give every worker the same configuration",
                )
                metrics.set_schedule_broken(plan.id, CONFIGURATION_ERROR)
            else:
                metrics.set_schedule_broken(plan.id, None)
            missed = desc.info.num_actions_missed_catchup_window
            skipped = desc.info.num_actions_skipped_overlap
            row = await conn.fetchrow(
                "SELECT missed_catchup, skipped_overlap, checked_until, updated_at FROM schedule_watch "
                "WHERE schedule_id = $1",
                plan.id,
            )
            now = now_ms()
            horizon = processed_until(desc, now)
            if row is None:
                start = _ms(desc.info.created_at) if desc.info.created_at else horizon
            else:
                start = row["checked_until"] if row["checked_until"] is not None else row["updated_at"]
            start = max(start, horizon - LOOKBACK_MS)
            # A recreated schedule restarts its counters at zero: count from there.
            before_missed = row["missed_catchup"] if row and row["missed_catchup"] <= missed else 0
            before_skipped = row["skipped_overlap"] if row and row["skipped_overlap"] <= skipped else 0
            new_missed, new_skipped = missed - before_missed, skipped - before_skipped
            named: list[tuple[int, MissCause]] = []
            if (new_missed or new_skipped) and start < horizon:
                dropped, open_jobs = await dropped_times(conn, client, plan, desc, start, horizon)
                named = name_misses(dropped, missed_catchup=new_missed, skipped=new_skipped, open_jobs=open_jobs)
            kept_since = retention_cutoff(settings.retention.days, now)
            closed = [
                (minute, MissCause.NOT_ADMITTED) for minute in await unadmitted_actions(conn, plan.id, desc, kept_since)
            ]
            async with conn.transaction():
                await conn.execute(
                    """INSERT INTO schedule_watch
                           (schedule_id, missed_catchup, skipped_overlap, updated_at, checked_until)
                       VALUES ($1, $2, $3, $4, $5)
                       ON CONFLICT (schedule_id) DO UPDATE SET missed_catchup = EXCLUDED.missed_catchup,
                           skipped_overlap = EXCLUDED.skipped_overlap, updated_at = EXCLUDED.updated_at,
                           checked_until = GREATEST(schedule_watch.checked_until, EXCLUDED.checked_until)""",
                    plan.id,
                    missed,
                    skipped,
                    now,
                    max(start, min(horizon, now - SETTLE_MS)),
                )
                await record_misses(conn, plan.id, named, now)
                # seen again on every tick while Temporal lists the action: named once;
                # and only while, under the minute's lock, the ledger still holds no job of it
                confirmed = set(await still_unadmitted(conn, plan.id, [minute for minute, _ in closed]))
                closed = [(minute, cause) for minute, cause in closed if minute in confirmed]
                ended = set(await record_misses(conn, plan.id, closed, now))
            named = sorted(named + [(at, cause) for at, cause in closed if at in ended])
            if not (new_missed or new_skipped or ended):
                continue
            by_cause = {cause: sum(1 for _, c in named if c == cause) for cause in MissCause}
            # what Temporal counted but no spec time explains keeps Temporal's own label
            by_cause[MissCause.CATCHUP_WINDOW] += max(0, new_missed - by_cause[MissCause.CATCHUP_WINDOW])
            unnamed_skips = new_skipped - by_cause[MissCause.OVERLAP] - by_cause[MissCause.OUTAGE]
            by_cause[MissCause.OVERLAP] += max(0, unnamed_skips)
            new = Missed(
                plan.id,
                missed_catchup=by_cause[MissCause.CATCHUP_WINDOW],
                skipped_overlap=by_cause[MissCause.OVERLAP],
                skipped_outage=by_cause[MissCause.OUTAGE],
                not_admitted=by_cause[MissCause.NOT_ADMITTED],
                dropped=[(datetime.fromtimestamp(t / 1000, tz=UTC), c) for t, c in named],
            )
            found.append(new)
            for cause, count in by_cause.items():
                metrics.record_missed(plan.id, str(cause), count)
            log.warning(
                "schedule.occurrence_missed",
                schedule_id=plan.id,
                missed_catchup_window=new.missed_catchup,
                skipped_overlap=new.skipped_overlap,
                skipped_outage=new.skipped_outage,
                not_admitted=new.not_admitted,
                dropped=[{"at": at.isoformat().replace("+00:00", "Z"), "why": str(c)} for at, c in new.dropped],
                catchup_window_s=CATCHUP_WINDOW_S,
                total_missed_catchup_window=missed,
                total_skipped_overlap=skipped,
            )
    return found


@dataclass
class RecordedMiss:
    """A named miss as the ledger keeps it (times epoch ms, UTC)."""

    schedule_id: str
    nominal_at: int
    why: str
    recorded_at: int


async def list_misses(pool: asyncpg.Pool, schedule_id: str | None = None, limit: int = 50) -> list[RecordedMiss]:
    """The latest named misses (newest first), of one plan or of all."""
    rows = await pool.fetch(
        """SELECT schedule_id, nominal_at, why, recorded_at FROM schedule_misses
           WHERE $1::text IS NULL OR schedule_id = $1 ORDER BY nominal_at DESC LIMIT $2""",
        schedule_id,
        limit,
    )
    return [RecordedMiss(**dict(r)) for r in rows]


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

    A supervised loop named ``schedule_watcher`` (:mod:`curaflow.observability.supervision`): any
    failure is logged, counted and retried with backoff; one that does not recover
    fails the process through ``supervisor`` (None: a private supervisor that only logs).
    """
    if not settings.schedules:
        return
    sup = supervisor or Supervisor(stop)
    await sup.run_every("schedule_watcher", interval_s, lambda: watch_tick(pool, client, settings))

"""Gauges computed from the ledger, for alerting without reading logs.

Every curaflow process that holds a ledger pool (the API and each worker) refreshes one
:class:`LedgerSnapshot` every ``observability.ledger_gauges_interval_ms`` (15 s) and
exports it through a prometheus-client custom collector (:class:`LedgerGauges`):

=========================================  ==========  ===============================================
metric                                     labels      value
=========================================  ==========  ===============================================
``curaflow_jobs_open``                     status      open jobs by protocol status (``queued``:
                                                       every cell pending; ``running``)
``curaflow_oldest_open_job_age_seconds``               age of the oldest open job (0: none open)
``curaflow_jobs_stuck``                    why         open jobs that nothing moved past their budget
                                                       plus a minute's grace: ``past_deadline``
                                                       (open after ``deadline_at``),
                                                       ``queued_too_long`` (never started within the
                                                       queued budget), ``no_heartbeat`` (started, no
                                                       heartbeat nor transition within the stall
                                                       budget, and no live worker serves its source
                                                       queues: a job queued behind others is not
                                                       stalled). The workflow or the reconciler ends
                                                       such jobs, so > 0 means they are not running.
``curaflow_callback_dead_letters``                     events whose push to ``callback_url`` was
                                                       given up (all time; alert on its increase)
``curaflow_callback_pushes_pending``                   events waiting to be pushed
``curaflow_source_cooldown_seconds``       account     rate-limit cooldown left on the account's gate
``curaflow_deliveries``                    route,      delivery intents that reached a final status
                                           status      (delivered, duplicate, failed, unknown) within
                                                       the last ``ledger_gauges_window_ms`` (24 h)
``curaflow_jobs_failed_last_seconds``                  when the last job ended with business status
                                                       ``failed`` (``jobs.completed_at``)
``curaflow_cells_failed_last_seconds``     reason      when a cell last ended with a reason an alert
                                                       pages on (``auth_failed``,
                                                       ``account_restricted``: ``cells.completed_at``)
``curaflow_deliveries_last_seconds``       route,      when an intent last reached that final status
                                           status      (``delivery_intents.updated_at``)
``curaflow_route_paused_until_seconds``    route       the end of the route's pause, past or ahead
                                                       (``route_gates.paused_until``; none once
                                                       resumed)
``curaflow_source_paused_until_seconds``   account     the end of the account's pause, past or ahead
                                                       (``source_gates.paused_until``: the source
                                                       restricted it; none once resumed)
``curaflow_schedule_missed_last_seconds``  schedule_id, when the watch or the trampoline last named
                                           why         a time the plan did not run
                                                       (``schedule_misses.recorded_at``)
``curaflow_ledger_gauges_age_seconds``                 age of the snapshot (stale: the ledger is
                                                       unreachable from this process); before
                                                       the first, the time since the process
                                                       began to read
=========================================  ==========  ===============================================

The ``…_last_seconds`` / ``…_until_seconds`` gauges are Unix times (seconds) the ledger
holds, and a series exists only for a fact the ledger holds (no series: never, or
before the lookback). They are what the failure alerts read (``deploy/prometheus/alerts.yml``:
``… > time() - window``): a fact is durable in the ledger the moment its transaction
commits, whereas a counter lives in the memory of the process that counted it, and a
process killed (SIGKILL, OOM, a lost host) before Prometheus' next scrape takes its
increment with it — the page never came although the job had failed. Every process
reads the same ledger, so any survivor (or the restarted process) reports it.
``curaflow_deliveries_last_seconds`` and ``curaflow_schedule_missed_last_seconds`` look
back ``ledger_gauges_window_ms``, at least :data:`LAST_LOOKBACK_MS` (longer than any
alert's window); the others are the latest of all time, each one probe of an index
(migration 0051).

Why a periodic refresh rather than a query at scrape time: prometheus-client calls a
collector synchronously in the exporter's thread (the worker's metrics server) or inside
the API's request handler, while the ledger is reached through asyncpg on the event
loop; a refresh on the loop keeps every scrape instant and never blocks the API or
stalls a scrape on a slow database, at the price of values up to one interval old — and
the snapshot's age is exported, so a broken refresh is itself alertable. Each refresh
runs its four statements in one read-only transaction under a 5 s statement timeout,
on indexes (open jobs, dead pushes, recent intents, failed jobs, refused cells, recent
misses).

Several processes export the same values: aggregate with ``max`` (the alert rules in
``deploy/prometheus/alerts.yml`` do). So a process whose reading is older than
:func:`stale_after_s` (its refresh keeps failing: a partition, the statement timeout)
exports only ``curaflow_ledger_gauges_age_seconds``: its last values, however old, would
otherwise outvote the fresh ones of every other process (a ``curaflow_jobs_stuck 1`` of
an hour ago paging on jobs long ended). With every process stale, the value gauges are
absent and ``CuraflowLedgerGaugesStale`` says why — also for a process that never read
(its refresh failing from its start): its age is the time since it began to read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from prometheus_client import REGISTRY
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from curaflow.config import DEFAULT_QUEUED_MS, DEFAULT_STALL_MS, Settings
from curaflow.domain.ratelimit import cooldown_left_ms
from curaflow.domain.text import clipped_within
from curaflow.ledger.db import DB_NOW_MS, is_unavailable
from curaflow.observability.logs import get_logger
from curaflow.observability.metrics import (
    ALERTED_CELL_REASONS,
    LEDGER_GAUGE_FAMILIES,
    UNCONFIGURED_PLAN,
    record_ledger_unavailable,
)

log = get_logger("curaflow.ledger.gauges")

STUCK_WHY = ("past_deadline", "queued_too_long", "no_heartbeat")
FINAL_DELIVERY_STATUSES = ("delivered", "duplicate", "failed", "unknown")
#: Slack after a budget before an open job counts as stuck (timers and the reconciler's tick).
STUCK_GRACE_MS = 60_000
STATEMENT_TIMEOUT = "5s"
#: The reading's bound on the server: :data:`STATEMENT_TIMEOUT`, or the connection's own when
#: that is lower — never lifted above the pool's, whose client-side bound must run out after
#: the server's (:func:`curaflow.ledger.db.server_statement_timeout_ms`: a client-side cancel
#: request can land on the connection's next statement).
_BOUND_READ = f"""SELECT set_config('statement_timeout', CASE
    WHEN current_setting('statement_timeout')::interval = interval '0' THEN '{STATEMENT_TIMEOUT}'
    ELSE (extract(epoch FROM LEAST(current_setting('statement_timeout')::interval,
                                   interval '{STATEMENT_TIMEOUT}')) * 1000)::bigint::text END, true)"""
#: The cap of an account given none (``read_snapshot``'s ``cooldown_caps_ms``): the row as it is.
UNCAPPED_MS = 2**62
#: Age (s) after which a process stops exporting its reading's values: the bound of
#: ``CuraflowLedgerGaugesStale`` (an age above 120 s is no reading).
STALE_AFTER_S = 120.0
#: The shortest lookback (ms) of the ``…_last_seconds`` gauges read within a window: two
#: hours, longer than the longest alert window (1 h), whatever ``ledger_gauges_window_ms``.
LAST_LOOKBACK_MS = 2 * 3_600_000
#: Final statuses of a delivery intent an alert pages on (refused for good, outcome unknown).
REFUSED_DELIVERY_STATUSES = ("failed", "unknown")


#: One scalar subquery per alerted cell reason, with the reason as a constant so the
#: planner proves the partial index ``cells_alerted_reasons`` (migration 0051) applies.
_REFUSED_CELLS = ",\n                      ".join(
    f"(SELECT max(completed_at) FROM cells WHERE terminal_reason_code = '{reason}') AS cells_{reason}"
    for reason in ALERTED_CELL_REASONS
)


def _decoded(value: Any, empty: Any) -> Any:
    """A jsonb value as the connection gives it: decoded by the ledger pool's codec
    (:func:`curaflow.ledger.db.create_pool`), text on a bare connection; ``empty`` for NULL."""
    if value is None:
        return empty
    return json.loads(value) if isinstance(value, str) else value


def stale_after_s(interval_ms: int) -> float:
    """The age (s) after which a reading refreshed every ``interval_ms`` is stale:
    :data:`STALE_AFTER_S`, or three intervals when that is longer (a process refreshing
    every 5 minutes is not stale between its refreshes)."""
    return max(STALE_AFTER_S, 3 * interval_ms / 1000)


@dataclass
class LedgerSnapshot:
    """One reading of the ledger (see the module doc); times are epoch ms of the database clock."""

    taken_at_ms: int
    taken_monotonic: float
    open_jobs: dict[str, int] = field(default_factory=lambda: {"queued": 0, "running": 0})
    oldest_open_age_s: float = 0.0
    stuck: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STUCK_WHY, 0))
    dead_letters: int = 0
    pushes_pending: int = 0
    cooldown_s: dict[str, float] = field(default_factory=dict)
    deliveries: dict[tuple[str, str], int] = field(default_factory=dict)
    jobs_failed_last_s: float | None = None
    cells_failed_last_s: dict[str, float] = field(default_factory=dict)
    deliveries_last_s: dict[tuple[str, str], float] = field(default_factory=dict)
    routes_paused_until_s: dict[str, float] = field(default_factory=dict)
    accounts_paused_until_s: dict[str, float] = field(default_factory=dict)
    schedule_missed_last_s: dict[tuple[str, str], float] = field(default_factory=dict)


async def read_snapshot(
    conn: asyncpg.Connection,
    *,
    accounts: dict[str, str],
    routes: Iterable[str] = (),
    window_ms: int = 86_400_000,
    grace_ms: int = STUCK_GRACE_MS,
    cooldown_caps_ms: dict[str, int] | None = None,
    plans: Iterable[str] | None = None,
) -> LedgerSnapshot:
    """Read the gauges' values from the ledger in one read-only transaction.

    Args:
        accounts: account → its source gate (task queue name); every account gets a value.
        routes: configured route names; each gets a zero for every final status.
        window_ms: the deliveries' window (the ``…_last_seconds`` of intents and misses
            look back at least :data:`LAST_LOOKBACK_MS`).
        plans: the configured plans' ids; a miss of any other id is reported under
            :data:`~curaflow.observability.metrics.UNCONFIGURED_PLAN` (as the missed
            counter: an id a trampoline's argument carried is no label value). None:
            every id as it is.
        grace_ms: slack after a budget before a job counts as stuck.
        cooldown_caps_ms: account → its cooldown ladder's cap (``rate_limit_cap_ms``): the
            cooldown shown is what is held, at most the cap
            (:func:`~curaflow.domain.ratelimit.cooldown_left_ms`); an account without one
            is shown uncapped.

    Raises:
        asyncpg.PostgresError / OSError: the ledger cannot be read (the caller keeps
            the previous snapshot).
    """
    async with conn.transaction(readonly=True):
        await conn.execute(_BOUND_READ)
        jobs = await conn.fetchrow(
            f"""WITH now AS (SELECT {DB_NOW_MS} AS ms),
               open AS (
                   SELECT j.job_id, j.created_at, j.started_at, j.updated_at, j.deadline_at,
                          COALESCE(j.workflow_input->'source_task_queues', '{{}}'::jsonb) AS queues,
                          COALESCE((j.workflow_input->'budgets'->>'queued_timeout_ms')::bigint, $1) AS queued_ms,
                          COALESCE((j.workflow_input->'budgets'->>'stall_timeout_ms')::bigint, $2) AS stall_ms,
                          bool_and(c.state = 'pending') AS all_pending,
                          max(GREATEST(COALESCE(c.heartbeat_at, 0), c.updated_at)) AS cell_life
                   FROM jobs j LEFT JOIN cells c ON c.job_id = j.job_id
                   WHERE j.completed_at IS NULL
                   GROUP BY j.job_id
               ),
               -- source queues a live worker serves (curaflow.ledger.reconciler.served_queues)
               served AS (
                   SELECT l.task_queue FROM source_queue_leases l, now WHERE l.expires_at > now.ms
                     AND EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = l.backend_pid)
               ),
               judged AS (
                   SELECT open.*,
                          CASE
                            WHEN deadline_at IS NOT NULL AND deadline_at + $3 < now.ms THEN 'past_deadline'
                            WHEN started_at IS NULL AND created_at + queued_ms + $3 < now.ms THEN 'queued_too_long'
                            WHEN started_at IS NOT NULL
                                 AND GREATEST(started_at, updated_at, COALESCE(cell_life, 0)) + stall_ms + $3 < now.ms
                                 -- a step queued behind others on a served queue is not stalled
                                 AND NOT EXISTS (
                                     SELECT 1 FROM served WHERE open.queues = '{{}}'::jsonb
                                        OR served.task_queue IN (SELECT value FROM jsonb_each_text(open.queues)))
                                 THEN 'no_heartbeat'
                          END AS stuck,
                          now.ms AS now_ms
                   FROM open, now
               )
               SELECT (SELECT ms FROM now) AS now_ms,
                      count(*) FILTER (WHERE all_pending IS NOT FALSE) AS queued,
                      count(*) FILTER (WHERE all_pending IS FALSE) AS running,
                      min(created_at) AS oldest,
                      count(*) FILTER (WHERE stuck = 'past_deadline') AS past_deadline,
                      count(*) FILTER (WHERE stuck = 'queued_too_long') AS queued_too_long,
                      count(*) FILTER (WHERE stuck = 'no_heartbeat') AS no_heartbeat,
                      -- the failure alerts' facts, each one probe of a partial index (0051)
                      (SELECT max(completed_at) FROM jobs WHERE business_status = 'failed') AS failed_last,
                      {_REFUSED_CELLS}
               FROM judged""",
            DEFAULT_QUEUED_MS,
            DEFAULT_STALL_MS,
            grace_ms,
        )
        now_ms = int(jobs["now_ms"])
        since = now_ms - max(window_ms, LAST_LOOKBACK_MS)
        pushes = await conn.fetchrow(
            """SELECT (SELECT count(*) FROM event_pushes WHERE status = 'dead') AS dead,
                      (SELECT count(*) FROM event_pushes WHERE status = 'pending') AS pending,
                      (SELECT jsonb_object_agg(route, paused_until) FROM route_gates WHERE paused_until > 0)
                          AS paused,
                      (SELECT jsonb_agg(jsonb_build_array(schedule_id, why, last)) FROM (
                          SELECT schedule_id, why, max(recorded_at) AS last FROM schedule_misses
                          WHERE recorded_at >= $1 GROUP BY schedule_id, why) m) AS missed""",
            since,
        )
        gates = await conn.fetch(
            "SELECT gate, cooldown_until, paused_until FROM source_gates WHERE gate = ANY($1::text[])",
            list(accounts.values()),
        )
        intents = await conn.fetch(
            """SELECT route, status, count(*) FILTER (WHERE updated_at >= $1) AS n, max(updated_at) AS last
               FROM delivery_intents
               WHERE updated_at >= least($1, $3) AND status = ANY($2::text[]) GROUP BY route, status""",
            now_ms - window_ms,
            list(FINAL_DELIVERY_STATUSES),
            since,
        )
    until = {r["gate"]: int(r["cooldown_until"]) for r in gates}
    paused = {r["gate"]: int(r["paused_until"]) for r in gates if r["paused_until"]}
    caps = cooldown_caps_ms or {}
    left_ms = {
        account: cooldown_left_ms(until.get(gate, 0), now_ms, caps.get(account, UNCAPPED_MS))
        for account, gate in accounts.items()
    }
    deliveries = {(route, status): 0 for route in routes for status in FINAL_DELIVERY_STATUSES}
    deliveries_last: dict[tuple[str, str], float] = {}
    for r in intents:
        if r["n"] or (r["route"], r["status"]) in deliveries:
            deliveries[(r["route"], r["status"])] = int(r["n"])
        deliveries_last[(r["route"], r["status"])] = int(r["last"]) / 1000
    configured = None if plans is None else set(plans)
    missed: dict[tuple[str, str], float] = {}
    for schedule_id, why, last in _decoded(pushes["missed"], []):
        key = (schedule_id if configured is None or schedule_id in configured else UNCONFIGURED_PLAN, why)
        missed[key] = max(missed.get(key, 0.0), int(last) / 1000)
    oldest = jobs["oldest"]
    return LedgerSnapshot(
        taken_at_ms=now_ms,
        taken_monotonic=time.monotonic(),
        open_jobs={"queued": int(jobs["queued"]), "running": int(jobs["running"])},
        oldest_open_age_s=max(0.0, (now_ms - int(oldest)) / 1000) if oldest is not None else 0.0,
        stuck={why: int(jobs[why]) for why in STUCK_WHY},
        dead_letters=int(pushes["dead"]),
        pushes_pending=int(pushes["pending"]),
        cooldown_s={account: left / 1000 for account, left in left_ms.items()},
        deliveries=deliveries,
        jobs_failed_last_s=int(jobs["failed_last"]) / 1000 if jobs["failed_last"] is not None else None,
        cells_failed_last_s={
            reason: int(jobs[f"cells_{reason}"]) / 1000
            for reason in ALERTED_CELL_REASONS
            if jobs[f"cells_{reason}"] is not None
        },
        deliveries_last_s=deliveries_last,
        routes_paused_until_s={route: int(until) / 1000 for route, until in _decoded(pushes["paused"], {}).items()},
        accounts_paused_until_s={
            account: paused[gate] / 1000 for account, gate in sorted(accounts.items()) if gate in paused
        },
        schedule_missed_last_s=missed,
    )


class LedgerGauges(Collector):
    """A prometheus-client collector exporting the latest :class:`LedgerSnapshot`.

    Until the first refresh it exports only ``curaflow_ledger_gauges_age_seconds``, the
    seconds since it was created (when the process began to read: no value is made up);
    once the snapshot is older than ``stale_after`` seconds, only its age (see the module
    doc). A process whose refresh fails from its start exported nothing until 2026-12-06, so
    ``CuraflowLedgerGaugesStale`` (the youngest reading's age) was silent while only such
    processes ran, and the alerts on ledger facts were blind with nothing saying so.

    Args:
        stale_after: seconds; :func:`run_ledger_gauges` sets :func:`stale_after_s` of the
            configured interval.

    Attributes:
        started_monotonic: ``time.monotonic()`` at creation, the age's origin until the
            first snapshot.
    """

    def __init__(self, stale_after: float = STALE_AFTER_S) -> None:
        self.snapshot: LedgerSnapshot | None = None
        self.stale_after = stale_after
        self.started_monotonic = time.monotonic()

    def describe(self) -> Iterator[Metric]:
        """The families this collector exports (their names, for the registry)."""
        yield from self._families()

    def _families(self) -> Iterator[Metric]:
        for name, (help_text, labels) in LEDGER_GAUGE_FAMILIES.items():
            yield GaugeMetricFamily(name, help_text, labels=list(labels))

    def collect(self) -> Iterator[Metric]:
        """The snapshot as gauge families (called by prometheus-client at scrape time)."""
        snap = self.snapshot
        families = {f.name: f for f in self._families()}
        if snap is None:  # never read: how long this process has tried, and nothing else
            age = max(0.0, time.monotonic() - self.started_monotonic)
            families["curaflow_ledger_gauges_age_seconds"].add_metric([], age)  # type: ignore[attr-defined]
            yield from families.values()
            return
        age = max(0.0, time.monotonic() - snap.taken_monotonic)
        families["curaflow_ledger_gauges_age_seconds"].add_metric([], age)  # type: ignore[attr-defined]
        if age > self.stale_after:
            yield from families.values()  # what this process no longer knows it does not say
            return
        for status, n in snap.open_jobs.items():
            families["curaflow_jobs_open"].add_metric([status], n)  # type: ignore[attr-defined]
        families["curaflow_oldest_open_job_age_seconds"].add_metric([], snap.oldest_open_age_s)  # type: ignore[attr-defined]
        for why, n in snap.stuck.items():
            families["curaflow_jobs_stuck"].add_metric([why], n)  # type: ignore[attr-defined]
        families["curaflow_callback_dead_letters"].add_metric([], snap.dead_letters)  # type: ignore[attr-defined]
        families["curaflow_callback_pushes_pending"].add_metric([], snap.pushes_pending)  # type: ignore[attr-defined]
        for account, left in sorted(snap.cooldown_s.items()):
            families["curaflow_source_cooldown_seconds"].add_metric([account], left)  # type: ignore[attr-defined]
        for (route, status), n in sorted(snap.deliveries.items()):
            families["curaflow_deliveries"].add_metric([route, status], n)  # type: ignore[attr-defined]
        # the failure alerts' facts: a series only for a fact the ledger holds
        if snap.jobs_failed_last_s is not None:
            families["curaflow_jobs_failed_last_seconds"].add_metric([], snap.jobs_failed_last_s)  # type: ignore[attr-defined]
        for reason, at in sorted(snap.cells_failed_last_s.items()):
            families["curaflow_cells_failed_last_seconds"].add_metric([reason], at)  # type: ignore[attr-defined]
        for (route, status), at in sorted(snap.deliveries_last_s.items()):
            families["curaflow_deliveries_last_seconds"].add_metric([route, status], at)  # type: ignore[attr-defined]
        for route, until in sorted(snap.routes_paused_until_s.items()):
            families["curaflow_route_paused_until_seconds"].add_metric([route], until)  # type: ignore[attr-defined]
        for account, until in sorted(snap.accounts_paused_until_s.items()):
            families["curaflow_source_paused_until_seconds"].add_metric([account], until)  # type: ignore[attr-defined]
        for (schedule_id, why), at in sorted(snap.schedule_missed_last_s.items()):
            families["curaflow_schedule_missed_last_seconds"].add_metric([schedule_id, why], at)  # type: ignore[attr-defined]
        yield from families.values()


_installed: dict[str, LedgerGauges] = {}


def install(registry: Any = REGISTRY) -> LedgerGauges:
    """Register this process's :class:`LedgerGauges` in ``registry`` once; returns it."""
    key = str(id(registry))
    if key not in _installed:
        gauges = LedgerGauges()
        registry.register(gauges)
        _installed[key] = gauges
    return _installed[key]


async def refresh(gauges: LedgerGauges, pool: asyncpg.Pool, settings: Settings) -> LedgerSnapshot:
    """Read a new snapshot for ``gauges`` (the previous one stays if this raises)."""
    async with pool.acquire() as conn:
        snap = await read_snapshot(
            conn,
            accounts=settings.source_task_queues(),
            routes=settings.routes.keys(),
            window_ms=settings.observability.ledger_gauges_window_ms,
            cooldown_caps_ms={
                account: int(config.policy().rate_limit_cap_s * 1000)
                for account, config in settings.source_configs().items()
            },
            plans=[plan.id for plan in settings.schedules],
        )
    gauges.snapshot = snap
    return snap


async def run_ledger_gauges(pool: asyncpg.Pool, settings: Settings, stop: asyncio.Event) -> None:
    """Refresh this process's ledger gauges every ``ledger_gauges_interval_ms`` until ``stop``.

    A failed refresh is logged (``metrics.ledger_gauges_failed``) and retried at the
    next tick; the snapshot's age shows it to Prometheus. Never raises.
    """
    gauges = install()
    gauges.stale_after = stale_after_s(settings.observability.ledger_gauges_interval_ms)
    interval = settings.observability.ledger_gauges_interval_ms / 1000
    failing = False
    while not stop.is_set():
        try:
            await refresh(gauges, pool, settings)
            if failing:
                log.info("metrics.ledger_gauges_recovered")
            failing = False
        except Exception as err:  # noqa: BLE001 - a metric must never take a process down
            if is_unavailable(err):  # a bug of the query is no outage (it is logged all the same)
                record_ledger_unavailable("gauges")
            if not failing:
                log.warning(
                    "metrics.ledger_gauges_failed", error=type(err).__name__, detail=clipped_within(str(err), 200)
                )
            failing = True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval)

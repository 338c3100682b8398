"""Prometheus metrics of curaflow (prometheus-client), shared by the API and the workers.

Every metric lives in the process's default registry; the API serves it at
``GET /metrics`` and a worker on ``observability.metrics_port`` (see
:func:`start_metrics_server`). The Temporal SDK's own runtime metrics (task slots,
poll latencies, activity/workflow execution counts…) are exported by the SDK on a
separate port (``observability.temporal_metrics_port``), see
:func:`curaflow.process.telemetry.temporal_runtime`.

Names follow the Prometheus conventions (``_total`` counters, ``_seconds`` units).
Labels are bounded sets (statuses, reason codes, route names, activity types,
schedule ids): never a job id.

The ``record_*`` helpers are the only places that know label names; they never raise
(a metric must not break a job).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest, start_http_server

JOBS_ADMITTED = Counter(
    "curaflow_jobs_admitted_total",
    "Jobs admitted into the ledger (first admission only; replays are not counted).",
    ["trigger", "job_type"],
)
JOBS_TERMINAL = Counter(
    "curaflow_jobs_terminal_total",
    "Jobs that became terminal, by protocol status and business status.",
    ["status", "business_status", "trigger"],
)
CELLS_TERMINAL = Counter(
    "curaflow_cells_terminal_total",
    "Cells of finished jobs by terminal state and reason code ('' for submitted).",
    ["state", "reason"],
)
DELIVERY_ATTEMPTS = Counter(
    "curaflow_delivery_attempts_total",
    "Delivery requests sent on a route (one per deliver attempt that reached the route).",
    ["route", "kind"],
)
DELIVERY_RESULTS = Counter(
    "curaflow_delivery_results_total",
    "Outcomes of delivery requests per route: delivered, duplicate, failed (retryable), "
    "rejected (permanent), unknown (ambiguous).",
    ["route", "kind", "result"],
)
HEARTBEAT_TIMEOUTS = Counter(
    "curaflow_heartbeat_timeouts_total",
    "Activity attempts that resumed a cell whose previous attempt stopped heartbeating "
    "(its lease was never released: a worker died or hung) plus cells ended stalled_no_heartbeat.",
    ["activity"],
)
ACTIVITY_QUEUE_WAIT = Histogram(
    "curaflow_activity_queue_wait_seconds",
    "Time an activity attempt waited in its task queue (scheduled → started).",
    ["activity", "task_queue"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 1800),
)
ACTIVITY_ATTEMPTS = Counter(
    "curaflow_activity_attempts_total",
    "Activity attempts started by this worker, by activity and result.",
    ["activity", "result"],
)
JOB_DURATION = Histogram(
    "curaflow_job_duration_seconds",
    "Wall time from admission to terminal, by business status.",
    ["business_status"],
    buckets=(1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200),
)
EVENT_STREAM_LAG = Histogram(
    "curaflow_event_stream_lag_seconds",
    "Age of the oldest event in a page handed to a consumer (now − event time).",
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 1800, 3600),
)
RECONCILER_CONVERGED = Counter(
    "curaflow_reconciler_converged_total",
    "Jobs the reconciler made terminal (no workflow could finish them), by cause.",
    ["cause"],
)
RECONCILER_STARTED = Counter(
    "curaflow_reconciler_workflows_started_total",
    "Workflows the reconciler started for admitted jobs that had none.",
)
SCHEDULE_OCCURRENCES = Counter(
    "curaflow_schedule_occurrences_total",
    "Schedule occurrences by result: started (new job), duplicate (converged on an existing job).",
    ["schedule_id", "result"],
)
SCHEDULE_MISSED = Counter(
    "curaflow_schedule_occurrences_missed_total",
    "Occurrences a plan did not run: missed_catchup_window (later than the 90 min catch-up "
    "window), skipped_overlap (a job of the plan was still running), skipped_outage (skipped "
    "while no job of the plan ran: Temporal or the workers were down), configuration_error "
    "(started, but none of its targets is configured on the worker that admitted it) or "
    "not_admitted (started, but its occurrence closed before its job was admitted: timed out "
    "waiting for a worker or the ledger, terminated or cancelled by hand).",
    ["schedule_id", "why"],
)
SCHEDULE_BROKEN = Gauge(
    "curaflow_schedule_broken",
    "1 while a plan's Temporal Schedule runs nothing of the plan, by why: not_found "
    "(the schedule was deleted by hand) or action_not_a_plan (its action was edited so that every "
    "occurrence fails) — `curaflow schedules sync` repairs both — or never_runs (not paused, and "
    "no future time matches: a cron's impossible date, a spec emptied or ended by hand) or configuration_error (an "
    "occurrence of the last hour found none of its targets configured on the worker that admitted "
    "it: workers with different configurations, or a plan removed from the configuration and not "
    "synced); 0 otherwise. Set by the process whose schedule watch ran last "
    "(curaflow.schedules.watch).",
    ["schedule_id", "why"],
)
#: The ``schedule_id`` label of an occurrence whose plan is not configured (a trampoline
#: any Temporal client may start with any id, a plan removed before ``curaflow schedules
#: sync``): one value, not one per id sent — no plan id has this shape (``ID_PATTERN``).
UNCONFIGURED_PLAN = "(unconfigured)"
#: The causes a missed occurrence is counted under: every
#: :class:`~curaflow.domain.occurrence.MissCause`.
MISS_CAUSES = ("missed_catchup_window", "skipped_overlap", "skipped_outage", "configuration_error", "not_admitted")
#: The values of ``curaflow_schedule_broken``'s ``why`` label.
SCHEDULE_BROKEN_WHYS = ("not_found", "action_not_a_plan", "never_runs", "configuration_error")
SCHEDULE_START_LAG = Histogram(
    "curaflow_schedule_start_lag_seconds",
    "Delay between an occurrence's scheduled time and its job's admission.",
    ["schedule_id"],
    buckets=(0.1, 0.5, 1, 5, 15, 60, 300, 900, 1800, 3600, 5400),
)
SOURCE_DAYS_NOT_FULLY_PAGED = Counter(
    "curaflow_source_days_not_fully_paged_total",
    "Days a scan could not page fully: the source holds more works of that day than its "
    "offset cap lets a walk reach from both ends (narrow the target's query).",
    ["account"],
)
SOURCE_ACCOUNT_PAUSED = Counter(
    "curaflow_source_account_paused_total",
    "Times an account (any source instance a target's account names) was paused because its source "
    "restricted the account's access (for a Pixiv account: the answer 'Your access is currently restricted.').",
    ["account"],
)
SOURCE_UNRECOGNISED_ANSWERS = Counter(
    "curaflow_source_unrecognised_answers_total",
    "Works skipped on an answer of the source not recognised as the work's (the image host "
    "answering 403, or 404/410 for a work its detail does not say is gone, a page that is no image): "
    "the same answer would come for any work while it "
    "lasts, so each such work is held back for the account's unrecognised_hold_ms only "
    "(pixiv.unrecognised_hold_ms, or sources.<name>.unrecognised_hold_ms). Counted once the hold "
    "is committed: once per hold, none for a hold a live verdict about the work outlasts. Kind "
    "'invalid': items of a search page in a shape curaflow does not read (a renamed field, an id not "
    "of the source's shape, a value never seen), each examined 'invalid' for its job, counted once "
    "the scan's checkpoint or result holding it is committed. Kind 'attempts_spent': a work whose cell's "
    "last fetch attempt failed on the source's failure (a file cut short, a 5xx or a timeout on every "
    "attempt), held back for the account's unrecognised_hold_ms so the target's next job binds another.",
    ["account", "kind"],
)
#: The kinds an unrecognised answer is counted under: any of
#: :class:`~curaflow.sources.errors.UnavailableKind` (a source kind that does not say
#: whether an answer is the work's raises any of them).
UNRECOGNISED_ANSWER_KINDS = (
    "gone",
    "unusable_url",
    "too_large",
    "not_an_image",
    "undecodable",
    "over_budget",
    "unusable_animation",
    "no_file",
)
#: The kind the items of a search page curaflow does not read are counted under
#: (:func:`record_invalid_listed`): the cell tally's word for them.
INVALID_LISTED_KIND = "invalid"
#: The kind a work is counted under when its cell's last fetch attempt failed on a
#: failure of the source's, not recognised as the work's (a file cut short, a 5xx or a
#: timeout every attempt): the work held back for the account's ``unrecognised_hold_ms`` so the
#: target's next job binds its next candidate (:func:`activities.fetch.holds_back`).
ATTEMPTS_SPENT_KIND = "attempts_spent"
ROUTE_REFUSALS = Counter(
    "curaflow_route_refusals_total",
    "Works a route refused for good; each is remembered and not offered to that route again.",
    ["route", "kind"],
)
ROUTE_PAUSES = Counter(
    "curaflow_route_pauses_total",
    "Routes paused as broken: they refused several different works in a row with the same "
    "answer (curaflow.ledger.route_gates); each pause is counted once. Lift with `curaflow routes resume`.",
    ["route", "kind"],
)
#: How many distinct ``name`` label values of one ``kind`` a process gives series of their
#: own to (:class:`MismatchNames`): a rolling change leaves a few names unknown to a
#: worker, never this many — a job's input is written by any Temporal client of the
#: namespace, and the names it makes up are counted under :data:`CONFIG_MISMATCH_OTHER`.
CONFIG_MISMATCH_NAMES_MAX = 16
#: The ``name`` label value of the configuration mismatches past
#: :data:`CONFIG_MISMATCH_NAMES_MAX` distinct names of a kind: no route or ``[sources]``
#: name has this shape (``ID_PATTERN``; a Pixiv account so named would share it).
CONFIG_MISMATCH_OTHER = "(other)"
CONFIG_MISMATCHES = Counter(
    "curaflow_config_mismatch_total",
    "Step attempts that met a route (kind 'route') or a source account (kind 'source') the job "
    "names and this process does not know — not configured here, or its kind not registered in "
    "this process —, or lacked a setting the step needs (kind 'setting': api.callback_secret for a "
    "push): the processes' configurations differ (a rolling change). Each costs one "
    "attempt of the step, retried with a backoff; the name is the job's own (from the "
    "configuration of the process that admitted it, or whatever a Temporal client wrote in the job's "
    f"input); a process gives the first {CONFIG_MISMATCH_NAMES_MAX} names of each kind a series of their "
    f"own and counts the rest under name '{CONFIG_MISMATCH_OTHER}' (the config.mismatch log line names each).",
    ["kind", "name"],
)
CONFIG_MISMATCH_LAST = Gauge(
    "curaflow_config_mismatch_last_seconds",
    "When this process last met a route or source account a job names and it does not know "
    "(Unix time, seconds; kind 'route' | 'source' | 'setting'; names beyond the first "
    f"{CONFIG_MISMATCH_NAMES_MAX} of a kind under '{CONFIG_MISMATCH_OTHER}', as "
    "curaflow_config_mismatch_total). A gauge, so the alert sees "
    "the first one of a long-running process (a counter series born at 1 shows no increase).",
    ["kind", "name"],
)
#: The values of ``curaflow_config_mismatch_total``'s ``kind`` label.
CONFIG_MISMATCH_KINDS = ("route", "source", "setting")
#: The longest ``name`` label value of a configuration mismatch (a longer name is cut).
CONFIG_MISMATCH_NAME_MAX = 100
LEDGER_UNAVAILABLE_LAST = Gauge(
    "curaflow_ledger_unavailable_last_seconds",
    "When this process last failed on the ledger being unavailable (Unix time, seconds; "
    "curaflow.ledger.db.is_unavailable): where 'api' (a request answered 503 ledger_unavailable), "
    "'activity' (an activity attempt that ended on the ledger's error, retried by Temporal), "
    "'gauges' (a refresh of the ledger gauges). A fact the ledger cannot hold; a gauge, so the "
    "alert sees the first one of a long-running process.",
    ["where"],
)
#: The values of ``curaflow_ledger_unavailable_last_seconds``'s ``where`` label.
LEDGER_UNAVAILABLE_WHERE = ("api", "activity", "gauges")
TEMPORAL_UNAVAILABLE_LAST = Gauge(
    "curaflow_temporal_unavailable_last_seconds",
    "When this process last failed on Temporal being unavailable (Unix time, seconds; "
    "curaflow.temporal.answers.temporal_outage): where 'reconciler' (a tick that failed on an outage "
    "status — UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED — or in which Temporal, or a "
    "proxy before it, refused every request about a job's execution, EveryRequestRefused). A fact the "
    "ledger cannot hold; what CuraflowTemporalUnavailable reads.",
    ["where"],
)
#: The values of ``curaflow_temporal_unavailable_last_seconds``'s ``where`` label.
TEMPORAL_UNAVAILABLE_WHERE = ("reconciler",)
API_INTERNAL_ERRORS = Counter(
    "curaflow_api_internal_errors_total",
    "Requests the API answered 500 (internal error, on the job surface or the legacy one): an "
    "exception curaflow does not expect, a bug — the api.internal_error / legacy.refetch_failed "
    "line has its type (and traceback). A ledger outage answers 503 and is not counted here "
    '(curaflow_ledger_unavailable_last_seconds{where="api"}). What CuraflowApiInternalErrors reads.',
)
BACKGROUND_ERRORS = Counter(
    "curaflow_background_errors_total",
    "Failures of a supervised background loop (each one logged as background.loop_failed and "
    "followed by a restart with backoff); see curaflow.observability.supervision.",
    ["loop"],
)
#: What a finish was building or writing when the ledger refused a value
#: (``curaflow.ledger.finish.FINISH_VALUES``): the job's read, a hold's naming, a cell's
#: end, the outcome record, the terminal event.
FINISH_VALUES = ("read", "hold", "cell", "outcome", "event")
#: What came of it: the job ended degraded, or the degraded finish was refused too.
FINISH_DEGRADED_RESULTS = ("degraded", "not_stored")
FINISH_DEGRADED = Counter(
    "curaflow_finish_degraded_total",
    "Job finishes (the workflow's or the reconciler's) in which the ledger refused a value (SQLSTATE "
    "class 22 or 54, or a value that could not be built or encoded): 'degraded' ended the job with "
    "its free text replaced by 'message not storable' and no hold named; 'not_stored' wrote nothing "
    "(the job stays open). Each is a value curaflow does not bound yet: read the finish.degraded / "
    "finish.not_stored log line.",
    ["value", "result"],
)
LEDGER_STATEMENTS = Counter(
    "curaflow_ledger_statements_total",
    "Statements this process sent to the ledger, by the step that sent them (activity type; "
    "'background' outside activities). Counted only with observability.ledger_statement_metrics.",
    ["step"],
)
LEDGER_TRANSACTIONS = Counter(
    "curaflow_ledger_transactions_total",
    "Ledger transactions (BEGIN … COMMIT, or one statement outside such a block) by step; "
    "counted only with observability.ledger_statement_metrics.",
    ["step"],
)
_WORKER_UP: list[Gauge] = []
_API_UP: list[Gauge] = []


#: name → (help text, labels) of every gauge family read from the ledger at an interval
#: (:class:`curaflow.ledger.gauges.LedgerGauges`; the families are named here with every other).
LEDGER_GAUGE_FAMILIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "curaflow_jobs_open": (
        "Open jobs by protocol status (queued: every cell pending; running).",
        ("status",),
    ),
    "curaflow_oldest_open_job_age_seconds": (
        "Age of the oldest open job in seconds (0 when none is open).",
        (),
    ),
    "curaflow_jobs_stuck": (
        "Open jobs past their budget plus a minute with nothing moving them, by why "
        "(past_deadline, queued_too_long, no_heartbeat).",
        ("why",),
    ),
    "curaflow_callback_dead_letters": (
        "Job events whose push to the callback_url was given up (all time).",
        (),
    ),
    "curaflow_callback_pushes_pending": (
        "Job events waiting to be pushed to their callback_url.",
        (),
    ),
    "curaflow_source_cooldown_seconds": (
        "Rate-limit cooldown left on a source account's gate, seconds.",
        ("account",),
    ),
    "curaflow_deliveries": (
        "Delivery intents that reached a final status within the window, by route and status.",
        ("route", "status"),
    ),
    "curaflow_jobs_failed_last_seconds": (
        "When the last job ended with business status failed (Unix time, seconds; read from the ledger: "
        "no series while none did). What CuraflowJobsFailed reads.",
        (),
    ),
    "curaflow_cells_failed_last_seconds": (
        "When a cell last ended with this reason, for the reasons an alert pages on (auth_failed, "
        "account_restricted; Unix time, seconds; read from the ledger).",
        ("reason",),
    ),
    "curaflow_deliveries_last_seconds": (
        "When a delivery intent of the route last reached this final status (delivered, duplicate, "
        "failed: refused for good, unknown; Unix time, seconds; read from the ledger, looking back the "
        "deliveries' window and at least 2 hours).",
        ("route", "status"),
    ),
    "curaflow_route_paused_until_seconds": (
        "The end of the route's pause as broken, ahead while it is paused (Unix time, seconds; read from "
        "the ledger; no series once resumed).",
        ("route",),
    ),
    "curaflow_source_paused_until_seconds": (
        "The end of the source account's pause (its gate paused after the source restricted the "
        "account: every job of it fails at once until then), ahead while it is paused (Unix time, seconds; "
        "read from the ledger's source_gates; no series once resumed). What CuraflowSourceAccessRefused "
        "reads besides the cells.",
        ("account",),
    ),
    "curaflow_schedule_missed_last_seconds": (
        "When a time of the plan that started no job was last named, by why (Unix time, seconds; read "
        "from the ledger's schedule_misses, looking back at least 2 hours).",
        ("schedule_id", "why"),
    ),
    "curaflow_ledger_gauges_age_seconds": (
        "Age of this process's ledger snapshot, seconds.",
        (),
    ),
}


def set_worker_up(up: bool) -> None:
    """Set ``curaflow_worker_up`` (1 while this worker process serves its task queues).

    The gauge is registered on first use, so only worker processes export it: the API
    never shows a ``curaflow_worker_up 0`` that would look like a dead worker.
    """
    if not _WORKER_UP:
        _WORKER_UP.append(Gauge("curaflow_worker_up", "1 while this worker process serves its task queues."))
    _WORKER_UP[0].set(1 if up else 0)


def set_api_up(up: bool) -> None:
    """Set ``curaflow_api_up`` (1 while this API process serves requests, from the end of its
    start to the beginning of its shutdown).

    Registered on first use, so only API processes export it (a worker never shows a
    ``curaflow_api_up 0``). ``CuraflowNoApi`` pages on its absence: an API that exited and
    cannot start again (PostgreSQL unreachable at start) serves no metrics at all, and the
    alerts read from its series go silent (docs/operations.md "No background loop dies silently").
    """
    if not _API_UP:
        _API_UP.append(Gauge("curaflow_api_up", "1 while this API process serves requests."))
    _API_UP[0].set(1 if up else 0)


def exported_metric_names() -> set[str]:
    """Every series name curaflow's processes export (``curaflow_*``), as PromQL sees them.

    This module's counters (``…_total``), histograms (``…_bucket`` / ``…_sum`` /
    ``…_count``) and gauges, ``curaflow_worker_up``, ``curaflow_api_up`` and the ledger gauges
    (:data:`LEDGER_GAUGE_FAMILIES`, exported by :mod:`curaflow.ledger.gauges`). Alert rules
    and dashboards are checked against it.
    """
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
    names = {
        family.name + suffix
        for metric in globals().values()
        if isinstance(metric, Counter | Gauge | Histogram)
        for family in metric.describe()
        for suffix in suffixes[family.type]
    }
    return names | {"curaflow_worker_up", "curaflow_api_up"} | set(LEDGER_GAUGE_FAMILIES)


def _safe(fn: Any) -> Any:
    """Decorator: a metric helper never raises into business code."""

    def wrapper(*args: Any, **kwargs: Any) -> None:
        with contextlib.suppress(Exception):
            fn(*args, **kwargs)

    wrapper.__doc__ = fn.__doc__
    wrapper.__name__ = fn.__name__
    return wrapper


#: Job triggers (``JobInput.trigger``) and the protocol statuses a failed job ends with.
TRIGGERS = ("protocol", "temporal", "cli", "schedule")
FAILED_JOB_STATUSES = ("failed", "expired")
#: Cell reasons an alert pages on (``CuraflowSourceAccessRefused``).
ALERTED_CELL_REASONS = ("auth_failed", "account_restricted")
DELIVERY_RESULT_VALUES = ("delivered", "duplicate", "failed", "rejected", "unknown", "paused")


@_safe
def initialise_series(
    routes: Iterable[tuple[str, str]] = (), accounts: Iterable[str] = (), schedules: Iterable[str] = ()
) -> None:
    """Create at 0 the labelled counter series the alert rules watch, at process start.

    prometheus-client creates a labelled series on its first ``inc()``, at 1; Prometheus'
    ``increase()`` over a series whose first sample is 1 reads 0, so a process's first
    failure would never page. ``deploy/prometheus/alerts.yml`` relies on these series
    existing from the start (a failure counted before the process's first scrape is caught
    by its ``process_start_time_seconds`` term instead). Created here: failed jobs by every
    protocol status a ``failed`` business status can have and every trigger, the alerted
    cell reasons, every delivery result of every configured route, every kind of an
    unrecognised source answer of every configured account, every cause of a missed
    occurrence of every configured plan, every value and result of a degraded finish.

    Args:
        routes: ``(route name, route kind)`` of the configured routes.
        accounts: the configured source accounts (Pixiv's, ``default`` included).
        schedules: the configured plans' ids (a worker's: the schedule watch runs there).
    """
    for status in FAILED_JOB_STATUSES:
        for trigger in TRIGGERS:
            JOBS_TERMINAL.labels(status=status, business_status="failed", trigger=trigger)
    for reason in ALERTED_CELL_REASONS:
        CELLS_TERMINAL.labels(state="failed", reason=reason)
    for route, kind in routes:
        for result in DELIVERY_RESULT_VALUES:
            DELIVERY_RESULTS.labels(route=route, kind=kind, result=result)
        ROUTE_PAUSES.labels(route=route, kind=kind)
    for account in accounts:
        for kind in (*UNRECOGNISED_ANSWER_KINDS, INVALID_LISTED_KIND, ATTEMPTS_SPENT_KIND):
            SOURCE_UNRECOGNISED_ANSWERS.labels(account=account, kind=kind)
    for schedule_id in schedules:
        for why in MISS_CAUSES:
            SCHEDULE_MISSED.labels(schedule_id=schedule_id, why=why)
    for value in FINISH_VALUES:
        for result in FINISH_DEGRADED_RESULTS:
            FINISH_DEGRADED.labels(value=value, result=result)


@_safe
def record_finish_degraded(value: str, result: str) -> None:
    """Count one finish in which the ledger refused a value (``value``: one of
    :data:`FINISH_VALUES`; ``result``: ``degraded`` — the job ended degraded — or
    ``not_stored``)."""
    FINISH_DEGRADED.labels(value=value, result=result).inc()


@_safe
def record_admitted(trigger: str, job_type: str) -> None:
    """Count one first admission (``trigger``: protocol | temporal | cli | schedule;
    ``job_type``: the job's, as the ledger holds it)."""
    JOBS_ADMITTED.labels(trigger=trigger, job_type=job_type).inc()


@_safe
def record_terminal(
    *,
    status: str,
    business_status: str | None,
    trigger: str | None,
    created_at_ms: int | None,
    completed_at_ms: int | None,
    cells: Iterable[Any] = (),
) -> None:
    """Count a job that just became terminal (call once, where the outcome record is written).

    Args:
        status: protocol job status (``succeeded`` | ``failed`` | ``cancelled`` | ``expired``).
        business_status: outcome business status.
        trigger: how the job was created.
        created_at_ms / completed_at_ms: epoch ms (UTC) for the duration histogram.
        cells: the job's cells (objects with ``state`` and ``reason``).
    """
    verdict = business_status or ""
    JOBS_TERMINAL.labels(status=status, business_status=verdict, trigger=trigger or "").inc()
    if created_at_ms is not None and completed_at_ms is not None:
        JOB_DURATION.labels(business_status=verdict).observe(max(0.0, (completed_at_ms - created_at_ms) / 1000))
    for cell in cells:
        reason = getattr(cell, "reason", None) or ""
        state = str(getattr(cell, "state", ""))
        CELLS_TERMINAL.labels(state=state, reason=str(reason)).inc()
        if str(reason) == "stalled_no_heartbeat":
            HEARTBEAT_TIMEOUTS.labels(activity="cell").inc()


@_safe
def record_delivery_attempt(route: str, kind: str) -> None:
    """Count one request sent on ``route``."""
    DELIVERY_ATTEMPTS.labels(route=route, kind=kind).inc()


@_safe
def record_delivery_result(route: str, kind: str, result: str) -> None:
    """Count a delivery result (delivered | duplicate | failed | rejected | unknown)."""
    DELIVERY_RESULTS.labels(route=route, kind=kind, result=result).inc()


@_safe
def record_heartbeat_timeout(activity: str) -> None:
    """Count an attempt that found its predecessor's lease never released."""
    HEARTBEAT_TIMEOUTS.labels(activity=activity).inc()


@_safe
def record_activity(activity: str, task_queue: str, queue_wait_s: float | None, result: str | None = None) -> None:
    """Record an activity attempt's queue wait (at start) or its result (at end)."""
    if queue_wait_s is not None:
        ACTIVITY_QUEUE_WAIT.labels(activity=activity, task_queue=task_queue).observe(max(0.0, queue_wait_s))
    if result is not None:
        ACTIVITY_ATTEMPTS.labels(activity=activity, result=result).inc()


@_safe
def record_event_lag(lag_s: float) -> None:
    """Observe the age of the oldest event of a page read by a consumer."""
    EVENT_STREAM_LAG.observe(max(0.0, lag_s))


@_safe
def record_reconciled(cause: str) -> None:
    """Count a job converged by the reconciler (``cause``: a ``FinishCause`` value)."""
    RECONCILER_CONVERGED.labels(cause=cause).inc()


@_safe
def record_reconciler_start() -> None:
    """Count a workflow started by the reconciler."""
    RECONCILER_STARTED.inc()


@_safe
def record_occurrence(schedule_id: str, result: str, lag_s: float | None = None, *, configured: bool = True) -> None:
    """Count an occurrence admitted by the trampoline (``started`` | ``duplicate``).

    Args:
        configured: ``schedule_id`` is a configured plan's; else the occurrence counts
            under :data:`UNCONFIGURED_PLAN` (the id came from the trampoline's start
            argument, which any client of the namespace writes: one series per id sent
            grew every worker's metrics without bound).
    """
    label = schedule_id if configured else UNCONFIGURED_PLAN
    SCHEDULE_OCCURRENCES.labels(schedule_id=label, result=result).inc()
    if lag_s is not None:
        SCHEDULE_START_LAG.labels(schedule_id=label).observe(max(0.0, lag_s))


@_safe
def record_missed(schedule_id: str, why: str, count: int, *, configured: bool = True) -> None:
    """Count occurrences a plan did not run (``why``: a :class:`~curaflow.domain.occurrence.MissCause`).

    Args:
        configured: ``schedule_id`` is a plan this process configures; else the misses
            count under :data:`UNCONFIGURED_PLAN` (as :func:`record_occurrence`: the id of
            an occurrence no worker could admit came from its trampoline's argument).
    """
    if count > 0:
        label = schedule_id if configured else UNCONFIGURED_PLAN
        SCHEDULE_MISSED.labels(schedule_id=label, why=why).inc(count)


@_safe
def set_schedule_broken(schedule_id: str, why: str | None) -> None:
    """Set ``curaflow_schedule_broken`` of a plan: 1 for ``why`` (one of
    :data:`SCHEDULE_BROKEN_WHYS`), 0 for the others; ``None``: the plan's schedule is whole."""
    for each in SCHEDULE_BROKEN_WHYS:
        SCHEDULE_BROKEN.labels(schedule_id=schedule_id, why=each).set(1 if each == why else 0)


@_safe
def clear_schedule_broken() -> None:
    """Drop this process's ``curaflow_schedule_broken`` series: another process watches the
    schedules now (its values, not this process's last ones, are the current state)."""
    SCHEDULE_BROKEN.clear()


@_safe
def record_skipped_day(account: str) -> None:
    """Count a day the source could not page fully (a scan of ``account``)."""
    SOURCE_DAYS_NOT_FULLY_PAGED.labels(account=account).inc()


@_safe
def record_account_paused(account: str) -> None:
    """Count an account (any source instance) paused after its source restricted it."""
    SOURCE_ACCOUNT_PAUSED.labels(account=account).inc()


@_safe
def record_unrecognised_answer(account: str, kind: str) -> None:
    """Count a work skipped on a source answer not recognised as the work's (``kind``: the
    :class:`~curaflow.sources.errors.UnavailableKind` it was raised with, or
    :data:`ATTEMPTS_SPENT_KIND` for a work held after its cell's last fetch attempt). The ``fetch``
    activity calls it once the transaction remembering the hold committed and only when
    the hold was written (:func:`curaflow.ledger.remembered.remember_unavailable`), or
    holds are off: a retried attempt does not count the same hold twice."""
    SOURCE_UNRECOGNISED_ANSWERS.labels(account=account, kind=kind).inc()


@_safe
def record_invalid_listed(account: str, items: int) -> None:
    """Count ``items`` items of search pages of ``account`` in a shape curaflow does not read
    (the scan's ``invalid`` rejections: a renamed field on every item shows here, not only as
    jobs ending ``source_unusable``), under kind :data:`INVALID_LISTED_KIND`. The ``search``
    activity calls it once the checkpoint or the result holding them is committed, for
    those not counted before (:class:`activities.search._Hooks`): once per examination."""
    if items > 0:
        SOURCE_UNRECOGNISED_ANSWERS.labels(account=account, kind=INVALID_LISTED_KIND).inc(items)


@_safe
def record_refusal(route: str, kind: str) -> None:
    """Count a work a route refused for good."""
    ROUTE_REFUSALS.labels(route=route, kind=kind).inc()


@_safe
def record_ledger_statement(step: str, transaction: bool) -> None:
    """One ledger statement sent by ``step`` (``transaction``: it opened one)."""
    LEDGER_STATEMENTS.labels(step=step).inc()
    if transaction:
        LEDGER_TRANSACTIONS.labels(step=step).inc()


@_safe
def record_route_paused(route: str, kind: str) -> None:
    """Count a route paused for a refusal streak, or at once for its destination gone (once per pause)."""
    ROUTE_PAUSES.labels(route=route, kind=kind).inc()


class MismatchNames:
    """The ``name`` label values of the configuration mismatches of this process: the first
    :data:`CONFIG_MISMATCH_NAMES_MAX` distinct names (cut at :data:`CONFIG_MISMATCH_NAME_MAX`)
    of each kind, held for the life of the process (their series live as long), and
    :data:`CONFIG_MISMATCH_OTHER` for any other.

    The name is read from the job's input before the step opens, and any Temporal client of
    the namespace writes a job's input (a start under an admitted job's id with an edited
    ``JobInput`` is refused only when the step opens, ``activities.caller``): until
    2026-12-07 each name made up became two series for good, without bound. Thread-safe
    (activities run in the event loop and in threads).
    """

    def __init__(self) -> None:
        self._held: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def label(self, kind: str, name: str) -> str:
        """The label value ``name`` of ``kind`` is counted under (taking a free slot for it)."""
        cut = name[:CONFIG_MISMATCH_NAME_MAX]
        with self._lock:
            held = self._held.setdefault(kind, set())
            if cut in held:
                return cut
            if len(held) < CONFIG_MISMATCH_NAMES_MAX:
                held.add(cut)
                return cut
        return CONFIG_MISMATCH_OTHER


_MISMATCH_NAMES = MismatchNames()


@_safe
def record_config_mismatch(kind: str, name: str, at_s: float) -> None:
    """Count one step attempt that met a route or source account the job names and this
    process does not know (``kind``: ``route`` | ``source`` | ``setting`` — a setting the
    step needs and this process lacks; ``name``: the job's — a name of
    the configuration of the process that admitted it, or one a Temporal client made up),
    and remember when (``at_s``: Unix time, seconds) for the alert
    ``CuraflowConfigurationMismatch``. The label is ``name`` cut at
    :data:`CONFIG_MISMATCH_NAME_MAX` while it is one of the first
    :data:`CONFIG_MISMATCH_NAMES_MAX` of its kind this process met, else
    :data:`CONFIG_MISMATCH_OTHER` (:class:`MismatchNames`)."""
    label = _MISMATCH_NAMES.label(kind, name)
    CONFIG_MISMATCHES.labels(kind=kind, name=label).inc()
    CONFIG_MISMATCH_LAST.labels(kind=kind, name=label).set(at_s)


@_safe
def record_ledger_unavailable(where: str, at_s: float | None = None) -> None:
    """Remember when this process last failed on the ledger being unavailable (``where``:
    one of :data:`LEDGER_UNAVAILABLE_WHERE`; ``at_s``: Unix time, seconds, default now), for
    the alert ``CuraflowLedgerUnavailable``: a ledger that refuses writes (a full disk, a
    standby after a failover) while it answers reads keeps the ledger gauges fresh and
    every other alert silent."""
    LEDGER_UNAVAILABLE_LAST.labels(where=where).set(time.time() if at_s is None else at_s)


@_safe
def record_temporal_unavailable(where: str, at_s: float | None = None) -> None:
    """Remember when this process last failed on Temporal being unavailable (``where``: one
    of :data:`TEMPORAL_UNAVAILABLE_WHERE`; ``at_s``: Unix time, seconds, default now), for the
    alert ``CuraflowTemporalUnavailable``: a reconciler whose every tick fails on Temporal
    converges no job, and only ``CuraflowJobsStuck`` would page, past the jobs' deadlines."""
    TEMPORAL_UNAVAILABLE_LAST.labels(where=where).set(time.time() if at_s is None else at_s)


@_safe
def record_api_answer(status: int) -> None:
    """Count an API answer of HTTP ``status`` 500 (curaflow's own failure) in
    ``curaflow_api_internal_errors_total``; any other status counts nothing (a 503 of a ledger
    outage has its own gauge, a 4xx is the consumer's)."""
    if status == 500:
        API_INTERNAL_ERRORS.inc()


@_safe
def record_background_error(loop: str) -> None:
    """Count one failure of the supervised background loop ``loop``."""
    BACKGROUND_ERRORS.labels(loop=loop).inc()


def render_latest() -> tuple[bytes, str]:
    """The exposition of the default registry: ``(body, content type)``."""
    return generate_latest(), CONTENT_TYPE_LATEST


def start_metrics_server(port: int, addr: str = "0.0.0.0") -> None:
    """Serve ``/metrics`` of this process on ``addr:port`` (a daemon thread).

    Raises:
        OSError: the port is taken.
    """
    start_http_server(port, addr=addr)

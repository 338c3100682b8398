"""A worker's telemetry: the activity interceptor and the SDK runtime metrics.

* :class:`ObservabilityInterceptor` (a Temporal worker interceptor) wraps every activity
  attempt: it binds ``job_id``, ``target_id``, ``route``, ``activity`` and ``attempt`` to
  the structlog context (so every log line an activity writes carries them), observes
  the queue wait (scheduled → started) and the attempt's result, and counts attempts
  that resume a cell whose previous attempt never released its lease (a heartbeat
  timeout: the worker died or hung).
* :class:`AttemptOnFailure` (the second activity interceptor) adds the attempt's number
  to each retryable ``ApplicationError`` of a cell's step
  (:func:`curaflow.domain.verdicts.failures.attempt_detail`): Temporal's activity failure
  does not carry it, and the workflow tells an operator's cut of the step's retries by it
  (:func:`curaflow.domain.verdicts.failures.operator_changed_options`).
* Tracing (OpenTelemetry) is :mod:`curaflow.observability.tracing`: every Temporal client
  of a process takes its interceptor from there, whatever its layer.
* :func:`temporal_runtime` gives the SDK runtime a Prometheus endpoint of its own
  (``observability.temporal_metrics_port``) for Temporal's metrics (task slots, poll
  and schedule-to-start latencies, activity/workflow execution results).
"""

from __future__ import annotations

import errno
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import asyncpg
import structlog
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from curaflow.config import Settings
from curaflow.domain.verdicts.failures import attempt_detail, attempt_of
from curaflow.ledger.db import LEDGER_ERRORS, is_unavailable
from curaflow.observability import metrics
from curaflow.observability.logs import get_logger
from curaflow.process.httpserver import CannotListen
from curaflow.sources.gate import GateUnavailable

log = get_logger("curaflow.process.telemetry")
CELL_ACTIVITIES = ("search", "fetch", "deliver")
#: The activities of a cell's steps (``StepFailure.step``): their retryable failures carry
#: the attempt's number (:class:`AttemptOnFailure`).
STEP_ACTIVITIES = ("acquire", "search", "fetch", "deliver")
_state: dict[str, Any] = {"runtime": None}


# ---- activity interceptor ------------------------------------------------------------


def _fields_of(arg: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    job_id = getattr(arg, "job_id", None)
    if job_id:
        fields["job_id"] = job_id
    target = getattr(arg, "target", None)
    if target is not None and getattr(target, "target_id", None):
        fields["target_id"] = target.target_id
    route = getattr(arg, "route", None)
    if route is not None and getattr(route, "name", None):
        fields["route"] = route.name
    return fields


#: The ledger's own errors, as an activity lets them out (asyncpg's, the rate gate's).
_LEDGERS_OWN: tuple[type[BaseException], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
    GateUnavailable,
)


def ledger_failed(err: BaseException) -> bool:
    """Whether an activity attempt ended on the ledger being unavailable: an exception let
    out as it is (never an ``ApplicationError``, which types a source's or a route's answer
    by reason), one of the ledger's own (:data:`_LEDGERS_OWN`, or raised ``from`` one) that
    :func:`curaflow.ledger.db.is_unavailable` classifies as an outage. A bare socket error or
    timeout is not counted here (a source's or the disk's may be one); a ledger that does not
    answer at all stops the ledger gauges' refresh, which is counted."""
    if isinstance(err, ApplicationError):
        return False
    seen = 0
    current: BaseException | None = err
    while current is not None and seen < 8:
        if isinstance(current, _LEDGERS_OWN):
            return is_unavailable(err)
        current, seen = current.__cause__, seen + 1
    return False


class _Inbound(ActivityInboundInterceptor):
    def __init__(self, nxt: ActivityInboundInterceptor, pool: asyncpg.Pool | None) -> None:
        super().__init__(nxt)
        self._pool = pool

    async def _lapsed_lease(self, name: str, fields: dict[str, Any]) -> bool:
        if self._pool is None or name not in CELL_ACTIVITIES or "target_id" not in fields:
            return False
        try:
            owner = await self._pool.fetchval(
                "SELECT lease_owner FROM cells WHERE job_id = $1 AND target_id = $2 AND completed_at IS NULL",
                fields["job_id"],
                fields["target_id"],
            )
        except LEDGER_ERRORS:
            return False
        return owner is not None

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        fields = _fields_of(input.args[0]) if input.args else {}
        if "job_id" not in fields and info.workflow_id:
            fields["job_id"] = info.workflow_id
        name = info.activity_type
        started = info.started_time or datetime.now(UTC)
        wait_s = (started - info.current_attempt_scheduled_time).total_seconds()
        metrics.record_activity(name, info.task_queue, wait_s)
        with structlog.contextvars.bound_contextvars(activity=name, attempt=info.attempt, **fields):
            if info.attempt > 1 and await self._lapsed_lease(name, fields):
                metrics.record_heartbeat_timeout(name)
                log.warning("activity.previous_attempt_lost", queue_wait_s=round(wait_s, 3))
            t0 = time.perf_counter()
            result = "error"
            try:
                out = await self.next.execute_activity(input)
                result = "ok"
                return out
            except BaseException as err:
                result = "cancelled" if type(err).__name__ in ("CancelledError",) else "error"
                if ledger_failed(err):
                    metrics.record_ledger_unavailable("activity")
                raise
            finally:
                metrics.record_activity(name, info.task_queue, None, result)
                log.debug(
                    "activity.attempt_done", result=result, elapsed_ms=round((time.perf_counter() - t0) * 1000, 1)
                )


class ObservabilityInterceptor(Interceptor):
    """Worker interceptor: log context, queue wait, attempt results, lost attempts.

    Args:
        pool: the ledger pool (to recognise an attempt whose predecessor never released
            the cell's lease); None disables that check.
    """

    def __init__(self, pool: asyncpg.Pool | None = None) -> None:
        self._pool = pool

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        """Wrap every activity attempt of the worker."""
        return _Inbound(next, self._pool)


class _AttemptInbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        try:
            return await self.next.execute_activity(input)
        except ApplicationError as err:
            info = activity.info()
            if err.non_retryable or info.activity_type not in STEP_ACTIVITIES or attempt_of(err.details) is not None:
                raise
            carried = ApplicationError(
                err.message,
                *err.details,
                attempt_detail(info.attempt),
                type=err.type,
                non_retryable=False,
                next_retry_delay=err.next_retry_delay,
                category=err.category,
            )
            raise carried.with_traceback(err.__traceback__) from err.__cause__


class AttemptOnFailure(Interceptor):
    """Worker interceptor: a retryable ``ApplicationError`` a cell's step raises
    (:data:`STEP_ACTIVITIES`) leaves the attempt with the attempt's number added after its
    own details (:func:`~curaflow.domain.verdicts.failures.attempt_detail`), its message,
    type, delay, category and cause as raised. A non-retryable one (Temporal retries it no
    more, whatever the policy), one of another activity, one that carries the number
    already and an exception that is no ``ApplicationError`` are left as raised."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        """Wrap every activity attempt of the worker."""
        return _AttemptInbound(next)


# ---- Temporal SDK runtime metrics -----------------------------------------------------------


def temporal_runtime(settings: Settings, host: str | None = None) -> Any:
    """A Temporal :class:`~temporalio.runtime.Runtime` exporting the SDK's Prometheus metrics.

    Created once per process; None when ``observability.temporal_metrics_port`` is unset
    (the SDK's default runtime is used). The endpoint listens on
    ``observability.metrics_host`` like curaflow's own metrics (an IPv6 address in
    brackets), so a host that keeps its metrics private keeps both private.

    Args:
        host: overrides ``observability.metrics_host``.

    Raises:
        CannotListen: the SDK could not serve its metrics on that address (a taken port).
    """
    port = settings.observability.temporal_metrics_port
    if port is None:
        return None
    if _state["runtime"] is None:
        from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

        bind = host if host is not None else settings.observability.metrics_host
        if ":" in bind and not bind.startswith("["):
            bind = f"[{bind}]"
        try:
            _state["runtime"] = Runtime(
                telemetry=TelemetryConfig(
                    metrics=PrometheusConfig(bind_address=f"{bind}:{port}", durations_as_seconds=True),
                    global_tags={"service": "curaflow-worker"},
                )
            )
        except ValueError as err:  # the SDK's core could not bind its exporter (a taken port …)
            raise CannotListen(bind, port, OSError(errno.EADDRINUSE, str(err))) from err
    return _state["runtime"]


def interceptors_for_worker(pool: asyncpg.Pool | None) -> Sequence[Interceptor]:
    """The worker interceptors of a curaflow worker."""
    return [ObservabilityInterceptor(pool), AttemptOnFailure()]

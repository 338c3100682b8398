"""The HTTP API application (FastAPI): Workflow Protocol v1 over the ledger and Temporal.

:func:`create_app` builds the app; its lifespan opens the ledger pool (applying
migrations), connects to Temporal (retrying in the background if it is down: reads
keep working from the ledger, admissions are started by the reconciler later) and runs
the reconciler loop, the workflow starter and one ``LISTEN`` connection waking
long-polling event readers (:class:`~curaflow.ledger.listen.EventNotifier`), all as
supervised loops (:mod:`curaflow.observability.supervision`; ``GET /ready`` reports them). Run it
with ``curaflow api`` or as part of ``curaflow dev``.

Every request on the job surface ends with one JSON log line (reference §9.2): the
original's event name (``schedule.job_admitted`` / ``schedule.job_cancelled`` /
``schedule.job_rejected`` with ``{code, stage}``; ``api.request`` for other answers),
``http_status``, ``path``, ``method``, ``elapsed_ms`` and, when the caller sent them,
the sanitised ``attempt_id`` (``X-Schedule-Attempt-Id``, else ``X-Attempt-Id``) and
``provider`` (``X-Schedule-Provider``). Headers and query strings are never logged, so
the bearer token never is.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

from fastapi import FastAPI, Request, Response
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.service import RPCError

import curaflow
from curaflow.api.docs import install_docs
from curaflow.api.errors import ErrorBoundary, install_error_handlers
from curaflow.api.events import PageReads, events_router
from curaflow.api.jobs import jobs_router
from curaflow.api.legacy import legacy_router
from curaflow.api.meta import open_router, protected_router
from curaflow.api.openapi import build_openapi
from curaflow.config import Settings, warn_budget_fallbacks
from curaflow.jobs.admission import Admitter, WorkflowStarter
from curaflow.ledger.db import LEDGER_ERRORS, create_pool, migrate
from curaflow.ledger.finish import hold_caps
from curaflow.ledger.gauges import run_ledger_gauges
from curaflow.ledger.listen import EventNotifier
from curaflow.ledger.reconciler import run_forever
from curaflow.observability.logs import get_logger
from curaflow.observability.metrics import initialise_series, record_api_answer, render_latest, set_api_up
from curaflow.observability.supervision import EXIT_LOOP_FAILED, Beat, LoopBody, SupervisionPolicy, Supervisor
from curaflow.observability.tracing import instrument_app, setup_tracing
from curaflow.process.http_methods import MethodRules
from curaflow.process.refusals import refused_setting
from curaflow.temporal.answers import refused_configuration, status_name
from curaflow.temporal.connection import connect_configured

log = get_logger("curaflow.api")


async def metrics_endpoint() -> Response:
    """Prometheus exposition of this process's metrics (``curaflow_*``, the ledger gauges and the
    Python runtime's; never ``curaflow_worker_up``, which only workers export)."""
    body, content_type = render_latest()
    return Response(body, media_type=content_type)


#: Probes, asked every few seconds by orchestrators: not logged.
UNLOGGED_PATHS = ("/health", "/ready")
OUTCOME_EVENTS = {
    ("POST", "/jobs"): ("schedule.job_admitted", "job admission failed"),
    ("GET", "/jobs"): (None, "job lookup failed"),
    ("GET", "/jobs/{job_id}"): (None, "job lookup failed"),
    ("POST", "/jobs/{job_id}/cancel"): ("schedule.job_cancelled", "job cancel failed"),
    ("GET", "/jobs/{job_id}/events"): (None, "job events failed"),
    ("POST", "/jobs/{job_id}/events/ack"): (None, "job ack failed"),
    ("GET", "/capabilities"): (None, "capabilities failed"),
}
_ATTEMPT_ID_DROP = re.compile(r"[^A-Za-z0-9._:-]")
_PROVIDER_DROP = re.compile(r"[^A-Za-z0-9._-]")


def sanitize_header(value: str | None, drop: re.Pattern[str], max_length: int) -> str | None:
    """Reduce a caller-supplied header to the allowed characters (reference §9.2).

    Returns:
        At most ``max_length`` allowed characters, or None when the header is absent or
        nothing allowed remains (never synthesised).
    """
    if value is None:
        return None
    cleaned = drop.sub("", value)[:max_length]
    return cleaned or None


def request_context(request: Request) -> dict[str, Any]:
    """``attempt_id`` / ``provider`` of a request, sanitised; absent keys when not sent."""
    fields: dict[str, Any] = {}
    attempt = request.headers.get("x-schedule-attempt-id") or request.headers.get("x-attempt-id")
    attempt_id = sanitize_header(attempt, _ATTEMPT_ID_DROP, 64)
    if attempt_id:
        fields["attempt_id"] = attempt_id
    provider = sanitize_header(request.headers.get("x-schedule-provider"), _PROVIDER_DROP, 32)
    if provider:
        fields["provider"] = provider
    return fields


def temporal_connector(app: FastAPI, settings: Settings) -> LoopBody:
    """The body of the API's finite ``temporal_connect`` loop: connect, then end.

    Temporal down at start-up is not fatal to the API: reads keep working from the
    ledger and the reconciler starts the workflows of jobs admitted meanwhile. Each
    failed attempt is logged and counted like any loop failure, and retried with backoff.
    """

    async def body(beat: Beat) -> None:
        assert settings.temporal.address
        app.state.client = await connect_configured(settings.temporal)
        app.state.admitter.client = app.state.client
        beat.ok()
        log.info("api.temporal_connected", address=settings.temporal.address)

    return body


#: The longest the API waits for Temporal's answer about its namespace, seconds.
NAMESPACE_PROBE_TIMEOUT_S = 10.0


def namespace_probe(app: FastAPI, settings: Settings) -> Callable[[], Awaitable[None]]:
    """The tick of the API's ``temporal_namespace`` loop: describe the configured namespace
    on the connected client (nothing while none is connected: ``temporal_connect`` tells
    that), and fail only when Temporal refuses the process's configuration — a namespace
    that does not exist, its access (:func:`curaflow.temporal.answers.refused_configuration`):
    the loop is fatal, and the process exits 2 naming the setting once it has not recovered
    within ``supervision.fatal_after_ms`` (a worker that registers the namespace meanwhile —
    docs/operations.md lets the first worker do it — ends the failure). Any other answer (an
    outage) passes: the API serves reads from the ledger while Temporal is away.

    Until 2026-12-08 an API whose ``TEMPORAL_NAMESPACE`` did not exist served on, healthy,
    until a job was admitted: nothing it did asked Temporal of its namespace.
    """

    async def tick() -> None:
        client = app.state.client
        if client is None:
            return
        request = DescribeNamespaceRequest(namespace=settings.temporal.namespace)
        try:
            await client.workflow_service.describe_namespace(
                request, timeout=timedelta(seconds=NAMESPACE_PROBE_TIMEOUT_S)
            )
        except RPCError as err:
            if refused_configuration(err):
                raise
            log.info("api.temporal_namespace_unanswered", status=status_name(err))

    return tick


def _request_answered(request: Request, status: int, elapsed_ms: float) -> None:
    """The request log (:class:`~curaflow.api.errors.ErrorBoundary`'s ``on_answered``), and
    the count of answers 500 (:func:`~curaflow.observability.metrics.record_api_answer`, every path)."""
    record_api_answer(status)
    if request.url.path not in UNLOGGED_PATHS:
        _log_outcome(request, status, elapsed_ms)


def _log_outcome(request: Request, status: int, elapsed_ms: float) -> None:
    """Write the one outcome line of a request (see the module doc)."""
    route = request.scope.get("route")
    template = getattr(route, "path_format", None)
    names = OUTCOME_EVENTS.get((request.method, template)) if template else None
    fields: dict[str, Any] = {
        "http_status": status,
        "path": request.url.path,
        "method": request.method,
        "elapsed_ms": elapsed_ms,
        **request_context(request),
        **getattr(request.state, "log_fields", {}),
    }
    if status >= 400:
        code = getattr(request.state, "error_code", None) or ("internal_error" if status >= 500 else None)
        # ``stage`` is the reference's log field (§9.2): what failed, e.g. "job admission failed".
        failed = names[1] if names else "request failed"
        # The reference's ``schedule.job_rejected`` names a refused admission only: a failed
        # read, cancel or ack rejected no job (a client counting rejected jobs must not count them).
        rejected = (request.method, template) == ("POST", "/jobs")
        log.info("schedule.job_rejected" if rejected else "api.request_failed", code=code, stage=failed, **fields)
        # A body cut by the server's own shutdown (server_stopping) is no failure of the API's.
        if status >= 500 and getattr(request.state, "error_reason", None) != "server_stopping":
            log.error("Job API request failed", code=code, stage=failed, **fields)
    elif names and names[0]:
        log.info(names[0], **fields)
    else:
        log.info("api.request", **fields)


def begin_shutdown(app: FastAPI) -> None:
    """The server hosting ``app`` is stopping (:class:`curaflow.process.httpserver.StoppingServer`'s
    ``on_stopping``): requests waiting on a job's events answer now with what the ledger
    holds — a long poll its page (empty, as at its timeout), a cancel the job as it is —
    and a request body still arriving gets :data:`curaflow.api.body.STOPPING_GRACE_S`
    more, then a retryable 503 (``server_stopping``), instead of holding the graceful
    shutdown for the rest of their wait (a long poll's ``wait_ms`` and
    ``api.body_timeout_ms`` are up to 30 s, longer than a supervisor's usual stop timeout).

    Safe before the lifespan started (nothing waits yet) and when called twice.
    """
    app.state.stopping.set()  # a body still trickling in is cut (curaflow.api.body.ServerStopping)
    notifier = getattr(app.state, "notifier", None)
    if notifier is not None:
        notifier.release_waiters()


def create_app(
    settings: Settings,
    *,
    on_fatal: Callable[[str], None] | None = None,
    refused: Callable[[BaseException], str | None] = refused_setting,
) -> FastAPI:
    """Build the API app for ``settings`` (``database.url`` must be set).

    Tracing (FastAPI instrumentation + the Temporal tracing interceptor) is enabled
    when ``observability.tracing`` is set; ``GET /metrics`` serves the Prometheus
    metrics of this process (no token: scrape it from the private network).

    Args:
        on_fatal: called once with the reason when a background loop cannot recover
            (:mod:`curaflow.observability.supervision`); ``curaflow api`` shuts the server down and
            exits with status 3. Without it the failure shows in ``/ready`` (503) only.
        refused: the setting a refusal of the configuration names
            (:func:`curaflow.process.refusals.refused_setting`; ``curaflow dev``'s names its
            own PostgreSQL, :func:`curaflow.process.refusals.embedded_refused_setting`).

    Raises:
        RuntimeError: at start-up when the database is not configured.
    """
    setup_tracing(
        "curaflow-api", enabled=settings.observability.tracing, otlp_endpoint=settings.observability.otlp_endpoint
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if not settings.database.url:
            raise RuntimeError("the API needs DATABASE_URL (or run `curaflow dev`)")
        token = settings.api.token.get_secret_value().strip() if settings.api.token else ""
        if not token:
            if settings.api.insecure:
                log.warning("api.insecure: no token configured, protected routes are OPEN")
            else:
                log.warning("api.fail_closed: no CURAFLOW_API_TOKEN configured; protected routes answer 503")
        warn_budget_fallbacks(settings, log)
        pool = await create_pool(
            settings.database.url,
            min_size=settings.database.pool_min_size,
            max_size=settings.database.pool_max_size,
            **settings.database.pool_bounds(cap_ms=settings.api.ledger_timeout_ms),
        )
        # The background loops (reconciler, ledger gauges) scan more than a request reads:
        # their own small pool keeps the database's bounds, not the requests' tight one.
        background = await create_pool(settings.database.url, min_size=1, max_size=2, **settings.database.pool_bounds())
        await migrate(background)
        app.state.pool = pool
        initialise_series(((name, route.kind) for name, route in settings.routes.items()), settings.source_configs())
        stop = asyncio.Event()

        def failed(reason: str) -> None:
            app.state.failure = reason
            app.state.failure_status = supervisor.exit_status  # 3, or 2 for a refused configuration
            if on_fatal is not None:
                on_fatal(reason)

        supervisor = Supervisor(
            stop,
            SupervisionPolicy.from_settings(settings),
            on_fatal=failed,
            refused_setting=refused,
        )
        app.state.supervisor = supervisor
        app.state.notifier = await EventNotifier(settings.database.url).start(supervisor)
        app.state.client = None
        app.state.admitter = Admitter(settings, pool, None)
        starter = WorkflowStarter(app.state.admitter.start, settings.api.start_concurrency, supervisor=supervisor)
        app.state.admitter.starter = starter
        if settings.temporal.address:
            try:
                app.state.client = await connect_configured(settings.temporal)
                app.state.admitter.client = app.state.client
            except Exception as err:  # noqa: BLE001 - Temporal down: serve reads, keep connecting
                log.warning("api.temporal_unreachable", error=type(err).__name__)
                supervisor.loop("temporal_connect", temporal_connector(app, settings), finite=True, fatal=False)

        async def start(job_id: str) -> None:
            if app.state.admitter.client is not None:
                await app.state.admitter.start(job_id)

        reconciler = asyncio.create_task(
            run_forever(
                background,
                start,
                settings.reconcile_interval_ms / 1000,
                stop,
                lambda: app.state.client,
                supervisor=supervisor,
                caps=hold_caps(settings),
                task_queue=settings.temporal.task_queue,
                foreign_queue_wait_ms=settings.foreign_queue_wait_ms,
            )
        )
        if settings.temporal.address:
            # As often as the reconciler looks at the jobs (reconcile_interval_ms, 30 s): a
            # namespace deleted under a running API is told within it and fatal_after_ms.
            supervisor.every(
                "temporal_namespace",
                settings.reconcile_interval_ms / 1000,
                namespace_probe(app, settings),
                timeout_s=NAMESPACE_PROBE_TIMEOUT_S * 2,
            )
        # The gauges' own loop never raises ("a metric must never take a process down");
        # supervised, not fatal, so it shows in /ready and a death would be seen.
        supervisor.loop("ledger_gauges", lambda _beat: run_ledger_gauges(background, settings, stop), fatal=False)
        set_api_up(True)
        try:
            yield
        finally:
            set_api_up(False)
            await starter.close()
            stop.set()
            await supervisor.close()
            reconciler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reconciler
            await app.state.notifier.stop()
            for each in (pool, background):
                try:
                    await asyncio.wait_for(each.close(), 10)
                except LEDGER_ERRORS:
                    each.terminate()

    app = FastAPI(
        title="curaflow job API",
        version=curaflow.__version__,
        description="Workflow Protocol v1: candidate_search jobs on Temporal and PostgreSQL.",
        lifespan=lifespan,
        docs_url=None,  # served from the package instead of a CDN (curaflow.api.docs)
        redoc_url=None,
        # ``/capabilities/`` is no address of the API: a protocol 404, not Starlette's 307 to
        # ``/capabilities`` on whatever host the request's Host header named (2026-12-07).
        redirect_slashes=False,
    )
    app.state.settings = settings
    app.state.failure = None
    app.state.failure_status = EXIT_LOOP_FAILED
    app.state.stopping = asyncio.Event()  # set by begin_shutdown
    app.state.supervisor = None
    app.state.page_reads = PageReads()  # long polls woken together read their page once
    install_error_handlers(app)
    app.include_router(open_router)
    app.include_router(protected_router)
    # The event routes first: ``/jobs/{job_id:path}`` would otherwise swallow ``…/events``.
    app.include_router(events_router)
    app.include_router(jobs_router)
    app.include_router(legacy_router)  # PixivFlow's legacy refetch shim (TelePost's rollback switch)
    app.add_api_route("/metrics", metrics_endpoint, methods=["GET"], tags=["meta"], include_in_schema=False)
    install_docs(app)
    instrument_app(app)
    app.add_middleware(MethodRules, router=app.router)  # HEAD and OPTIONS on every path
    # Outermost: answers what escaped the routes, then logs every answer (the 500s too).
    app.add_middleware(ErrorBoundary, on_answered=_request_answered)

    def openapi() -> dict[str, Any]:
        if not app.openapi_schema:
            app.openapi_schema = build_openapi(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app

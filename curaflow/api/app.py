"""The HTTP API application (FastAPI): Workflow Protocol v1 over the ledger and Temporal.

:func:`create_app` builds the app; its lifespan opens the ledger pool (applying
migrations), connects to Temporal (retrying in the background if it is down: reads
keep working from the ledger, admissions are started by the reconciler later) and runs
the reconciler loop. Run it with ``curaflow api`` or as part of ``curaflow dev``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.openapi.utils import get_openapi

import curaflow
from curaflow.admission import Admitter
from curaflow.api.errors import install_error_handlers
from curaflow.api.routes import protected, router
from curaflow.config import Settings
from curaflow.ledger.db import create_pool, migrate
from curaflow.ledger.reconciler import run_forever
from curaflow.logs import get_logger
from curaflow.metrics import render_latest
from curaflow.protocol import models
from curaflow.telemetry import instrument_app, setup_tracing
from curaflow.temporal import connect

log = get_logger("curaflow.api")


async def metrics_endpoint() -> Response:
    """Prometheus exposition of this process's metrics (``curaflow_*`` and the Python runtime's)."""
    body, content_type = render_latest()
    return Response(body, media_type=content_type)


OUTCOME_EVENTS = {
    ("POST", "/jobs"): ("schedule.job_admitted", "job admission failed"),
    ("GET", "/jobs"): (None, "job lookup failed"),
    ("GET", "/jobs/{job_id}"): (None, "job lookup failed"),
    ("POST", "/jobs/{job_id}/cancel"): ("schedule.job_cancelled", "job cancel failed"),
    ("GET", "/jobs/{job_id}/events"): (None, "job events failed"),
    ("POST", "/jobs/{job_id}/events/ack"): (None, "job ack failed"),
    ("GET", "/capabilities"): (None, "capabilities failed"),
}


async def _connect_with_retry(app: FastAPI, settings: Settings) -> None:
    assert settings.temporal.address
    delay = 0.5
    while True:
        try:
            app.state.client = await connect(settings.temporal.address, settings.temporal.namespace)
            app.state.admitter.client = app.state.client
            return
        except Exception as err:  # noqa: BLE001 - Temporal down: keep serving reads, retry
            log.warning("api.temporal_unreachable", error=type(err).__name__, retry_in_s=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)


def create_app(settings: Settings) -> FastAPI:
    """Build the API app for ``settings`` (``database.url`` must be set).

    Tracing (FastAPI instrumentation + the Temporal tracing interceptor) is enabled
    when ``observability.tracing`` is set; ``GET /metrics`` serves the Prometheus
    metrics of this process (no token: scrape it from the private network).

    Raises:
        RuntimeError: at start-up when the database is not configured.
    """
    setup_tracing(settings, "curaflow-api")

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
        pool = await create_pool(
            settings.database.url, min_size=settings.database.pool_min_size, max_size=settings.database.pool_max_size
        )
        await migrate(pool)
        app.state.pool = pool
        app.state.client = None
        app.state.admitter = Admitter(settings, pool, None)
        stop = asyncio.Event()
        tasks: list[asyncio.Task[None]] = []
        if settings.temporal.address:
            try:
                app.state.client = await connect(settings.temporal.address, settings.temporal.namespace)
                app.state.admitter.client = app.state.client
            except Exception:  # noqa: BLE001
                tasks.append(asyncio.create_task(_connect_with_retry(app, settings)))

        async def start(job_id: str) -> None:
            if app.state.admitter.client is not None:
                await app.state.admitter.start(job_id)

        tasks.append(asyncio.create_task(run_forever(pool, start, settings.reconcile_interval_ms / 1000, stop)))
        try:
            yield
        finally:
            stop.set()
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await pool.close()

    app = FastAPI(
        title="curaflow job API",
        version=curaflow.__version__,
        description="Workflow Protocol v1: candidate_search jobs on Temporal and PostgreSQL.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    install_error_handlers(app)
    app.include_router(router)
    app.include_router(protected)
    app.add_api_route("/metrics", metrics_endpoint, methods=["GET"], tags=["meta"], include_in_schema=False)
    instrument_app(app)

    @app.middleware("http")
    async def outcome_log(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        started = time.perf_counter()
        response = await call_next(request)
        route = request.scope.get("route")
        path = getattr(route, "path", request.url.path)
        events = OUTCOME_EVENTS.get((request.method, path))
        if events is not None:
            elapsed = round((time.perf_counter() - started) * 1000, 2)
            fields: dict[str, Any] = {
                "http_status": response.status_code,
                "path": request.url.path,
                "method": request.method,
                "elapsed_ms": elapsed,
                **getattr(request.state, "log_fields", {}),
            }
            if response.status_code >= 400:
                log.info(
                    "schedule.job_rejected",
                    code=getattr(request.state, "error_code", None),
                    stage=events[1],
                    **fields,
                )
            elif events[0]:
                log.info(events[0], **fields)
        return response

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        extra = models.Task.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, sub in extra.pop("$defs", {}).items():
            components.setdefault(name, sub)
        components["Task"] = extra
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app

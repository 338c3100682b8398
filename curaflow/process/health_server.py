"""A worker's HTTP endpoint on ``observability.metrics_port``: metrics, liveness, readiness.

* ``GET /metrics`` — curaflow's Prometheus metrics of the process;
* ``GET /health`` — liveness: ``200 {status: "ok", service: "curaflow-worker", version,
  commit}`` while the worker's event loop answers;
* ``GET /ready`` — readiness (:mod:`curaflow.process.readiness`): the ledger and Temporal are
  reachable, every Temporal worker of the process still polls and every background
  loop runs; 200 or 503 with each check named.

Served by uvicorn inside the worker's event loop (a thread would keep answering while
the loop itself is stuck), as the supervised loop ``health_server``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import curaflow
from curaflow.build import source_commit
from curaflow.observability.metrics import render_latest

ReadyProbe = Callable[[], Awaitable[tuple[int, dict[str, Any]]]]


def health_app(ready: ReadyProbe, service: str = "curaflow-worker") -> Starlette:
    """The ASGI app of the endpoint (see the module doc).

    Args:
        ready: returns ``(HTTP status, Readiness body)``.
        service: the ``service`` field of the answers.
    """

    async def metrics(_: Request) -> Response:
        body, content_type = render_latest()
        return Response(body, media_type=content_type)

    async def health(_: Request) -> JSONResponse:
        return JSONResponse(
            {"status": "ok", "service": service, "version": curaflow.__version__, "commit": source_commit()}
        )

    async def readiness(_: Request) -> JSONResponse:
        status, body = await ready()
        return JSONResponse(body, status_code=status)

    app = Starlette(
        routes=[
            Route("/metrics", metrics, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
            Route("/ready", readiness, methods=["GET"]),
        ]
    )
    # ``/health/`` is not served: a 404, not a 307 to the host the request's Host header named.
    app.router.redirect_slashes = False
    return app

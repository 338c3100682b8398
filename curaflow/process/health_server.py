"""A worker's HTTP endpoint on ``observability.metrics_port``: metrics, liveness, readiness.

* ``GET /metrics`` — curaflow's Prometheus metrics of the process;
* ``GET /health`` — liveness: ``200 {status: "ok", service: "curaflow-worker", version,
  commit}`` while the worker's event loop answers;
* ``GET /ready`` — readiness (:mod:`curaflow.process.readiness`): the ledger and Temporal are
  reachable, every Temporal worker of the process still polls and every background
  loop runs; 200 or 503 with each check named;
* ``HEAD`` as ``GET`` without content, ``OPTIONS`` ``204`` with ``Allow``, any other path
  ``404`` and any other method ``405`` with ``Allow`` — the protocol ``Error``, as the API
  answers them (:mod:`curaflow.process.http_methods`; until 2026-12-07 Starlette's plain
  text ``Not Found`` / ``Method Not Allowed``, and ``405`` to ``OPTIONS``).

Served by uvicorn inside the worker's event loop (a thread would keep answering while
the loop itself is stuck), as the supervised loop ``health_server``, with the API's
reading of a request head (:func:`health_server`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import curaflow
from curaflow.build import source_commit
from curaflow.observability.metrics import render_latest
from curaflow.process.http_methods import MethodRules, router_refusal
from curaflow.process.httpserver import MAX_HEAD_BYTES, BackgroundServer, bounded_http

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

    async def refused(request: Request, err: Exception) -> Response:
        assert isinstance(err, HTTPException)
        return router_refusal(request, err)

    app = Starlette(
        routes=[
            Route("/metrics", metrics, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
            Route("/ready", readiness, methods=["GET"]),
        ],
        exception_handlers={HTTPException: refused},
    )
    # ``/health/`` is not served: a 404, not a 307 to the host the request's Host header named.
    app.router.redirect_slashes = False
    app.add_middleware(MethodRules, router=app.router)  # HEAD and OPTIONS, as the API's
    return app


def health_server(ready: ReadyProbe, host: str, port: int, *, head_timeout_s: float) -> BackgroundServer:
    """The worker's endpoint on ``host:port`` (bound now: a taken port raises
    :class:`~curaflow.process.httpserver.CannotListen` at once), not started yet.

    Served by the API's HTTP/1.1 protocol (:func:`~curaflow.process.httpserver.bounded_http`,
    the one owner of how a request head is read): a well-formed request with a method the
    parser does not know is ``501`` ``unknown_method``, one it cannot read ``400``
    ``malformed_request``, a head late ``408`` or over :data:`MAX_HEAD_BYTES` ``431`` —
    each the protocol ``Error``, ``Connection: close``. Until 2026-12-07 the endpoint ran
    uvicorn's own protocol: ``400`` ``text/plain`` "Invalid HTTP request received." for
    both of the first two, and no bound on a head's time or size.

    Args:
        head_timeout_s: longest wait for a whole head, seconds (``api.head_timeout_ms``).
    """
    return BackgroundServer(health_app(ready), host, port, http=bounded_http(head_timeout_s, MAX_HEAD_BYTES))

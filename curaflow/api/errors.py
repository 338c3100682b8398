"""Error responses of the job surface: every refusal is a protocol ``Error``, never a stack trace.

* :class:`~curaflow.protocol.errors.ProtocolError` → its HTTP status and
  ``{"error": Error}``;
* unknown paths → 404 ``invalid_params``; wrong methods → 405 ``invalid_params`` with
  ``Allow`` (:func:`curaflow.process.http_methods.router_refusal`, a worker's endpoint's
  too);
* request validation by the framework (query parameters) → 400 ``invalid_params``;
* PostgreSQL unreachable, hung, restarting, failing over (a standby refusing a write)
  or out of connections, rolling the transaction back (a serialization failure, a
  deadlock), timing out on a lock, answering any code of an outage class, or not answering
  within ``api.ledger_timeout_ms`` (:func:`curaflow.ledger.db.is_unavailable`) → 503
  ``internal_error`` with ``retryable: true``, ``detail.reason: ledger_unavailable`` and
  ``Retry-After`` (:data:`LEDGER_RETRY_AFTER_S`; nothing was written; try again);
* Temporal unable to serve a request the answer needs (a cancel's describe answered
  ``UNAVAILABLE``, ``DEADLINE_EXCEEDED``, ``RESOURCE_EXHAUSTED`` — a namespace's rate limit,
  Temporal Cloud's actions per second — or ``ABORTED``:
  :func:`curaflow.temporal.answers.temporal_outage`) → 503 ``internal_error`` with
  ``retryable: true``, ``detail.reason: temporal_unavailable`` and ``Retry-After``
  (:data:`~curaflow.temporal.answers.TEMPORAL_RETRY_AFTER_S`; what was recorded — a cancel
  — stands, the same request again is safe). 2026-12-07: a ``500``. Any other refusal of
  Temporal's (``PERMISSION_DENIED``, an expired certificate's ``UNAUTHENTICATED``, a
  namespace's ``NOT_FOUND``) is the 500 below, its status logged;
* anything else → 500 ``internal_error`` with the message "internal error"; internal
  text never leaks (reference §2.1);
* a client that went away mid-body (``ClientDisconnect``) → no answer is read by
  anyone; the request is logged as ``client_disconnected`` (status 499, nginx's "client
  closed request"), never as a server error.

500s are produced by :class:`ErrorBoundary` inside the app, so the exception never
reaches the server: the keep-alive connection stays usable for the next request
(Starlette's own last-resort handler answers and then re-raises, and the server then
closes the connection without a ``Connection: close``, so the client's next request on
it reads nothing). Answers that leave unread body on the connection (408) carry
``Connection: close``.

Authentication failures keep the original's legacy shape ``{status:"error", error}``
(401 ``unauthorized``, with its ``WWW-Authenticate`` challenge; 503 ``endpoint disabled:
token not configured``), see :mod:`curaflow.api.auth`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from temporalio.service import RPCError

from curaflow.ledger.db import is_unavailable
from curaflow.observability import metrics
from curaflow.observability.logs import get_logger
from curaflow.process.http_methods import router_refusal
from curaflow.protocol.errors import ProtocolError, error_body
from curaflow.temporal.answers import TEMPORAL_RETRY_AFTER_S, status_name, temporal_outage

log = get_logger("curaflow.api")


class LegacyAuthError(Exception):
    """An authentication refusal, rendered in the original's legacy shape.

    Args:
        status: 401 or 503.
        text: the legacy ``error`` text.
        challenge: the ``WWW-Authenticate`` value a 401 carries (RFC 9110 §11.6.1: a 401
            MUST name a challenge; :func:`curaflow.api.auth.bearer_challenge`).
    """

    def __init__(self, status: int, text: str, challenge: str | None = None) -> None:
        super().__init__(text)
        self.status = status
        self.text = text
        self.challenge = challenge


def is_ledger_outage(err: BaseException) -> bool:
    """True when ``err`` means the ledger could not serve the request now: the one
    classification, :func:`curaflow.ledger.db.is_unavailable`."""
    return is_unavailable(err)


#: ``Retry-After`` of a ``ledger_unavailable`` answer, seconds: a restarting PostgreSQL
#: is usually back within a few seconds, and a consumer retrying sooner only adds load.
LEDGER_RETRY_AFTER_S = 5

#: Logged status of a request whose client left before the answer (nginx's convention).
CLIENT_CLOSED_REQUEST = 499


def protocol_response(err: ProtocolError) -> JSONResponse:
    """The JSON response for a :class:`ProtocolError` (with its ``headers`` when it has any)."""
    return JSONResponse(err.body(), status_code=err.http_status, headers=getattr(err, "headers", None))


def _unavailable(what: str, reason: str, retry_after_s: int) -> JSONResponse:
    """The ``503`` of an outage of ``what`` (``"the ledger"``, ``"Temporal"``): the protocol's
    retryable ``internal_error`` with ``detail.reason`` ``reason`` and ``Retry-After``
    ``retry_after_s`` (seconds) — nothing was lost, the same request converges."""
    body = error_body(
        "internal_error", f"{what} is unavailable; retry later", retryable=True, detail={"reason": reason}
    )
    return JSONResponse({"error": body}, status_code=503, headers={"Retry-After": str(retry_after_s)})


def internal_error_response(request: Request, err: BaseException) -> JSONResponse:
    """The answer to an unexpected exception: 503 ``ledger_unavailable`` or
    ``temporal_unavailable`` (retryable, with ``Retry-After``) or 500 ``internal error``.

    Logs it: an outage of the ledger or of Temporal as one line, anything else with its
    traceback.
    """
    request.state.error_code = "internal_error"
    if is_ledger_outage(err):
        # Nothing was written and nothing is lost: tell the consumer to try again.
        log.error("api.ledger_unavailable", path=request.url.path, error=type(err).__name__)
        metrics.record_ledger_unavailable("api")
        return _unavailable("the ledger", "ledger_unavailable", LEDGER_RETRY_AFTER_S)
    if temporal_outage(err):
        # Temporal could not serve the request now: the consumer tries again (what was
        # recorded before — a cancel — stands, and the same request converges).
        assert isinstance(err, RPCError)
        log.error("api.temporal_unavailable", path=request.url.path, status=status_name(err))
        return _unavailable("Temporal", "temporal_unavailable", TEMPORAL_RETRY_AFTER_S)
    refused = {"status": status_name(err)} if isinstance(err, RPCError) else {}  # a Temporal refusal: its status
    log.error("api.internal_error", path=request.url.path, error=type(err).__name__, **refused, exc_info=err)
    return JSONResponse({"error": error_body("internal_error", "internal error")}, status_code=500)


class ErrorBoundary:
    """ASGI middleware: an exception that escaped the routes becomes its protocol 500 here,
    and every answer is reported once to ``on_answered``.

    An exception after the answer started cannot be answered any more and is re-raised to
    the server. Plain ASGI rather than Starlette's ``BaseHTTPMiddleware``, which runs each
    request in an extra task with its own streams (measurable on every admission).

    Args:
        app: the wrapped application.
        on_answered: called after every HTTP request with the request, the status the
            answer started with (500 when none started) and the elapsed milliseconds —
            the request log (:mod:`curaflow.api.app`).
    """

    def __init__(self, app: ASGIApp, on_answered: Callable[[Request, int, float], None] | None = None) -> None:
        self.app = app
        self.on_answered = on_answered

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        status: int | None = None

        async def send_tracking(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_tracking)
        except Exception as err:
            if status is not None:
                raise
            request = Request(scope)
            response: Response
            if isinstance(err, ClientDisconnect):
                response = client_gone(request)
            else:
                response = internal_error_response(request, err)
            await response(scope, receive, send_tracking)
        finally:
            if self.on_answered is not None:
                elapsed_ms = round((time.perf_counter() - began) * 1000, 2)
                self.on_answered(Request(scope), 500 if status is None else status, elapsed_ms)


def client_gone(request: Request) -> Response:
    """The (unread) answer to a client that disconnected mid-request; logged as ``client_disconnected``."""
    request.state.error_code = "client_disconnected"
    return Response(status_code=CLIENT_CLOSED_REQUEST)


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers described in the module doc on ``app``."""

    @app.exception_handler(ProtocolError)
    async def _protocol(request: Request, err: ProtocolError) -> JSONResponse:
        request.state.error_code = err.code
        request.state.error_reason = (err.detail or {}).get("reason")
        return protocol_response(err)

    @app.exception_handler(LegacyAuthError)
    async def _auth(request: Request, err: LegacyAuthError) -> JSONResponse:
        request.state.error_code = "unauthorized"
        headers = {"WWW-Authenticate": err.challenge} if err.challenge else None
        return JSONResponse({"status": "error", "error": err.text}, status_code=err.status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, err: RequestValidationError) -> JSONResponse:
        errors = err.errors()
        fields = [".".join(str(p) for p in e.get("loc", ())[1:]) for e in errors]
        detail = {"field": fields[0]} if fields and fields[0] else None
        message = f"invalid {fields[0]}: {errors[0].get('msg', 'invalid value')}" if detail else "invalid request"
        request.state.error_code = "invalid_params"
        return JSONResponse({"error": error_body("invalid_params", message, detail=detail)}, status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, err: StarletteHTTPException) -> JSONResponse:
        request.state.error_code = "invalid_params"
        return router_refusal(request, err)  # a worker's endpoint answers the same (one owner)

    @app.exception_handler(ClientDisconnect)
    async def _gone(request: Request, err: ClientDisconnect) -> Response:
        return client_gone(request)

    @app.exception_handler(Exception)
    async def _internal(request: Request, err: Exception) -> JSONResponse:
        # The last resort (an exception outside :class:`ErrorBoundary`, e.g. in another
        # middleware): Starlette re-raises after this answer.
        return internal_error_response(request, err)

"""Which methods a path has, the two every path answers (``HEAD`` and ``OPTIONS``), and the
answer to a path or a method no route serves — the API's and a worker's endpoint's alike.

The one owner of "what methods does this address take" (RFC 9110 §9): :func:`allowed_methods`
scans the app's routes, so the ``Allow`` header of a ``405`` (required by RFC 9110
§15.5.6), the answer to ``OPTIONS`` and the routes themselves never disagree; and of the
router's refusals (:func:`router_refusal`: the protocol ``Error``). The API
(:mod:`curaflow.api.app`) and a worker's ``/metrics`` ``/health`` ``/ready`` endpoint
(:mod:`curaflow.process.health_server`) install both, so one reading holds on both ports
(until 2026-12-07 the worker's endpoint answered Starlette's plain text, and ``405`` to
``OPTIONS``).

* ``HEAD`` is ``GET`` without the content (RFC 9110 §9.3.2: every general-purpose server
  supports it): same status, same headers, same token check; no body;
* ``OPTIONS`` answers ``204`` with ``Allow`` for any path a route serves (no token: it
  names methods only, nothing of a job), and the usual ``404`` for any other;
* a ``405`` carries ``Allow``. A job id ending in ``/cancel`` or ``/events/ack``, sent
  encoded (``%2F``), is the address of that job, which answers ``GET`` only — and so say
  ``OPTIONS`` and every ``405`` there: routes are matched against :func:`segment_path`,
  the path read by its segments, the one reading of which route a path is the address of
  (:func:`addressed_routes`); a handler asks it too (:func:`serves_its_address`);
* a path no route is the address of is ``404`` whatever the method (``/jobs%2Fa`` is the
  one segment ``jobs/a``): a ``405`` there would name no method
  (:func:`allowed_methods` empty).
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Iterator
from re import Pattern
from urllib.parse import unquote_to_bytes

import fastapi.routing
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Mount, Router, compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from curaflow.protocol.errors import error_body

#: The methods a route may serve (HEAD and OPTIONS are answered here for every path).
_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def segment_path(scope: Scope) -> str:
    """The request's path read by its segments: the raw path split at its literal ``/``
    only, each segment percent-decoded, an encoded ``/`` kept inside its segment as
    ``%2F`` — routing sees the percent-decoded path, in which ``/jobs/a%2Fcancel`` (the job
    ``a/cancel``) looks like ``/jobs/a/cancel``. Any other escape is the character it
    encodes (RFC 3986 §6.2.2.2: ``/jobs/a/%63ancel`` is ``/jobs/a/cancel``). Routes matched
    against it serve what the handlers serve — ``/jobs/a%2Fcancel`` matches the job route
    only, not the cancel of ``a``; ``/jobs/a/%63ancel`` matches the cancel; ``/jobs%2Fa``
    no route. The decoded ``path`` when the server passes no raw path (taken at its
    word)."""
    raw = scope.get("raw_path")
    if not raw:
        return str(scope.get("path", ""))
    segments = bytes(raw).split(b"?", 1)[0].split(b"/")
    return "/".join(unquote_to_bytes(part).decode("utf-8", "replace").replace("/", "%2F") for part in segments)


def _literal_characters(template: str) -> int:
    """How many characters of a route's path template are literal (its parameters left
    out): ``/jobs/{job_id:path}/cancel`` 13, ``/jobs/{job_id:path}`` 6."""
    return len(re.sub(r"\{[^}]*\}", "", template))


def _leaf_routes(router: Router) -> Iterator[tuple[BaseRoute, str, frozenset[str]]]:
    """Every route of ``router`` that serves methods at a path template, as ``(the route
    that takes a request, its full template, its methods)``, included routers' too:
    FastAPI lists an included router as one entry since 0.16x (``iter_route_contexts``
    names its routes), each route itself before."""
    contexts = getattr(fastapi.routing, "iter_route_contexts", None)
    for entry in contexts(router.routes) if contexts is not None else router.routes:
        template, methods = getattr(entry, "path", None), getattr(entry, "methods", None)
        if isinstance(template, str) and methods and not isinstance(entry, Mount):
            yield getattr(entry, "original_route", entry), template, frozenset(methods)


#: ``(route, its methods, its template compiled, its literal characters)`` of each of a
#: router's leaf routes (:func:`_leaf_routes`), as :func:`_read_routes` keeps them.
_Leaf = tuple[BaseRoute, frozenset[str], Pattern[str], int]
#: ``id(router)`` → (the router, weakly; the entries its leaves were read from; the leaves).
#: By id: FastAPI's ``APIRouter`` is not hashable. Forgotten with the router.
_read: dict[int, tuple[weakref.ref[Router], tuple[BaseRoute, ...], tuple[_Leaf, ...]]] = {}


def _read_routes(router: Router) -> tuple[_Leaf, ...]:
    """``router``'s leaf routes with their templates compiled, read once for each set of its
    entries (a route added to the router is read at the next request), not at every request:
    ``GET /jobs/{id}`` asks :func:`serves_its_address` at every read of a job, and listing the
    routes and compiling each template again cost ~0.46 ms of the event loop a read (15
    routes; 2026-12-07). A router included in the app is read with it: its routes are the
    app's from its start."""
    entries = tuple(router.routes)
    known = _read.get(id(router))
    if (
        known is not None
        and known[0]() is router
        and len(known[1]) == len(entries)
        and all(a is b for a, b in zip(known[1], entries, strict=True))
    ):
        return known[2]
    leaves = tuple(
        (route, methods, compile_path(template)[0], _literal_characters(template))
        for route, template, methods in _leaf_routes(router)
    )
    key = id(router)
    _read[key] = (weakref.ref(router, lambda _gone: _read.pop(key, None)), entries, leaves)
    return leaves


def addressed_routes(router: Router, scope: Scope) -> dict[str, BaseRoute]:
    """The route each method reaches at the request's path read by segments
    (:func:`segment_path`), of the routes that path is the address of: where several
    templates match it, the most specific — the most literal characters — and only it.
    ``/jobs/a/cancel`` is the address of the cancel of ``a`` (``POST``), though
    ``/jobs/{job_id:path}`` matches it too: a job id swallows no sub-route's name its ``/``
    did not encode (``/jobs/a%2Fcancel`` is the job ``a/cancel``). Mounted files are no
    resource of the API. The routes are read once (:func:`_read_routes`)."""
    path = segment_path(scope)
    matching = [
        (route, methods, literal) for route, methods, pattern, literal in _read_routes(router) if pattern.match(path)
    ]
    most = max((literal for _, _, literal in matching), default=0)
    return {
        method: route for route, methods, literal in matching if literal == most for method in methods & set(_METHODS)
    }


def serves_its_address(router: Router, scope: Scope) -> bool:
    """Whether the route that took the request (matched on the decoded path) is one the
    request's path is the address of (:func:`addressed_routes`); when not, the handler
    refuses it ``405`` (that address's ``Allow``; ``404`` when the path is no route's
    address), never serving it as a route that would read another job in it — the one
    question every handler of a job's address asks (``get_job``, ``cancel``, the events
    and the ack; until 2026-12-07 the last three read the raw path's last segments instead,
    and ``POST /jobs%2Fa/cancel`` cancelled the job ``a``)."""
    taken = scope.get("route")
    return taken is None or any(route is taken for route in addressed_routes(router, scope).values())


def allowed_methods(router: Router, scope: Scope) -> str:
    """The ``Allow`` value of the request's path: every method a route the path is the
    address of serves (:func:`addressed_routes`), ``HEAD`` with ``GET``, and ``OPTIONS``;
    sorted, comma-separated. Empty when no route serves the path."""
    methods = set(addressed_routes(router, scope))
    if not methods:
        return ""
    if "GET" in methods:
        methods.add("HEAD")
    methods.add("OPTIONS")
    return ", ".join(sorted(methods))


def router_refusal(request: Request, err: HTTPException) -> JSONResponse:
    """The answer to an :class:`~starlette.exceptions.HTTPException` — the router's ``404``
    (no route matches) and ``405`` (a route matches, not its method), and a handler's: the
    protocol ``Error`` (``{"error": Error}``, :func:`curaflow.protocol.errors.error_body`),
    never Starlette's plain text.

    A ``405`` carries ``Allow`` (RFC 9110 §15.5.6: :func:`allowed_methods`); at a path no
    route is the address of (``/jobs%2Fa``) it would name no method, and is the ``404``.
    ``404`` "not found", ``405`` "method not allowed", any other "request refused";
    ``invalid_params``, ``internal_error`` for a ``5xx``. The exception's own headers are
    kept.
    """
    status = err.status_code
    headers = dict(err.headers or {})
    if status == 405:
        allow = allowed_methods(request.app.router, request.scope)
        status, headers = (405, {**headers, "Allow": allow}) if allow else (404, {})
    message = {404: "not found", 405: "method not allowed"}.get(status, "request refused")
    code = "internal_error" if status >= 500 else "invalid_params"
    return JSONResponse({"error": error_body(code, message)}, status_code=status, headers=headers or None)


class MethodRules:
    """ASGI middleware: ``HEAD`` served as ``GET`` without content, ``OPTIONS`` answered
    with ``Allow`` (see the module doc).

    Args:
        app: the wrapped application.
        router: the app's router, whose routes say which methods a path has.
    """

    def __init__(self, app: ASGIApp, router: Router) -> None:
        self.app = app
        self.router = router

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        if scope["method"] == "OPTIONS":
            allow = allowed_methods(self.router, dict(scope, method="GET"))
            if allow:
                await send({"type": "http.response.start", "status": 204, "headers": [(b"allow", allow.encode())]})
                await send({"type": "http.response.body", "body": b""})
                return
            await self.app(scope, receive, send)  # no route: the router's 404
            return

        async def without_content(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return
                message = {"type": "http.response.body", "body": b""}
            await send(message)

        # A copy: the server keeps its own scope, which still says HEAD (it sends no body).
        await self.app(dict(scope, method="GET"), receive, without_content)

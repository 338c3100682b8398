"""Which methods a path has, and the two every path answers: ``HEAD`` and ``OPTIONS``.

The one owner of "what methods does this address take" (RFC 9110 §9): :func:`allowed_methods`
scans the app's routes, so the ``Allow`` header of a ``405`` (required by RFC 9110
§15.5.6), the answer to ``OPTIONS`` and the routes themselves never disagree.

* ``HEAD`` is ``GET`` without the content (RFC 9110 §9.3.2: every general-purpose server
  supports it): same status, same headers, same token check; no body;
* ``OPTIONS`` answers ``204`` with ``Allow`` for any path a route serves (no token: it
  names methods only, nothing of a job), and the usual ``404`` for any other;
* a ``405`` carries ``Allow``. A job id ending in ``/cancel`` or ``/events/ack``, sent
  encoded (``%2F``), is the address of that job, which answers ``GET`` only
  (:class:`JobAddressOnly`) — and so say ``OPTIONS`` and every ``405`` there: routes are
  matched against :func:`segment_path`, the path as :func:`raw_path_ends_with` reads it.
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from starlette.exceptions import HTTPException
from starlette.routing import Match, Mount, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: ``Allow`` of an address that is a job and nothing else.
JOB_ONLY = "GET, HEAD, OPTIONS"


class JobAddressOnly(HTTPException):
    """The 405 of ``POST`` to an address that is a job's (an id ending in ``/cancel`` or
    ``/events/ack``, sent encoded): the job answers ``GET`` only, whatever the decoded
    path looks like to the routes."""

    def __init__(self) -> None:
        super().__init__(405, headers={"Allow": JOB_ONLY})


#: The methods a route may serve (HEAD and OPTIONS are answered here for every path).
_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def raw_path_ends_with(scope: Scope, suffix: str) -> bool:
    """True when the request's path really ends with ``suffix``'s path segments.

    Routing sees the percent-decoded path, so ``/jobs/a%2Fcancel`` (the job ``a/cancel``)
    looks like ``/jobs/a/cancel``. The raw path tells them apart: it is split at its
    literal ``/`` only, then each segment is percent-decoded — an encoded ``/`` stays inside
    its segment (part of the job id), while any other escape is the character it encodes
    (RFC 3986 §6.2.2.2: ``/jobs/a/%63ancel`` is ``/jobs/a/cancel``). A server that does not
    pass the raw path on is taken at its word.
    """
    raw = scope.get("raw_path")
    if not raw:
        return True
    wanted = [part.encode() for part in suffix.strip("/").split("/")]
    segments = [unquote_to_bytes(part) for part in bytes(raw).split(b"?", 1)[0].split(b"/")]
    return segments[-len(wanted) :] == wanted


def segment_path(scope: Scope) -> str:
    """The request's path with each raw segment percent-decoded but an encoded ``/`` kept
    as ``%2F`` (:func:`raw_path_ends_with`'s reading): routes matched against it serve what
    the handlers serve — ``/jobs/a%2Fcancel`` matches the job route only, not the cancel of
    ``a``; ``/jobs/a/%63ancel`` matches the cancel. The decoded ``path`` when the server
    passes no raw path."""
    raw = scope.get("raw_path")
    if not raw:
        return str(scope.get("path", ""))
    segments = bytes(raw).split(b"?", 1)[0].split(b"/")
    return "/".join(unquote_to_bytes(part).decode("utf-8", "replace").replace("/", "%2F") for part in segments)


def allowed_methods(router: Router, scope: Scope) -> str:
    """The ``Allow`` value of the request's path: every method some route serves at it
    (a route matches :func:`segment_path` fully for it), ``HEAD`` with ``GET``, and
    ``OPTIONS``; sorted, comma-separated. Empty when no route serves the path (mounted
    files are no resource of the API)."""
    path = segment_path(scope)
    methods = {
        method
        for method in _METHODS
        if any(
            not isinstance(route, Mount) and route.matches(dict(scope, method=method, path=path))[0] == Match.FULL
            for route in router.routes
        )
    }
    if not methods:
        return ""
    if "GET" in methods:
        methods.add("HEAD")
    methods.add("OPTIONS")
    return ", ".join(sorted(methods))


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

"""The Pixiv replay with scripted faults, and a replay server run inside the test process.

:class:`Faults` is a :class:`~curaflow.sources.pixiv.replay.app.ReplayScript`: the production
replay app (:func:`~curaflow.sources.pixiv.replay.app.create_replay_app`) asks it, at its hook
points, whether to answer otherwise — rate limits, invalid grants, expired tokens,
missing / forbidden / restricted works, slow, truncated or unsized images, a result set
deep enough to reach the 5000-offset cap — and tells it every answer (:attr:`Faults.log`).
Tests change a ``Faults`` while jobs run.

:class:`ReplayServer` serves it on 127.0.0.1 with a request log (``METHOD path?query``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from fastapi import Request, Response
from fastapi.responses import HTMLResponse, StreamingResponse

from curaflow.process.httpserver import BackgroundServer
from curaflow.sources.pixiv.replay import images
from curaflow.sources.pixiv.replay.app import INVALID_GRANT, JSONResponse, ReplayScript, create_replay_app, error
from curaflow.sources.pixiv.replay.data import DeepSet, matches, placeholder, recorded_works, work_for_id

__all__ = ["ABSENT", "DeepSet", "Faults", "Logged", "ReplayServer", "ordered", "replay_work", "work_ids_with_tag"]

RESTRICTED = "Your access is currently restricted."
#: A value of :attr:`Faults.mutate` that leaves its field out of the answer.
ABSENT: Any = object()


@dataclass
class Logged:
    """One request the replay answered.

    Attributes:
        kind: ``auth`` | ``search`` | ``ranking`` | ``detail`` | ``image``.
        params: query parameters (form fields for ``auth``, minus secrets; ``{"fault"}``
            for an image sent).
        status: the HTTP status answered.
        at: wall-clock time of arrival, epoch seconds.
        referer: the ``Referer`` header (images).
        error: the error message of an error body, if one was answered.
    """

    kind: str
    path: str
    params: dict[str, str]
    status: int
    at: float
    referer: str | None = None
    error: str | None = None


@dataclass
class Faults(ReplayScript):
    """Scripted faults and synthetic data for tests.

    Each list is consumed front to back, one entry per request of its kind; ``None``
    answers normally.

    Attributes:
        search: per search/ranking request: ``"rate_limit"`` (HTTP 403 Rate Limit body),
            ``"rate_limit_429"``, ``"restricted"`` (access restricted body),
            ``"oauth"`` (invalid access token), ``"500"``, ``"503"`` (a proxy's HTML page),
            ``"empty"`` (HTTP 200 with no works and no ``next_url``, as a struggling
            backend answers in place of the page a ``next_url`` promised), ``"empty_going_on"``
            (HTTP 200 with no works and a ``next_url`` 30 places on: an answer that says more
            follow and lists none), ``"no_illusts"``
            (HTTP 200 ``{}``), ``"deep_json"`` (HTTP 200, a JSON document nested 200 000
            levels deep).
        auth: per token request: ``"invalid_grant"`` (HTTP 400), ``"rate_limit"``,
            ``"500"``.
        images: per image request: ``"truncate"`` (half the body, full
            ``Content-Length``), ``"chunked"`` (no ``Content-Length``), ``"slow"``
            (``slow_images_s`` pause mid-body), ``"429"``, ``"500"``.
        retry_after_s: a ``Retry-After`` header on rate-limit answers.
        missing_works: ids answering 404 (detail and images).
        absent_images: ids whose images (pages, and an ugoira's frames zip) answer 404
            while their detail answers the work alive: a mirror or a CDN missing the file
            (a misconfigured image host, a deploy, a moved path), not the work gone.
        detail_faults: per work id, what its ``/v1/illust/detail`` answers instead:
            ``"503"`` (a proxy's HTML page), ``"404_html"`` (a 404 page not in the
            app-api's words: a moved endpoint), ``"429"`` (a bare 429), ``"slow"``
            (``detail_delay_s`` before the work's own answer), ``"huge"`` (a 40 MB JSON
            answer), ``"other:<id>"`` (the detail of the work ``<id>``, a cache or a proxy
            answering another work's; ``"other:~<id>"``: that work as a restricted
            placeholder).
        forbidden_works: ids whose images answer 403 even with the Referer (private).
        restricted_works: ids listed as restricted placeholders; their detail answers
            "Your access is currently restricted." (HTTP 200) and their images 403.
        hidden_works: per work id, the ``limit_*`` image name it is hidden from the
            account by (``limit_sanity_level``: the account's display settings;
            ``limit_mypixiv``: its relation to the artist; ``limit_unknown``: deleted or
            made private …): listed, and its detail answered, as that placeholder (as the
            app-api answers both), its images 403. A test removes a work to show it whole
            again (the account's settings changed).
        mutate: per work id, fields replacing the recorded ones (``illust_ai_type``,
            ``x_restrict`` …) in every answer; a field given :data:`ABSENT` is left out
            of the answer (a field renamed or dropped by the app-api).
        image_sizes: per work id, or per page as ``"<id>_p<N>"``, the pixel size its
            images are rendered at (instead of a tenth of the recorded size); the work's
            first page's (its id's, or ``"<id>_p0"``) is also the size its listing and
            detail give (``width`` / ``height``, as Pixiv lists page 0's original: a
            picture of another ratio than the listed one is no page of the work,
            :func:`~curaflow.sources.corroboration.not_the_listed_picture`) unless
            ``mutate`` gives one.
        ugoira: per work id, the ``/v1/ugoira/metadata`` answer (JSON, HTTP 200; or
            ``(status, JSON)``) served for it instead of the replay's (with ``mutate``
            ``{"type": "ugoira"}`` a recorded work becomes an animation of any metadata).
        deep: a synthetic deep result set (:class:`DeepSet`) for one tag.
        deleted_works: ids no search lists any more (deleted since they were recorded).
        search_delay_s: delay before answering a search or ranking request, seconds.
        detail_delay_s: delay of a ``"slow"`` detail (``detail_faults``), seconds.
        slow_images_s: pause in the middle of every image body while > 0 (read per
            request, so a test can change it live; set back to 0, it also ends the pauses
            in flight: a test releases the downloads it held), and of a ``"slow"`` image
            (1 s when 0), seconds.
        truncate_images: cut every image body in half (``Content-Length`` stays the
            full size).
        token_ttl_s: ``expires_in`` of issued access tokens.
        token_lifetime_s: how long an access token is really accepted (default
            ``token_ttl_s``); shorter simulates a token revoked before its advertised
            expiry.
        log: every request answered (see :class:`Logged`).
    """

    search: list[str | None] = field(default_factory=list)
    auth: list[str | None] = field(default_factory=list)
    images: list[str | None] = field(default_factory=list)
    retry_after_s: float | None = None
    missing_works: set[str] = field(default_factory=set)
    absent_images: set[str] = field(default_factory=set)
    detail_faults: dict[str, str] = field(default_factory=dict)
    forbidden_works: set[str] = field(default_factory=set)
    restricted_works: set[str] = field(default_factory=set)
    hidden_works: dict[str, str] = field(default_factory=dict)
    mutate: dict[str, dict[str, Any]] = field(default_factory=dict)
    image_sizes: dict[str, tuple[int, int]] = field(default_factory=dict)
    ugoira: dict[str, Any] = field(default_factory=dict)
    deep: DeepSet | None = None
    deleted_works: set[str] = field(default_factory=set)
    search_delay_s: float = 0.0
    detail_delay_s: float = 0.0
    slow_images_s: float = 0.0
    truncate_images: bool = False
    token_ttl_s: int = 3600
    token_lifetime_s: float | None = None
    log: list[Logged] = field(default_factory=list)

    @property
    def requests(self) -> list[str]:
        """The kinds of every request answered, in order."""
        return [entry.kind for entry in self.log]

    def of(self, kind: str) -> list[Logged]:
        """The logged requests of one kind."""
        return [entry for entry in self.log if entry.kind == kind]

    # ---- the replay's hooks ---------------------------------------------------------------

    def token_lifetime(self) -> float:
        return float(self.token_lifetime_s if self.token_lifetime_s is not None else self.token_ttl_s)

    def present(self, work: dict[str, Any]) -> dict[str, Any]:
        wid = str(work["id"])
        served = self.image_sizes.get(f"{wid}_p0") or self.image_sizes.get(wid)
        if served is not None:  # the listing describes the picture served (its original's size)
            work = {**work, "width": served[0], "height": served[1]}
        if wid in self.mutate:
            work = {k: v for k, v in {**work, **self.mutate[wid]}.items() if v is not ABSENT}
        if wid in self.restricted_works:
            work = placeholder(work)
        elif wid in self.hidden_works:
            work = placeholder(work, self.hidden_works[wid])
        return work

    def listing(self, works: list[dict[str, Any]], sort: str) -> list[dict[str, Any]]:
        """Deleted works are not listed; a popularity search ranks by the bookmarks as ``mutate`` d."""
        if self.deleted_works:  # a work's id is an int in Pixiv's JSON, a str in a test's set
            gone = self.deleted_works | {int(i) for i in self.deleted_works if i.isdigit()}
            works = [w for w in works if w["id"] not in gone]
        if sort == "popular_desc" and any("total_bookmarks" in m for m in self.mutate.values()):
            works.sort(key=lambda w: (-int(self.present(w).get("total_bookmarks") or 0), -int(w["id"])))
        return works

    def image_size(self, work: dict[str, Any], page: int) -> tuple[int, int]:
        wid = str(work["id"])
        size = self.image_sizes.get(f"{wid}_p{page}") or self.image_sizes.get(wid)
        return size or images.image_size(work, page)

    async def intercept(self, kind: str, request: Request, work_id: str | None = None) -> Response | None:
        if kind == "auth":
            return self._auth_fault(_next(self.auth))
        if kind in ("search", "ranking"):
            fault = self._search_fault(_next(self.search), request)
            if fault is None and self.search_delay_s:
                await asyncio.sleep(self.search_delay_s)
            return fault
        if kind == "ugoira" and work_id in self.ugoira:
            answer = self.ugoira[work_id]
            status, body = answer if isinstance(answer, tuple) else (200, answer)
            return JSONResponse(body, status_code=status)
        if kind == "detail":
            if work_id in self.restricted_works:
                return error(200, "", RESTRICTED)
            if work_id in self.missing_works:
                return error(404, "", "該当作品は削除されたか、存在しない作品IDです。")
            fault = self.detail_faults.get(work_id or "")
            if fault == "503":
                return HTMLResponse("<html><body><h1>503 Service Temporarily Unavailable</h1></body></html>", 503)
            if fault == "404_html":
                return HTMLResponse("<html><body><h1>404 Not Found</h1>nginx</body></html>", 404)
            if fault == "429":
                return Response(status_code=429, content=b"Too Many Requests")
            if fault == "slow":
                await asyncio.sleep(self.detail_delay_s)
                return None
            if fault == "huge":
                return JSONResponse({"illust": {"id": int(work_id or 0)}, "pad": "x" * 40_000_000})
            hidden = work_for_id(work_id or "", self.deep) if work_id in self.hidden_works else None
            if hidden is not None:
                return JSONResponse({"illust": self.present(hidden)})
            if fault is not None and fault.startswith("other:"):
                other = fault.split(":", 1)[1]
                placed = self.present(work_for_id(other.lstrip("~"), self.deep) or {})
                return JSONResponse({"illust": placeholder(placed) if other.startswith("~") else placed})
            return None
        if kind == "image":
            if work_id in self.missing_works or work_id in self.absent_images:
                return Response(status_code=404, content=b"Not Found")
            if work_id in self.forbidden_works or work_id in self.restricted_works or work_id in self.hidden_works:
                return Response(status_code=403, content=b"Forbidden")
            fault = _next(self.images)
            if fault is None and self.truncate_images:
                fault = "truncate"
            if fault is None and self.slow_images_s > 0:
                fault = "slow"
            if fault == "429":
                return Response(status_code=429, content=b"Too Many Requests")
            if fault == "500":
                return Response(status_code=500, content=b"Internal Server Error")
            request.state.image_fault = fault
        return None

    def image_response(self, request: Request, body: bytes, media_type: str) -> tuple[Response, str]:
        fault = getattr(request.state, "image_fault", None)
        if fault not in ("truncate", "slow", "chunked"):
            return Response(content=body, media_type=media_type), fault or ""
        delay = (self.slow_images_s or 1.0) if fault == "slow" else 0.0
        live = self.slow_images_s > 0  # a pause of slow_images_s ends when it is set back to 0

        async def stream() -> AsyncIterator[bytes]:
            half = len(body) // 2
            yield body[:half]
            ends = time.monotonic() + delay
            while time.monotonic() < ends and not (live and self.slow_images_s <= 0):
                await asyncio.sleep(min(0.05, ends - time.monotonic()))
            if fault != "truncate":
                yield body[half:]

        headers = {} if fault == "chunked" else {"Content-Length": str(len(body))}
        return StreamingResponse(stream(), media_type=media_type, headers=headers), fault

    def answered(self, kind: str, request: Request, response: Response, params: dict[str, str]) -> None:
        self.log.append(
            Logged(
                kind=kind,
                path=request.url.path,
                params=params,
                status=response.status_code,
                at=time.time(),
                referer=request.headers.get("referer"),
                error=_error_text(response),
            )
        )

    # ---- faults ---------------------------------------------------------------------------

    def _rate_limited(self, status: int) -> JSONResponse:
        response = error(status, "Rate Limit")
        if self.retry_after_s is not None:
            response.headers["Retry-After"] = str(self.retry_after_s)
        return response

    def _search_fault(self, fault: str | None, request: Request) -> Response | None:
        if fault == "rate_limit":
            return self._rate_limited(403)
        if fault == "rate_limit_429":
            return self._rate_limited(429)
        if fault == "restricted":
            return error(403, "", RESTRICTED)
        if fault == "oauth":
            return error(400, INVALID_GRANT)
        if fault == "500":
            return JSONResponse({"error": {"message": "internal"}}, status_code=500)
        if fault == "503":
            return HTMLResponse("<html><body><h1>503 Service Temporarily Unavailable</h1></body></html>", 503)
        if fault == "empty":
            return JSONResponse({"illusts": [], "next_url": None, "search_span_limit": 31536000, "show_ai": True})
        if fault == "empty_going_on":
            query = dict(request.query_params)
            query["offset"] = str(int(query.get("offset") or 0) + 30)
            next_url = f"https://app-api.pixiv.net{request.url.path}?{urlencode(query)}"
            return JSONResponse({"illusts": [], "next_url": next_url, "search_span_limit": 31536000, "show_ai": True})
        if fault == "no_illusts":
            return JSONResponse({})
        if fault == "deep_json":
            return Response("[" * 200_000 + "]" * 200_000, media_type="application/json")
        return None

    def _auth_fault(self, fault: str | None) -> JSONResponse | None:
        if fault == "invalid_grant":
            body = {
                "has_error": True,
                "errors": {"system": {"message": "Invalid refresh token", "code": 1508}},
                "error": "invalid_grant",
            }
            return JSONResponse(body, status_code=400)
        if fault == "rate_limit":
            return self._rate_limited(403)
        if fault == "500":
            return JSONResponse({"error": "server_error"}, status_code=500)
        return None


def _next(queue: list[str | None]) -> str | None:
    return queue.pop(0) if queue else None


def _error_text(response: Response) -> str | None:
    raw = bytes(response.body) if isinstance(response, JSONResponse) else b""
    if not raw or (response.status_code == 200 and not raw.startswith(b'{"error"')):
        return None
    try:
        err = json.loads(raw).get("error")
    except (ValueError, AttributeError):
        return None
    if isinstance(err, dict):
        return err.get("message") or err.get("user_message")
    return str(err)


def replay_work(faults: Faults, work_id: str) -> dict[str, Any] | None:
    """The work ``work_id`` as the replay with ``faults`` knows it (recorded or deep), or None."""
    return work_for_id(work_id, faults.deep)


class ReplayServer:
    """A :func:`create_replay_app` with :class:`Faults`, on 127.0.0.1, with a request log."""

    def __init__(self, faults: Faults | None = None) -> None:
        self.faults = faults or Faults()
        self.log: list[str] = []
        app = create_replay_app(self.faults)

        @app.middleware("http")
        async def record(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
            query = f"?{request.url.query}" if request.url.query else ""
            self.log.append(f"{request.method} {request.url.path}{query}")
            return await call_next(request)

        self.server = BackgroundServer(app)

    @property
    def url(self) -> str:
        return self.server.url

    def config(self, **pixiv: Any) -> dict[str, Any]:
        """The ``[pixiv]`` section pointing a stack at this server."""
        return {"api_url": self.url, "auth_url": self.url, **pixiv}

    def searches(self) -> list[str]:
        """Logged search requests."""
        return [line for line in self.log if "/v1/search/illust" in line]

    def reset(self) -> ReplayServer:
        """Forget every fault and request (one server serving the tests of a module)."""
        self.faults.__init__()  # type: ignore[misc]  # in place: the app holds this object
        self.log.clear()
        return self

    async def start(self) -> ReplayServer:
        await self.server.start()
        return self

    async def stop(self) -> None:
        await self.server.stop()


def ordered(tag: str, sort: str = "date_desc") -> list[str]:
    """Recorded work ids a tag search for ``tag`` returns (partial match), in the
    replay's order for ``sort`` (``date_desc`` or ``date_asc``)."""
    works = [w for w in recorded_works() if matches(w, tag, "partial_match_for_tags")]
    works.sort(key=lambda w: (w["create_date"], int(w["id"])), reverse=sort != "date_asc")
    return [str(w["id"]) for w in works]


def work_ids_with_tag(tag: str) -> list[str]:
    """Recorded work ids a ``date_desc`` tag search for ``tag`` returns, in order."""
    return ordered(tag)

"""The replay server: the recorded Pixiv app-api responses, served over real HTTP.

With no ``PIXIV_REFRESH_TOKEN`` the stack points the Pixiv client at this server; the
client code is the same as against Pixiv. It serves:

* ``POST /auth/token`` — the refresh-token grant (any non-empty refresh token);
* ``GET /v1/search/illust`` — the recorded works carrying the ``word`` tags (space =
  AND, `` OR `` = OR; ``partial_match_for_tags`` matches substrings,
  ``exact_match_for_tags`` whole tags, ``title_and_caption`` the text), sorted by
  ``sort`` (``date_desc`` default, ``date_asc``, ``popular_desc``), filtered by
  ``start_date`` / ``end_date`` and ``duration`` (relative to the newest recorded day),
  30 per page with ``next_url`` paging; ``offset`` beyond 5000 answers HTTP 400 like
  Pixiv;
* ``GET /v1/illust/ranking`` — without ``date`` every recorded work in recorded order;
  with ``date`` the works of the mode's span ending that day (``day`` 1 day, ``week`` 7,
  ``month`` 30; ``*_r18`` modes only R-18 works) by bookmarks; an unknown ``mode`` is
  HTTP 400;
* ``GET /v1/illust/detail`` — one work, or a 404 error body;
* ``GET /i/<path>`` — images: deterministic pictures with the recorded aspect ratio at a
  tenth of the recorded size, PNG or JPEG by extension. Like ``i.pximg.net`` it answers
  403 without the app's ``Referer``. Works list their images with Pixiv's canonical
  URLs (``https://i.pximg.net/<path>``), as Pixiv does, never with this server's own
  address: the Pixiv client of replay mode fetches ``<path>`` from its replay server
  (:meth:`curaflow.sources.pixiv.PixivClient.image_url`), so a work bound through one
  worker's replay server is fetched through any other's.

Recorded data: ``data/*.json`` (pixivpy's public-domain fixtures with personal details
replaced; see ``curaflow/sources/replay/data/README.md``). Error bodies use the real
app-api shapes. :class:`Faults` scripts failures and synthetic data for tests (rate
limits, invalid grants, expired tokens, missing / forbidden / restricted works, slow,
truncated or unsized images, a result set deep enough to reach the 5000-offset cap) and
records every request it answers.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import io
import json
import re
import secrets
import time
from dataclasses import dataclass, field
from datetime import date, timedelta
from functools import lru_cache
from importlib import resources
from typing import Any
from urllib.parse import urlencode

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse as _StarletteJSON
from fastapi.responses import StreamingResponse
from PIL import Image, ImageDraw

SCALE = 10
PAGE = 30
MAX_OFFSET = 5000
PLACEHOLDER_URL = "https://s.pximg.net/common/images/limit_sanity_level_360.png"
RANKING_SPANS = {
    "day": 1,
    "week": 7,
    "month": 30,
    "day_male": 1,
    "day_female": 1,
    "day_ai": 1,
    "week_original": 7,
    "week_rookie": 7,
    "day_r18": 1,
    "day_male_r18": 1,
    "day_female_r18": 1,
    "week_r18": 7,
}
DURATIONS = {"within_last_day": 1, "within_last_week": 7, "within_last_month": 30}


class JSONResponse(_StarletteJSON):
    """A JSON answer encoded like the app-api's: ASCII only, non-ASCII as ``\\uXXXX`` escapes.

    This is how a broken emoji reaches a client: a lone ``\\ud83d`` escape, which decodes
    to a lone surrogate (it could not travel as raw UTF-8).
    """

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


@lru_cache(maxsize=1)
def recorded_works() -> tuple[dict[str, Any], ...]:
    """Every recorded illust, in recorded order (ranking, related, detail), unique by id."""
    root = resources.files("curaflow.sources.replay") / "data"
    works: list[dict[str, Any]] = []
    seen: set[int] = set()
    for name in ("illust_ranking.json", "illust_related.json", "illust_detail.json"):
        data = json.loads((root / name).read_text(encoding="utf-8"))
        items = data.get("illusts") or [data["illust"]]
        for item in items:
            if item["id"] not in seen:
                seen.add(item["id"])
                works.append(item)
    return tuple(works)


def newest_day() -> str:
    """The newest recorded ``create_date`` day: the replay's "today"."""
    return max(w["create_date"][:10] for w in recorded_works())


@dataclass(frozen=True)
class DeepSet:
    """A synthetic result set for one tag, deep enough to page past the 5000-offset cap.

    Works are ranked newest first (rank 0 = newest); rank ``r`` has id
    ``id_base + count - r`` (ids grow with time, as on Pixiv), ``per_day`` works per day
    ending on ``last_day``, one page of 100×100 pixels and ``total_bookmarks`` 1000 when
    ``r`` is in ``popular_ranks``, else 0.
    """

    tag: str
    count: int = 5400
    per_day: int = 100
    last_day: str = "2025-02-04"
    popular_ranks: frozenset[int] = frozenset()
    id_base: int = 900_000_000

    def work_id(self, rank: int) -> str:
        """The id of the work at ``rank``."""
        return str(self.id_base + self.count - rank)


@lru_cache(maxsize=8)
def deep_works(deep: DeepSet) -> tuple[dict[str, Any], ...]:
    """The works of ``deep`` in rank order (newest first)."""
    last = date.fromisoformat(deep.last_day)
    step = max(1, 86_400 // max(1, deep.per_day))
    works = []
    for rank in range(deep.count):
        day = last - timedelta(days=rank // deep.per_day)
        second = 86_399 - (rank % deep.per_day) * step
        stamp = f"{day.isoformat()}T{second // 3600:02d}:{second % 3600 // 60:02d}:{second % 60:02d}+09:00"
        wid = deep.work_id(rank)
        path = f"{day.year}/{day.month:02d}/{day.day:02d}/00/00/00/{wid}_p0"
        works.append(
            {
                "id": int(wid),
                "title": f"deep {rank}",
                "type": "illust",
                "image_urls": {"large": f"https://i.pximg.net/c/600x1200_90/img-master/img/{path}_master1200.jpg"},
                "caption": "",
                "restrict": 0,
                "user": {"id": 90009999, "name": "artist-deep", "account": "artistdeep"},
                "tags": [{"name": deep.tag, "translated_name": None}],
                "tools": [],
                "create_date": stamp,
                "page_count": 1,
                "width": 1000,
                "height": 1000,
                "sanity_level": 2,
                "x_restrict": 0,
                "series": None,
                "meta_single_page": {"original_image_url": f"https://i.pximg.net/img-original/img/{path}.jpg"},
                "meta_pages": [],
                "total_view": 100,
                "total_bookmarks": 1000 if rank in deep.popular_ranks else 0,
                "is_bookmarked": False,
                "visible": True,
                "is_muted": False,
                "total_comments": 0,
                "illust_ai_type": 1,
                "illust_book_style": 0,
            }
        )
    return tuple(works)


@lru_cache(maxsize=1)
def _recorded_by_id() -> dict[str, dict[str, Any]]:
    return {str(w["id"]): w for w in recorded_works()}


def work_for_id(faults: Faults, work_id: str) -> dict[str, Any] | None:
    """The recorded (or synthetic deep) work with ``work_id`` as the replay serves it, or None."""
    work = _recorded_by_id().get(work_id)
    if work is None and faults.deep is not None:
        deep = faults.deep
        rank = deep.id_base + deep.count - int(work_id) if work_id.isdigit() else -1
        if 0 <= rank < deep.count:
            work = deep_works(deep)[rank]
    return work


def placeholder(work: dict[str, Any]) -> dict[str, Any]:
    """A restricted work as the app-api lists it: ``visible: false``, no tags, limit_* images."""
    out = copy.deepcopy(work)
    out.update(
        {
            "title": "",
            "caption": "",
            "tags": [],
            "visible": False,
            "image_urls": {"square_medium": PLACEHOLDER_URL, "medium": PLACEHOLDER_URL, "large": PLACEHOLDER_URL},
            "meta_single_page": {},
            "meta_pages": [],
        }
    )
    return out


def _matches(work: dict[str, Any], word: str, target: str) -> bool:
    names = [t["name"].lower() for t in work.get("tags", [])]
    names += [(t.get("translated_name") or "").lower() for t in work.get("tags", [])]
    text = f"{work.get('title', '')} {work.get('caption', '')}".lower()

    def one(tag: str) -> bool:
        tag = tag.lower()
        if target == "title_and_caption":
            return tag in text
        if target == "exact_match_for_tags":
            return tag in names
        return any(tag in n for n in names if n)

    alternatives = [a.split() for a in re.split(r"\s+OR\s+", word.strip()) if a.strip()]
    return any(all(one(t) for t in group) for group in alternatives)


@dataclass
class Logged:
    """One request the replay answered.

    Attributes:
        kind: ``auth`` | ``search`` | ``ranking`` | ``detail`` | ``image``.
        params: query parameters (form fields for ``auth``, minus secrets).
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
class Faults:
    """Scripted faults and synthetic data for tests.

    Each list is consumed front to back, one entry per request of its kind; ``None``
    answers normally.

    Attributes:
        search: per search/ranking request: ``"rate_limit"`` (HTTP 403 Rate Limit body),
            ``"rate_limit_429"``, ``"restricted"`` (access restricted body),
            ``"oauth"`` (invalid access token), ``"500"``.
        auth: per token request: ``"invalid_grant"`` (HTTP 400), ``"rate_limit"``,
            ``"500"``.
        images: per image request: ``"truncate"`` (half the body, full
            ``Content-Length``), ``"chunked"`` (no ``Content-Length``), ``"slow"``
            (``slow_images_s`` pause mid-body), ``"429"``, ``"500"``.
        retry_after_s: a ``Retry-After`` header on rate-limit answers.
        missing_works: ids answering 404 (detail and images).
        forbidden_works: ids whose images answer 403 even with the Referer (private).
        restricted_works: ids listed as restricted placeholders; their detail answers
            "Your access is currently restricted." (HTTP 200) and their images 403.
        mutate: per work id, fields replacing the recorded ones (``illust_ai_type``,
            ``x_restrict`` …) in every answer.
        image_sizes: per work id, or per page as ``"<id>_p<N>"``, the pixel size its
            images are rendered at (instead of a tenth of the recorded size).
        deep: a synthetic deep result set (:class:`DeepSet`) for one tag.
        search_delay_s: delay before answering a search or ranking request, seconds.
        slow_images_s: pause in the middle of every image body while > 0 (read per
            request, so a test can change it live), and of a ``"slow"`` image, seconds.
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
    forbidden_works: set[str] = field(default_factory=set)
    restricted_works: set[str] = field(default_factory=set)
    mutate: dict[str, dict[str, Any]] = field(default_factory=dict)
    image_sizes: dict[str, tuple[int, int]] = field(default_factory=dict)
    deep: DeepSet | None = None
    search_delay_s: float = 0.0
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


def _error(status: int, message: str, user_message: str = "") -> JSONResponse:
    return JSONResponse(
        {"error": {"user_message": user_message, "message": message, "reason": "", "user_message_details": {}}},
        status_code=status,
    )


def image_size(faults: Faults, work: dict[str, Any], page: int) -> tuple[int, int]:
    """The pixel size page ``page`` of ``work`` is served at (see :attr:`Faults.image_sizes`)."""
    wid = str(work["id"])
    size = faults.image_sizes.get(f"{wid}_p{page}") or faults.image_sizes.get(wid)
    return size or (work["width"] // SCALE, work["height"] // SCALE)


@lru_cache(maxsize=64)
def render_image(work_id: str, page: int, width: int, height: int, fmt: str) -> bytes:
    """A deterministic picture of ``width``×``height`` for a work page (PNG or JPEG bytes)."""
    digest = hashlib.sha256(f"{work_id}:{page}".encode()).digest()
    w, h = max(1, width), max(1, height)
    image = Image.new("RGB", (w, h), (digest[0], digest[1], digest[2]))
    draw = ImageDraw.Draw(image)
    for i in range(0, max(w, h), max(4, min(w, h) // 8)):
        draw.line([(i, 0), (0, i)], fill=(digest[3], digest[4], digest[5]), width=2)
    draw.rectangle([w // 4, h // 4, 3 * w // 4, 3 * h // 4], outline=(digest[6], digest[7], digest[8]), width=2)
    buf = io.BytesIO()
    image.save(buf, format="PNG" if fmt == "png" else "JPEG", quality=85)
    return buf.getvalue()


def create_replay_app(faults: Faults | None = None) -> FastAPI:
    """Build the replay ASGI app.

    Args:
        faults: scripted faults and synthetic data (tests); None serves the recording
            faithfully.
    """
    app = FastAPI(title="curaflow Pixiv replay", docs_url=None, redoc_url=None)
    app.state.faults = faults or Faults()
    app.state.tokens = {}
    today = newest_day()

    def fx() -> Faults:
        faults: Faults = app.state.faults
        return faults

    def corpus() -> list[dict[str, Any]]:
        works = list(recorded_works())
        deep = fx().deep
        if deep is not None:
            works += list(deep_works(deep))
        return works

    def work_by_id(work_id: str) -> dict[str, Any] | None:
        return work_for_id(fx(), work_id)

    def present(work: dict[str, Any]) -> dict[str, Any]:
        wid = str(work["id"])
        if wid in fx().mutate:
            work = {**work, **fx().mutate[wid]}
        if wid in fx().restricted_works:
            work = placeholder(work)
        return work

    def record(request: Request, kind: str, response: Response, params: dict[str, str] | None = None) -> Response:
        error = None
        raw = bytes(response.body) if isinstance(response, JSONResponse) else b""
        if raw and (response.status_code != 200 or raw.startswith(b'{"error"')):
            try:
                body = json.loads(raw)
                err = body.get("error")
                error = err.get("message") or err.get("user_message") if isinstance(err, dict) else str(err)
            except (ValueError, AttributeError):
                error = None
        fx().log.append(
            Logged(
                kind=kind,
                path=request.url.path,
                params=params if params is not None else dict(request.query_params),
                status=response.status_code,
                at=time.time(),
                referer=request.headers.get("referer"),
                error=error,
            )
        )
        return response

    def check_token(request: Request) -> JSONResponse | None:
        auth = request.headers.get("authorization", "")
        token = auth.removeprefix("Bearer ").strip()
        expires = app.state.tokens.get(token)
        loop_time = asyncio.get_running_loop().time()
        if not token or expires is None or expires < loop_time:
            return _error(
                400,
                "Error occurred at the OAuth process. Please check your Access Token to fix this. "
                "Error Message: invalid_grant",
            )
        return None

    def next_fault(queue: list[str | None]) -> str | None:
        return queue.pop(0) if queue else None

    def rate_limited(status: int) -> JSONResponse:
        response = _error(status, "Rate Limit")
        if fx().retry_after_s is not None:
            response.headers["Retry-After"] = str(fx().retry_after_s)
        return response

    def search_fault(fault: str | None) -> JSONResponse | None:
        if fault == "rate_limit":
            return rate_limited(403)
        if fault == "rate_limit_429":
            return rate_limited(429)
        if fault == "restricted":
            return _error(403, "", "Your access is currently restricted.")
        if fault == "oauth":
            return _error(
                400,
                "Error occurred at the OAuth process. Please check your Access Token to fix this. "
                "Error Message: invalid_grant",
            )
        if fault == "500":
            return JSONResponse({"error": {"message": "internal"}}, status_code=500)
        return None

    @app.post("/auth/token")
    async def token(request: Request) -> Response:
        form = await request.form()
        params = {k: str(v) for k, v in form.items() if k in ("grant_type", "get_secure_url")}
        params["x_client_hash"] = request.headers.get("x-client-hash", "")
        params["x_client_time"] = request.headers.get("x-client-time", "")
        fault = next_fault(fx().auth)
        if fault == "invalid_grant" or not str(form.get("refresh_token") or "").strip():
            body = {
                "has_error": True,
                "errors": {"system": {"message": "Invalid refresh token", "code": 1508}},
                "error": "invalid_grant",
            }
            return record(request, "auth", JSONResponse(body, status_code=400), params)
        if fault == "rate_limit":
            return record(request, "auth", rate_limited(403), params)
        if fault == "500":
            return record(request, "auth", JSONResponse({"error": "server_error"}, status_code=500), params)
        access = secrets.token_urlsafe(24)
        ttl = fx().token_ttl_s
        configured = fx().token_lifetime_s
        lifetime = float(configured) if configured is not None else float(ttl)
        app.state.tokens[access] = asyncio.get_running_loop().time() + lifetime
        user = {"id": "90000000", "name": "replay", "account": "replay", "is_premium": False, "x_restrict": 2}
        body = {
            "access_token": access,
            "expires_in": ttl,
            "token_type": "bearer",
            "scope": "",
            "refresh_token": str(form.get("refresh_token")),
            "user": user,
        }
        return record(request, "auth", JSONResponse({**body, "response": body}), params)

    def page_of(request: Request, works: list[dict[str, Any]], path: str, params: dict[str, str]) -> JSONResponse:
        offset = int(params.get("offset") or 0)
        if offset > MAX_OFFSET:
            return _error(400, json.dumps({"offset": ["offset must be no more than 5000"]}))
        chunk = works[offset : offset + PAGE] if offset >= 0 else []
        next_url = None
        if offset + PAGE < len(works):
            query = {k: v for k, v in params.items() if k != "offset"}
            query["offset"] = str(offset + PAGE)
            next_url = f"https://app-api.pixiv.net{path}?{urlencode(query)}"
        return JSONResponse(
            {
                "illusts": [present(w) for w in chunk],
                "next_url": next_url,
                "search_span_limit": 31536000,
                "show_ai": True,
            }
        )

    @lru_cache(maxsize=64)
    def results(
        word: str, target: str, start: str | None, end: str | None, sort: str, deep: DeepSet | None
    ) -> tuple[dict[str, Any], ...]:
        """A search's whole result list (cached: paging a deep result set re-asks it often)."""
        works = [w for w in corpus() if _matches(w, word, target)]
        if start:
            works = [w for w in works if w["create_date"][:10] >= start]
        if end:
            works = [w for w in works if w["create_date"][:10] <= end]
        if sort == "popular_desc":
            works.sort(key=lambda w: (-int(w.get("total_bookmarks") or 0), -int(w["id"])))
        else:
            works.sort(key=lambda w: (w["create_date"], int(w["id"])), reverse=sort != "date_asc")
        return tuple(works)

    @app.get("/v1/search/illust")
    async def search(request: Request) -> Response:
        denied = check_token(request)
        if denied:
            return record(request, "search", denied)
        fault = search_fault(next_fault(fx().search))
        if fault:
            return record(request, "search", fault)
        if fx().search_delay_s:
            await asyncio.sleep(fx().search_delay_s)
        params = dict(request.query_params)
        start, end = params.get("start_date"), params.get("end_date")
        for value in (start, end):
            if value and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
                return record(request, "search", _error(400, "Invalid date"))
        if params.get("duration") in DURATIONS:
            since = (date.fromisoformat(today) - timedelta(days=DURATIONS[params["duration"]])).isoformat()
            start = max(start or since, since)
        works = results(
            params.get("word", ""),
            params.get("search_target", "partial_match_for_tags"),
            start,
            end,
            params.get("sort", "date_desc"),
            fx().deep,
        )
        return record(request, "search", page_of(request, list(works), "/v1/search/illust", params))

    @app.get("/v1/illust/ranking")
    async def ranking(request: Request) -> Response:
        denied = check_token(request)
        if denied:
            return record(request, "ranking", denied)
        fault = search_fault(next_fault(fx().search))
        if fault:
            return record(request, "ranking", fault)
        if fx().search_delay_s:
            await asyncio.sleep(fx().search_delay_s)
        params = dict(request.query_params)
        mode = params.get("mode", "day")
        if mode not in RANKING_SPANS:
            return record(request, "ranking", _error(400, f"Invalid mode: {mode}"))
        works = list(recorded_works())
        day = params.get("date")
        if day:
            first = (date.fromisoformat(day) - timedelta(days=RANKING_SPANS[mode] - 1)).isoformat()
            works = [w for w in works if first <= w["create_date"][:10] <= day]
            works.sort(key=lambda w: -int(w.get("total_bookmarks") or 0))
        if mode.endswith("_r18"):
            works = [w for w in works if int(fx().mutate.get(str(w["id"]), {}).get("x_restrict", w["x_restrict"])) > 0]
        return record(request, "ranking", page_of(request, works, "/v1/illust/ranking", params))

    @app.get("/v1/illust/detail")
    async def detail(request: Request, illust_id: str = "") -> Response:
        denied = check_token(request)
        if denied:
            return record(request, "detail", denied)
        work = work_by_id(illust_id)
        if illust_id in fx().restricted_works:
            return record(request, "detail", _error(200, "", "Your access is currently restricted."))
        if work is None or illust_id in fx().missing_works:
            return record(request, "detail", _error(404, "", "該当作品は削除されたか、存在しない作品IDです。"))
        return record(request, "detail", JSONResponse({"illust": present(work)}))

    @app.get("/i/{path:path}")
    async def image(request: Request, path: str) -> Response:
        if not request.headers.get("referer", "").startswith("https://app-api.pixiv.net"):
            return record(request, "image", Response(status_code=403, content=b"Forbidden"))
        name = path.rsplit("/", 1)[-1]
        match = re.match(r"^(\d+)_p(\d+)", name)
        work = work_by_id(match.group(1)) if match else None
        if match is None or work is None or match.group(1) in fx().missing_works:
            return record(request, "image", Response(status_code=404, content=b"Not Found"))
        wid, page = match.group(1), int(match.group(2))
        if wid in fx().forbidden_works or wid in fx().restricted_works:
            return record(request, "image", Response(status_code=403, content=b"Forbidden"))
        fault = next_fault(fx().images)
        if fault is None and fx().truncate_images:
            fault = "truncate"
        if fault is None and fx().slow_images_s > 0:
            fault = "slow"
        if fault == "429":
            return record(request, "image", Response(status_code=429, content=b"Too Many Requests"))
        if fault == "500":
            return record(request, "image", Response(status_code=500, content=b"Internal Server Error"))
        fmt = "png" if name.endswith(".png") else "jpeg"
        size = image_size(fx(), work, page)
        body = await asyncio.to_thread(render_image, wid, page, size[0], size[1], fmt)
        media = "image/png" if fmt == "png" else "image/jpeg"
        record(request, "image", Response(status_code=200), {"fault": fault or ""})
        if fault in ("truncate", "slow", "chunked"):
            delay = (fx().slow_images_s or 1.0) if fault == "slow" else 0.0

            async def stream() -> Any:
                half = len(body) // 2
                yield body[:half]
                if delay:
                    await asyncio.sleep(delay)
                if fault != "truncate":
                    yield body[half:]

            headers = {} if fault == "chunked" else {"Content-Length": str(len(body))}
            return StreamingResponse(stream(), media_type=media, headers=headers)
        return Response(content=body, media_type=media)

    return app

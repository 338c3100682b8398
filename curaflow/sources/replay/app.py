"""The replay server: the recorded Pixiv app-api responses, served over real HTTP.

With no ``PIXIV_REFRESH_TOKEN`` the stack points the Pixiv client at this server; the
client code is the same as against Pixiv. It serves:

* ``POST /auth/token`` — the refresh-token grant (any non-empty refresh token);
* ``GET /v1/search/illust`` — the recorded works carrying the ``word`` tags (space =
  AND, `` OR `` = OR; ``partial_match_for_tags`` matches substrings), in recorded
  order, 30 per page with ``next_url`` paging, ``start_date`` / ``end_date`` filters;
* ``GET /v1/illust/ranking`` — every recorded work in recorded order;
* ``GET /v1/illust/detail`` — one work, or a 404 error body;
* ``GET /i/<path>`` — images: deterministic pictures with the recorded aspect ratio at a
  tenth of the recorded size, PNG or JPEG by extension. Like ``i.pximg.net`` it answers
  403 without the app's ``Referer``.

Recorded data: ``data/*.json`` (pixivpy's public-domain fixtures with personal details
replaced; see ``curaflow/sources/replay/data/README.md``). Error bodies use the real
app-api shapes. :class:`Faults` scripts failures for tests (rate limits, invalid
grants, missing works, slow or truncated images).
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import re
import secrets
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any
from urllib.parse import urlencode

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from PIL import Image, ImageDraw

SCALE = 10
PAGE = 30
IMAGE_HOSTS = ("https://i.pximg.net",)


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


def _rewrite_urls(value: Any, base: str) -> Any:
    if isinstance(value, str):
        for host in IMAGE_HOSTS:
            if value.startswith(host):
                return base + "/i" + value[len(host) :]
        return value
    if isinstance(value, list):
        return [_rewrite_urls(v, base) for v in value]
    if isinstance(value, dict):
        return {k: _rewrite_urls(v, base) for k, v in value.items()}
    return value


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
class Faults:
    """Scripted faults for tests; each list is consumed front to back, one per request.

    Attributes:
        search: per search/ranking request: ``"rate_limit"`` (HTTP 403 Rate Limit body),
            ``"rate_limit_429"``, ``"restricted"``, ``"oauth"`` (invalid access token),
            ``"500"`` or ``None`` (answer normally).
        auth: per token request: ``"invalid_grant"`` (HTTP 400) or ``None``.
        missing_works: work ids answering 404 (detail and images).
        search_delay_s: delay before answering a search or ranking request, seconds.
        slow_images_s: delay before an image body, seconds.
        truncate_images: image bodies cut in half (Content-Length still the full size).
        token_ttl_s: ``expires_in`` of issued access tokens.
    """

    search: list[str | None] = field(default_factory=list)
    auth: list[str | None] = field(default_factory=list)
    missing_works: set[str] = field(default_factory=set)
    search_delay_s: float = 0.0
    slow_images_s: float = 0.0
    truncate_images: bool = False
    token_ttl_s: int = 3600
    requests: list[str] = field(default_factory=list)


def _error(status: int, message: str, user_message: str = "") -> JSONResponse:
    return JSONResponse(
        {"error": {"user_message": user_message, "message": message, "reason": "", "user_message_details": {}}},
        status_code=status,
    )


@lru_cache(maxsize=512)
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
        faults: scripted faults (tests); None serves the recording faithfully.
    """
    app = FastAPI(title="curaflow Pixiv replay", docs_url=None, redoc_url=None)
    app.state.faults = faults or Faults()
    app.state.tokens = {}
    by_id = {str(w["id"]): w for w in recorded_works()}

    def base_of(request: Request) -> str:
        return str(request.base_url).rstrip("/")

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

    def next_fault(kind: str) -> str | None:
        queue = app.state.faults.search if kind == "search" else app.state.faults.auth
        return queue.pop(0) if queue else None

    def search_fault(fault: str | None) -> JSONResponse | None:
        if fault == "rate_limit":
            return _error(403, "Rate Limit")
        if fault == "rate_limit_429":
            return _error(429, "Rate Limit")
        if fault == "restricted":
            return _error(403, "", "Your access is currently restricted.")
        if fault == "500":
            return JSONResponse({"error": {"message": "internal"}}, status_code=500)
        return None

    @app.post("/auth/token")
    async def token(request: Request) -> JSONResponse:
        form = await request.form()
        app.state.faults.requests.append("auth")
        fault = next_fault("auth")
        if fault == "invalid_grant" or not str(form.get("refresh_token") or "").strip():
            return JSONResponse(
                {
                    "has_error": True,
                    "errors": {"system": {"message": "Invalid refresh token", "code": 1508}},
                    "error": "invalid_grant",
                },
                status_code=400,
            )
        access = secrets.token_urlsafe(24)
        ttl = app.state.faults.token_ttl_s
        app.state.tokens[access] = asyncio.get_running_loop().time() + ttl
        user = {"id": "90000000", "name": "replay", "account": "replay", "is_premium": False, "x_restrict": 2}
        body = {
            "access_token": access,
            "expires_in": ttl,
            "token_type": "bearer",
            "scope": "",
            "refresh_token": str(form.get("refresh_token")),
            "user": user,
        }
        return JSONResponse({**body, "response": body})

    def page_of(request: Request, works: list[dict[str, Any]], path: str, params: dict[str, str]) -> JSONResponse:
        offset = int(params.get("offset") or 0)
        if offset > 5000:
            return _error(400, json.dumps({"offset": ["offset must be no more than 5000"]}))
        chunk = works[offset : offset + PAGE]
        base = base_of(request)
        next_url = None
        if offset + PAGE < len(works):
            query = {k: v for k, v in params.items() if k != "offset"}
            query["offset"] = str(offset + PAGE)
            next_url = f"{base}{path}?{urlencode(query)}"
        return JSONResponse(
            {
                "illusts": [_rewrite_urls(w, base) for w in chunk],
                "next_url": next_url,
                "search_span_limit": 31536000,
                "show_ai": True,
            }
        )

    @app.get("/v1/search/illust")
    async def search(request: Request) -> JSONResponse:
        app.state.faults.requests.append("search")
        denied = check_token(request)
        if denied:
            return denied
        fault = search_fault(next_fault("search"))
        if fault:
            return fault
        if app.state.faults.search_delay_s:
            await asyncio.sleep(app.state.faults.search_delay_s)
        params = dict(request.query_params)
        word = params.get("word", "")
        target = params.get("search_target", "partial_match_for_tags")
        works = [w for w in recorded_works() if _matches(w, word, target)]
        if params.get("start_date"):
            works = [w for w in works if w["create_date"][:10] >= params["start_date"]]
        if params.get("end_date"):
            works = [w for w in works if w["create_date"][:10] <= params["end_date"]]
        return page_of(request, works, "/v1/search/illust", params)

    @app.get("/v1/illust/ranking")
    async def ranking(request: Request) -> JSONResponse:
        app.state.faults.requests.append("ranking")
        denied = check_token(request)
        if denied:
            return denied
        fault = search_fault(next_fault("search"))
        if fault:
            return fault
        return page_of(request, list(recorded_works()), "/v1/illust/ranking", dict(request.query_params))

    @app.get("/v1/illust/detail")
    async def detail(request: Request, illust_id: str = "") -> JSONResponse:
        app.state.faults.requests.append("detail")
        denied = check_token(request)
        if denied:
            return denied
        work = by_id.get(illust_id)
        if work is None or illust_id in app.state.faults.missing_works:
            return _error(404, "", "該当作品は削除されたか、存在しない作品IDです。")
        return JSONResponse({"illust": _rewrite_urls(work, base_of(request))})

    @app.get("/i/{path:path}")
    async def image(request: Request, path: str) -> Response:
        app.state.faults.requests.append("image")
        if not request.headers.get("referer", "").startswith("https://app-api.pixiv.net"):
            return Response(status_code=403, content=b"Forbidden")
        name = path.rsplit("/", 1)[-1]
        match = re.match(r"^(\d+)_p(\d+)", name)
        if not match or match.group(1) not in by_id or match.group(1) in app.state.faults.missing_works:
            return Response(status_code=404, content=b"Not Found")
        work = by_id[match.group(1)]
        fmt = "png" if name.endswith(".png") else "jpeg"
        body = render_image(match.group(1), int(match.group(2)), work["width"] // SCALE, work["height"] // SCALE, fmt)
        faults = app.state.faults
        media = "image/png" if fmt == "png" else "image/jpeg"
        if faults.slow_images_s or faults.truncate_images:

            async def stream() -> Any:
                half = len(body) // 2
                yield body[:half]
                if faults.slow_images_s:
                    await asyncio.sleep(faults.slow_images_s)
                if not faults.truncate_images:
                    yield body[half:]

            return StreamingResponse(stream(), media_type=media, headers={"Content-Length": str(len(body))})
        return Response(content=body, media_type=media)

    return app

"""The replay server: the recorded Pixiv app-api responses, served over real HTTP.

With no ``PIXIV_REFRESH_TOKEN`` the stack points the Pixiv client at this server; the
client code is the same as against Pixiv. It serves:

* ``GET /web/v1/login`` — the app's login page (PKCE, ``code_challenge_method=S256``):
  the replay has no form to fill, it signs the recorded user in at once and redirects to
  Pixiv's callback address with a code bound to the challenge (single use, valid
  :attr:`ReplayScript.code_ttl_s` seconds);
* ``POST /auth/token`` — the refresh-token grant (any non-empty refresh token) and the
  authorization-code grant of the login (``code``, ``code_verifier``, ``redirect_uri``),
  answering an expired, unknown or reused code, a wrong verifier and an unknown grant
  type with Pixiv's ``400 invalid_grant`` bodies;
* ``GET /v1/search/illust`` — the recorded works carrying the ``word`` tags (space =
  AND, `` OR `` = OR; ``partial_match_for_tags`` matches substrings,
  ``exact_match_for_tags`` whole tags, ``title_and_caption`` the text), sorted by
  ``sort`` (``date_desc`` default, ``date_asc``, ``popular_desc``), filtered by
  ``start_date`` / ``end_date`` and ``duration`` (relative to the newest recorded day);
  a ``search_target``, ``sort`` or ``duration`` Pixiv does not take
  (:mod:`curaflow.sources.pixiv.query_words`) answers HTTP 400 naming it, as Pixiv does;
  30 per page with ``next_url`` paging; ``offset`` beyond 5000 answers HTTP 400 like
  Pixiv;
* ``GET /v1/illust/ranking`` — without ``date`` every recorded work in recorded order;
  with ``date`` the works of the mode's span ending that day (``day`` 1 day, ``week`` 7,
  ``month`` 30; ``*_r18`` / ``*_r18g`` modes only R-18 works) by bookmarks; an unknown
  ``mode`` is HTTP 400 (every mode of :data:`~curaflow.sources.pixiv.query_words.RANKING_MODES`
  has a span);
* ``GET /v1/illust/detail`` — one work, or a 404 error body;
* ``GET /v1/ugoira/metadata`` — the frames zip URL and delays of the one animated work
  (:data:`~curaflow.sources.pixiv.replay.data.UGOIRA_ID`, tag ``うごイラ``), whose zip
  ``GET /i/img-zip-ugoira/…`` serves; other works answer 404;
* ``GET /i/<path>`` — images (:mod:`curaflow.sources.pixiv.replay.images`), PNG or JPEG by
  extension. Like ``i.pximg.net`` it answers 403 without the app's ``Referer``. Works
  list their images with Pixiv's canonical URLs (``https://i.pximg.net/<path>``), as
  Pixiv does, never with this server's own address: the Pixiv client of replay mode
  fetches ``<path>`` from its replay server
  (:meth:`curaflow.sources.pixiv.client.PixivClient.image_url`), so a work bound through one
  worker's replay server is fetched through any other's.

What is served is :mod:`curaflow.sources.pixiv.replay.data`; error bodies use the real app-api
shapes (:func:`error`). A :class:`ReplayScript` may change the answers — the hooks tests
script faults with (``tests/fakes/replay.py``: rate limits, invalid grants, missing or
restricted works, slow or broken images …); the default script serves the recording
faithfully.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import secrets
from collections.abc import AsyncIterator
from datetime import date, timedelta
from functools import lru_cache
from typing import Any
from urllib.parse import urlencode

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse as _StarletteJSON
from fastapi.responses import RedirectResponse, StreamingResponse

from curaflow.domain.days import day_problem
from curaflow.sources.pixiv.query_words import DURATION_DAYS, SEARCH_TARGETS, SORTS
from curaflow.sources.pixiv.replay import data, images
from curaflow.sources.pixiv.replay.data import DeepSet

PAGE = 30
MAX_OFFSET = 5000
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
    "day_manga": 1,
    "week_r18g": 7,
}
#: The search's ``duration`` words and their days (Pixiv's: the one owner's).
DURATIONS = DURATION_DAYS
#: The search's words the app-api takes, by parameter (the one owner's): another is HTTP
#: 400 naming the parameter, as Pixiv answers.
SEARCH_WORDS = {"search_target": SEARCH_TARGETS, "sort": SORTS, "duration": tuple(DURATION_DAYS)}
#: Where Pixiv's login page sends the browser once the user signed in.
LOGIN_CALLBACK = "https://app-api.pixiv.net/web/v1/users/auth/pixiv/callback"
#: The account the replay's login signs in.
REPLAY_USER = {"id": "90000000", "name": "replay", "account": "replay", "is_premium": False, "x_restrict": 2}
INVALID_GRANT = (
    "Error occurred at the OAuth process. Please check your Access Token to fix this. Error Message: invalid_grant"
)


class JSONResponse(_StarletteJSON):
    """A JSON answer encoded like the app-api's: ASCII only, non-ASCII as ``\\uXXXX`` escapes.

    This is how a broken emoji reaches a client: a lone ``\\ud83d`` escape, which decodes
    to a lone surrogate (it could not travel as raw UTF-8).
    """

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


def error(status: int, message: str, user_message: str = "") -> JSONResponse:
    """An app-api error answer: ``{"error": {user_message, message, reason, user_message_details}}``."""
    return JSONResponse(
        {"error": {"user_message": user_message, "message": message, "reason": "", "user_message_details": {}}},
        status_code=status,
    )


class ReplayScript:
    """The hooks that may change what the replay answers; this base serves the recording.

    Attributes:
        deep: a synthetic deep result set (:class:`~curaflow.sources.pixiv.replay.data.DeepSet`)
            searched and served besides the recording.
        token_ttl_s: ``expires_in`` of issued access tokens.
        code_ttl_s: how long a login's authorization code is accepted (Pixiv's: ~30 s).
    """

    deep: DeepSet | None = None
    token_ttl_s: int = 3600
    code_ttl_s: float = 30.0

    def token_lifetime(self) -> float:
        """How long an issued access token is really accepted (seconds)."""
        return float(self.token_ttl_s)

    def present(self, work: dict[str, Any]) -> dict[str, Any]:
        """A work as every answer shows it."""
        return work

    def listing(self, works: list[dict[str, Any]], sort: str) -> list[dict[str, Any]]:
        """A search's result list as served (a script may drop works or re-rank them)."""
        return works

    async def intercept(self, kind: str, request: Request, work_id: str | None = None) -> Response | None:
        """A scripted answer instead of the real one, or None.

        Asked for each ``auth`` request before the grant, each ``search`` / ``ranking``
        / ``detail`` request once its token is accepted, and each ``image`` request of a
        known work once its ``Referer`` is accepted.
        """
        return None

    def image_size(self, work: dict[str, Any], page: int) -> tuple[int, int]:
        """The pixel size page ``page`` of ``work`` is served at."""
        return images.image_size(work, page)

    def image_response(self, request: Request, body: bytes, media_type: str) -> tuple[Response, str]:
        """The answer carrying an image's bytes, and a tag naming how it was sent (logged)."""
        return Response(content=body, media_type=media_type), ""

    def answered(self, kind: str, request: Request, response: Response, params: dict[str, str]) -> None:
        """Called with every answer: ``kind`` is ``auth`` | ``login`` | ``search`` |
        ``ranking`` | ``ugoira`` | ``detail`` | ``image``; ``params`` the query (the form minus secrets for ``auth``;
        ``{"fault": tag}`` for an image)."""


class SlowReplay(ReplayScript):
    """Latency on purpose (benchmarks, demos): searches answer after ``search_delay_s`` and
    image bodies pause half-way for ``slow_images_s`` — both read per request, so they can
    be changed while jobs run. Holds a job's steps in ``searching`` / ``fetching``.
    """

    def __init__(self, search_delay_s: float = 0.0, slow_images_s: float = 0.0) -> None:
        self.search_delay_s = search_delay_s
        self.slow_images_s = slow_images_s

    async def intercept(self, kind: str, request: Request, work_id: str | None = None) -> Response | None:
        if kind in ("search", "ranking") and self.search_delay_s > 0:
            await asyncio.sleep(self.search_delay_s)
        return None

    def image_response(self, request: Request, body: bytes, media_type: str) -> tuple[Response, str]:
        delay = self.slow_images_s
        if delay <= 0:
            return super().image_response(request, body, media_type)

        async def stream() -> AsyncIterator[bytes]:
            yield body[: len(body) // 2]
            await asyncio.sleep(delay)
            yield body[len(body) // 2 :]

        return StreamingResponse(stream(), media_type=media_type, headers={"Content-Length": str(len(body))}), "slow"


def create_replay_app(script: ReplayScript | None = None) -> FastAPI:
    """Build the replay ASGI app.

    Args:
        script: hooks changing the answers (tests); None serves the recording faithfully.
    """
    app = FastAPI(title="curaflow Pixiv replay", docs_url=None, redoc_url=None)
    hooks = script or ReplayScript()
    app.state.script = hooks
    tokens: dict[str, float] = {}
    codes: dict[str, tuple[str, float]] = {}  # login code -> (code_challenge, issued at)
    today = data.newest_day()

    def answer(request: Request, kind: str, response: Response, params: dict[str, str] | None = None) -> Response:
        hooks.answered(kind, request, response, params if params is not None else dict(request.query_params))
        return response

    def token_refused(request: Request) -> JSONResponse | None:
        token = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        expires = tokens.get(token)
        if not token or expires is None or expires < asyncio.get_running_loop().time():
            return error(400, INVALID_GRANT)
        return None

    @lru_cache(maxsize=64)
    def results(
        word: str, target: str, start: str | None, end: str | None, sort: str, deep: DeepSet | None
    ) -> tuple[dict[str, Any], ...]:
        """A search's whole result list (cached: paging a deep result set re-asks it often)."""
        return tuple(data.search(data.corpus(deep), word, target, start, end, sort))

    def page_of(works: list[dict[str, Any]], path: str, params: dict[str, str]) -> JSONResponse:
        offset = int(params.get("offset") or 0)
        if offset > MAX_OFFSET:
            return error(400, json.dumps({"offset": ["offset must be no more than 5000"]}))
        chunk = works[offset : offset + PAGE] if offset >= 0 else []
        next_url = None
        if offset + PAGE < len(works):
            query = {k: v for k, v in params.items() if k != "offset"}
            query["offset"] = str(offset + PAGE)
            next_url = f"https://app-api.pixiv.net{path}?{urlencode(query)}"
        return JSONResponse(
            {
                "illusts": [hooks.present(w) for w in chunk],
                "next_url": next_url,
                "search_span_limit": 31536000,
                "show_ai": True,
            }
        )

    def invalid_grant(message: str, request: Request, params: dict[str, str]) -> Response:
        body = {"has_error": True, "errors": {"system": {"message": message, "code": 1508}}, "error": "invalid_grant"}
        return answer(request, "auth", JSONResponse(body, status_code=400), params)

    @app.get("/web/v1/login")
    async def login(request: Request) -> Response:
        challenge = request.query_params.get("code_challenge", "")
        if not challenge or request.query_params.get("code_challenge_method") != "S256":
            return error(400, "code_challenge with code_challenge_method=S256 is required")
        code = secrets.token_urlsafe(32)
        codes[code] = (challenge, asyncio.get_running_loop().time())
        query = urlencode({"state": secrets.token_urlsafe(8), "code": code})
        return answer(request, "login", RedirectResponse(f"{LOGIN_CALLBACK}?{query}", status_code=302), {})

    def code_grant(form: Any, request: Request, params: dict[str, str]) -> Response | str:
        """The refresh token a login code is worth, or Pixiv's refusal."""
        issued = codes.pop(str(form.get("code") or ""), None)
        if issued is None:
            return invalid_grant("Invalid authorization code", request, params)
        challenge, at = issued
        if asyncio.get_running_loop().time() - at > hooks.code_ttl_s:
            return invalid_grant("The authorization code has expired", request, params)
        verifier = str(form.get("code_verifier") or "")
        computed = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        if not secrets.compare_digest(computed, challenge):
            return invalid_grant("Invalid code_verifier", request, params)
        if form.get("redirect_uri") != LOGIN_CALLBACK:
            return invalid_grant("Invalid redirect_uri", request, params)
        return f"replay-{secrets.token_urlsafe(24)}"

    @app.post("/auth/token")
    async def token(request: Request) -> Response:
        form = await request.form()
        params = {k: str(v) for k, v in form.items() if k in ("grant_type", "get_secure_url")}
        params["x_client_hash"] = request.headers.get("x-client-hash", "")
        params["x_client_time"] = request.headers.get("x-client-time", "")
        scripted = await hooks.intercept("auth", request)
        if scripted is not None:
            return answer(request, "auth", scripted, params)
        grant = str(form.get("grant_type") or "refresh_token")  # the benchmark's probes send none
        if grant == "authorization_code":
            granted = code_grant(form, request, params)
            if not isinstance(granted, str):
                return granted
            refresh_token = granted
        elif grant == "refresh_token":
            refresh_token = str(form.get("refresh_token") or "").strip()
            if not refresh_token:
                return invalid_grant("Invalid refresh token", request, params)
        else:
            return invalid_grant("Invalid grant_type parameter or parameter missing", request, params)
        access = secrets.token_urlsafe(24)
        tokens[access] = asyncio.get_running_loop().time() + hooks.token_lifetime()
        body = {
            "access_token": access,
            "expires_in": hooks.token_ttl_s,
            "token_type": "bearer",
            "scope": "",
            "refresh_token": refresh_token,
            "user": dict(REPLAY_USER),
        }
        return answer(request, "auth", JSONResponse({**body, "response": body}), params)

    @app.get("/v1/search/illust")
    async def search(request: Request) -> Response:
        refused = token_refused(request) or await hooks.intercept("search", request)
        if refused is not None:
            return answer(request, "search", refused)
        params = dict(request.query_params)
        start, end = params.get("start_date"), params.get("end_date")
        for name, value in (("start_date", start), ("end_date", end)):
            if value and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
                # The app-api's validator names the parameter it refuses (its shape, as for
                # an offset past 5000: answers.refused_parameters; a parameter the request carried).
                return answer(request, "search", error(400, json.dumps({name: [f"{name} is invalid"]})))
        for name, words in SEARCH_WORDS.items():
            if name in params and params[name] not in words:
                return answer(request, "search", error(400, json.dumps({name: [f"{name} is invalid"]})))
        if params.get("duration") in DURATIONS:
            since = (date.fromisoformat(today) - timedelta(days=DURATIONS[params["duration"]])).isoformat()
            start = max(start or since, since)
        works = results(
            params.get("word", ""),
            params.get("search_target", "partial_match_for_tags"),
            start,
            end,
            params.get("sort", "date_desc"),
            hooks.deep,
        )
        listed = hooks.listing(list(works), params.get("sort", "date_desc"))
        return answer(request, "search", page_of(listed, "/v1/search/illust", params))

    @app.get("/v1/illust/ranking")
    async def ranking(request: Request) -> Response:
        refused = token_refused(request) or await hooks.intercept("ranking", request)
        if refused is not None:
            return answer(request, "ranking", refused)
        params = dict(request.query_params)
        mode = params.get("mode", "day")
        if mode not in RANKING_SPANS:
            return answer(request, "ranking", error(400, json.dumps({"mode": [f"Invalid mode: {mode}"]})))
        works = list(data.recorded_works())
        day = params.get("date")
        if day and day_problem(day):
            # Pixiv's validator names the parameter (a date is YYYY-MM-DD: reference §2.2).
            return answer(request, "ranking", error(400, json.dumps({"date": ["date is invalid"]})))
        if day:
            first = (date.fromisoformat(day) - timedelta(days=RANKING_SPANS[mode] - 1)).isoformat()
            works = [w for w in works if first <= w["create_date"][:10] <= day]
            works.sort(key=lambda w: -int(w.get("total_bookmarks") or 0))
        if mode.endswith(("_r18", "_r18g")):
            works = [w for w in works if int(hooks.present(w)["x_restrict"]) > 0]
        return answer(request, "ranking", page_of(works, "/v1/illust/ranking", params))

    @app.get("/v1/illust/detail")
    async def detail(request: Request, illust_id: str = "") -> Response:
        refused = token_refused(request) or await hooks.intercept("detail", request, illust_id)
        if refused is not None:
            return answer(request, "detail", refused)
        work = data.work_for_id(illust_id, hooks.deep)
        if work is None:
            return answer(request, "detail", error(404, "", "該当作品は削除されたか、存在しない作品IDです。"))
        return answer(request, "detail", JSONResponse({"illust": hooks.present(work)}))

    @app.get("/v1/ugoira/metadata")
    async def ugoira_metadata(request: Request, illust_id: str = "") -> Response:
        refused = token_refused(request) or await hooks.intercept("ugoira", request, illust_id)
        if refused is not None:
            return answer(request, "ugoira", refused)
        work = data.work_for_id(illust_id, hooks.deep)
        if work is None or work.get("type") != "ugoira":
            return answer(request, "ugoira", error(404, "", "該当作品は削除されたか、存在しない作品IDです。"))
        return answer(request, "ugoira", JSONResponse(data.ugoira_metadata(work)))

    @app.get("/i/{path:path}")
    async def image(request: Request, path: str) -> Response:
        if not request.headers.get("referer", "").startswith("https://app-api.pixiv.net"):
            return answer(request, "image", Response(status_code=403, content=b"Forbidden"))
        name = path.rsplit("/", 1)[-1]
        if name == data.ugoira_zip_name(data.UGOIRA_ID):
            width, height = hooks.image_size(data.ugoira_work(), 0)
            frames = len(data.UGOIRA_DELAYS_MS)
            body = await asyncio.to_thread(images.render_ugoira_zip, data.UGOIRA_ID, frames, width, height)
            response, sent = hooks.image_response(request, body, "application/zip")
            return answer(request, "image", response, {"fault": sent})
        match = re.match(r"^(\d+)_(?:p|ugoira)(\d+)", name)  # an ugoira's cover is <id>_ugoira0
        work = data.work_for_id(match.group(1), hooks.deep) if match else None
        if match is None or work is None:
            return answer(request, "image", Response(status_code=404, content=b"Not Found"))
        wid, page = match.group(1), int(match.group(2))
        scripted = await hooks.intercept("image", request, wid)
        if scripted is not None:
            return answer(request, "image", scripted)
        fmt = "png" if name.endswith(".png") else "jpeg"
        width, height = hooks.image_size(work, page)
        body = await asyncio.to_thread(images.render_image, wid, page, width, height, fmt)
        response, sent = hooks.image_response(request, body, "image/png" if fmt == "png" else "image/jpeg")
        return answer(request, "image", response, {"fault": sent})

    return app

"""The hostile parties of the ``edges`` chaos scenario, run as one process of their own.

``python -m bench.chaos.hostile --port P --internal-port Q --replay URL --log received.jsonl``

Two servers in one process:

* the **hostile party** (``--port``), every third party a job meets, each lying or
  limiting its own way:

  - ``POST /hook/slow/<i>``: a webhook receiver that answers 200 and then streams its
    body at 1 KiB/s for ever;
  - ``POST /hook/huge/<i>``: a receiver that answers 200 with a 100 MiB body;
  - ``POST /hook/redirect/<i>``: a receiver that redirects (307) to the internal service;
  - ``POST /hook/ratelimit/<i>``: a receiver that answers 429 (``Retry-After: 1``), then
    503 with ``Retry-After`` as an HTTP date, then accepts;
  - ``POST /hook/refusal/<i>``: a receiver that refuses every request with a 4xx status
    and words drawn at random for the run (:func:`unknown_refusal`: never a status the
    receiver contract gives the work, 415 or 422, nor 409 or 429) — *an unknown refusal
    wording*;
  - ``POST /hook/nodelay/<i>``: a receiver that answers 429 without ``Retry-After``, then
    429 as an HTML page, then accepts — *an undeclared delay*;
  - ``POST /api/webhooks/<i>/nodelay``: a Discord webhook that answers 429 without
    ``retry_after`` nor ``Retry-After``, then Cloudflare's "Error 1015" HTML page, then
    accepts (the created message);
  - ``POST /bot<token>/<method>``: a Telegram Bot API that rate-limits in odd places:
    each method's requests are answered in turn 429 (``parameters.retry_after``), 400
    whose text alone says ``Too Many Requests: retry after 1``, then accepted;
  - ``POST /tg/refusal/bot<token>/<method>``: a Telegram Bot API refusing every request
    with the Bot API's envelope, a 4xx ``error_code`` and a description drawn at random
    for the run — *an unknown refusal wording*;
  - the **source** in front of the replay server (``--replay``): ``/auth/*`` and
    ``/v1/*`` are forwarded, except searches for the words ``edges-<case>``, whose
    pages it builds from the recorded works: ``edges-endless`` / ``-trickle`` /
    ``-json`` / ``-internal`` list one work whose images are hostile (then one plain
    work); ``edges-source`` lists a first page whose works have no bookmarks and whose
    ``next_url`` page answers 500, 500, then an empty 200 before its real works;
    ``edges-hugepage`` answers a 50 MiB page; ``edges-plain`` lists plain works;
    ``edges-bomb`` lists three works that are decode bombs (a GIF of thousands of 1×1
    frames on a large canvas, a few frames on a canvas near a page's bound, an ugoira
    whose later frames are huge: :mod:`bench.chaos.bombs`), then a plain work;
    ``edges-animation`` lists three ugoira whose ``/v1/ugoira/metadata`` describes no
    animation (a zip URL that is not one, no frames, a frame without a delay), then a
    plain work. Sizes and variants are drawn from the seed the scenario posts
    (``POST /_chaos/seed``), in a random order;
  - the **image host** (``GET /i/<path>``): ``edges/endless/…`` a JPEG that never ends,
    ``edges/trickle/…`` one byte every 2 s, ``edges/json/…`` a JSON page,
    ``edges/bomb/<kind>/…`` a bomb (each serving recorded in the state), anything else
    the replay's image;

* the **internal service** (``--internal-port``), which nothing may ever reach: an image
  URL from the source and a receiver's redirect point at it, and a ``callback_url``
  whose allowed host (``localhost``) resolves to it.

Every webhook request is appended to ``--log`` as :mod:`bench.chaos.receiver` does
(before it is answered), so the truth audit reads both receivers alike. ``GET
/_chaos/state`` says what happened: the internal service's hits, every streamed answer
(opened, closed, bytes written), the Telegram posts it accepted, the source's faults,
the refusals it drew (``refusals``) and when each rate-limited party was asked
(``asked_ms``, to check the retries backed off). The refusals' random draws come from
the seed the scenario posts (``POST /_chaos/seed``, the run's), so each run tries other
members of the class and a failing run can be replayed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import string
import time
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, StreamingResponse

from bench.chaos import bombs
from curaflow.routes.base import SEND_AGAIN_STATUSES

#: Search words the hostile source answers itself (``edges-<case>``).
IMAGE_CASES = ("endless", "trickle", "json", "internal")
PIXIV_IMAGES = "https://i.pximg.net/"
HUGE_BYTES = 100 * 1024 * 1024
HUGE_PAGE_BYTES = 50 * 1024 * 1024
#: The decode bombs of ``edges-bomb`` (:mod:`bench.chaos.bombs`), one work each.
BOMBS = ("gif_frames", "gif_canvas", "ugoira_zip")
#: Where the recorded works the bomb and animation cases list start (two ranking pages).
BOMB_WORKS, ANIMATION_WORKS = 40, 44
JPEG_HEAD = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
#: 4xx statuses a receiver's unknown refusal is drawn from: every client error but those
#: the routes read as something else (409 duplicate, 415 / 422 the work's, 429 a rate limit,
#: 408 / 425 HTTP's own "send it again": :data:`~curaflow.routes.base.SEND_AGAIN_STATUSES`).
REFUSAL_STATUSES = tuple(s for s in range(400, 452) if s not in (409, 415, 422, 429) and s not in SEND_AGAIN_STATUSES)
#: Cloudflare's page when it blocks a client address for a while (error 1015).
CLOUDFLARE_1015 = (
    "<!DOCTYPE html><html><head><title>Access denied | used Cloudflare to restrict access</title></head>"
    "<body><h1>Error 1015</h1><h2>You are being rate limited</h2></body></html>"
)


def unknown_refusal(rng: random.Random) -> tuple[int, str]:
    """A refusal no route has a word for: a 4xx of :data:`REFUSAL_STATUSES` (400 half of
    the time, as Telegram answers most) and 1–6 random words."""
    status = 400 if rng.random() < 0.5 else rng.choice(REFUSAL_STATUSES)
    words = [
        "".join(rng.choices(string.ascii_letters + string.digits + "_", k=rng.randint(2, 14)))
        for _ in range(rng.randint(1, 6))
    ]
    return status, "Bad Request: " + " ".join(words)


def _ms() -> int:
    return int(time.time() * 1000)


class State:
    """What the hostile parties saw (served as ``/_chaos/state``)."""

    def __init__(self) -> None:
        #: the unknown refusals' draws (:meth:`make_bombs` seeds them with the run's seed)
        self.rng = random.Random()
        self.refusals: list[dict[str, Any]] = []
        self.asked_ms: dict[str, list[int]] = {}
        self.internal_hits: list[dict[str, Any]] = []
        self.streams: list[dict[str, Any]] = []
        self.telegram: Counter[str] = Counter()
        self.hook_turns: Counter[str] = Counter()
        self.hook_accepted: Counter[str] = Counter()
        self.telegram_posts: list[dict[str, Any]] = []
        self.source_faults: list[str] = []
        self.searches: Counter[str] = Counter()
        self.works: list[dict[str, Any]] = []
        self.hostile_works: dict[str, str] = {}
        self.discord_posts = 0
        self.seed = 0
        #: bomb kind → its bytes (made once per seed); an ugoira bomb's frames list too
        self.bombs: dict[str, bytes] = {}
        self.bomb_frames: list[dict[str, Any]] = []
        #: work id → the ``/v1/ugoira/metadata`` answer served for it
        self.ugoira: dict[str, dict[str, Any]] = {}
        #: every bomb or unusable metadata served: ``{work_id, kind, at_ms}``
        self.served: list[dict[str, Any]] = []

    def as_dict(self) -> dict[str, Any]:
        return {
            "internal_hits": self.internal_hits,
            "streams": self.streams,
            "open_streams": sum(1 for s in self.streams if s["closed_ms"] is None),
            "telegram_requests": dict(self.telegram),
            "hook_requests": dict(self.hook_turns),
            "hook_accepted": dict(self.hook_accepted),
            "telegram_posts": self.telegram_posts,
            "source_faults": self.source_faults,
            "searches": dict(self.searches),
            "hostile_works": self.hostile_works,
            "seed": self.seed,
            "discord_posts": self.discord_posts,
            "refusals": self.refusals,
            "asked_ms": self.asked_ms,
            "served": self.served,
        }

    def refusal(self, party: str) -> tuple[int, str]:
        """Draw an unknown refusal for ``party`` and record it."""
        status, words = unknown_refusal(self.rng)
        self.refusals.append({"party": party, "status": status, "words": words})
        return status, words

    def asked(self, party: str) -> int:
        """Record that ``party`` was asked now; returns how many times it was before."""
        times = self.asked_ms.setdefault(party, [])
        times.append(_ms())
        return len(times) - 1

    def make_bombs(self, seed: int) -> None:
        """The bombs and unusable animations of ``seed`` (blocking: a large PNG is encoded),
        and the unknown refusals' draws from it."""
        rng = random.Random(seed)
        self.seed = seed
        self.rng = random.Random(f"{seed}:refusals")
        self.bombs = {kind: bombs.random_bomb(rng, kind) for kind in BOMBS[:2]}
        self.bombs["ugoira_zip"], self.bomb_frames = bombs.random_ugoira_bomb(rng)


def _stream(state: State, what: str, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Wrap a streamed answer so its opening, closing and bytes written are recorded."""
    entry: dict[str, Any] = {"what": what, "opened_ms": _ms(), "closed_ms": None, "written": 0}
    state.streams.append(entry)

    async def wrapped() -> AsyncIterator[bytes]:
        try:
            async for chunk in chunks:
                entry["written"] += len(chunk)
                yield chunk
        finally:
            entry["closed_ms"] = _ms()

    return wrapped()


async def _trickle(head: bytes, every_s: float, size: int) -> AsyncIterator[bytes]:
    yield head
    while True:
        await asyncio.sleep(every_s)
        yield b" " * size


async def _flood(head: bytes, total: int | None, size: int = 1024 * 1024) -> AsyncIterator[bytes]:
    yield head
    sent, block = len(head), b"\0" * size
    while total is None or sent < total:
        piece = block if total is None else block[: min(size, total - sent)]
        sent += len(piece)
        yield piece
        await asyncio.sleep(0)


async def _json_page(total: int, size: int = 1024 * 1024) -> AsyncIterator[bytes]:
    """A search page of ``total`` bytes: valid JSON, no works, one long padding string."""
    yield b'{"illusts": [], "next_url": null, "padding": "'
    for _ in range(total // size):
        yield b"x" * size
        await asyncio.sleep(0)
    yield b'"}'


def create_hostile_app(state: State, replay_url: str, internal_url: str, log_path: Path) -> FastAPI:
    """The hostile party's app (module doc)."""
    app = FastAPI()
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    replay = httpx.AsyncClient(base_url=replay_url, timeout=30)
    source_page2: Counter[str] = Counter()

    @app.get("/_chaos/state")
    async def get_state() -> dict[str, Any]:
        return state.as_dict()

    @app.post("/_chaos/seed")
    async def set_seed(request: Request) -> dict[str, Any]:
        seed = int((await request.json()).get("seed", 0))
        await asyncio.to_thread(state.make_bombs, seed)
        return {"seed": seed, "bombs": {kind: len(body) for kind, body in state.bombs.items()}}

    def record(body: bytes, headers: dict[str, str], path: str) -> None:
        try:
            doc: dict[str, Any] = json.loads(body)
        except ValueError:
            doc = {}
        line = {
            "at_ms": _ms(),
            "path": path,
            "webhook_id": headers.get("webhook-id", ""),
            "job_id": doc.get("job_id"),
            "target_id": doc.get("target_id"),
            "route": doc.get("route"),
            "work_id": str((doc.get("work") or {}).get("work_id")),
            "signature_ok": True,  # the audit counts bad signatures of the recording receiver only
        }
        os.write(fd, (json.dumps(line) + "\n").encode())

    @app.post("/hook/{kind}/{i}")
    async def hook(request: Request, kind: str, i: str) -> Response:
        body = await request.body()
        headers = {k.lower(): v for k, v in request.headers.items()}
        if kind == "redirect":
            return RedirectResponse(f"{internal_url}/hook/{i}", status_code=307)
        if kind == "refusal":
            status, words = state.refusal(f"hook {i}")
            return JSONResponse({"error": words}, status_code=status)
        if kind == "nodelay":
            turn = state.asked(f"hook {i}")
            if turn == 0:
                return JSONResponse({"error": "Too Many Requests"}, status_code=429)
            if turn == 1:
                return HTMLResponse(CLOUDFLARE_1015, status_code=429)
            record(body, headers, request.url.path)
            state.hook_accepted[i] += 1
            return JSONResponse({"status": "accepted", "id": f"r-{i}-{turn}"})
        if kind == "ratelimit":
            turn = state.hook_turns[i]
            state.hook_turns[i] += 1
            if turn == 0:
                return JSONResponse({"error": "slow down"}, status_code=429, headers={"Retry-After": "1"})
            if turn == 1:
                later = format_datetime(datetime.now(UTC) + timedelta(seconds=2), usegmt=True)
                return JSONResponse({"error": "Too Many Requests"}, status_code=503, headers={"Retry-After": later})
            record(body, headers, request.url.path)
            state.hook_accepted[i] += 1
            return JSONResponse({"status": "accepted", "id": f"r-{i}-{turn}"})
        record(body, headers, request.url.path)
        if kind == "slow":
            chunks = _trickle(b'{"status": "accepted", "padding": "', 1.0, 1024)
            return StreamingResponse(_stream(state, f"slow hook {i}", chunks), media_type="application/json")
        chunks = _flood(b'{"status": "accepted", "padding": "', HUGE_BYTES)
        return StreamingResponse(
            _stream(state, f"huge hook {i}", chunks),
            media_type="application/json",
            headers={"Content-Length": str(HUGE_BYTES)},
        )

    @app.post("/tg/refusal/bot{token}/{method}")
    async def telegram_refusing(request: Request, token: str, method: str) -> Response:
        await request.body()
        status, words = state.refusal(f"telegram {method}")
        return JSONResponse({"ok": False, "error_code": status, "description": words}, status_code=status)

    @app.post("/api/webhooks/{i}/nodelay")
    async def discord(request: Request, i: str) -> Response:
        await request.body()
        turn = state.asked(f"discord {i}")
        if turn == 0:
            return JSONResponse({"message": "You are being rate limited.", "global": False}, status_code=429)
        if turn == 1:
            return HTMLResponse(CLOUDFLARE_1015, status_code=429)
        state.discord_posts += 1
        return JSONResponse({"id": str(1_400_000_000_000_000_000 + turn), "type": 0, "channel_id": "1"})

    @app.post("/bot{token}/{method}")
    async def telegram(request: Request, token: str, method: str) -> Response:
        body = await request.body()
        turn = state.telegram[method] % 3
        state.telegram[method] += 1
        if turn == 0:
            return JSONResponse(
                {"ok": False, "error_code": 429, "description": "Too Many Requests", "parameters": {"retry_after": 1}},
                status_code=429,
            )
        if turn == 1:
            return JSONResponse(
                {"ok": False, "error_code": 400, "description": "Bad Request: Too Many Requests: retry after 1"},
                status_code=400,
            )
        items = 1
        media = re.search(rb'name="media"\r\n(?:[^\r\n]*\r\n)*\r\n(.*?)\r\n--', body, re.S)
        if method == "sendMediaGroup" and media:
            try:
                items = len(json.loads(media.group(1)))
            except ValueError:
                items = 1
        first = len(state.telegram_posts) * 100 + 1
        messages = [
            {"message_id": first + k, "date": int(time.time()), "chat": {"id": -100, "type": "channel"}}
            for k in range(items)
        ]
        state.telegram_posts.append({"method": method, "items": items, "at_ms": _ms()})
        return JSONResponse({"ok": True, "result": messages if method == "sendMediaGroup" else messages[0]})

    async def recorded_works(request: Request) -> list[dict[str, Any]]:
        """The recorded works (two ranking pages), asked with the caller's access token."""
        if not state.works:
            auth = {"Authorization": request.headers.get("authorization", "")}
            works: list[dict[str, Any]] = []
            for offset in (0, 30):
                answer = await replay.get("/v1/illust/ranking", params={"offset": offset}, headers=auth)
                answer.raise_for_status()
                works += answer.json()["illusts"]
            state.works = works
        return state.works

    def hostile(work: dict[str, Any], case: str) -> dict[str, Any]:
        text = json.dumps(work)
        if case == "internal":
            text = text.replace(PIXIV_IMAGES, f"{internal_url}/internal/")
        else:
            text = text.replace(PIXIV_IMAGES, f"{PIXIV_IMAGES}edges/{case}/")
        made = dict(json.loads(text))
        if str(work["id"]) in state.ugoira:
            made["type"] = "ugoira"
        return made

    def rng_of(case: str) -> random.Random:
        return random.Random(f"{state.seed}:{case}")

    def bomb_works(works: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Three bombs in a random order (one work each), then a plain work."""
        kinds = list(BOMBS)
        rng_of("bomb").shuffle(kinds)
        listed = []
        for work, kind in zip(works[BOMB_WORKS : BOMB_WORKS + 3], kinds, strict=True):
            work_id = str(work["id"])
            state.hostile_works[work_id] = f"bomb/{kind}"
            if kind == "ugoira_zip":
                url = f"{PIXIV_IMAGES}edges/bomb/ugoira_zip/{work_id}_ugoira600x600.zip"
                state.ugoira[work_id] = {"ugoira_metadata": {"zip_urls": {"medium": url}, "frames": state.bomb_frames}}
            listed.append(hostile(work, f"bomb/{kind}"))
        return [*listed, works[BOMB_WORKS + 3]]

    def animation_works(works: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Three ugoira describing no animation, in a random order, then a plain work."""
        rng = rng_of("animation")
        kinds = list(bombs.UNUSABLE_ANIMATIONS)
        rng.shuffle(kinds)
        listed = []
        for work, kind in zip(works[ANIMATION_WORKS : ANIMATION_WORKS + 3], kinds, strict=True):
            work_id = str(work["id"])
            state.hostile_works[work_id] = f"animation/{kind}"
            zip_url = f"{PIXIV_IMAGES}edges/animation/{work_id}_ugoira600x600.zip"
            state.ugoira[work_id] = bombs.unusable_metadata(rng, kind, zip_url)
            listed.append(hostile(work, "animation"))
        return [*listed, works[ANIMATION_WORKS + 3]]

    def page(works: list[dict[str, Any]], next_offset: int | None, word: str) -> JSONResponse:
        next_url = None
        if next_offset is not None:
            next_url = f"https://app-api.pixiv.net/v1/search/illust?word={word}&offset={next_offset}"
        return JSONResponse({"illusts": works, "next_url": next_url, "search_span_limit": 31536000})

    @app.get("/v1/search/illust")
    async def search(request: Request) -> Response:
        word = request.query_params.get("word", "")
        if not word.startswith("edges-"):
            return await forward(request, "v1/search/illust")
        case, offset = word.removeprefix("edges-"), int(request.query_params.get("offset") or 0)
        state.searches[f"{case}@{offset}"] += 1
        works = await recorded_works(request)
        if case in IMAGE_CASES:
            k = 2 * IMAGE_CASES.index(case)
            bad, good = works[k], works[k + 1]
            state.hostile_works[str(bad["id"])] = case
            return page([hostile(bad, case), good], None, word)
        if case in ("bomb", "animation") and not state.bombs:  # the scenario posted no seed
            await asyncio.to_thread(state.make_bombs, state.seed)
        if case == "bomb":
            return page(bomb_works(works), None, word)
        if case == "animation":
            return page(animation_works(works), None, word)
        if case == "hugepage":
            return StreamingResponse(
                _stream(state, "huge search page", _json_page(HUGE_PAGE_BYTES)), media_type="application/json"
            )
        if case == "source":
            if offset == 0:
                return page([{**w, "total_bookmarks": 0} for w in works[10:20]], 30, word)
            turn = source_page2[word]
            source_page2[word] += 1
            if turn < 2:
                state.source_faults.append("500")
                return JSONResponse({"error": {"message": "internal error"}}, status_code=500)
            if turn == 2:
                state.source_faults.append("empty 200")
                return page([], None, word)
            # From the place asked: page 1's last work first when asked one place early
            # (the scan checks that nothing moved up unread between the two pages).
            return page(works[19:30] if offset % 30 else works[20:30], None, word)
        return page(works[30:40], None, word)

    @app.get("/v1/illust/detail")
    async def detail(request: Request) -> Response:
        work_id = request.query_params.get("illust_id", "")
        if work_id in state.hostile_works:
            work = next(w for w in await recorded_works(request) if str(w["id"]) == work_id)
            return JSONResponse({"illust": hostile(work, state.hostile_works[work_id])})
        return await forward(request, "v1/illust/detail")

    @app.get("/v1/ugoira/metadata")
    async def ugoira_metadata(request: Request) -> Response:
        work_id = request.query_params.get("illust_id", "")
        if work_id in state.ugoira:
            kind = state.hostile_works.get(work_id, "")
            if kind.startswith("animation/"):
                state.served.append({"work_id": work_id, "kind": kind, "at_ms": _ms()})
            return JSONResponse(state.ugoira[work_id])
        return await forward(request, "v1/ugoira/metadata")

    @app.get("/i/{path:path}")
    async def image(request: Request, path: str) -> Response:
        if path.startswith("edges/bomb/"):
            kind = path.split("/")[2]
            work_id = path.rsplit("/", 1)[-1].split("_", 1)[0]
            state.served.append({"work_id": work_id, "kind": f"bomb/{kind}", "at_ms": _ms()})
            body = state.bombs.get(kind, b"")
            media = "application/zip" if kind == "ugoira_zip" else "image/gif"
            return Response(body, media_type=media)
        if path.startswith("edges/endless/"):
            return StreamingResponse(_stream(state, "endless image", _flood(JPEG_HEAD, None)), media_type="image/jpeg")
        if path.startswith("edges/trickle/"):
            chunks = _trickle(JPEG_HEAD[:1], 2.0, 1)
            return StreamingResponse(_stream(state, "trickling image", chunks), media_type="image/jpeg")
        if path.startswith("edges/json/"):
            return JSONResponse({"error": "not an image", "path": path})
        return await forward(request, f"i/{path}")

    @app.api_route("/{path:path}", methods=["GET", "POST"])
    async def forward(request: Request, path: str) -> Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        answer = await replay.request(
            request.method, f"/{path}", params=request.query_params, content=await request.body(), headers=headers
        )
        kept = {k: v for k, v in answer.headers.items() if k.lower() in ("content-type", "retry-after")}
        return Response(answer.content, status_code=answer.status_code, headers=kept)

    return app


def create_internal_app(state: State) -> FastAPI:
    """The internal service: every request is a hit that must never have happened."""
    app = FastAPI()

    @app.api_route("/{path:path}", methods=["GET", "POST", "PUT"])
    async def hit(request: Request, path: str) -> JSONResponse:
        state.internal_hits.append({"at_ms": _ms(), "method": request.method, "path": "/" + path})
        return JSONResponse({"internal": "secret", "path": "/" + path})

    return app


async def serve(port: int, internal_port: int, replay_url: str, log_path: Path) -> None:
    """Serve both apps until interrupted."""
    state = State()
    internal_url = f"http://127.0.0.1:{internal_port}"
    servers = [
        uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=p, log_level="warning", access_log=False, lifespan="off")
        )
        for app, p in (
            (create_hostile_app(state, replay_url, internal_url, log_path), port),
            (create_internal_app(state), internal_port),
        )
    ]
    await asyncio.gather(*(s.serve() for s in servers))


def main() -> None:
    """Parse the options and serve until interrupted."""
    parser = argparse.ArgumentParser(description="the hostile parties of the edges chaos scenario")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--internal-port", type=int, required=True)
    parser.add_argument("--replay", required=True)
    parser.add_argument("--log", type=Path, required=True)
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.internal_port, args.replay, args.log))


if __name__ == "__main__":
    main()

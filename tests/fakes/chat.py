"""A fake chat service: the receiver of the test-only ``chat`` route kind, over real HTTP.

Its own small API, nothing of Telegram's, Discord's or Standard Webhooks':

* ``POST /api/rooms/<room>/posts`` with ``Authorization: Bearer <token>``, an
  ``Idempotency-Key`` header and a JSON body ``{"text": str, "images": [{"name", "type",
  "data"}]}`` (``data`` base64) → ``201 {"post": {"id": "p<n>", "room": room}}``; a key
  it already posted is answered ``200`` with that same post (nothing posted twice);
* ``401 {"problem": "bad token"}``, ``404 {"problem": "no such room"}``,
  ``400 {"problem": "…"}`` for a body it cannot read;
* :attr:`ChatService.fail_next`: answers to give before the next posts (status, body), e.g.
  a ``503`` to make the route retry.

It proves the route seam (``tests/fakes/chat_route.py`` is its route kind,
``tests/integration/test_route_kind_outside.py`` runs jobs through it).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from curaflow.process.httpserver import BackgroundServer

TOKEN = "chat-token-not-a-secret"


@dataclass
class Post:
    """One post in a room."""

    id: str
    room: str
    key: str
    text: str
    images: list[tuple[str, str, bytes]]


@dataclass
class ChatService:
    """The service's state (the test reads and scripts it)."""

    rooms: set[str] = field(default_factory=lambda: {"pictures"})
    posts: list[Post] = field(default_factory=list)
    #: Every ``POST`` that arrived: (room, idempotency key, status answered).
    requests: list[tuple[str, str, int]] = field(default_factory=list)
    fail_next: list[tuple[int, dict[str, Any]]] = field(default_factory=list)

    def by_key(self, key: str) -> Post | None:
        return next((p for p in self.posts if p.key == key), None)


def _images(body: Any) -> list[tuple[str, str, bytes]] | None:
    if not isinstance(body, dict) or not isinstance(body.get("text"), str) or not isinstance(body.get("images"), list):
        return None
    found = []
    for image in body["images"]:
        try:
            found.append((str(image["name"]), str(image["type"]), base64.b64decode(image["data"], validate=True)))
        except (KeyError, TypeError, binascii.Error):
            return None
    return found


def create_chat_app(service: ChatService) -> FastAPI:
    """The chat service's HTTP app."""
    app = FastAPI()

    @app.post("/api/rooms/{room}/posts")
    async def post(room: str, request: Request) -> Any:
        key = request.headers.get("idempotency-key", "")

        def answer(status: int, body: dict[str, Any]) -> JSONResponse:
            service.requests.append((room, key, status))
            return JSONResponse(body, status_code=status)

        if service.fail_next:
            return answer(*service.fail_next.pop(0))
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return answer(401, {"problem": "bad token"})
        if room not in service.rooms:
            return answer(404, {"problem": "no such room"})
        if (done := service.by_key(key)) is not None:
            return answer(200, {"post": {"id": done.id, "room": done.room}})
        try:
            body = await request.json()
        except ValueError:
            body = None
        images = _images(body)
        if not key or images is None:
            return answer(400, {"problem": "a post needs an Idempotency-Key, text and images"})
        made = Post(f"p{len(service.posts) + 1}", room, key, body["text"], images)
        service.posts.append(made)
        return answer(201, {"post": {"id": made.id, "room": room}})

    return app


class ChatServer:
    """The chat service on 127.0.0.1 (an ephemeral port) for one test."""

    def __init__(self, service: ChatService | None = None) -> None:
        self.service = service or ChatService()
        self._server = BackgroundServer(create_chat_app(self.service))

    @property
    def url(self) -> str:
        return self._server.url

    async def __aenter__(self) -> ChatServer:
        await self._server.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._server.stop()

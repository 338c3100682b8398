"""The Pixiv replay server run inside the test process, with a request log and live faults.

Tests point ``pixiv.api_url`` at it and change ``faults`` while jobs run (slow images,
rate limits, …); ``log`` records every request as ``METHOD path?query``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Request, Response

from curaflow.httpserver import BackgroundServer
from curaflow.sources.replay.app import Faults, _matches, create_replay_app, recorded_works


class ReplayServer:
    """A :func:`create_replay_app` on 127.0.0.1 with a request log."""

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

    async def start(self) -> ReplayServer:
        await self.server.start()
        return self

    async def stop(self) -> None:
        await self.server.stop()


def ordered(tag: str, sort: str = "date_desc") -> list[str]:
    """Recorded work ids a tag search for ``tag`` returns (partial match), in the
    replay's order for ``sort`` (``date_desc`` or ``date_asc``)."""
    works = [w for w in recorded_works() if _matches(w, tag, "partial_match_for_tags")]
    works.sort(key=lambda w: (w["create_date"], int(w["id"])), reverse=sort != "date_asc")
    return [str(w["id"]) for w in works]


def work_ids_with_tag(tag: str) -> list[str]:
    """Recorded work ids a ``date_desc`` tag search for ``tag`` returns, in order."""
    return ordered(tag)

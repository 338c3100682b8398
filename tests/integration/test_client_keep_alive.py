"""The typed HTTP client never sends on a connection the API is about to close.

The API closes a connection idle for its keep-alive time (uvicorn's
``timeout_keep_alive``); a client that keeps an idle connection as long sends its next
request, at that moment, on a connection the server is closing: the request is written,
the server's close arrives, and the caller reads ``httpx.ReadError`` — neither refused nor
answered (RFC 9112 §9.5: a server may close an inactive connection at any time). httpx
keeps one 5 s by default, the API 5 s: a job submitted right then failed (seen 2026-12-07 in
the suite's ``POST /jobs``). So the client keeps an idle connection half the API's time
(:data:`curaflow.protocol.connections.CLIENT_KEEP_ALIVE_S`) and the API states its own
(:data:`~curaflow.protocol.connections.API_KEEP_ALIVE_S`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from curaflow.client import CuraflowClient
from curaflow.process.httpserver import BackgroundServer
from curaflow.protocol.connections import API_KEEP_ALIVE_S, CLIENT_KEEP_ALIVE_S


class Health:
    """``GET /health`` answered, each request's client port remembered (a new port: a new
    connection)."""

    def __init__(self) -> None:
        self.ports: list[int] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": message["type"] + ".complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        self.ports.append(scope["client"][1])
        body = b'{"status": "ok", "service": "curaflow", "version": "0"}'
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})


async def test_the_client_lets_an_idle_connection_go_well_before_the_api_closes_it() -> None:
    assert CLIENT_KEEP_ALIVE_S <= API_KEEP_ALIVE_S / 2
    app = Health()
    server = await BackgroundServer(app).start()
    try:
        async with CuraflowClient(server.url) as client:
            await client.health()
            await client.health()  # at once: the same connection
            await asyncio.sleep(CLIENT_KEEP_ALIVE_S + 0.5)  # idle past the client's time, inside the API's
            await client.health()
        assert app.ports[0] == app.ports[1], app.ports
        assert app.ports[2] != app.ports[1], "an idle connection kept as long as the API keeps it"
    finally:
        await server.stop()

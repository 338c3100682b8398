"""The worker's metrics/health endpoint (:mod:`curaflow.process.health_server`)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from curaflow.process.health_server import health_app, health_server


async def _ready() -> tuple[int, dict[str, Any]]:
    return 200, {"status": "ready", "service": "curaflow-worker", "checks": {}}


async def test_a_trailing_slash_is_no_redirect_to_the_host_the_request_named() -> None:
    # Starlette's redirect_slashes answered ``/health/`` 307 with a Location built from the
    # request's Host header; a probe is told the path is not served.
    transport = httpx.ASGITransport(app=health_app(_ready))
    async with httpx.AsyncClient(transport=transport, base_url="http://worker") as http:
        for path in ("/health/", "/ready/", "/metrics/"):
            answer = await http.get(path, headers={"Host": "elsewhere.example"})
            assert (answer.status_code, answer.headers.get("location")) == (404, None), path
        assert (await http.get("/health")).status_code == 200


async def _exchange(url: str, request: bytes) -> bytes:
    """What the server at ``url`` writes for ``request`` (raw bytes) until it closes."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


async def test_a_method_the_server_does_not_know_is_501_as_the_apis() -> None:
    # uvicorn answered a well-formed request with a method its parser does not know
    # ``400`` text/plain "Invalid HTTP request received."; the API answers RFC 9110 §9.1's
    # ``501`` with the protocol Error (curaflow.process.httpserver.bounded_http), and so
    # does the worker's endpoint now — a probe or a scraper reads one rule on both ports.
    server = await health_server(_ready, "127.0.0.1", 0, head_timeout_s=10).start()
    try:
        unknown = await _exchange(server.url, b"FOO /health HTTP/1.1\r\nHost: x\r\n\r\n")
        unreadable = await _exchange(server.url, b"GET /health HTTP/1.1\r\nContent-Length: x\r\n\r\n")
        healthy = await _exchange(server.url, b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    finally:
        await server.stop()
    head, _, body = unknown.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 501 Not Implemented\r\n"), unknown[:300]
    assert b"connection: close" in head.lower(), head
    error = json.loads(body)["error"]
    assert (error["code"], error["detail"]) == ("invalid_params", {"reason": "unknown_method"}), error
    head, _, body = unreadable.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 "), unreadable[:300]
    assert json.loads(body)["error"]["detail"] == {"reason": "malformed_request"}, body
    assert healthy.startswith(b"HTTP/1.1 200 "), healthy[:300]

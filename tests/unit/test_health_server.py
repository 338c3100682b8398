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


async def test_an_unknown_path_and_a_wrong_method_are_answered_as_the_api_answers_them() -> None:
    # The worker's endpoint answered them with Starlette's plain text — ``404`` "Not Found",
    # ``405`` "Method Not Allowed" (``OPTIONS`` too, with no ``Allow`` naming ``OPTIONS``) —
    # where the API answers the protocol Error, ``Allow`` on a ``405`` and ``204`` + ``Allow``
    # to ``OPTIONS``: one reading of the same paths (``/health``, ``/ready``) on both ports.
    from curaflow.api.app import create_app
    from curaflow.config import Settings

    requests = [
        ("GET", "/nowhere"),
        ("OPTIONS", "/nowhere"),
        ("POST", "/health"),
        ("DELETE", "/ready"),
        ("OPTIONS", "/health"),
        ("OPTIONS", "/ready"),
        ("HEAD", "/nowhere"),
    ]

    async def answers(app: Any) -> list[tuple[int, str | None, str | None, bytes]]:
        said = []
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://x") as http:
            for method, path in requests:
                answer = await http.request(method, path)
                said.append(
                    (
                        answer.status_code,
                        answer.headers.get("content-type"),
                        answer.headers.get("allow"),
                        answer.content,
                    )
                )
        return said

    worker, api = await answers(health_app(_ready)), await answers(create_app(Settings()))
    assert worker == api, "\n".join(f"{r}: worker {w} / API {a}" for r, w, a in zip(requests, worker, api, strict=True))
    status, content_type, allow, body = worker[2]  # POST /health
    assert (status, content_type, allow) == (405, "application/json", "GET, HEAD, OPTIONS"), worker[2]
    assert json.loads(body)["error"]["code"] == "invalid_params", body
    assert worker[4][:3] == (204, None, "GET, HEAD, OPTIONS"), worker[4]
    assert json.loads(worker[0][3])["error"]["message"] == "not found", worker[0]

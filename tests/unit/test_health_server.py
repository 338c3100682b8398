"""The worker's metrics/health endpoint (:mod:`curaflow.process.health_server`)."""

from __future__ import annotations

from typing import Any

import httpx

from curaflow.process.health_server import health_app


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

"""A Discord rate limit's delay in the unit of the API version the webhook URL names.

A webhook URL as Discord hands it out (Channel Settings → Integrations → Webhooks) names no
API version — ``https://discord.com/api/webhooks/<id>/<token>`` — and is answered by
Discord's default version, whose 429 states ``retry_after`` and ``Retry-After`` in
**milliseconds**; from v8 on both are seconds (Discord's change log "API and Gateway v8";
discord-api-docs #2360, #4722: "it just says /api/webhooks … milliseconds"; a receiver's
note of 2026-02: "the default webhook API uses retry-after in milliseconds … waiting up to
30 minutes"). Until 2026-12-07 the route read every delay as seconds: a limit of 6.457 s
held that send 6 457 s (1 h 48 min; a send's own limit is waited as stated, up to a week),
a global one the whole route for the cap (1 h).

A 429 that is not Discord's own (Cloudflare's page, a gateway's JSON) states HTTP's
``Retry-After``: seconds, whatever the URL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from curaflow.routes.discord import DiscordRoute, DiscordRouteConfig
from tests.unit.test_route_answers import failure

UNVERSIONED = "https://discord.com/api/webhooks/1/x"


def route_at(url: str) -> Any:
    return lambda http: DiscordRoute("dc", DiscordRouteConfig(url=SecretStr(url)), http)


def limited(body: Any, **headers: str) -> Any:
    def answer(_req: httpx.Request) -> httpx.Response:
        if isinstance(body, str):
            return httpx.Response(429, text=body, headers=headers)
        return httpx.Response(429, json=body, headers=headers)

    return answer


@pytest.mark.parametrize(
    ("url", "body", "headers", "seconds"),
    [
        (UNVERSIONED, {"message": "You are being rate limited.", "retry_after": 6457, "global": False}, {}, 6.457),
        (UNVERSIONED, {"message": "You are being rate limited.", "global": False}, {"Retry-After": "6457"}, 6.457),
        (UNVERSIONED, {"message": "You are being rate limited.", "retry_after": 250, "global": True}, {}, 0.25),
        ("https://discord.com/api/v6/webhooks/1/x", {"message": "m", "retry_after": 1500, "global": False}, {}, 1.5),
        ("https://discord.com/api/v7/webhooks/1/x", {"message": "m", "retry_after": "3000", "global": False}, {}, 3.0),
        ("https://discord.com/api/v8/webhooks/1/x", {"message": "m", "retry_after": 64.57, "global": False}, {}, 64.57),
        ("https://discord.com/api/v10/webhooks/1/x", {"message": "m", "retry_after": 2.5, "global": False}, {}, 2.5),
        ("https://discord.com/api/v10/webhooks/1/x", {"message": "m", "global": False}, {"Retry-After": "65"}, 65.0),
        (UNVERSIONED, {"message": "m", "retry_after": 10**400, "global": False}, {}, 7 * 24 * 3600),
    ],
    ids=["default-body", "default-header", "default-global", "v6", "v7-text", "v8", "v10", "v10-header", "huge"],
)
async def test_a_discord_rate_limit_is_read_in_its_api_versions_unit(
    tmp_path: Path, url: str, body: Any, headers: dict[str, str], seconds: float
) -> None:
    err = await failure(route_at(url), limited(body, **headers), tmp_path)
    assert err.rate_limited
    assert err.retry_after_s == pytest.approx(seconds), str(err)


@pytest.mark.parametrize(
    "body",
    ["<html><h1>Error 1015</h1>You are being rate limited</html>", {"message": "API rate limit exceeded"}],
    ids=["cloudflare", "gateway-json"],
)
async def test_a_429_in_front_of_discord_states_https_seconds_at_any_url(tmp_path: Path, body: Any) -> None:
    err = await failure(route_at(UNVERSIONED), limited(body, **{"Retry-After": "30"}), tmp_path)
    assert err.rate_limited and err.route_wide
    assert err.retry_after_s == 30

"""A token in a route's URL setting is held like a secret, and the URL still names its host.

A webhook receiver's URL is a plain setting (``routes.<name>.url``), not a ``SecretStr``:
curaflow's own words name the host it could not reach. But receivers put their credential
in it — a query value (``https://hooks.example/in?token=…``) or a path segment (Slack-like
``/services/T0123/B0456/<24 characters>``) — and a library's exception quotes the URL it
requested (httpx's ``raise_for_status``), which reaches Temporal's history and the log
lines through the chain curaflow raises *from*. Until 2026-12-07 only a Discord webhook's
URL, a secret, was held; now every URL setting of a route or a source has its query values
and its long path segments held (``Settings.url_settings``,
:func:`curaflow.observability.secrets.hold_url_parts`) — not the URL, whose host stays.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import tomli_w

from curaflow.config import load_settings
from curaflow.observability.secrets import MASK, URL_PART_CHARS, redacted

#: Tokens no other test writes (held for the life of the test process).
QUERY_TOKEN = "qT0k3n-Hx81vNw0aLr6Zp"
PATH_TOKEN = "Pq7sLm2Vx9Kb4Nw6Rt8Yz3Jd"
SOURCE_TOKEN = "sRcT0k3n-Vb3Nm5KQx7Wq2"
PROXY_TOKEN = "pRxY7k3nLm2Vx9Kb4Nw6Rt"


def load(tmp_path: Path, routes: dict[str, dict[str, str]]) -> None:
    path = tmp_path / "curaflow.toml"
    out = {"kind": "directory", "path": str(tmp_path / "out")}  # the default target's route
    path.write_text(tomli_w.dumps({"state_dir": str(tmp_path / "state"), "routes": {**routes, "out": out}}))
    load_settings(path)


def webhook(url: str) -> dict[str, str]:
    return {"kind": "webhook", "url": url, "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}


def quoted(url: str) -> str:
    """What httpx's ``raise_for_status`` says of a 401 to ``url``."""
    response = httpx.Response(401, request=httpx.Request("POST", url))
    try:
        response.raise_for_status()
    except httpx.HTTPStatusError as err:
        return str(err)
    raise AssertionError("raise_for_status did not raise")


@pytest.mark.parametrize(
    ("url", "token"),
    [
        (f"https://hooks.example/in?token={QUERY_TOKEN}", QUERY_TOKEN),
        (f"https://hooks.example/services/T0123/B0456/{PATH_TOKEN}", PATH_TOKEN),
    ],
    ids=["query value", "path segment"],
)
def test_a_webhook_urls_token_is_masked_and_its_host_named(tmp_path: Path, url: str, token: str) -> None:
    load(tmp_path, {"hook": webhook(url)})
    said = redacted(quoted(url))
    assert token not in said and MASK in said, said
    assert "hooks.example" in said and "401 Unauthorized" in said, said


def test_a_token_percent_encoded_in_the_query_is_masked_as_sent_and_as_decoded(tmp_path: Path) -> None:
    token = "pE+nc/oded-T0k3n-Wq2Lp9"
    written = "pE%2Bnc%2Foded-T0k3n-Wq2Lp9"
    load(tmp_path, {"hook": webhook(f"https://hooks.example/in?sig={written}")})
    assert redacted(f"a {written} b {token} c") == f"a {MASK} b {MASK} c"


def test_words_of_a_url_shorter_than_a_token_are_not_masked(tmp_path: Path) -> None:
    """``in``, ``services``, ids of a few characters and the host are words: masking them
    would mask the same letters in every line."""
    load(tmp_path, {"hook": webhook(f"https://hooks.example/services/T0123/B0456/{PATH_TOKEN}?format=json")})
    assert len("services") < URL_PART_CHARS
    text = "POST https://hooks.example/services/T0123/B0456 format json"
    assert redacted(text) == text


def test_a_url_setting_of_any_route_or_source_kind_is_held(tmp_path: Path) -> None:
    """Not the webhook's alone: a Telegram route's ``api_url`` (a Bot API proxy of the
    operator's whose path holds its key) and a source's ``url`` (a kind of the operator's,
    ``source_modules``) with a token in the query are held the same way."""
    path = tmp_path / "curaflow.toml"
    telegram = {
        "kind": "telegram",
        "chat_id": "-1001234567890",
        "bot_token": "123456:telegram-bot-token",
        "api_url": f"https://bot-proxy.example/{PROXY_TOKEN}",
    }
    catalog = {"kind": "catalog", "url": f"https://catalog.example/api?access_token={SOURCE_TOKEN}"}
    path.write_text(
        tomli_w.dumps(
            {
                "state_dir": str(tmp_path / "state"),
                "source_modules": ["tests.fakes.catalog_source"],
                "sources": {"shelf": catalog},
                "routes": {"tg": telegram, "out": {"kind": "directory", "path": str(tmp_path / "out")}},
            }
        )
    )
    load_settings(path)
    said = redacted(f"GET https://bot-proxy.example/{PROXY_TOKEN}/sendPhoto; GET {catalog['url']}")
    assert PROXY_TOKEN not in said and SOURCE_TOKEN not in said, said
    assert "bot-proxy.example" in said and "catalog.example" in said, said

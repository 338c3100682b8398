"""A Discord route's ``username`` is checked when the configuration loads, by Discord's
documented rules for a webhook's name (Discord developer docs, Webhook Resource, "Create
Webhook": it does not contain ``clyde`` or ``discord``, in any case, and follows the
nickname guidelines — trimmed of blanks, at least 1 character — but up to 80 characters).

Discord refuses such a name at delivery, for every work alike (a 400 naming ``username``:
the route's refusal, each work held back until the streak paused the route): until
2026-12-07 a name Discord refuses loaded, and cost deliveries and a page before anyone
read it. Now it is refused at load, the setting named.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tomli_w

from curaflow.config import ConfigError, Settings, load_settings

URL = "https://discord.example/api/webhooks/1/x"


def load(tmp_path: Path, route: dict[str, Any]) -> Settings:
    path = tmp_path / "curaflow.toml"
    out = {"kind": "directory", "path": str(tmp_path / "out")}  # the example target's route
    data = {
        "state_dir": str(tmp_path / "state"),
        "routes": {"out": out, "dc": {"kind": "discord", "url": URL, **route}},
    }
    path.write_text(tomli_w.dumps(data))
    return load_settings(path)


@pytest.mark.parametrize(
    "username",
    ["", "   ", "x" * 81, " " + "y" * 81 + " ", "Clyde", "my clyde bot", "CLYDE", "Discord", "pixiv-discord-feed"],
    ids=["empty", "blank", "81", "81-trimmed", "Clyde", "in-words", "upper", "Discord", "inside"],
)
def test_a_username_discord_refuses_is_refused_at_load_naming_the_setting(tmp_path: Path, username: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load(tmp_path, {"username": username})
    assert "routes.dc.discord.username" in str(raised.value), str(raised.value)


@pytest.mark.parametrize("username", ["x", "curaflow", "z" * 80, "  " + "w" * 80 + "  ", "Pixiv 新着", "cly de"])
def test_a_username_discord_takes_loads(tmp_path: Path, username: str) -> None:
    settings = load(tmp_path, {"username": username})
    assert settings.routes["dc"].username == username  # type: ignore[attr-defined]


def test_no_username_is_the_webhooks_own_name(tmp_path: Path) -> None:
    assert load(tmp_path, {}).routes["dc"].username is None  # type: ignore[attr-defined]

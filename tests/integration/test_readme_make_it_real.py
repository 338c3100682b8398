"""A new user reaches a live Telegram delivery from the README alone.

The README's "Make it real" section is read as a user reads it: its commands and its
configuration run as written, in a fresh directory, as real ``curaflow`` processes.
Only the third parties are stood in for: the replay (served from the test process)
plays Pixiv's login page, token endpoint and app-api, the fake Bot API plays Telegram
(its URL and credentials replace the README's placeholders).
"""

from __future__ import annotations

import asyncio
import re
import shlex
import sys
import tomllib
from pathlib import Path

import pytest

from tests.fakes.replay import ReplayServer
from tests.fakes.telegram import FakeTelegram
from tests.integration.test_pixiv_login import browser_login, env_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
EXE = str(Path(sys.executable).parent / "curaflow")


def make_it_real() -> tuple[list[str], str]:
    """The README's "Make it real" commands (in order) and its configuration file."""
    readme = (ROOT / "README.md").read_text()
    start = readme.index("\n## Make it real\n")
    end = readme.index("\n## ", start + 1)
    section = readme[start:end]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, flags=re.S)
    commands = [
        line.split("#")[0].strip()
        for lang, body in blocks
        if lang == "bash"
        for line in body.splitlines()
        if line.strip().startswith("curaflow ")
    ]
    [config] = [body for lang, body in blocks if lang == "toml"]
    return commands, config


def stand_in_telegram(config: str, fake: FakeTelegram, chat_id: str) -> str:
    """The README's configuration with the fake Bot API for Telegram's."""
    config = re.sub(r'(?m)^bot_token = "[^"]*"', f'bot_token = "{fake.token}"', config)
    config = re.sub(r'(?m)^chat_id = "[^"]*"', f'chat_id = "{chat_id}"', config)
    return re.sub(r'(?m)^kind = "telegram"$', f'kind = "telegram"\napi_url = "{fake.url}"', config)


async def test_the_readme_commands_deliver_a_photo_to_telegram(
    replay: ReplayServer, telegram: FakeTelegram, tmp_path: Path
) -> None:
    commands, config = make_it_real()
    assert [shlex.split(c)[:3] for c in commands] == [["curaflow", "pixiv", "login"], ["curaflow", "run", "--config"]]
    parsed = tomllib.loads(config)
    [route] = [name for name, r in parsed["routes"].items() if r["kind"] == "telegram"]
    [target] = parsed["targets"]
    assert target["routes"] == [route]
    config_file = shlex.split(commands[1])[3]
    chat_id = next(iter(telegram.chats))
    (tmp_path / config_file).write_text(stand_in_telegram(config, telegram, chat_id))

    # Pixiv stands in through its URLs only; the state directory is the README's default.
    env = env_for(tmp_path / ".curaflow", replay.url, CURAFLOW_PIXIV__IMAGE_URL=f"{replay.url}/i")
    del env["CURAFLOW_STATE_DIR"]

    # 1. curaflow pixiv login: the URL it prints, signed in, the address pasted back
    login = await asyncio.create_subprocess_exec(
        EXE,
        *shlex.split(commands[0])[1:],
        cwd=tmp_path,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert login.stdout is not None and login.stdin is not None
    printed = b""
    while b"/web/v1/login?" not in printed:
        line = await asyncio.wait_for(login.stdout.readline(), 60)
        assert line, "no login URL printed"
        printed += line
    url = next(w for w in printed.decode().split() if "/web/v1/login?" in w)
    login.stdin.write((await browser_login(url) + "\n").encode())
    await login.stdin.drain()
    out, err = await asyncio.wait_for(login.communicate(), 60)
    assert login.returncode == 0, err.decode()
    assert "logged in as replay" in out.decode()
    assert (tmp_path / ".curaflow" / "pixiv" / "default.refresh-token").exists()

    # 3. curaflow run --config curaflow.toml, exactly as written
    run = await asyncio.create_subprocess_exec(
        EXE,
        *shlex.split(commands[1])[1:],
        cwd=tmp_path,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(run.communicate(), 240)
    stdout, stderr = out.decode(), err.decode()
    assert run.returncode == 0, stderr[-3000:]
    # how to tell it is live (the README's words): the source is Pixiv (here: the
    # stand-in) with the account, the job succeeded, the route delivered a message
    assert f"source: Pixiv app-api at {replay.url}, account default (pixiv user replay, @replay)" in stderr
    assert re.search(r"^job \S+: succeeded$", stdout, flags=re.M), stdout
    delivered = re.search(rf"^  {route}: delivered → (\d+)$", stdout, flags=re.M)
    assert delivered, stdout
    work_id = re.search(r"^target \S+: work (\d+) submitted$", stdout, flags=re.M)
    assert work_id, stdout

    # the photo reached the Bot API, in the configured chat, captioned with the work's URL
    [message] = telegram.posted(chat_id)
    assert "photo" in message or "document" in message
    assert delivered.group(1) == str(message["message_id"])
    assert f"https://www.pixiv.net/artworks/{work_id.group(1)}" in message.get("caption", "")
    assert any(r.method in ("sendPhoto", "sendMediaGroup") for r in telegram.requests)
    assert telegram.violations == []
    # the jobs searched the stand-in with the refresh token the login stored
    assert replay.searches() and any(e.params.get("grant_type") == "refresh_token" for e in replay.faults.of("auth"))

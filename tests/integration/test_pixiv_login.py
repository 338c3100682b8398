"""``curaflow pixiv login | refresh | validate`` against the replay's auth endpoint.

Real ``curaflow`` processes, forked by the test process's zygote (:mod:`tests.zygote`);
the replay (served from the test process) plays Pixiv's login page and token endpoint: a
code bound to its PKCE challenge, single use, expiring.
"""

from __future__ import annotations

import asyncio
import os
import socket
import stat
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from curaflow.config import load_settings
from curaflow.sources.pixiv.login import token_path
from tests.fakes.replay import ReplayServer
from tests.zygote import curaflow_command, curaflow_pipes

pytestmark = [pytest.mark.integration]


def env_for(state_dir: Path, replay_url: str | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CURAFLOW_", "TEMPORAL_", "PIXIV_"))}
    env.pop("DATABASE_URL", None)
    env["CURAFLOW_STATE_DIR"] = str(state_dir)
    if replay_url is not None:
        env.update(CURAFLOW_PIXIV__API_URL=replay_url, CURAFLOW_PIXIV__AUTH_URL=replay_url)
    env.update(extra)
    return env


async def run_cli(*args: str, env: dict[str, str], stdin: str = "") -> tuple[int, str, str]:
    """``curaflow <args>`` to its end (forked, :func:`tests.zygote.curaflow_command`)."""
    done = await asyncio.to_thread(curaflow_command, list(args), env=env, input=stdin, timeout=60)
    return done.returncode, done.stdout, done.stderr


async def browser_login(login_url: str) -> str:
    """What a browser does: open the login page, sign in, end on the callback address."""
    async with httpx.AsyncClient() as http:
        answer = await http.get(login_url, follow_redirects=False)
    assert answer.status_code == 302, answer.text
    return answer.headers["location"]


async def login(
    env: dict[str, str], paste: Callable[[str], str] | None = None, *, delay_s: float = 0.0
) -> tuple[int, str, str]:
    """Run ``curaflow pixiv login`` (forked, :func:`tests.zygote.curaflow_pipes`): read the
    URL it prints, sign in, paste the address."""
    proc = await asyncio.to_thread(curaflow_pipes, ["pixiv", "login"], env=env)
    try:
        printed = b""
        while b"/web/v1/login?" not in printed:
            line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 60)
            assert line, "the command printed no login URL"
            printed += line
        url = next(w for w in printed.decode().split() if "/web/v1/login?" in w)
        address = await browser_login(url)
        await asyncio.sleep(delay_s)
        proc.stdin.write(((address if paste is None else paste(address)) + "\n").encode())
        proc.stdin.close()
        out, err = await asyncio.wait_for(
            asyncio.gather(asyncio.to_thread(proc.stdout.read), asyncio.to_thread(proc.stderr.read)), 60
        )
        code = await asyncio.to_thread(proc.process.wait, 60)
    finally:
        if proc.process.poll() is None:
            proc.process.kill()
            proc.process.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()
    return code, printed.decode() + out.decode(), err.decode()


async def test_login_stores_the_token_where_the_config_reads_it(replay: ReplayServer, tmp_path: Path) -> None:
    state = tmp_path / "state"
    code, out, err = await login(env_for(state, replay.url))
    assert code == 0, err
    assert "code_challenge_method=S256" in out and "client=pixiv-android" in out
    assert "logged in as replay (@replay" in out
    path = token_path(state, "default")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    token = path.read_text().strip()
    assert token.startswith("replay-") and token not in out + err  # never printed
    grant = replay.faults.of("auth")[-1]
    assert grant.params["grant_type"] == "authorization_code" and grant.status == 200

    settings = load_settings(state_dir=state)
    assert not settings.pixiv.replay
    assert settings.pixiv.refresh_token is not None and settings.pixiv.refresh_token.get_secret_value() == token


async def test_login_takes_the_bare_code_too(replay: ReplayServer, tmp_path: Path) -> None:
    from urllib.parse import parse_qs, urlsplit

    code, _out, err = await login(
        env_for(tmp_path, replay.url), paste=lambda address: parse_qs(urlsplit(address).query)["code"][0]
    )
    assert code == 0, err
    assert token_path(tmp_path, "default").exists()


async def test_an_expired_code_says_so(replay: ReplayServer, tmp_path: Path) -> None:
    replay.faults.code_ttl_s = 0.05
    code, _out, err = await login(env_for(tmp_path, replay.url), delay_s=0.3)
    assert code == 1
    assert "code has expired" in err and "log in again" in err
    assert not token_path(tmp_path, "default").exists()


async def test_a_wrong_or_reused_code_is_refused_clearly(replay: ReplayServer, tmp_path: Path) -> None:
    code, _out, err = await login(env_for(tmp_path, replay.url), paste=lambda _: "not-the-code")
    assert code == 1
    assert "Pixiv refused the code" in err and "Invalid authorization code" in err
    # a code of another login (its verifier is not this one's) is refused the same way
    other = await browser_login(f"{replay.url}/web/v1/login?code_challenge=abc&code_challenge_method=S256")
    code, _out, err = await login(env_for(tmp_path, replay.url), paste=lambda _: other)
    assert code == 1 and "Pixiv refused the code" in err
    assert not token_path(tmp_path, "default").exists()


async def test_an_address_without_a_code_is_a_usage_error(replay: ReplayServer, tmp_path: Path) -> None:
    code, _out, err = await login(
        env_for(tmp_path, replay.url), paste=lambda _: "https://app-api.pixiv.net/web/v1/users/auth/pixiv/callback"
    )
    assert code == 2 and "holds no code" in err


async def test_no_network_is_named(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    code, _out, err = await run_cli(
        "pixiv",
        "login",
        env=env_for(tmp_path, None, CURAFLOW_PIXIV__AUTH_URL=dead),
        stdin="https://app-api.pixiv.net/web/v1/users/auth/pixiv/callback?state=x&code=abc\n",
    )
    assert code == 1
    assert "cannot reach Pixiv's token endpoint" in err and "ConnectError" in err and "network" in err


async def test_validate_and_refresh_an_existing_token(replay: ReplayServer, tmp_path: Path) -> None:
    env = env_for(tmp_path, replay.url)
    code, out, err = await run_cli("pixiv", "validate", env=env)
    assert code == 2 and "curaflow pixiv login" in err  # nothing stored yet

    assert (await login(env))[0] == 0
    code, out, err = await run_cli("pixiv", "validate", env=env)
    assert code == 0, err
    assert "is valid: replay (@replay" in out
    assert replay.faults.of("auth")[-1].params["grant_type"] == "refresh_token"
    code, out, err = await run_cli("pixiv", "refresh", env=env)
    assert code == 0, err

    replay.faults.auth = ["invalid_grant"]  # Pixiv revoked it
    code, out, err = await run_cli("pixiv", "validate", env=env)
    assert code == 1
    assert "rejected the refresh token" in err and "curaflow pixiv login" in err


async def test_a_token_set_explicitly_wins_over_the_stored_one(replay: ReplayServer, tmp_path: Path) -> None:
    assert (await login(env_for(tmp_path, replay.url)))[0] == 0
    os.environ["PIXIV_REFRESH_TOKEN"] = "from-the-environment"
    try:
        settings = load_settings(state_dir=tmp_path)
    finally:
        del os.environ["PIXIV_REFRESH_TOKEN"]
    assert settings.pixiv.refresh_token is not None
    assert settings.pixiv.refresh_token.get_secret_value() == "from-the-environment"

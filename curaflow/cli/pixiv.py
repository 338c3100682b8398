"""``curaflow pixiv login | refresh | validate``: get, renew and check a Pixiv refresh token.

``login`` runs Pixiv's app login (OAuth PKCE, :mod:`curaflow.sources.pixiv.login`): it prints
the login URL, reads the address the browser ended on (or the bare code) from stdin,
exchanges the code for a refresh token, stores it in
``<state_dir>/pixiv/<account>.refresh-token`` (mode 0600) — where the configuration
reads an account's token when neither the file nor the environment sets one — and
prints the account's user name. ``refresh`` exchanges the account's token once and
stores what Pixiv answers (a rotated token, the user name); ``validate`` only checks it.
These single token requests do not pass the account's rate gate.

Exit status: 0 done; 1 Pixiv refused (expired or wrong code, rejected token) or could
not be reached; 2 usage or configuration errors (unknown account, no token, no code).

:func:`describe_source` is the one place that says which source a command's jobs use
(``curaflow run``, ``curaflow dev``).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import httpx
import typer

from curaflow.cli.common import ConfigOption, error, out_console, settings_or_exit, warning
from curaflow.config import Settings
from curaflow.observability.console import print_text
from curaflow.sources.pixiv.client import PIXIV_API_URL
from curaflow.sources.pixiv.login import (
    LoginError,
    code_from,
    exchange_code,
    refresh,
    start_login,
    store_token,
    stored_token,
    stored_user,
    token_path,
)

app = typer.Typer(help="Pixiv account login and refresh tokens.", no_args_is_help=True)

AccountOption = typer.Option("default", "--account", "-a", help="The Pixiv account (pixiv.accounts key).")
T = TypeVar("T")


def describe_source(settings: Settings, account: str) -> str:
    """One line naming the source the jobs of ``account`` use: the replay, or Pixiv and whose
    token, or the ``[sources.<name>]`` instance and its kind.

    The user name comes from what ``curaflow pixiv login`` (or ``refresh``) stored, and
    only when the token in use is the stored one; no request is sent.
    """
    other = settings.sources.get(account)
    if other is not None:  # a [sources.<name>] instance: Pixiv's replay and tokens are not its
        return f"source: {account} (kind {other.kind}, [sources.{account}])"
    pixiv = settings.pixiv
    if pixiv.replay:
        at = f" at {pixiv.api_url}" if pixiv.api_url else ""
        return (
            f"source: the recorded Pixiv replay{at} (no Pixiv refresh token configured; "
            "`curaflow pixiv login` makes it real)"
        )
    api = (pixiv.api_url or PIXIV_API_URL).rstrip("/")
    at = "" if api == PIXIV_API_URL else f" at {api}"
    acct = settings.accounts().get(account)
    token = acct.refresh_token.get_secret_value().strip() if acct and acct.refresh_token else ""
    if not token:
        who = "no refresh token for this account: `curaflow pixiv login --account " + account + "`"
    elif token == stored_token(settings.state_dir, account):
        user = stored_user(settings.state_dir, account)
        if user and user.get("name") not in (None, "", "?"):
            who = f"pixiv user {user['name']}, @{user.get('account') or '?'}"
        else:  # a token file written by hand: nobody has asked Pixiv whose it is
            who = "stored refresh token, not checked: `curaflow pixiv validate` asks Pixiv whose it is"
    else:
        who = "refresh token from the configuration or the environment"
    return f"source: Pixiv app-api{at}, account {account} ({who})"


def _account_or_exit(settings: Settings, account: str) -> None:
    if account not in settings.accounts():
        error(f"unknown pixiv account {account!r} (configured: {', '.join(sorted(settings.accounts()))})")
        raise typer.Exit(2)


def _with_http(settings: Settings, call: Callable[[httpx.AsyncClient], Awaitable[T]]) -> T:
    async def go() -> T:
        timeout = httpx.Timeout(settings.pixiv.request_timeout_ms / 1000)
        async with httpx.AsyncClient(timeout=timeout) as http:
            return await call(http)

    return asyncio.run(go())


def _fail(err: LoginError) -> typer.Exit:
    error(err.message)
    return typer.Exit(2 if err.kind == "no_code" else 1)


@app.command()
def login(account: str = AccountOption, config: Path | None = ConfigOption) -> None:
    """Log in to Pixiv in a browser and store the account's refresh token (mode 0600)."""
    settings = settings_or_exit(config)
    _account_or_exit(settings, account)
    attempt = start_login(settings.pixiv.api_url)
    print_text("1. Open this address in a browser and sign in to Pixiv:\n")
    print_text(f"   {attempt.url}\n")
    print_text("2. The browser ends on a blank page. Copy its address (developer tools, Network tab,")
    print_text("   filter 'callback': https://app-api.pixiv.net/web/v1/users/auth/pixiv/callback?…code=…)")
    print_text("   and paste it here, or just its code. Be quick: a code expires about 30 s after you sign in.\n")
    print_text("address or code: ", end="", flush=True)
    pasted = sys.stdin.readline()
    if not pasted.endswith("\n"):
        print_text("")  # the end of input: the messages that follow start on their own line
    try:
        code = code_from(pasted)
        info = _with_http(settings, lambda http: exchange_code(http, attempt, code, auth_url=settings.pixiv.auth_url))
    except LoginError as err:
        raise _fail(err) from None
    path = store_token(settings.state_dir, account, info)
    out_console.print(f"logged in as {info.describe()}", markup=False, highlight=False)
    out_console.print(f"refresh token of account {account} stored in {path} (mode 0600)", markup=False)
    configured = settings.accounts()[account].refresh_token
    if configured is not None and configured.get_secret_value().strip():
        warning(
            "note: a refresh token is also set in the configuration or the environment "
            "(pixiv.refresh_token / PIXIV_REFRESH_TOKEN) and takes precedence over the stored one"
        )


def _check(account: str, config: Path | None, *, keep: bool) -> None:
    settings = settings_or_exit(config)
    _account_or_exit(settings, account)
    secret = settings.accounts()[account].refresh_token
    token = secret.get_secret_value().strip() if secret is not None else ""
    if not token:
        error(
            f"no refresh token for pixiv account {account}: run `curaflow pixiv login"
            + ("" if account == "default" else f" --account {account}")
            + "`"
        )
        raise typer.Exit(2)
    from_file = token == stored_token(settings.state_dir, account)
    try:
        info = _with_http(settings, lambda http: refresh(http, token, auth_url=settings.pixiv.auth_url))
    except LoginError as err:
        raise _fail(err) from None
    out_console.print(f"refresh token of account {account} is valid: {info.describe()}", markup=False)
    if keep and from_file:
        store_token(settings.state_dir, account, info)
        if info.refresh_token != token:
            out_console.print(f"Pixiv sent a new refresh token: stored in {token_path(settings.state_dir, account)}")
    elif keep and info.refresh_token != token:
        warning("Pixiv sent a new refresh token; the configured one is kept (it stays valid until Pixiv revokes it)")


@app.command("refresh")
def refresh_command(account: str = AccountOption, config: Path | None = ConfigOption) -> None:
    """Exchange the account's refresh token now; store a token Pixiv rotated and the user name."""
    _check(account, config, keep=True)


@app.command()
def validate(account: str = AccountOption, config: Path | None = ConfigOption) -> None:
    """Check that Pixiv accepts the account's refresh token (one token request, nothing stored)."""
    _check(account, config, keep=False)

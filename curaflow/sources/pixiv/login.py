"""Pixiv login: the app's OAuth PKCE flow, and where an account's refresh token is kept.

Pixiv's app logs in through a browser (reference ``pixiv-and-delivery-apis.md`` §2.1):

1. the client draws a ``code_verifier`` (RFC 7636 §4.1) and opens
   ``https://app-api.pixiv.net/web/v1/login?code_challenge=<S256 of it>``
   ``&code_challenge_method=S256&client=pixiv-android``;
2. the user signs in; Pixiv redirects the browser to
   ``https://app-api.pixiv.net/web/v1/users/auth/pixiv/callback?state=…&code=…``
   (a blank page: the code is read from the address);
3. the client posts ``grant_type=authorization_code`` with the code, the verifier and
   that ``redirect_uri`` to ``https://oauth.secure.pixiv.net/auth/token`` and gets a
   refresh token and the account (``user{id, name, account}``). The code expires about
   30 seconds after the sign-in (``400 invalid_grant``, "The authorization code has
   expired").

The client id and secret are the app's public pair that every Pixiv client ships (the
same as :mod:`curaflow.sources.pixiv.client`'s). The refresh token is stored in
``<state_dir>/pixiv/<account>.refresh-token`` with mode 0600 (the directory 0700), and
the account's name beside it in ``<account>.user.json``; :class:`curaflow.config.Settings`
reads the file for an account whose token the configuration and the environment leave
unset. Failures are one :class:`LoginError` whose ``kind`` says what to do.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx

from curaflow.paths import private_dir, write_private
from curaflow.sources.pixiv.client import CLIENT_ID, CLIENT_SECRET, PIXIV_API_URL, PIXIV_AUTH_URL, usable_token
from curaflow.sources.pixiv.client.answers import refuses_grant

LOGIN_PATH = "/web/v1/login"
REDIRECT_URI = "https://app-api.pixiv.net/web/v1/users/auth/pixiv/callback"
#: The app the login page is opened for (``client=pixiv-android``) and its User-Agent.
LOGIN_CLIENT = "pixiv-android"
LOGIN_USER_AGENT = "PixivAndroidApp/5.0.234 (Android 11; Pixel 5)"
#: How long Pixiv accepts a code after the sign-in (seconds; observed, not documented).
CODE_LIFETIME_S = 30
TOKEN_SUFFIX = ".refresh-token"
USER_SUFFIX = ".user.json"

LoginErrorKind = Literal["no_code", "expired_code", "wrong_code", "rejected_token", "no_network", "unexpected"]


class LoginError(Exception):
    """A login, refresh or validation that did not produce a token.

    Attributes:
        kind: ``no_code`` (nothing that looks like a code was given), ``expired_code``
            (Pixiv: the authorization code has expired), ``wrong_code`` (Pixiv refused the
            code: another login's, mistyped, already used), ``rejected_token`` (Pixiv
            refused the refresh token: log in again), ``no_network`` (the token endpoint
            could not be reached), ``unexpected`` (any other answer).
        message: one sentence saying what happened and what to do.
    """

    def __init__(self, kind: LoginErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True)
class PkceLogin:
    """One login attempt: the verifier kept by the client and the URL the user opens."""

    code_verifier: str
    code_challenge: str
    url: str


@dataclass(frozen=True)
class PixivAccountInfo:
    """What Pixiv's token endpoint answered: the refresh token and whose it is."""

    refresh_token: str
    user_id: str
    user_name: str
    account: str

    def describe(self) -> str:
        """``<name> (@<account>, id <id>)`` for messages."""
        return f"{self.user_name} (@{self.account}, id {self.user_id})"


def s256(verifier: str) -> str:
    """The ``S256`` code challenge of ``verifier`` (RFC 7636 §4.2: base64url, no padding)."""
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii")).digest()).rstrip(b"=").decode("ascii")


def start_login(api_url: str | None = None) -> PkceLogin:
    """Draw a verifier and build the login URL.

    Args:
        api_url: base of the login page; None → ``https://app-api.pixiv.net``.
    """
    verifier = secrets.token_urlsafe(32)
    challenge = s256(verifier)
    query = urlencode({"code_challenge": challenge, "code_challenge_method": "S256", "client": LOGIN_CLIENT})
    base = (api_url or PIXIV_API_URL).rstrip("/")
    return PkceLogin(code_verifier=verifier, code_challenge=challenge, url=f"{base}{LOGIN_PATH}?{query}")


def code_from(pasted: str) -> str:
    """The authorization code in what the user pasted: the redirect address or the code.

    Accepts the callback URL (``…/callback?state=…&code=…``, also ``pixiv://…?code=…``),
    a query string holding ``code=``, or the bare code.

    Raises:
        LoginError: ``no_code`` when the text is empty or an address without a code.
    """
    text = pasted.strip().strip("'\"")
    if not text:
        raise LoginError("no_code", "nothing was pasted: paste the address the browser ended on, or its code")
    if "code=" in text or "://" in text:
        query = urlsplit(text).query if "://" in text else text.lstrip("?")
        codes = parse_qs(query).get("code")
        if not codes or not codes[0].strip():
            raise LoginError(
                "no_code",
                "that address holds no code: after signing in, copy the address that starts with "
                f"{REDIRECT_URI}?… (it holds code=…)",
            )
        return codes[0].strip()
    if any(c.isspace() for c in text):
        raise LoginError("no_code", "a code is one word: paste the address the browser ended on, or its code")
    return text


def _user(body: dict[str, Any]) -> dict[str, Any]:
    user = body.get("user")
    if not isinstance(user, dict) and isinstance(body.get("response"), dict):
        user = body["response"].get("user")
    return user if isinstance(user, dict) else {}


def _pixiv_message(body: Any) -> str:
    if isinstance(body, dict):
        errors = body.get("errors")
        if isinstance(errors, dict) and isinstance(errors.get("system"), dict):
            return str(errors["system"].get("message") or "")
        if isinstance(body.get("error"), str):
            return body["error"]
    return ""


async def _token_request(http: httpx.AsyncClient, auth_url: str | None, form: dict[str, str]) -> dict[str, Any]:
    url = f"{(auth_url or PIXIV_AUTH_URL).rstrip('/')}/auth/token"
    try:
        response = await http.post(
            url,
            data={"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "include_policy": "true", **form},
            headers={"User-Agent": LOGIN_USER_AGENT, "App-OS": "android", "App-OS-Version": "11"},
        )
    except httpx.HTTPError as err:
        raise LoginError(
            "no_network",
            f"cannot reach Pixiv's token endpoint {url} ({type(err).__name__}): check the network "
            "connection and try again (environment proxies are not used)",
        ) from err
    try:
        body: Any = response.json()
    except (ValueError, RecursionError):  # not JSON; nested deeper than the parser recurses
        body = None
    # The worker's rule: one owner of what refuses a grant (a refresh: words naming the token).
    if refuses_grant(response.status_code, body, form["grant_type"]):
        message = _pixiv_message(body)
        raise LoginError("wrong_code" if form["grant_type"] == "authorization_code" else "rejected_token", message)
    if response.status_code != 200 or not isinstance(body, dict) or not body.get("refresh_token"):
        raise LoginError(
            "unexpected",
            f"Pixiv's token endpoint answered HTTP {response.status_code}"
            + (f": {_pixiv_message(body)}" if _pixiv_message(body) else "")
            + "; try again later",
        )
    if usable_token(body["refresh_token"]) is None:
        # Stored, it would replace the account's token with one no refresh accepts.
        raise LoginError(
            "unexpected",
            "Pixiv's token endpoint answered a refresh token curaflow cannot use (not text of "
            "printable ASCII); nothing was stored, try again later",
        )
    return body


def _account_info(body: dict[str, Any]) -> PixivAccountInfo:
    user = _user(body)
    return PixivAccountInfo(
        refresh_token=str(body["refresh_token"]),
        user_id=str(user.get("id") or ""),
        user_name=str(user.get("name") or "?"),
        account=str(user.get("account") or "?"),
    )


async def exchange_code(
    http: httpx.AsyncClient, login: PkceLogin, code: str, *, auth_url: str | None = None
) -> PixivAccountInfo:
    """Exchange an authorization code for a refresh token (step 3 of the flow).

    Raises:
        LoginError: ``expired_code`` or ``wrong_code`` (Pixiv answered ``invalid_grant``:
            the message tells the two apart), ``no_network``, ``unexpected``.
    """
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "code_verifier": login.code_verifier,
        "redirect_uri": REDIRECT_URI,
    }
    try:
        return _account_info(await _token_request(http, auth_url, form))
    except LoginError as err:
        if err.kind != "wrong_code":
            raise
        if "expired" in err.message.lower():
            raise LoginError(
                "expired_code",
                f"Pixiv says the code has expired ({err.message}): codes last about {CODE_LIFETIME_S} seconds "
                "after you sign in; log in again and paste the address at once",
            ) from None
        raise LoginError(
            "wrong_code",
            f"Pixiv refused the code ({err.message or 'invalid_grant'}): paste the address of the login this "
            "command printed (each login has its own code, usable once)",
        ) from None


async def refresh(http: httpx.AsyncClient, refresh_token: str, *, auth_url: str | None = None) -> PixivAccountInfo:
    """Exchange a refresh token (the grant the worker uses): proves it valid, names its account.

    The answer's ``refresh_token`` may differ from the one sent (Pixiv may rotate it).

    Raises:
        LoginError: ``rejected_token`` (Pixiv answered ``invalid_grant``: log in again),
            ``no_network``, ``unexpected``.
    """
    form = {"grant_type": "refresh_token", "refresh_token": refresh_token, "get_secure_url": "1"}
    try:
        return _account_info(await _token_request(http, auth_url, form))
    except LoginError as err:
        if err.kind != "rejected_token":
            raise
        raise LoginError(
            "rejected_token",
            f"Pixiv rejected the refresh token ({err.message or 'invalid_grant'}): log in again with "
            "`curaflow pixiv login`",
        ) from None


# ---- where the token is kept ---------------------------------------------------------


def token_path(state_dir: Path, account: str) -> Path:
    """``<state_dir>/pixiv/<account>.refresh-token``: the account's stored refresh token."""
    return state_dir / "pixiv" / f"{account}{TOKEN_SUFFIX}"


def stored_token(state_dir: Path, account: str) -> str | None:
    """The account's stored refresh token, or None when there is none (or it is empty)."""
    path = token_path(state_dir, account)
    try:
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    return token or None


def stored_user(state_dir: Path, account: str) -> dict[str, str] | None:
    """What the last login or refresh stored about the account (``name``, ``account``, ``id``)."""
    try:
        data = json.loads((state_dir / "pixiv" / f"{account}{USER_SUFFIX}").read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else None


def store_token(state_dir: Path, account: str, info: PixivAccountInfo) -> Path:
    """Store the account's refresh token (mode 0600, in private directories) and who it
    belongs to; returns the token's path."""
    private_dir(state_dir)
    path = token_path(state_dir, account)
    write_private(path, info.refresh_token + "\n")
    user = {"name": info.user_name, "account": info.account, "id": info.user_id}
    write_private(path.with_name(f"{account}{USER_SUFFIX}"), json.dumps(user, ensure_ascii=False) + "\n")
    return path

"""Pure parts of the Pixiv login: PKCE, reading a pasted code, naming the source in use."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from curaflow.cli.pixiv import describe_source
from curaflow.config import load_settings
from curaflow.sources.pixiv.login import LoginError, PixivAccountInfo, code_from, s256, start_login, store_token


def test_the_challenge_is_rfc_7636_s256() -> None:
    # RFC 7636 appendix B
    assert s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk") == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"


def test_the_login_url_is_the_apps() -> None:
    attempt = start_login()
    parts = urlsplit(attempt.url)
    assert (parts.scheme, parts.netloc, parts.path) == ("https", "app-api.pixiv.net", "/web/v1/login")
    query = parse_qs(parts.query)
    assert query == {
        "code_challenge": [s256(attempt.code_verifier)],
        "code_challenge_method": ["S256"],
        "client": ["pixiv-android"],
    }
    assert start_login("http://127.0.0.1:9/").url.startswith("http://127.0.0.1:9/web/v1/login?")
    assert start_login().code_verifier != attempt.code_verifier


@pytest.mark.parametrize(
    "pasted",
    [
        "https://app-api.pixiv.net/web/v1/users/auth/pixiv/callback?state=s1&code=AbC-123_x",
        "  'https://app-api.pixiv.net/web/v1/users/auth/pixiv/callback?code=AbC-123_x&via=login'\n",
        "pixiv://account/login?code=AbC-123_x&via=login",
        "?code=AbC-123_x",
        "code=AbC-123_x",
        "AbC-123_x",
    ],
)
def test_the_code_is_read_from_the_address_or_taken_as_is(pasted: str) -> None:
    assert code_from(pasted) == "AbC-123_x"


@pytest.mark.parametrize(
    "pasted", ["", "  \n", "https://app-api.pixiv.net/web/v1/users/auth/pixiv/callback?state=s1", "two words"]
)
def test_nothing_like_a_code_is_a_usage_error(pasted: str) -> None:
    with pytest.raises(LoginError) as raised:
        code_from(pasted)
    assert raised.value.kind == "no_code"


def test_run_and_dev_name_the_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PIXIV_REFRESH_TOKEN", "CURAFLOW_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    settings = load_settings(state_dir=tmp_path)
    assert describe_source(settings, "default").startswith("source: the recorded Pixiv replay (")

    info = PixivAccountInfo(refresh_token="rt-1", user_id="7", user_name="ミク", account="miku")
    store_token(tmp_path, "default", info)
    assert describe_source(load_settings(state_dir=tmp_path), "default") == (
        "source: Pixiv app-api, account default (pixiv user ミク, @miku)"
    )
    other = load_settings(state_dir=tmp_path, pixiv={"refresh_token": "rt-2", "api_url": "http://127.0.0.1:9"})
    assert describe_source(other, "default") == (
        "source: Pixiv app-api at http://127.0.0.1:9, account default "
        "(refresh token from the configuration or the environment)"
    )


def test_a_token_file_written_by_hand_is_named_unchecked_not_as_user_question_marks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("PIXIV_REFRESH_TOKEN", "CURAFLOW_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    info = PixivAccountInfo(refresh_token="rt-1", user_id="7", user_name="ミク", account="miku")
    path = store_token(tmp_path, "default", info)
    for other in path.parent.iterdir():  # only the token stays, as when a user writes the file
        if other != path:
            other.unlink()
    assert describe_source(load_settings(state_dir=tmp_path), "default") == (
        "source: Pixiv app-api, account default "
        "(stored refresh token, not checked: `curaflow pixiv validate` asks Pixiv whose it is)"
    )


def test_run_and_dev_name_a_source_of_another_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A target on a [sources.<name>] instance is not served by Pixiv's replay nor by a
    # Pixiv account: the line names the instance and its kind.
    for name in ("PIXIV_REFRESH_TOKEN", "CURAFLOW_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    settings = load_settings(
        state_dir=tmp_path,
        source_modules=["tests.fakes.catalog_source"],
        sources={"shelf": {"kind": "catalog", "url": "http://127.0.0.1:9"}},
        targets=[{"id": "t", "account": "shelf", "routes": ["out"]}],
    )
    assert describe_source(settings, "shelf") == "source: shelf (kind catalog, [sources.shelf])"
    assert describe_source(settings, "default").startswith("source: the recorded Pixiv replay (")

"""An ``--api-url`` (``CURAFLOW_API_URL``) that can name no API is the command's error, exit 2.

Until 2026-12-07 ``curaflow submit | status | cancel | events`` sent their request to it
and printed ``cannot reach …`` with exit status 3 — "the API could not be reached: try
again later" (``curaflow.cli.jobs``) — for ``localhost:8080`` (no scheme: what an operator
types first), ``ftp://…``, ``http://`` or a port over 65535: a script retried for ever what
no retry mends. Refused before anything is sent, naming the option, the URL not repeated
(it may carry a credential). A URL with a user and a password is refused too: httpx sends
them as HTTP Basic in place of the bearer token, and every request was refused 401 — and
the password printed in ``cannot reach http://operator:…@…``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from curaflow.cli.app import app

NO_API = [
    "localhost:8080",
    "127.0.0.1:8080",
    "ftp://127.0.0.1:8080",
    "http://",
    "http://127.0.0.1:99999",
    "http://127.0.0.1:8080?token=s3cretvalue",
    "http://127.0.0.1:8080/#jobs",
    # an empty query or fragment is one too: '?' or '#' then the path appended (`…:8080?/jobs/x`)
    # sent the request to '/' (until 2026-12-07, httpx reading neither as present)
    "http://127.0.0.1:8080?",
    "http://127.0.0.1:8080/#",
    "https://api.example.org/curaflow?",
    " http://127.0.0.1:8080",
    # a space inside is whitespace too (printable, so until 2026-12-07 it passed: a host
    # 'exa mple.org' was tried, 'cannot reach', exit 3)
    "http://exa mple.org:8080",
    "http://127.0.0.1:8080/cura flow",
    "http://operator:s3cretvalue@127.0.0.1:8080",
]


@pytest.fixture(autouse=True)
def _nothing_sent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from curaflow import client as api_client

    async def sent(*args: object, **kwargs: object) -> object:
        raise AssertionError("nothing may be sent")

    monkeypatch.setattr(api_client.CuraflowClient, "_call", sent)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CURAFLOW_API_URL", raising=False)
    monkeypatch.delenv("CURAFLOW_CONFIG", raising=False)


@pytest.mark.parametrize("url", NO_API)
@pytest.mark.parametrize("command", [["status", "demo@manual-x"], ["submit", "-t", "x"], ["cancel", "demo@manual-x"]])
def test_an_api_url_that_names_no_api_exits_2_naming_the_option(url: str, command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--api-url", url])
    assert result.exit_code == 2, result.output
    assert "--api-url" in result.output and "CURAFLOW_API_URL" in result.output
    assert "s3cretvalue" not in result.output
    assert "Traceback" not in result.output


def test_the_api_url_from_the_environment_is_judged_alike() -> None:
    result = CliRunner().invoke(app, ["status", "demo@manual-x"], env={"CURAFLOW_API_URL": "localhost:8080"})
    assert result.exit_code == 2, result.output
    assert "CURAFLOW_API_URL" in result.output


@pytest.mark.parametrize("url", ["http://127.0.0.1:9", "https://api.example.org/curaflow/", "http://[::1]:8080"])
def test_an_api_url_that_names_an_api_is_used(url: str) -> None:
    result = CliRunner().invoke(app, ["status", "demo@manual-x", "--api-url", url])
    assert isinstance(result.exception, AssertionError)  # the request was about to be sent

"""A secret this process holds is never written out in words curaflow did not choose.

A library's exception quotes what it was given: httpx's ``raise_for_status`` names the
request's URL, query string included, and a route or source kind of the operator's (the
route seam, ``route_modules``; the source seam) may let one escape. curaflow words such a
failure by its type (``activities.deliver.sending._guarded``) or quotes it
(``curaflow.sources.guard``), and raises its own error *from* it — and Temporal's history
holds the whole chain (each cause's message and stack trace, shown by the Temporal UI), as
does the Temporal SDK's ``Completing activity as failed`` log line (its traceback). Until
2026-12-07 a route kind's token in the URL it requested reached both; the source guard's
quote reached the ledger (``unavailable_works.why``) and the job's answer as well.

The secrets held are those of every configuration the process loaded
(``curaflow.config.load_settings``: ``Settings.secret_settings``) — here a route kind's
``SecretStr`` and a Pixiv refresh token.
"""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
import tomli_w
from google.protobuf.json_format import MessageToJson
from temporalio.api.failure.v1 import Failure
from temporalio.exceptions import ApplicationError

from activities.deliver.sending import _guarded
from activities.errors import permanent
from curaflow.config import Settings, load_settings
from curaflow.domain.reasons import TerminalReason
from curaflow.observability.logs import configure_logging
from curaflow.observability.secrets import hold
from curaflow.routes.base import DeliveryReceipt, DeliveryRequest, RouteError
from curaflow.sources.errors import SourceError
from curaflow.temporal.connection import DATA_CONVERTER
from tests.integration.test_routes import make_request
from tests.unit.test_source_guard import TARGET, Hostile, guard, request

#: The chat route kind's token and a Pixiv account's refresh token, as the operator set them.
ROUTE_TOKEN = "chat-token-Zq81xNw0aLr6"
REFRESH_TOKEN = "pixiv-refresh-Kd93hTQ2mVx0"


def loaded(tmp_path: Path) -> Settings:
    """A configuration with both secrets, loaded as a process loads it."""
    path = tmp_path / "curaflow.toml"
    path.write_text(
        tomli_w.dumps(
            {
                "state_dir": str(tmp_path / "state"),
                "route_modules": ["tests.fakes.chat_route"],
                "routes": {
                    "room": {"kind": "chat", "url": "https://chat.example", "room": "r", "token": ROUTE_TOKEN},
                    "out": {"kind": "directory", "path": str(tmp_path / "out")},
                },
                "pixiv": {"refresh_token": REFRESH_TOKEN},
            }
        )
    )
    return load_settings(path)


def refused_with_the_url(url: str) -> httpx.HTTPStatusError:
    """What ``response.raise_for_status()`` raises for a 401 to ``url``."""
    response = httpx.Response(401, request=httpx.Request("POST", url))
    try:
        response.raise_for_status()
    except httpx.HTTPStatusError as err:
        return err
    raise AssertionError("raise_for_status did not raise")


class RaisingRoute:
    """A route kind of the operator's that lets its library's exception escape."""

    name = "room"
    kind = "chat"
    resend_safe = True

    async def deliver(self, request: DeliveryRequest) -> DeliveryReceipt:
        raise refused_with_the_url(f"https://chat.example/api/rooms/r/posts?token={ROUTE_TOKEN}")


def history_of(err: BaseException) -> str:
    """What Temporal's history holds of ``err`` raised by an activity (its failure, as this
    process's clients and workers convert it)."""
    failure = Failure()
    DATA_CONVERTER.failure_converter.to_failure(err, DATA_CONVERTER.payload_converter, failure)
    return MessageToJson(failure)


async def raised_by_the_deliver_step(tmp_path: Path) -> ApplicationError:
    """What the deliver activity raises for the route's unexpected failure (its last attempt)."""
    try:
        await _guarded(RaisingRoute(), make_request(tmp_path, [(60, 80)]))
    except RouteError as err:
        try:
            raise permanent(TerminalReason.INTERNAL_ERROR, f"no delivery attempt left: {err}") from err
        except ApplicationError as failed:
            return failed
    raise AssertionError("the route did not fail")


async def test_a_route_kinds_exception_quoting_its_token_leaves_it_out_of_temporal_history(tmp_path: Path) -> None:
    loaded(tmp_path)
    failed = await raised_by_the_deliver_step(tmp_path)
    history = history_of(failed)
    assert "HTTPStatusError" in history and "401 Unauthorized" in history, history  # the cause stays readable
    assert ROUTE_TOKEN not in history, history


async def test_a_route_kinds_exception_quoting_its_token_leaves_it_out_of_the_log_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loaded(tmp_path)
    failed = await raised_by_the_deliver_step(tmp_path)
    configure_logging("INFO", json_lines=True)
    capsys.readouterr()
    # as the Temporal SDK logs a failed attempt
    logging.getLogger("temporalio.activity").warning("Completing activity as failed", exc_info=failed)
    line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert "HTTPStatusError" in line["exception"], line  # the traceback stays readable
    assert ROUTE_TOKEN not in json.dumps(line, ensure_ascii=False), line


@pytest.mark.parametrize("mode", ["json", "console"])
def test_a_log_line_never_holds_a_held_secret_in_any_field(
    mode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loaded(tmp_path)
    configure_logging("INFO", json_lines=mode == "json")
    capsys.readouterr()
    try:
        raise ValueError(f"bad answer to {REFRESH_TOKEN}")
    except ValueError:
        logging.getLogger("some.library").error("request with %s failed", REFRESH_TOKEN, exc_info=True)
    from curaflow.observability.logs import get_logger

    get_logger("curaflow.test").warning("x.failed", detail=f"grant {REFRESH_TOKEN} refused")
    err = capsys.readouterr().err
    assert "ValueError" in err and "x.failed" in err, err
    assert REFRESH_TOKEN not in err, err


async def test_the_source_guards_words_for_a_sources_exception_hold_no_held_secret(tmp_path: Path) -> None:
    """The guard quotes a source's own exception (``source 'x' search raised …: …``): that
    text is the cell's message in the ledger and the job's answer, not only history."""
    loaded(tmp_path)

    async def refused(cursor: str | None) -> Any:
        raise refused_with_the_url(f"https://api.example/search?refresh_token={REFRESH_TOKEN}")

    with pytest.raises(SourceError) as caught:
        await guard(Hostile(page=refused)).scan(TARGET, request())
    assert "HTTPStatusError" in str(caught.value) and "401 Unauthorized" in str(caught.value), caught.value
    assert REFRESH_TOKEN not in str(caught.value), caught.value
    assert REFRESH_TOKEN not in history_of(caught.value)


def test_a_secret_shorter_than_a_credential_is_not_masked(tmp_path: Path) -> None:
    """Masking a value of a few characters would mask the same letters in any word."""
    from curaflow.observability.secrets import MIN_CHARS, hold, redacted

    hold("abc")
    assert redacted("abc is not masked") == "abc is not masked"
    shortest = "Qx7Wq2Lp9Vb3Nm5K"[:MIN_CHARS]  # no run of letters another test writes
    hold(shortest)
    assert redacted(f"key {shortest}.") == "key ***."


def test_a_console_traceback_masks_a_secret_longer_than_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rich traceback folds a word wider than the terminal (80 columns when piped) onto
    the next line: a Discord webhook URL (its token, 68 characters) quoted in an exception
    was then in two pieces, neither of them the secret, and neither masked."""
    webhook = "https://discord.example/api/webhooks/123456789012345678/" + "Tk" * 34
    hold(webhook)
    configure_logging("INFO", json_lines=False)
    capsys.readouterr()
    try:
        raise ValueError(f"could not post to {webhook}")
    except ValueError:
        logging.getLogger("some.library").error("post failed", exc_info=True)
    err = capsys.readouterr().err
    assert "ValueError" in err, err
    assert "TkTkTkTk" not in err, err


async def test_the_tokens_a_pixiv_client_obtains_as_it_runs_are_held() -> None:
    """An access token and a rotated refresh token are no settings: the client holds them
    as Pixiv answers them, and a library's words quoting one lose it."""
    from curaflow.observability.secrets import redacted
    from curaflow.sources.pixiv.client import PixivClient

    access, rotated = "access-Pq7wE2rT9yU4iO1p", "rotated-Lk3jH8gF5dS2aZ0x"

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"access_token": access, "refresh_token": rotated, "expires_in": 3600})

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
        pixiv = PixivClient(http, refresh_token="sent-Mn4bV6cX8zQ1wE3r", auth_url="http://api.test")
        await pixiv.authenticate()
    said = f"Illegal header value b'Bearer {access}'; refresh {rotated}; sent sent-Mn4bV6cX8zQ1wE3r"
    assert redacted(said) == "Illegal header value b'Bearer ***'; refresh ***; sent ***"


async def test_a_failing_loops_words_in_ready_and_in_the_exit_reason_hold_no_held_secret() -> None:
    """``/ready`` (no token asked) names a failing loop's last error, and the process's
    exit reason its failure: an exception of a library quoting a secret was both."""
    import asyncio

    from curaflow.observability.supervision import Beat, SupervisionPolicy, Supervisor
    from tests.support import eventually

    secret = "loop-secret-Wz5xC7vB9nM2"
    hold(secret)
    stop, reasons = asyncio.Event(), []
    supervisor = Supervisor(
        stop, SupervisionPolicy(initial_backoff_s=0.01, max_backoff_s=0.04, fatal_after_s=0.3), on_fatal=reasons.append
    )

    async def body(beat: Beat) -> None:
        raise OSError(f"refused: https://collector.example/v1?key={secret}")

    supervisor.loop("unit-secret", body)
    await eventually(lambda: bool(reasons), timeout_s=5.0, interval_s=0.005)
    detail = str(supervisor.checks()["loop:unit-secret"])
    assert "OSError" in detail and secret not in detail, detail
    assert "OSError" in reasons[0] and secret not in reasons[0], reasons
    await supervisor.close()


async def test_the_replays_stand_in_token_is_no_secret_to_mask() -> None:
    """A replay worker sends ``replay`` as its refresh token and gets it back: held, it
    would mask the word in every line and failure of the replay (the README's first run)."""
    from curaflow.observability.secrets import redacted
    from curaflow.sources.pixiv.client import PixivClient

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, json={"access_token": "replay-access-Hy6tR4eW2q", "refresh_token": "replay", "expires_in": 3600}
        )

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
        await PixivClient(http, refresh_token="replay", auth_url="http://api.test").authenticate()
    assert redacted("source: the recorded Pixiv replay") == "source: the recorded Pixiv replay"


@pytest.mark.parametrize(
    ("secret", "said", "fields"),
    [
        # A secret of digits (a weak database password) inside a number curaflow logs: the
        # line's text masked, the number was cut in two around `***` — no JSON any more.
        ("80615279", "password 80615279 refused", {"bytes": 1806152790}),
        # A secret beginning with a letter JSON escapes after a backslash (`n`), its other
        # letters after a line break in the text: the JSON text `\nQ7x…` holds the secret,
        # and the mask took the `n` of `\n`, leaving a lone backslash.
        ("nQ7xWq2Lp9Vb", "answered:\nQ7xWq2Lp9Vb and nQ7xWq2Lp9Vb", {}),
        # A secret ending with a backslash beside a quote in the text: `\"` lost its backslash.
        ("Qx7Wq2Lp9\\", 'value Qx7Wq2Lp9" and Qx7Wq2Lp9\\ both', {}),
        # Letters beyond ASCII and a quote: held JSON-escaped as ASCII only, the line
        # (ensure_ascii=False) wrote it otherwise — not masked.
        ('pässw"Qx7Wq2', 'grant pässw"Qx7Wq2 refused', {}),
    ],
    ids=["digits-in-a-number", "after-a-line-break", "trailing-backslash", "non-ascii-and-quote"],
)
def test_a_json_log_line_stays_json_and_holds_no_held_secret_whatever_its_characters(
    secret: str, said: str, fields: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Masking the rendered line replaced a secret's characters wherever they stood in the
    JSON text — inside a number, across an escape — and knew the JSON form of a secret only
    as an ASCII-only writer writes it."""
    from curaflow.observability import secrets
    from curaflow.observability.logs import get_logger

    monkeypatch.setattr(secrets, "_held", ())  # what this test holds is forgotten after it
    hold(secret)
    configure_logging("INFO", json_lines=True)
    capsys.readouterr()
    get_logger("curaflow.test").warning("x.failed", detail=said, **fields)
    raw = capsys.readouterr().err.strip().splitlines()[-1]
    line = json.loads(raw)  # one JSON object, whatever the secret's characters
    assert secret not in line["detail"] and "***" in line["detail"], line
    assert {key: line[key] for key in fields} == fields, line  # curaflow's own values as it wrote them


def test_the_callback_secret_is_a_secret_the_process_holds(tmp_path: Path) -> None:
    """``api.callback_secret`` signs every push (Standard Webhooks): a process holds it as it
    holds the API token — masked wherever a library's words quote it — and the example's
    value is refused as any secret's is (until 2026-12-07 it was no secret setting)."""
    from curaflow.observability.secrets import redacted

    callback_secret = "whsec_" + base64.b64encode(b"callback-secret-Rt51Jw0qPz8e").decode()
    path = tmp_path / "curaflow.toml"
    path.write_text(
        tomli_w.dumps(
            {
                "state_dir": str(tmp_path / "state"),
                "routes": {"out": {"kind": "directory", "path": str(tmp_path / "out")}},
                "api": {"callback_secret": callback_secret},
            }
        )
    )
    settings = load_settings(path)
    assert ("api.callback_secret", callback_secret) in settings.secrets()
    assert redacted(f"signing with {callback_secret} failed") == "signing with *** failed"

"""What a command prints holds no secret the process holds.

The log lines and the failures handed to Temporal were masked
(:mod:`curaflow.observability.secrets`), but a command's own output was not: its error
line quotes a library's exception (``the ledger … could not be reached: OSError: …``), a
table quotes a receiver's answer, ``--json`` prints the rows as they are, and an exception
no command caught printed its traceback. A library that quotes the URL or the header it
was given — a ``DATABASE_URL`` with its password, a webhook URL with its token, the
Telegram Bot API URL with the bot's token — put the secret on the operator's terminal and
in whatever log the command's output went to (until 2026-12-07, failed first:
:func:`test_a_commands_error_quoting_a_librarys_words_holds_no_configured_secret`).
Every string a command prints goes through the one mask now: the console's
(:func:`curaflow.observability.console.text_console`), the plain lines' (``print_text``)
and ``--json``'s (``print_json``: each text masked before the JSON is written); and
``curaflow``'s entry point masks a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from rich.table import Table
from rich.text import Text
from typer.testing import CliRunner

from curaflow.cli import common
from curaflow.cli.app import app
from curaflow.cli.common import EXIT_LEDGER_UNREACHABLE
from curaflow.observability.console import text_console
from curaflow.observability.secrets import MASK, hold

#: Secrets no other test writes (held for the life of the test process).
DB_PASSWORD = "pgPassw0rd-Vn4Qx8Lz2K"
BOT_TOKEN = "7345920011:AAH-bOtT0k3n-Lm2Vx9Kb4Nw6Rt8Yz"
HOOK_TOKEN = "hK7t0k3nRq9Wm2Lx5Vb8Nc3J"


def configured(tmp_path: Path) -> dict[str, str]:
    """A configuration holding the three secrets (a Telegram route's bot token, a webhook
    route's URL token); the ledger's password is in ``DATABASE_URL``. Returns the
    command's environment."""
    path = tmp_path / "curaflow.toml"
    routes = {
        "chat": {"kind": "telegram", "bot_token": BOT_TOKEN, "chat_id": "@curaflow_test"},
        "hook": {
            "kind": "webhook",
            "url": f"https://hooks.example/in?token={HOOK_TOKEN}",
            "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        },
        "out": {"kind": "directory", "path": str(tmp_path / "out")},
    }
    path.write_text(tomli_w.dumps({"state_dir": str(tmp_path / "state"), "routes": routes}))
    return {"CURAFLOW_CONFIG": str(path), "DATABASE_URL": f"postgresql://curaflow:{DB_PASSWORD}@127.0.0.1:1/curaflow"}


def library_words() -> str:
    """What a library says that quotes what it was given: the three secrets."""
    return (
        f"cannot reach postgresql://curaflow:{DB_PASSWORD}@127.0.0.1:1/curaflow; last request "
        f"https://api.telegram.org/bot{BOT_TOKEN}/sendMessage and https://hooks.example/in?token={HOOK_TOKEN}"
    )


def no_secret_in(output: str) -> None:
    for secret in (DB_PASSWORD, BOT_TOKEN, HOOK_TOKEN):
        assert secret not in output, output
        assert secret[:12] not in output, output  # nor a piece of it (a folded line)


def test_a_commands_error_quoting_a_librarys_words_holds_no_configured_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``refusals list`` whose ledger refused with words quoting the secrets: its one line
    said them whole."""

    async def refused(*args: object, **kwargs: object) -> object:
        raise ConnectionRefusedError(library_words())

    monkeypatch.setattr(common, "create_pool", refused)
    for name in ("TEMPORAL_ADDRESS", "CURAFLOW_SECRETS_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["refusals", "list"], env=configured(tmp_path))
    assert result.exit_code == EXIT_LEDGER_UNREACHABLE, result.output
    assert "the ledger" in result.output and "ConnectionRefusedError" in result.output, result.output
    assert "api.telegram.org" in result.output and "hooks.example" in result.output, result.output
    assert MASK in result.output, result.output
    no_secret_in(result.output)


def test_a_table_cell_folded_on_a_narrow_terminal_holds_no_piece_of_a_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A table folds a word wider than its column onto the next lines: the pieces of a
    webhook URL quoted by a receiver's answer were none of them the secret, and none masked."""
    configured(tmp_path)
    from curaflow.config import load_settings

    load_settings(tmp_path / "curaflow.toml")
    console = text_console(width=40, stderr=False)
    table = common.operator_table("route", "answer")
    table.add_row("hook", f"HTTP 401: {library_words()}")
    console.print(table)
    out = capsys.readouterr().out
    assert "hook" in out and "HTTP 401" in out, out
    no_secret_in(out.replace("│", "").replace("\n", "").replace(" ", ""))


def test_a_styled_text_loses_its_secret_and_keeps_its_styles(capsys: pytest.CaptureFixture[str]) -> None:
    secret = "styledSecret-Qw8Lm3Vz7Kp"
    hold(secret)
    console = text_console(width=200, force_terminal=True, color_system="truecolor")
    console.print(Text.assemble(("job ", "bold"), (f"abc {secret} def", "red"), " end"))
    out = capsys.readouterr().out
    assert secret not in out and MASK in out, out
    assert "\x1b[1m" in out and "\x1b[31m" in out, out  # bold and red both still there
    console.print(Table())  # a renderable with no text of its own prints as before


def test_a_plain_line_a_command_prints_holds_no_secret(capsys: pytest.CaptureFixture[str]) -> None:
    """A prompt, an exit message: printed as they are (no console), and were not masked."""
    from curaflow.observability.console import print_text

    secret = "plainSecret-Vb3Nm5KQx7Wq"
    hold(secret)
    print_text(f"curaflow worker: refused by {secret}", err=True)
    assert capsys.readouterr().err == f"curaflow worker: refused by {MASK}\n"


@pytest.mark.parametrize(
    ("secret", "said"),
    [
        # a secret beginning with a letter JSON escapes (`n`), its other letters after a
        # line break in the text: the JSON text `\nQ7x…` holds it, and a mask of the text
        # would take the `n` of `\n`, leaving a lone backslash
        ("nQ8xWq2Lp9Vc", "answered:\nQ8xWq2Lp9Vc and nQ8xWq2Lp9Vc"),
        ('json"Secret\\Vb3Nm5KQx7Wq', 'HTTP 401: json"Secret\\Vb3Nm5KQx7Wq'),
        ('pässw"Qx8Wq2', 'grant pässw"Qx8Wq2 refused'),
    ],
    ids=["after-a-line-break", "quote-and-backslash", "non-ascii-and-quote"],
)
@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_a_json_a_command_prints_holds_no_secret_and_stays_json(
    secret: str, said: str, ensure_ascii: bool, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--json``'s rows and bodies (``refusals list --json``: a receiver's answer) were
    printed as they are, unmasked; each text is masked before the JSON is written, so the
    line stays JSON whatever the secret's characters, and numbers stay as written."""
    from curaflow.observability import secrets
    from curaflow.observability.console import print_json

    monkeypatch.setattr(secrets, "_held", ())  # what this test holds is forgotten after it
    hold(secret)
    print_json([{"answer": said, "n": 12, said: None}], indent=2, ensure_ascii=ensure_ascii)
    [row] = json.loads(capsys.readouterr().out)
    assert not [text for text in [*row, row["answer"]] if secret in text], row
    assert MASK in row["answer"], row
    assert row["n"] == 12, row


def test_a_traceback_no_command_caught_holds_no_secret(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An exception no command caught left ``curaflow`` as Python's traceback, its words
    whole; it still does (a bug shows where it is), masked, with exit status 1."""
    from curaflow.cli import app as app_module
    from curaflow.cli import main as entry

    secret = "tracebackSecret-Jd93hTQ2mVx0"
    hold(secret)

    def broken() -> None:
        raise RuntimeError(f"a library quoting {secret}")

    class Left(Exception):
        pass

    def exit_(code: int) -> Any:
        raise Left(code)

    monkeypatch.setattr(app_module, "app", broken)
    monkeypatch.setattr(entry.os, "_exit", exit_)
    monkeypatch.setattr(entry.sys, "argv", ["curaflow", "status", "x"])
    with pytest.raises(Left) as left:
        entry.main()
    assert left.value.args == (1,)
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: a library quoting" in err, err
    assert secret not in err and MASK in err, err


def test_no_command_prints_but_through_the_mask() -> None:
    """A command prints through its console or :func:`print_text`; a bare ``print``,
    ``typer.echo`` or ``sys.stdout.write`` under ``curaflow/cli`` would write a secret
    whole again."""
    import ast

    import curaflow.cli

    bare: list[str] = []
    for path in sorted(Path(curaflow.cli.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            called = ast.unparse(node.func)
            if called in ("print", "typer.echo", "typer.secho", "click.echo", "sys.stdout.write", "sys.stderr.write"):
                bare.append(f"{path.name}:{node.lineno} {called}")
    assert bare == [], bare

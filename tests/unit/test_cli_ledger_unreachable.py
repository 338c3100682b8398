"""A command that needs the ledger and cannot reach it says so in one line, within the
configured bounds, and exits with its documented status — never a traceback.

Every ledger command (``refusals``, ``unavailable``, ``frontiers``, ``accounts``,
``routes``, ``prune``, ``schedules misses``) printed asyncio's traceback ending in
``ConnectionRefusedError`` (a PostgreSQL that is down) or a bare ``TimeoutError`` (one
that takes the connection and never answers) and exited 1 — the status that
``accounts resume`` / ``refusals clear`` … give for "nothing to resume", so a script read
an outage as "nothing there"; and they waited the default bounds, whatever
``database.connect_timeout_ms`` said. ``curaflow run`` did the same (its ledger is opened
before Temporal). An operator's finding: ``DATABASE_URL`` pointing at a ledger that is
down.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
import typer
from typer.testing import CliRunner

from curaflow.cli import common
from curaflow.cli.app import app
from curaflow.cli.common import EXIT_LEDGER_UNREACHABLE
from curaflow.config import load_settings
from curaflow.devstack.ports import free_port

#: Every command that only needs the ledger, with arguments that would otherwise work.
LEDGER_COMMANDS = [
    ["refusals", "list"],
    ["refusals", "clear", "out", "123"],
    ["unavailable", "list"],
    ["unavailable", "clear"],
    ["frontiers", "list"],
    ["frontiers", "reset", "--all"],
    ["accounts", "list"],
    ["accounts", "resume", "default"],
    ["routes", "list"],
    ["routes", "resume", "out"],
    ["prune", "--older-than-days", "30"],
    ["prune", "--older-than-days", "30", "--dry-run", "--json"],
    ["schedules", "misses"],
]


@contextlib.contextmanager
def silent_postgres() -> Iterator[int]:
    """A port whose listener takes connections and never answers (a hung PostgreSQL)."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", free_port()))
        silent.listen(64)
        yield silent.getsockname()[1]


def invoke(args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, **env: str) -> object:
    for name in ("CURAFLOW_CONFIG", "TEMPORAL_ADDRESS", "CURAFLOW_SECRETS_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return CliRunner().invoke(app, args, env={"DATABASE_URL": url, **env})


def one_line_about_the_ledger(output: str) -> None:
    assert "Traceback" not in output, output
    lines = [line for line in output.splitlines() if "the ledger" in line]
    assert len(lines) == 1, output
    assert "DATABASE_URL" in lines[0], output


@pytest.mark.parametrize("args", LEDGER_COMMANDS, ids=" ".join)
def test_a_ledger_command_facing_a_ledger_that_is_down_says_so_and_exits_its_status(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = invoke(args, tmp_path, monkeypatch, f"postgresql://curaflow@127.0.0.1:{free_port()}/curaflow")
    assert result.exit_code == EXIT_LEDGER_UNREACHABLE, result.output  # type: ignore[attr-defined]
    one_line_about_the_ledger(result.output)  # type: ignore[attr-defined]
    assert "ConnectionRefusedError" in result.output  # type: ignore[attr-defined]


@pytest.mark.parametrize("args", [["accounts", "list"], ["prune", "--older-than-days", "30"]], ids=" ".join)
def test_a_ledger_command_facing_a_silent_ledger_gives_up_within_the_connect_bound(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with silent_postgres() as port:
        started = time.monotonic()
        result = invoke(
            args,
            tmp_path,
            monkeypatch,
            f"postgresql://curaflow@127.0.0.1:{port}/curaflow",
            CURAFLOW_DATABASE__CONNECT_TIMEOUT_MS="300",
            CURAFLOW_DATABASE__ACQUIRE_TIMEOUT_MS="300",
        )
        took = time.monotonic() - started
    assert result.exit_code == EXIT_LEDGER_UNREACHABLE, result.output  # type: ignore[attr-defined]
    one_line_about_the_ledger(result.output)  # type: ignore[attr-defined]
    assert "database.connect_timeout_ms" in result.output  # type: ignore[attr-defined]
    assert took < 4.5, took  # the defaults are 5 s to connect, 30 s to acquire


def test_curaflow_run_facing_a_ledger_that_is_down_says_so_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = invoke(
        ["run", "--tags", "a", "--timeout", "5"],
        tmp_path,
        monkeypatch,
        f"postgresql://curaflow@127.0.0.1:{free_port()}/curaflow",
        TEMPORAL_ADDRESS=f"127.0.0.1:{free_port()}",
    )
    assert result.exit_code == 1, result.output  # type: ignore[attr-defined]  # as for a Temporal that is down
    one_line_about_the_ledger(result.output)  # type: ignore[attr-defined]


class _Pool:
    """Stands for an opened pool: the command's calls fail as the test says."""

    closed = False

    async def close(self) -> None:
        self.closed = True


def _opens(monkeypatch: pytest.MonkeyPatch) -> _Pool:
    """Make ``open_ledger`` open a fake pool (returned) with nothing to migrate."""
    pool = _Pool()

    async def opened(*_args: object, **_kwargs: object) -> _Pool:
        return pool

    async def migrated(_pool: object) -> list[str]:
        return []

    monkeypatch.setattr(common, "create_pool", opened)
    monkeypatch.setattr(common, "migrate", migrated)
    return pool


@pytest.mark.parametrize(
    "gone",
    [
        asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
        asyncpg.exceptions.QueryCanceledError("canceling statement due to statement timeout"),
        ConnectionResetError(104, "Connection reset by peer"),
    ],
    ids=type,
)
def test_a_ledger_that_goes_away_under_the_command_is_said_in_one_line(
    gone: Exception, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pool = _opens(monkeypatch)

    async def command() -> None:
        async with common.open_ledger(load_settings(None), "postgresql://x@h/x", where="here", code=3):
            raise gone

    with pytest.raises(typer.Exit) as exited:
        asyncio.run(command())
    assert exited.value.exit_code == 3
    err = capsys.readouterr().err
    assert "the ledger (here) failed under the command" in err and "Traceback" not in err, err
    assert pool.closed


@pytest.mark.parametrize(
    "own", [PermissionError(13, "Permission denied"), ValueError("a bug"), asyncpg.exceptions.UniqueViolationError("x")]
)
def test_a_failure_that_is_no_ledger_outage_is_never_reported_as_one(
    own: Exception, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``prune`` deletes artifact folders: a refused file is no ledger outage (nor a bug,
    nor a refused statement) — it stays the error it is."""

    _opens(monkeypatch)

    async def command() -> None:
        async with common.open_ledger(load_settings(None), "postgresql://x@h/x", where="here", code=3):
            raise own

    with pytest.raises(type(own)):
        asyncio.run(command())


#: Passwords holding a character a URL reserves, written into ``DATABASE_URL`` without
#: percent-encoding — asyncpg then reads a piece of the password as the port ("/", "#")
#: or as the query ("?") and its error quotes that piece.
RESERVED_PASSWORDS = ["S3cr/3tPart", "S3cr#3tPart", "S3cr?3tPart"]


def pieces(password: str) -> list[str]:
    """Every piece of ``password`` between the characters a URL reserves."""
    return [piece for piece in password.replace("#", "/").replace("?", "/").split("/") if piece]


@pytest.mark.parametrize("password", RESERVED_PASSWORDS)
@pytest.mark.parametrize("args", [["refusals", "list"], ["api"]], ids=" ".join)
def test_a_database_url_asyncpg_cannot_read_is_said_without_a_piece_of_its_password(
    args: list[str], password: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Until 2026-12-07 the line quoted asyncpg's words, and they quote the piece of the URL
    they could not read: ``ValueError: invalid literal for int() with base 10: 'S3cr'`` — the
    password's start, on the operator's terminal and in the API's and the worker's logs."""
    result = invoke(
        args,
        tmp_path,
        monkeypatch,
        f"postgresql://curaflow:{password}@127.0.0.1:{free_port()}/curaflow",
        TEMPORAL_ADDRESS=f"127.0.0.1:{free_port()}",
        # a port of its own: `api` binds before it opens the ledger, and on a shared machine
        # the default 8080 may be taken ("cannot listen", no line about the ledger)
        CURAFLOW_API__PORT=str(free_port()),
    )
    output: str = result.output  # type: ignore[attr-defined]
    assert result.exit_code in (EXIT_LEDGER_UNREACHABLE, 2), output  # type: ignore[attr-defined]
    one_line_about_the_ledger(output)
    assert not [piece for piece in pieces(password) if piece in output], output
    assert "percent-encode" in output, output


#: DATABASE_URLs no retry can make work: asyncpg refuses each before any connection.
URLS_NEVER_USABLE = {
    "port-not-a-number": "postgresql://curaflow@127.0.0.1:fivefour/curaflow",
    "port-out-of-range": "postgresql://curaflow@127.0.0.1:99999/curaflow",
    "sslmode-unknown": "postgresql://curaflow@127.0.0.1:5432/curaflow?sslmode=sometimes",
}


@pytest.mark.parametrize("url", URLS_NEVER_USABLE.values(), ids=URLS_NEVER_USABLE.keys())
@pytest.mark.parametrize("args", [["refusals", "list"], ["accounts", "list"], ["schedules", "misses"]], ids=" ".join)
def test_a_database_url_asyncpg_cannot_use_is_a_configuration_error_not_an_outage(
    args: list[str], url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Until 2026-12-07 such a URL exited 3, "could not be reached" — the status a script
    reads as "the ledger is away, try again later" — though no later try can use it: it
    is the configuration's (exit 2, as every other setting that cannot work)."""
    result = invoke(args, tmp_path, monkeypatch, url)
    output: str = result.output  # type: ignore[attr-defined]
    assert result.exit_code == 2, output  # type: ignore[attr-defined]
    one_line_about_the_ledger(output)
    assert "could not be reached" not in output, output

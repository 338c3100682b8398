"""``curaflow run`` on the stack of a ``curaflow dev`` already running in the directory.

That stack's workers keep the configuration they started with; ``curaflow run`` admits
the job with its own. A route or a source its target names that those workers do not
know made the job retry ``configuration_mismatch`` until its deadline (a newcomer's
finding: the README's Telegram step, run with the replay's ``curaflow dev`` still up,
stayed ``delivering`` / ``channel: reserved`` for the whole ``--timeout``). It is refused
before anything is admitted, naming what the workers lack and what to do.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from curaflow.cli.app import app
from curaflow.config import load_settings
from curaflow.devstack.stack import STACK_FILE, StackInfo, read_stack_info, workers_know

TELEGRAM = (
    '[routes.channel]\nkind = "telegram"\nbot_token = "123456:ABC"\nchat_id = "@my_channel"\n\n'
    '[[targets]]\nid = "mine"\nquery = { tags = ["風景"] }\nroutes = ["channel"]\n'
)


def running_dev(tmp_path: Path, **known: object) -> None:
    """A ``stack.json`` of a live ``curaflow dev`` (this test's pid) whose workers know ``known``."""
    state = tmp_path / ".curaflow"
    state.mkdir()
    info = {"pid": os.getpid(), "temporal_address": "127.0.0.1:7233", "database_url": "postgresql://x", **known}
    (state / STACK_FILE).write_text(json.dumps(info))


@pytest.fixture
def nothing_admitted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from curaflow.cli import run as run_cli

    def started(*args: object, **kwargs: object) -> object:
        raise AssertionError("nothing may be admitted")

    monkeypatch.setattr(run_cli, "services", started)
    monkeypatch.chdir(tmp_path)
    for name in ("CURAFLOW_CONFIG", "TEMPORAL_ADDRESS", "DATABASE_URL", "CURAFLOW_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.usefixtures("nothing_admitted")
def test_a_route_the_running_dev_does_not_know_is_refused_before_admission(tmp_path: Path) -> None:
    running_dev(tmp_path, routes={"out": "directory"}, sources=["default"])
    config = tmp_path / "curaflow.toml"
    config.write_text(TELEGRAM)
    result = CliRunner().invoke(app, ["run", "--config", str(config)])
    assert result.exit_code == 2, result.output
    output = " ".join(result.output.split())  # the console wraps long lines
    assert f"pid {os.getpid()}" in output, output
    assert "route 'channel'" in output, output
    assert "--config" in output and "configuration_mismatch" in output, output


@pytest.mark.usefixtures("nothing_admitted")
def test_a_route_of_another_kind_and_an_unknown_source_are_named(tmp_path: Path) -> None:
    running_dev(tmp_path, routes={"channel": "discord"}, sources=["other"])
    config = tmp_path / "curaflow.toml"
    config.write_text(TELEGRAM)
    result = CliRunner().invoke(app, ["run", "--config", str(config)])
    assert result.exit_code == 2, result.output
    output = " ".join(result.output.split())
    assert "route 'channel' as a telegram route (theirs: discord)" in output, output
    assert "source 'default'" in output, output


def test_what_the_workers_know_is_what_the_stack_publishes(tmp_path: Path) -> None:
    config = tmp_path / "curaflow.toml"
    config.write_text(TELEGRAM)
    routes, sources = workers_know(load_settings(config))
    assert routes == {"channel": "telegram"}
    assert sources == ["default"]


def test_a_stack_file_with_fields_this_version_does_not_know_is_still_read(tmp_path: Path) -> None:
    """A ``stack.json`` written by a later version (a field more) is the running stack all
    the same: read as none, the command started a stack of its own and met the lock."""
    running_dev(tmp_path, routes={}, sources=[], written_by_a_later_version=True)
    info = read_stack_info(tmp_path / ".curaflow")
    assert isinstance(info, StackInfo) and info.pid == os.getpid()

"""Every ``curaflow`` command's ``--help`` reads as help for its user: no cross-reference
of the code's documentation leaks into it.

A command's docstring is its help text (typer, markdown mode), so a Sphinx role written
there for the code's readers (``:class:`curaflow.protocol…``` in ``submit``,
``:mod:`curaflow.observability.supervision``` in ``api``) was printed as
``:class:curaflow.protocol.models.tasks.CandidateSearchParams`` to someone asking how to
submit a job (a newcomer's finding). The rule for every command: the help names what the
user types and sees; the code's sources go in comments.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from curaflow.cli.app import app

#: A Sphinx cross-reference role as it survives typer's markdown (``:class:`X``` → ``:class:X``).
SPHINX_ROLE = re.compile(r":(?:class|mod|func|meth|attr|data|exc|obj|ref):")


def _command_paths(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and subcommand of ``command`` (typer's command, on its own copy of
    click), as the words that name it."""
    paths = [path]
    subcommands: dict[str, Any] = getattr(command, "commands", {})
    for name, sub in sorted(subcommands.items()):
        paths.extend(_command_paths(sub, (*path, name)))
    return paths


COMMANDS = _command_paths(typer.main.get_command(app))


def test_the_walk_reaches_the_commands_the_readme_names() -> None:
    """The walk below is not empty: it reaches nested verbs as well as top-level ones."""
    assert ("submit",) in COMMANDS
    assert ("api",) in COMMANDS
    assert ("pixiv", "login") in COMMANDS
    assert ("schedules", "sync") in COMMANDS


@pytest.mark.parametrize("words", COMMANDS, ids=lambda words: " ".join(words) or "curaflow")
def test_help_shows_no_cross_reference_of_the_code(words: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, [*words, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert not SPHINX_ROLE.search(result.output), result.output


def _option_names(words: tuple[str, ...]) -> list[str]:
    """Every name of every option of the command ``words`` names (``--idempotency-key``,
    ``--key``, ``-t`` …)."""
    command: Any = typer.main.get_command(app)
    for word in words:
        command = command.commands[word]
    return [name for param in command.params for name in (*param.opts, *param.secondary_opts)]


@pytest.mark.parametrize("words", COMMANDS, ids=lambda words: " ".join(words) or "curaflow")
def test_help_at_80_columns_shows_every_option_name_whole(words: tuple[str, ...]) -> None:
    """``curaflow submit --help`` at 80 columns showed ``--idempotency-key,--k…``: typer's
    type column (``<list[str]>``, ``<int range> [x>=1000]``) left the names too little room
    and rich cut them (a newcomer's finding). Every name of every option reads whole."""
    result = CliRunner().invoke(app, [*words, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    for name in _option_names(words):
        assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", result.output), (name, result.output)

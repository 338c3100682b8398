"""A test's logging setup ends with the test (``tests/conftest.py`` ``logging_kept``).

A command run in-process (typer's ``CliRunner``) calls
:func:`~curaflow.observability.logs.configure_logging`: the root logger's one handler is
then bound to the runner's stderr, which the runner closes, and structlog caches every
logger first used under that configuration (``cache_logger_on_first_use``). Until
2026-12-07 both outlived the test: a later test's ``structlog.testing.capture_logs`` saw
nothing of a module's logger first used after the command (``curaflow.api``'s: the outcome
line of ``test_ledger_outage.py::test_a_failed_read_is_not_logged_as_a_rejected_job``,
after ``test_cli_errors.py``), and its lines went to the closed stream ("I/O operation on
closed file").

The two tests run in this order (one module runs in one process: ``--dist loadfile``).
"""

from __future__ import annotations

import io
import logging
import sys

import pytest
from structlog.testing import capture_logs

from curaflow.observability.logs import configure_logging, get_logger

#: A module's logger, as the product's modules hold theirs (``log = get_logger(__name__)``).
log = get_logger("curaflow.tests.logging_per_test")


def a_command_in_process(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    """What a command run by ``CliRunner`` does to logging: configured on the runner's
    stderr (returned, closed when the runner is done)."""
    stream = io.StringIO()
    with monkeypatch.context() as patched:
        patched.setattr(sys, "stderr", stream)
        configure_logging("INFO", json_lines=True)
    return stream


def test_commands_in_process_configure_logging_on_streams_they_then_close(monkeypatch: pytest.MonkeyPatch) -> None:
    first = a_command_in_process(monkeypatch)
    log.info("tests.command_logged")  # first use: structlog caches the logger with this configuration
    assert '"event": "tests.command_logged"' in first.getvalue()
    first.close()
    a_command_in_process(monkeypatch).close()  # a second command: a configuration of its own


def test_the_next_test_captures_a_modules_logger_and_writes_to_no_closed_stream() -> None:
    assert all(
        not (isinstance(h, logging.StreamHandler) and getattr(h.stream, "closed", False))
        for h in logging.getLogger().handlers
    ), logging.getLogger().handlers
    with capture_logs() as logs:
        log.info("tests.next_test_logged", step=2)
    assert [entry["event"] for entry in logs] == ["tests.next_test_logged"], logs

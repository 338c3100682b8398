"""A test's logging setup ends with the test: the process's logging is put back after each.

A command run in-process (typer's ``CliRunner``) and the tests of the log lines call
:func:`curaflow.observability.logs.configure_logging`, which sets process-wide state: the
root logger's one handler (bound to the ``sys.stderr`` of that moment — the runner's,
closed when its command ends), the root's level, the levels of the loggers it quiets,
the Temporal loggers' ``*_info_on_message``, and structlog's configuration with
``cache_logger_on_first_use``: a module's logger (``log = get_logger(...)``) first used
under it keeps that configuration's processors for the rest of the process. Until
2026-12-07 all of it outlived the test: a later test's ``structlog.testing.capture_logs``
(which changes the processors configured at its start, in place) saw nothing of
``curaflow.api``'s logger, its lines went to the closed stream ("I/O operation on closed
file"), and whether a test passed hung on which tests its process ran before it
(``test_ledger_outage.py`` after ``test_cli_errors.py``;
``tests/unit/test_logging_per_test.py``).

:func:`pytest_runtest_protocol` puts all of it back after every test, around the test's
setup, call and teardown (outside pytest's own per-phase log capture handlers, which come
and go inside it). Cheap: a few reads per test; a restore only when the test changed
something, and for a changed structlog configuration one pass over the loaded modules
(~5 ms) to drop the cached loggers.

A plugin of its own, registered by ``tests/conftest.py``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Generator
from typing import Any

import pytest
import structlog

#: The loggers :func:`~curaflow.observability.logs.configure_logging` quiets (their levels).
QUIETED = ("httpx", "httpcore", "asyncio")

#: The class of the loggers :func:`structlog.get_logger` returns (a lazy proxy).
_LAZY = type(structlog.get_logger())


def _temporal_loggers() -> list[tuple[Any, str]]:
    """The Temporal SDK's loggers and the flag of each that ``configure_logging`` sets."""
    from temporalio import activity, workflow

    return [(activity.logger, "activity_info_on_message"), (workflow.logger, "workflow_info_on_message")]


def _uncache_loggers() -> None:
    """Drop every module logger's cached configuration: its next line is assembled from the
    configuration of that moment again. structlog caches by setting the proxy's own
    ``bind`` (``BoundLoggerLazyProxy.bind``, structlog 26); the product's loggers are the
    modules' (``log = get_logger(...)``)."""
    for module in list(sys.modules.values()):
        names = getattr(module, "__dict__", None)
        if names is None:
            continue
        for value in list(names.values()):
            if type(value) is _LAZY and "bind" in vars(value):
                del value.bind


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """Run ``item``'s setup, call and teardown, then put the process's logging back as it was."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    quieted = [(logging.getLogger(name), logging.getLogger(name).level) for name in QUIETED]
    config, configured = structlog.get_config(), structlog.is_configured()
    flags = [(logger, flag, getattr(logger, flag)) for logger, flag in _temporal_loggers()]
    try:
        return (yield)
    finally:
        if root.handlers != handlers:
            root.handlers = handlers
        if root.level != level:
            root.setLevel(level)
        for logger, was in quieted:
            if logger.level != was:
                logger.setLevel(was)
        for logger, flag, value in flags:
            setattr(logger, flag, value)
        now = structlog.get_config()
        if structlog.is_configured() != configured or any(now[key] is not config[key] for key in config):
            if configured:
                structlog.configure(**config)
            else:
                structlog.reset_defaults()
            _uncache_loggers()

"""The suite's timeout (pytest-timeout, ``pyproject.toml``) bounds a test's teardown too,
when its call failed.

pytest-timeout arms one timer over a test's setup, call and teardown, and cancels it in
``pytest_exception_interact`` — the hook pytest calls for every failed phase, meant to
stop the timer while pdb's post-mortem runs. A test that failed in its call (or setup)
therefore left its teardown with no timer at all: a fixture finalizer that waited for ever
(2026-12-07: ``test_job_size``'s worker shutdown behind a run whose eviction the SDK could
not finish) hung the whole run, past the 300 s, the process never ended.

This plugin arms pytest-timeout's own timer again as the teardown begins, for what is left
of the test's ``timeout`` (at least :data:`TEARDOWN_FLOOR_S`): past it the process ends
as for any hung test (the stacks dumped; under ``-n`` xdist names the test as its
process's crash). ``timeout_func_only`` (a timer over the call alone) is left as it is;
under pdb the timer does nothing (pytest-timeout's own debugger detection).

A plugin of its own (registered by ``tests/conftest.py``), light to import: the test of a
hung run (``tests/unit/test_suite_timeout.py``) runs it in a run of its own.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

#: Seconds a teardown is given at least when its test failed with its ``timeout`` (nearly)
#: spent: enough for a teardown that ends (terminating the test's runs, stopping its
#: workers), not a wait on one that never will.
TEARDOWN_FLOOR_S = 30.0

#: Per test: (pytest-timeout's settings, when its timer was first armed — ``time.monotonic()``).
_ARMED = pytest.StashKey[tuple[Any, float]]()
#: Per test: its timer was cancelled before its teardown (a failed phase).
_CANCELLED = pytest.StashKey[bool]()


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # without pytest-timeout the hook is unknown
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> None:
    """Note the first arming of ``item``'s timer (pytest-timeout's own arms it, after this)."""
    if _ARMED not in item.stash:
        item.stash[_ARMED] = (settings, time.monotonic())
    item.stash[_CANCELLED] = False


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_timeout_cancel_timer(item: pytest.Item) -> None:
    """Note that ``item``'s timer was cancelled (pytest-timeout's own cancels it, after this)."""
    item.stash[_CANCELLED] = True


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Arm ``item``'s timer again for its teardown if a failed phase cancelled it: for what
    is left of its ``timeout``, at least :data:`TEARDOWN_FLOOR_S` seconds. pytest-timeout's
    ``pytest_runtest_protocol`` cancels it once the teardown has ended."""
    armed = item.stash.get(_ARMED, None)
    if armed is None or not item.stash.get(_CANCELLED, False):
        return  # no timer (none set, or over the call alone), or still running
    settings, started = armed
    if getattr(settings, "func_only", False):
        return
    left_s = max(settings.timeout - (time.monotonic() - started), min(settings.timeout, TEARDOWN_FLOOR_S))
    item.config.pluginmanager.hook.pytest_timeout_set_timer(item=item, settings=settings._replace(timeout=left_s))

"""A hung test ends the suite's run: it fails, named, within its timeout — the run never hangs.

The suite's ``timeout`` (``pyproject.toml``, pytest-timeout) fired by SIGALRM raises
``Failed`` in the main thread once: an async test whose teardown then waits for ever (a
worker's shutdown behind a stuck activity, an event never set) hung the whole run — CI
printed the ``F`` and nothing more until its own 5 400 s limit (2026-12-06). The suite's
method is a timer thread that ends the process: under ``pytest -n`` the hung test is
reported as its worker's crash, named, and xdist goes on with a new worker. pytest-timeout
cancels that timer once a test has failed (``pytest_exception_interact``, for pdb): the
suite's ``tests/timeouts.py`` arms it again over the failed test's teardown (2026-12-07).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: The suite's pytest plugins a hung test's run does not involve (its configuration's
#: asyncio, timeout and xdist stay): switched off in that run.
UNRELATED_PLUGINS = ("schemathesis", "hypothesispytest", "anyio")

HUNG = """
import asyncio

import pytest


@pytest.fixture
async def stuck():
    yield
    await asyncio.Event().wait()  # a teardown that never ends


async def test_hung_in_call_and_teardown(stuck):
    await asyncio.sleep(1000)
"""


def test_a_test_hung_in_its_call_and_its_teardown_fails_the_run_instead_of_hanging_it(tmp_path: Path) -> None:
    (tmp_path / "test_hung.py").write_text(HUNG)
    config = ["-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path), "-p", "no:cacheprovider"]
    # Without the plugins the hung test has nothing to do with: loading schemathesis and
    # hypothesis cost ~2.5 s of CPU in each of the run's two processes (7.9 → 1.4 s in all).
    config += [flag for plugin in UNRELATED_PLUGINS for flag in ("-p", f"no:{plugin}")]
    run = subprocess.run(
        # the project's configuration (its asyncio mode, its timeout method), a short timeout, as CI: -n
        [sys.executable, "-m", "pytest", *config, "-n", "1", "--timeout", "2", "-q", str(tmp_path / "test_hung.py")],
        capture_output=True,
        text=True,
        timeout=60,  # the old method: the run never ended (this raises TimeoutExpired)
        cwd=tmp_path,
    )
    assert run.returncode != 0, run.stdout
    assert "test_hung_in_call_and_teardown" in run.stdout + run.stderr
    assert "crashed" in run.stdout, run.stdout


QUICK = """
def test_1():
    pass


def test_2():
    pass
"""

HANGS_SECOND = """
import threading


def test_1():
    pass


def test_hang():
    threading.Event().wait()


def test_3():
    pass
"""


def test_a_run_whose_process_a_hung_test_ended_runs_every_other_test_and_ends(tmp_path: Path) -> None:
    # With the suite's scheduling (whole modules, tests.scheduling), xdist 3.8 handed the
    # hung test out again to the process that replaced the crashed one, and that process,
    # given a module of one test left, waited for a second that never came: the run hung.
    for name in "abdef":
        (tmp_path / f"test_{name}.py").write_text(QUICK)
    (tmp_path / "test_c.py").write_text(HANGS_SECOND)
    (tmp_path / "conftest.py").write_text("from tests.scheduling import pytest_xdist_make_scheduler  # noqa: F401\n")
    config = ["-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path), "-p", "no:cacheprovider"]
    config += [flag for plugin in UNRELATED_PLUGINS for flag in ("-p", f"no:{plugin}")]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *config, "-n", "3", "--timeout", "2", "-q", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=90,  # before: the run never ended (this raises TimeoutExpired)
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 failed, 12 passed" in run.stdout, run.stdout
    assert "test_c.py::test_hang" in run.stdout, run.stdout


FAILS_THEN_HANGS_IN_TEARDOWN = """
import asyncio

import pytest


@pytest.fixture
async def stuck():
    yield
    await asyncio.Event().wait()  # a teardown that never ends (a worker's shutdown behind a stuck run)


async def test_failed_then_hung_in_teardown(stuck):
    assert False, "the test's own wait ran out"
"""


def test_a_test_that_failed_and_then_hung_in_its_teardown_fails_the_run_instead_of_hanging_it(
    tmp_path: Path,
) -> None:
    # pytest-timeout cancels its timer in pytest_exception_interact (meant for pdb's
    # post-mortem): a test that failed in its call left its teardown with no timer, and a
    # teardown that waited for ever (test_job_size's worker shutdown behind a run its
    # eviction could not end) hung the run — past the 300 s, the process never ended.
    (tmp_path / "test_hung.py").write_text(FAILS_THEN_HANGS_IN_TEARDOWN)
    (tmp_path / "conftest.py").write_text(
        "from tests.timeouts import pytest_runtest_teardown, pytest_timeout_cancel_timer, pytest_timeout_set_timer\n"
    )
    config = ["-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path), "-p", "no:cacheprovider"]
    config += [flag for plugin in UNRELATED_PLUGINS for flag in ("-p", f"no:{plugin}")]
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", *config, "-n", "1", "--timeout", "2", "-q", str(tmp_path / "test_hung.py")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,  # its xdist process with it: a hung run is ended whole
    )
    try:
        stdout, stderr = run.communicate(timeout=45)  # before: the run never ended (TimeoutExpired)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.communicate()
    assert run.returncode != 0, stdout
    assert "test_hung.py::test_failed_then_hung_in_teardown" in stdout, stdout + stderr
    assert "crashed" in stdout, stdout

"""Child processes of the embedded stack: nothing it started outlives it.

Workers and the Temporal dev server are its children with the kernel's parent-death
signal (:func:`die_with_parent`); the embedded PostgreSQL, which ``pg_ctl`` detaches, is
tied to it by a watchdog (:func:`tie_to_this_process`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from pathlib import Path

from curaflow.paths import open_private

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Ask the kernel to SIGTERM this (child) process when its parent dies (Linux)."""
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def tie_to_this_process(pid: int, *, grace_s: float = 10.0) -> subprocess.Popen[bytes]:
    """Start a watchdog (:mod:`curaflow.devstack.watchdog`) that stops process ``pid`` —
    SIGINT, then SIGKILL after ``grace_s`` — as soon as this process dies, however it dies
    (SIGKILL of it or of its process group included). For a process the stack started but
    that is not its child (the embedded PostgreSQL's postmaster, detached by ``pg_ctl``).

    Returns:
        The watchdog (it ends by itself once ``pid`` is gone).
    """
    import psutil

    created = psutil.Process(pid).create_time()
    return subprocess.Popen(
        [sys.executable, "-m", "curaflow.devstack.watchdog", str(os.getpid()), str(pid), str(created), str(grace_s)],
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=die_with_parent,
    )


class WorkerProcess:
    """A ``python -m curaflow.process.worker`` child process.

    Args:
        env: the environment (``TEMPORAL_ADDRESS``, ``DATABASE_URL``, ``CURAFLOW_*``).
        log_file: where its output goes (None → inherit).
        cwd: working directory (relative paths in the config resolve against it).
        wrapper: a command the worker runs under, which ends by exec-ing its arguments
            (``unshare -m …``: a mount namespace of its own), so the child's pid stays
            the worker's.
    """

    def __init__(
        self,
        env: dict[str, str],
        log_file: Path | None = None,
        cwd: Path | None = None,
        wrapper: list[str] | None = None,
    ) -> None:
        self.env = env
        self.log_file = log_file
        self.cwd = cwd
        self.wrapper = wrapper or []
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The child's pid while it runs."""
        return self.process.pid if self.process else None

    def start(self) -> WorkerProcess:
        """Spawn the worker (it is sent SIGTERM if this process dies)."""
        out = open_private(self.log_file) if self.log_file else None
        self.process = subprocess.Popen(
            [*self.wrapper, sys.executable, "-m", "curaflow.process.worker"],
            env=self.env,
            cwd=self.cwd,
            stdout=out,
            stderr=subprocess.STDOUT if out else None,
            preexec_fn=die_with_parent,
        )
        return self

    def alive(self) -> bool:
        """True while the child runs."""
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the worker (a crash, for fault tests) and reap it."""
        if self.alive():
            assert self.process is not None
            self.process.kill()
            self.process.wait(10)

    def pause(self) -> None:
        """SIGSTOP the worker: hung, not dead (it keeps its connections)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT a paused worker."""
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM (after SIGCONT, should it be paused), wait up to ``timeout_s``, then SIGKILL."""
        if not self.alive():
            return
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


def child_env(**overrides: str) -> dict[str, str]:
    """This process's environment plus ``overrides`` (for a child of the stack)."""
    env = dict(os.environ)
    env.update(overrides)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env

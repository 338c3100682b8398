"""Embedded PostgreSQL for the ledger (the ``pgserver`` package; no download, no Docker).

The data directory lives in the state directory, so the ledger — and with it "never
deliver a work twice to one route" — survives between runs. The server listens on a
unix socket only; the URL carries the socket directory (``?host=/dir``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
import warnings
from pathlib import Path
from typing import Any, Literal

from curaflow.paths import private_dir

#: Why the embedded PostgreSQL cannot start: the ``[embedded]`` extra's pgserver is absent.
PGSERVER_MISSING = (
    "the embedded PostgreSQL (pgserver) is not installed: pip install 'curaflow[embedded]' "
    "(or set DATABASE_URL and TEMPORAL_ADDRESS)"
)


class EmbeddedPostgres:
    """A PostgreSQL server on ``pgdata`` for this process's lifetime (or until :meth:`stop`).

    ``pgserver`` starts the postmaster with ``pg_ctl``, which detaches it, and stops it only
    at a clean exit of the last process holding it. Whatever ends this process instead
    (SIGKILL, of it or of its process group), the server must not outlive it: unless
    another live process shares it, a watchdog is tied to this process
    (:func:`curaflow.devstack.processes.tie_to_this_process`) and stops the postmaster
    when this process dies. A server left running by a process that died before (its
    holders are all gone) is adopted the same way.

    Args:
        pgdata: data directory (created and initialised on first use).
        tied: tie the server to this process (``curaflow dev`` and ``curaflow run``).
    """

    def __init__(self, pgdata: Path, *, tied: bool = True) -> None:
        self.pgdata = pgdata
        self.tied = tied
        self._server: Any = None
        self.watchdog: subprocess.Popen[bytes] | None = None

    def start(self) -> str:
        """Start (or join) the server; returns its ``postgresql://`` URL.

        Raises:
            RuntimeError: the ``[embedded]`` extra (pgserver) is not installed.
        """
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                import pgserver
            except ImportError:
                raise RuntimeError(PGSERVER_MISSING) from None

        logging.getLogger("pgserver").setLevel(logging.WARNING)
        private_dir(self.pgdata.parent)
        self._server = pgserver.get_server(self.pgdata, cleanup_mode="stop")
        if self.tied:
            self._tie()
        return str(self._server.get_uri())

    def _tie(self) -> None:
        """Tie the postmaster to this process unless another live process holds it too;
        forget the holders that died (their handles would keep the server up for ever)."""
        import psutil

        from curaflow.devstack.processes import tie_to_this_process

        holders = self._server.global_process_id_list
        with self._server._lock:
            alive = [pid for pid in holders.get() if pid == os.getpid() or psutil.pid_exists(pid)]
            holders.put(alive)
        if alive != [os.getpid()]:
            return  # shared with a live process: the last one to leave stops it
        pid = self._server.get_pid()
        if pid is not None:
            self.watchdog = tie_to_this_process(pid)

    def stop(self) -> None:
        """Release this process's handle; the server stops when no other process holds one."""
        if self._server is not None:
            self._server.cleanup()
            self._server = None
        if self.watchdog is not None:
            try:  # it ends by itself once the server is gone
                self.watchdog.wait(5)
            except subprocess.TimeoutExpired:  # the server stays for another holder: leave it theirs
                self.watchdog.kill()
                self.watchdog.wait(5)
            self.watchdog = None


class RestartablePostgres:
    """A PostgreSQL server on ``pgdata`` that can be stopped, killed and started again at
    the same URL (the unix-socket directory is fixed by the data directory).

    The one implementation used by the fault tests (``tests/services.py``: each test's own
    server, deleted afterwards) and the chaos suite (``bench/chaos``: kept under the run's
    folder). Runs the binaries the ``pgserver`` package ships; nothing to download.

    Args:
        pgdata: the data directory (initialised by the first :meth:`start`).
        cleanup_mode: what :meth:`close` does — ``"stop"`` the server and keep the data
            directory, or ``"delete"`` both.
    """

    def __init__(self, pgdata: Path, *, cleanup_mode: Literal["stop", "delete"] = "stop") -> None:
        self.pgdata = pgdata
        self.cleanup_mode = cleanup_mode
        self.url = ""
        self._server: Any = None

    def start(self) -> str:
        """Initialise (first call) or restart the server; returns its ``postgresql://`` URL.

        Raises:
            RuntimeError: a restart came up at another address.
        """
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pgserver

        if self._server is None:
            self.pgdata.parent.mkdir(parents=True, exist_ok=True)
            self._server = pgserver.get_server(self.pgdata, cleanup_mode=self.cleanup_mode)
        else:
            self._server._postmaster_info = None
            self._server.ensure_postgres_running()
        url = str(self._server.get_uri())
        if self.url and url != self.url:
            raise RuntimeError(f"PostgreSQL came back at another address: {url} (was {self.url})")
        self.url = url
        return url

    def stop(self, mode: str = "fast") -> None:
        """``pg_ctl -m <mode> stop``: ``fast`` rolls back and disconnects every session."""
        from pgserver._commands import pg_ctl  # type: ignore[attr-defined]

        pg_ctl(["-m", mode, "-w", "stop"], pgdata=self.pgdata, user=self._server.system_user, timeout=30)

    def kill(self) -> None:
        """SIGKILL the postmaster (a crash) and wait until it and its backends are gone."""
        import psutil

        pid = self._server.get_pid()
        children = []
        with contextlib.suppress(psutil.NoSuchProcess):
            children = psutil.Process(pid).children(recursive=True)
        os.kill(pid, signal.SIGKILL)
        psutil.wait_procs([*children], timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except OSError:
                break
            time.sleep(0.05)

    def pause(self) -> list[int]:
        """SIGSTOP the postmaster and every backend (a hung server: sockets open, no answer).

        Returns:
            The stopped pids (give them to :meth:`resume`).
        """
        stopped = self.pids()
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        return stopped

    def resume(self, pids: list[int]) -> None:
        """SIGCONT the processes :meth:`pause` stopped."""
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def pids(self) -> list[int]:
        """The postmaster and its children (backends, background workers)."""
        import psutil

        try:
            proc = psutil.Process(self._server.get_pid())
            return [proc.pid, *(c.pid for c in proc.children(recursive=True))]
        except (psutil.NoSuchProcess, AssertionError, TypeError):
            return []

    def close(self) -> None:
        """Stop the server (and delete its data directory with ``cleanup_mode="delete"``)."""
        if self._server is not None:
            with contextlib.suppress(Exception):  # already stopped by the test or scenario
                self._server.cleanup()
            self._server = None

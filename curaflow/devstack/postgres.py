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
import time
import warnings
from pathlib import Path
from typing import Any, Literal

from curaflow.paths import private_dir


class EmbeddedPostgres:
    """A PostgreSQL server on ``pgdata`` for this process's lifetime (or until :meth:`stop`).

    Args:
        pgdata: data directory (created and initialised on first use).
    """

    def __init__(self, pgdata: Path) -> None:
        self.pgdata = pgdata
        self._server: Any = None

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
                raise RuntimeError(
                    "the embedded PostgreSQL (pgserver) is not installed: pip install 'curaflow[embedded]' "
                    "(or set DATABASE_URL and TEMPORAL_ADDRESS)"
                ) from None

        logging.getLogger("pgserver").setLevel(logging.WARNING)
        private_dir(self.pgdata.parent)
        self._server = pgserver.get_server(self.pgdata, cleanup_mode="stop")
        return str(self._server.get_uri())

    def stop(self) -> None:
        """Release this process's handle; the server stops when no other process holds one."""
        if self._server is not None:
            self._server.cleanup()
            self._server = None


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

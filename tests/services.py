"""Services a fault test can break: a real ``curaflow api`` process (and its own PostgreSQL).

* a PostgreSQL a test can stop, kill and restart is
  :class:`curaflow.devstack.postgres.RestartablePostgres` (``cleanup_mode="delete"``),
  shared with the chaos suite; the session's shared PostgreSQL is never touched.
* :class:`ApiProcess` / :func:`start_api_process` — ``curaflow api`` as a process of its
  own with its JSON log in a file, for tests that need a real server's sockets, logs and
  exit status (forked by the test process's zygote, as workers are:
  :func:`tests.zygote.curaflow_process`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import tomli_w

from curaflow.devstack.ports import free_port
from tests.support import eventually, short_id
from tests.zygote import ForkedProcess, curaflow_process

__all__ = ["free_port"]


@dataclass
class ApiProcess:
    """A running ``curaflow api`` process."""

    process: ForkedProcess | subprocess.Popen[bytes]
    url: str
    log: Path

    def stop(self) -> str:
        """SIGINT, wait, then SIGKILL; returns the whole log."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        return self.log.read_text(errors="replace")

    def lines(self) -> list[dict[str, Any]]:
        """The JSON lines of the log so far."""
        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out


async def start_api_process(
    tmp_path: Path,
    *,
    temporal_address: str,
    database_url: str,
    token: str | None,
    insecure: bool = False,
    config: dict[str, Any] | None = None,
    wait_healthy: bool = True,
) -> ApiProcess:
    """Start ``curaflow api`` on a free port with a minimal configuration plus ``config``.

    Returns once ``GET /health`` answers 200 (unless ``wait_healthy`` is False).

    Raises:
        RuntimeError: the process exited while starting.
        TimeoutError: it did not answer within 60 s.
    """
    out = f"out-{short_id()}"
    base: dict[str, Any] = {
        "state_dir": str(tmp_path / "state"),
        "temporal": {"task_queue": f"test-{short_id()}"},
        "routes": {out: {"kind": "directory", "path": str(tmp_path / "delivered")}},
        "targets": [{"id": "demo", "routes": [out]}],
    }
    for key, value in (config or {}).items():
        base[key] = {**base[key], **value} if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    path = tmp_path / f"api-{short_id()}.toml"
    path.write_text(tomli_w.dumps(base))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CURAFLOW_", "TEMPORAL_", "PIXIV_"))}
    env.update(DATABASE_URL=database_url, TEMPORAL_ADDRESS=temporal_address, CURAFLOW_CONFIG=str(path))
    if token:
        env["CURAFLOW_API_TOKEN"] = token
    port = free_port()
    args = ["api", "--port", str(port)]
    if insecure:
        args.append("--insecure")
    log = tmp_path / f"api-{port}.log"
    process = curaflow_process(args, env=env, cwd=tmp_path, log=log)
    api = ApiProcess(process, f"http://127.0.0.1:{port}", log)
    if not wait_healthy:
        return api
    async with httpx.AsyncClient() as client:

        async def healthy() -> bool:
            if process.poll() is not None:
                raise RuntimeError(log.read_text())
            return (await client.get(api.url + "/health")).status_code == 200

        await eventually(
            healthy, timeout_s=60, what=lambda: f"API healthy: {log.read_text()}", ignore=(httpx.HTTPError,)
        )
    return api

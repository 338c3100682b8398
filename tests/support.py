"""Test helpers: a per-test configuration, real worker processes, the API, waiting for jobs.

Waiting for anything goes through :func:`eventually` (the one polling loop of the suite).

Every integration test runs against the session's real Temporal dev server and real
PostgreSQL. Isolation comes from names: each :class:`Stack` has its own task queue,
route names and state directory, so dedupe and queues never cross tests.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import inspect
import json
import os
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import asyncpg
import httpx
import tomli_w
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from curaflow.api.app import create_app
from curaflow.config import Settings, load_settings
from curaflow.devstack.processes import WorkerProcess, child_env
from curaflow.devstack.temporal import temporal_binary
from curaflow.domain.execution import JOB_WORKFLOW
from curaflow.domain.messages import JobInput, RouteRef, TargetSpec
from curaflow.domain.models import JobRecord
from curaflow.jobs.admission import Admitter
from curaflow.ledger import event_pushes
from curaflow.ledger.db import now_ms
from curaflow.ledger.events import append_event
from curaflow.ledger.jobs import NewJob, insert_job
from curaflow.ledger.records import load_job
from curaflow.process.httpserver import BackgroundServer
from curaflow.protocol.connections import CLIENT_KEEP_ALIVE_S
from curaflow.sources.pixiv.client import PixivClient
from curaflow.temporal.connection import connect, connect_configured
from tests.fakes.replay import ReplayServer
from tests.zygote import worker_process

API_TOKEN = "test-token-not-a-secret"

T = TypeVar("T")


async def eventually(
    probe: Callable[[], T | Awaitable[T | None] | None],
    *,
    timeout_s: float = 30.0,
    interval_s: float = 0.1,
    what: str | Callable[[], str] = "condition",
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    """Call ``probe`` (sync or async) until it returns a truthy value; return that value.

    Args:
        probe: the check; a falsy answer means "not yet".
        timeout_s: how long to keep trying (seconds, from the first call).
        interval_s: pause between calls (seconds).
        what: what is awaited, for the error (a callable is evaluated when it is raised,
            so it can describe the state at the time).
        ignore: exception types that also mean "not yet" (a service still starting).

    Raises:
        TimeoutError: ``probe`` never answered truthy within ``timeout_s``; the message
            holds ``what``, the last answer and the last ignored exception.
    """
    deadline = time.monotonic() + timeout_s
    last: Any = None
    error: BaseException | None = None
    while True:
        try:
            answer = probe()
            if inspect.isawaitable(answer):
                answer = await answer
        except ignore as err:
            error = err
        else:
            if answer:
                return answer  # type: ignore[return-value]
            last = answer
        if time.monotonic() > deadline:
            described = what() if callable(what) else what
            raise TimeoutError(f"not within {timeout_s:g}s: {described} (last: {last!r}, error: {error!r})")
        await asyncio.sleep(interval_s)


async def waiting_for_a_lock(pool: asyncpg.Pool, timeout_s: float = 10.0) -> None:
    """Wait until a session of this database waits for a lock (a statement blocked on a
    row another transaction holds): the moment to check it has not returned yet.

    Raises:
        TimeoutError: no session waited within ``timeout_s``.
    """

    async def waiting() -> bool:
        sessions = await pool.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return bool(sessions)

    await eventually(waiting, timeout_s=timeout_s, interval_s=0.02, what="a session waiting for a lock")


class FakeClock:
    """A monotonic clock (seconds) that moves only when a test says so, for code that takes
    a ``clock`` (the Pixiv client's token expiry, :class:`~curaflow.sources.gate.MemoryGate`).
    """

    def __init__(self, start: float = 10_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward."""
        self.now += seconds


async def closed_status(client: Any, workflow_id: str, timeout_s: float = 30.0) -> Any:
    """The :class:`~temporalio.client.WorkflowExecutionStatus` of ``workflow_id`` once it
    closed. An execution not found yet counts as running (the API starts workflows in the
    background: right after a 202 it may not exist).

    Raises:
        TimeoutError: still running (or absent) after ``timeout_s``.
    """
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.service import RPCError, RPCStatusCode

    handle = client.get_workflow_handle(workflow_id)

    async def status() -> Any:
        try:
            current = (await handle.describe()).status
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            return None
        return current if current != WorkflowExecutionStatus.RUNNING else None

    return await eventually(status, timeout_s=timeout_s, what=f"{workflow_id} closed")


async def activity_attempts(client: Any, workflow_id: str, timeout_s: float = 30.0) -> dict[str, int]:
    """Attempts of each activity type (``{"deliver": 1, ...}``) in the closed run of
    ``workflow_id``, read from its history.

    Waits for the run to close first, so nothing more can be scheduled: a negative
    assertion ("not sent again") read from these counts needs no sleep. An activity's
    ``ActivityTaskStarted`` event records the attempt that ended it (Temporal writes no
    events for the attempts before), so an activity type's count is the sum of those.
    Local activities (``finish``, ``request_cancel``, ``admit``) are markers, not counted.

    Raises:
        TimeoutError: the run did not close within ``timeout_s``.
    """
    from temporalio.api.enums.v1 import EventType

    await closed_status(client, workflow_id, timeout_s)
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    names: dict[int, str] = {}
    attempts: dict[str, int] = {}
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            names[event.event_id] = event.activity_task_scheduled_event_attributes.activity_type.name
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started = event.activity_task_started_event_attributes
            name = names[started.scheduled_event_id]
            attempts[name] = attempts.get(name, 0) + started.attempt
    return attempts


async def job_in_stage(http: httpx.AsyncClient, job_id: str, stage: str, timeout_s: float = 20.0) -> dict[str, Any]:
    """The protocol job (``GET /jobs/{id}``) once its ``progress.stage`` is ``stage`` with its
    lease active (the step is running in a worker now).

    Raises:
        TimeoutError: not in that stage within ``timeout_s``.
    """
    seen: dict[str, Any] = {}

    async def in_stage() -> dict[str, Any] | None:
        seen.update((await http.get(f"/jobs/{quote(job_id, safe='@')}")).json())
        return dict(seen) if seen["progress"]["stage"] == stage and seen["lease_active"] else None

    return await eventually(in_stage, timeout_s=timeout_s, interval_s=0.05, what=lambda: f"{job_id} in {stage}: {seen}")


async def terminal_job(http: httpx.AsyncClient, job_id: str, timeout_s: float = 60.0) -> dict[str, Any]:
    """The protocol job (``GET /jobs/{id}``) once its status is terminal.

    Raises:
        TimeoutError: not terminal within ``timeout_s``.
    """

    async def terminal() -> dict[str, Any] | None:
        job = (await http.get(f"/jobs/{quote(job_id, safe='@')}")).json()
        return dict(job) if job["status"] in ("succeeded", "failed", "cancelled", "expired") else None

    return await eventually(terminal, timeout_s=timeout_s, what=f"job {job_id} terminal")


def whsec(seed: str = "curaflow-test") -> str:
    """A Standard Webhooks secret for tests."""
    return "whsec_" + base64.b64encode(seed.encode().ljust(24, b"_")).decode()


def recorded_history(shown: str) -> str:
    """A history as ``temporal workflow show -o json`` printed it, every failure's
    ``stackTrace`` emptied: it names the recording machine's paths, and replay never reads
    it (as ``scripts/record_histories.py`` writes them)."""

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: ("" if k == "stackTrace" else strip(v)) for k, v in node.items()}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    return json.dumps(strip(json.loads(shown)), indent=1, ensure_ascii=False) + "\n"


def job_env(job_id: str) -> ActivityEnvironment:
    """An ``ActivityEnvironment`` whose activity runs as job ``job_id``'s own execution:
    ``JobWorkflow`` under the job id, the only caller a job's activities serve
    (:mod:`activities.caller`; the SDK's default, workflow ``test`` of type ``test``, is
    refused ``foreign_caller``)."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, workflow_id=job_id, workflow_type=JOB_WORKFLOW)
    return env


async def run_as_job(fn: Callable[..., Awaitable[T]], inp: Any, *args: Any, **kwargs: Any) -> T:
    """Run the activity ``fn(inp, *args, **kwargs)`` in this process as the step of job
    ``inp.job_id`` its own execution schedules (:func:`job_env`); returns its result."""
    return await job_env(inp.job_id).run(fn, inp, *args, **kwargs)


def temporal_workflow(address: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``temporal workflow <args> --address <address>`` (the CLI as an operator runs it);
    its output captured as text, not checked (the caller reads ``returncode``)."""
    return subprocess.run(
        [temporal_binary(), "workflow", *args, "--address", address],
        capture_output=True,
        text=True,
        timeout=120,
    )


def short_id() -> str:
    return uuid.uuid4().hex[:8]


async def ledger_job(
    pool: asyncpg.Pool,
    target: TargetSpec,
    *,
    label: str,
    deadline_in_ms: int = 3_600_000,
    source_task_queues: dict[str, str] | None = None,
) -> str:
    """Insert a job with one target straight into the ledger, with no workflow (ledger tests).

    Its id is ``demo@manual-<label>-<short id>``; it is closed when the test ends
    (``tests/conftest.py`` ``leave_no_job_open``). ``source_task_queues`` (account → its
    gate's key) is stored with it as admission stores it. Returns the job id.
    """
    now = now_ms()
    inp = JobInput(
        job_id=f"demo@manual-{label}-{short_id()}",
        plan_id="demo",
        created_at_ms=now,
        deadline_at_ms=now + deadline_in_ms,
        targets=[target],
        source_task_queues=source_task_queues or {},
    )
    async with pool.acquire() as conn:
        await insert_job(conn, NewJob(job_input=inp))
    return inp.job_id


def push_config(tmp_path: Path, *, tags: tuple[str, ...] = ("x",), **api: Any) -> dict[str, Any]:
    """A stack's configuration whose pushes reach a consumer's receiver on 127.0.0.1 (any
    port; its private network allowed), signed with :func:`whsec`. ``api`` adds to its
    ``[api]`` (e.g. ``callback_timeout_ms``, in ms); its one target ``demo`` queries
    ``tags`` and delivers to a directory under ``tmp_path``."""
    out = f"out-{short_id()}"
    return {
        "api": {"callback_allowed_hosts": ["127.0.0.1:*"], "callback_secret": whsec(), **api},
        "outbound": {"private_networks": ["127.0.0.0/8"]},
        "routes": {out: {"kind": "directory", "path": str(tmp_path / "delivered")}},
        "targets": [{"id": "demo", "query": {"tags": list(tags)}, "routes": [out]}],
    }


async def job_owing_pushes(pool: asyncpg.Pool, url: str, *, label: str, count: int = 1, ended: bool = False) -> str:
    """A :func:`ledger_job` with ``count`` events (``job.progress``) pending their push to
    the consumer's callback ``url``; ``ended``: the job has completed (its pushes owed
    after its end, the sweeper's). Returns the job id."""
    target = TargetSpec(target_id="demo", routes=[RouteRef(name=f"r-{short_id()}", kind="directory")])
    job_id = await ledger_job(pool, target, label=label)
    async with pool.acquire() as conn, conn.transaction():
        for _ in range(count):
            seq = await append_event(conn, job_id, "job.progress")
            await event_pushes.enqueue_push(conn, job_id, seq, f"e-{short_id()}", url, {})
        if ended:
            await conn.execute("UPDATE jobs SET completed_at = $1 WHERE job_id = $2", now_ms(), job_id)
    return job_id


def pixiv_answering(api: Callable[[httpx.Request], httpx.Response], **options: Any) -> PixivClient:
    """A Pixiv client on ``httpx.MockTransport``: its token refresh granted (an hour's
    token), every other request (the app-api's, the image host's) answered by ``api``.
    ``options`` go to :class:`~curaflow.sources.pixiv.client.PixivClient` (``gate``,
    ``image_host``, ``page_max_bytes`` / ``download_max_bytes`` in bytes, …)."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/auth/token"):
            return httpx.Response(200, json={"access_token": "a", "refresh_token": "r", "expires_in": 3600})
        return api(request)

    http = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    return PixivClient(http, refresh_token="r", api_url="http://api.test", auth_url="http://api.test", **options)


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


class Stack:
    """One test's configuration plus the processes serving it.

    Args:
        tmp_path: the test's directory (state dir, config file, logs, routes).
        temporal_address / database_url: the session's services.
        config: TOML content merged over the test defaults (short budgets, fast retries).
    """

    def __init__(self, tmp_path: Path, temporal_address: str, database_url: str, config: dict[str, Any]) -> None:
        self.tmp = tmp_path
        self.suffix = short_id()
        self.task_queue = f"test-{self.suffix}"
        defaults: dict[str, Any] = {
            "state_dir": str(tmp_path / "state"),
            "temporal": {
                "address": temporal_address,
                "task_queue": self.task_queue,
                "sticky_schedule_to_start_ms": 1000,
            },
            "database": {"url": database_url, "pool_max_size": 4},
            "api": {"token": API_TOKEN, "cancel_wait_ms": 5000},
            "budgets": {"heartbeat_interval_ms": 1000},
            # A killed or frozen source-queue owner is replaced within the lease plus a
            # standby poll, and a source step it held is back in the queue within the
            # lease (the step's heartbeat timeout, never under its 5 s floor): 5.5 s
            # instead of the defaults' 12 s, for every test that kills a worker.
            "pixiv": {"source_lease_ms": 5000, "source_standby_poll_ms": 500},
            "delivery": {"retry_initial_interval_ms": 100, "retry_max_interval_ms": 500},
            # Every worker and API of a test ticks its reconciler (and push sweeper) this
            # often: ~3.5 ms of CPU a tick across the process and PostgreSQL, idle or not.
            # 1 s since 2026-12-07 (500 ms before: ~7 ms of CPU more a second of each stack).
            "reconcile_interval_ms": 1000,
            "observability": {"log_level": "INFO"},
        }
        self.config = deep_merge(defaults, config)
        self.config_path = tmp_path / f"curaflow-{self.suffix}.toml"
        self.config_path.write_text(tomli_w.dumps(self.config))
        self.settings: Settings = load_settings(self.config_path)
        self.workers: list[WorkerProcess] = []
        self.api: BackgroundServer | None = None
        self.http: httpx.AsyncClient | None = None
        self.pool: asyncpg.Pool | None = None

    def reconfigure(self, config: dict[str, Any]) -> None:
        """Merge ``config`` into this stack's configuration file: workers started from now
        on read it (the running ones keep what they started with)."""
        self.config = deep_merge(self.config, config)
        self.config_path.write_text(tomli_w.dumps(self.config))
        self.settings = load_settings(self.config_path)

    # ---- processes ----------------------------------------------------------------

    def worker_env(self) -> dict[str, str]:
        env = child_env(CURAFLOW_CONFIG=str(self.config_path))
        for name in ("TEMPORAL_ADDRESS", "DATABASE_URL", "CURAFLOW_API_TOKEN", "PIXIV_REFRESH_TOKEN"):
            env.pop(name, None)
        return env

    async def start_worker(
        self,
        *,
        wait: bool = True,
        wrapper: list[str] | None = None,
        private_tmpfs: Path | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> WorkerProcess:
        """Start a real worker process and wait until it serves its task queues.

        Args:
            wrapper: a command to run the worker under (:class:`WorkerProcess`).
            private_tmpfs: a directory the worker sees as a tmpfs of its own, in a mount
                namespace of its own — a host of its own (:func:`tests.zygote.worker_process`).
            extra_env: variables added to its environment.
        """
        n = len(self.workers) + 1
        log = self.tmp / f"worker-{self.suffix}-{n}.log"
        env = {**self.worker_env(), **(extra_env or {})}
        worker = worker_process(env, log, wrapper=wrapper, private_tmpfs=private_tmpfs)
        self.workers.append(worker)
        if wait:

            def started() -> bool:
                if log.exists() and "worker.started" in log.read_text(errors="replace"):
                    return True
                if not worker.alive():
                    raise RuntimeError(f"worker exited: {log.read_text(errors='replace')[-3000:]}")
                return False

            # Its pollers are running once it logs worker.started; a task sent before they
            # reach the server waits in its queue, so there is nothing more to wait for.
            await eventually(
                started,
                timeout_s=60,
                interval_s=0.05,
                what=lambda: f"worker started: {log.read_text(errors='replace')[-3000:]}",
            )
        return worker

    def worker_log(self, n: int = 1) -> str:
        return (self.tmp / f"worker-{self.suffix}-{n}.log").read_text(errors="replace")

    async def start_api(self) -> httpx.AsyncClient:
        """Serve the API in this process; returns an authenticated client.

        Every answer the client receives is checked against the published schema
        (:func:`tests.schema.check_response`): documented status, valid body.
        """
        from tests.schema import check_response

        self.api = await BackgroundServer(create_app(self.settings)).start()
        self.http = httpx.AsyncClient(
            base_url=self.api.url,
            headers={"Authorization": f"Bearer {API_TOKEN}"},
            timeout=60,
            # let an idle connection go before the API closes it (curaflow.protocol.connections)
            limits=httpx.Limits(keepalive_expiry=CLIENT_KEEP_ALIVE_S),
            event_hooks={"response": [check_response]},
        )
        return self.http

    async def ledger(self) -> asyncpg.Pool:
        if self.pool is None:
            from curaflow.ledger.db import create_pool

            assert self.settings.database.url
            self.pool = await create_pool(self.settings.database.url, min_size=1, max_size=3)
        return self.pool

    async def stop(self) -> None:
        # all at once: each drains on its own (a second or more), none waits for another
        await asyncio.gather(*(asyncio.to_thread(worker.stop) for worker in self.workers))
        if self.http is not None:
            await self.http.aclose()
        if self.api is not None:
            await self.api.stop()
        if self.pool is not None:
            await self.pool.close()

    # ---- jobs -----------------------------------------------------------------------

    def task(self, *, key: str | None = None, **params: Any) -> dict[str, Any]:
        """A Task body for this stack."""
        return {
            "protocol_version": "1",
            "job_type": "candidate_search",
            "idempotency_key": key or f"k-{short_id()}",
            "params": params,
        }

    async def admit(self, body: dict[str, Any]) -> str:
        """Admit through the shared admission code (as ``curaflow run`` does); returns the job id."""
        pool = await self.ledger()
        client = await connect_configured(self.settings.temporal)
        admission = await Admitter(self.settings, pool, client).admit(body)
        return admission.job_id

    async def job(self, job_id: str) -> JobRecord:
        pool = await self.ledger()
        async with pool.acquire() as conn:
            record = await load_job(conn, job_id)
        assert record is not None, job_id
        return record

    async def attempts(self, job_id: str) -> dict[str, int]:
        """:func:`activity_attempts` of the job's run, once it closed."""
        client = await connect_configured(self.settings.temporal)
        return await activity_attempts(client, job_id)

    async def wait_terminal(self, job_id: str, timeout_s: float = 60.0) -> JobRecord:
        """Wait until the ledger holds ``job_id`` as terminal; returns it.

        Raises:
            TimeoutError: not terminal within ``timeout_s`` (the record and the workers' logs).
        """

        seen: list[JobRecord] = []

        async def terminal() -> JobRecord | None:
            seen[:] = [await self.job(job_id)]
            return seen[0] if seen[0].completed_at is not None else None

        def what() -> str:
            record = seen[0].model_dump_json()[:2000] if seen else "never read"
            logs = "\n".join(self.worker_log(i + 1)[-2000:] for i in range(len(self.workers)))
            return f"job {job_id} terminal: {record}\n{logs}"

        return await eventually(terminal, timeout_s=timeout_s, what=what)


@contextlib.asynccontextmanager
async def shared_stack(
    tmp: Path, temporal_address: str, database_url: str, config: dict[str, Any], *, api: bool = False
) -> AsyncIterator[Stack]:
    """One :class:`Stack` and its worker process for every test of a module (a module-scoped
    fixture's body): the tests share the process, each on targets and routes of its own
    (their names in ``config``), so no test sees another's deliveries or dedupe; a test
    that kills, pauses or reconfigures a worker keeps a stack of its own (``make_stack``).

    Args:
        api: also serve the API in the test process (``stack.http``).
    """
    stack = Stack(tmp, temporal_address, database_url, config)
    try:
        await stack.start_worker()
        if api:
            await stack.start_api()
        yield stack
    finally:
        await stack.stop()


def env_database_url() -> str | None:
    """``DATABASE_URL`` from the environment (CI may provide a server), else None."""
    return os.environ.get("DATABASE_URL") or None


class InProcessWorker:
    """A real Temporal worker run inside the test process, for tests that need a worker
    missing some of its parts (no source task queue, no ``deliver`` activity …).

    Args:
        stack: the test's stack (settings).
        source: also serve the accounts' source task queues.
        without: activity names not to register on the main task queue.
        replay_url: the replay server's URL when ``pixiv.api_url`` is not configured.
    """

    def __init__(
        self, stack: Stack, *, source: bool = True, without: tuple[str, ...] = (), replay_url: str | None = None
    ) -> None:
        self.stack = stack
        self.source = source
        self.without = without
        self.replay_url = replay_url
        self._stack: Any = None
        self._deps: Any = None

    async def __aenter__(self) -> InProcessWorker:
        import contextlib

        from temporalio.worker import Worker

        from activities import build_activities
        from activities.deps import open_deps
        from curaflow.process.worker import sandbox_runner
        from workflows.job import JobWorkflow

        settings = self.stack.settings
        assert settings.temporal.address
        client = await connect(settings.temporal.address)
        self._deps = await open_deps(settings, client, replay_url=self.replay_url)
        main, source = build_activities(self._deps)
        workers = [
            Worker(
                client,
                task_queue=settings.temporal.task_queue,
                workflows=[JobWorkflow],
                activities=main,
                workflow_runner=sandbox_runner(),
            )
        ]
        if self.source:
            workers += [
                Worker(client, task_queue=queue, activities=source) for queue in settings.source_task_queues().values()
            ]
        pushes = [a for a in main if getattr(a, "__temporal_activity_definition").name == "push_events"]
        if pushes:  # the callback pushes' own queue, as every worker process serves it
            workers.append(Worker(client, task_queue=settings.push_task_queue(), activities=pushes))
        self._stack = contextlib.AsyncExitStack()
        for worker in workers:
            await self._stack.enter_async_context(worker)
        return self

    async def __aexit__(self, *exc: object) -> None:
        from activities.deps import close_deps

        if self._stack is not None:
            await self._stack.aclose()
        if self._deps is not None:
            await close_deps(self._deps)


@dataclasses.dataclass
class DemoStack:
    """A worker and the API serving a ``demo`` target that delivers to a directory
    (``out``), over the Pixiv replay, with a Temporal client: what the Temporal-facing
    modules (clients, callers, job identity, the docs' commands) share per module."""

    stack: Stack
    http: httpx.AsyncClient
    client: Client
    address: str
    out: Path
    replay: ReplayServer


@contextlib.asynccontextmanager
async def demo_stack(
    tmp: Path, temporal_address: str, database_url: str, config: dict[str, Any] | None = None
) -> AsyncIterator[DemoStack]:
    """Start a :class:`DemoStack` under ``tmp``; stops its processes and the replay on exit.

    ``config``: TOML content merged over the demo's (a module's own settings)."""
    replay = await ReplayServer().start()
    route = f"out-{short_id()}"
    stack = Stack(
        tmp,
        temporal_address,
        database_url,
        deep_merge(
            {
                "pixiv": {"api_url": replay.url},
                "routes": {route: {"kind": "directory", "path": str(tmp / "out")}},
                "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [route]}],
            },
            config or {},
        ),
    )
    try:
        await stack.start_worker()
        http = await stack.start_api()
        client = await connect(temporal_address)
        yield DemoStack(stack, http, client, temporal_address, tmp / "out", replay)
    finally:
        replay.faults.slow_images_s = 0.0
        await stack.stop()
        await replay.stop()


def resolving_to(monkeypatch: Any, outbound: Any, address: str) -> list[str]:
    """Make an outbound client's guarded transport (:class:`curaflow.outbound.Outbound`)
    resolve every host to ``address`` and refuse every connection it would open; returns the
    hosts a connection was asked for (the guard must ask none for an address it refuses).

    Args:
        monkeypatch: the test's ``pytest.MonkeyPatch`` (undone after the test).
        outbound: the :class:`~curaflow.outbound.Outbound` under test.
        address: an IPv4 or IPv6 literal every lookup answers.
    """
    import socket

    import httpcore

    from curaflow.outbound.transport import GuardedBackend

    backend = outbound.http._transport._pool._network_backend
    assert isinstance(backend, GuardedBackend)
    connects: list[str] = []

    async def lookup(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        return [(family, socket.SOCK_STREAM, 6, "", (address, port, 0, 0) if ":" in address else (address, port))]

    async def connect_tcp(host: str, port: int, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        connects.append(host)
        raise httpcore.ConnectError("stub: no network in this test")

    monkeypatch.setattr(backend.resolver, "lookup", lookup)
    monkeypatch.setattr(backend._inner, "connect_tcp", connect_tcp)
    return connects

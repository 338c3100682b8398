"""The service commands exit with the documented status (docs/operations.md, "Exit status").

``2``: the process could not start — its configuration is invalid or incomplete, a port it
is told to listen on is taken, or Temporal / PostgreSQL does not answer at start; ``3`` is
kept for a background loop that could not recover (``tests/integration/test_supervision.py``).
Real ``curaflow api`` / ``curaflow worker`` processes, forked by the test process's zygote
(the console entry point from its start, its imports done once: :func:`tests.zygote.curaflow_command`,
:func:`tests.zygote.curaflow_process`); the other entry points (``python -m …``,
``worker.py``), every process stopped while it loads its modules and the worker stopped
while its replay starts (whose imports are in that window) start a fresh interpreter —
how those start is what their tests check.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomli_w

from curaflow.cli.common import EXIT_CANNOT_START
from curaflow.devstack.postgres import RestartablePostgres
from tests.services import free_port
from tests.support import short_id
from tests.zygote import ForkedProcess, curaflow_command, curaflow_process

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def service_env(tmp_path: Path, *, database_url: str, temporal_address: str, **config: object) -> dict[str, str]:
    """The environment of a service process: these services, a config file of ``config``
    (with its own state directory), an API token; nothing of this process's CURAFLOW_*."""
    path = tmp_path / f"exit-{short_id()}.toml"
    path.write_text(tomli_w.dumps({"state_dir": str(tmp_path / "state"), **config}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CURAFLOW_", "TEMPORAL_", "PIXIV_"))}
    env.update(
        DATABASE_URL=database_url,
        TEMPORAL_ADDRESS=temporal_address,
        CURAFLOW_CONFIG=str(path),
        CURAFLOW_API_TOKEN="exit-status-token",
    )
    return env


@contextlib.contextmanager
def running(tmp_path: Path, command: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """``command`` started in ``tmp_path`` with ``env``, its output (stdout and stderr) piped
    as text; killed at the block's end if it still runs (a failed check leaves no process)."""
    proc = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def left_quietly(proc: subprocess.Popen[str]) -> str:
    """Wait (60 s at most) for ``proc`` to leave: status 0, no traceback and no exception
    Python printed as ignored. Returns its output."""
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, output
    assert "Traceback" not in output and "Exception ignored" not in output, output
    return output


@contextlib.contextmanager
def forked(
    tmp_path: Path, args: list[str], env: dict[str, str]
) -> Iterator[tuple[ForkedProcess | subprocess.Popen[bytes], Path]]:
    """``curaflow <args>`` forked by the test process's zygote (:func:`tests.zygote.curaflow_process`),
    its output (stdout and stderr) in a file; killed at the block's end if it still runs."""
    log = tmp_path / f"{args[0]}-{short_id()}.log"
    proc = curaflow_process(args, env=env, cwd=tmp_path, log=log)
    try:
        yield proc, log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def left_quietly_from(proc: ForkedProcess | subprocess.Popen[bytes], log: Path) -> str:
    """:func:`left_quietly` of a :func:`forked` process: status 0 within 60 s, no traceback in its log."""
    code = proc.wait(60)
    output = log.read_text(errors="replace")
    assert code == 0, output
    assert "Traceback" not in output, output
    return output


def run(tmp_path: Path, *args: str, database_url: str, temporal_address: str, **config: object) -> tuple[int, str]:
    """Run ``curaflow <args>`` to its end, forked by the test process's zygote
    (:func:`tests.zygote.curaflow_command`: the console entry point from its start, only
    its imports done before), or ``python -m …`` in a fresh interpreter when ``args``
    start with ``-m``; returns its exit status and output."""
    env = service_env(tmp_path, database_url=database_url, temporal_address=temporal_address, **config)
    if args[0] == "-m":
        done = subprocess.run(
            [sys.executable, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
    else:
        done = curaflow_command(args, env=env, cwd=tmp_path, timeout=120)
    return done.returncode, done.stdout + done.stderr


def run_api(
    tmp_path: Path, *, database_url: str, temporal_address: str, port: int | None = None, **config: object
) -> tuple[int, str]:
    """:func:`run` of ``curaflow api`` on 127.0.0.1 (``port``, else a free one)."""
    port = free_port() if port is None else port
    return run(
        tmp_path,
        "api",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        database_url=database_url,
        temporal_address=temporal_address,
        **config,
    )


@pytest.fixture
def taken_port() -> object:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield sock.getsockname()[1]


def test_the_api_exits_2_when_its_port_is_taken(
    tmp_path: Path, taken_port: int, database_url: str, temporal_address: str
) -> None:
    code, output = run_api(tmp_path, port=taken_port, database_url=database_url, temporal_address=temporal_address)
    assert code == EXIT_CANNOT_START == 2, output
    assert f"127.0.0.1:{taken_port}" in output and "in use" in output, output


def test_the_api_exits_2_when_postgresql_does_not_answer_at_start(tmp_path: Path, temporal_address: str) -> None:
    nowhere = f"postgresql://curaflow@127.0.0.1:{free_port()}/curaflow"
    code, output = run_api(tmp_path, database_url=nowhere, temporal_address=temporal_address)
    assert code == EXIT_CANNOT_START, output
    assert "did not start" in output, output
    assert "ConnectionRefusedError" in output and "Traceback" not in output, output


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://curaflow@[::1/curaflow",
        "postgresql://curaflow@127.0.0.1:99999/curaflow",
        # a password with an unencoded "/": asyncpg reads "S3cr" as the port, and quotes it
        "postgresql://curaflow:S3cr/3tPart@127.0.0.1:5432/curaflow",
    ],
)
@pytest.mark.parametrize("command", ["api", "worker"])
def test_a_database_url_that_cannot_be_used_is_one_line_and_status_2(
    tmp_path: Path, temporal_address: str, url: str, command: str
) -> None:
    # asyncpg refuses these URLs with ValueError / OverflowError, outside the errors of a
    # PostgreSQL that is down: both services printed a traceback and exited 1. The line
    # never quotes a piece of the password (curaflow.ledger.db.UnreadableLedgerUrl).
    args = [command, "--host", "127.0.0.1", "--port", str(free_port())] if command == "api" else [command]
    code, output = run(
        tmp_path, *args, database_url=url, temporal_address=temporal_address, temporal={"task_queue": short_id()}
    )
    assert code == EXIT_CANNOT_START, output
    assert "could not be opened" in output and "Traceback" not in output, output
    assert len([line for line in output.splitlines() if "could not be opened" in line]) == 1, output
    assert "S3cr" not in output and "3tPart" not in output, output


#: A role whose login PostgreSQL checks with a password (the suite's servers trust every local login).
CHECKED_ROLE = "curaflow_checked"
CHECKED_PASSWORD = "right-password"


@pytest.fixture(scope="module")
def checked_login(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A PostgreSQL of this module's own whose :data:`CHECKED_ROLE` logs in with
    :data:`CHECKED_PASSWORD` alone (``scram-sha-256`` in ``pg_hba.conf``); yields its
    superuser's URL (``postgresql://postgres:@/postgres?host=<socket dir>``, trusted)."""
    import asyncio

    import asyncpg

    data = tmp_path_factory.mktemp("checked-pg") / "data"
    pg = RestartablePostgres(data, cleanup_mode="delete")
    url = pg.start()
    hba = data / "pg_hba.conf"
    hba.write_text(f"local all {CHECKED_ROLE} scram-sha-256\n{hba.read_text()}")

    async def prepare() -> None:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(f"CREATE ROLE {CHECKED_ROLE} LOGIN PASSWORD '{CHECKED_PASSWORD}'")
            await conn.execute("SELECT pg_reload_conf()")
        finally:
            await conn.close()

    asyncio.run(prepare())
    try:
        yield url
    finally:
        pg.close()


def said_once(output: str, words: str) -> list[str]:
    """The lines of ``output`` that are not JSON log lines and hold ``words`` (exactly one, asserted)."""
    lines = [line for line in output.splitlines() if words in line and not line.startswith("{")]
    assert len(lines) == 1, output
    return lines


@pytest.mark.parametrize("refused", ["password", "database"])
def test_the_api_exits_2_when_postgresql_refuses_its_login_or_database(
    tmp_path: Path, checked_login: str, temporal_address: str, refused: str
) -> None:
    # A password rotated without the API's DATABASE_URL, a database name mistyped: PostgreSQL
    # answers, and refuses. One line names the setting, never the password.
    url = (
        checked_login.replace("postgres:@", f"{CHECKED_ROLE}:wrong-password@", 1)
        if refused == "password"
        else checked_login.replace("/postgres?", "/absent_ledger?", 1)
    )
    code, output = run_api(tmp_path, database_url=url, temporal_address=temporal_address)
    assert code == EXIT_CANNOT_START == 2, output
    said_once(output, "DATABASE_URL")
    assert ("InvalidPasswordError" if refused == "password" else "absent_ledger") in output, output
    assert "Traceback" not in output and "wrong-password" not in output, output


#: A supervision that gives up within a second (the process exits within seconds).
QUICK_SUPERVISION = {"initial_backoff_ms": 100, "max_backoff_ms": 200, "fatal_after_ms": 500}


def test_the_api_exits_2_when_its_temporal_namespace_does_not_exist(
    tmp_path: Path, database_url: str, temporal_address: str
) -> None:
    # The API connected (a gRPC connection names no namespace) and served on while nothing it
    # did asked Temporal of its namespace: no job to start or reconcile, nothing failed, and a
    # mistyped TEMPORAL_NAMESPACE showed only at the first job admitted.
    namespace = f"absent-{short_id()}"
    code, output = run_api(
        tmp_path,
        database_url=database_url,
        temporal_address=temporal_address,
        temporal={"namespace": namespace},
        supervision=QUICK_SUPERVISION,
    )
    assert code == EXIT_CANNOT_START == 2, output
    (line,) = said_once(output, "a restart alone does not help")
    assert namespace in line and "TEMPORAL_NAMESPACE" in line and "temporal.namespace" in line, line
    assert "Traceback" not in output, output


#: ``curaflow dev`` on free ports (its defaults are fixed ones).
DEV_ON_FREE_PORTS = [
    "dev",
    *("--temporal-port", "0", "--ui-port", "0", "--api-port", "0", "--temporal-http-port", "0"),
    *("--temporal-metrics-port", "0", "--worker-metrics-port", "0", "--replay-port", "0"),
]


async def refuse_the_dev_stack(refused: str, database_url: str) -> None:
    """Make the PostgreSQL of a running ``curaflow dev`` refuse it: its login (``NOLOGIN``:
    SQLSTATE 28000) or its database (dropped: 3D000). Its namespace deleted is no case here:
    a worker ``curaflow dev`` starts again registers it again at its start, and whether the
    API's loop gives up first is a race (two runs of three under pytest did not end within
    120 s, 2026-12-08; not established further)."""
    import asyncpg

    conn = await asyncpg.connect(database_url.replace("/postgres?", "/template1?", 1))
    try:
        if refused == "database":
            await conn.execute("DROP DATABASE postgres WITH (FORCE)")
        else:
            await conn.execute("ALTER ROLE postgres NOLOGIN")
            await conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'"
            )
    finally:
        await conn.close()


@pytest.mark.parametrize("refused", ["login", "database"])
def test_a_dev_stack_whose_services_refuse_it_exits_2(tmp_path: Path, refused: str) -> None:
    # `curaflow dev` runs its own PostgreSQL: what refuses it is a change made to it while it
    # runs. Its in-process API's loop cannot recover and the stack ends 2, in one line.
    import asyncio
    import json

    state = tmp_path / "state"
    path = tmp_path / "dev.toml"
    config = {"state_dir": str(state), "supervision": QUICK_SUPERVISION}
    path.write_text(tomli_w.dumps(config))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CURAFLOW_", "TEMPORAL_", "PIXIV_", "DATABASE_"))}
    env.update(CURAFLOW_CONFIG=str(path))
    with forked(tmp_path, DEV_ON_FREE_PORTS, env) as (dev, log):
        deadline = time.monotonic() + 120
        while "stack is up" not in log.read_text(errors="replace"):
            assert dev.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.1)
        info = json.loads((state / "stack.json").read_text())
        asyncio.run(refuse_the_dev_stack(refused, info["database_url"]))
        code = dev.wait(120)
        output = log.read_text(errors="replace")
    assert code == EXIT_CANNOT_START == 2, output
    (line,) = said_once(output, "a restart alone does not help")
    assert "could not recover" in line, line
    # its own PostgreSQL, not a setting dev does not read (until 2026-12-08: DATABASE_URL)
    assert str(state / "pg") in line and "DATABASE_URL" not in line, line
    assert "Traceback" not in "\n".join(line for line in output.splitlines() if not line.startswith("{")), output


def test_a_running_api_stopped_by_sigterm_exits_0_after_its_graceful_shutdown(
    tmp_path: Path, database_url: str, temporal_address: str
) -> None:
    # uvicorn shuts down, then raises the signal again with the handler it found: the
    # default one killed the process (-15) after a clean shutdown.
    port = free_port()
    env = service_env(tmp_path, database_url=database_url, temporal_address=temporal_address)
    with forked(tmp_path, ["api", "--host", "127.0.0.1", "--port", str(port)], env) as (proc, log):
        deadline, serving = time.monotonic() + 60, False
        while not serving and time.monotonic() < deadline and proc.poll() is None:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
                conn.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                serving = conn.recv(64).startswith(b"HTTP/1.1 200")
            time.sleep(0.1)
        assert serving, "the API never answered /health"
        proc.send_signal(signal.SIGTERM)
        left_quietly_from(proc, log)


@pytest.mark.parametrize("option", ["metrics_port", "temporal_metrics_port"])
@pytest.mark.parametrize("entry", ["curaflow worker", "python -m curaflow.process.worker"])
def test_a_worker_exits_2_when_its_metrics_port_is_taken(
    tmp_path: Path, taken_port: int, database_url: str, temporal_address: str, entry: str, option: str
) -> None:
    # Both entry points end the same way (curaflow.process.worker.run_process): a line, no
    # traceback (the module's own entry printed one and exited 1).
    code, output = run(
        tmp_path,
        *(["worker"] if entry == "curaflow worker" else ["-m", "curaflow.process.worker"]),
        database_url=database_url,
        temporal_address=temporal_address,
        temporal={"task_queue": f"exit-{short_id()}"},
        observability={"metrics_host": "127.0.0.1", option: taken_port},
    )
    assert code == EXIT_CANNOT_START, output
    assert f"127.0.0.1:{taken_port}" in output and "in use" in output, output
    assert f"observability.{option}" in output, output
    assert "Traceback" not in output, output


def test_a_worker_exits_2_when_postgresql_does_not_answer_at_start(tmp_path: Path, temporal_address: str) -> None:
    nowhere = f"postgresql://curaflow@127.0.0.1:{free_port()}/curaflow"
    code, output = run(
        tmp_path,
        "worker",
        database_url=nowhere,
        temporal_address=temporal_address,
        temporal={"task_queue": f"exit-{short_id()}"},
    )
    assert code == EXIT_CANNOT_START, output
    assert "PostgreSQL" in output, output


@pytest.mark.parametrize("command", ["api", "worker"])
def test_a_service_facing_a_silent_postgresql_says_it_got_no_answer(
    tmp_path: Path, temporal_address: str, command: str
) -> None:
    # A PostgreSQL that takes the connection and never answers: asyncpg's connect times out
    # with a bare TimeoutError. The worker's line said "TimeoutError: " and nothing more; the
    # API said "see the error above" under the lifespan's traceback.
    args = [command, "--host", "127.0.0.1", "--port", str(free_port())] if command == "api" else [command]
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", free_port()))
        silent.listen(8)
        code, output = run(
            tmp_path,
            *args,
            database_url=f"postgresql://curaflow@127.0.0.1:{silent.getsockname()[1]}/curaflow",
            temporal_address=temporal_address,
            temporal={"task_queue": f"exit-{short_id()}"},
            database={"connect_timeout_ms": 300, "acquire_timeout_ms": 300},
        )
    assert code == EXIT_CANNOT_START, output
    assert "TimeoutError: no answer within 300 ms (database.connect_timeout_ms)" in output, output
    assert "Traceback" not in output, output
    assert command != "api" or "the API did not start" in output, output


def test_a_worker_stopped_while_it_connects_exits_at_once(tmp_path: Path, database_url: str) -> None:
    # A "Temporal" that accepts the connection and never answers: the worker is connecting
    # (up to its connect timeout, 30 s) when the SIGTERM comes; it must not wait that out.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", free_port()))
        silent.listen(8)
        silent.settimeout(60)
        env = service_env(tmp_path, database_url=database_url, temporal_address=f"127.0.0.1:{silent.getsockname()[1]}")
        with forked(tmp_path, ["worker"], env) as (worker, log):
            held, _ = silent.accept()  # it is connecting now
            with held:
                worker.terminate()
                worker.wait(10)  # at once, not after the connect timeout
                output = left_quietly_from(worker, log)
    assert "worker.stopped" in output and "while_starting" in output, output


@pytest.mark.parametrize("signals", [1, 2])
def test_a_worker_stopped_while_its_replay_server_starts_exits_0_without_a_traceback(
    tmp_path: Path, database_url: str, temporal_address: str, signals: int
) -> None:
    # Right after the namespace is ready the worker starts the recorded Pixiv replay (on by
    # default): a stop there cancelled uvicorn inside its lifespan start-up (a traceback),
    # and a second signal cut the clean-up short.
    path = tmp_path / "w.toml"
    path.write_text(tomli_w.dumps({"state_dir": str(tmp_path / "state"), "temporal": {"task_queue": short_id()}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CURAFLOW_", "TEMPORAL_", "PIXIV_"))}
    env.update(DATABASE_URL=database_url, TEMPORAL_ADDRESS=temporal_address, CURAFLOW_CONFIG=str(path))
    log = tmp_path / "worker.log"
    # A fresh interpreter: the replay's imports (FastAPI, uvicorn) fall in the window the
    # signals aim at, as they do in production; a forked worker has them already.
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [str(Path(sys.executable).parent / "curaflow"), "worker"],
            env=env,
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while "temporal.namespace_ready" not in log.read_text(errors="replace"):
            assert worker.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.002)
        for _ in range(signals):
            worker.terminate()
            time.sleep(0.002)
        code = worker.wait(20)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)
    output = log.read_text(errors="replace")
    assert code == 0, output
    assert "Traceback" not in output, output
    assert "worker.stopped" in output, output


def _loading(pid: int) -> bool | None:
    """True once the process maps pydantic's native core: its heavy imports are under way
    (curaflow's own start-up installs its handlers before them)."""
    try:
        return True if "_pydantic_core" in Path(f"/proc/{pid}/maps").read_text() else None
    except OSError:
        return None


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize(
    "entry", ["curaflow worker", "python -m curaflow.process.worker", "python worker.py", "curaflow api"]
)
def test_a_service_stopped_while_it_loads_its_modules_exits_0_without_a_traceback(
    tmp_path: Path, database_url: str, temporal_address: str, entry: str, sig: signal.Signals
) -> None:
    # The second or so of imports before a process installs its own handlers: SIGTERM
    # killed it (status -15, nothing cleaned up), SIGINT printed a KeyboardInterrupt
    # traceback. Nothing ran yet: it leaves as a stop request later does (status 0).
    env = service_env(
        tmp_path, database_url=database_url, temporal_address=temporal_address, temporal={"task_queue": short_id()}
    )
    exe = str(Path(sys.executable).parent / "curaflow")
    command = {
        "curaflow worker": [exe, "worker"],
        "python -m curaflow.process.worker": [sys.executable, "-m", "curaflow.process.worker"],
        "python worker.py": [sys.executable, str(Path(__file__).resolve().parents[2] / "worker.py")],
        "curaflow api": [exe, "api", "--host", "127.0.0.1", "--port", str(free_port())],
    }[entry]
    with running(tmp_path, command, env) as proc:
        deadline = time.monotonic() + 30
        while not _loading(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        proc.send_signal(sig)
        time.sleep(0.02)  # a second one while it leaves (a supervisor's, an impatient operator's)
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        left_quietly(proc)


SWALLOWED_STOP = """
import os, signal, sys
from curaflow.process.launch import stop_quietly_until_started

stop_quietly_until_started()


class Dropped:
    def __del__(self) -> None:  # a weakref callback, a __del__: where Python ignores what is raised
        os.kill(os.getpid(), signal.SIGTERM)


Dropped()  # the stop request lands inside __del__: its SystemExit is printed as ignored
from curaflow.process.worker import main

main(None)
"""


def test_a_stop_whose_exit_python_ignored_while_the_modules_load_still_stops_the_service(
    tmp_path: Path, database_url: str, temporal_address: str
) -> None:
    # A SIGTERM that arrives while an import runs a weakref callback (importlib's module
    # locks) or a __del__ raises SystemExit where Python only prints "Exception ignored";
    # the handler had already set both signals to be ignored, so the stop was lost and the
    # worker started and ran on, deaf to the next SIGTERM (failed once in the CI, 2026-12-07:
    # killed after 60 s). The request is remembered and honoured where the process takes
    # the signals over.
    env = service_env(
        tmp_path, database_url=database_url, temporal_address=temporal_address, temporal={"task_queue": short_id()}
    )
    # Nor is the ignored exit printed ("Exception ignored in: … SystemExit: 0", a traceback:
    # 2026-12-07, the flaky `curaflow worker`-SIGINT case above, whose signal landed in such
    # a callback): the user sees what any stop while the modules load shows — nothing.
    with running(tmp_path, [sys.executable, "-c", SWALLOWED_STOP], env) as proc:
        output = left_quietly(proc)
    assert "worker.started" not in output and "source_queue.owned" not in output, output

"""``curaflow run`` as a new user runs it: a fresh directory, nothing configured.

The command brings up the embedded stack (Temporal dev server with SQLite state,
PostgreSQL via pgserver, a worker with the replay source), runs one job to its
outcome and tears everything down. A command run to its end is forked by the test
process's zygote (:func:`curaflow`); ``curaflow dev`` read line by line and ``python
worker.py`` start fresh interpreters (the console script's own start is also run by
``test_dev_leaves_nothing.py``, ``test_exit_status.py`` and the README's test).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.support import eventually
from tests.zygote import curaflow_command

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CURAFLOW_", "TEMPORAL_", "PIXIV_"))}
    env.pop("DATABASE_URL", None)
    return env


def curaflow(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``curaflow <args>`` to its end with a new user's environment, forked by the test
    process's zygote (:func:`tests.zygote.curaflow_command`: the console entry point from
    its start, the command line's imports done once); what it starts — the dev server,
    PostgreSQL, the embedded worker — are processes of their own, as for a user."""
    return curaflow_command(list(args), cwd=cwd, env=clean_env(), timeout=180)


def leftovers(root: Path) -> list[str]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
        except psutil.Error:
            continue
        if str(root) in cmd and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(cmd)
    return found


async def no_leftovers(root: Path) -> None:
    """Wait until no process of ``root`` is left (one that ended may take a moment to be reaped)."""
    await eventually(lambda: leftovers(root) == [], timeout_s=10, what=lambda: f"no process left: {leftovers(root)}")


async def test_run_delivers_a_work_and_leaves_no_process(tmp_path: Path) -> None:
    started = time.monotonic()
    first = curaflow("run", "--tags", "オリジナル", "--json", cwd=tmp_path)
    elapsed = time.monotonic() - started

    assert first.returncode == 0, first.stderr[-3000:]
    assert "source: the recorded Pixiv replay" in first.stderr  # not Pixiv, and it says so
    outcome = json.loads(first.stdout)
    assert outcome["job"]["status"] == "succeeded"
    assert outcome["business_status"] == "success"
    work_id = outcome["cells"]["targets"][0]["work_id"]
    manifest = tmp_path / "curaflow-out" / work_id / "manifest.json"
    assert json.loads(manifest.read_text())["work"]["work_id"] == work_id
    # --json says where the work landed
    [landed] = outcome["deliveries"]
    assert (landed["route"], landed["kind"], landed["status"]) == ("out", "directory", "delivered")
    assert landed["work_id"] == work_id
    assert Path(landed["location"]).resolve() == (tmp_path / "curaflow-out" / work_id).resolve()
    assert elapsed < 60
    await no_leftovers(tmp_path)

    # The ledger persists in ./.curaflow: a second run delivers another work.
    second = curaflow("run", "--tags", "オリジナル", "--json", cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    assert json.loads(second.stdout)["cells"]["targets"][0]["work_id"] != work_id


def test_run_exits_non_zero_without_a_candidate(tmp_path: Path) -> None:
    result = curaflow("run", "--tags", "no-such-tag-anywhere", cwd=tmp_path)
    assert result.returncode == 1
    assert "failed" in result.stdout and "no_candidate" in result.stdout


def test_run_reports_a_bad_config_clearly(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text('[[targets]]\nid = "t"\nroutes = ["missing"]\n')
    result = curaflow("run", "--config", "bad.toml", cwd=tmp_path)
    assert result.returncode == 2
    assert "unknown route 'missing'" in result.stderr
    assert "Traceback" not in result.stderr


#: Every port option of ``curaflow dev`` at 0 (free ports: tests run side by side).
FREE_PORTS = tuple(
    x
    for option in (
        "--temporal-port",
        "--ui-port",
        "--api-port",
        "--temporal-http-port",
        "--temporal-metrics-port",
        "--worker-metrics-port",
        "--replay-port",
    )
    for x in (option, "0")
)


def test_dev_names_the_taken_port_and_the_option_to_change_it(tmp_path: Path) -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    taken = holder.getsockname()[1]
    try:
        result = curaflow("dev", *FREE_PORTS, "--api-port", str(taken), cwd=tmp_path)
    finally:
        holder.close()

    assert result.returncode == 2
    assert f"port {taken} (HTTP API) is in use" in result.stderr
    assert "--api-port" in result.stderr
    assert "Traceback" not in result.stderr
    assert leftovers(tmp_path) == []


@contextlib.contextmanager
def running_dev(cwd: Path) -> Iterator[list[str]]:
    """``curaflow dev`` (every port free, nothing configured) in ``cwd`` until the block
    ends (Ctrl-C); yields the lines it printed up to ``Press Ctrl-C``."""
    exe = Path(sys.executable).parent / "curaflow"
    dev = subprocess.Popen(
        [str(exe), "dev", *FREE_PORTS],
        cwd=cwd,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    printed: list[str] = []
    try:
        assert dev.stdout is not None
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            line = dev.stdout.readline()
            if not line:
                break
            printed.append(line)
            if "Press Ctrl-C" in line:
                break
        yield printed
    finally:
        dev.send_signal(signal.SIGINT)
        dev.wait(timeout=60)


async def test_dev_says_which_source_its_workers_use(tmp_path: Path) -> None:
    with running_dev(tmp_path) as printed:
        pass
    listing = "".join(printed)
    assert "curaflow dev stack is up" in listing, listing[-3000:]
    assert "source: the recorded Pixiv replay (no Pixiv refresh token configured" in listing
    await no_leftovers(tmp_path)


async def test_run_on_a_running_dev_refuses_a_route_its_workers_do_not_know(tmp_path: Path) -> None:
    """The README's Telegram step with the replay's ``curaflow dev`` still running: ``curaflow
    run --config curaflow.toml`` admitted the job, whose send then retried
    ``configuration_mismatch`` on the dev stack's workers (started without the route) until
    ``--timeout`` (exit 1, ``channel: reserved``). Now it exits 2 naming the route and the
    running stack, and admits nothing."""
    config = tmp_path / "curaflow.toml"
    config.write_text(
        '[routes.channel]\nkind = "telegram"\nbot_token = "123456:ABC"\nchat_id = "@my_channel"\n\n'
        '[[targets]]\nid = "mine"\nquery = { tags = ["風景"] }\nroutes = ["channel"]\n'
    )
    with running_dev(tmp_path) as printed:
        assert "Press Ctrl-C" in "".join(printed), "".join(printed)[-3000:]
        stack = json.loads((tmp_path / ".curaflow" / "stack.json").read_text())
        assert stack["routes"] == {"out": "directory"} and stack["sources"] == ["default"]
        result = curaflow("run", "--config", str(config), "--timeout", "5", cwd=tmp_path)
    err = " ".join(result.stderr.split())
    assert result.returncode == 2, result.stdout + result.stderr[-3000:]
    assert f"the curaflow dev running in this directory (pid {stack['pid']}) started without route 'channel'" in err
    assert "mine@" not in result.stdout + result.stderr  # no job admitted
    await no_leftovers(tmp_path)


def test_a_worker_without_services_says_what_is_missing(tmp_path: Path) -> None:
    worker_py = Path(__file__).resolve().parents[2] / "worker.py"
    result = subprocess.run(
        [sys.executable, str(worker_py)], cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=60
    )

    assert result.returncode == 2
    assert "TEMPORAL_ADDRESS and DATABASE_URL" in result.stderr
    assert "Traceback" not in result.stderr


def test_run_stops_waiting_when_the_embedded_worker_dies(tmp_path: Path) -> None:
    holder = socket.socket()
    holder.bind(("0.0.0.0", 0))
    holder.listen(1)
    taken = holder.getsockname()[1]
    # the worker cannot serve its metrics on a taken port and exits at start
    (tmp_path / "c.toml").write_text(f"[observability]\nmetrics_port = {taken}\n")
    try:
        started = time.monotonic()
        result = curaflow("run", "--config", "c.toml", "--timeout", "170", cwd=tmp_path)
        elapsed = time.monotonic() - started
    finally:
        holder.close()

    assert result.returncode == 1
    assert "the embedded worker exited" in result.stderr
    assert "Address already in use" in result.stderr  # the end of its log says why
    assert elapsed < 90
    assert leftovers(tmp_path) == []


def test_a_second_command_on_a_held_stack_names_the_holder_and_starts_nothing(tmp_path: Path) -> None:
    """``curaflow run`` twice at once in one directory: the second used to start its own dev
    server on the same ``temporal.db`` and exit 2 with "temporal dev server exited with 1;
    see …/temporal.log" (SQLITE_BUSY in that log). Now the first holds the state
    directory's lock (``.curaflow/stack.lock``): the second, and a ``curaflow dev``, exit 2
    naming the holder and its pid, before anything starts. The holder here is another
    process taking the same lock (a real second stack would take a minute); once it dies
    (SIGKILL: no clean-up) the lock is free."""
    state = tmp_path / ".curaflow"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from curaflow.devstack.stack import StackLock; "
            "StackLock(Path(sys.argv[1]), 'curaflow run').acquire(); print('held', flush=True); time.sleep(600)",
            str(state),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        for args in (("run", "--tags", "オリジナル"), ("dev", *FREE_PORTS)):
            result = curaflow(*args, cwd=tmp_path)
            assert result.returncode == 2, (args, result.stderr[-3000:])
            assert (
                f"another curaflow command holds the embedded stack of {state}: curaflow run (pid {holder.pid})"
                in result.stderr
            ), result.stderr[-3000:]
            assert "Traceback" not in result.stderr
        assert not (state / "temporal.db").exists() and not (state / "pg").exists()  # nothing started
    finally:
        holder.kill()
        holder.wait(10)
    assert leftovers(tmp_path) == []
    from curaflow.devstack.stack import StackLock

    lock = StackLock(state)
    lock.acquire()  # the dead holder's lock went with it
    lock.release()

"""``curaflow run`` as a new user runs it: a fresh directory, nothing configured.

The command brings up the embedded stack (Temporal dev server with SQLite state,
PostgreSQL via pgserver, a worker with the replay source), runs one job to its
outcome and tears everything down.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CURAFLOW_", "TEMPORAL_", "PIXIV_"))}
    env.pop("DATABASE_URL", None)
    return env


def curaflow(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "curaflow"
    return subprocess.run([str(exe), *args], cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=180)


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


def test_run_delivers_a_work_and_leaves_no_process(tmp_path: Path) -> None:
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
    time.sleep(1)
    assert leftovers(tmp_path) == []

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


def test_dev_says_which_source_its_workers_use(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "curaflow"
    dev = subprocess.Popen(
        [str(exe), "dev", *FREE_PORTS],
        cwd=tmp_path,
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
    finally:
        dev.send_signal(signal.SIGINT)
        dev.wait(timeout=60)
    listing = "".join(printed)
    assert "curaflow dev stack is up" in listing, listing[-3000:]
    assert "source: the recorded Pixiv replay (no Pixiv refresh token configured" in listing
    time.sleep(1)
    assert leftovers(tmp_path) == []


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

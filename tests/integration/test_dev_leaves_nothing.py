"""``curaflow dev`` names every port it listens on, and leaves nothing running, however it is stopped.

Real processes: the command is started in a session of its own with ports picked for
it, and stopped the way an operator or a supervisor stops it — Ctrl-C then, 3 s later,
SIGKILL of its process group (what a terminal's impatient user or a CI runner does);
SIGKILL of the command alone; SIGTERM. Then none of the processes it started — the
workers, the Temporal dev server, the embedded PostgreSQL's postmaster and its backends,
the watchdog — may still run.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PORT_OPTIONS = (
    "--temporal-port",
    "--ui-port",
    "--api-port",
    "--temporal-http-port",
    "--temporal-metrics-port",
    "--worker-metrics-port",
    "--replay-port",
)
ALL_FREE = tuple(x for option in PORT_OPTIONS for x in (option, "0"))


def started(cwd: Path, *options: str) -> subprocess.Popen[bytes]:
    exe = str(Path(sys.executable).parent / "curaflow")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CURAFLOW_", "TEMPORAL_", "DATABASE_URL"))}
    return subprocess.Popen(
        [exe, "dev", *(options or ALL_FREE)],
        cwd=cwd,
        env=env,
        stdout=open(cwd / "dev.out", "wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def wait_up(dev: subprocess.Popen[bytes], out: Path, timeout_s: float = 180) -> str:
    deadline = time.monotonic() + timeout_s
    seen = ""
    while time.monotonic() < deadline:
        seen = out.read_text(errors="replace")
        if "Press Ctrl-C to stop." in seen:
            return seen
        assert dev.poll() is None, seen
        time.sleep(0.2)
    raise AssertionError(f"curaflow dev did not come up: {seen}")


def everything_started(dev: subprocess.Popen[bytes], pgdata: Path) -> list[psutil.Process]:
    """The command's descendants, the postmaster (detached by pg_ctl) and its backends."""
    procs = psutil.Process(dev.pid).children(recursive=True)
    postmaster = psutil.Process(int((pgdata / "postmaster.pid").read_text().split()[0]))
    return [*procs, postmaster, *postmaster.children(recursive=True)]


@pytest.mark.parametrize("how", ["ctrl-c then group sigkill", "sigkill of the command", "sigterm"])
def test_nothing_curaflow_dev_started_outlives_it(tmp_path: Path, how: str) -> None:
    dev = started(tmp_path)
    try:
        wait_up(dev, tmp_path / "dev.out")
        procs = everything_started(dev, tmp_path / ".curaflow" / "pg")
        names = sorted({p.name() for p in procs})
        assert any("postgres" in n for n in names) and any("temporal" in n for n in names), names
        if how == "ctrl-c then group sigkill":
            os.killpg(dev.pid, signal.SIGINT)
            time.sleep(3)
            os.killpg(dev.pid, signal.SIGKILL)
        elif how == "sigkill of the command":
            dev.kill()
        else:
            dev.terminate()
        dev.wait(120)
        _, alive = psutil.wait_procs(procs, timeout=60)
        assert not alive, [(p.pid, p.name()) for p in alive]
    finally:
        if dev.poll() is None:
            os.killpg(dev.pid, signal.SIGKILL)


def test_every_port_curaflow_dev_listens_on_is_an_option_and_named_at_start(tmp_path: Path) -> None:
    from curaflow.devstack.ports import free_port

    pinned = {option: free_port() for option in PORT_OPTIONS}
    dev = started(tmp_path, *(x for option, port in pinned.items() for x in (option, str(port))), "--workers", "2")
    try:
        out = wait_up(dev, tmp_path / "dev.out")
        expected = set(pinned.values()) | {pinned["--worker-metrics-port"] + 1}  # worker 2: the next port
        listening: set[int] = set()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # the workers bind theirs once they run
            listening = set()
            for proc in [psutil.Process(dev.pid), *psutil.Process(dev.pid).children(recursive=True)]:
                listening |= {c.laddr.port for c in proc.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}
            if expected <= listening:
                break
            time.sleep(0.5)
        # the ports given are the ports used
        assert expected <= listening, (sorted(expected - listening), sorted(listening))
        named = {int(p) for p in re.findall(r"(?:127\.0\.0\.1|localhost):(\d+)", out)}
        named |= {int(p) for p in re.findall(r"internal services on 127\.0\.0\.1: ([\d, ]+)", out)[0].split(", ")}
        assert listening <= named, (sorted(listening - named), out)
    finally:
        dev.terminate()
        dev.wait(120)

"""The suite's forked workers (tests/zygote.py) are separate processes with the surface of
a spawned one: their own environment, directory and log, an exit status, signals."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from curaflow.devstack.ports import free_port
from curaflow.devstack.processes import child_env
from tests.zygote import ForkedWorkerProcess, Zygote, curaflow_process


@contextlib.contextmanager
def silent_services() -> Iterator[dict[str, str]]:
    """A worker's environment whose "Temporal" and "PostgreSQL" accept connections and
    never answer: the worker waits on them until it is signalled."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", free_port()))
        silent.listen(8)
        host, port = silent.getsockname()
        env = child_env(TEMPORAL_ADDRESS=f"{host}:{port}", DATABASE_URL=f"postgresql://u@{host}:{port}/db")
        env.pop("CURAFLOW_CONFIG", None)
        yield env


def test_a_forked_worker_reads_its_own_environment_and_exits_with_its_status(tmp_path: Path) -> None:
    config = tmp_path / "broken.toml"
    config.write_text("this is = not [toml\n")
    log = tmp_path / "worker.log"
    worker = ForkedWorkerProcess(child_env(CURAFLOW_CONFIG=str(config)), log, cwd=tmp_path).start()
    assert worker.process is not None
    assert worker.process.wait(60) == 2  # an invalid configuration: status 2, as the command's
    assert "curaflow worker:" in log.read_text() and "broken.toml" in log.read_text()
    assert oct(log.stat().st_mode & 0o777) == "0o600"
    assert not worker.alive()


def test_a_forked_worker_can_be_stopped_killed_and_waited_for(tmp_path: Path) -> None:
    with silent_services() as env:
        worker = ForkedWorkerProcess(env, tmp_path / "w.log", cwd=tmp_path).start()
        try:
            assert worker.process is not None and worker.alive()
            with pytest.raises(subprocess.TimeoutExpired):
                worker.process.wait(0.5)
            pid = worker.pid
            assert pid is not None and pid != os.getpid() and Path(f"/proc/{pid}").exists()
            worker.pause()
            stat = Path(f"/proc/{pid}/stat")
            deadline = time.monotonic() + 10  # a signal is delivered when the child next runs
            while stat.read_text().split(") ")[1][0] != "T" and time.monotonic() < deadline:
                time.sleep(0.01)
            assert stat.read_text().split(") ")[1][0] == "T"  # stopped
            worker.kill()
            assert worker.process.returncode == -signal.SIGKILL
            assert not Path(f"/proc/{pid}").exists()  # reaped by the zygote
        finally:
            worker.kill()  # never leave a stopped child behind, whatever failed
    assert Zygote.enabled()


def test_a_forked_command_runs_until_signalled_and_writes_its_own_log(tmp_path: Path) -> None:
    # tests.zygote.curaflow_process: ``curaflow <args>`` as a service (the API of
    # tests.services), its stdout and stderr in a file created afresh, as Popen's "wb".
    log = tmp_path / "command.log"
    log.write_text("a line of an earlier process\n")
    with silent_services() as env:
        process = curaflow_process(["worker"], env=env, cwd=tmp_path, log=log)
        try:
            with pytest.raises(subprocess.TimeoutExpired):
                process.wait(0.5)  # it waits on its services
            assert process.pid != os.getpid() and Path(f"/proc/{process.pid}").exists()
            process.terminate()
            assert process.wait(30) == 0  # stopped while it starts: status 0, as the command's
        finally:
            process.kill()
    text = log.read_text()
    assert "earlier process" not in text
    assert "worker.stopped" in text, text


def test_a_zygote_that_stops_ends_its_children_even_a_stopped_one(tmp_path: Path) -> None:
    zygote = Zygote()
    with silent_services() as env:
        running = ForkedWorkerProcess(env, tmp_path / "a.log", cwd=tmp_path, zygote=zygote).start()
        stopped = ForkedWorkerProcess(env, tmp_path / "b.log", cwd=tmp_path, zygote=zygote).start()
        try:
            stopped.pause()
            socket_dir = zygote._path.parent if zygote._path is not None else None
            assert socket_dir is not None and socket_dir.is_dir()
            zygote.stop()
            assert zygote.process is not None and zygote.process.returncode == 0
            assert not socket_dir.exists()  # its socket's directory goes with it (229 were left in a day)
            for worker in (running, stopped):
                pid = worker.pid
                assert pid is not None
                deadline = time.monotonic() + 30
                while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
                    time.sleep(0.05)
                # Ended (a zombie until init reaps it, at most): never left stopped.
                assert (
                    not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "Z"
                )
        finally:
            for worker in (running, stopped):
                if worker.pid and Path(f"/proc/{worker.pid}").exists():
                    os.kill(worker.pid, signal.SIGKILL)

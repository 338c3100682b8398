"""Scale-out with nothing shared but Temporal and PostgreSQL (issue 26).

Each worker process runs as a host of its own would: in a mount namespace of its own
(``unshare --mount``), its artifacts directory a private tmpfs that no other process
sees — the test process included. One Temporal, one PostgreSQL, real worker processes.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import StackFactory
from tests.fakes.replay import ReplayServer
from tests.fakes.webhook import Reply, WebhookReceiver
from tests.support import Stack, eventually, short_id, whsec

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: Runs its arguments with the directory ``$0`` a private tmpfs (a mount namespace of its own).
_MOUNT_PRIVATE = 'mkdir -p "$0" && mount -t tmpfs -o size=256m curaflow-artifacts "$0" && exec "$@"'


def private_host(artifacts: Path) -> list[str]:
    """The wrapper that runs a worker with ``artifacts`` private to it."""
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", _MOUNT_PRIVATE, str(artifacts)]


@functools.cache
def mount_namespaces() -> bool:
    """True when this machine lets the suite make a mount namespace with a tmpfs."""
    try:
        probe = subprocess.run(
            [*private_host(Path("/tmp/curaflow-mount-probe")), "true"], capture_output=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


needs_namespaces = pytest.mark.skipif(not mount_namespaces(), reason="unshare --mount is not permitted here")


def source(replay: ReplayServer, routes: dict[str, Any]) -> dict[str, Any]:
    return {
        "pixiv": {"api_url": replay.url, "source_standby_poll_ms": 300},
        "routes": routes,
        "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": list(routes)}],
    }


async def start_hosts(stack: Stack, n: int) -> None:
    """``n`` worker processes, each on a "host" of its own; the first owns the source queue."""
    assert stack.settings.artifacts_dir is not None
    await stack.start_worker(wrapper=private_host(stack.settings.artifacts_dir))
    await eventually(lambda: "source_queue.owned" in stack.worker_log(1), what="the first worker owns the queue")
    for _ in range(n - 1):
        await stack.start_worker(wrapper=private_host(stack.settings.artifacts_dir))


def files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


@needs_namespaces
async def test_workers_with_private_artifact_directories_deliver_every_job(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    route = f"out-{short_id()}"
    out = tmp_path / "out"
    stack = make_stack(source(replay, {route: {"kind": "directory", "path": str(out)}}))
    await start_hosts(stack, 2)

    jobs = [await stack.admit(stack.task(target_id="demo")) for _ in range(12)]
    records = [await stack.wait_terminal(job, 120) for job in jobs]

    assert [(r.cells[0].state, r.cells[0].reason) for r in records] == [("submitted", None)] * 12
    attempts = [await stack.attempts(job) for job in jobs]
    assert [a.get("deliver") for a in attempts] == [1] * 12  # no attempt failed, on either host
    logs = stack.worker_log(1) + stack.worker_log(2)
    assert "No such file" not in logs
    # the second host delivered works only the first one fetched, from the ledger's copy
    assert "artifact.restored_from_ledger" in stack.worker_log(2)
    assert "artifact.restored_from_ledger" not in stack.worker_log(1)
    assert len([d for d in out.iterdir() if d.is_dir()]) == 12
    # the artifacts were private to each host: this process sees none of them
    assert stack.settings.artifacts_dir is not None
    assert files_under(stack.settings.artifacts_dir) == []
    # and the ledger's copy went with each job's finish
    pool = await stack.ledger()
    assert await pool.fetchval("SELECT count(*) FROM artifact_chunks WHERE job_id = ANY($1::text[])", jobs) == 0


@needs_namespaces
@pytest.mark.parametrize("fault", ["sigkill", "sigstop"])
async def test_the_host_that_fetched_lost_mid_delivery_another_host_delivers(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer, fault: str
) -> None:
    receiver = await WebhookReceiver(whsec(), dedupe=True).start()
    try:
        # The first send hangs at the receiver until the fetching host is gone.
        receiver.script["/h"] = [Reply(200, {"status": "accepted"}, delay_s=30)]
        hook = f"hook-{short_id()}"
        stack = make_stack(source(replay, {hook: {"kind": "webhook", "url": receiver.url + "/h", "secret": whsec()}}))
        await start_hosts(stack, 1)  # the only host: it fetches and starts the delivery
        job_id = await stack.admit(stack.task(target_id="demo"))
        await asyncio.wait_for(receiver.arrived.wait(), 30)
        await stack.start_worker(wrapper=private_host(stack.settings.artifacts_dir or tmp_path))
        fetcher = stack.workers[0]
        fetcher.kill() if fault == "sigkill" else fetcher.pause()
        lost_at = asyncio.get_running_loop().time()

        record = await stack.wait_terminal(job_id, 60)

        assert (record.cells[0].state, record.cells[0].reason) == ("submitted", None), stack.worker_log(2)[-3000:]
        # heartbeat timeout (2 s), the retry's backoff and one send: well within the job's budgets
        assert asyncio.get_running_loop().time() - lost_at < 30
        assert "artifact.restored_from_ledger" in stack.worker_log(2)
        # the resent request carried the very bytes that were fetched
        assert len(receiver.at("/h")) == 2
        sent = receiver.at("/h")[-1].json()["files"]
        assert sent and all(hashlib.sha256(base64.b64decode(f["data_base64"])).hexdigest() == f["sha256"] for f in sent)
        assert [f.sha256 for f in record.cells[0].artifact.files] == [f["sha256"] for f in sent]  # type: ignore[union-attr]
    finally:
        await receiver.stop()

"""Scale-out with nothing shared but Temporal and PostgreSQL.

Each worker process runs as a host of its own would: in a mount namespace of its own
(``unshare --mount``, made by the worker forked from the test process's zygote:
:func:`tests.zygote.worker_process`), its artifacts directory a private tmpfs that no other
process sees — the test process included. One Temporal, one PostgreSQL, real worker processes;
one host is SIGKILLed or SIGSTOPped. The source-queue owner's lease is also tested in
process (late renewals, a taken lease, the fence).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import hashlib
import json
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Worker

from curaflow.process.source_queues import LEASE_LAPSED, LeaseFence, SourceQueueOwner
from curaflow.temporal.connection import connect
from tests.conftest import StackFactory
from tests.fakes.replay import ReplayServer
from tests.fakes.webhook import Reply, WebhookReceiver
from tests.services import free_port
from tests.support import Stack, closed_status, eventually, short_id, whsec
from tests.zygote import private_tmpfs_wrapper

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@functools.cache
def mount_namespaces() -> bool:
    """True when this machine lets the suite make a mount namespace with a tmpfs."""
    try:
        probe = subprocess.run(
            [*private_tmpfs_wrapper(Path("/tmp/curaflow-mount-probe")), "true"], capture_output=True, timeout=10
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
    await stack.start_worker(private_tmpfs=stack.settings.artifacts_dir)
    await eventually(lambda: "source_queue.owned" in stack.worker_log(1), what="the first worker owns the queue")
    for _ in range(n - 1):
        await stack.start_worker(private_tmpfs=stack.settings.artifacts_dir)


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
        await stack.start_worker(private_tmpfs=stack.settings.artifacts_dir or tmp_path)
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


# ---- a hung owner of the source queue is replaced -------------------------------------


def log_time(log: str, event: str) -> float:
    """Epoch seconds of the first ``event`` in a worker's JSON log."""
    for line in log.splitlines():
        if f'"event": "{event}"' in line:
            stamp = json.loads(line)["timestamp"]
            return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    raise AssertionError(f"no {event} in the log")


async def acquire_identities(stack: Stack, job_id: str) -> list[str]:
    """The worker identity of every ``acquire`` activity's last attempt in the job's closed run."""
    from temporalio.api.enums.v1 import EventType

    assert stack.settings.temporal.address
    client = await connect(stack.settings.temporal.address, stack.settings.temporal.namespace)
    await closed_status(client, job_id)
    history = await client.get_workflow_handle(job_id).fetch_history()
    acquires = {
        e.event_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == "acquire"
    }
    return [
        e.activity_task_started_event_attributes.identity
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and e.activity_task_started_event_attributes.scheduled_event_id in acquires
    ]


@needs_namespaces
async def test_a_hung_owner_is_replaced_within_its_lease_and_fenced_when_it_wakes(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    route = f"out-{short_id()}"
    config = source(replay, {route: {"kind": "directory", "path": str(tmp_path / "out")}})
    config["pixiv"].update(source_lease_ms=3000, source_standby_poll_ms=300)
    config["budgets"] = {"heartbeat_interval_ms": 1000, "test_only_floor_ms": 500, "queued_timeout_ms": 20_000}
    stack = make_stack(config)
    assert stack.settings.artifacts_dir is not None
    ports = [free_port(), free_port()]
    for port in ports:  # each host its own /ready
        await stack.start_worker(
            private_tmpfs=stack.settings.artifacts_dir, extra_env={"CURAFLOW_OBSERVABILITY__METRICS_PORT": str(port)}
        )
        if port == ports[0]:
            await eventually(lambda: "source_queue.owned" in stack.worker_log(1), what="the first worker owns")
    owner, standby = stack.workers

    owner.pause()  # hung, not dead: its connections stay open
    hung_at = time.time()
    jobs = [await stack.admit(stack.task(target_id="demo")) for _ in range(6)]
    records = [await stack.wait_terminal(job, 60) for job in jobs]

    assert [(r.cells[0].state, r.cells[0].reason) for r in records] == [("submitted", None)] * 6
    takeover_s = log_time(stack.worker_log(2), "source_queue.owned") - hung_at
    assert takeover_s < 3.0 + 0.3 + 2.5, takeover_s  # the lease, one standby poll, building the worker
    async with httpx.AsyncClient() as http:
        ready = (await http.get(f"http://127.0.0.1:{ports[1]}/ready")).json()
        assert ready["checks"]["loop:source_queue:default"]["ok"], ready
        assert ready["checks"]["loop:source_queue:default"]["detail"].startswith("owning"), ready

        owner.resume()  # it wakes up holding a lease that was taken: it stops serving
        await eventually(lambda: "source_queue.lost" in stack.worker_log(1), timeout_s=10, what="the old owner fenced")
        later = [await stack.admit(stack.task(target_id="demo")) for _ in range(3)]
        records = [await stack.wait_terminal(job, 60) for job in later]

        assert [r.cells[0].state for r in records] == ["submitted"] * 3
        standby_identity = f"{standby.pid}@"
        for job in later:  # every source step ran on the new owner
            assert all(i.startswith(standby_identity) for i in await acquire_identities(stack, job)), job
        old = (await http.get(f"http://127.0.0.1:{ports[0]}/ready")).json()
        assert old["checks"]["loop:source_queue:default"] == {"ok": True, "detail": "standby"}, old
    print(f"takeover of a hung owner: {takeover_s:.2f} s (lease 3 s, standby poll 0.3 s)")


async def test_a_source_step_taken_by_a_frozen_owners_poll_is_back_in_the_queue_within_the_lease(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    """The frozen owner's outstanding poll takes the next ``acquire``; Temporal gives it back
    when the step's heartbeat timeout (the source lease, floored at 5 s) fires, not the
    regular one (twice ``heartbeat_interval_ms``: 60 s here)."""
    from temporalio.api.enums.v1 import EventType

    route = f"out-{short_id()}"
    config = source(replay, {route: {"kind": "directory", "path": str(tmp_path / "out")}})
    config["pixiv"].update(source_lease_ms=3000, source_standby_poll_ms=300)
    config["budgets"] = {"heartbeat_interval_ms": 30_000, "test_only_floor_ms": 500, "queued_timeout_ms": 60_000}
    stack = make_stack(config)
    await stack.start_worker()
    await eventually(lambda: "source_queue.owned" in stack.worker_log(1), what="the first worker owns")
    await stack.start_worker()
    owner = stack.workers[0]
    warm = await stack.admit(stack.task(target_id="demo"))
    assert (await stack.wait_terminal(warm, 60)).cells[0].state == "submitted"

    owner.pause()  # its source poll is outstanding: the next acquire is handed to it
    try:
        job = await stack.admit(stack.task(target_id="demo"))
        record = await stack.wait_terminal(job, 90)
    finally:
        owner.resume()
    assert record.cells[0].state == "submitted"
    assert stack.settings.temporal.address
    client = await connect(stack.settings.temporal.address, stack.settings.temporal.namespace)
    history = await client.get_workflow_handle(job).fetch_history()
    scheduled = next(
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == "acquire"
    )
    assert scheduled.activity_task_scheduled_event_attributes.heartbeat_timeout.ToTimedelta().total_seconds() == 5
    started = next(
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and e.activity_task_started_event_attributes.scheduled_event_id == scheduled.event_id
    )
    waited = started.event_time.ToDatetime().timestamp() - scheduled.event_time.ToDatetime().timestamp()
    attempt = started.activity_task_started_event_attributes.attempt
    # the frozen poll's attempt times out (5 s) while the lease moves (3 s + a standby poll +
    # building the worker), then the retry (1 s): about 6 s; well under the regular
    # heartbeat timeout (60 s) even on a loaded machine
    assert waited < 30, (waited, attempt)
    print(f"acquire taken by a frozen poll: back and started after {waited:.1f} s (attempt {attempt})")


# ---- the owner's lease, in process ----------------------------------------------------


@activity.defn(name="noop")
async def noop() -> None:
    """The one activity of the owners' test queues."""


def owner_for(database_url: str, temporal_client: Client, stop: asyncio.Event, queue: str) -> SourceQueueOwner:
    return SourceQueueOwner(
        database_url,
        queue,
        lambda fresh: Worker(temporal_client, task_queue=queue, activities=[noop], interceptors=[LeaseFence(fresh)]),
        poll_s=0.3,
        lease_s=3.0,
        stop=stop,
    )


async def test_late_renewals_stop_the_owner_and_its_ready_says_so(
    database_url: str, temporal_client: Client, ledger_pool: asyncpg.Pool
) -> None:
    stop = asyncio.Event()
    queue = f"test-lease-{short_id()}"
    owner = owner_for(database_url, temporal_client, stop, queue)
    running = asyncio.create_task(owner.run())
    try:
        await eventually(owner.owning.is_set, timeout_s=10, what="owning")
        assert owner.check()["ok"] and owner.fresh(), owner.check()
        async with ledger_pool.acquire() as conn, conn.transaction():
            # The ledger holds the renewals up (a lock on the lease row): they come late.
            await conn.execute("SELECT * FROM source_queue_leases WHERE task_queue = $1 FOR UPDATE", queue)
            late: dict[str, Any] = await eventually(
                lambda: None if owner.check()["ok"] else owner.check(), timeout_s=5, interval_s=0.02
            )
            assert "renewal overdue" in late["detail"], late
            assert owner.owning.is_set()  # still within its lease
            await eventually(lambda: not owner.fresh(), timeout_s=5, interval_s=0.02, what="the lease lapsed")
            assert not owner.check()["ok"]  # stale or draining: not ready
            await eventually(lambda: not owner.owning.is_set(), timeout_s=10, what="the worker stopped")
        # the ledger answers again: the same process takes the queue back
        await eventually(owner.owning.is_set, timeout_s=10, what="owning again")
        assert owner.check()["ok"]
    finally:
        stop.set()
        await asyncio.wait_for(running, 20)
    # a clean stop gives the lease up: a standby takes it at its next poll
    row = await ledger_pool.fetchrow("SELECT expires_at FROM source_queue_leases WHERE task_queue = $1", queue)
    assert row is not None and row["expires_at"] == 0


async def test_an_owner_whose_lease_was_taken_stops_and_stands_by(
    database_url: str, temporal_client: Client, ledger_pool: asyncpg.Pool
) -> None:
    stop = asyncio.Event()
    queue = f"test-lease-{short_id()}"
    owner = owner_for(database_url, temporal_client, stop, queue)
    running = asyncio.create_task(owner.run())
    try:
        await eventually(owner.owning.is_set, timeout_s=10, what="owning")
        await ledger_pool.execute(
            """UPDATE source_queue_leases SET owner = 'elsewhere', token = token + 1,
                      expires_at = expires_at + 600000 WHERE task_queue = $1""",
            queue,
        )
        await eventually(lambda: not owner.owning.is_set(), timeout_s=5, what="the fenced owner stopped")
        await asyncio.sleep(1.0)  # several standby polls: the other owner's lease holds
        assert not owner.owning.is_set()
        assert owner.check() == {"ok": True, "detail": "standby"}
    finally:
        stop.set()
        await asyncio.wait_for(running, 20)


async def test_a_dead_owner_is_replaced_at_the_next_standby_poll_not_at_its_lease_end(
    database_url: str, temporal_client: Client, temporal_address: str, ledger_pool: asyncpg.Pool
) -> None:
    stop, standby_stop = asyncio.Event(), asyncio.Event()
    queue = f"test-lease-{short_id()}"
    owner = owner_for(database_url, temporal_client, stop, queue)
    # The standby is another process: its own Temporal client. (One client refuses a second
    # worker on a queue while its first is still stopping, which the "dead" owner here —
    # only its ledger session was killed — may still be doing on a loaded machine.)
    standby_client = await Client.connect(temporal_address, namespace=temporal_client.namespace)
    standby = owner_for(database_url, standby_client, standby_stop, queue)
    running = asyncio.create_task(owner.run())
    try:
        await eventually(owner.owning.is_set, timeout_s=10, what="owning")
        waiting = asyncio.create_task(standby.run())
        await asyncio.sleep(0.7)
        assert not standby.owning.is_set()  # a live owner keeps the queue
        # The owner's process dies: its connection is gone, its lease (3 s) is not over.
        pid = await ledger_pool.fetchval("SELECT backend_pid FROM source_queue_leases WHERE task_queue = $1", queue)
        await ledger_pool.execute("SELECT pg_terminate_backend($1)", pid)
        died = time.monotonic()
        await eventually(standby.owning.is_set, timeout_s=10, interval_s=0.02, what="the standby owns")
        assert time.monotonic() - died < 1.5  # a standby poll (0.3 s) and building the worker
    finally:
        stop.set()
        standby_stop.set()
        with contextlib.suppress(Exception):  # the dead owner's pass failed, as it should
            await asyncio.wait_for(running, 20)
        await asyncio.wait_for(waiting, 20)


async def test_the_fence_refuses_a_source_step_once_the_lease_lapsed() -> None:
    ran: list[object] = []

    class Next(ActivityInboundInterceptor):
        def __init__(self) -> None:
            pass

        async def execute_activity(self, input: ExecuteActivityInput) -> Any:
            ran.append(input)
            return "done"

    fresh = [True]
    fenced = LeaseFence(lambda: fresh[0]).intercept_activity(Next())
    assert await fenced.execute_activity(None) == "done"  # type: ignore[arg-type]
    fresh[0] = False
    with pytest.raises(ApplicationError) as refused:
        await fenced.execute_activity(None)  # type: ignore[arg-type]
    assert refused.value.type == LEASE_LAPSED and not refused.value.non_retryable
    assert len(ran) == 1

"""A source-queue owner that lost its lease always becomes a standby again.

Its queue's worker is stopped within a bound; one whose shutdown hangs — here on an
activity that ignores its cancel, as a step stuck on a hung ledger does — is abandoned
(it can run nothing more), and the owner stands by and can own the queue again. Its
``/ready`` entry and its loop's entry are one and never contradict each other.
Real Temporal dev server, real PostgreSQL, a real Temporal ``Worker``.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any

import asyncpg
import pytest
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from curaflow.observability.supervision import Supervisor
from curaflow.process.source_queues import LeaseFence, SourceQueueOwner
from tests.support import eventually, short_id

pytestmark = [pytest.mark.integration]

#: Set by the activity once it runs; set by the test to let it end at last.
STARTED = asyncio.Event()
RELEASE = asyncio.Event()


@activity.defn(name="stuck_step")
async def stuck_step() -> str:
    """A step that ignores its cancel until the test releases it."""
    STARTED.set()
    while not RELEASE.is_set():
        with contextlib.suppress(asyncio.CancelledError):
            await RELEASE.wait()
    return "released"


@workflow.defn(name="StuckStepWorkflow")
class StuckStepWorkflow:
    @workflow.run
    async def run(self, queue: str) -> str:
        return await workflow.execute_activity(
            "stuck_step", task_queue=queue, start_to_close_timeout=timedelta(minutes=5)
        )


async def test_an_owner_whose_worker_never_stops_abandons_it_and_stands_by(
    database_url: str, temporal_client: Client, ledger_pool: asyncpg.Pool
) -> None:
    STARTED.clear()
    RELEASE.clear()
    stop = asyncio.Event()
    queue = f"test-stuck-{short_id()}"
    built: list[Worker] = []
    fences: list[Any] = []

    def make_worker(fresh: Any) -> Worker:
        fences.append(fresh)
        worker = Worker(
            temporal_client,
            task_queue=queue,
            activities=[stuck_step],
            interceptors=[LeaseFence(fresh)],
            graceful_shutdown_timeout=timedelta(milliseconds=200),
        )
        built.append(worker)
        return worker

    owner = SourceQueueOwner(database_url, queue, make_worker, poll_s=0.3, lease_s=3.0, stop=stop, stop_worker_s=2.0)
    supervisor = Supervisor(stop)
    supervisor.loop("source_queue:test", owner.run, describe=owner.check)

    def agree() -> dict[str, Any]:
        """The loop's /ready entry is the owner's own (never a stale "owning")."""
        entry = supervisor.checks()["loop:source_queue:test"]
        assert entry["ok"] == owner.check()["ok"], (entry, owner.check())
        assert entry["detail"].split(" (")[0] == owner.check()["detail"].split(" (")[0], (entry, owner.check())
        return entry

    main_queue = f"test-stuck-main-{short_id()}"
    runner = UnsandboxedWorkflowRunner()
    async with Worker(temporal_client, task_queue=main_queue, workflows=[StuckStepWorkflow], workflow_runner=runner):
        handle = None
        try:
            await eventually(owner.owning.is_set, timeout_s=10, what="owning")
            assert agree()["detail"].startswith("owning")
            handle = await temporal_client.start_workflow(
                StuckStepWorkflow.run, queue, id=f"stuck-{short_id()}", task_queue=main_queue
            )
            await asyncio.wait_for(STARTED.wait(), 20)

            # Another process takes the lease: this owner is fenced and stops its worker,
            # whose shutdown waits for a step that never ends.
            await ledger_pool.execute(
                """UPDATE source_queue_leases SET owner = 'elsewhere', token = token + 1,
                          expires_at = expires_at + 600000 WHERE task_queue = $1""",
                queue,
            )
            draining = await eventually(
                lambda: None if owner.check()["ok"] else owner.check(), timeout_s=5, interval_s=0.05
            )
            assert draining["detail"].startswith("lost the lease (fenced)"), draining
            assert agree()["ok"] is False

            # Within the bound it stands by again: ready, with the abandoned worker named.
            standby = await eventually(
                lambda: owner.check() if owner.check()["detail"].startswith("standby") else None,
                timeout_s=2.0 + 3.0,
                interval_s=0.05,
                what="a standby again",
            )
            assert standby == {"ok": True, "detail": "standby (1 abandoned worker(s) still stopping)"}
            assert agree()["ok"] is True

            # The other lease ends: this process owns the queue again, with a new worker;
            # the abandoned one can run nothing (its fence is its own lease's token).
            await ledger_pool.execute("UPDATE source_queue_leases SET expires_at = 0 WHERE task_queue = $1", queue)
            await eventually(owner.owning.is_set, timeout_s=10, what="owning again")
            assert len(built) == 2
            assert agree()["detail"].startswith("owning")
            assert fences[1]() is True and fences[0]() is False
        finally:
            RELEASE.set()
            if handle is not None:
                with contextlib.suppress(Exception):
                    await handle.terminate("test over")
            stop.set()
            await supervisor.close(grace_s=10)
    assert not owner.abandoned  # released: the abandoned shutdown ended

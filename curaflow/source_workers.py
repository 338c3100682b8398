"""One process at a time serves each Pixiv account's source task queue.

Every source call of an account runs as an activity on the account's task queue
(``<task_queue>-source-<account>``, DESIGN.md decision 10). Temporal limits concurrency
per *worker* (``max_concurrent_activities``), not per task queue, so two worker
processes polling the same queue would double the account's concurrency. Here each
process runs a :class:`SourceQueueOwner` per account: the process holding a PostgreSQL
session advisory lock derived from the queue name polls the queue; the others stand by
and retry every ``pixiv.source_standby_poll_ms``. The lock dies with its connection, so
when the owner's process exits or is killed another process takes the queue over within
one poll interval.

Why this shape (and not Temporal's ``max_task_queue_activities_per_second``): that
server-side limit spaces activity *dispatches*, but one search activity makes many
requests (pages, images), it cannot bound concurrency, and it forgets the rate-limit
cooldown. With one poller per queue

* concurrency is exactly the account's ``max_concurrency`` (default 1) across all
  processes, in Temporal's FIFO dispatch order;
* waiting for the account is waiting in the task queue, so it counts as queued time
  (the first search's ``schedule_to_start_timeout`` is the job's queued budget) and the
  Temporal UI shows the activity as scheduled, not running;
* the spacing between requests and the cooldown ladder live in the ledger
  (:mod:`curaflow.sources.gate`), so a new owner keeps them.

A session advisory lock needs a direct connection (not a transaction-pooling proxy such
as PgBouncer in transaction mode); the owner keeps one dedicated connection per account.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Callable

import asyncpg
from temporalio.worker import Worker

from curaflow.logs import get_logger

log = get_logger("curaflow.source_workers")


def lock_key(task_queue: str) -> int:
    """The advisory-lock key (signed 64-bit) of a source task queue."""
    digest = hashlib.sha256(f"curaflow-source-queue:{task_queue}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class SourceQueueOwner:
    """Serve ``task_queue`` while this process holds its advisory lock (module doc).

    Args:
        dsn: the ledger's PostgreSQL URL (a dedicated connection holds the lock).
        task_queue: the account's source task queue.
        make_worker: builds a fresh Temporal ``Worker`` for the queue (a worker cannot
            be restarted after shutdown).
        poll_s: standby retry interval and owner liveness-check interval, seconds.
        stop: set to stop serving and release the queue.
    """

    def __init__(
        self,
        dsn: str,
        task_queue: str,
        make_worker: Callable[[], Worker],
        *,
        poll_s: float,
        stop: asyncio.Event,
    ) -> None:
        self.dsn = dsn
        self.task_queue = task_queue
        self.make_worker = make_worker
        self.poll_s = poll_s
        self.stop = stop
        self.owning = asyncio.Event()

    async def _pause(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stop.wait(), timeout=self.poll_s)

    async def run(self) -> None:
        """Alternate between standby and serving until ``stop`` is set."""
        key = lock_key(self.task_queue)
        while not self.stop.is_set():
            conn: asyncpg.Connection | None = None
            try:
                conn = await asyncpg.connect(self.dsn, timeout=10)
                if not await conn.fetchval("SELECT pg_try_advisory_lock($1)", key):
                    await conn.close()
                    conn = None
                    await self._pause()
                    continue
                await self._serve(conn)
            except (OSError, asyncpg.PostgresError, TimeoutError) as err:
                log.warning("source_queue.db_error", task_queue=self.task_queue, error=str(err))
                await self._pause()
            finally:
                self.owning.clear()
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await conn.close(timeout=5)

    async def _serve(self, conn: asyncpg.Connection) -> None:
        worker = self.make_worker()
        runner = asyncio.create_task(worker.run())
        self.owning.set()
        log.info("source_queue.owned", task_queue=self.task_queue)
        reason = "stopped"
        try:
            while not self.stop.is_set():
                await self._pause()
                if runner.done():
                    reason = "worker_exited"
                    break
                try:
                    await asyncio.wait_for(conn.fetchval("SELECT 1"), timeout=max(1.0, self.poll_s * 2))
                except (OSError, asyncpg.PostgresError, TimeoutError):
                    reason = "lock_connection_lost"
                    break
        finally:
            if not runner.done():
                await worker.shutdown()
            with contextlib.suppress(BaseException):  # the worker's own failure is logged below
                await runner
            if runner.done() and not runner.cancelled() and runner.exception() is not None:
                log.error("source_queue.worker_failed", task_queue=self.task_queue, error=str(runner.exception()))
            log.info("source_queue.released", task_queue=self.task_queue, reason=reason)

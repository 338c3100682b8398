"""One process at a time serves each Pixiv account's source task queue.

Every source call of an account runs as an activity on the account's task queue
(``<task_queue>-source-<account>``, DESIGN.md decision 10). Temporal limits concurrency
per *worker* (``max_concurrent_activities``), not per task queue, so two worker
processes polling the same queue would double the account's concurrency. Here each
process runs a :class:`SourceQueueOwner` per account, a supervised loop
(:mod:`curaflow.supervision`): the process holding a PostgreSQL session advisory lock
derived from the queue name polls the queue; the others stand by and retry every
``pixiv.source_standby_poll_ms``. The lock dies with its connection, so
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
from curaflow.supervision import Beat

log = get_logger("curaflow.source_workers")


def lock_key(task_queue: str) -> int:
    """The advisory-lock key (signed 64-bit) of a source task queue."""
    digest = hashlib.sha256(f"curaflow-source-queue:{task_queue}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class SourceQueueOwner:
    """Serve ``task_queue`` while this process holds its advisory lock (module doc).

    :meth:`run` is a supervised loop (:mod:`curaflow.supervision`): any failure — the
    database going away mid-check (asyncpg's ``InterfaceError`` on a closed
    connection, ``ConnectionDoesNotExistError``), the queue's Temporal worker failing,
    a bug — escapes to the supervisor, which logs and counts it and runs :meth:`run`
    again after a backoff. Each pass releases what it held (the worker is shut down,
    the lock connection closed), so a restarted pass starts clean.

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

    @property
    def check_timeout_s(self) -> float:
        """Bound of one database round trip of the owner (connect, lock, liveness check)."""
        return max(2.0, self.poll_s * 2)

    async def _pause(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stop.wait(), timeout=self.poll_s)

    async def run(self, beat: Beat | None = None) -> None:
        """Alternate between standby and serving until ``stop`` is set.

        Args:
            beat: told ``ok`` after every standby poll and liveness check that passed.

        Raises:
            Exception: any failure (see the class doc); the caller's supervisor restarts.
        """
        key = lock_key(self.task_queue)
        while not self.stop.is_set():
            conn: asyncpg.Connection | None = None
            try:
                conn = await asyncpg.connect(self.dsn, timeout=self.check_timeout_s)
                locked = await conn.fetchval("SELECT pg_try_advisory_lock($1)", key, timeout=self.check_timeout_s)
                if not locked:
                    if beat is not None:
                        beat.ok("standby")
                    await conn.close(timeout=self.check_timeout_s)
                    conn = None
                    await self._pause()
                    continue
                await self._serve(conn, beat)
            finally:
                self.owning.clear()
                if conn is not None:
                    if conn.is_closed():
                        conn.terminate()
                    else:
                        with contextlib.suppress(Exception):
                            await conn.close(timeout=5)

    async def _serve(self, conn: asyncpg.Connection, beat: Beat | None) -> None:
        worker = self.make_worker()
        runner = asyncio.create_task(worker.run())
        self.owning.set()
        if beat is not None:
            beat.ok("owning")
        log.info("source_queue.owned", task_queue=self.task_queue)
        reason = "stopped"
        try:
            while not self.stop.is_set():
                await self._pause()
                if runner.done():
                    reason = "worker_exited"
                    error = runner.exception() if not runner.cancelled() else None
                    raise RuntimeError(f"the source queue's worker exited: {error!r}") from error
                try:
                    await conn.fetchval("SELECT 1", timeout=self.check_timeout_s)
                except BaseException:
                    reason = "lock_connection_lost"
                    raise
                if beat is not None:
                    beat.ok("owning")
        finally:
            if not runner.done():
                await worker.shutdown()
            with contextlib.suppress(BaseException):  # its failure was raised above
                await runner
            log.info("source_queue.released", task_queue=self.task_queue, reason=reason)

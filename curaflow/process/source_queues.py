"""One process at a time serves each Pixiv account's source task queue, while it is alive.

Every source call of an account runs as an activity on the account's task queue
(``<task_queue>-source-<account>``, DESIGN.md decision 10). Temporal limits concurrency
per *worker* (``max_concurrent_activities``), not per task queue, so two worker
processes polling the same queue would double the account's concurrency. Here each
process runs a :class:`SourceQueueOwner` per account, a supervised loop
(:mod:`curaflow.observability.supervision`): the process holding the queue's **lease** (a row of
``source_queue_leases``, migration 0037) polls the queue; the others stand by and try to
take the lease every ``pixiv.source_standby_poll_ms``.

Ownership follows liveness, not a connection: a session lock survives a
hung (SIGSTOPped) owner, which keeps its connection and so the lock while its jobs
expire ``queued_too_long``. The lease instead

* **expires**: ``expires_at`` (database clock) is renewed by the owner every
  ``min(source_standby_poll_ms, source_lease_ms / 4)``; a standby takes the row only
  once it lapsed. A hung owner (or a host gone without closing its connection) is
  replaced within ``source_lease_ms`` plus one standby poll. A dead process is replaced
  at the next standby poll: its connection closes, and a lease whose owner's backend
  (``backend_pid``) is gone is taken at once. One that stops cleanly gives the lease up;
* is **fenced**: each take increments ``token``; the owner renews only with its own
  token, so an owner that wakes up after its lease was taken finds the token gone and
  stops its queue's worker;
* is **checked before every source activity**, without a round trip: the owner also
  keeps the lease's validity on its own monotonic clock (from *before* each renewal
  was sent, so it ends no later than the database's ``expires_at``). An activity the
  queue's worker receives when that validity has passed — the first poll of a process
  that was hung, before its renewal could run — is refused (retried elsewhere by
  Temporal), and the worker is stopped at the next check (``lease_stale``).

Its ``/ready`` entry (the loop ``loop:source_queue:<account>``, whose detail while it
runs is :meth:`SourceQueueOwner.check`) is not ok while the process serves the queue
with a renewal overdue or a stale lease, and while the worker of a lost lease drains.

**A lost owner always becomes a standby again.** The worker of a lost lease is given
``stop_worker_s`` (the graceful shutdown plus 10 s) to stop; one that does not — a
shutdown hung on an activity that ignores its cancel, on a poll or on the ledger — is
abandoned: its shutdown goes on in the background, it can run nothing more (its fence
is its own lease's token, which no later lease has), and the owner stands by at once
(``source_queue.worker_abandoned``). So a PostgreSQL hang costs the account its owner
for the lease plus a standby poll, never the process's place as a standby.

Why this shape (and not Temporal's ``max_task_queue_activities_per_second``): that
server-side limit spaces activity *dispatches*, but one search activity makes many
requests (pages, images), it cannot bound concurrency, and it forgets the rate-limit
cooldown. With one poller per queue

* concurrency is exactly the account's ``max_concurrency`` (default 1) across all
  processes, in Temporal's FIFO dispatch order (while a replaced owner's worker drains,
  for at most its graceful shutdown, an activity it had started may still run);
* waiting for the account is waiting in the task queue, so it counts as queued time
  (the first search's ``schedule_to_start_timeout`` is the job's queued budget) and the
  Temporal UI shows the activity as scheduled, not running;
* the spacing between requests and the cooldown ladder live in the ledger
  (:mod:`curaflow.sources.gate`), so a new owner keeps them.

Each owner keeps one dedicated connection per account, whose backend pid is its sign
of life. Through a transaction-pooling proxy (PgBouncer) that pid is the proxy's server
connection: a dead owner is then replaced when its lease expires, and fencing still
holds (a live owner whose row was taken stops at its next renewal).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

import asyncpg
from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
    Worker,
)

from curaflow.ledger.db import DB_NOW_MS
from curaflow.observability.logs import get_logger
from curaflow.observability.supervision import Beat

log = get_logger("curaflow.process.source_queues")

#: The ``ApplicationError`` type of a source activity refused by a process whose lease on
#: the queue lapsed (retried: the queue's owner runs it).
LEASE_LAPSED = "source_queue_lease_lapsed"

#: Take the lease when it lapsed, when its owner's connection is gone (the process
#: died: no need to wait for the expiry), or when it is this owner's own (from a pass
#: that failed); a take increments the token. Returns the token, or nothing when another
#: owner holds it.
_TAKE = f"""
WITH clock AS (SELECT {DB_NOW_MS} AS now)
INSERT INTO source_queue_leases AS l (task_queue, owner, token, expires_at, renewed_at, backend_pid)
SELECT $1, $2, 1, clock.now + $3, clock.now, pg_backend_pid() FROM clock
ON CONFLICT (task_queue) DO UPDATE SET owner = EXCLUDED.owner, token = l.token + 1,
    expires_at = EXCLUDED.expires_at, renewed_at = EXCLUDED.renewed_at, backend_pid = EXCLUDED.backend_pid
WHERE l.expires_at < EXCLUDED.renewed_at OR l.owner = EXCLUDED.owner
   OR NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = l.backend_pid)
RETURNING token"""

#: Renew the lease with the owner's token (nothing when the token is no longer the row's).
_RENEW = f"""
WITH clock AS (SELECT {DB_NOW_MS} AS now)
UPDATE source_queue_leases SET expires_at = clock.now + $3, renewed_at = clock.now
FROM clock WHERE task_queue = $1 AND token = $2 RETURNING token"""

#: Give the lease up (a clean stop): a standby takes it at its next poll.
_RELEASE = "UPDATE source_queue_leases SET expires_at = 0 WHERE task_queue = $1 AND token = $2"


def owner_identity() -> str:
    """``host:pid:<random>``: unique per process and per start (a pid can be reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class LeaseFence(Interceptor):
    """Refuses every activity of a source queue's worker once ``fresh()`` is False.

    Args:
        fresh: True while this process's lease on the queue is valid by its own clock
            (:meth:`SourceQueueOwner.fresh`).
    """

    def __init__(self, fresh: Callable[[], bool]) -> None:
        self.fresh = fresh

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _FencedActivity(next, self.fresh)


class _FencedActivity(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, fresh: Callable[[], bool]) -> None:
        super().__init__(next)
        self._fresh = fresh

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        if not self._fresh():
            raise ApplicationError(
                "this worker process's lease on the source queue lapsed; the queue's owner runs the step",
                type=LEASE_LAPSED,
            )
        return await self.next.execute_activity(input)


class SourceQueueOwner:
    """Serve ``task_queue`` while this process holds its lease (module doc).

    :meth:`run` is a supervised loop (:mod:`curaflow.observability.supervision`): any failure — the
    database going away (asyncpg's ``InterfaceError`` on a closed connection,
    ``ConnectionDoesNotExistError``), the queue's Temporal worker failing, a bug —
    escapes to the supervisor, which logs and counts it and runs :meth:`run` again after
    a backoff. Each pass shuts down the worker it started; the lease it held lapses (or
    is taken again by this process's next pass).

    Args:
        dsn: the ledger's PostgreSQL URL (one dedicated connection).
        task_queue: the account's source task queue.
        make_worker: builds a fresh Temporal ``Worker`` for the queue (a worker cannot be
            restarted after shutdown), given the lease check its activities must pass
            (:class:`LeaseFence`).
        poll_s: standby retry interval, seconds (the renewal interval when shorter than
            a quarter of the lease).
        lease_s: lease length, seconds (``pixiv.source_lease_ms``): how long a hung
            owner keeps the queue.
        stop: set to stop serving and give the queue up.
        owner: this process's identity in the lease row (default :func:`owner_identity`).
        stop_worker_s: how long the queue's worker may take to stop once the lease is
            lost or the process stops (its graceful shutdown plus a margin), seconds;
            past it the worker is abandoned (module doc).
    """

    def __init__(
        self,
        dsn: str,
        task_queue: str,
        make_worker: Callable[[Callable[[], bool]], Worker],
        *,
        poll_s: float,
        lease_s: float,
        stop: asyncio.Event,
        owner: str | None = None,
        stop_worker_s: float = 40.0,
    ) -> None:
        self.dsn = dsn
        self.task_queue = task_queue
        self.make_worker = make_worker
        self.poll_s = poll_s
        self.lease_s = lease_s
        self.stop = stop
        self.owner = owner or owner_identity()
        self.stop_worker_s = stop_worker_s
        self.owning = asyncio.Event()
        self._token: int | None = None
        self._valid_until = 0.0  # monotonic; the lease's end by this process's clock
        self._renewed_at = 0.0  # monotonic; when the last successful renewal (or take) was sent
        self._lost: str | None = None  # why the lease held was lost, while the worker drains
        self._lost_at = 0.0  # monotonic; when the worker of the lost lease began to stop
        #: Shutdowns of abandoned workers still going on (kept referenced until they end).
        self.abandoned: set[asyncio.Future[Any]] = set()

    @property
    def renew_s(self) -> float:
        """Seconds between two renewals of a held lease."""
        return min(self.poll_s, self.lease_s / 4)

    @property
    def check_timeout_s(self) -> float:
        """Bound of one database round trip of the owner (connect, take, renew), seconds:
        a renewal that takes longer is late and tried again while the lease lasts."""
        return max(0.1, self.lease_s / 4)

    def fresh(self) -> bool:
        """True while this process holds the lease and it is valid by its own clock."""
        return self._token is not None and time.monotonic() < self._valid_until

    def fence_for(self, token: int) -> Callable[[], bool]:
        """The lease check of the worker serving the lease ``token``: :meth:`fresh`, and
        only while that lease is the one held (an abandoned worker never passes again)."""
        return lambda: self._token == token and self.fresh()

    def check(self) -> dict[str, Any]:
        """The ``/ready`` entry ``{ok, detail}``: ok while standing by or owning with renewals
        on time; not ok once a renewal is overdue (``renew_s`` plus one round trip's
        bound), once the lease is stale, and while the worker of a lost lease drains."""
        if self._lost is not None:
            waited = time.monotonic() - self._lost_at
            return {
                "ok": False,
                "detail": f"lost the lease ({self._lost}): stopping the queue's worker "
                f"({waited:.0f} s, abandoned after {self.stop_worker_s:.0f} s)",
            }
        if self._token is None:
            if self.abandoned:
                return {"ok": True, "detail": f"standby ({len(self.abandoned)} abandoned worker(s) still stopping)"}
            return {"ok": True, "detail": "standby"}
        now = time.monotonic()
        left = self._valid_until - now
        if left <= 0:
            return {"ok": False, "detail": f"lease stale for {-left:.1f}s: stopping the queue's worker"}
        overdue = now - self._renewed_at - self.renew_s - self.check_timeout_s
        if overdue > 0:
            return {"ok": False, "detail": f"owning, lease renewal overdue by {overdue:.1f}s (valid {left:.1f}s)"}
        return {"ok": True, "detail": f"owning (lease {self._token}, valid {left:.1f}s)"}

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stop.wait(), timeout=seconds)

    async def run(self, beat: Beat | None = None) -> None:
        """Alternate between standby and serving until ``stop`` is set.

        Args:
            beat: told ``ok`` after every standby poll and every renewal.

        Raises:
            Exception: any failure (see the class doc); the caller's supervisor restarts.
        """
        conn: asyncpg.Connection | None = None
        lease_ms = round(self.lease_s * 1000)
        try:
            conn = await asyncpg.connect(self.dsn, timeout=self.check_timeout_s)
            while not self.stop.is_set():
                sent = time.monotonic()
                try:
                    token = await conn.fetchval(
                        _TAKE, self.task_queue, self.owner, lease_ms, timeout=self.check_timeout_s
                    )
                except TimeoutError:  # the ledger is slow: still a standby, not a healthy one
                    await self._pause(self.poll_s)
                    continue
                if token is None:
                    if beat is not None:
                        beat.ok("standby")
                    await self._pause(self.poll_s)
                    continue
                self._token, self._valid_until, self._renewed_at = token, sent + self.lease_s, sent
                await self._serve(conn, beat)
        finally:
            self._token = None
            self.owning.clear()
            if conn is not None:
                if conn.is_closed():
                    conn.terminate()
                else:
                    with contextlib.suppress(Exception):
                        await conn.close(timeout=2)

    async def _serve(self, conn: asyncpg.Connection, beat: Beat | None) -> None:
        """Serve the queue until the lease is lost, lapses or ``stop`` is set."""
        token = self._token
        assert token is not None
        lease_ms = round(self.lease_s * 1000)
        worker = self.make_worker(self.fence_for(token))
        runner = asyncio.create_task(worker.run())
        reason = "stopped"
        try:
            first = True
            while not self.stop.is_set():
                if not first:
                    await self._pause(self.renew_s)
                first = False  # renewed at once: building the worker took part of the lease
                if runner.done():
                    reason = "worker_exited"
                    error = runner.exception() if not runner.cancelled() else None
                    raise RuntimeError(f"the source queue's worker exited: {error!r}") from error
                if self.stop.is_set():
                    break
                if not self.fresh():
                    # Renewals were late (the process was hung, the ledger slow): a standby
                    # may own the queue by now. Stop serving before anything else runs.
                    reason = "lease_stale"
                    break
                sent = time.monotonic()
                try:
                    renewed = await conn.fetchval(
                        _RENEW, self.task_queue, token, lease_ms, timeout=self.check_timeout_s
                    )
                except TimeoutError:
                    continue  # late; tried again while the lease lasts
                except BaseException:
                    reason = "lease_connection_lost"
                    raise
                if renewed is None:
                    reason = "fenced"  # another process took the lease: it owns the queue now
                    break
                self._valid_until, self._renewed_at = sent + self.lease_s, sent
                if not self.owning.is_set():
                    self.owning.set()
                    log.info("source_queue.owned", task_queue=self.task_queue, token=token, lease_s=self.lease_s)
                if beat is not None:
                    beat.ok("owning")
        finally:
            self.owning.clear()
            if reason != "stopped":
                self._valid_until, self._lost = 0.0, reason  # no activity passes the fence any more
                self._lost_at = time.monotonic()
                log.warning("source_queue.lost", task_queue=self.task_queue, token=token, reason=reason)
            await self._stop_worker(worker, runner, token, reason)
            self._token, self._lost = None, None
            if reason == "stopped":
                with contextlib.suppress(Exception):
                    await conn.execute(_RELEASE, self.task_queue, token, timeout=self.check_timeout_s)
            log.info("source_queue.released", task_queue=self.task_queue, reason=reason)

    async def _stop_worker(self, worker: Worker, runner: asyncio.Task[None], token: int, reason: str) -> None:
        """Stop the queue's worker within :attr:`stop_worker_s`, else abandon it (module doc)."""
        stopping: asyncio.Future[Any] = (
            asyncio.ensure_future(worker.shutdown()) if not runner.done() else asyncio.ensure_future(asyncio.sleep(0))
        )
        both = asyncio.gather(stopping, runner, return_exceptions=True)  # the runner's failure was raised above
        try:
            await asyncio.wait_for(asyncio.shield(both), timeout=self.stop_worker_s)
        except TimeoutError:
            self.abandoned.add(both)
            both.add_done_callback(self.abandoned.discard)
            log.error(
                "source_queue.worker_abandoned",
                task_queue=self.task_queue,
                token=token,
                reason=reason,
                waited_s=self.stop_worker_s,
                still_stopping=len(self.abandoned),
            )

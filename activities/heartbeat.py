"""Heartbeating for long activities: Temporal heartbeat plus the cell's ledger lease.

:class:`Heartbeater` runs beside the activity's work and, every heartbeat interval,

* calls ``activity.heartbeat(details)`` with the latest progress details (visible in
  the Temporal UI as the pending activity's heartbeat details; the server also answers
  a heartbeat with a pending cancellation, which cancels the activity's task);
* extends the cell's lease in the ledger (``heartbeat_at``, ``lease_until``), which is
  what ``GET /jobs/{id}`` reports as ``heartbeat_at`` / ``lease_active``.

A missed heartbeat past the heartbeat timeout fails the attempt; Temporal retries it on
a live worker, which resumes from the last checkpoint (DESIGN.md decision 8).

Temporal heartbeats go out every :data:`CANCEL_PROBE_S` (1 s) or every half interval if
that is shorter (the worker's heartbeat throttle is set to match,
:func:`heartbeat_throttle`): a cancel reaches an activity only in the answer to a
heartbeat that is actually sent, so a cancel or the deadline stops a running step within
about a second whatever the configured interval (reference
``temporal-and-postgres-notes.md`` §F). The ledger lease is extended once per interval,
measured on the monotonic clock (the first beat after a freeze extends it at once; a
failed extension is tried again at the next Temporal heartbeat, not an interval later).
The first heartbeat goes out one beat after the activity started: the step that opened
the attempt already took the cell's lease, and a short activity costs no heartbeat.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from contextvars import ContextVar
from types import TracebackType
from typing import Any

import asyncpg
from temporalio import activity

from curaflow.ledger import cells as ledger_cells
from curaflow.ledger import deliveries as ledger_deliveries
from curaflow.ledger.db import LEDGER_ERRORS

#: Longest gap between two Temporal heartbeats of a running activity, in seconds: the
#: time a cancel may take to reach it.
CANCEL_PROBE_S = 1.0


#: Heartbeaters running in the current activity (a one-element list shared with
#: :func:`covering_beats`' task), so it beats only in the gaps between them.
_RUNNING: ContextVar[list[int] | None] = ContextVar("curaflow_heartbeaters", default=None)


@contextlib.asynccontextmanager
async def covering_beats(beat_s: float = CANCEL_PROBE_S) -> AsyncIterator[None]:
    """Heartbeat Temporal every ``beat_s`` seconds for the whole activity, wherever no
    :class:`Heartbeater` runs (before the first, between two): a step whose heartbeat
    timeout is short (a source step's: the source-queue lease, at least 5 s) must beat from
    its first second to its last, or it is timed out while it works.

    The first beat goes out ``beat_s`` after the start, not at once: Temporal times the
    heartbeat timeout from the activity's start (a frozen process that polled it is still
    timed out within the lease), a cancel requested while the step runs reaches it at
    the next beat either way, and a step shorter than ``beat_s`` — most of them — then
    costs no heartbeat call at all (one gRPC call and a write of the activity's state on the Temporal
    server per job before; docs/performance.md).
    """
    running = [0]
    token = _RUNNING.set(running)

    async def beat() -> None:
        while True:
            await asyncio.sleep(beat_s)
            if running[0] == 0:
                activity.heartbeat()

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        _RUNNING.reset(token)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def heartbeat_beat_s(interval_s: float) -> float:
    """Seconds between Temporal heartbeats for a heartbeat interval of ``interval_s``."""
    return min(interval_s / 2, CANCEL_PROBE_S)


class Heartbeater:
    """Async context manager that heartbeats while the activity works.

    Args:
        pool: ledger pool.
        job_id / target_id: the cell whose lease is extended.
        interval_s: heartbeat interval in seconds.
        lease_ms: lease length written with each heartbeat (the heartbeat timeout).
        send: ``(idempotency_key, owner)`` of the send this attempt has out: each ledger
            beat keeps that intent's send live too (:func:`curaflow.ledger.cells.heartbeat`),
            and an exit by an exception releases it
            (:func:`curaflow.ledger.deliveries.release_send`).
        send_lease_ms: how long each beat keeps the send live, ms (None: ``lease_ms``):
            :func:`activities.deliver.recording.send_lease_ms`.
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        job_id: str,
        target_id: str,
        interval_s: float,
        lease_ms: int,
        *,
        send: tuple[str, str] | None = None,
        send_lease_ms: int | None = None,
    ) -> None:
        self._send = send
        self._send_lease_ms = send_lease_ms
        self._pool = pool
        self._job_id = job_id
        self._target_id = target_id
        self._interval_s = interval_s
        self._lease_ms = lease_ms
        self._details: dict[str, Any] = {}
        self._task: asyncio.Task[None] | None = None
        self._running: list[int] | None = None

    def update(self, **details: Any) -> None:
        """Replace progress details; they go out with the next heartbeat."""
        self._details.update(details)

    def drop(self, key: str) -> None:
        """Remove the detail ``key`` (if set) from the next heartbeats."""
        self._details.pop(key, None)

    async def _loop(self) -> None:
        # A cancellation rides on a heartbeat's answer: beat often (module doc). The
        # ledger lease is extended once per interval.
        # The interval is measured on the monotonic clock, not counted in ticks: after the
        # process was frozen (SIGSTOP, a paused VM, a blocked loop) the first tick extends
        # the lease at once, not up to an interval later.
        beat = heartbeat_beat_s(self._interval_s)
        leased_at = time.monotonic()
        while True:
            await asyncio.sleep(beat)
            activity.heartbeat(dict(self._details))
            if time.monotonic() - leased_at >= self._interval_s - 1e-6:
                with contextlib.suppress(*LEDGER_ERRORS):
                    await ledger_cells.heartbeat(
                        self._pool,
                        self._job_id,
                        self._target_id,
                        self._lease_ms,
                        send=self._send,
                        send_lease_ms=self._send_lease_ms,
                    )
                    # Only a beat that got through starts the next interval: one that failed
                    # is tried again at the next Temporal beat, so one failure does not
                    # lapse the lease (two intervals) of an attempt that lives.
                    leased_at = time.monotonic()

    async def __aenter__(self) -> Heartbeater:
        self._running = _RUNNING.get()
        if self._running is not None:
            self._running[0] += 1
        self._task = asyncio.create_task(self._loop())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._running is not None:
            self._running[0] -= 1
        if exc is not None:
            # The attempt ends here (error or cancellation): release the cell's lease so
            # the next attempt can tell a clean end from a lost attempt (heartbeat timeout),
            # and the send it kept live, whose answer it no longer records: a retry
            # decides at once by the rule for a send that may have landed.
            with contextlib.suppress(*LEDGER_ERRORS):
                async with self._pool.acquire() as conn:
                    await ledger_cells.end_lease(conn, self._job_id, self._target_id)
                    if self._send is not None:
                        await ledger_deliveries.release_send(conn, *self._send)

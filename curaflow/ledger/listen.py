"""Wake-ups for long-polling event readers: one LISTEN connection per process, fanned out.

:func:`curaflow.ledger.events.append_event` sends ``NOTIFY curaflow_job_events,
'<job_id>'`` in the event's transaction; PostgreSQL delivers it at commit, so a woken
reader always finds the new row. :class:`EventNotifier` holds one dedicated asyncpg
connection (outside the pool) that ``LISTEN`` s on that channel and sets the
:class:`asyncio.Event` of every reader waiting on that job. The notification is only a
hint: readers always re-read the table (reference ``temporal-and-postgres-notes`` D5).

If the connection is lost the notifier reconnects with backoff and, once listening
again, wakes *every* waiter so none misses an event committed while it was deaf.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import asyncpg

from curaflow.ledger.events import NOTIFY_CHANNEL
from curaflow.logs import get_logger

log = get_logger("curaflow.listen")


class EventNotifier:
    """Fan-out of ``curaflow_job_events`` notifications to per-job waiters.

    Args:
        dsn: the ledger's PostgreSQL URL (a dedicated connection is opened).
        channel: the NOTIFY channel.

    Usage::

        with notifier.watch(job_id) as woken:
            woken.clear(); page = read(); ...; await asyncio.wait_for(woken.wait(), t)
    """

    def __init__(self, dsn: str, channel: str = NOTIFY_CHANNEL) -> None:
        self.dsn = dsn
        self.channel = channel
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._conn: asyncpg.Connection | None = None
        self._lost = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self.listening = asyncio.Event()

    async def start(self) -> EventNotifier:
        """Connect and LISTEN; keeps reconnecting in the background until :meth:`stop`.

        Raises:
            OSError / asyncpg.PostgresError: the first connection attempt failed.
        """
        await self._connect()
        self._task = asyncio.create_task(self._supervise())
        return self

    async def stop(self) -> None:
        """Stop listening, close the connection and wake every waiter."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._close()
        self._wake_all()

    @contextlib.contextmanager
    def watch(self, job_id: str) -> Iterator[asyncio.Event]:
        """Register a waiter for ``job_id`` for the duration of the ``with`` block.

        Yields:
            An event set whenever an event of ``job_id`` commits (and when the listener
            reconnects). Clear it *before* each read to never miss a wake-up.
        """
        woken = asyncio.Event()
        self._waiters.setdefault(job_id, set()).add(woken)
        try:
            yield woken
        finally:
            waiters = self._waiters.get(job_id)
            if waiters is not None:
                waiters.discard(woken)
                if not waiters:
                    self._waiters.pop(job_id, None)

    @property
    def waiting(self) -> int:
        """Number of registered waiters (all jobs)."""
        return sum(len(w) for w in self._waiters.values())

    # ---- internals ------------------------------------------------------------------

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        for woken in self._waiters.get(payload, ()):
            woken.set()

    def _on_lost(self, _conn: Any) -> None:
        self.listening.clear()
        self._lost.set()

    def _wake_all(self) -> None:
        for waiters in self._waiters.values():
            for woken in waiters:
                woken.set()

    async def _connect(self) -> None:
        conn = await asyncpg.connect(self.dsn)
        conn.add_termination_listener(self._on_lost)
        await conn.add_listener(self.channel, self._on_notify)
        self._conn = conn
        self._lost.clear()
        self.listening.set()

    async def _close(self) -> None:
        conn, self._conn = self._conn, None
        self.listening.clear()
        if conn is not None and not conn.is_closed():
            with contextlib.suppress(OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                await conn.close(timeout=2)

    async def _supervise(self) -> None:
        delay = 0.2
        while not self._stopping:
            await self._lost.wait()
            await self._close()
            while not self._stopping:
                try:
                    await self._connect()
                except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as err:
                    log.warning("listen.reconnect_failed", error=type(err).__name__, retry_in_s=delay)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)
                    continue
                delay = 0.2
                log.info("listen.reconnected", channel=self.channel)
                self._wake_all()
                break

"""Wake-ups for long-polling event readers: one LISTEN connection per process, fanned out.

:func:`curaflow.ledger.events.append_event` sends ``NOTIFY curaflow_job_events,
'<job_id>'`` in the event's transaction; PostgreSQL delivers it at commit, so a woken
reader always finds the new row. :class:`EventNotifier` holds one dedicated asyncpg
connection (outside the pool) that ``LISTEN`` s on that channel and sets the
:class:`asyncio.Event` of every reader waiting on that job. The notification is only a
hint: readers always re-read the table (reference ``temporal-and-postgres-notes`` D5).

If the connection is lost the notifier reconnects with backoff (a supervised loop,
:mod:`curaflow.observability.supervision`) and, once listening again, wakes *every* waiter so none
misses an event committed while it was deaf.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import asyncpg

from curaflow.ledger.events import NOTIFY_CHANNEL
from curaflow.observability.logs import get_logger
from curaflow.observability.supervision import Beat, Supervisor

log = get_logger("curaflow.listen")


class EventNotifier:
    """Fan-out of ``curaflow_job_events`` notifications to per-job waiters.

    The connection is a supervised loop named ``listen`` (:mod:`curaflow.observability.supervision`):
    a lost connection (killed backend, PostgreSQL restart) or any other failure is
    logged, counted and replaced after a backoff; once listening again every waiter is
    woken so none misses an event committed while the process was deaf. While the
    connection lives it is checked every ``ping_s`` seconds (a half-open connection
    would otherwise look alive for ever).

    Args:
        dsn: the ledger's PostgreSQL URL (a dedicated connection is opened).
        channel: the NOTIFY channel.
        ping_s: interval of the liveness check of the listening connection.

    Usage::

        with notifier.watch(job_id) as woken:
            woken.clear(); page = read(); ...; await asyncio.wait_for(woken.wait(), t)
    """

    def __init__(self, dsn: str, channel: str = NOTIFY_CHANNEL, *, ping_s: float = 10.0) -> None:
        self.dsn = dsn
        self.channel = channel
        self.ping_s = ping_s
        self._waiters: dict[str, set[asyncio.Event]] = {}
        #: Set by :meth:`release_waiters`: the server is stopping, waiters answer now.
        self.closing = False
        self._conn: asyncpg.Connection | None = None
        self._lost = asyncio.Event()
        self._stop = asyncio.Event()
        self._supervisor: Supervisor | None = None
        self._own_supervisor = False
        self.listening = asyncio.Event()

    async def start(self, supervisor: Supervisor | None = None) -> EventNotifier:
        """Connect and LISTEN; keeps the connection alive in the background until :meth:`stop`.

        Args:
            supervisor: the process's supervisor (None: a private one that only logs).

        Raises:
            OSError / asyncpg.PostgresError: the first connection attempt failed.
        """
        await self._connect()
        if supervisor is None:
            supervisor = Supervisor(self._stop)
            self._own_supervisor = True
        self._supervisor = supervisor
        supervisor.loop("listen", self._listen)
        return self

    async def stop(self) -> None:
        """Stop listening, close the connection and wake every waiter."""
        self._stop.set()
        if self._own_supervisor and self._supervisor is not None:
            await self._supervisor.close()
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
        if self.closing:
            woken.set()
        self._waiters.setdefault(job_id, set()).add(woken)
        try:
            yield woken
        finally:
            waiters = self._waiters.get(job_id)
            if waiters is not None:
                waiters.discard(woken)
                if not waiters:
                    self._waiters.pop(job_id, None)

    def release_waiters(self) -> None:
        """The server is stopping: wake every waiter, now and from now on (:attr:`closing`).

        A request waiting on a job's events (a long poll, a cancel waiting for the job to
        end) then answers with what the ledger holds, instead of holding the server's
        graceful shutdown for the rest of its wait (up to 30 s). Listening goes on: the
        connection is closed by :meth:`stop`, at the end of the shutdown.
        """
        self.closing = True
        self._wake_all()

    @property
    def waiting(self) -> int:
        """Number of registered waiters (all jobs)."""
        return sum(len(w) for w in self._waiters.values())

    # ---- internals ------------------------------------------------------------------

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        for woken in self._waiters.get(payload, ()):
            woken.set()

    def _on_lost(self, conn: Any) -> None:
        if self._conn is not None and conn is not self._conn:
            return  # a replaced connection closing late: not the current one
        self.listening.clear()
        self._lost.set()

    def _wake_all(self) -> None:
        for waiters in self._waiters.values():
            for woken in waiters:
                woken.set()

    async def _connect(self) -> None:
        conn = await asyncpg.connect(self.dsn, timeout=10)
        try:
            conn.add_termination_listener(self._on_lost)
            await conn.add_listener(self.channel, self._on_notify)
        except BaseException:
            conn.terminate()
            raise
        self._conn = conn
        self._lost.clear()
        self.listening.set()

    async def _close(self) -> None:
        conn, self._conn = self._conn, None
        self.listening.clear()
        if conn is not None and not conn.is_closed():
            try:
                await conn.close(timeout=2)
            except Exception:  # noqa: BLE001 - a broken connection: drop it
                conn.terminate()

    def _stopping(self) -> bool:
        return self._stop.is_set() or (self._supervisor is not None and self._supervisor.stop.is_set())

    async def _wait_lost_or_stop(self, timeout_s: float) -> None:
        waits = [asyncio.ensure_future(self._lost.wait()), asyncio.ensure_future(self._stop.wait())]
        if self._supervisor is not None:
            waits.append(asyncio.ensure_future(self._supervisor.stop.wait()))
        try:
            await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()

    async def _listen(self, beat: Beat) -> None:
        """One life of the listening connection (the supervised loop's body)."""
        try:
            if self._conn is None or self._conn.is_closed() or self._lost.is_set():
                await self._close()
                await self._connect()
                log.info("listen.reconnected", channel=self.channel)
                self._wake_all()
            beat.ok()
            while not self._stopping():
                await self._wait_lost_or_stop(self.ping_s)
                if self._stopping():
                    return
                conn = self._conn
                if self._lost.is_set() or conn is None or conn.is_closed():
                    raise ConnectionError("the LISTEN connection was lost")
                await conn.fetchval("SELECT 1", timeout=max(2.0, self.ping_s / 2))
                beat.ok()
        except BaseException:
            self.listening.clear()
            raise

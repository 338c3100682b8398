"""The connect-time address check: an httpcore network backend behind httpx's transport.

httpx resolves and connects inside httpcore's network backend, so that is where the
resolved address can be checked *and then used*: :class:`GuardedBackend` resolves the
host itself, keeps only the addresses the :class:`~curaflow.outbound.destinations.Destinations`
allow, and connects to one of those addresses (never resolving the name a second time,
so a name cannot resolve to a public address for the check and to 127.0.0.1 for the
connection). It looks the name up on threads of its own (:class:`Resolver`), one lookup
of a name at a time, never on the event loop's default executor: a lookup no cancel
stops, of a name whose DNS whoever owns it may make hang, holds one thread of its
client's, not the process's file and connection work. TLS still verifies the
certificate against the host *name*: httpcore passes the URL's host as
``server_hostname`` when it starts TLS on the stream. A TLS handshake cut from outside
(a cancel, the total time limit) closes its connection (:class:`_ClosedOnCut`, which
also answers the pool's "is this idle connection closed?" from the socket it keeps).

:func:`guarded_transport` is ``httpx.AsyncHTTPTransport`` with its connection pool built
on that backend (httpx has no public parameter for the backend; the pool is httpcore's
public ``AsyncConnectionPool``). Environment proxies are not used: a proxy would connect
on our behalf past the check. The transports built on one thread verify certificates with
one TLS context (:func:`tls_context`): building one loads the system's CA bundle, ~20 ms
of CPU, and each route has a client of its own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import ipaddress
import select
import socket
import ssl
import threading
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

from curaflow.outbound.destinations import Destinations
from curaflow.outbound.errors import AddressRefused, DestinationRefused

#: The most bytes read for one answer's head — its final status line and headers and every
#: informational (1xx) head before them, with whatever of the body came in the same reads.
#: httpcore takes any number of 1xx heads and parses each (h11 bounds one head, at 100
#: KiB): a party sending ``102 Processing`` for ever held the exchange for its whole time
#: with the event loop starved by the parsing (until 2026-12-07). Past this the answer is
#: an ``httpcore.RemoteProtocolError`` (``httpx.RemoteProtocolError``: a transport error,
#: one retried attempt).
MAX_ANSWER_HEAD_BYTES = 256 * 1024
#: Read size while an answer's head is read (bytes): small reads, so the loop is given
#: back between them however fast the party sends.
HEAD_READ_BYTES = 16 * 1024


class HeadBudget:
    """What is left of :data:`MAX_ANSWER_HEAD_BYTES` for the head being read.

    Attributes:
        left: bytes still allowed.
    """

    def __init__(self) -> None:
        self.left = MAX_ANSWER_HEAD_BYTES


#: The budget of the answer head the current task is reading; None when it reads none
#: (a body, a request being written). Set by the exchange's trace hook
#: (:func:`head_started` / :func:`head_ended`, ``curaflow.outbound.client``): httpcore
#: reads a connection in the task that sends the request.
_HEAD_BUDGET: contextvars.ContextVar[HeadBudget | None] = contextvars.ContextVar("answer_head_budget", default=None)


def head_started() -> None:
    """The current task begins reading an answer's head (httpcore's
    ``receive_response_headers.started``): reads are bounded by :data:`MAX_ANSWER_HEAD_BYTES`."""
    _HEAD_BUDGET.set(HeadBudget())


def head_ended() -> None:
    """The head was read, or reading it failed: reads are the body's again."""
    _HEAD_BUDGET.set(None)


class _ClosedOnCut(httpcore.AsyncNetworkStream):
    """A connected stream whose TLS handshake, when cut from outside (a cancel, the
    attempt's total time), closes the connection.

    httpcore's backend closes the socket when the handshake *fails*, not when the task is
    cancelled during it (its ``except Exception``): the TCP connection would stay open,
    outside the pool, with the party still waiting for the rest of the ClientHello —
    until the garbage collector. Closing is synchronous in the transport (before the first
    ``await`` of ``aclose``), so it happens although the task is being cancelled. The
    stream :meth:`start_tls` returns is one of these too. It answers httpcore's
    ``is_readable`` from the socket it keeps (:meth:`get_extra_info`).
    """

    def __init__(self, stream: httpcore.AsyncNetworkStream) -> None:
        self._stream = stream
        self._socket: socket.socket | None = None

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        """As the stream's; while an answer's head is read (:func:`head_started`), at most
        :data:`HEAD_READ_BYTES` at once and :data:`MAX_ANSWER_HEAD_BYTES` in all.

        Raises:
            httpcore.RemoteProtocolError: the head went over :data:`MAX_ANSWER_HEAD_BYTES`.
        """
        budget = _HEAD_BUDGET.get()
        if budget is None:
            return await self._stream.read(max_bytes, timeout)
        data = await self._stream.read(min(max_bytes, HEAD_READ_BYTES), timeout)
        budget.left -= len(data)
        if budget.left < 0:
            raise httpcore.RemoteProtocolError(
                f"the answer's head, with its informational answers, went over {MAX_ANSWER_HEAD_BYTES} bytes"
            )
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._stream.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        try:
            return _ClosedOnCut(await self._stream.start_tls(ssl_context, server_hostname, timeout))
        except BaseException:
            with contextlib.suppress(BaseException):
                await self._stream.aclose()
            raise

    def get_extra_info(self, info: str) -> Any:
        """As the stream's, with its socket kept: httpcore asks every idle connection of
        the pool ``is_readable`` before it assigns a request (``has_expired``), and anyio
        builds its table of attributes for each question (~6 µs, against ~1 µs for a
        poll of the kept socket; ~300 questions a job with a busy pool). The socket is
        the connection's for its whole life (a TLS stream is a new object, not this one)."""
        if info in ("socket", "is_readable"):
            if self._socket is None:
                self._socket = self._stream.get_extra_info("socket")
            if self._socket is None:  # a stream without one: it answers for itself
                return self._stream.get_extra_info(info)
            return self._socket if info == "socket" else _readable(self._socket)
        return self._stream.get_extra_info(info)


def _readable(sock: socket.socket) -> bool:
    """True when a read on ``sock`` would not wait (data, or the peer's close), or the
    socket is closed: httpcore's ``is_socket_readable`` on Linux (``poll`` with no wait)."""
    fd = sock.fileno()
    if fd < 0:
        return True
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


#: Threads of one data client's :class:`Resolver`: names looked up at once (one thread a
#: name, however many exchanges wait for it). A data client reaches few names — Pixiv's
#: image host, the callback allow-list's hosts.
RESOLVER_THREADS = 8


class Resolver:
    """Looks up a data destination's name on threads of its own, one lookup of a name at a
    time.

    A lookup runs ``socket.getaddrinfo`` on a thread, which no cancel stops: an exchange
    cut by its time limit returns, its lookup holds its thread until the system resolver
    gives up (5 s a try and a server by default; a name whose authoritative server drops
    queries is chosen by whoever owns it — a consumer's callback host). Until 2026-12-06
    these lookups ran on the event loop's default executor, which the artifact store
    writes every image chunk with and every configured destination resolves its name
    with: enough pushes at once to a callback host whose DNS hangs stalled the worker's
    files and connections for every owner. Now they run on :data:`RESOLVER_THREADS` threads
    of the client's own, and the exchanges that want a name whose lookup is under way wait
    for that lookup (each within its own time) instead of starting another: a name whose
    DNS hangs holds one thread, whatever it is asked for.
    """

    def __init__(self, threads: int = RESOLVER_THREADS) -> None:
        self._threads = threads
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._pending: dict[tuple[asyncio.AbstractEventLoop, str, int], asyncio.Future[list[Any]]] = {}

    async def lookup(self, host: str, port: int) -> list[Any]:
        """``getaddrinfo(host, port, type=SOCK_STREAM)``'s answer; a cancel of the caller
        leaves the lookup running for the others waiting for it.

        Raises:
            socket.gaierror: as ``getaddrinfo``.
            RuntimeError: the resolver was closed.
        """
        loop = asyncio.get_running_loop()
        key = (loop, host, port)
        pending = self._pending.get(key)
        if pending is None:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    max_workers=self._threads, thread_name_prefix="curaflow-resolver"
                )
            pending = loop.run_in_executor(
                self._executor, functools.partial(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
            )
            self._pending[key] = pending
            pending.add_done_callback(functools.partial(self._settled, key))
        return await asyncio.shield(pending)

    def _settled(self, key: tuple[asyncio.AbstractEventLoop, str, int], future: asyncio.Future[list[Any]]) -> None:
        if self._pending.get(key) is future:
            del self._pending[key]
        if not future.cancelled():
            future.exception()  # retrieved: nobody may be waiting any more

    def close(self) -> None:
        """Stop taking lookups; those not started are dropped, a running one ends on its
        thread (nothing stops ``getaddrinfo``)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's default backend, connecting only to addresses ``destinations`` allow; a
    data destination's name is looked up by the backend's own :class:`Resolver`.

    Raises (from :meth:`connect_tcp`):
        DestinationRefused: port 0 (a unix socket).
        AddressRefused: no address resolved, or none allowed.
    """

    def __init__(self, destinations: Destinations) -> None:
        self._destinations = destinations
        self._inner = httpcore.AnyIOBackend()
        self.resolver = Resolver()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Resolve ``host``, check every address, connect to the first allowed one."""
        if port <= 0:
            raise DestinationRefused(f"port {port} is not a destination")
        if not self._destinations.check_addresses:
            return _ClosedOnCut(
                await self._inner.connect_tcp(
                    host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            )
        try:
            infos = await self.resolver.lookup(host, port)
        except socket.gaierror as err:
            raise httpcore.ConnectError(f"cannot resolve the host: {err.strerror}") from err
        allowed: list[str] = []
        refused: list[str] = []
        for *_, sockaddr in infos:
            text = str(sockaddr[0]).split("%", 1)[0]
            address = ipaddress.ip_address(text)
            (allowed if self._destinations.allows_address(address) else refused).append(text)
        if not allowed:
            raise AddressRefused(
                f"the host resolves only to addresses that are not allowed ({', '.join(sorted(set(refused)))}); "
                "allow a network in outbound.private_networks if this is intended"
            )
        last: Exception | None = None
        for address_text in dict.fromkeys(allowed):
            try:
                return _ClosedOnCut(
                    await self._inner.connect_tcp(
                        address_text, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                    )
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as err:
                last = err
        assert last is not None
        raise last

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        """Unix sockets are never a destination."""
        raise DestinationRefused("unix sockets are not a destination")

    async def sleep(self, seconds: float) -> None:
        """As httpcore's backend."""
        await self._inner.sleep(seconds)


#: This thread's TLS client context (:func:`tls_context`).
_THREAD = threading.local()


def tls_context() -> ssl.SSLContext:
    """This thread's TLS client context: httpx's defaults (the system's CA bundle via
    certifi, hostname checks, TLS 1.2 or newer), environment variables ignored.

    Built on first use and shared by every transport built on the thread
    (:func:`guarded_transport`): loading the CA bundle costs ~20 ms of CPU a context, and
    a worker or an API process builds all its clients on its event loop's thread. One per
    thread, not per process: httpcore sets the context's ALPN list before each TLS
    connection (``set_alpn_protocols``, the same ``http/1.1`` every time here), and
    OpenSSL does not guard that against a handshake on the same context in another thread.
    """
    context: ssl.SSLContext | None = getattr(_THREAD, "context", None)
    if context is None:
        context = _THREAD.context = httpx.create_ssl_context(trust_env=False)
    return context


def guarded_transport(
    destinations: Destinations, limits: httpx.Limits, backend: GuardedBackend | None = None
) -> httpx.AsyncHTTPTransport:
    """An ``httpx.AsyncHTTPTransport`` whose connections go through ``backend`` (a new
    :class:`GuardedBackend` of ``destinations`` when None), verifying certificates with
    this thread's :func:`tls_context`."""
    context = tls_context()
    transport = httpx.AsyncHTTPTransport(verify=context, limits=limits, trust_env=False)
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=context,
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=backend or GuardedBackend(destinations),
    )
    return transport

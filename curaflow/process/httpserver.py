"""Serve an ASGI app with uvicorn inside the current event loop, on a pre-bound socket.

Used for the replay server inside a worker, the HTTP API inside ``curaflow dev`` and the
third-party fakes in tests. Binding the socket first means port 0 works and the real
port is known before the server starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import sys
from collections.abc import Callable, Iterator
from typing import Any

import uvicorn

from curaflow.protocol.connections import API_KEEP_ALIVE_S

#: The largest request head (request line and headers) an API server reads, bytes: 431 beyond.
MAX_HEAD_BYTES = 65_536

#: uvicorn's WebSocket protocol of every server curaflow runs: none. No route of curaflow's
#: is a WebSocket, and RFC 9110 §7.8 lets a server ignore ``Upgrade``: a request asking for
#: one is served as the HTTP request it also is, with its route's answer. With a WebSocket
#: library installed (``uvicorn[standard]`` brings ``websockets``) uvicorn took the handshake
#: to the app as a WebSocket no route serves — ``403`` with an empty body, before any route,
#: token check or request log (until 2026-12-07).
WEBSOCKETS = "none"


#: RFC 9112 §3: ``method SP request-target SP HTTP-version``; a method is a token (RFC 9110
#: §5.6.2), a target visible ASCII (RFC 9112 §3.2), the version ``HTTP/`` DIGIT ``.`` DIGIT (§2.3).
_REQUEST_LINE = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+ [\x21-\x7e]+ HTTP/[0-9]\.[0-9]")
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]*")
_TARGET = re.compile(rb"[\x21-\x7e]*")


def request_line_verdict(head: bytes) -> str | None:
    """What a request head whose method the parser refused is, judged by its request line.

    The parser (llhttp) knows a closed list of methods and refuses any other at its first
    byte that no known method has there ("FO" of ``FOO``), before the line is whole. A
    well-formed line with a method the server does not know is RFC 9110 §9.1's "unrecognized
    method" (``501``); anything else is a request HTTP/1.1 cannot read (``400``).

    Args:
        head: the head's bytes so far, from its first byte (empty lines before the request
            line are ignored, RFC 9112 §2.2; a bare LF ends a line as CRLF does).

    Returns:
        ``"unknown_method"`` (a whole, well-formed request line), ``"malformed_request"``
        (bytes no request line has, or a whole line that is none), or None (the line is not
        whole yet and may still be one: wait for more).
    """
    head = head.lstrip(b"\r\n")
    end = head.find(b"\n")
    if end >= 0:
        return "unknown_method" if _REQUEST_LINE.fullmatch(head[:end].removesuffix(b"\r")) else "malformed_request"
    method, sp, rest = head.partition(b" ")
    target, sp2, version = rest.partition(b" ")
    prefix = (
        _TOKEN.fullmatch(method) is not None
        and (not sp or (method != b"" and _TARGET.fullmatch(target) is not None))
        and (not sp2 or (target != b"" and re.sub(rb"[0-9]", b"0", version) == b"HTTP/0.0\r"[: len(version)]))
    )
    return None if prefix else "malformed_request"


def _refusal(status: int, phrase: str, message: str, reason: str | None = None) -> bytes:
    """A whole HTTP/1.1 answer with a protocol ``Error`` body (``detail.reason`` when
    given), closing the connection."""
    error: dict[str, Any] = {"code": "invalid_params", "message": message, "retryable": False}
    if reason is not None:
        error["detail"] = {"reason": reason}
    body = json.dumps({"error": error}).encode()
    return (
        f"HTTP/1.1 {status} {phrase}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode() + body


def bounded_http(head_timeout_s: float, max_head_bytes: int = MAX_HEAD_BYTES) -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 protocol (httptools) with the request head bounded in time and size.

    uvicorn runs no timer while it waits for a head — on a new connection, or on a kept-alive
    one once the next request's first byte came — and reads a head of any size: a client
    could hold a connection (a descriptor) for ever with nothing, or one header line now and
    then, and a few thousand such connections stopped the API answering anyone.

    The protocol returned waits at most ``head_timeout_s`` for a whole head whenever it waits
    for one: a connection that sent nothing is then closed; a head begun is answered ``408``
    (a protocol ``Error``, ``Connection: close``). A head over ``max_head_bytes`` is answered
    ``431``. Bodies are not heads: ``api.body_timeout_ms`` and ``api.max_body_bytes`` bound them.
    A request answered before its body ended (a route that ignores its body, a ``413`` on
    its ``Content-Length``) has the rest of its body read and dropped by the parser; the next
    head is awaited once that body has ended (until 2026-12-07 from the answer on: the body's
    rest counted as the next head, and the next request on the connection was answered
    ``431``, or an unasked ``408`` was sent while the body trickled in). That rest is read
    for ``head_timeout_s`` at most, then the connection is closed; the body of a request
    pipelined behind the one answered is that request's own, read by its route (until
    2026-12-07 it was taken for the answered one's rest and its connection closed).
    An answer to a request sent with ``Expect: 100-continue`` begun before its body arrived
    whole, no ``100 Continue`` sent, closes the connection (:meth:`_close_unless_continued`):
    its client may skip that body (RFC 9110 §10.1.1), and the bytes after the head could be
    the body or the next request (until 2026-12-07 the next request was eaten as the body).
    A request asking to upgrade (``Upgrade: h2c`` from ``curl --http2``, ``websocket``) is
    read as the HTTP/1.1 request it also is, its body included (:data:`WEBSOCKETS`; the
    parser ends such a request at its head — until 2026-12-07 the app read an empty body).

    A request the parser cannot read — its framing (a ``Content-Length`` that is no
    number, two of them, one beside ``Transfer-Encoding: chunked``, a chunk size that is no
    number) or its syntax (a header name with a space, no request line) — is answered
    ``400`` with the protocol ``Error`` (``detail.reason: malformed_request``,
    ``Connection: close``), not uvicorn's ``text/plain`` "Invalid HTTP request received."
    (2026-12-07): every answer of the API is the protocol's. A request whose method the
    parser does not know (``FOO``, ``get``, a long made-up token) but whose request line is
    well-formed (:func:`request_line_verdict`) is read, not malformed: it is answered ``501
    Not Implemented`` (RFC 9110 §9.1, ``detail.reason: unknown_method``, ``Connection:
    close``; until 2026-12-07 the ``400`` above). The parser refuses such a method at its
    first unknown byte, so the answer waits for the line's end (within the head's time and
    size). Judged only when the head's first byte is known — the connection's first request,
    or the next one once the previous was answered; a request pipelined behind another in
    one read (also the read that ends the rest of a body answered early) stays ``400``.
    A refusal of bytes behind requests still being served is written after their answers
    (:meth:`_refuse`), a client reading answers in its requests' order.
    A client that ends its half of the connection once its requests are sent still gets
    their answers, then the connection closes (:meth:`eof_received`).

    Args:
        head_timeout_s: longest wait for a whole head (``api.head_timeout_ms``), seconds.
        max_head_bytes: largest head read.

    Returns:
        A protocol class for ``uvicorn.Config(http=...)``.
    """
    import httptools
    from uvicorn._types import ASGISendEvent
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

    class BoundedHttpToolsProtocol(HttpToolsProtocol):
        _head_timer: asyncio.TimerHandle | None = None
        _head_bytes = 0
        _tail = b""  # the last bytes of the head so far: its end may span two reads
        _line: bytes | None = None  # the awaited head's bytes up to its request line's end (None: not known)
        _method_refused = False  # the parser refused the method before the request line was whole
        _in_body = False  # the parser is inside a request's body (its head read, its end not yet)
        _body_after_upgrade = False  # a head asking to upgrade declared a body, which the parser left
        _framing_only = False  # the parser is fed a head that only frames a body already begun
        _drain_timer: asyncio.TimerHandle | None = None  # bounds the rest of a body answered early
        _head_mid_read = False  # the awaited head may begin inside the read being parsed
        _refusal_owed: bytes | None = None  # a refusal written once the requests before it are answered
        _client_ended = False  # the client ended its half: answer what it sent, then close

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._await_head()

        def connection_lost(self, exc: Exception | None) -> None:
            self._head_arrived()
            self._body_ended()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._head_timer is not None:  # a head is awaited: measured before it is parsed
                seen = self._tail + data
                end = seen.find(b"\r\n\r\n")
                self._head_bytes += len(data) if end < 0 else end + 4 - len(self._tail)
                self._tail = seen[-3:]
                if self._head_bytes > max_head_bytes:
                    self._refuse(431, "Request Header Fields Too Large", f"request head over {max_head_bytes} bytes")
                    return
                if self._line is not None and b"\n" not in self._line.lstrip(b"\r\n"):
                    self._line += data
            if self._refusal_owed is not None:  # the parser is done with this connection
                return
            if self._method_refused:  # the parser is done with this connection: the line decides
                self._answer_unknown_method()
                return
            try:
                self._feed(data)
            finally:
                self._head_mid_read = False

        def _feed(self, data: bytes) -> None:
            """uvicorn's ``data_received``, but a request asking to upgrade stays HTTP/1.1
            (:meth:`_ignore_upgrade`) instead of losing the bytes after its head."""
            self._unset_keepalive_if_required()
            try:
                self.parser.feed_data(data)
                return
            except httptools.HttpParserUpgrade as upgrade:
                after_head = int(upgrade.args[0])  # where the parser stopped: the bytes after the head
            except httptools.HttpParserError:
                self._unreadable()
                return
            if self._should_upgrade():  # a WebSocket, when the server serves them (WEBSOCKETS)
                self.handle_websocket_upgrade()
            else:
                self._ignore_upgrade(data[after_head:])

        def _unreadable(self) -> None:
            """uvicorn's answer to bytes its parser refused (in the parser's ``except``):
            its warning, then :meth:`send_400_response`."""
            self.logger.warning("Invalid HTTP request received.")
            self.send_400_response("Invalid HTTP request received.")

        def _ignore_upgrade(self, rest: bytes) -> None:
            """Read on as HTTP/1.1 after a head asking to upgrade (RFC 9110 §7.8: a server may
            ignore ``Upgrade``): the parser ends such a request at its head and takes every
            byte after it for the other protocol's, so a new parser reads ``rest`` — the
            request's body first when it declared one (framed by a head that only says how
            long it is: ``Content-Length`` or ``Transfer-Encoding`` as the request sent them),
            then the next requests."""
            self.parser = httptools.HttpRequestParser(self)
            with contextlib.suppress(AttributeError):  # as uvicorn sets its parser (httptools >= 0.6.3)
                self.parser.set_dangerous_leniencies(lenient_data_after_close=True)
            if self._body_after_upgrade:
                self._body_after_upgrade = False
                framing = b"".join(
                    name + b": " + value + b"\r\n"
                    for name, value in self.headers
                    if name in (b"content-length", b"transfer-encoding")
                )
                self._framing_only = True
                try:
                    self.parser.feed_data(b"POST / HTTP/1.1\r\n" + framing + b"\r\n")
                except httptools.HttpParserError:
                    self._unreadable()
                    return
                finally:
                    self._framing_only = False
            if rest:
                self._feed(rest)

        def _declares_body(self) -> bool:
            """The request just read says a body follows (``Transfer-Encoding``, or a
            ``Content-Length`` other than 0); a ``CONNECT`` has none to read."""
            if self.scope.get("method") == "CONNECT":
                return False
            return any(
                name == b"transfer-encoding" or (name == b"content-length" and value.strip().strip(b"0"))
                for name, value in self.headers
            )

        def on_message_begin(self) -> None:
            if self._framing_only:
                return
            if self._head_mid_read and self._line is not None:
                # The head begins inside a read whose earlier bytes were another request's:
                # its first bytes were never recorded, its request line cannot be judged.
                self._line = None
            super().on_message_begin()

        def on_url(self, url: bytes) -> None:
            if not self._framing_only:
                super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            if not self._framing_only:
                super().on_header(name, value)

        def on_headers_complete(self) -> None:
            if self._framing_only:
                return  # the request's head was read: only its body's framing is new
            self._head_arrived()
            self._in_body = True
            super().on_headers_complete()
            if self.cycle is not None and self.cycle.waiting_for_100_continue:
                self._close_unless_continued(self.cycle)

        def _close_unless_continued(self, cycle: RequestResponseCycle) -> None:
            """An answer to a request sent with ``Expect: 100-continue`` begun before its body
            arrived whole and with no ``100 Continue`` sent (a route that refuses at the head:
            ``401``, ``413``, ``415``) closes the connection: ``Connection: close`` on it, then
            closed. Its client may skip the body once answered (RFC 9110 §10.1.1), or have sent
            it as the answer left: the bytes after the head cannot be told apart (the body, or
            the next request). Until 2026-12-07 the connection stayed open and a client that
            skipped the body had its next request eaten as that body. A body read (``100
            Continue`` sent), already whole when the answer begins, or none leaves it open."""
            send = cycle.send

            async def send_closing_unless_continued(message: ASGISendEvent) -> None:
                if message["type"] == "http.response.start" and cycle.waiting_for_100_continue and cycle.more_body:
                    cycle.keep_alive = False  # uvicorn adds ``Connection: close`` and closes after the answer
                await send(message)

            cycle.send = send_closing_unless_continued  # type: ignore[method-assign]

        def on_message_complete(self) -> None:
            if self.parser.should_upgrade() and not self._should_upgrade() and self._declares_body():
                self._body_after_upgrade = True  # ended at its head by the parser: its body comes
                return
            self._in_body = False
            self._body_ended()
            super().on_message_complete()
            if self.cycle is not None and self.cycle.response_complete:
                self._next_head()  # answered before its body ended: the next head comes now
                self._head_mid_read = True  # ... maybe in the rest of this read

        def eof_received(self) -> bool:  # type: ignore[override]  # asyncio.Protocol's: True keeps the transport open
            """The client ended its half of the connection (RFC 9112 §9.6: it may still read):
            the requests it sent whole are still answered, then the connection closes; a
            request left unfinished (its body, or the next head, cut by that end) never comes.
            uvicorn closed the connection here: a request still served lost its answer
            (until 2026-12-07).

            Returns:
                True (the transport stays open to write) while a request read whole is
                being served or waits to be; False (asyncio closes the transport) otherwise.
            """
            self._client_ended = True
            return not self._in_body and self._serving()

        def on_response_complete(self) -> None:
            if self._client_ended:
                super().on_response_complete()  # the next request read before the end starts
                if not self._serving():
                    if self._refusal_owed is not None:
                        self._refuse_now(self._refusal_owed)
                    self.transport.close()
                return
            if self._refusal_owed is not None:
                super().on_response_complete()  # the next request read before the refused bytes starts
                if not self._serving():
                    self._refuse_now(self._refusal_owed)
                return
            # The body the parser is inside is the last request read's (``self.cycle``): the
            # answered one's rest only when that request is the one answered — not a request
            # pipelined behind it, whose body its own route reads (uvicorn starts it now).
            answered_early = self._in_body and self.cycle is not None and self.cycle.response_complete
            super().on_response_complete()
            if not self._in_body:
                self._next_head()
            elif answered_early and self._drain_timer is None and not self.transport.is_closing():
                # Answered before its body ended: the rest is read for the head's time at
                # most (uvicorn's keep-alive timer stops at every byte that comes).
                self._drain_timer = self.loop.call_later(head_timeout_s, self._drain_late)

        def _body_ended(self) -> None:
            if self._drain_timer is not None:
                self._drain_timer.cancel()
                self._drain_timer = None

        def _drain_late(self) -> None:
            """The rest of an answered body did not end in time: nothing is owed the
            client (its request was answered), the connection is closed."""
            self._drain_timer = None
            if self._in_body:
                self.transport.close()

        def _next_head(self) -> None:
            """Await the next request's head, unless one is already queued (pipelined) or
            the connection is closing (the keep-alive timer closes an idle one first)."""
            if not self.transport.is_closing() and not self.pipeline:
                self._await_head()

        def _await_head(self) -> None:
            self._head_arrived()
            self._head_bytes, self._tail, self._line = 0, b"", b""
            self._head_timer = self.loop.call_later(head_timeout_s, self._head_late)

        def _head_arrived(self) -> None:
            self._line = None
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_late(self) -> None:
            self._head_timer = None
            if self.transport.is_closing() or (self.cycle is not None and not self.cycle.response_complete):
                return
            if self._head_bytes:
                self._refuse(408, "Request Timeout", f"the request head did not arrive within {head_timeout_s:g} s")
            else:
                self.transport.close()

        def send_400_response(self, msg: str) -> None:
            """uvicorn's answer to a request its parser refused (``msg`` is its generic
            text): the protocol ``Error`` instead, then the connection closes as uvicorn
            closes it (nothing after the unreadable bytes can be told apart). uvicorn calls
            it while it handles the parser's exception: a refused method is judged by its
            request line (:meth:`_answer_unknown_method`)."""
            if isinstance(sys.exc_info()[1], httptools.HttpParserInvalidMethodError) and self._line is not None:
                self._method_refused = True
                self._answer_unknown_method()
                return
            self._refuse_malformed()

        def _answer_unknown_method(self) -> None:
            """``501`` once the request line is whole and well-formed, ``400`` once it is
            not one; nothing yet while it may still be (the head's timer and size bound the wait)."""
            if self._line is None or self.transport.is_closing():
                return
            verdict = request_line_verdict(self._line)
            if verdict == "unknown_method":
                self._refuse(
                    501,
                    "Not Implemented",
                    "the request's method is not one this server implements",
                    reason="unknown_method",
                )
            elif verdict is not None:
                self._refuse_malformed()

        def _refuse_malformed(self) -> None:
            self._refuse(
                400,
                "Bad Request",
                "the request could not be read as HTTP/1.1 (its framing or its syntax)",
                reason="malformed_request",
            )

        def _refuse(self, status: int, phrase: str, message: str, *, reason: str | None = None) -> None:
            """Answer ``status`` and close — once the requests read before the refused bytes
            are answered (a client reads answers in its requests' order): a refusal of bytes
            behind requests still being served waits for their answers (until 2026-12-07 it
            was written at once and the connection closed: their answers lost, the first
            one's taken for the refusal). A request whose own body is refused is not waited for."""
            self._head_arrived()
            refusal = _refusal(status, phrase, message, reason)
            if not self._in_body and self._serving():
                self._refusal_owed = refusal
                return
            self._refuse_now(refusal)

        def _serving(self) -> bool:
            """A request read before is still being served, or waits to be (pipelined)."""
            return bool(self.pipeline) or (self.cycle is not None and not self.cycle.response_complete)

        def _refuse_now(self, refusal: bytes) -> None:
            self._refusal_owed = None
            if not self.transport.is_closing():
                self.transport.write(refusal)
                self.transport.close()

    return BoundedHttpToolsProtocol


class StoppingServer(uvicorn.Server):
    """A uvicorn server that tells its app when its shutdown begins.

    uvicorn's graceful shutdown waits for every request in flight before the app's
    lifespan hears of it: a request waiting on a timer of its own (a long poll) would hold
    the process that long. ``on_stopping`` is called first — before the listeners close
    and the connections are asked to end — so the app can answer such requests at once.

    Args:
        config: uvicorn's configuration.
        on_stopping: called once, synchronously, when the shutdown begins (None: nothing).
    """

    def __init__(self, config: uvicorn.Config, on_stopping: Callable[[], None] | None = None) -> None:
        super().__init__(config)
        self.on_stopping = on_stopping

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """Call ``on_stopping``, then uvicorn's own shutdown."""
        if self.on_stopping is not None:
            self.on_stopping()
        await super().shutdown(sockets)


class _EmbeddedServer(StoppingServer):
    """A uvicorn server that leaves the process's signal handlers alone (its host owns them)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class CannotListen(OSError):
    """A server could not bind its address: the port is taken (``EADDRINUSE``), needs
    privileges, or the host is not this machine's. The process cannot start: the service
    commands exit with status 2 (docs/operations.md, "Exit status")."""

    def __init__(self, host: str, port: int, err: OSError) -> None:
        super().__init__(err.errno, f"cannot listen on {host}:{port}: {err.strerror or err}")
        self.host, self.port = host, port


def bind_socket(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A listening TCP socket (``port`` 0 picks a free port); IPv6 when ``host`` holds a
    ``:`` (uvicorn's rule).

    Raises:
        CannotListen: the address cannot be bound (a taken port, a foreign host …).
    """
    # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY on accepted connections only for such
    # sockets; with proto 0 every answer waits ~40 ms for a delayed ACK (Nagle).
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(1024)
    except OSError as err:
        sock.close()
        raise CannotListen(host, port, err) from err
    sock.setblocking(False)
    return sock


def port_in_use(host: str, port: int) -> bool:
    """Whether a TCP listener can not bind ``host:port`` right now (``OSError`` on bind).

    A check before starting services on fixed ports, to say which one is taken; the
    port can still be taken between the check and the real bind.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        return True
    finally:
        sock.close()
    return False


class BackgroundServer:
    """An ASGI app served by uvicorn as a task of the running loop.

    Args:
        app: the ASGI application.
        host / port: where to listen (port 0 → a free port).
        log_level: uvicorn's log level.
        on_stopping: called when the server's shutdown begins (:class:`StoppingServer`).
        http: uvicorn's HTTP protocol class (:func:`bounded_http`); None: uvicorn's own.

    Attributes:
        url: ``http://host:port`` once :meth:`start` returned.
    """

    def __init__(
        self,
        app: Any,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        log_level: str = "warning",
        on_stopping: Callable[[], None] | None = None,
        http: type[asyncio.Protocol] | None = None,
    ) -> None:
        self.app = app
        self.sock = bind_socket(host, port)
        self.host, self.port = self.sock.getsockname()[:2]
        self.url = f"http://{self.host}:{self.port}"
        config = uvicorn.Config(
            app,
            log_level=log_level,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=1,
            timeout_keep_alive=API_KEEP_ALIVE_S,  # the clients let go first (curaflow.protocol.connections)
            http=http or "auto",
            ws=WEBSOCKETS,
        )
        self.server = _EmbeddedServer(config, on_stopping)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> BackgroundServer:
        """Start serving; returns once the server accepts connections.

        Cancelled while starting (a process asked to stop), it lets the server finish its
        start-up and stops it the normal way before re-raising: a uvicorn cancelled inside
        its lifespan start-up logs a traceback.
        """
        self._task = asyncio.create_task(self.server.serve(sockets=[self.sock]))
        try:
            while not self.server.started:
                if self._task.done():
                    self._task.result()
                await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            while not self.server.started and not self._task.done():
                await asyncio.sleep(0.01)
            with contextlib.suppress(Exception):
                await self.stop()
            raise
        return self

    async def serving(self) -> None:
        """Wait until the server stops serving by itself.

        Raises:
            RuntimeError: the server stopped (its own exception is chained).
        """
        assert self._task is not None, "start() first"
        try:
            await asyncio.shield(self._task)
        except asyncio.CancelledError:
            if not self._task.done():
                raise
        error = None if self._task.cancelled() else self._task.exception()
        raise RuntimeError(f"the server on {self.url} stopped serving") from error

    async def stop(self) -> None:
        """Stop serving and wait for the server task."""
        self.server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.sock.close()

    async def __aenter__(self) -> BackgroundServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

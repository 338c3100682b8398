"""A hostile HTTP/1.1 party on a raw TCP socket: slow, endless, huge or silent on purpose.

uvicorn always answers promptly and frames its bodies; a party that trickles its headers,
streams a body for ever, answers 100 MB or never answers cannot be written with it. This
fake reads one request per connection and answers by the next :class:`Behaviour` of
``script`` (consumed one per connection), else by the longest path prefix of ``paths``,
else by ``default``, then closes the connection.

Behaviours (``kind``):

* ``"ok"``: ``status`` with ``body`` (``content_type``, and ``headers``: UTF-8, a lone
  surrogate ``"\\udcff"`` (0xFF) for a raw byte), framed by ``Content-Length``;
* ``"trickle_body"``: the headers at once (no length, close-delimited), then ``body``
  repeated, ``chunk`` bytes every ``interval_s`` — for ever when ``total`` is None;
  ``headers`` sent too;
* ``"slow_headers"``: the status line and headers one byte every ``interval_s``;
* ``"huge"``: ``total`` bytes of ``body`` repeated as fast as the reader takes them
  (``Content-Length`` sent when ``length`` is set);
* ``"cut_body"``: ``status`` (with ``headers``) and a ``Content-Length`` of twice
  ``body``, then ``body`` alone and the connection closed (an answer cut mid-body);
* ``"hang"``: read the request, never answer;
* ``"reset_while_sending"``: read the request's headers and ``chunk`` bytes of its body,
  then reset the connection (RST) — the request never arrives whole;
* ``"never_read"``: read the request's headers, never its body, answer nothing for
  ``interval_s`` and close (a client sending a body larger than the sockets' buffers
  blocks writing it).

``connections`` records every connection: when it opened and closed (monotonic s), the
request line, the bytes written — so a test can tell a connection was closed by the
client long before the party would have finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import time
from dataclasses import dataclass, field


@dataclass
class Behaviour:
    """How to answer a request (module doc)."""

    kind: str = "ok"
    status: int = 200
    body: bytes = b"{}"
    content_type: str = "application/json"
    chunk: int = 1024
    interval_s: float = 1.0
    total: int | None = None
    length: bool = False
    headers: tuple[tuple[str, str], ...] = ()


@dataclass
class Connection:
    """One connection the party served."""

    opened: float
    request_line: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    closed: float | None = None
    written: int = 0
    body: bytes = b""


@dataclass
class HostileParty:
    """The hostile party (module doc)."""

    default: Behaviour = field(default_factory=Behaviour)
    paths: dict[str, Behaviour] = field(default_factory=dict)
    script: list[Behaviour] = field(default_factory=list)
    connections: list[Connection] = field(default_factory=list)
    host: str = "127.0.0.1"
    _server: asyncio.Server | None = None
    _port: int = 0

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self._port}"

    async def start(self) -> HostileParty:
        self._server = await asyncio.start_server(self._serve, self.host, 0)
        self._port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    def requests(self, prefix: str = "/") -> list[Connection]:
        """Connections whose request path starts with ``prefix``."""
        out = []
        for c in self.connections:
            parts = c.request_line.split(" ")
            if len(parts) > 1 and parts[1].startswith(prefix):
                out.append(c)
        return out

    def _behaviour(self, path: str) -> Behaviour:
        for prefix, behaviour in sorted(self.paths.items(), key=lambda kv: -len(kv[0])):
            if path.startswith(prefix):
                return behaviour
        return self.default

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(opened=time.monotonic())
        self.connections.append(conn)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            conn.request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip():
                    conn.headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            path = conn.request_line.split(" ")[1] if " " in conn.request_line else "/"
            behaviour = self.script.pop(0) if self.script else self._behaviour(path)
            if behaviour.kind == "reset_while_sending":
                conn.body = await reader.readexactly(min(length, behaviour.chunk))
                sock = writer.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST
                return
            if behaviour.kind == "never_read":
                writer.transport.pause_reading()  # the body stays in the sockets' buffers
                await asyncio.sleep(behaviour.interval_s)
                return
            if length:
                conn.body = await reader.readexactly(length)
            await self._answer(behaviour, writer, conn, reader)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            conn.closed = time.monotonic()
            with contextlib.suppress(Exception):
                writer.close()

    async def _write(self, writer: asyncio.StreamWriter, conn: Connection, data: bytes) -> None:
        writer.write(data)
        await writer.drain()
        conn.written += len(data)

    async def _answer(
        self, b: Behaviour, writer: asyncio.StreamWriter, conn: Connection, reader: asyncio.StreamReader
    ) -> None:
        status = f"HTTP/1.1 {b.status} X\r\n".encode()
        if b.kind == "hang":
            await reader.read()  # until the client goes away
            return
        if b.kind == "ok":
            extra = "".join(f"{name}: {value}\r\n" for name, value in b.headers)
            head = (
                f"content-type: {b.content_type}\r\n{extra}content-length: {len(b.body)}\r\nconnection: close\r\n\r\n"
            )
            # UTF-8, with a lone surrogate standing for a raw byte ("\udcff": 0xFF).
            await self._write(writer, conn, status + head.encode("utf-8", "surrogateescape"))
            await self._write(writer, conn, b.body)
            return
        if b.kind == "slow_headers":
            filler = "x-slow: " + "-" * 40 + "\r\n"  # ~100 bytes of headers in all
            head = status + f"content-type: {b.content_type}\r\n{filler}content-length: {len(b.body)}\r\n\r\n".encode()
            for i in range(len(head)):
                await self._write(writer, conn, head[i : i + 1])
                await asyncio.sleep(b.interval_s)
            await self._write(writer, conn, b.body)
            return
        extra = "".join(f"{name}: {value}\r\n" for name, value in b.headers)
        if b.kind == "trickle_body":
            await self._write(
                writer,
                conn,
                status + f"content-type: {b.content_type}\r\n{extra}connection: close\r\n\r\n".encode(),
            )
            sent = 0
            while b.total is None or sent < b.total:
                piece = (b.body * (b.chunk // max(1, len(b.body)) + 1))[: b.chunk]
                await self._write(writer, conn, piece)
                sent += len(piece)
                await asyncio.sleep(b.interval_s)
            return
        if b.kind == "cut_body":
            head = f"content-type: {b.content_type}\r\n{extra}content-length: {2 * len(b.body)}\r\n\r\n"
            await self._write(writer, conn, status + head.encode() + b.body)
            return
        if b.kind == "huge":
            total = b.total or 0
            length = f"content-length: {total}\r\n" if b.length else "connection: close\r\n"
            await self._write(writer, conn, status + f"content-type: {b.content_type}\r\n{length}\r\n".encode())
            block = (b.body * (65536 // max(1, len(b.body)) + 1))[:65536]
            sent = 0
            while sent < total:
                piece = block[: total - sent]
                await self._write(writer, conn, piece)
                sent += len(piece)
            return
        raise ValueError(f"unknown behaviour {b.kind!r}")

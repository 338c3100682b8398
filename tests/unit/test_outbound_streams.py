"""The outbound layer's connected streams: a pooled connection the peer closed is seen as
closed (httpcore asks ``is_readable`` of every idle connection before it reuses one), over
plain TCP and over TLS, from the socket the stream keeps."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpcore
import httpx
import pytest

from curaflow.outbound import parse_networks
from curaflow.outbound.destinations import Destinations
from curaflow.outbound.transport import _ClosedOnCut, guarded_transport
from tests.support import eventually
from tests.tls_proxy import make_pki


class _Counting(httpcore.AsyncNetworkStream):
    """An httpcore stream that counts the questions it is asked."""

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self.inner = inner
        self.asked: list[str] = []

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self.inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self.inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        return _Counting(await self.inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        self.asked.append(info)
        return self.inner.get_extra_info(info)


class _Peer:
    """A TCP (or TLS) server that keeps each connection until told to close them all."""

    def __init__(self, context: ssl.SSLContext | None = None) -> None:
        self.context = context
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        async def keep(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.writers.append(writer)
            with contextlib.suppress(OSError, asyncio.IncompleteReadError):
                while line := await reader.readline():  # an echo, until the client stops
                    writer.write(line)
                    await writer.drain()

        self.server = await asyncio.start_server(keep, "127.0.0.1", 0, ssl=self.context)
        return int(self.server.sockets[0].getsockname()[1])

    async def close_all(self) -> None:
        for writer in self.writers:
            writer.transport.abort()

    async def stop(self) -> None:
        await self.close_all()
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


@pytest.fixture
async def peer() -> AsyncIterator[_Peer]:
    p = _Peer()
    yield p
    await p.stop()


def _readable(stream: httpcore.AsyncNetworkStream) -> bool | None:
    return True if stream.get_extra_info("is_readable") else None


async def test_an_idle_connection_reads_as_open_until_the_peer_closes_it(peer: _Peer) -> None:
    port = await peer.start()
    inner = _Counting(await httpcore.AnyIOBackend().connect_tcp("127.0.0.1", port))
    stream = _ClosedOnCut(inner)
    await eventually(lambda: peer.writers, what="the connection accepted")
    for _ in range(50):
        assert stream.get_extra_info("is_readable") is False
    assert stream.get_extra_info("socket") is inner.inner.get_extra_info("socket")
    # the socket was asked for once; the 50 questions were answered from it
    assert inner.asked == ["socket"]
    await peer.close_all()
    await eventually(lambda: _readable(stream), timeout_s=5, what="the peer's close seen")
    # anything else is the inner stream's answer
    assert stream.get_extra_info("client_addr") == inner.inner.get_extra_info("client_addr")
    await stream.aclose()
    assert stream.get_extra_info("is_readable") is True  # a closed socket reads as expired, as httpcore's


async def test_a_tls_connection_keeps_its_socket_and_its_certificate_answers(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(pki.server_cert, pki.server_key)
    peer = _Peer(server_context)
    port = await peer.start()
    try:
        client_context = ssl.create_default_context(cafile=str(pki.ca_cert))
        plain = _ClosedOnCut(_Counting(await httpcore.AnyIOBackend().connect_tcp("127.0.0.1", port)))
        tls = await plain.start_tls(client_context, server_hostname="localhost", timeout=5)
        assert isinstance(tls, _ClosedOnCut)  # a cut of a further handshake closes it too
        assert tls.get_extra_info("ssl_object").version().startswith("TLS")
        # a round trip: what the server sent after the handshake (TLS 1.3 tickets) is read
        await tls.write(b"ping\n")
        assert await tls.read(64, timeout=5) == b"ping\n"
        assert tls.get_extra_info("is_readable") is False
        await peer.close_all()
        await eventually(lambda: _readable(tls), timeout_s=5, what="the peer's close seen over TLS")
        await tls.aclose()
    finally:
        await peer.stop()


async def test_the_pool_does_not_reuse_a_connection_the_server_closed() -> None:
    # A server that closes each connection after its answer (without "Connection: close"):
    # the next request must find the idle connection expired and open another one.
    opened = 0

    async def once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal opened
        opened += 1
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(once, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    destinations = Destinations(origins=(), check_addresses=True, private_networks=parse_networks(["127.0.0.0/8"]))
    transport = guarded_transport(destinations, httpx.Limits(max_connections=4, max_keepalive_connections=4))
    try:
        async with httpx.AsyncClient(transport=transport) as client:
            for _ in range(5):
                answer = await client.get(f"http://127.0.0.1:{port}/")
                assert answer.text == "ok"
                await asyncio.sleep(0.05)  # the server's close has arrived
        assert opened == 5
    finally:
        server.close()
        await server.wait_closed()

"""The embedded HTTP server's sockets: answers must not wait for delayed ACKs."""

from __future__ import annotations

import asyncio
import socket

from curaflow.process.httpserver import bind_socket


async def test_accepted_connections_get_tcp_nodelay() -> None:
    # asyncio sets TCP_NODELAY on accepted connections only when the listening socket's
    # proto is IPPROTO_TCP; without it every small answer waited ~40 ms (Nagle + delayed ACK).
    sock = bind_socket()
    assert sock.proto == socket.IPPROTO_TCP
    seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted = writer.get_extra_info("socket")
        seen.set_result(accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(on_connect, sock=sock)
    try:
        host, port = sock.getsockname()[:2]
        _, writer = await asyncio.open_connection(host, port)
        assert await asyncio.wait_for(seen, 5) != 0
        writer.close()
    finally:
        server.close()
        await server.wait_closed()

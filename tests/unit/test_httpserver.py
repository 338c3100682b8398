"""The embedded HTTP server: its sockets (answers must not wait for delayed ACKs) and its
protocol's answers to requests the parser refuses."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from typing import Any

import pytest

from curaflow.process.httpserver import BackgroundServer, bind_socket, bounded_http, request_line_verdict


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


@pytest.mark.parametrize(
    ("head", "verdict"),
    [
        (b"FOO /jobs HTTP/1.1\r\nHost: x\r\n\r\n", "unknown_method"),
        (b"get /health HTTP/1.1\r\n", "unknown_method"),  # methods are case-sensitive
        (b"X" * 4000 + b" / HTTP/1.0\n", "unknown_method"),  # a bare LF ends a line too
        (b"\r\nBREW * HTTP/1.1\r\n", "unknown_method"),  # an empty line before is ignored
        (b"FO", None),  # the parser refuses here: the line is not whole yet
        (b"FOO /jo", None),
        (b"FOO /jobs HTTP/1.", None),
        (b"FOO /jobs HTTP/1.1\r", None),
        (b"GARBAGE\r\n\r\n", "malformed_request"),  # no request line
        (b"FOO /jobs\r\n", "malformed_request"),  # no version
        (b"FOO /jobs HTTP/1.1X", "malformed_request"),
        (b"F(O) /jobs HTTP/1.1\r\n", "malformed_request"),  # '(' is no token's
        (b"G\x00T", "malformed_request"),
        (b" FOO / HTTP/1.1\r\n", "malformed_request"),
        (b"FOO /\xff HTTP/1.1\r\n", "malformed_request"),  # a raw byte over 0x7f in the target
    ],
)
def test_a_refused_method_is_judged_by_its_request_line(head: bytes, verdict: str | None) -> None:
    assert request_line_verdict(head) == verdict


async def _exchange(url: str, *pieces: bytes) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    for piece in pieces:
        writer.write(piece)
        await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return answer


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})


async def test_a_refused_method_whose_line_never_ends_is_bounded_by_the_head() -> None:
    """The answer to a method the parser refused waits for the request line's end; the
    head's bounds still hold meanwhile: its time (``408``) and its size (``431``)."""
    async with BackgroundServer(_app, http=bounded_http(0.3, max_head_bytes=1024)) as server:
        late = await _exchange(server.url, b"FOO /jo")
        huge = await _exchange(server.url, b"FO", b"O /" + b"a" * 2000)
        whole = await _exchange(server.url, b"FOO /jobs HTTP/1.1\r\nHost: x\r\n\r\n")
        unread = await _exchange(server.url, b"FOO /jobs\r\nHost: x\r\n\r\n")
    assert late.startswith(b"HTTP/1.1 408 "), late
    assert huge.startswith(b"HTTP/1.1 431 "), huge
    assert whole.startswith(b"HTTP/1.1 501 Not Implemented\r\n"), whole
    assert json.loads(whole.partition(b"\r\n\r\n")[2])["error"]["detail"] == {"reason": "unknown_method"}
    assert unread.startswith(b"HTTP/1.1 400 "), unread
    assert json.loads(unread.partition(b"\r\n\r\n")[2])["error"]["detail"] == {"reason": "malformed_request"}


async def _answers(url: str, *pieces: bytes | float, lines: tuple[bytes, ...] = (b"HTTP/1.1 ",)) -> list[bytes]:
    """Send ``pieces`` on one connection (a float: wait that many seconds) until the server
    closes it; the status line of every answer it sent (and its lines that begin with one
    of ``lines``), read as they came."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    received = bytearray()

    async def read() -> None:
        with contextlib.suppress(ConnectionError):  # reset: closed with bytes of ours unread
            while chunk := await reader.read(65536):
                received.extend(chunk)

    reading = asyncio.create_task(read())
    with contextlib.suppress(ConnectionError):  # closed by the server: its answers tell why
        for piece in pieces:
            if isinstance(piece, float):
                await asyncio.sleep(piece)
            else:
                writer.write(piece)
                await writer.drain()
    await asyncio.wait_for(reading, 10)
    writer.close()
    return [line for line in bytes(received).split(b"\r\n") if line.startswith(lines)]


async def test_the_rest_of_a_body_answered_early_is_no_head_of_the_next_request() -> None:
    """A request answered before its body arrived whole (a route that ignores its body, a
    413 on its ``Content-Length``): the rest of that body is still that request's, read and
    dropped by the parser. The next head is awaited once it has ended. Until 2026-12-07 its
    bytes were counted as the next request's head: an innocent next request on the
    kept-alive connection was answered ``431`` after a body over the head's bound, and one
    sent the head's time after the answer (its body having ended in time) an unasked ``408``."""
    head = b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 3000\r\n\r\n"
    then = b"GET /y HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    async with BackgroundServer(_app, http=bounded_http(1.0, max_head_bytes=1024)) as server:
        large = await _answers(server.url, head, 0.2, b"a" * 3000, 0.1, then)
        # the body ends 0.6 s after the answer, the next head comes 0.7 s later (1.3 s after it)
        slow = await _answers(server.url, head, 0.3, b"a" * 1000, 0.3, b"a" * 2000, 0.7, then)
    assert (large, slow) == ([b"HTTP/1.1 200 OK"] * 2, [b"HTTP/1.1 200 OK"] * 2)


async def _body_length(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers ``200`` with the length of the body it read (``X-Read``)."""
    if scope["type"] != "http":
        return
    read = 0
    while True:
        message = await receive()
        read += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    headers = [(b"content-length", b"0"), (b"x-read", str(read).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


async def test_a_request_asking_to_upgrade_is_read_whole_as_http_1_1() -> None:
    """A request offering to leave HTTP/1.1 (``curl --http2`` on ``http://``: ``Connection:
    Upgrade, HTTP2-Settings``, ``Upgrade: h2c``) is the HTTP/1.1 request it also is (RFC 9110
    §7.8: the server ignores ``Upgrade``), body and all. The parser takes the bytes after
    such a head for the other protocol's: until 2026-12-07 the app read an empty body
    (``curl --http2 -d @task.json …/jobs`` was ``400`` "request body must be a JSON
    object") and the body, coming later, was read as the next request."""
    offer = (
        b"Host: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
        b"HTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n"
    )
    sized = b"POST /x HTTP/1.1\r\n" + offer + b"Content-Length: 5\r\n\r\n"
    chunked = b"POST /x HTTP/1.1\r\n" + offer + b"Transfer-Encoding: chunked\r\n\r\n"
    then = b"GET /y HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    async with BackgroundServer(_body_length, http=bounded_http(5.0)) as server:
        answers = []
        for pieces in (
            (sized + b"hello" + then,),  # one read
            (sized, 0.1, b"hel", 0.1, b"lo", 0.1, then),  # the body after the head
            (chunked + b"3\r\nhel\r\n", 0.1, b"2\r\nlo\r\n0\r\n\r\n" + then),
            (b"GET /x HTTP/1.1\r\n" + offer + b"\r\n", 0.1, then),  # no body
        ):
            answers.append(await _answers(server.url, *pieces, lines=(b"HTTP/1.1 ", b"x-read")))
    read = [b"HTTP/1.1 200 OK", b"x-read: 5", b"HTTP/1.1 200 OK", b"x-read: 0"]
    assert answers == [read, read, read, [b"HTTP/1.1 200 OK", b"x-read: 0"] * 2]


async def test_the_rest_of_a_body_answered_early_is_read_for_the_heads_time_at_most() -> None:
    """The rest of a body the server answered early is read for at most the head's time,
    then the connection is closed: a client trickling it byte by byte does not hold the
    connection (a descriptor) for ever — uvicorn's keep-alive timer stops at every byte."""
    async with BackgroundServer(_app, http=bounded_http(0.5, max_head_bytes=1024)) as server:
        host, port = server.url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
        await writer.drain()
        answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        began = asyncio.get_running_loop().time()
        with contextlib.suppress(ConnectionError):
            for _ in range(100):  # 10 s of a byte every 0.1 s, unless the server closes first
                if reader.at_eof():
                    break
                writer.write(b"a")
                await writer.drain()
                await asyncio.sleep(0.1)
        closed_after = asyncio.get_running_loop().time() - began
        writer.close()
    assert answer.startswith(b"HTTP/1.1 200 "), answer
    assert closed_after < 3, closed_after


async def test_a_pipelined_requests_body_is_no_rest_of_the_answered_one() -> None:
    """A request pipelined behind one still being served has its body read as its own
    for as long as its route reads it: the head's time after the first answer bounds only
    the rest of a body *answered* early. Until 2026-12-07 the pipelined request's body,
    still arriving when the first was answered, was taken for the first's rest and its
    connection closed the head's time later — that request lost, never answered."""

    async def slow_first(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/slow":
            await asyncio.sleep(0.2)
        await _body_length(scope, receive, send)

    first = b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"
    second = b"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n"
    then = b"GET /z HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    async with BackgroundServer(slow_first, http=bounded_http(0.3, max_head_bytes=1024)) as server:
        answers = await _answers(server.url, first + second + b"abc", 0.4, b"de", 0.4, b"fg", 0.2, b"hij" + then)
    assert answers == [b"HTTP/1.1 200 OK"] * 3


async def test_bytes_no_request_has_behind_a_request_being_served_are_refused_after_its_answer() -> None:
    """A request HTTP/1.1 cannot read, pipelined behind requests the server is still
    serving (in one read), is refused once those are answered, in their order: a client
    reads its answers in the order it sent its requests. Until 2026-12-07 the ``400`` was
    written at once and the connection closed: the first request's answer was lost — its
    route still ran (a ``POST /jobs`` created its job) — and the client read the ``400`` as
    that request's."""
    malformed = b"GET /y HTTP/1.1\r\nHo st: x\r\n\r\n"
    async with BackgroundServer(_app, http=bounded_http(0.3, max_head_bytes=1024)) as server:
        one = await _answers(server.url, b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n" + malformed)
        two = await _answers(
            server.url,
            b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nPOST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nab" + malformed,
        )
    assert one == [b"HTTP/1.1 200 OK", b"HTTP/1.1 400 Bad Request"]
    assert two == [b"HTTP/1.1 200 OK", b"HTTP/1.1 200 OK", b"HTTP/1.1 400 Bad Request"]


async def test_a_head_begun_in_the_read_that_ended_a_drained_body_is_judged_at_once() -> None:
    """The next request's head may begin in the read that ends the rest of a body answered
    early: a method the parser refuses there is answered at once, ``400`` as any request
    pipelined in one read (its request line's first bytes were read with the body's).
    Until 2026-12-07 the server waited for a line it never recorded, and closed the
    connection the head's time later with no answer."""
    head = b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n"
    async with BackgroundServer(_app, http=bounded_http(5.0, max_head_bytes=1024)) as server:
        host, port = server.url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(head)
        answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        writer.write(b"a" * 10 + b"FOO /y HTTP/1.1\r\nHost: x\r\n\r\n")
        refusal = await asyncio.wait_for(reader.read(), 2)  # well within the head's 5 s
        writer.close()
    assert answer.startswith(b"HTTP/1.1 200 "), answer
    assert refusal.startswith(b"HTTP/1.1 400 Bad Request\r\n"), refusal


async def test_a_client_that_half_closes_after_its_requests_gets_their_answers() -> None:
    """A client may end its side once its requests are sent (``shutdown(SHUT_WR)``: RFC 9112
    §9.6 lets it close its half and still read): the requests it sent are answered, in
    their order, then the server closes. Until 2026-12-07 uvicorn closed the connection at
    the client's end of data: a route still running lost its answer (a ``POST /jobs`` made
    its job, its client never heard so)."""

    async def slow(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await asyncio.sleep(0.2)
        await _body_length(scope, receive, send)

    async with BackgroundServer(slow, http=bounded_http(5.0, max_head_bytes=1024)) as server:
        host, port = server.url.removeprefix("http://").split(":")
        answers = []
        for requests in (
            b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n",
            b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nPOST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nab",
        ):
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(requests)
            writer.write_eof()
            received = await asyncio.wait_for(reader.read(), 4)  # the server closes once it answered
            writer.close()
            answers.append([line for line in received.split(b"\r\n") if line.startswith((b"HTTP/1.1 ", b"x-read"))])
    read = [b"HTTP/1.1 200 OK", b"x-read: 0"]
    assert answers == [read, [*read, b"HTTP/1.1 200 OK", b"x-read: 2"]]


async def test_an_answer_before_a_continued_body_closes_the_connection() -> None:
    """A request sent with ``Expect: 100-continue`` and answered before its body arrived
    (no ``100 Continue`` sent: a ``401``, ``413``, ``415`` on its head) may have its body
    skipped by its client (RFC 9110 §10.1.1), whose next request on the connection would
    then be read as that body: the answer says ``Connection: close`` and the connection
    closes after it (as curl and Go expect). Until 2026-12-07 the connection stayed open and
    the next request was eaten as the first one's body. A body read (``100 Continue``
    sent), already whole, or none declared leaves the connection open for the next request."""

    async def refuse_unless_read(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == "/read":
            await _body_length(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": 413, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})

    def expecting(path: bytes, length: int) -> bytes:
        return b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n" % length

    then = b"GET /read HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    async with BackgroundServer(refuse_unless_read, http=bounded_http(5.0, max_head_bytes=1024)) as server:
        answers = [
            await _answers(server.url, *pieces, lines=(b"HTTP/1.1 ", b"connection"))
            for pieces in (
                (expecting(b"/x", 5), 0.3, then),  # answered at its head: the body skipped
                (expecting(b"/x", 5), 0.3, b"he", 0.1, b"llo" + then),  # ... or sent late, crossing the answer
                (expecting(b"/read", 5), 0.3, b"hello" + then),  # 100 Continue, the body read
                (expecting(b"/x", 5) + b"hello", 0.3, then),  # the body whole before the answer
                (expecting(b"/x", 0), 0.3, then),  # no body
            )
        ]
    refused = [b"HTTP/1.1 413 Request Entity Too Large", b"connection: close"]
    read = [b"HTTP/1.1 200 OK", b"connection: close"]
    assert answers == [
        refused,
        refused,
        [b"HTTP/1.1 100 Continue", b"HTTP/1.1 200 OK", *read],
        [b"HTTP/1.1 413 Request Entity Too Large", *read],
        [b"HTTP/1.1 413 Request Entity Too Large", *read],
    ]

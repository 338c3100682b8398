"""A request's head (its request line and headers) is bounded in time and size.

uvicorn reads a head for as long as it keeps coming: a connection that sends nothing, or
trickles one header line every few seconds, was held for ever (no timer runs before the
first request, nor once a request's first byte came), and a head of any size was read
(2000 headers of 50 bytes answered 404). A client opening such connections by the
thousand stopped the API answering anyone once the process ran out of descriptors.
Now ``api.head_timeout_ms`` bounds the wait for a whole head — a connection with no
request is closed, a head begun and not finished is answered ``408`` with
``Connection: close`` — and a head over 64 KiB is answered ``431``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.services import ApiProcess, start_api_process
from tests.support import API_TOKEN, short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: Far beyond ``head_timeout_ms`` below: a connection still open then is held for ever.
BOUND_S = 10


def config(tmp_path: Path) -> dict[str, Any]:
    out = f"out-{short_id()}"
    return {
        "api": {"head_timeout_ms": 1000},
        "routes": {out: {"kind": "directory", "path": str(tmp_path / "out")}},
        "targets": [{"id": "demo", "routes": [out]}],
    }


async def until_closed(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection."""
    return await asyncio.wait_for(reader.read(), BOUND_S)


async def health_head(host: str, port: int) -> bytes:
    """The head of ``GET /health`` on a new connection: the server still answers."""
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    await writer.drain()
    healthy = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), BOUND_S)
    writer.close()
    return healthy


def protocol_refusal(what: str, answer: bytes, status_line: bytes, reason: str) -> dict[str, Any]:
    """Assert ``answer`` (a whole exchange's bytes) is the protocol ``Error`` of a request
    refused with ``status_line`` (``invalid_params``, not retryable, ``detail.reason``
    ``reason``), the connection closed after it; returns the error object."""
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(status_line), (what, answer[:300])
    assert b"content-type: application/json" in head.lower(), (what, answer[:300])
    assert b"connection: close" in head.lower(), (what, answer[:300])
    error: dict[str, Any] = json.loads(body)["error"]
    assert error["code"] == "invalid_params" and error["retryable"] is False, (what, error)
    assert error["detail"] == {"reason": reason}, (what, error)
    return error


async def answers_alone(host: str, port: int, requests: dict[str, bytes]) -> dict[str, bytes]:
    """Each request of ``requests`` sent on a connection of its own, the API's token put
    after its request line; what the server wrote until it closed, by the same key."""
    auth = f"Authorization: Bearer {API_TOKEN}\r\n".encode()
    answers = {}
    for what, request in requests.items():
        reader, writer = await asyncio.open_connection(host, port)
        line, _, rest = request.partition(b"\r\n")
        writer.write(line + b"\r\n" + auth + rest)
        await writer.drain()
        answers[what] = await until_closed(reader)
        writer.close()
    return answers


async def test_heads_that_never_end_or_never_come_are_cut_and_huge_heads_refused(
    tmp_path: Path, temporal_address: str, database_url: str
) -> None:
    api: ApiProcess = await start_api_process(
        tmp_path, temporal_address=temporal_address, database_url=database_url, token=API_TOKEN, config=config(tmp_path)
    )
    try:
        host, port = api.url.removeprefix("http://").split(":")
        auth = f"Authorization: Bearer {API_TOKEN}\r\n"

        # 1. a connection that never sends a request: closed, nothing answered
        silent_reader, silent = await asyncio.open_connection(host, int(port))

        # 2. a head trickling in, a line every 0.3 s, never ending: 408, then closed
        slow_reader, slow = await asyncio.open_connection(host, int(port))
        slow.write(b"GET /health HTTP/1.1\r\nHost: x\r\n")

        async def trickle() -> None:
            for n in range(int(BOUND_S / 0.3)):
                if slow.is_closing():
                    return
                slow.write(f"X-{n}: a\r\n".encode())
                try:
                    await slow.drain()
                except ConnectionError:
                    return
                await asyncio.sleep(0.3)

        trickling = asyncio.create_task(trickle())

        # 3. a keep-alive connection: one request answered, then an idle one begun and left
        kept_reader, kept = await asyncio.open_connection(host, int(port))
        kept.write(f"GET /health HTTP/1.1\r\nHost: x\r\n{auth}\r\n".encode())
        await kept.drain()
        first = await asyncio.wait_for(kept_reader.readuntil(b"\r\n\r\n"), BOUND_S)
        assert first.startswith(b"HTTP/1.1 200"), first
        length = int(
            next(v for k, _, v in (h.partition(b": ") for h in first.split(b"\r\n")) if k.lower() == b"content-length")
        )
        await kept_reader.readexactly(length)
        kept.write(b"GET /health HTTP/1.1\r\n")  # the next request's head, never finished
        await kept.drain()

        # 4. a head of 2000 headers (~120 KB): 431
        huge_reader, huge = await asyncio.open_connection(host, int(port))
        headers = "".join(f"X-H{i}: {'v' * 50}\r\n" for i in range(2000))
        huge.write(f"GET /jobs/abc HTTP/1.1\r\nHost: x\r\n{auth}{headers}\r\n".encode())
        await huge.drain()

        silent_answer = await until_closed(silent_reader)
        slow_answer = await until_closed(slow_reader)
        kept_answer = await until_closed(kept_reader)
        huge_answer = await until_closed(huge_reader)
        trickling.cancel()
        for writer in (silent, slow, kept, huge):
            writer.close()

        assert silent_answer == b""
        for answer, status in ((slow_answer, b"408"), (kept_answer, b"408"), (huge_answer, b"431")):
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 " + status), answer[:300]
            assert b"connection: close" in head.lower(), answer[:300]
            error = json.loads(body)["error"]
            assert error["code"] == "invalid_params" and error["retryable"] is False, error

        # the API answers others meanwhile and after, a full-size body included
        reader, writer = await asyncio.open_connection(host, int(port))
        task = json.dumps(
            {
                "protocol_version": "1",
                "job_type": "candidate_search",
                "idempotency_key": f"heads-{short_id()}",
                "params": {"query": {"tags": ["a"]}},
                "labels": {"pad": "p" * 60_000},
            }
        ).encode()
        writer.write(
            f"POST /jobs HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\n"
            f"Content-Length: {len(task)}\r\n\r\n".encode()
            + task
        )
        await writer.drain()
        answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), BOUND_S)
        writer.close()
        assert answer.startswith((b"HTTP/1.1 202", b"HTTP/1.1 400")), answer  # read, judged: not cut
    finally:
        text = api.stop()
    assert "Traceback" not in text, text[-3000:]


#: Requests the HTTP/1.1 parser cannot read — their framing or their syntax — each answered
#: before any route runs.
UNREADABLE = {
    "a negative Content-Length": b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n{}",
    "Content-Length with a sign": b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: +2\r\n\r\n{}",
    "two different Content-Lengths": (
        b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}"
    ),
    "Content-Length beside chunked": (
        b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}"
    ),
    "a chunk size that is no number": (
        b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"zz\r\n{}\r\n0\r\n\r\n"
    ),
    "a header name with a space": b"GET /health HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n",
    "no request line": b"GARBAGE\r\n\r\n",
    "a method with a NUL byte": b"G\x00T /jobs HTTP/1.1\r\nHost: x\r\n\r\n",
    "a method with a byte no token has": b"F(O) /jobs HTTP/1.1\r\nHost: x\r\n\r\n",
    "an unknown word and no version": b"FOO /jobs\r\nHost: x\r\n\r\n",
    "a raw byte over 0x7f in the target": b"GET /jobs/\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n",
}


async def test_requests_the_parser_cannot_read_are_refused_with_the_protocol_error(
    tmp_path: Path, temporal_address: str, database_url: str
) -> None:
    """uvicorn answers a request it cannot parse itself, before the app: ``400`` with
    ``text/plain`` "Invalid HTTP request received." — a consumer's client reading the
    protocol's ``{"error": …}`` found none. Each is the protocol ``Error`` now
    (``invalid_params``, ``detail.reason: malformed_request``), ``Connection: close``."""
    api: ApiProcess = await start_api_process(
        tmp_path, temporal_address=temporal_address, database_url=database_url, token=API_TOKEN, config=config(tmp_path)
    )
    try:
        host, port = api.url.removeprefix("http://").split(":")
        answers = await answers_alone(host, int(port), UNREADABLE)
        healthy = await health_head(host, int(port))
    finally:
        text = api.stop()

    for what, answer in answers.items():
        protocol_refusal(what, answer, b"HTTP/1.1 400 ", "malformed_request")
    assert healthy.startswith(b"HTTP/1.1 200"), healthy
    assert "Traceback" not in text, text[-3000:]


#: Requests HTTP/1.1 reads whole but with a method the parser does not know (RFC 9110 §9.1:
#: a method is a token; methods are case-sensitive, so ``get`` is not ``GET``).
UNKNOWN_METHODS = {
    "a made-up method": b"FOO /jobs HTTP/1.1\r\nHost: x\r\n\r\n",
    "a long made-up token": b"X" * 4000 + b" /jobs HTTP/1.1\r\nHost: x\r\n\r\n",
    "a known method in lower case": b"get /health HTTP/1.1\r\nHost: x\r\n\r\n",
    "a known method with a letter more": b"GETX /jobs HTTP/1.1\r\nHost: x\r\n\r\n",
    "a made-up method with a body": b"BREW /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
}


async def test_a_method_the_server_does_not_know_is_501_not_implemented(
    tmp_path: Path, temporal_address: str, database_url: str
) -> None:
    """A well-formed request with a method the parser does not know was answered ``400
    malformed_request`` "could not be read as HTTP/1.1": it was read, and RFC 9110 §9.1
    says ``501``. It is ``501`` with the protocol ``Error`` (``invalid_params``,
    ``detail.reason: unknown_method``), ``Connection: close`` — on a new connection, on a
    kept-alive one after an answered request, and when the request line arrives in pieces."""
    api: ApiProcess = await start_api_process(
        tmp_path, temporal_address=temporal_address, database_url=database_url, token=API_TOKEN, config=config(tmp_path)
    )
    try:
        host, port = api.url.removeprefix("http://").split(":")
        answers = await answers_alone(host, int(port), UNKNOWN_METHODS)

        # after an answered request on a kept-alive connection
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        first = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), BOUND_S)
        length = int(
            next(v for k, _, v in (h.partition(b": ") for h in first.split(b"\r\n")) if k.lower() == b"content-length")
        )
        await reader.readexactly(length)
        writer.write(b"FOO /jobs HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        answers["after an answered request"] = await until_closed(reader)
        writer.close()

        # the request line in pieces: the parser refuses "FO" at once, before the line is whole;
        # the answer comes once it is (nothing else is sent: no unread bytes, no reset)
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            for piece in (b"FO", b"O /jo", b"bs HTTP/1.1\r", b"\n"):
                writer.write(piece)
                await writer.drain()
                await asyncio.sleep(0.05)
            answers["in pieces"] = await until_closed(reader)
        except ConnectionError as err:
            answers["in pieces"] = repr(err).encode()  # closed before the line was whole
        writer.close()

        healthy = await health_head(host, int(port))
    finally:
        text = api.stop()

    for what, answer in answers.items():
        error = protocol_refusal(what, answer, b"HTTP/1.1 501 Not Implemented\r\n", "unknown_method")
        assert "could not be read" not in error["message"], (what, error)
    assert healthy.startswith(b"HTTP/1.1 200"), healthy
    assert "Traceback" not in text, text[-3000:]


#: Requests asking to leave HTTP for WebSocket (RFC 6455 §4.1): ``Upgrade: websocket``.
WEBSOCKET_UPGRADE = (
    b"Host: x\r\nConnection: Upgrade, close\r\nUpgrade: websocket\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
)


async def test_a_websocket_upgrade_is_answered_as_the_http_request_it_is(
    tmp_path: Path, temporal_address: str, database_url: str
) -> None:
    """The API speaks HTTP/1.1 only: a request asking to upgrade to WebSocket (a consumer
    hoping to stream a job's events) is served as the HTTP request it also is — RFC 9110
    §7.8 lets a server ignore ``Upgrade`` — with the protocol's answer. Until 2026-12-07
    uvicorn took the handshake to the app as a WebSocket, which no route serves: ``403``
    with an empty body, before any route, token or request log."""
    api: ApiProcess = await start_api_process(
        tmp_path, temporal_address=temporal_address, database_url=database_url, token=API_TOKEN, config=config(tmp_path)
    )
    try:
        host, port = api.url.removeprefix("http://").split(":")
        answers = await answers_alone(
            host,
            int(port),
            {
                "a job's events": b"GET /jobs/nope/events HTTP/1.1\r\n" + WEBSOCKET_UPGRADE,
                "the lookup": b"GET /jobs?idempotency_key=nope HTTP/1.1\r\n" + WEBSOCKET_UPGRADE,
            },
        )
    finally:
        text = api.stop()

    events, lookup = answers["a job's events"], answers["the lookup"]
    assert events.startswith(b"HTTP/1.1 404 "), events[:300]
    assert json.loads(events.partition(b"\r\n\r\n")[2])["error"]["code"] == "invalid_params"
    assert lookup.startswith(b"HTTP/1.1 200 "), lookup[:300]
    assert json.loads(lookup.partition(b"\r\n\r\n")[2])["jobs"] == []
    assert "Traceback" not in text, text[-3000:]

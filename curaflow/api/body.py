"""Reading a JSON request body with a size limit and a time limit, as protocol errors."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import Request

from curaflow.protocol.errors import ProtocolError, invalid_params


class BodyTimeout(ProtocolError):
    """The body did not arrive in time: 408 ``invalid_params``, answered with ``Connection: close``.

    The rest of the body may still come, so the connection cannot carry another request.
    """

    def __init__(self, timeout_ms: int) -> None:
        self.headers = {"connection": "close"}
        super().__init__(
            "invalid_params",
            408,
            f"the request body did not arrive within {timeout_ms} ms",
            {"reason": "body_timeout", "timeout_ms": timeout_ms},
        )


async def read_json(request: Request, limit: int, timeout_ms: int, *, allow_empty: bool = False) -> Any:
    """Decode the request body as JSON.

    Args:
        limit: largest accepted body in bytes.
        allow_empty: an empty body decodes to None instead of an error.
        timeout_ms: longest wait for the whole body once the route runs
            (``api.body_timeout_ms``) — a client that declares a ``Content-Length`` and
            sends less must not hold the request for ever.

    Raises:
        ProtocolError: 413 ``invalid_params`` beyond ``limit``; 400 ``invalid_params``
            when the body is not UTF-8 JSON; :class:`BodyTimeout` (408) when it is late.
        starlette.requests.ClientDisconnect: the client went away mid-body (the error
            handlers log it as ``client_disconnected``, not as a server error).
    """
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise ProtocolError("invalid_params", 413, f"request body larger than {limit} bytes", {"limit": limit})
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout_ms / 1000):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise ProtocolError(
                        "invalid_params", 413, f"request body larger than {limit} bytes", {"limit": limit}
                    )
                chunks.append(chunk)
    except TimeoutError:
        raise BodyTimeout(timeout_ms) from None
    raw = b"".join(chunks)
    if not raw.strip():
        if allow_empty:
            return None
        raise invalid_params("request body must be a JSON object")
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise invalid_params("request body is not valid JSON") from None
    except RecursionError:
        raise invalid_params("request body is nested too deeply") from None

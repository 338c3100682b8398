"""Reading a JSON request body with a size limit, as protocol errors."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request

from curaflow.protocol.errors import ProtocolError, invalid_params


async def read_json(request: Request, limit: int, *, allow_empty: bool = False) -> Any:
    """Decode the request body as JSON.

    Args:
        limit: largest accepted body in bytes.
        allow_empty: an empty body decodes to None instead of an error.

    Raises:
        ProtocolError: 413 ``invalid_params`` beyond ``limit``; 400 ``invalid_params``
            when the body is not UTF-8 JSON.
    """
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise ProtocolError("invalid_params", 413, f"request body larger than {limit} bytes", {"limit": limit})
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ProtocolError("invalid_params", 413, f"request body larger than {limit} bytes", {"limit": limit})
        chunks.append(chunk)
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

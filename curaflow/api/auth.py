"""Bearer-token authentication of the protected routes (reference §9.1).

``Authorization: Bearer <CURAFLOW_API_TOKEN>`` (the ``Bearer `` prefix is
case-sensitive), compared in constant time. With no token configured every protected
route fails closed with 503, unless the API was started with ``api.insecure`` (which
logs a warning at start-up). The token is never logged.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Header

from curaflow.api.deps import SettingsDep
from curaflow.api.errors import LegacyAuthError


async def require_token(
    settings: SettingsDep, authorization: Annotated[str, Header(include_in_schema=False)] = ""
) -> None:
    """FastAPI dependency guarding a protected route.

    Raises:
        LegacyAuthError: 503 when no token is configured (and not insecure), 401 when the
            header is missing or wrong.
    """
    token = settings.api.token.get_secret_value().strip() if settings.api.token else ""
    if not token:
        if settings.api.insecure:
            return
        raise LegacyAuthError(503, "endpoint disabled: token not configured")
    if not authorization.startswith("Bearer "):
        raise LegacyAuthError(401, "unauthorized")
    supplied = authorization[len("Bearer ") :].strip()
    if not hmac.compare_digest(supplied.encode(), token.encode()):
        raise LegacyAuthError(401, "unauthorized")

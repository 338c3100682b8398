"""Bearer-token authentication of the protected routes (reference §9.1).

``Authorization: Bearer <CURAFLOW_API_TOKEN>``, the token compared in constant time. The
scheme name is case-insensitive (RFC 9110 §11.1: ``bearer``, ``BEARER`` and ``Bearer`` are
one scheme; RFC 6750 §2.1 defines the ``Bearer`` scheme), followed by one or more spaces
(RFC 9110's ``1*SP``); the token itself is compared exactly. The original compared the
prefix ``Bearer `` case-sensitively (reference §9.1), which refused clients that write the
scheme in another case. With no token configured every protected
route fails closed with 503, unless the API was started with ``api.insecure`` (which
logs a warning at start-up). The token is never logged.

Every 401 names its challenge in ``WWW-Authenticate`` (RFC 9110 §11.6.1 and §15.5.2: a
401 MUST carry one; the original sent none, since 2026-12-07): ``Bearer`` when the
request carried no bearer token (none, another scheme, a scheme with no token), ``Bearer
error="invalid_token"`` when it carried one that is not the token (RFC 6750 §3 and §3.1:
no error code for a request that lacks authentication). :func:`bearer_challenge` is the
one owner of that value.
"""

from __future__ import annotations

import hmac

from fastapi import Request

from curaflow.api.deps import SettingsDep
from curaflow.api.errors import LegacyAuthError


async def require_token(request: Request, settings: SettingsDep) -> None:
    """FastAPI dependency guarding a protected route.

    Raises:
        LegacyAuthError: 503 when no token is configured (and not insecure), 401 when the
            header is missing or wrong, or carries two different credentials
            (:func:`supplied_token`).
    """
    token = settings.api.token.get_secret_value().strip() if settings.api.token else ""
    if not token:
        if settings.api.insecure:
            return
        raise LegacyAuthError(503, "endpoint disabled: token not configured")
    supplied = supplied_token(request.headers.getlist("authorization"))
    if supplied is None or not hmac.compare_digest(supplied.encode(), token.encode()):
        raise LegacyAuthError(401, "unauthorized", bearer_challenge(supplied))


#: What :func:`supplied_token` answers for two different credentials: no token is this one
#: (it holds a space, which :func:`bearer_token` strips from any token it reads).
TWO_CREDENTIALS = " two different credentials "


def supplied_token(lines: list[str]) -> str | None:
    """The bearer token of a request's ``Authorization`` field lines, None when it carried none.

    ``Authorization`` is no list (RFC 9110 §11.6.2, §5.3: a sender must not send it on two
    lines): lines that carry the same credential (:func:`bearer_token`: the scheme's case,
    spaces) are that credential, blank lines carry none, and lines that carry different
    ones — two tokens, a token and another scheme — are no one credential: answered
    :data:`TWO_CREDENTIALS`, which no configured token equals, refused as a wrong token.
    Until 2026-12-07 the first line decided: the token then anything was served.
    """
    read = [(line.strip(), bearer_token(line)) for line in lines if line.strip()]
    credentials = {("bearer", token) if token is not None else ("other", line) for line, token in read}
    if len(credentials) > 1:
        return TWO_CREDENTIALS
    return read[0][1] if read else None


def bearer_challenge(supplied: str | None) -> str:
    """The ``WWW-Authenticate`` value of a 401 (RFC 6750 §3).

    Args:
        supplied: the bearer token the request carried (:func:`bearer_token`), None when
            it carried none.

    Returns:
        ``Bearer`` for a request without a bearer token (RFC 6750 §3.1: no error code
        then), ``Bearer error="invalid_token"`` for one whose token was refused.
    """
    return "Bearer" if supplied is None else 'Bearer error="invalid_token"'


def bearer_token(authorization: str) -> str | None:
    """The token of an ``Authorization`` header value of the ``Bearer`` scheme, else None.

    ``<scheme> 1*SP <token>`` with the scheme compared case-insensitively (RFC 9110 §11.1);
    whitespace around the token is dropped. None for another scheme, a missing token or
    no separator (``Bearertok``).
    """
    scheme, sep, rest = authorization.strip().partition(" ")
    if not sep or scheme.lower() != "bearer":
        return None
    token = rest.strip()
    return token or None

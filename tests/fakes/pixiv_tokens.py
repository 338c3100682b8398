"""Pixiv's token endpoint as OAuth 2 lets it behave with refresh token rotation.

:class:`RotatingTokenEndpoint` answers ``POST /auth/token`` (a form, as the app sends it)
as Pixiv's endpoint does (``access_token``, ``refresh_token``, ``expires_in``; a refused
grant as HTTP 400 ``{"has_error": true, "errors": …, "error": "invalid_grant"}``), with
what RFC 6749 §6 allows: it answers a *new* refresh token to each refresh
(``rotate``) and revokes the one sent (``revoke``). ``valid`` holds the refresh tokens it
accepts; ``sent`` every refresh token it was sent, in order. ``broken`` answers the next
refreshes with an ``access_token`` no client can use (each item the value, :data:`MISSING`
for none) beside the rotated refresh token: a glitch of the endpoint after it rotated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import count
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from curaflow.process.httpserver import BackgroundServer

INVALID_GRANT_BODY = {
    "has_error": True,
    "errors": {"system": {"message": "Invalid refresh token", "code": 1508}},
    "error": "invalid_grant",
}

#: In :attr:`RotatingTokenEndpoint.broken`: the answer holds no ``access_token`` at all.
MISSING = object()


@dataclass
class RotatingTokenEndpoint:
    """A token endpoint on 127.0.0.1 (module doc).

    Attributes:
        valid: refresh tokens accepted now.
        rotate: answer a new refresh token to every refresh (else the one sent).
        revoke: revoke the refresh token sent once a new one is answered.
        sent: every refresh token sent, in order.
        broken: the ``access_token`` of the next answers (module doc), first first.
        accept_rotated: a rotated refresh token is accepted later (else it is answered
            but refused: an endpoint that answers a token it never issued).
    """

    valid: set[str] = field(default_factory=set)
    rotate: bool = True
    revoke: bool = True
    sent: list[str] = field(default_factory=list)
    broken: list[Any] = field(default_factory=list)
    accept_rotated: bool = True

    def __post_init__(self) -> None:
        self._serial = count(1)
        app = FastAPI()

        @app.post("/auth/token")
        async def token(request: Request) -> JSONResponse:
            form = await request.form()
            sent = str(form.get("refresh_token"))
            self.sent.append(sent)
            if sent not in self.valid:
                return JSONResponse(INVALID_GRANT_BODY, status_code=400)
            answered = sent
            if self.rotate:
                answered = f"rotated-{next(self._serial)}"
                if self.accept_rotated:
                    self.valid.add(answered)
                if self.revoke:
                    self.valid.discard(sent)
            body = {
                "access_token": f"access-{next(self._serial)}",
                "expires_in": 3600,
                "token_type": "bearer",
                "scope": "",
                "refresh_token": answered,
                "user": {"id": "1"},
            }
            if self.broken:
                access = self.broken.pop(0)
                if access is MISSING:
                    del body["access_token"]
                else:
                    body["access_token"] = access
            return JSONResponse(body)

        self._server = BackgroundServer(app)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return self._server.url

    async def start(self) -> RotatingTokenEndpoint:
        await self._server.start()
        return self

    async def stop(self) -> None:
        await self._server.stop()

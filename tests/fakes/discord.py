"""A fake Discord webhook on 127.0.0.1 speaking the real wire format.

``POST /api/webhooks/<id>/<token>[?wait=true]`` with ``multipart/form-data``
(``payload_json`` + ``files[n]``, parsed by python-multipart) or JSON. With
``wait=true`` it answers ``200`` and the created Message object (its ``id``), without it
``204``. Errors use Discord's bodies: ``{"message", "code"}`` (``10015`` Unknown Webhook,
``50035`` Invalid Form Body, ``40005`` Request entity too large) and for rate limits
``429 {"message", "retry_after", "global"}`` plus the ``Retry-After`` and
``X-RateLimit-*`` headers, the delays in the unit of the API version the path names
(``/api/v<N>/webhooks/…``: seconds from v8, ``retry_after`` a float; milliseconds, an
integer, before it and for a path naming none — Discord's default version, the URL as
Discord hands it out). Every request is checked against the limits (content ≤
2000 characters, ≤ 10 files, each ≤ ``max_file_bytes``, attachments matching the
uploaded files, the whole request ≤ ``max_request_bytes``, 10 MiB: Discord's limit on a
webhook request, answered ``413 {"message": "Request entity too large", "code":
40005}``); breaches are recorded in :attr:`FakeDiscord.violations`.

Scripted faults (:class:`DcReply`): ``429``, ``404``, ``500``, ``stall`` (the message is
created, the answer is held past the client's timeout), ``gateway_502`` /
``gateway_504`` (the message is created, then Cloudflare's HTML ``502 Bad Gateway`` /
``504 Gateway Time-out`` page comes back instead of Discord's answer), ``413`` (Discord's
JSON 40005) and ``html_413`` (Cloudflare's HTML ``413 Request Entity Too Large`` page);
undeclared delays: ``429_no_delay`` (Discord's 429 body without ``retry_after`` and no
``Retry-After``), ``429_global`` (``"global": true``, no delay) and ``html_429``
(Cloudflare's "Error 1015 — You are being rate limited" page); ``429_global_stated`` is
Discord's global limit stating its delay (``retry_after``, ``"global": true``,
``X-RateLimit-Scope: global`` and ``Retry-After``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.datastructures import UploadFile

from curaflow.process.httpserver import BackgroundServer

CONTENT_MAX = 2000
FILES_MAX = 10
#: What Cloudflare in front of discord.com answers when the origin is slow or down.
GATEWAY_PAGES = {
    "gateway_502": "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1>"
    "</center><hr><center>cloudflare</center></body></html>",
    "gateway_504": "<html><head><title>504 Gateway Time-out</title></head><body><center><h1>504 Gateway "
    "Time-out</h1></center><hr><center>cloudflare</center></body></html>",
}
#: Cloudflare's answer when it blocks the client's address for a while (error 1015).
HTML_429 = (
    "<!DOCTYPE html><html><head><title>Access denied | discord.com used Cloudflare to restrict access</title>"
    "</head><body><h1>Error 1015</h1><h2>You are being rate limited</h2></body></html>"
)
HTML_413 = (
    "<html><head><title>413 Request Entity Too Large</title></head><body><center><h1>413 Request Entity "
    "Too Large</h1></center><hr><center>cloudflare</center></body></html>"
)
MiB = 1024 * 1024
TOO_LARGE = {"message": "Request entity too large", "code": 40005}


def invalid_form(errors: dict[str, Any]) -> dict[str, Any]:
    """Discord's ``50035`` Invalid Form Body naming the fields it refused, as Discord writes
    it: ``errors`` nests each field's path down to its ``_errors`` list (docs "JSON Error
    Codes", error messages example)."""
    return {"message": "Invalid Form Body", "code": 50035, "errors": errors}


@dataclass
class DcFile:
    field: str
    filename: str
    size: int
    sha256: str


@dataclass
class DcRequest:
    """One request the fake received."""

    payload: dict[str, Any]
    files: list[DcFile]
    wait: bool
    at: float
    status: int = 0
    created: bool = False
    size: int = 0


@dataclass
class DcReply:
    """A scripted answer: ``kind`` ∈ ``ok``, ``429``, ``429_no_delay``, ``429_global``,
    ``429_global_stated``, ``html_429``, ``proxy_429`` (a gateway's JSON 429 in front of
    Discord), ``404``, ``500``, ``503_stated`` (Discord's own JSON 503 with a
    ``Retry-After`` of ``retry_after``, in its API version's unit), ``stall``,
    ``gateway_502``, ``gateway_504``, ``413``, ``html_413``, ``odd_id`` (the message is
    posted; its answer's ``id`` is ``message_id``, a shape curaflow has never seen)."""

    kind: str = "ok"
    retry_after: float = 0.5
    stall_s: float = 3.0
    message_id: Any = None


@dataclass
class FakeDiscord:
    """The fake webhook (see the module doc)."""

    webhook_id: str = "112233445566778899"
    token: str = "fake-webhook-token"
    max_file_bytes: int = 10 * MiB
    max_request_bytes: int = 10 * MiB
    #: The content limit the fake holds requests to (Discord's 2000; lower to play a
    #: Discord that counts otherwise, or lowered its limit).
    content_max: int = CONTENT_MAX
    requests: list[DcRequest] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    script: list[DcReply] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._next = 1_300_000_000_000_000_000
        self._limits = (self.max_file_bytes, self.max_request_bytes, self.content_max)
        app = FastAPI()

        @app.post("/api/webhooks/{webhook_id}/{token}")
        async def execute(request: Request, webhook_id: str, token: str) -> Response:
            return await self._handle(request, webhook_id, token, None)

        @app.post("/api/v{version:int}/webhooks/{webhook_id}/{token}")
        async def execute_versioned(request: Request, version: int, webhook_id: str, token: str) -> Response:
            return await self._handle(request, webhook_id, token, version)

        self.server = BackgroundServer(app)

    @property
    def url(self) -> str:
        """The webhook URL to configure."""
        return f"{self.server.url}/api/webhooks/{self.webhook_id}/{self.token}"

    def reset(self) -> FakeDiscord:
        """Forget every request, message, violation and script, and restore the limits it was
        made with (one fake serving the tests of a module)."""
        self.requests.clear()
        self.messages.clear()
        self.violations.clear()
        self.script.clear()
        self.max_file_bytes, self.max_request_bytes, self.content_max = self._limits
        return self

    async def _handle(self, request: Request, webhook_id: str, token: str, version: int | None) -> Response:
        payload: dict[str, Any] = {}
        files: list[DcFile] = []
        size = len(await request.body())
        ctype = request.headers.get("content-type", "")
        if ctype.startswith("multipart/form-data"):
            form = await request.form()
            for key, value in form.multi_items():
                if isinstance(value, UploadFile):
                    data = await value.read()
                    files.append(DcFile(key, value.filename or "", len(data), hashlib.sha256(data).hexdigest()))
                elif key == "payload_json":
                    payload = json.loads(str(value))
        elif ctype.startswith("application/json"):
            payload = await request.json()
        entry = DcRequest(payload, files, request.query_params.get("wait") == "true", time.time(), size=size)
        self.requests.append(entry)
        response = await self._answer(entry, webhook_id, token, millis=version is None or version < 8)
        entry.status = response.status_code
        return response

    async def _answer(self, entry: DcRequest, webhook_id: str, token: str, *, millis: bool) -> Response:
        if webhook_id != self.webhook_id or token != self.token:
            return JSONResponse({"message": "Unknown Webhook", "code": 10015}, status_code=404)
        reply = self.script.pop(0) if self.script else DcReply()
        # Discord's own delays in the unit of the request's API version (the module doc).
        stated: float = round(reply.retry_after * 1000) if millis else reply.retry_after
        header = str(round(reply.retry_after * 1000) if millis else max(1, round(reply.retry_after)))
        if reply.kind == "429":
            return JSONResponse(
                {"message": "You are being rate limited.", "retry_after": stated, "global": False},
                status_code=429,
                headers={
                    "Retry-After": header,
                    "X-RateLimit-Limit": "5",
                    "X-RateLimit-Remaining": "0",
                    "X-RateLimit-Reset-After": str(reply.retry_after),
                    "X-RateLimit-Bucket": "fakebucket",
                },
            )
        if reply.kind == "429_global_stated":
            return JSONResponse(
                {"message": "You are being rate limited.", "retry_after": stated, "global": True},
                status_code=429,
                headers={"Retry-After": header, "X-RateLimit-Scope": "global"},
            )
        if reply.kind in ("429_no_delay", "429_global"):
            return JSONResponse(
                {"message": "You are being rate limited.", "global": reply.kind == "429_global"}, status_code=429
            )
        if reply.kind == "proxy_429":  # an API gateway's own limit in front of Discord (Kong's words)
            return JSONResponse(
                {"message": "API rate limit exceeded"},
                status_code=429,
                headers={"Retry-After": str(max(1, round(reply.retry_after)))},
            )
        if reply.kind == "html_429":
            return HTMLResponse(HTML_429, status_code=429)
        if reply.kind == "404":
            return JSONResponse({"message": "Unknown Webhook", "code": 10015}, status_code=404)
        if reply.kind == "500":
            return JSONResponse({"message": "Internal Server Error", "code": 0}, status_code=500)
        if reply.kind == "503_stated":
            return JSONResponse(
                {"message": "Service Unavailable", "code": 0}, status_code=503, headers={"Retry-After": header}
            )
        if reply.kind == "413":
            return JSONResponse(TOO_LARGE, status_code=413)
        if reply.kind == "html_413":
            return HTMLResponse(HTML_413, status_code=413)
        problem = self._check(entry)
        if problem is not None:
            self.violations.append(problem[1])
            return JSONResponse(problem[0], status_code=problem[2])
        self._next += 1
        message = {
            "id": str(self._next),
            "type": 0,
            "channel_id": "998877665544332211",
            "webhook_id": self.webhook_id,
            "content": entry.payload.get("content", ""),
            "attachments": [
                {"id": str(self._next * 10 + i), "filename": f.filename, "size": f.size}
                for i, f in enumerate(entry.files)
            ],
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
        }
        self.messages.append(message)
        entry.created = True
        if reply.kind == "stall":
            await asyncio.sleep(reply.stall_s)
        if reply.kind in GATEWAY_PAGES:
            return HTMLResponse(GATEWAY_PAGES[reply.kind], status_code=int(reply.kind[-3:]))
        if not entry.wait:
            return Response(status_code=204)
        if reply.kind == "odd_id":
            return JSONResponse({**message, "id": reply.message_id})
        return JSONResponse(message)

    def _check(self, entry: DcRequest) -> tuple[dict[str, Any], str, int] | None:
        content = entry.payload.get("content") or ""
        if entry.size > self.max_request_bytes:
            return TOO_LARGE, f"request of {entry.size} bytes", 413
        if len(content) > self.content_max:
            too_long = {"code": "BASE_TYPE_MAX_LENGTH", "message": f"Must be {self.content_max} or fewer in length."}
            return invalid_form({"content": {"_errors": [too_long]}}), f"content of {len(content)} characters", 400
        if not content and not entry.files:
            return {"message": "Cannot send an empty message", "code": 50006}, "empty message", 400
        if len(entry.files) > FILES_MAX:
            too_many = {"code": "BASE_TYPE_MAX_LENGTH", "message": f"Must be {FILES_MAX} or fewer in length."}
            return invalid_form({"attachments": {"_errors": [too_many]}}), f"{len(entry.files)} files", 400
        for f in entry.files:
            if f.size > self.max_file_bytes:
                return TOO_LARGE, f"file of {f.size} bytes", 413
        names = [a.get("filename") for a in entry.payload.get("attachments", [])]
        if entry.files and names != [f.filename for f in entry.files]:
            unknown = {"code": "ATTACHMENT_NOT_FOUND", "message": "Attachment not found"}
            errors = {"attachments": {"0": {"filename": {"_errors": [unknown]}}}}
            return invalid_form(errors), f"attachments {names} do not match the files", 400
        return None

    async def start(self) -> FakeDiscord:
        await self.server.start()
        return self

    async def stop(self) -> None:
        await self.server.stop()

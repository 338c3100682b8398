"""A fake Telegram Bot API on 127.0.0.1 speaking the real wire format.

``POST /bot<token>/<method>`` with ``multipart/form-data`` (parsed by python-multipart,
as a real server would) or JSON; answers with the real envelopes
``{"ok": true, "result": …}`` and ``{"ok": false, "error_code", "description",
"parameters"}``, compact and with every character outside ASCII escaped, as the Bot API
writes them; a posted message is the whole ``Message`` Telegram answers (the bot or the
channel as sender, the chat with its title, a photo's every ``PhotoSize``, a caption's
entities, in a forum topic the topic's creation under ``reply_to_message``), so an answer
is as long as Telegram's (an album of 10 photos in a topic: about 17 KB). It checks every
request against Telegram's documented limits and answers like Telegram when one is
broken (``PHOTO_INVALID_DIMENSIONS``, caption too long, album of the wrong size, mixed
media …), recording each breach in :attr:`FakeTelegram.violations` so a test can assert none happened.

Forum topics (``message_thread_id``): when :attr:`FakeTelegram.threads` is set, a thread
not in it answers ``400 Bad Request: message thread not found`` and one in
:attr:`FakeTelegram.closed_threads` ``400 Bad Request: TOPIC_CLOSED``. A request larger
than :attr:`FakeTelegram.max_request_bytes` (the Bot API server's limit on one request)
answers ``413 Request Entity Too Large`` before it is read.

Scripted faults (:class:`TgReply`, consumed in order per method or ``"*"``): ``429``
with ``retry_after``, ``chat_not_found``, ``blocked``, ``500``, ``migrate`` (the chat
became a supergroup), ``photo_invalid`` and ``stall`` — the message **is posted**, then the answer is held
past the client's timeout: the duplicate-post trap.

Run it standalone for a demo: ``python -m tests.fakes.telegram --port 18081``; the
control endpoints ``GET /_fake/messages``, ``GET /_fake/requests``,
``GET /_fake/violations`` and ``POST /_fake/script`` (``{"method": "*", "replies":
[{"kind": "429", "retry_after": 1}]}``) inspect and script it.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import io
import json
import re
import time
from dataclasses import asdict, dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from PIL import Image
from starlette.datastructures import UploadFile

from curaflow.process.httpserver import BackgroundServer

MiB = 1024 * 1024
PHOTO_MAX_BYTES = 10 * MiB
DOCUMENT_MAX_BYTES = 50 * MiB
CAPTION_MAX = 1024
#: What the nginx gateway in front of the Bot API answers when its upstream is slow or down.
GATEWAY_PAGES = {
    "gateway_502": "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad "
    "Gateway</h1></center>\r\n<hr><center>nginx/1.18.0</center>\r\n</body>\r\n</html>\r\n",
    "gateway_504": "<html>\r\n<head><title>504 Gateway Time-out</title></head>\r\n<body>\r\n<center><h1>504 "
    "Gateway Time-out</h1></center>\r\n<hr><center>nginx/1.18.0</center>\r\n</body>\r\n</html>\r\n",
    "html_500": "<html>\r\n<head><title>500 Internal Server Error</title></head>\r\n<body>\r\n<center><h1>500 "
    "Internal Server Error</h1></center>\r\n<hr><center>nginx/1.18.0</center>\r\n</body>\r\n</html>\r\n",
    # nginx's `limit_req` in front of a local Bot API server (`limit_req_status 429`).
    "html_429": "<html>\r\n<head><title>429 Too Many Requests</title></head>\r\n<body>\r\n<center><h1>429 "
    "Too Many Requests</h1></center>\r\n<hr><center>nginx/1.18.0</center>\r\n</body>\r\n</html>\r\n",
}


#: The fake's bot, as the Bot API names it in a message's ``from``.
BOT = {"id": 7123456789, "is_bot": True, "first_name": "curaflow fake", "username": "curaflow_fake_bot"}
#: What Telegram marks in a caption as an entity: links and hashtags.
ENTITIES = re.compile(r"https?://\S+|#\w+")


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class BotApiJSON(JSONResponse):
    """A JSON answer as the Bot API writes one: compact, every character outside ASCII
    written as a ``\\uXXXX`` escape (a caption of 1024 units of Japanese is 6 KB of it)."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode()


@dataclass
class Upload:
    """One uploaded file of a request."""

    field: str
    filename: str
    content_type: str
    size: int
    sha256: str
    width: int | None = None
    height: int | None = None
    format: str | None = None
    frames: int = 1


@dataclass
class TgRequest:
    """One request the fake received."""

    method: str
    fields: dict[str, str]
    files: dict[str, Upload]
    at: float
    status: int = 0
    posted: bool = False
    fault: str | None = None

    @property
    def media(self) -> list[dict[str, Any]]:
        value = json.loads(self.fields.get("media") or "[]")
        return value if isinstance(value, list) else []


@dataclass
class TgReply:
    """A scripted answer: ``kind`` ∈ ``ok``, ``429``, ``chat_not_found``, ``blocked``,
    ``500``, ``migrate``, ``photo_invalid``, ``stall``, ``gateway_502``, ``gateway_504``,
    ``html_500``, ``html_429`` (the gateway's own limit, nothing posted, ``Retry-After:
    <retry_after>``), ``item_failed`` (an album failed at its item ``posted`` — numbered from
    1, as the Bot API numbers them —, nothing of it posted: TDLib sends an album as one
    request, failed whole; ``400 Bad Request: failed to send message #<posted> with the error
    message "<item_error>"``, by default ``"Too Many Requests: retry after <retry_after>"``),
    ``partial`` (Telegram posted the album without an item: its first ``posted`` items are
    in the chat, the answer names none of them — ``400 Bad Request: failed to send message
    #1 with the error message "Message was not sent"``, as the Bot API answers when
    Telegram's result left an item out), ``too_large`` (``413 Request Entity
    Too Large``), ``odd_result`` (the messages are posted; the answer is ``{"ok": true,
    "result": <result>}``, or, when ``result`` is None, the posted messages with their
    ``message_id`` set to ``message_id`` — a shape curaflow has never seen),
    ``rewritten`` (the messages are posted, then a proxy in front of the Bot API answers
    ``body`` — JSON, the envelope's shape or not — under HTTP ``status``).

    ``after``: answer only once this event is set (at most 5 s), to order this answer
    after something another fake saw.
    """

    kind: str = "ok"
    retry_after: int = 1
    stall_s: float = 3.0
    migrate_to: Any = "-1009999999999"
    after: asyncio.Event | None = None
    posted: int = 1
    result: Any = None
    message_id: Any = None
    status: int = 200
    body: Any = None
    item_error: str | None = None


def _chat_id_or_as_is(value: Any) -> Any:
    """A chat id given as text is sent as Telegram sends one (an Integer); anything else as
    given (a test's answer of a shape Telegram never sent)."""
    return int(value) if isinstance(value, str) and value.lstrip("-").isdigit() else value


def _fail(code: int, description: str, parameters: dict[str, Any] | None = None) -> BotApiJSON:
    body: dict[str, Any] = {"ok": False, "error_code": code, "description": description}
    if parameters:
        body["parameters"] = parameters
    return BotApiJSON(body, status_code=code)


class FakeTelegram:
    """The fake Bot API (see the module doc).

    Args:
        token: the bot token it accepts.
        chats: chat ids that exist; others answer "chat not found".
        blocked: chat ids that blocked the bot.
    """

    def __init__(
        self,
        token: str = "123456:TEST-token",
        chats: set[str] | None = None,
        blocked: set[str] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.token = token
        self.chats = chats if chats is not None else {"-1001234567890"}
        self.blocked = blocked or set()
        self.threads: set[str] | None = None
        self.closed_threads: set[str] = set()
        self.max_request_bytes: int | None = None
        self._chats, self._blocked = set(self.chats), set(self.blocked)
        self.requests: list[TgRequest] = []
        self.messages: list[dict[str, Any]] = []
        self.violations: list[str] = []
        #: The body of every answer, in order (what Telegram would have written).
        self.answers: list[bytes] = []
        self.script: dict[str, list[TgReply]] = {}
        self._next_id = 100
        self._group = 13849305719287536  # Telegram's media_group_id: 17 digits
        self.chat_title = "イラスト収集"
        self.topic_name = "pixiv ランキング"
        app = FastAPI()

        @app.post("/bot{token}/{method}")
        async def call(request: Request, token: str, method: str) -> Response:
            return await self._handle(request, token, method)

        @app.get("/_fake/messages")
        async def messages() -> Any:
            return self.messages

        @app.get("/_fake/requests")
        async def requests_() -> Any:
            return [{**asdict(r), "files": {k: asdict(v) for k, v in r.files.items()}} for r in self.requests]

        @app.get("/_fake/violations")
        async def violations() -> Any:
            return self.violations

        @app.post("/_fake/script")
        async def script(request: Request) -> Any:
            body = await request.json()
            replies = [TgReply(**r) for r in body.get("replies", [])]
            self.script.setdefault(body.get("method", "*"), []).extend(replies)
            return {"ok": True, "queued": len(replies)}

        self.app = app
        self.server = BackgroundServer(app, host, port)

    # ---- helpers -------------------------------------------------------------------

    @property
    def url(self) -> str:
        return self.server.url

    def reset(self) -> FakeTelegram:
        """Forget every request, message, violation and script (one fake serving the tests
        of a module); the chats, blocks, topics and size limit are back to what it was made with."""
        self.requests.clear()
        self.messages.clear()
        self.violations.clear()
        self.answers.clear()
        self.script.clear()
        self.chats, self.blocked = set(self._chats), set(self._blocked)
        self.threads, self.closed_threads, self.max_request_bytes = None, set(), None
        return self

    def at(self, method: str) -> list[TgRequest]:
        """Requests received for ``method``."""
        return [r for r in self.requests if r.method == method]

    def posted(self, chat_id: str | None = None) -> list[dict[str, Any]]:
        """Messages that exist in the chat (also those whose answer stalled)."""
        return [m for m in self.messages if chat_id is None or str(m["chat"]["id"]) == chat_id]

    def _violation(self, text: str) -> None:
        self.violations.append(text)

    def _reply_for(self, method: str) -> TgReply:
        for key in (method, "*"):
            queue = self.script.get(key)
            if queue:
                return queue.pop(0)
        return TgReply()

    async def _upload(self, name: str, value: UploadFile) -> Upload:
        data = await value.read()
        width = height = None
        fmt, frames = None, 1
        try:
            with Image.open(io.BytesIO(data)) as image:
                width, height = image.size
                fmt, frames = image.format, int(getattr(image, "n_frames", 1))
        except (OSError, ValueError):
            pass
        return Upload(
            field=name,
            filename=value.filename or "",
            content_type=value.content_type or "",
            size=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
            width=width,
            height=height,
            format=fmt,
            frames=frames,
        )

    def _photo_problem(self, upload: Upload) -> str | None:
        if upload.size > PHOTO_MAX_BYTES:
            return f"photo {upload.filename} is {upload.size} bytes (> 10 MB)"
        if upload.width is None or upload.height is None:
            return f"photo {upload.filename} is not an image"
        w, h = upload.width, upload.height
        if w + h > 10_000:
            return f"photo {upload.filename} is {w}x{h}: width + height > 10000"
        if max(w, h) / max(1, min(w, h)) > 20:
            return f"photo {upload.filename} is {w}x{h}: ratio > 20"
        return None

    # ---- the API -------------------------------------------------------------------

    async def _handle(self, request: Request, token: str, method: str) -> Response:
        fields: dict[str, str] = {}
        files: dict[str, Upload] = {}
        size = int(request.headers.get("content-length") or 0)
        if self.max_request_bytes is not None and size > self.max_request_bytes:
            entry = TgRequest(method=method, fields={}, files={}, at=time.time(), status=413, fault="too_large")
            self.requests.append(entry)
            return _fail(413, "Request Entity Too Large")
        if request.headers.get("content-type", "").startswith("multipart/form-data"):
            form = await request.form()
            for key, value in form.multi_items():
                if isinstance(value, UploadFile):
                    files[key] = await self._upload(key, value)
                else:
                    fields[key] = str(value)
        elif request.headers.get("content-type", "").startswith("application/json"):
            fields = {k: v if isinstance(v, str) else json.dumps(v) for k, v in (await request.json()).items()}
        entry = TgRequest(method=method, fields=fields, files=files, at=time.time())
        self.requests.append(entry)
        response = await self._answer(entry, token)
        entry.status = response.status_code
        self.answers.append(bytes(response.body))
        return response

    async def _answer(self, entry: TgRequest, token: str) -> Response:
        if token != self.token:
            return _fail(401, "Unauthorized")
        if entry.method not in ("sendPhoto", "sendDocument", "sendAnimation", "sendMediaGroup", "getMe"):
            return _fail(404, "Not Found")
        if entry.method == "getMe":
            return BotApiJSON({"ok": True, "result": {"id": 123456, "is_bot": True, "first_name": "fake"}})
        reply = self._reply_for(entry.method)
        if reply.after is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(reply.after.wait(), timeout=5)
        entry.fault = None if reply.kind == "ok" else reply.kind
        if reply.kind == "429":
            return _fail(429, f"Too Many Requests: retry after {reply.retry_after}", {"retry_after": reply.retry_after})
        if reply.kind == "500":
            return _fail(500, "Internal Server Error")
        if reply.kind == "html_500":
            return HTMLResponse(GATEWAY_PAGES["html_500"], status_code=500)
        if reply.kind == "html_429":  # the gateway's limit, stating `retry_after` in its header
            return HTMLResponse(
                GATEWAY_PAGES["html_429"], status_code=429, headers={"Retry-After": str(reply.retry_after)}
            )
        if reply.kind == "chat_not_found":
            return _fail(400, "Bad Request: chat not found")
        if reply.kind == "blocked":
            return _fail(403, "Forbidden: bot was blocked by the user")
        if reply.kind == "photo_invalid":
            return _fail(400, "Bad Request: PHOTO_INVALID_DIMENSIONS")
        if reply.kind == "migrate":
            if isinstance(reply.migrate_to, str):
                self.chats.add(reply.migrate_to)
            return _fail(
                400,
                "Bad Request: group chat was upgraded to a supergroup chat",
                {"migrate_to_chat_id": _chat_id_or_as_is(reply.migrate_to)},
            )
        chat_id = entry.fields.get("chat_id", "")
        if not chat_id:
            self._violation(f"{entry.method}: no chat_id")
            return _fail(400, "Bad Request: chat_id is empty")
        if chat_id in self.blocked:
            return _fail(403, "Forbidden: bot was blocked by the user")
        if chat_id not in self.chats:
            return _fail(400, "Bad Request: chat not found")
        thread = entry.fields.get("message_thread_id")
        if thread is not None and thread in self.closed_threads:
            return _fail(400, "Bad Request: TOPIC_CLOSED")
        if thread is not None and self.threads is not None and thread not in self.threads:
            return _fail(400, "Bad Request: message thread not found")
        problem = self._check(entry)
        if problem is not None:
            self._violation(f"{entry.method}: {problem[1]}")
            return _fail(400, problem[0])
        if reply.kind == "item_failed" and entry.method == "sendMediaGroup":
            error = reply.item_error or f"Too Many Requests: retry after {reply.retry_after}"
            return _fail(400, f'Bad Request: failed to send message #{reply.posted} with the error message "{error}"')
        if reply.kind == "partial" and entry.method == "sendMediaGroup":
            self._post(entry, chat_id, limit=reply.posted)
            entry.posted = True
            return _fail(400, 'Bad Request: failed to send message #1 with the error message "Message was not sent"')
        if reply.kind == "too_large":
            return _fail(413, "Request Entity Too Large")
        result = self._post(entry, chat_id)
        entry.posted = True
        if reply.kind == "stall":
            await asyncio.sleep(reply.stall_s)
        if reply.kind in ("gateway_502", "gateway_504"):
            return HTMLResponse(GATEWAY_PAGES[reply.kind], status_code=int(reply.kind[-3:]))
        if reply.kind == "rewritten":
            return BotApiJSON(reply.body, status_code=reply.status)
        if reply.kind == "odd_result":
            if reply.result is not None:
                return BotApiJSON({"ok": True, "result": reply.result})
            posted = result if isinstance(result, list) else [result]
            odd = [{**m, "message_id": reply.message_id} for m in posted]
            return BotApiJSON({"ok": True, "result": odd if isinstance(result, list) else odd[0]})
        return BotApiJSON({"ok": True, "result": result})

    def _check(self, entry: TgRequest) -> tuple[str, str] | None:
        """(Telegram's description, our note) for a request breaking a limit, else None."""
        caption = entry.fields.get("caption")
        if caption is not None and utf16_len(caption) > CAPTION_MAX:
            return "Bad Request: message caption is too long", f"caption of {utf16_len(caption)} units"
        if entry.method == "sendPhoto":
            photo = entry.files.get("photo")
            if photo is None:
                return "Bad Request: there is no photo in the request", "no photo file"
            problem = self._photo_problem(photo)
            if problem:
                return "Bad Request: PHOTO_INVALID_DIMENSIONS", problem
        if entry.method == "sendDocument":
            document = entry.files.get("document")
            if document is None:
                return "Bad Request: there is no document in the request", "no document file"
            if document.size > DOCUMENT_MAX_BYTES:
                return "Request Entity Too Large", f"document of {document.size} bytes"
        if entry.method == "sendAnimation":
            # Bot API: "animation files (GIF or H.264/MPEG-4 AVC video without sound)", ≤ 50 MB
            animation = entry.files.get("animation")
            if animation is None:
                return "Bad Request: there is no animation in the request", "no animation file"
            if animation.size > DOCUMENT_MAX_BYTES:
                return "Request Entity Too Large", f"animation of {animation.size} bytes"
            if animation.format != "GIF" or animation.frames < 2:
                # The fake's own guard against curaflow sending a still image as an animation:
                # no wording of the Bot API's (its "wrong type of the web page content" is
                # about media given by URL, which curaflow never sends).
                return "Bad Request: fake: not an animated GIF", f"not an animated GIF: {animation.format}"
        if entry.method == "sendMediaGroup":
            media = entry.media
            if not 2 <= len(media) <= 10:
                return "Bad Request: wrong number of items in the album", f"album of {len(media)} items"
            kinds = {m.get("type") for m in media}
            if len(kinds) > 1 and "document" in kinds:
                return "Bad Request: document can't be mixed with other media types", f"mixed album {kinds}"
            for m in media:
                ref = str(m.get("media", ""))
                upload = entry.files.get(ref.removeprefix("attach://")) if ref.startswith("attach://") else None
                if upload is None:
                    return "Bad Request: wrong file identifier/HTTP URL specified", f"media {ref!r} not uploaded"
                if m.get("caption") and utf16_len(m["caption"]) > CAPTION_MAX:
                    return "Bad Request: message caption is too long", "album caption too long"
                if m.get("type") == "photo":
                    problem = self._photo_problem(upload)
                    if problem:
                        return "Bad Request: PHOTO_INVALID_DIMENSIONS", problem
            used = {str(m.get("media", "")).removeprefix("attach://") for m in media}
            if set(entry.files) - used:
                return "Bad Request: unused files", f"files not referenced: {sorted(set(entry.files) - used)}"
        return None

    def _message(self, chat_id: str, thread: str | None = None) -> dict[str, Any]:
        """A ``Message`` as the Bot API returns a bot's post: the bot as ``from`` (a
        channel's post names the channel as ``sender_chat`` instead), the chat with its
        title, and in a forum topic (``message_thread_id``) the topic's id and the service
        message that created it as ``reply_to_message`` — Telegram puts it under every
        message of a topic."""
        self._next_id += 1
        message: dict[str, Any] = {"message_id": self._next_id}
        if not chat_id.startswith("-100"):
            chat: dict[str, Any] = {"id": _chat_id_or_as_is(chat_id), "first_name": "Reader", "type": "private"}
        elif thread is None:
            chat = {"id": int(chat_id), "title": self.chat_title, "username": "curaflow_fake", "type": "channel"}
            message["sender_chat"] = chat
        else:
            chat = {"id": int(chat_id), "title": self.chat_title, "is_forum": True, "type": "supergroup"}
        if "sender_chat" not in message:
            message["from"] = BOT
        message["chat"] = chat
        message["date"] = int(time.time())
        if thread is not None:
            topic = _chat_id_or_as_is(thread)
            message["message_thread_id"] = topic
            message["reply_to_message"] = {
                "message_id": topic,
                "from": {"id": 5551234567, "is_bot": False, "first_name": "Admin", "username": "fake_admin"},
                "chat": chat,
                "date": int(time.time()) - 86_400,
                "message_thread_id": topic,
                "forum_topic_created": {"name": self.topic_name, "icon_color": 7322096},
                "is_topic_message": True,
            }
            message["is_topic_message"] = True
        return message

    def _file(self, upload: Upload, size: str = "") -> dict[str, Any]:
        """A file's ids as the Bot API writes them: a ``file_id`` of 83 URL-safe base64
        characters (different for each size of a photo), a ``file_unique_id`` of 16."""
        digest = base64.urlsafe_b64encode(hashlib.sha512(f"{upload.sha256}{size}".encode()).digest()).decode()
        return {"file_id": ("AgACAgIAAxkDAAI" + digest)[:83], "file_unique_id": "AQAD" + digest[83:95]}

    def _photo_sizes(self, upload: Upload) -> list[dict[str, Any]]:
        """The ``PhotoSize`` s Telegram makes of an uploaded photo: one per bound (90, 320,
        800, 1280, 2560 pixels on the longer side) up to the first the photo fits in, never
        larger than the photo (``photo.sizes`` of a 591x1280 upload: 42x90, 148x320,
        369x800, 591x1280)."""
        w, h = upload.width or 1, upload.height or 1
        sizes = []
        for mark, bound in zip("smxyw", (90, 320, 800, 1280, 2560), strict=True):
            scale = min(1.0, bound / max(w, h))
            side_w, side_h = max(1, round(w * scale)), max(1, round(h * scale))
            share = side_w * side_h / (w * h)
            sizes.append(
                {
                    **self._file(upload, mark),
                    "file_size": max(1, int(upload.size * share)),
                    "width": side_w,
                    "height": side_h,
                }
            )
            if scale == 1.0:
                break
        return sizes

    def _document(self, upload: Upload) -> dict[str, Any]:
        document: dict[str, Any] = {"file_name": upload.filename, "mime_type": upload.content_type}
        if upload.width and upload.height:
            thumb = self._photo_sizes(upload)[min(1, len(self._photo_sizes(upload)) - 1)]
            document["thumbnail"] = thumb
            document["thumb"] = thumb  # the field's former name, still sent
        return {**document, **self._file(upload, "d"), "file_size": upload.size}

    def _caption(self, message: dict[str, Any], caption: str) -> None:
        """The caption and the entities Telegram finds in it (links, hashtags), offsets
        and lengths in UTF-16 code units."""
        message["caption"] = caption
        entities = []
        for match in ENTITIES.finditer(caption):
            kind = "url" if match.group(0).startswith("http") else "hashtag"
            offset = utf16_len(caption[: match.start()])
            entities.append({"offset": offset, "length": utf16_len(match.group(0)), "type": kind})
        if entities:
            message["caption_entities"] = entities

    def _post(self, entry: TgRequest, chat_id: str, limit: int | None = None) -> Any:
        thread = entry.fields.get("message_thread_id")
        if entry.method == "sendMediaGroup":
            self._group += 1
            out = []
            for m in entry.media[:limit]:
                upload = entry.files[str(m["media"]).removeprefix("attach://")]
                message = self._message(chat_id, thread)
                message["media_group_id"] = str(self._group)
                if m["type"] == "photo":
                    message["photo"] = self._photo_sizes(upload)
                else:
                    message["document"] = self._document(upload)
                if m.get("caption"):
                    self._caption(message, m["caption"])
                self.messages.append(message)
                out.append(message)
            return out
        message = self._message(chat_id, thread)
        if entry.method == "sendPhoto":
            message["photo"] = self._photo_sizes(entry.files["photo"])
        elif entry.method == "sendAnimation":
            upload = entry.files["animation"]
            message["animation"] = {
                **self._file(upload, "a"),
                "file_size": upload.size,
                "width": upload.width,
                "height": upload.height,
                "duration": 1,
                "file_name": upload.filename,
                "mime_type": upload.content_type,
            }
        else:
            message["document"] = self._document(entry.files["document"])
        if entry.fields.get("caption"):
            self._caption(message, entry.fields["caption"])
        self.messages.append(message)
        return message

    async def start(self) -> FakeTelegram:
        await self.server.start()
        return self

    async def stop(self) -> None:
        await self.server.stop()


async def _serve(port: int, token: str, chat: str) -> None:
    fake = await FakeTelegram(token=token, chats={chat}, port=port).start()
    print(f"fake Telegram Bot API on {fake.url} (token {token}, chat {chat})", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await fake.stop()


def main() -> None:
    """``python -m tests.fakes.telegram``: serve the fake until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=18081)
    parser.add_argument("--token", default="123456:TEST-token")
    parser.add_argument("--chat", default="-1001234567890")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args.port, args.token, args.chat))


if __name__ == "__main__":
    main()

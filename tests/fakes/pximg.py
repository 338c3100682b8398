"""A fake ``i.pximg.net`` on a raw TCP socket, in full control of the HTTP/1.1 framing.

The replay server's images come from uvicorn, which always frames a body correctly
(``Content-Length`` or chunked). It cannot send the shapes that real image hosts and the
proxies in front of them produce when a transfer breaks, where the client cannot tell
from the framing that the body is short:

* ``"close_half"``: ``200``, ``Connection: close``, no ``Content-Length``, half the
  image, then the connection is closed (a close-delimited body, RFC 9112 §6.3);
* ``"short_length"``: ``200`` with a ``Content-Length`` of half the image and that half
  (the length header itself is wrong).

``None`` (and an exhausted script) answers ``200`` with the whole image and its
``Content-Length`` on a keep-alive connection. The pictures are the replay's (same
bytes, same sizes, :attr:`Faults.image_sizes` honoured); like ``i.pximg.net`` the host
answers ``403`` without the app's ``Referer`` and ``404`` for an unknown work.

Point a Pixiv client at it with ``pixiv.image_url = host.url`` (a stack) or
``PixivClient(image_host=host.url)``: the listings keep Pixiv's canonical image URLs.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from dataclasses import dataclass, field

from curaflow.sources.pixiv.replay.images import render_image
from tests.fakes.replay import Faults, replay_work


@dataclass
class ImageRequest:
    """One request the host answered."""

    path: str
    referer: str | None
    status: int
    fault: str | None
    at: float


@dataclass
class FakeImageHost:
    """The fake image host (see the module doc).

    Attributes:
        faults: the replay's faults (works, sizes) the pictures are drawn from.
        script: framing faults consumed one per image request, front to back.
        bodies: raw bytes answered for a page (``"<id>_p<N>"``) instead of its picture
            (a hostile or broken image the host serves with a correct framing).
        refused: pages (``"<id>_p<N>"``) answered ``403 Forbidden`` whatever the request
            carries (a host whose hotlink rule changed, a CDN that blocks the caller).
        cut: pages (``"<id>_p<N>"``) cut short on every request (``"short_length"``, the
            script left untouched): one file the host never delivers whole.
        announced: pages (``"<id>_p<N>"``) → the ``Content-Length`` announced for them
            whatever their body: the body is sent whole after it and the connection closed
            (a header that lies: a proxy's or a cache's length of another file).
        requests: every request answered.
    """

    faults: Faults
    script: list[str | None] = field(default_factory=list)
    bodies: dict[str, bytes] = field(default_factory=dict)
    refused: set[str] = field(default_factory=set)
    cut: set[str] = field(default_factory=set)
    announced: dict[str, int] = field(default_factory=dict)
    requests: list[ImageRequest] = field(default_factory=list)
    _server: asyncio.Server | None = None
    _port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    async def start(self) -> FakeImageHost:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self._port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                _method, path, _version = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
                keep_open = await self._answer(writer, path, headers.get("referer"))
                await writer.drain()
                if not keep_open:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _log(self, path: str, referer: str | None, status: int, fault: str | None) -> None:
        self.requests.append(ImageRequest(path, referer, status, fault, time.time()))

    async def _answer(self, writer: asyncio.StreamWriter, path: str, referer: str | None) -> bool:
        if not (referer or "").startswith("https://app-api.pixiv.net"):
            self._log(path, referer, 403, None)
            writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 9\r\nContent-Type: text/plain\r\n\r\nForbidden")
            return True
        name = path.rsplit("/", 1)[-1]
        match = re.match(r"^(\d+)_p(\d+)", name)
        work = replay_work(self.faults, match.group(1)) if match else None
        if match is None or work is None:
            self._log(path, referer, 404, None)
            writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\nContent-Type: text/plain\r\n\r\nNot Found")
            return True
        page = int(match.group(2))
        if f"{match.group(1)}_p{page}" in self.refused:
            self._log(path, referer, 403, None)
            writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 9\r\nContent-Type: text/plain\r\n\r\nForbidden")
            return True
        fmt = "png" if name.endswith(".png") else "jpeg"
        width, height = self.faults.image_size(work, page)
        body = self.bodies.get(f"{match.group(1)}_p{page}") or await asyncio.to_thread(
            render_image, match.group(1), page, width, height, fmt
        )
        if f"{match.group(1)}_p{page}" in self.cut:
            fault: str | None = "short_length"
        else:
            fault = self.script.pop(0) if self.script else None
        self._log(path, referer, 200, fault)
        media = f"image/{fmt}".encode()
        half = body[: len(body) // 2]
        if fault == "close_half":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: " + media + b"\r\nConnection: close\r\n\r\n" + half)
            return False
        if fault == "short_length":
            head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(half)}\r\nContent-Type: ".encode()
            writer.write(head + media + b"\r\n\r\n" + half)
            return True
        announced = self.announced.get(f"{match.group(1)}_p{page}")
        length = len(body) if announced is None else announced
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {length}\r\nContent-Type: ".encode()
        writer.write(head + media + b"\r\n\r\n" + body)
        return announced is None

    def of_work(self, work_id: str) -> list[ImageRequest]:
        """Requests for pages of ``work_id``."""
        return [r for r in self.requests if r.path.rsplit("/", 1)[-1].startswith(f"{work_id}_p")]

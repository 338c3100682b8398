"""A webhook receiver on 127.0.0.1 that records every request and answers as scripted.

It verifies Standard Webhooks signatures with the ``standardwebhooks`` library, like a
real receiver would, and answers per path from a script (status, JSON body, delay),
defaulting to ``200 {"status": "accepted"}``.

Run it standalone for a demo: ``python -m tests.fakes.webhook --port 18082 --secret
whsec_…``; ``GET /_fake/received`` lists what arrived (path, ``webhook-id``, signature
check, work id).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from curaflow.process.httpserver import BackgroundServer


@dataclass
class Received:
    """One request the receiver got."""

    path: str
    headers: dict[str, str]
    body: bytes
    signature_ok: bool
    at: float = field(default_factory=time.time)

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Reply:
    """A scripted answer, sent after ``delay_s`` (at once when the receiver stops, or when
    ``released`` is set: a test that holds a request until it has seen what it waits for
    lets it go then, rather than after the whole delay), with ``headers`` (e.g. a
    ``Retry-After``)."""

    status: int = 200
    body: Any = field(default_factory=lambda: {"status": "accepted"})
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    released: asyncio.Event | None = None


class WebhookReceiver:
    """Records requests per path; answers from ``script[path]`` (consumed in order).

    Args:
        secret: the ``whsec_`` secret the receiver verifies with.
        dedupe: behave like a receiver that deduplicates on ``webhook-id``: a repeated
            id is answered 409 (the documented "already had it") without processing.

    Attributes:
        refuse_works: work ids this receiver refuses for good, on every path and every
            time: ``422 {"error": "unsupported content"}`` (a receiver that cannot take
            one work, e.g. its file type or content).
        answered: the ``webhook-id`` of every request whose handling ended (its answer
            sent, or its client gone), in order.
    """

    def __init__(self, secret: str, *, dedupe: bool = False, host: str = "127.0.0.1", port: int = 0) -> None:
        self.secret = secret
        self.dedupe = dedupe
        self.processed: list[str] = []
        self.answered: list[str] = []
        self.verifier = Webhook(secret)
        self.received: list[Received] = []
        self.script: dict[str, list[Reply]] = {}
        self.refuse_works: set[str] = set()
        self.arrived = asyncio.Event()
        self._stopping = asyncio.Event()
        app = FastAPI()

        @app.get("/_fake/received")
        async def received() -> Any:
            out = []
            for r in self.received:
                try:
                    work_id = r.json().get("work", {}).get("work_id")
                except ValueError:
                    work_id = None
                out.append(
                    {
                        "path": r.path,
                        "webhook_id": r.headers.get("webhook-id"),
                        "signature_ok": r.signature_ok,
                        "work_id": work_id,
                    }
                )
            return out

        @app.post("/{path:path}")
        async def receive(request: Request, path: str) -> Response:
            try:
                return await answer(request, path)
            finally:
                self.answered.append(request.headers.get("webhook-id", ""))

        async def answer(request: Request, path: str) -> Response:
            body = await request.body()
            headers = {k.lower(): v for k, v in request.headers.items()}
            try:
                self.verifier.verify(body.decode(), headers)
                ok = True
            except (WebhookVerificationError, ValueError):
                ok = False
            self.received.append(Received("/" + path, headers, body, ok))
            self.arrived.set()
            msg_id = headers.get("webhook-id", "")
            if self.dedupe and msg_id in self.processed:
                return JSONResponse({"status": "duplicate"}, status_code=409)
            self.processed.append(msg_id)
            if self.refuse_works:
                with contextlib.suppress(ValueError, AttributeError):
                    if json.loads(body).get("work", {}).get("work_id") in self.refuse_works:
                        return JSONResponse({"error": "unsupported content"}, status_code=422)
            queue = self.script.get("/" + path) or []
            reply = queue.pop(0) if queue else Reply()
            if reply.delay_s:
                # held for delay_s, or until the receiver stops: a request a test left held
                # (its worker killed, frozen or cancelled) does not hold up the test's end
                ends = [asyncio.ensure_future(self._stopping.wait())]
                if reply.released is not None:
                    ends.append(asyncio.ensure_future(reply.released.wait()))
                try:
                    await asyncio.wait(ends, timeout=reply.delay_s, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for end in ends:
                        end.cancel()
            if reply.body is None:
                return Response(status_code=reply.status, headers=reply.headers)
            return JSONResponse(reply.body, status_code=reply.status, headers=reply.headers)

        self.server = BackgroundServer(app, host, port)

    @property
    def url(self) -> str:
        return self.server.url

    def reset(self) -> WebhookReceiver:
        """Forget every request, answer and script (one receiver serving the tests of a module)."""
        self.received.clear()
        self.processed.clear()
        self.answered.clear()
        self.script.clear()
        self.refuse_works.clear()
        self.arrived.clear()
        return self

    def works(self) -> list[str]:
        """The work id of every delivery received, in order."""
        return [str(r.json().get("work", {}).get("work_id")) for r in self.received]

    def at(self, path: str) -> list[Received]:
        """Requests received on ``path``."""
        return [r for r in self.received if r.path == path]

    async def start(self) -> WebhookReceiver:
        await self.server.start()
        return self

    async def stop(self) -> None:
        """Answer every held request at once, then stop serving."""
        self._stopping.set()
        await self.server.stop()


async def _serve(port: int, secret: str) -> None:
    receiver = await WebhookReceiver(secret, port=port).start()
    print(f"webhook receiver on {receiver.url}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await receiver.stop()


def main() -> None:
    """``python -m tests.fakes.webhook``: serve the receiver until interrupted."""
    import argparse

    parser = argparse.ArgumentParser(description="signed-webhook receiver")
    parser.add_argument("--port", type=int, default=18082)
    parser.add_argument("--secret", required=True)
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args.port, args.secret))


if __name__ == "__main__":
    main()

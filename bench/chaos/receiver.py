"""A recording webhook receiver, run as its own process for the chaos suite.

``python -m bench.chaos.receiver --port 18090 --log received.jsonl --secret whsec_…``

Every ``POST`` is verified (Standard Webhooks, like a real receiver), then appended as
one JSON line to ``--log`` *before* it is answered — so the file holds every request
that reached the receiver, including those whose answer the sender never read (a worker
killed mid-request, a cancelled send)::

    {"at_ms": 1764500000123, "path": "/kill/0", "webhook_id": "curaflow:…", "job_id": "…",
     "target_id": "kill0", "route": "kill-hook0", "work_id": "126882976", "signature_ok": true}

It answers like an idempotent receiver that deduplicates on ``webhook-id``: ``200
{"status": "accepted", "id": "r-<hash of the webhook-id>"}``, the same id for a re-send,
after a random delay of up to ``--max-delay-ms`` (which widens the window in which a
worker can die or a job be cancelled while the request is out); a ``delay_ms`` query
parameter in the route's URL sets that bound for its requests.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import time
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from standardwebhooks.webhooks import Webhook, WebhookVerificationError


def create_receiver_app(log_path: Path, secret: str, max_delay_ms: int = 0) -> FastAPI:
    """The receiver's ASGI app: records each POST to ``log_path`` (JSON lines), answers 200.

    Args:
        log_path: the JSON-lines file (appended to; created if missing).
        secret: the ``whsec_`` secret signatures are verified with.
        max_delay_ms: answer after a uniform random delay in ``[0, max_delay_ms]`` ms.
    """
    verifier = Webhook(secret)
    app = FastAPI()
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    count = {"received": 0}

    @app.get("/_chaos/count")
    async def received() -> dict[str, int]:
        return count

    @app.post("/{path:path}")
    async def receive(request: Request, path: str) -> JSONResponse:
        body = await request.body()
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            verifier.verify(body.decode(), headers)
            signature_ok = True
        except (WebhookVerificationError, ValueError):
            signature_ok = False
        try:
            doc: dict[str, Any] = json.loads(body)
        except ValueError:
            doc = {}
        webhook_id = headers.get("webhook-id", "")
        line = {
            "at_ms": int(time.time() * 1000),
            "path": "/" + path,
            "webhook_id": webhook_id,
            "job_id": doc.get("job_id"),
            "target_id": doc.get("target_id"),
            "route": doc.get("route"),
            "work_id": str((doc.get("work") or {}).get("work_id")),
            "signature_ok": signature_ok,
        }
        os.write(fd, (json.dumps(line, ensure_ascii=False) + "\n").encode())  # one write: whole lines
        count["received"] += 1
        try:
            bound = int(request.query_params.get("delay_ms", max_delay_ms))
        except ValueError:
            bound = max_delay_ms
        if bound > 0:
            await asyncio.sleep(random.uniform(0, bound) / 1000)
        if not signature_ok:
            return JSONResponse({"error": "bad signature"}, status_code=401)
        remote_id = "r-" + hashlib.sha256(webhook_id.encode()).hexdigest()[:12]
        return JSONResponse({"status": "accepted", "id": remote_id})

    return app


def read_received(log_path: Path) -> list[dict[str, Any]]:
    """Every request the receiver recorded, in arrival order (a torn last line is skipped)."""
    if not log_path.exists():
        return []
    out = []
    for line in log_path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def main() -> None:
    """Parse the options and serve until interrupted."""
    parser = argparse.ArgumentParser(description="recording Standard Webhooks receiver (chaos suite)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--max-delay-ms", type=int, default=0)
    args = parser.parse_args()
    app = create_receiver_app(args.log, args.secret, args.max_delay_ms)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()

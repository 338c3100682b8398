"""The benchmark's load generator (bench/loadgen.py) offers what it is asked, at the rate
asked, and reports every answer: admissions with their keys, reads of every path."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from fastapi import FastAPI, Request

from bench import loadgen
from curaflow.process.httpserver import BackgroundServer


def _server() -> tuple[FastAPI, list[tuple[str, str, str, str]]]:
    app = FastAPI()
    seen: list[tuple[str, str, str, str]] = []

    @app.post("/jobs", status_code=202)
    async def admit(request: Request) -> dict[str, str]:
        body = await request.json()
        seen.append(("POST", request.url.path, body["idempotency_key"], request.headers["authorization"]))
        return {"ok": "yes"}

    @app.get("/jobs/{job_id}")
    async def read(job_id: str, request: Request) -> dict[str, str]:
        seen.append(("GET", f"{request.url.path}?{request.url.query}", "", request.headers["authorization"]))
        return {"job_id": job_id}

    return app, seen


async def test_admissions_carry_their_keys_and_every_answer_is_reported() -> None:
    app, seen = _server()
    server = await BackgroundServer(app).start()
    try:
        result = await loadgen.offer(server.url, "t0k", 200, loadgen.admissions("k", 20, {"target_id": "t"}))
    finally:
        await server.stop()
    assert result["statuses"] == [202] * 20
    assert len(result["latencies_ms"]) == 20 and all(v > 0 for v in result["latencies_ms"])
    assert sorted(key for _, _, key, _ in seen) == sorted(f"k-{i}" for i in range(20))
    assert {auth for *_, auth in seen} == {"Bearer t0k"}


async def test_reads_get_every_path_in_order_from_the_command_line(tmp_path: Path) -> None:
    app, seen = _server()
    server = await BackgroundServer(app).start()
    paths = tmp_path / "paths.txt"
    paths.write_text("/jobs/a?after=x&limit=10\n/jobs/b\n/nope\n", encoding="utf-8")
    try:
        done = await asyncio.to_thread(
            subprocess.run,
            [
                sys.executable,
                "-m",
                "bench.loadgen",
                "--url",
                server.url,
                "--token",
                "t",
                "--rate",
                "50",
                "--paths",
                str(paths),
                "--clients",
                "1",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    finally:
        await server.stop()
    result = json.loads(done.stdout)
    assert result["statuses"] == [200, 200, 404]
    assert [path for _, path, _, _ in seen] == ["/jobs/a?after=x&limit=10", "/jobs/b?"]
    # Offered at 50/s: the third request was not due before 40 ms after the first.
    assert result["achieved_per_s"] <= 50 * 3 / 2

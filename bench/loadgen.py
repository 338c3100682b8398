"""Open-loop load generator for admissions, run as its own process (issue 15).

Offers ``POST /jobs`` at a fixed rate — request *i* is due at ``start + i / rate`` —
with at most ``clients`` requests in flight, and measures each latency from the due
time, not from the send (no coordinated omission: a generator or server that falls
behind shows up as latency). It runs in its own process, so the benchmark's own work
never delays a send, and uses aiohttp (its client costs a fraction of httpx's CPU per
request); without aiohttp it falls back to httpx.

Run ``python -m bench.loadgen --url URL --token T --rate 150 --n 1000 --prefix KEY
[--params JSON]``; prints one JSON object: ``latencies_ms`` (per request, from its due
time), ``statuses``, ``achieved_per_s`` (completed requests / wall seconds) and
``generator`` (the client library). Request *i* carries the idempotency key
``{prefix}-{i}``, so a second run with the same prefix replays the same Tasks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any


def _body(prefix: str, i: int, params: dict[str, Any]) -> bytes:
    task = {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": f"{prefix}-{i}",
        "params": params,
    }
    return json.dumps(task).encode()


async def offer(
    url: str, token: str, rate: float, n: int, prefix: str, params: dict[str, Any], clients: int = 50
) -> dict[str, Any]:
    """Offer ``n`` admissions at ``rate`` per second; see the module doc for the result."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    bodies = [_body(prefix, i, params) for i in range(n)]
    latencies: list[float] = [0.0] * n
    statuses: list[int] = [0] * n
    gate = asyncio.Semaphore(clients)
    try:
        import aiohttp
    except ImportError:  # pragma: no cover - dev installs have aiohttp
        aiohttp = None  # type: ignore[assignment]

    if aiohttp is not None:
        session: Any = aiohttp.ClientSession(
            base_url=url, headers=headers, connector=aiohttp.TCPConnector(limit=clients)
        )

        async def send(body: bytes) -> int:
            async with session.post("/jobs", data=body) as response:
                await response.read()
                return int(response.status)

        generator = f"aiohttp {aiohttp.__version__}"
    else:
        import httpx

        session = httpx.AsyncClient(base_url=url, headers=headers, limits=httpx.Limits(max_connections=clients))

        async def send(body: bytes) -> int:
            return int((await session.post("/jobs", content=body)).status_code)

        generator = "httpx"
    start = time.perf_counter() + 0.05

    async def one(i: int) -> None:
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        async with gate:
            statuses[i] = await send(bodies[i])
        latencies[i] = (time.perf_counter() - due) * 1000

    try:
        await asyncio.gather(*(one(i) for i in range(n)))
    finally:
        await (session.close() if aiohttp is not None else session.aclose())
    wall = time.perf_counter() - start
    return {
        "latencies_ms": [round(v, 3) for v in latencies],
        "statuses": statuses,
        "achieved_per_s": round(n / wall, 1),
        "generator": generator,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="curaflow benchmark: open-loop admission load")
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--rate", type=float, required=True, help="requests offered per second")
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--prefix", required=True, help="idempotency keys are PREFIX-0 … PREFIX-(n-1)")
    parser.add_argument("--params", default='{"query": {"tags": ["bench"]}}', help="the Tasks' params (JSON)")
    parser.add_argument("--clients", type=int, default=50, help="most requests in flight")
    args = parser.parse_args()
    result = asyncio.run(
        offer(args.url, args.token, args.rate, args.n, args.prefix, json.loads(args.params), args.clients)
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()

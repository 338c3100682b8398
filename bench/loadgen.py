"""Open-loop load generator, run as its own process.

Offers requests at a fixed rate — request *i* is due at ``start + i / rate`` — with at
most ``clients`` requests in flight, and measures each latency from the due time, not
from the send (no coordinated omission: a generator or server that falls behind shows up
as latency). It runs in its own process, so the benchmark's own work never delays a
send, and uses aiohttp (its client costs a fraction of httpx's CPU per request); without
aiohttp it falls back to httpx.

Two kinds of load:

* admissions: ``python -m bench.loadgen --url URL --token T --rate 150 --n 1000 --prefix
  KEY [--params JSON]`` offers ``POST /jobs``; request *i* carries the idempotency key
  ``{prefix}-{i}``, so a second run with the same prefix replays the same Tasks;
* reads: ``python -m bench.loadgen --url URL --token T --rate 100 --paths FILE`` offers
  ``GET`` of each path in FILE (one per line, with its query string), in order.

Prints one JSON object: ``latencies_ms`` (per request, from its due time), ``statuses``,
``achieved_per_s`` (completed requests / wall seconds) and ``generator`` (the client
library).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

#: One request: method, path (with its query string) and body (None for a GET).
Request = tuple[str, str, bytes | None]


def admissions(prefix: str, n: int, params: dict[str, Any]) -> list[Request]:
    """``n`` ``POST /jobs`` of Tasks with the idempotency keys ``{prefix}-0 …``."""
    requests: list[Request] = []
    for i in range(n):
        task = {
            "protocol_version": "1",
            "job_type": "candidate_search",
            "idempotency_key": f"{prefix}-{i}",
            "params": params,
        }
        requests.append(("POST", "/jobs", json.dumps(task).encode()))
    return requests


async def offer(url: str, token: str, rate: float, requests: list[Request], clients: int = 50) -> dict[str, Any]:
    """Offer ``requests`` at ``rate`` per second; see the module doc for the result."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    n = len(requests)
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

        async def send(method: str, path: str, body: bytes | None) -> int:
            async with session.request(method, path, data=body) as response:
                await response.read()
                return int(response.status)

        generator = f"aiohttp {aiohttp.__version__}"
    else:
        import httpx

        session = httpx.AsyncClient(base_url=url, headers=headers, limits=httpx.Limits(max_connections=clients))

        async def send(method: str, path: str, body: bytes | None) -> int:
            return int((await session.request(method, path, content=body)).status_code)

        generator = "httpx"
    start = time.perf_counter() + 0.05

    async def one(i: int) -> None:
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        async with gate:
            statuses[i] = await send(*requests[i])
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
    parser = argparse.ArgumentParser(description="curaflow benchmark: open-loop load from its own process")
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--rate", type=float, required=True, help="requests offered per second")
    parser.add_argument("--n", type=int, help="admissions: how many")
    parser.add_argument("--prefix", help="admissions: idempotency keys are PREFIX-0 … PREFIX-(n-1)")
    parser.add_argument("--params", default='{"query": {"tags": ["bench"]}}', help="admissions: the Tasks' params")
    parser.add_argument("--paths", help="reads: a file of paths to GET, one per line")
    parser.add_argument("--clients", type=int, default=50, help="most requests in flight")
    args = parser.parse_args()
    if args.paths:
        with open(args.paths, encoding="utf-8") as fh:
            requests: list[Request] = [("GET", line.strip(), None) for line in fh if line.strip()]
    elif args.n is not None and args.prefix:
        requests = admissions(args.prefix, args.n, json.loads(args.params))
    else:
        parser.error("give --paths FILE, or --n and --prefix")
    print(json.dumps(asyncio.run(offer(args.url, args.token, args.rate, requests, args.clients))))


if __name__ == "__main__":
    main()

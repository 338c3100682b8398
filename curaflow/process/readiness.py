"""Readiness (``GET /ready``) of the API and of a worker: each check named, 200 or 503.

``GET /health`` is liveness: the process answers. ``GET /ready`` says whether the
process can do its job now, as ``{"status": "ready" | "not_ready", "service", "checks":
{name: {"ok", "detail"?, "elapsed_ms"?}}}`` (``$defs/Readiness`` of the protocol
schema) with HTTP 200 when every check is ok, else 503. The checks:

* ``ledger`` — ``SELECT 1`` through the process's pool, within :data:`CHECK_TIMEOUT_S`;
* ``temporal`` — the Temporal frontend's health check through the process's client;
* ``loop:<name>`` — each supervised background loop (:mod:`curaflow.observability.supervision`)
  runs and its last attempt did not fail; in a worker also each Temporal worker
  (``loop:temporal_worker:<task queue>``), i.e. its polling of Temporal still runs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import asyncpg
from temporalio.client import Client

from curaflow.observability.secrets import redacted

#: Bound of one readiness check, seconds (a check that hangs is a failed check).
CHECK_TIMEOUT_S = 2.0


def _failed(err: BaseException) -> str:
    text = redacted(str(err).strip())  # an answer to anyone who asks: no secret the process holds
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


async def check_ledger(pool: asyncpg.Pool | None) -> dict[str, Any]:
    """``{ok, elapsed_ms, detail?}`` of a ``SELECT 1`` on the ledger."""
    if pool is None:
        return {"ok": False, "detail": "no ledger pool"}
    started = time.perf_counter()
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_S):
            async with pool.acquire() as conn:
                await conn.fetchval("SELECT 1")
    except Exception as err:  # noqa: BLE001 - any failure is "not ready"
        return {"ok": False, "detail": _failed(err)}
    return {"ok": True, "elapsed_ms": round((time.perf_counter() - started) * 1000, 2)}


async def check_temporal(client: Client | None) -> dict[str, Any]:
    """``{ok, elapsed_ms, detail?}`` of the Temporal frontend's health check."""
    if client is None:
        return {"ok": False, "detail": "not connected to Temporal"}
    started = time.perf_counter()
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_S + 1):
            healthy = await client.service_client.check_health(timeout=timedelta(seconds=CHECK_TIMEOUT_S))
    except Exception as err:  # noqa: BLE001 - any failure is "not ready"
        return {"ok": False, "detail": _failed(err)}
    if not healthy:
        return {"ok": False, "detail": "Temporal reports itself unhealthy"}
    return {"ok": True, "elapsed_ms": round((time.perf_counter() - started) * 1000, 2)}


def readiness(service: str, checks: Mapping[str, Mapping[str, Any]]) -> tuple[int, dict[str, Any]]:
    """The ``/ready`` answer: ``(HTTP status, body)`` — 200 when every check is ok, else 503."""
    ready = all(check.get("ok") for check in checks.values())
    body = {"status": "ready" if ready else "not_ready", "service": service, "checks": dict(checks)}
    return (200 if ready else 503), body

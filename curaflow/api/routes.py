"""The Workflow Protocol v1 job surface (reference §9.1 routes).

Every protected route requires the bearer token (:mod:`curaflow.api.auth`). Bodies
validate against ``curaflow/protocol/schema/protocol.schema.json``; what each route
answers is described in :mod:`curaflow.api.openapi`. The event stream routes live in
:mod:`curaflow.api.events`.

Job ids are path parameters of the ``path`` kind: a job id may contain ``/`` (it embeds
the idempotency key), sent percent-encoded (``%2F``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

import curaflow
from curaflow.api.auth import require_token
from curaflow.api.body import read_json
from curaflow.build import source_commit
from curaflow.cancellation import cancel_job
from curaflow.ledger.db import now_ms
from curaflow.ledger.records import load_job
from curaflow.protocol.errors import SUPPORTED_PROTOCOL_VERSIONS, invalid_params
from curaflow.protocol.projection import project_job
from curaflow.protocol.task import storable
from curaflow.readiness import check_ledger, check_temporal, readiness

router = APIRouter()
protected = APIRouter(dependencies=[Depends(require_token)])


def unknown_job() -> Exception:
    """The 404 of a job id no job has (GET / events / ack: no ``detail``, reference §2.5)."""
    return invalid_params("unknown job", http_status=404)


def storable_id(job_id: str) -> bool:
    """False for an id no job can have: PostgreSQL text cannot hold a NUL character or a
    lone surrogate."""
    return storable(job_id)


def literal_suffix(request: Request, suffix: str) -> bool:
    """True when the request's path really ends with ``suffix`` as a path segment.

    Routing sees the percent-decoded path, so ``/jobs/a%2Fcancel`` (the job ``a/cancel``)
    looks like ``/jobs/a/cancel``. The raw path tells them apart; a server that does not
    pass it on is taken at its word.
    """
    raw = request.scope.get("raw_path")
    if not raw:
        return True
    return bytes(raw).split(b"?", 1)[0].endswith(suffix.encode())


FEATURES = ["events", "progress", "cancel", "idempotency", "exclude", "tag_expansion", "target_selector"]


@router.get("/health", operation_id="health", tags=["meta"])
async def health() -> dict[str, Any]:
    """Liveness and version (no auth); ``commit`` is :func:`curaflow.build.source_commit`."""
    return {"status": "ok", "service": "curaflow", "version": curaflow.__version__, "commit": source_commit()}


@router.get("/ready", operation_id="ready", tags=["meta"])
async def ready(request: Request) -> JSONResponse:
    """Readiness (no auth): the ledger and Temporal are reachable and every background loop
    runs; 200 or 503 with each check named (:mod:`curaflow.readiness`)."""
    state = request.app.state
    ledger, temporal = await asyncio.gather(
        check_ledger(getattr(state, "pool", None)), check_temporal(getattr(state, "client", None))
    )
    checks: dict[str, dict[str, Any]] = {"ledger": ledger, "temporal": temporal}
    supervisor = getattr(state, "supervisor", None)
    if supervisor is not None:
        checks.update(supervisor.checks())
    if getattr(state, "failure", None):
        checks["process"] = {"ok": False, "detail": f"failed: {state.failure}"}
    status, body = readiness("curaflow-api", checks)
    return JSONResponse(body, status_code=status)


@protected.get("/capabilities", operation_id="capabilities", tags=["jobs"])
async def capabilities(request: Request) -> dict[str, Any]:
    """Job types, features and the live budgets (ms), built from the configuration on every call."""
    settings = request.app.state.settings
    return {
        "protocol_versions": list(SUPPORTED_PROTOCOL_VERSIONS),
        "job_types": [
            {
                "name": "candidate_search",
                "params_schema": "#/$defs/CandidateSearchParams",
                "result_schema": "#/$defs/Result_CandidateSearch",
                "features": FEATURES,
                "queued_timeout_ms": settings.budgets.queued_ms,
                "stall_timeout_ms": settings.budgets.stall_ms,
                "heartbeat_interval_ms": settings.budgets.heartbeat_interval_ms,
                "default_deadline_ms": settings.budgets.default_deadline_ms,
            }
        ],
        "server_time": now_ms(),
    }


@protected.post("/jobs", status_code=202, operation_id="submit_job", tags=["jobs"])
async def submit(request: Request) -> JSONResponse:
    """Admit a Task: 202 ``{job}`` on first admission, 200 with the identical body on replay."""
    body = await read_json(request, request.app.state.settings.api.max_body_bytes)
    admission = await request.app.state.admitter.admit(body)
    job = admission.body.get("job", {})
    request.state.log_fields = {
        "job_id": admission.job_id,
        "job_type": job.get("job_type"),
        "status": job.get("status"),
        "disposition": "replayed" if admission.replayed else "accepted",
    }
    return JSONResponse(admission.body, status_code=200 if admission.replayed else 202)


@protected.get("/jobs", operation_id="find_jobs", tags=["jobs"])
async def jobs_by_key(
    request: Request,
    idempotency_key: str | None = Query(None, description="The idempotency key (exact, case-sensitive match)."),
) -> JSONResponse:
    """The job owning ``idempotency_key`` (exact match, untrimmed): zero or one job."""
    if idempotency_key is None or not idempotency_key.strip():
        raise invalid_params("idempotency_key is required", field="idempotency_key")
    if not storable_id(idempotency_key):
        return JSONResponse({"jobs": [], "server_time": now_ms()})
    pool = request.app.state.pool
    async with pool.acquire() as conn:
        job_id = await conn.fetchval("SELECT job_id FROM jobs WHERE idempotency_key = $1", idempotency_key)
        record = await load_job(conn, job_id) if job_id else None
    now = now_ms()
    return JSONResponse({"jobs": [project_job(record, now)] if record else [], "server_time": now})


@protected.get("/jobs/{job_id:path}", operation_id="get_job", tags=["jobs"])
async def get_job(request: Request, job_id: str) -> JSONResponse:
    """The job as the ledger holds it (answers with no worker running)."""
    if not storable_id(job_id):
        raise unknown_job()
    async with request.app.state.pool.acquire() as conn:
        record = await load_job(conn, job_id)
    if record is None:
        raise unknown_job()
    return JSONResponse(project_job(record, now_ms()))


@protected.post("/jobs/{job_id:path}/cancel", operation_id="cancel_job", tags=["jobs"])
async def cancel(request: Request, job_id: str) -> JSONResponse:
    """Cancel the job (the request body is ignored); a terminal job is returned unchanged."""
    if not literal_suffix(request, "/cancel"):
        raise StarletteHTTPException(405)  # POST /jobs/{id} with an id ending in /cancel
    state = request.app.state
    if not storable_id(job_id):
        raise invalid_params(
            "unknown job",
            http_status=404,
            reason="unknown_job",
            job_id=job_id.encode("utf-8", "replace").decode().replace("\x00", ""),
        )
    job = await cancel_job(
        state.pool,
        state.client,
        job_id,
        wait_s=state.settings.api.cancel_wait_ms / 1000,
        notifier=state.notifier,
    )
    request.state.log_fields = {"job_id": job_id, "status": job["status"]}
    return JSONResponse(job)

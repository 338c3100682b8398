"""The Workflow Protocol v1 job surface (reference §9.1 routes).

Every protected route requires the bearer token (:mod:`curaflow.api.auth`). Bodies
validate against ``curaflow/protocol/schema/protocol.schema.json``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

import curaflow
from curaflow.api.auth import require_token
from curaflow.api.body import read_json
from curaflow.cancellation import cancel_job
from curaflow.ledger.db import now_ms
from curaflow.ledger.records import load_job
from curaflow.protocol import models
from curaflow.protocol.errors import SUPPORTED_PROTOCOL_VERSIONS, invalid_params
from curaflow.protocol.projection import project_job

router = APIRouter()
protected = APIRouter(dependencies=[Depends(require_token)])

ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": models.ErrorResponse, "description": "invalid request"},
    401: {"description": "missing or wrong bearer token (legacy shape {status, error})"},
    404: {"model": models.ErrorResponse, "description": "unknown job"},
    503: {"description": "no token configured (legacy shape {status, error})"},
}
TASK_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Task"}}},
    }
}
FEATURES = ["events", "progress", "cancel", "idempotency", "exclude", "tag_expansion", "target_selector"]


@router.get("/health", response_model=models.Health, tags=["meta"])
async def health() -> dict[str, Any]:
    """Liveness and version (no auth)."""
    return {"status": "ok", "service": "curaflow", "version": curaflow.__version__, "commit": "dev"}


@protected.get("/capabilities", response_model=models.Capabilities, responses=ERRORS, tags=["jobs"])
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


@protected.post(
    "/jobs",
    status_code=202,
    response_model=models.JobEnvelope,
    responses={
        **ERRORS,
        200: {"model": models.JobEnvelope, "description": "replay"},
        409: {"model": models.ErrorResponse},
        413: {"model": models.ErrorResponse},
    },
    openapi_extra=TASK_BODY,
    tags=["jobs"],
)
async def submit(request: Request) -> JSONResponse:
    """Admit a Task: 202 ``{job}`` on first admission, 200 with the identical body on replay."""
    body = await read_json(request, request.app.state.settings.api.max_body_bytes)
    admission = await request.app.state.admitter.admit(body)
    request.state.log_fields = {
        "job_id": admission.job_id,
        "disposition": "replayed" if admission.replayed else "accepted",
    }
    return JSONResponse(admission.body, status_code=200 if admission.replayed else 202)


@protected.get("/jobs", response_model=models.JobPage, responses=ERRORS, tags=["jobs"])
async def jobs_by_key(request: Request, idempotency_key: str | None = None) -> dict[str, Any]:
    """The job owning ``idempotency_key`` (exact match, untrimmed): zero or one job."""
    if idempotency_key is None or not idempotency_key.strip():
        raise invalid_params("idempotency_key is required")
    pool = request.app.state.pool
    async with pool.acquire() as conn:
        job_id = await conn.fetchval("SELECT job_id FROM jobs WHERE idempotency_key = $1", idempotency_key)
        record = await load_job(conn, job_id) if job_id else None
    now = now_ms()
    return {"jobs": [project_job(record, now)] if record else [], "server_time": now}


@protected.get("/jobs/{job_id}", response_model=models.Job, responses=ERRORS, tags=["jobs"])
async def get_job(request: Request, job_id: str) -> JSONResponse:
    """The job as the ledger holds it (answers with no worker running)."""
    async with request.app.state.pool.acquire() as conn:
        record = await load_job(conn, job_id)
    if record is None:
        raise invalid_params("unknown job", http_status=404)
    return JSONResponse(project_job(record, now_ms()))


@protected.post("/jobs/{job_id}/cancel", response_model=models.Job, responses=ERRORS, tags=["jobs"])
async def cancel(request: Request, job_id: str) -> JSONResponse:
    """Cancel the job (the request body is ignored); a terminal job is returned unchanged."""
    state = request.app.state
    job = await cancel_job(state.pool, state.client, job_id, wait_s=state.settings.api.cancel_wait_ms / 1000)
    request.state.log_fields = {"job_id": job_id, "status": job["status"]}
    return JSONResponse(job)

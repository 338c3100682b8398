"""What the API says about itself: ``GET /health``, ``GET /ready`` (no token) and
``GET /capabilities`` (protected).

Liveness, readiness (:mod:`curaflow.process.readiness`) and the protocol capability declaration
built from the live configuration on every call.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import asyncpg
from fastapi import APIRouter, Depends, Response
from temporalio.client import Client

import curaflow
from curaflow.api.auth import require_token
from curaflow.api.body import accepts_json, single_query_values
from curaflow.api.deps import SettingsDep, failure_of, pool_if_open, supervisor_of, temporal_of
from curaflow.build import source_commit
from curaflow.ledger.db import now_ms
from curaflow.observability.supervision import Supervisor
from curaflow.process.readiness import check_ledger, check_temporal, readiness
from curaflow.protocol.errors import SUPPORTED_PROTOCOL_VERSIONS
from curaflow.protocol.models import Capabilities, Health, Readiness

open_router = APIRouter(tags=["meta"])
protected_router = APIRouter(dependencies=[Depends(require_token), Depends(single_query_values), Depends(accepts_json)])

#: The protocol features ``candidate_search`` jobs support (``GET /capabilities``): members
#: of v1's closed ``features`` enum only, so the answer validates against the upstream schema.
FEATURES = ["events", "progress", "cancel", "idempotency", "exclude", "tag_expansion"]
#: Features beyond that enum, in curaflow's extension member ``extended_features`` (the
#: protocol's additive rule: unknown members are ignored): the v1.1 target selector.
EXTENDED_FEATURES = ["target_selector"]


@open_router.get("/health", operation_id="health", response_model=Health, response_model_exclude_unset=True)
async def health() -> dict[str, Any]:
    """Liveness and version (no auth); ``commit`` is :func:`curaflow.build.source_commit`."""
    return {"status": "ok", "service": "curaflow", "version": curaflow.__version__, "commit": source_commit()}


@open_router.get("/ready", operation_id="ready", response_model=Readiness, response_model_exclude_unset=True)
async def ready(
    response: Response,
    pool: Annotated[asyncpg.Pool | None, Depends(pool_if_open)],
    client: Annotated[Client | None, Depends(temporal_of)],
    supervisor: Annotated[Supervisor | None, Depends(supervisor_of)],
    failure: Annotated[str | None, Depends(failure_of)],
) -> dict[str, Any]:
    """Readiness (no auth): the ledger and Temporal are reachable and every background loop
    runs; 200 or 503 with each check named (:mod:`curaflow.process.readiness`)."""
    ledger, temporal = await asyncio.gather(check_ledger(pool), check_temporal(client))
    checks: dict[str, dict[str, Any]] = {"ledger": ledger, "temporal": temporal}
    if supervisor is not None:
        checks.update(supervisor.checks())
    if failure:
        checks["process"] = {"ok": False, "detail": f"failed: {failure}"}
    status, body = readiness("curaflow-api", checks)
    response.status_code = status
    return body


@protected_router.get(
    "/capabilities",
    operation_id="capabilities",
    tags=["jobs"],
    response_model=Capabilities,
    response_model_exclude_unset=True,
)
async def capabilities(settings: SettingsDep) -> dict[str, Any]:
    """Job types, features and the live budgets (ms), built from the configuration on every call."""
    return {
        "protocol_versions": list(SUPPORTED_PROTOCOL_VERSIONS),
        "job_types": [
            {
                "name": "candidate_search",
                "params_schema": "#/$defs/CandidateSearchParams",
                "result_schema": "#/$defs/Result_CandidateSearch",
                "features": FEATURES,
                "extended_features": EXTENDED_FEATURES,
                "queued_timeout_ms": settings.budgets.queued_ms,
                "stall_timeout_ms": settings.budgets.stall_ms,
                "heartbeat_interval_ms": settings.budgets.heartbeat_interval_ms,
                "default_deadline_ms": settings.budgets.default_deadline_ms,
            }
        ],
        "server_time": now_ms(),
    }

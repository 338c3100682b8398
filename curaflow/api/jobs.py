"""The job resource of Workflow Protocol v1 (reference §9.1): admit, find, read, cancel.

Every route requires the bearer token (:mod:`curaflow.api.auth`). The Task body is
validated by the wire model (:class:`curaflow.protocol.models.Task`, through the
:data:`~curaflow.api.deps.TaskBody` dependency); answers are declared with
``response_model=`` and published from the vendored schema (:mod:`curaflow.api.openapi`).
An admission answers the frozen body of the first admission, byte for byte. The event
stream of a job lives in :mod:`curaflow.api.events`.

Job ids are path parameters of the ``path`` kind: a job id may contain ``/`` (it embeds
the idempotency key), sent percent-encoded (``%2F``).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from curaflow.api.auth import require_token
from curaflow.api.body import accepts_json, single_query_values
from curaflow.api.deps import AdmitterDep, LedgerPool, NotifierDep, SettingsDep, TaskBody, TemporalClient
from curaflow.jobs.cancellation import cancel_job
from curaflow.ledger.db import now_ms
from curaflow.ledger.records import load_job
from curaflow.process.http_methods import serves_its_address
from curaflow.protocol.errors import ProtocolError, invalid_params, required_sentence
from curaflow.protocol.keys import key_refusal, normalise_key, storable
from curaflow.protocol.models import Job, JobEnvelope, JobPage
from curaflow.protocol.projection import job_path, project_job

jobs_router = APIRouter(
    dependencies=[Depends(require_token), Depends(single_query_values), Depends(accepts_json)], tags=["jobs"]
)


def unknown_job() -> ProtocolError:
    """The 404 of a job id no job has (GET / events / ack: no ``detail``, reference §2.5)."""
    return invalid_params("unknown job", http_status=404)


def storable_id(job_id: str) -> bool:
    """False for an id no job can have: PostgreSQL text cannot hold a NUL character or a
    lone surrogate."""
    return storable(job_id)


async def read_job(pool: LedgerPool, job_id: str) -> dict[str, Any]:
    """The protocol Job of ``job_id`` as the ledger holds it.

    Raises:
        ProtocolError: 404 :func:`unknown_job`.
    """
    if not storable_id(job_id):
        raise unknown_job()
    async with pool.acquire() as conn:
        record = await load_job(conn, job_id)
    if record is None:
        raise unknown_job()
    return project_job(record)


@jobs_router.post("/jobs", status_code=202, operation_id="submit_job", response_model=JobEnvelope)
async def submit(request: Request, task: TaskBody, admitter: AdmitterDep) -> JSONResponse:
    """Admit a Task: 202 ``{job}`` on first admission, 200 with the identical body on replay;
    both with ``Location``, the job's address (:func:`~curaflow.protocol.projection.job_path`,
    as its ``events_url`` spells it)."""
    admission = await admitter.admit(task)
    job = admission.body.get("job", {})
    request.state.log_fields = {
        "job_id": admission.job_id,
        "job_type": job.get("job_type"),
        "status": job.get("status"),
        "disposition": "replayed" if admission.replayed else "accepted",
    }
    # The frozen body of the first admission, as it is: never re-serialised by a model. Location:
    # the job's address, a 202's status monitor (RFC 9110 §15.3.3), on a replay too.
    return JSONResponse(
        admission.body,
        status_code=200 if admission.replayed else 202,
        headers={"Location": job_path(admission.job_id)},
    )


@jobs_router.get("/jobs", operation_id="find_jobs", response_model=JobPage, response_model_exclude_unset=True)
async def find_jobs(
    pool: LedgerPool,
    idempotency_key: Annotated[
        str | None,
        Query(description="The idempotency key, read as admission reads it: trimmed, then matched exactly."),
    ] = None,
) -> dict[str, Any]:
    """The job owning ``idempotency_key``: zero or one job.

    The key is read by :func:`curaflow.protocol.keys.normalise_key`, as admission reads
    it, so every key ``POST /jobs`` accepted finds its job whatever whitespace surrounds
    it; it is then matched exactly (case-sensitive). A key admission would refuse has no
    job: ``{jobs: []}``.
    """
    key = normalise_key(idempotency_key or "")
    if not key:
        raise invalid_params(required_sentence("idempotency_key"), field="idempotency_key")
    if key_refusal(key) is not None:
        return {"jobs": [], "server_time": now_ms()}
    async with pool.acquire() as conn:
        job_id = await conn.fetchval("SELECT job_id FROM jobs WHERE idempotency_key = $1", key)
        record = await load_job(conn, job_id) if job_id else None
    now = now_ms()
    return {"jobs": [project_job(record)] if record else [], "server_time": now}


@jobs_router.get("/jobs/{job_id:path}", operation_id="get_job", response_model=Job, response_model_exclude_unset=True)
async def get_job(request: Request, pool: LedgerPool, job_id: str) -> dict[str, Any]:
    """The job as the ledger holds it (answers with no worker running).

    A path that is a sub-route's address — ``/jobs/a/cancel``, ``/jobs/a/events/ack``, the
    ``/`` not encoded — is no job's: ``405`` with that address's ``Allow``
    (:func:`curaflow.process.http_methods.serves_its_address`). Until 2026-12-07 it was read as the
    job ``a/cancel``: reported whole when one existed, ``404 unknown job`` when not.
    """
    if not serves_its_address(request.app.router, request.scope):
        raise HTTPException(405)
    return await read_job(pool, job_id)


@jobs_router.post(
    "/jobs/{job_id:path}/cancel", operation_id="cancel_job", response_model=Job, response_model_exclude_unset=True
)
async def cancel(
    request: Request,
    job_id: str,
    pool: LedgerPool,
    client: TemporalClient,
    notifier: NotifierDep,
    settings: SettingsDep,
) -> dict[str, Any]:
    """Cancel the job (the request body is ignored); a terminal job is returned unchanged."""
    if not serves_its_address(request.app.router, request.scope):
        raise HTTPException(405)  # POST /jobs/{id} with an id ending in /cancel (encoded)
    job = await cancel_job(pool, client, job_id, wait_s=settings.api.cancel_wait_ms / 1000, notifier=notifier)
    request.state.log_fields = {"job_id": job_id, "status": job["status"]}
    return job

"""PixivFlow 3.3.0's legacy refetch shim (reference §9.1–9.3): a thin compatibility layer.

TelePost's rollback switch (``PIXIVFLOW_JOB_TRANSPORT=legacy``) talks to these two routes
instead of ``/jobs``. They map onto the same admission (:class:`curaflow.jobs.admission.Admitter`)
and the same ledger projection as the job surface — no second execution path:

* ``POST /internal/targets/{target_id}/refetch`` with ``{requestId, correlationId?}``
  admits the Task ``{idempotency_key: requestId, params: {target_id}}``: the same key
  space as ``POST /jobs`` (reference §1.2), so both routes converge on the job
  ``<target_id>@manual-<requestId lowercased>``. Like the original, the legacy route
  stores no params and a replay compares none. Answer:
  ``202 {"status":"accepted","slotId":<job_id>,"disposition":…}`` where the disposition
  is ``accepted`` (first admission), ``already_running`` (the job is open),
  ``already_completed`` (it ended ``success`` / ``partial_success``) or ``accepted`` for
  a job that ended otherwise (the original re-dispatched such a slot, which found every
  cell terminal and re-ran nothing; curaflow never re-runs a terminal job).
* ``GET /internal/targets/{target_id}/refetch/{requestId}``: the camelCase projection of
  reference §9.3 (internal reason codes, not protocol codes). ``{target_id}`` is read as
  the ``POST``'s Task reads it (:func:`curaflow.protocol.models.rules.target_id_as_read`):
  a refetch is found at the address it was admitted at.

``requestId`` is read as every key is (:func:`curaflow.protocol.keys.normalise_key`:
whitespace at its ends trimmed) and names one job whatever its letter case: a UUID is the
same UUID in either case (RFC 9562 §4), so both routes resolve a case variant of a
``requestId`` to the job first admitted under it (:func:`curaflow.protocol.keys.same_request_id`)
— ``POST`` answers it as a replay, ``GET`` reports that job.

A body that is no JSON object (an array, a string, a number, ``null``, a boolean) or none
is answered as ``POST /jobs`` answers it — ``400`` "request body must be a JSON object",
``detail.reason`` ``not_an_object`` with ``detail.received``, or ``empty_body`` — in the
legacy shape with that ``detail`` (:func:`body_refusal`; reference §2.1: the original's
framework refused such a body before its handler, so it has no words of the shim's to
keep; until 2026-12-08 it was told "requestId must be a UUID").

Rules of reference §9.1: ``requestId`` must be a UUID of version 1–8 (400 otherwise),
``correlationId`` at most 200 characters, storable (no NUL, no lone surrogate: the protocol's
rule, :func:`curaflow.protocol.models.rules.check_correlation_id`, its refusal naming
``correlationId`` — until 2026-12-07 such a value met the Task's rule, whose refusal named
``correlation_id`` and said only its length); failures answer ``{"status":"error","error":…}``:
an unknown target 404 ``unknown target``, an identity conflict 409 ``ambiguous target``,
a bad request 400 (a target whose ``accept_jobs = false`` too, ``target_not_eligible`` with
the v1 door's ``detail``: :func:`_refusal`), anything else 500 ``internal error`` (no internal text leaks). Auth is
the job surface's bearer token with its legacy failure shapes (:mod:`curaflow.api.auth`).
Bodies are compact JSON (``JSON.stringify``'s bytes: no spaces, keys in the reference's
order, UTF-8) with ``Content-Type: application/json; charset=utf-8``, as Express sends.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from pydantic_core import PydanticCustomError

from curaflow.api.auth import require_token
from curaflow.api.body import read_json
from curaflow.api.deps import AdmitterDep, LedgerPool, SettingsDep
from curaflow.api.errors import LEDGER_RETRY_AFTER_S, is_ledger_outage
from curaflow.domain.cells import CellState
from curaflow.domain.models import JobRecord
from curaflow.domain.outcome import ledger_status
from curaflow.jobs.admission import Admission, Admitter
from curaflow.ledger.records import load_job
from curaflow.observability import metrics
from curaflow.observability.logs import get_logger
from curaflow.protocol.errors import ProtocolError
from curaflow.protocol.json_text import object_refusal
from curaflow.protocol.keys import manual_job_id, normalise_key, same_request_id
from curaflow.protocol.models.rules import MAX_CORRELATION_LENGTH, STORABLE, check_correlation_id, target_id_as_read
from curaflow.protocol.projection import project_job

log = get_logger("curaflow.api.legacy")
legacy_router = APIRouter(dependencies=[Depends(require_token)], include_in_schema=False)

#: A UUID of versions 1–8 (RFC 9562), any letter case.
UUID_1_8 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$", re.IGNORECASE)
#: The longest ``correlationId``: the protocol's
#: (one rule, :func:`~curaflow.protocol.models.rules.check_correlation_id`).
MAX_CORRELATION_ID = MAX_CORRELATION_LENGTH
SUCCESSFUL = ("success", "partial_success")


def legacy_json(body: dict[str, Any], status: int = 200) -> Response:
    """``body`` as Express's ``res.json`` writes it: compact, UTF-8, keys in order."""
    raw = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return Response(raw, status_code=status, media_type="application/json; charset=utf-8")


def legacy_error(status: int, message: str, detail: dict[str, Any] | None = None) -> Response:
    """The legacy failure shape ``{"status":"error","error":<message>}``, with ``detail``
    after them when given (a refusal of the body: :func:`body_refusal`)."""
    body: dict[str, Any] = {"status": "error", "error": message}
    if detail:
        body["detail"] = detail
    return legacy_json(body, status)


def body_refusal(err: ProtocolError) -> Response:
    """A refusal of the request body itself — what :func:`~curaflow.api.body.read_json`
    refuses, and a JSON text that is no object
    (:func:`~curaflow.protocol.json_text.object_refusal`) — in the legacy shape: the job
    surface's status, message and ``detail`` (``detail.reason``: ``empty_body``,
    ``not_an_object`` with ``received`` …), and its headers — ``Connection: close`` of a
    ``408`` (the rest of the body may still come), ``Accept-Encoding`` of a ``415`` for a
    content coding (2026-12-06: they were dropped).

    These are curaflow's words, not the original's: its framework refused such a body
    before its handler ran (reference §2.1), in the framework's own shape. ``detail`` since
    2026-12-08 (before, only the message, and a body that is no object was told
    "requestId must be a UUID"); the refusals of the original's rules keep its two members."""
    answer = legacy_error(err.http_status, err.message, err.detail)
    answer.headers.update(getattr(err, "headers", None) or {})
    return answer


def ledger_unavailable() -> Response:
    """503 in the legacy shape with ``Retry-After``: PostgreSQL could not be reached or did
    not answer within ``api.ledger_timeout_ms``. Nothing was lost; the same request may be
    sent again (a refetch is idempotent by its ``requestId``), as on the job surface
    (:func:`curaflow.api.errors.internal_error_response`)."""
    metrics.record_ledger_unavailable("api")
    answer = legacy_error(503, "the ledger is unavailable; retry later")
    answer.headers["Retry-After"] = str(LEDGER_RETRY_AFTER_S)
    return answer


def disposition(record: JobRecord, created: bool) -> str:
    """What the original answers for this admission (see the module doc)."""
    if created:
        return "accepted"
    if record.completed_at is None:
        return "already_running"
    return "already_completed" if record.business_status in SUCCESSFUL else "accepted"


def slot_status(record: JobRecord, job: dict[str, Any]) -> str:
    """The original's slot status (reference §5.1): pending | running | success | partial | failed | expired."""
    if record.completed_at is None:
        return "running" if record.started_at is not None else "pending"
    if job["status"] == "expired":
        return "expired"
    return ledger_status(record.cells)


def legacy_projection(record: JobRecord, request_id: str) -> dict[str, Any]:
    """The camelCase status of reference §9.3, from the same ledger projection as ``GET /jobs/{id}``.

    With several targets the first cell speaks for the job (the original's manual slots
    have exactly one).
    """
    job = project_job(record)
    cell = record.cells[0] if record.cells else None
    status = slot_status(record, job)
    return {
        "requestId": request_id,
        "slotId": record.job_id,
        "state": str(cell.state) if cell else str(CellState.PENDING),
        "slotStatus": status,
        "createdAt": record.created_at,
        "startedAt": record.started_at,
        "updatedAt": job["updated_at"],
        "heartbeatAt": job["heartbeat_at"],
        "leaseExpiresAt": job["lease_expires_at"],
        "leaseActive": job["lease_active"],
        "claimed": status != "pending" or bool(job["lease_active"]),
        "attemptCount": cell.attempt if cell else 0,
        "terminalReasonCode": cell.reason if cell else None,
        "terminalReasonMessage": cell.reason_message if cell else None,
        "manualRequestId": record.idempotency_key,
        "idempotencyKey": record.idempotency_key,
        "correlationId": record.correlation_id,
    }


async def admit_refetch(admitter: Admitter, pool: Any, target_id: str, task: dict[str, Any]) -> Admission:
    """Admit the refetch ``task`` of ``target_id``; a ``requestId`` that is a case variant
    of the key this target's job was first admitted under is a replay of that job.

    Raises:
        ProtocolError: admission's refusal (an identity conflict stays one: another key's
            job, another target's).
    """
    try:
        return await admitter.admit(task, store_params=False)
    except ProtocolError as err:
        request_id = task["idempotency_key"]
        own_job = manual_job_id(target_id, request_id)
        if err.code != "idempotency_conflict" or (err.detail or {}).get("job_id") != own_job:
            raise
        async with pool.acquire() as conn:
            record = await load_job(conn, own_job)
        if record is None or record.idempotency_key is None or not same_request_id(record.idempotency_key, request_id):
            raise
        return await admitter.admit({**task, "idempotency_key": record.idempotency_key}, store_params=False)


def _refusal(err: ProtocolError) -> Response:
    """Admission's refusal in the legacy shape (reference §9.1): ``unknown target`` 404,
    ``ambiguous target`` 409 (an identity conflict shows as this); a refusal of the request
    itself (400 / 413) keeps its status, words and, when it has a reason, its ``detail`` —
    the v1 door's answer. A target whose ``accept_jobs = false`` is the operator's
    configuration, answered 400 ``target_not_eligible`` as the v1 door answers it (the
    reference's status of a target that cannot take a job, §4 "no qualifying target → 400"):
    it was a 500 "internal error" until 2026-12-08, curaflow blamed. Anything else is 500."""
    reason = (err.detail or {}).get("reason")
    if err.http_status == 404 or reason == "unknown_target":
        return legacy_error(404, "unknown target")
    if err.http_status == 409:
        return legacy_error(409, "ambiguous target")
    if err.http_status in (400, 413):
        return legacy_error(err.http_status, err.message, err.detail if reason is not None else None)
    return legacy_error(500, "internal error")


@legacy_router.post("/internal/targets/{target_id}/refetch")
async def refetch(
    request: Request, target_id: str, settings: SettingsDep, admitter: AdmitterDep, pool: LedgerPool
) -> Response:
    """Admit a refetch of ``target_id`` keyed by ``requestId`` (see the module doc)."""
    try:
        body = await read_json(request, settings.api.max_body_bytes, settings.api.body_timeout_ms)
        not_an_object = object_refusal(body)  # the v1 door's answer (2026-12-08: "requestId must be a UUID")
        if not_an_object is not None:
            raise not_an_object
    except ProtocolError as err:
        request.state.error_reason = (err.detail or {}).get("reason")  # the request log's (app._log_outcome)
        return body_refusal(err)
    raw_id = body.get("requestId")
    if not isinstance(raw_id, str) or not UUID_1_8.match(normalise_key(raw_id)):
        return legacy_error(400, "requestId must be a UUID")
    try:  # the protocol's one rule of a correlation id (storable, at most 200), named as the shim names it
        correlation_id = check_correlation_id(body.get("correlationId"))
    except PydanticCustomError:
        return legacy_error(
            400,
            f"correlationId must be a string of at most {MAX_CORRELATION_ID} characters, {STORABLE}",
        )
    request_id = normalise_key(raw_id)
    task: dict[str, Any] = {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": request_id,
        "params": {"target_id": target_id},
    }
    if correlation_id:
        task["correlation_id"] = correlation_id
    try:
        admission = await admit_refetch(admitter, pool, target_id, task)
        async with pool.acquire() as conn:
            record = await load_job(conn, admission.job_id)
    except ProtocolError as err:
        request.state.log_fields = {"target_id": target_id}
        request.state.error_code = err.code
        return _refusal(err)
    except Exception as err:  # noqa: BLE001 - the legacy contract: anything else is a bare 500
        log.error("legacy.refetch_failed", target_id=target_id, error=type(err).__name__)
        if is_ledger_outage(err):
            return ledger_unavailable()
        return legacy_error(500, "internal error")
    assert record is not None
    answer = disposition(record, not admission.replayed)
    request.state.log_fields = {"job_id": admission.job_id, "disposition": answer}
    return legacy_json({"status": "accepted", "slotId": admission.job_id, "disposition": answer}, 202)


@legacy_router.get("/internal/targets/{target_id}/refetch/{request_id}")
async def refetch_status(
    request: Request, target_id: str, request_id: str, settings: SettingsDep, pool: LedgerPool
) -> Response:
    """The legacy camelCase status of the refetch ``request_id`` of ``target_id``."""
    request_id = normalise_key(request_id)
    if not UUID_1_8.match(request_id):
        return legacy_error(400, "requestId must be a UUID")
    target = settings.target(target_id_as_read(target_id))  # as the POST reads it (its Task's)
    if target is None:
        return legacy_error(404, "unknown target")
    try:
        async with pool.acquire() as conn:
            record = await load_job(conn, manual_job_id(target.id, request_id))
    except Exception as err:
        if not is_ledger_outage(err):
            raise
        log.error("legacy.status_failed", target_id=target_id, error=type(err).__name__)
        return ledger_unavailable()
    if (
        record is None
        or target.id not in record.target_ids
        or record.idempotency_key is None
        or not same_request_id(record.idempotency_key, request_id)
    ):
        return legacy_error(404, "unknown request")
    request.state.log_fields = {"job_id": record.job_id}
    return legacy_json(legacy_projection(record, request_id))

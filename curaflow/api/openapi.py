"""``/openapi.json``: the job surface described with the vendored protocol schema.

FastAPI generates paths and query parameters from the routes; this module replaces the
components with the ``$defs`` of ``curaflow/protocol/schema/protocol.schema.json``
(references rewritten to ``#/components/schemas/``) and sets, per operation, the
request body and every response the API can give — success bodies, protocol errors
(``ErrorResponse``) and the legacy authentication shape (``AuthError``, 401 / 503) — so
that a client generator or a property-based tester sees exactly what goes over the
wire. :data:`OPERATIONS` is the one table of what each route answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from curaflow.protocol.schemas import protocol_schema, rewrite_refs

COMPONENTS = "#/components/schemas/"
DESCRIPTIONS = {
    200: "OK",
    202: "accepted: first admission",
    400: "invalid request (protocol error: invalid_params or unsupported_protocol_version)",
    401: (
        "missing or wrong bearer token (legacy shape), with WWW-Authenticate: Bearer "
        '(Bearer error="invalid_token" for a refused token)'
    ),
    404: "unknown job (or unknown target on POST /jobs): invalid_params",
    405: "method not allowed",
    406: "the Accept header refuses application/json (invalid_params, detail.reason not_acceptable)",
    408: "the request body did not arrive within api.body_timeout_ms (invalid_params; the connection is closed)",
    409: "idempotency_conflict, or ambiguous_target (invalid_params)",
    413: "request body larger than api.max_body_bytes (invalid_params)",
    415: (
        "the body is labelled as something other than JSON in UTF-8 (invalid_params, detail.reason "
        "unsupported_media_type or unsupported_charset), or sent in a content coding other than identity "
        "(detail.reason unsupported_content_encoding, with Accept-Encoding: identity)"
    ),
    500: "internal_error (internal text never leaks)",
    501: (
        "the body is sent in a transfer coding other than chunked (invalid_params, detail.reason "
        "unsupported_transfer_coding; RFC 9112 §6.1)"
    ),
    503: (
        "no API token configured: the endpoint fails closed (legacy shape AuthError); or the ledger "
        "(PostgreSQL) did not answer within api.ledger_timeout_ms: ErrorResponse internal_error, "
        "retryable, detail.reason ledger_unavailable, with Retry-After (seconds); or Temporal could not serve "
        "a request the answer needs (a cancel's; unavailable, rate-limited, timed out): ErrorResponse "
        "internal_error, retryable, detail.reason temporal_unavailable, with Retry-After (seconds)"
    ),
}


@dataclass(frozen=True)
class Operation:
    """What one route answers: ``{status: $defs name}`` (or a tuple of names: one of them)
    plus an optional request body."""

    responses: dict[int, str | tuple[str, ...]]
    body: str | None = None
    protected: bool = True
    links: dict[str, Any] = field(default_factory=dict)
    descriptions: dict[int, str] = field(default_factory=dict)
    headers: dict[int, dict[str, Any]] = field(default_factory=dict)


_JOB_LINKS = {
    "GetJob": {"operationId": "get_job", "parameters": {"job_id": "$response.body#/job/job_id"}},
    "ListEvents": {"operationId": "list_events", "parameters": {"job_id": "$response.body#/job/job_id"}},
    "CancelJob": {"operationId": "cancel_job", "parameters": {"job_id": "$response.body#/job/job_id"}},
}
#: The ``Location`` of an admission (``POST /jobs`` 202 and 200).
_LOCATION = {
    "description": "The job's address, /jobs/<job_id> with the id encoded as one path segment (as events_url)",
    "schema": {"type": "string"},
}
#: What every protected route may answer besides its own: the token refused, an Accept that
#: refuses JSON, the ledger unavailable, an internal error.
_AUTH: dict[int, str | tuple[str, ...]] = {
    401: "AuthError",
    406: "ErrorResponse",
    503: ("AuthError", "ErrorResponse"),
    500: "ErrorResponse",
}

#: (method, path) → what the operation answers.
OPERATIONS: dict[tuple[str, str], Operation] = {
    ("get", "/health"): Operation({200: "Health"}, protected=False),
    ("get", "/ready"): Operation(
        {200: "Readiness", 503: "Readiness"},
        protected=False,
        descriptions={200: "ready: every check is ok", 503: "not ready: at least one check failed (named in checks)"},
    ),
    ("get", "/capabilities"): Operation({200: "Capabilities", **_AUTH}),
    ("post", "/jobs"): Operation(
        {
            202: "JobEnvelope",
            200: "JobEnvelope",
            400: "ErrorResponse",
            404: "ErrorResponse",
            408: "ErrorResponse",
            409: "ErrorResponse",
            413: "ErrorResponse",
            415: "ErrorResponse",
            501: "ErrorResponse",
            **_AUTH,
        },
        body="Task",
        links=_JOB_LINKS,
        headers={202: {"Location": _LOCATION}, 200: {"Location": _LOCATION}},
    ),
    ("get", "/jobs"): Operation({200: "JobPage", 400: "ErrorResponse", **_AUTH}),
    ("get", "/jobs/{job_id}"): Operation({200: "Job", 404: "ErrorResponse", **_AUTH}),
    ("post", "/jobs/{job_id}/cancel"): Operation({200: "Job", 404: "ErrorResponse", **_AUTH}),
    ("get", "/jobs/{job_id}/events"): Operation(
        {200: "EventPage", 400: "ErrorResponse", 404: "ErrorResponse", **_AUTH}
    ),
    ("post", "/jobs/{job_id}/events/ack"): Operation(
        {
            200: "AckResult",
            400: "ErrorResponse",
            404: "ErrorResponse",
            408: "ErrorResponse",
            413: "ErrorResponse",
            415: "ErrorResponse",
            501: "ErrorResponse",
            **_AUTH,
        },
        body="AckRequest",
    ),
}


def _json(name: str | tuple[str, ...]) -> dict[str, Any]:
    if isinstance(name, tuple):
        return {"application/json": {"schema": {"oneOf": [{"$ref": COMPONENTS + n} for n in name]}}}
    return {"application/json": {"schema": {"$ref": COMPONENTS + name}}}


def build_openapi(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``app`` (see the module doc).

    Raises:
        KeyError: a route of the app has no entry in :data:`OPERATIONS` (a test keeps
            them in step).
    """
    doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    defs = protocol_schema()["$defs"]
    doc["components"] = {
        "schemas": {name: rewrite_refs(schema, COMPONENTS) for name, schema in defs.items()},
        "securitySchemes": {
            "bearerAuth": {
                "type": "http",
                "scheme": "bearer",
                "description": "Authorization: Bearer <CURAFLOW_API_TOKEN> (compared in constant time).",
            }
        },
    }
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            spec = OPERATIONS[(method, path)]
            responses: dict[str, Any] = {}
            for status, name in sorted(spec.responses.items()):
                description = spec.descriptions.get(status) or DESCRIPTIONS.get(status, "answer")
                response: dict[str, Any] = {"description": description, "content": _json(name)}
                if spec.links and status in (200, 202):
                    response["links"] = spec.links
                if status in spec.headers:
                    response["headers"] = spec.headers[status]
                responses[str(status)] = response
            operation["responses"] = responses
            if spec.body:
                operation["requestBody"] = {"required": True, "content": _json(spec.body)}
            if spec.protected:
                operation["security"] = [{"bearerAuth": []}]
    return doc

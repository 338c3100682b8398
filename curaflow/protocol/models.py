"""Pydantic models of the Workflow Protocol v1 wire shapes.

They mirror ``$defs`` of ``curaflow/protocol/schema/protocol.schema.json`` (``Job``,
``Event``, ``Error``, ``Capabilities`` …, and the page shapes of reference §4 —
``JobPage``, ``EventPage``, ``AckResult`` — that curaflow added to the vendored file).
The API publishes the schema file itself in ``/openapi.json``; :mod:`curaflow.client`
parses responses into these models. Unknown fields are kept (``extra="allow"``): the protocol is additive-only.
Times are epoch milliseconds (UTC).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import httpx
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from curaflow.protocol.errors import SUPPORTED_PROTOCOL_VERSIONS, supported_job_types
from curaflow.protocol.keys import MAX_KEY_LENGTH, key_refusal, normalise_key, storable


def _nonblank_str(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


class _Wire(BaseModel):
    """An answer shape: unknown fields are kept (the protocol is additive-only)."""

    model_config = ConfigDict(extra="allow")


class _Request(BaseModel):
    """A request shape: unknown fields are ignored at every level (never stored, never echoed)."""

    model_config = ConfigDict(extra="ignore")


class Error(_Wire):
    """``$defs/Error``: consumers branch on ``code`` only."""

    code: str
    message: str | None = None
    retryable: bool = False
    detail: dict[str, Any] | None = None


class ErrorResponse(_Wire):
    """Body of every refused request on the job surface: ``{"error": Error}``."""

    error: Error


class Progress(_Wire):
    """``$defs/Progress``: an opaque stage label for display."""

    stage: str
    message: str | None = None
    at: int | None = None


class MatchedTag(_Wire):
    """``$defs/MatchedTag``: why a candidate matched."""

    tag: str
    source: str | None = None
    weight: float | None = None


class Locator(_Wire):
    """``$defs/Locator``."""

    kind: Literal["url", "path", "inline"]
    value: str


class Asset(_Wire):
    """``$defs/Asset``: one file of a delivered candidate."""

    asset_id: str
    type: str
    role: str
    source: str
    quality: str
    width: int | None = None
    height: int | None = None
    mime: str | None = None
    bytes: int | None = None
    hash: str | None = None
    locator: Locator


class Candidate(_Wire):
    """``$defs/Candidate``: the delivered work of a cell."""

    candidate_id: str
    platform: str
    work_id: str
    work_type: str
    url: str | None = None
    tags: list[MatchedTag] | None = None
    assets: list[Asset] | None = None
    metadata: dict[str, Any] | None = None


class FilteredWork(_Wire):
    """One entry of ``Result_CandidateSearch.filtered``."""

    work_id: str
    reason: str


class ResultCandidateSearch(_Wire):
    """``$defs/Result_CandidateSearch``."""

    candidates: list[Candidate]
    scanned: int
    filtered: list[FilteredWork] | None = None


class Job(_Wire):
    """``$defs/Job``: the producer-owned durable execution entity."""

    protocol_version: Literal["1"] = "1"
    job_id: str
    job_type: str
    status: Literal["queued", "running", "succeeded", "failed", "cancelled", "expired"]
    idempotency_key: str | None = None
    correlation_id: str | None = None
    created_at: int
    started_at: int | None = None
    updated_at: int
    heartbeat_at: int | None = None
    deadline_at: int | None = None
    lease_active: bool | None = None
    lease_expires_at: int | None = None
    attempt: int | None = None
    progress: Progress | None = None
    result: ResultCandidateSearch | None = None
    error: Error | None = None
    events_url: str | None = None

    @property
    def terminal(self) -> bool:
        """True for ``succeeded``, ``failed``, ``cancelled`` and ``expired``."""
        return self.status in ("succeeded", "failed", "cancelled", "expired")


class JobEnvelope(_Wire):
    """``POST /jobs`` answer: ``{"job": Job}`` (202 first admission, 200 replay)."""

    job: Job


class JobPage(_Wire):
    """``GET /jobs?idempotency_key=`` answer (reference §9.1): zero or one job."""

    jobs: list[Job]
    server_time: int


class EventPayload(_Wire):
    """``Event.payload``: terminal events carry ``job`` and ``result`` or ``error``."""

    job: Job | None = None
    result: ResultCandidateSearch | None = None
    error: Error | None = None
    detail: dict[str, Any] | None = None


#: The terminal event of each terminal job status: the last event of every job.
TERMINAL_EVENT_TYPES: dict[str, str] = {
    "succeeded": "job.succeeded",
    "failed": "job.failed",
    "expired": "job.expired",
    "cancelled": "job.cancelled",
}


class Event(_Wire):
    """``$defs/Event``: a lifecycle event, delivered at least once; dedupe on ``event_id``."""

    protocol_version: Literal["1"] = "1"
    event_id: str
    job_id: str
    type: Literal[
        "job.accepted",
        "job.started",
        "job.progress",
        "job.succeeded",
        "job.failed",
        "job.expired",
        "job.cancelled",
    ]
    at: int
    correlation_id: str | None = None
    payload: EventPayload | None = None


class EventPage(_Wire):
    """``GET /jobs/{id}/events`` answer (reference §4.5).

    ``next_after`` is present only when more events remain (an empty string, as in the
    upstream fixture, means none remain too: test with ``if page.next_after``);
    ``unacked`` counts events after the durable ack cursor and never depends on ``after``.
    """

    job_id: str
    events: list[Event]
    unacked: int
    server_time: int
    next_after: str | None = None


class AckRequest(_Request):
    """``POST /jobs/{id}/events/ack`` body: a non-blank event id."""

    ack_through: Annotated[StrictStr, AfterValidator(_nonblank_str)]


class AckResult(_Wire):
    """``POST /jobs/{id}/events/ack`` answer (reference §4.6)."""

    job_id: str
    acked: int
    unacked: int
    server_time: int


class JobTypeDeclaration(_Wire):
    """``$defs/JobTypeDeclaration``: one job type and the live budgets (ms)."""

    name: str
    params_schema: str
    result_schema: str
    features: list[str] = Field(default_factory=list)
    #: curaflow's extension member: features outside v1's closed ``features`` enum
    #: (``target_selector``); empty from a producer that does not send it.
    extended_features: list[str] = Field(default_factory=list)
    queued_timeout_ms: int
    stall_timeout_ms: int
    heartbeat_interval_ms: int
    default_deadline_ms: int


class Capabilities(_Wire):
    """``$defs/Capabilities``: built from the live config on every call."""

    protocol_versions: list[str]
    job_types: list[JobTypeDeclaration]
    server_time: int


class Health(_Wire):
    """``GET /health`` answer."""

    status: Literal["ok"] = "ok"
    service: str = "curaflow"
    version: str
    commit: str = "dev"


class ReadinessCheck(_Wire):
    """``$defs/ReadinessCheck``: one named check of ``GET /ready``."""

    ok: bool
    detail: str | None = None
    elapsed_ms: float | None = None


class Readiness(_Wire):
    """``GET /ready`` answer (``$defs/Readiness``): 200 when every check is ok, else 503."""

    status: Literal["ready", "not_ready"]
    service: str
    checks: dict[str, ReadinessCheck]


# ---- the Task: the one request body with rules ------------------------------------------
#
# The constraints below are the admission rules of reference §1.5 ("Other Task fields",
# then the ``candidate_search`` params) plus curaflow's own, in the original's order:
# pydantic validates fields in declaration order, so the first entry of
# ``ValidationError.errors()`` is the first rule the body breaks ("first failure wins";
# :func:`curaflow.protocol.task.validate_task` turns it into the protocol error). Every
# rule raises a :class:`~pydantic_core.PydanticCustomError` of type ``invalid_params``
# with the rule's sentence; pydantic's own errors (a missing member, a wrong type) get
# the sentence of their member from :data:`RULES`. Two rules have their own protocol
# answer: ``unsupported_protocol_version`` and ``unsupported_job_type``.
#
# Curaflow rules the original lacks, because the ledger must be able to store what it
# admits and the API to address it: ``deadline_ms`` is at most :data:`MAX_DEADLINE_MS`
# (7 days), no stored string may contain a NUL character or a lone surrogate
# (:func:`curaflow.protocol.keys.storable`), and the idempotency key holds no control
# character (:mod:`curaflow.protocol.keys`, the one reading of a key). Values are
# normalised as the original does: keys, tags, ids and the account trimmed, an empty
# ``correlation_id`` dropped, ``scan_limit`` capped at :data:`MAX_SCAN_LIMIT`.

MAX_CORRELATION_LENGTH = 200
MAX_CALLBACK_LENGTH = 2000
MIN_DEADLINE_MS = 1000
MAX_DEADLINE_MS = 7 * 24 * 3600 * 1000
MAX_TAGS = 20
MAX_TAG_LENGTH = 100
MAX_EXCLUDE = 100
MAX_EXCLUDE_ID_LENGTH = 100
MAX_ACCOUNT_LENGTH = 100
MAX_SCAN_LIMIT = 100
EXCLUDE_KINDS = ("work", "candidate", "tag")

#: The sentence of each member's rule (``detail.field`` → message), used for pydantic's
#: own errors (missing member, wrong type) at that member.
RULES: dict[str, str] = {
    "protocol_version": "protocol_version is required",
    "idempotency_key": (
        "idempotency_key must be a non-blank string without control characters (line breaks, tabs, NUL…)"
    ),
    "correlation_id": f"correlation_id must be a string of at most {MAX_CORRELATION_LENGTH} characters",
    "callback_url": f"callback_url must be a string of at most {MAX_CALLBACK_LENGTH} characters",
    "deadline_ms": f"deadline_ms must be an integer from {MIN_DEADLINE_MS} to {MAX_DEADLINE_MS}",
    "labels": "labels must be an object of string values",
    "params": "params must be an object",
    "params.target_id": "params.target_id must be a non-blank string",
    "params.source": "params.source must be an object",
    "params.source.platform": 'params.source.platform must be "pixiv"',
    "params.source.account": (
        f"params.source.account must be a non-blank string of at most {MAX_ACCOUNT_LENGTH} characters"
    ),
    "params.query": "params.query must be an object",
    "params.query.tags": f"params.query.tags must be an array of 1-{MAX_TAGS} tags",
    "params.query.expand": "params.query.expand must be a boolean",
    "params.constraints": "params.constraints must be an object",
    "params.constraints.exclude": (
        "each exclude item needs kind work|candidate|tag and a non-blank id "
        f"of at most {MAX_EXCLUDE_ID_LENGTH} characters"
    ),
    "params.constraints.limit": "params.constraints.limit must be an integer >= 1",
    "params.constraints.scan_limit": "params.constraints.scan_limit must be an integer >= 1",
    "params.constraints.work_types": "params.constraints.work_types must be an array of non-empty strings",
}


def _nonblank(value: Any) -> bool:
    return isinstance(value, str) and value.strip() != "" and storable(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _refuse(field: str, message: str | None = None) -> PydanticCustomError:
    return PydanticCustomError("invalid_params", message or RULES[field])


def _protocol_version(value: Any) -> Any:
    if value is None:
        raise _refuse("protocol_version")
    if not isinstance(value, str) or value not in SUPPORTED_PROTOCOL_VERSIONS:
        raise PydanticCustomError("unsupported_protocol_version", "unsupported protocol_version")
    return value


def _job_type(value: Any) -> Any:
    if not isinstance(value, str) or value not in supported_job_types():
        raise PydanticCustomError("unsupported_job_type", "unsupported job_type")
    return value


def _idempotency_key(value: Any) -> Any:
    # The one reading of a key (curaflow.protocol.keys), shared with the lookup and the legacy shim.
    if not isinstance(value, str):
        raise _refuse("idempotency_key")
    key = normalise_key(value)
    refused = key_refusal(key)
    if refused == "length":
        raise _refuse("idempotency_key", f"idempotency_key must be at most {MAX_KEY_LENGTH} characters")
    if refused is not None:
        raise _refuse("idempotency_key")
    return key


def _correlation_id(value: Any) -> Any:
    if value is not None and (not storable(value) or len(value) > MAX_CORRELATION_LENGTH):
        raise _refuse("correlation_id")
    return value or None  # an empty correlation id is not stored


def _callback_url(value: Any) -> Any:
    if value is None:
        return None
    if not storable(value) or len(value) > MAX_CALLBACK_LENGTH:
        raise _refuse("callback_url")
    try:
        parts = urlsplit(value)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname)
        _ = parts.port  # raises ValueError for a port outside 0..65535 or not a number
        # The pushes are sent with httpx: a URL it cannot parse (an IPv4 host with an
        # octal or out-of-range part, 0177.0.0.2 or 256.0.0.1; a broken IPv6 literal)
        # could never be pushed to, so it is refused here, like any other bad URL.
        valid = valid and bool(httpx.URL(value).host)
    except (ValueError, httpx.InvalidURL):
        valid = False
    if not valid:
        raise _refuse("callback_url", "callback_url must be an http(s) URL")
    return value


def _deadline_ms(value: Any) -> Any:
    if value is not None and (not _is_int(value) or not MIN_DEADLINE_MS <= value <= MAX_DEADLINE_MS):
        raise _refuse("deadline_ms")
    return value


def _labels(value: Any) -> Any:
    if value is not None and (
        not isinstance(value, dict) or not all(storable(k) and storable(v) for k, v in value.items())
    ):
        raise _refuse("labels")
    return value


def _target_id(value: Any) -> Any:
    # Only called for a member that is present: an explicit null is refused too.
    if not _nonblank(value):
        raise _refuse("params.target_id")
    return value.strip()


def _account(value: Any) -> Any:
    if value is None:
        return None
    if not _nonblank(value) or len(value) > MAX_ACCOUNT_LENGTH:
        raise _refuse("params.source.account")
    return value.strip()


def _tags(value: Any) -> Any:
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_TAGS:
        raise _refuse("params.query.tags")
    for tag in value:
        if not _nonblank(tag) or len(tag) > MAX_TAG_LENGTH:
            raise _refuse(
                "params.query.tags", f"each tag must be a non-blank string of at most {MAX_TAG_LENGTH} characters"
            )
    return [tag.strip() for tag in value]


def _exclude(value: Any) -> Any:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > MAX_EXCLUDE:
        raise _refuse(
            "params.constraints.exclude", f"params.constraints.exclude must be an array of at most {MAX_EXCLUDE} items"
        )
    items = []
    for item in value:
        if (
            not isinstance(item, dict)
            or item.get("kind") not in EXCLUDE_KINDS
            or not _nonblank(item.get("id"))
            or len(item["id"]) > MAX_EXCLUDE_ID_LENGTH
        ):
            raise _refuse("params.constraints.exclude")
        items.append({"kind": item["kind"], "id": item["id"].strip()})
    return items


def _work_types(value: Any) -> Any:
    if value is not None and (not isinstance(value, list) or not all(storable(w) and w != "" for w in value)):
        raise _refuse("params.constraints.work_types")
    return value


def _positive(field: str) -> Any:
    def check(value: Any) -> Any:
        if value is not None and (not _is_int(value) or value < 1):
            raise _refuse(field)
        return value

    return check


class TaskExclude(_Request):
    """One ``params.constraints.exclude`` item."""

    kind: Literal["work", "candidate", "tag"]
    id: str


class TaskQuery(_Request):
    """``params.query``: 1–20 non-blank tags of at most 100 characters (trimmed)."""

    tags: Annotated[list[str], BeforeValidator(_tags)]
    expand: StrictBool | None = None


class TaskConstraints(_Request):
    """``params.constraints``; ``scan_limit`` above 100 is taken as 100."""

    exclude: Annotated[list[TaskExclude] | None, BeforeValidator(_exclude)] = None
    limit: Annotated[int | None, BeforeValidator(_positive("params.constraints.limit"))] = None
    scan_limit: Annotated[
        int | None,
        BeforeValidator(_positive("params.constraints.scan_limit")),
        AfterValidator(lambda v: None if v is None else min(v, MAX_SCAN_LIMIT)),
    ] = None
    work_types: Annotated[list[str] | None, BeforeValidator(_work_types)] = None


class TaskSource(_Request):
    """``params.source``."""

    platform: Literal["pixiv"] | None = None
    account: Annotated[str | None, BeforeValidator(_account)] = None


class CandidateSearchParams(_Request):
    """``$defs/CandidateSearchParams`` plus the v1.1 ``target_id`` selector.

    ``query`` is required unless ``target_id`` names the target to run as configured.
    """

    target_id: Annotated[str | None, BeforeValidator(_target_id)] = None
    source: TaskSource | None = None
    query: TaskQuery | None = Field(default=None, validate_default=True)
    constraints: TaskConstraints | None = None

    @field_validator("query")
    @classmethod
    def _query_or_target(cls, query: TaskQuery | None, info: ValidationInfo) -> TaskQuery | None:
        if query is None and info.data.get("target_id") is None:
            raise _refuse("params.query", "params.query is required")
        return query

    def retrieval_view(self) -> dict[str, Any]:
        """The normalised params ("retrieval view") an idempotency replay is compared on.

        Rebuilt in the fixed key order ``source, query{tags, expand?},
        constraints{exclude?, limit?, scan_limit?, work_types?}`` with absent members and
        unknown fields dropped; ``target_id`` is not part of it.
        """
        view: dict[str, Any] = {}
        if self.source is not None:
            source: dict[str, Any] = {}
            if self.source.platform is not None:
                source["platform"] = self.source.platform
            if self.source.account is not None:
                source["account"] = self.source.account
            view["source"] = source
        if self.query is not None:
            query: dict[str, Any] = {"tags": list(self.query.tags)}
            if self.query.expand is True:
                query["expand"] = True
            view["query"] = query
        if self.constraints is not None:
            c = self.constraints
            constraints: dict[str, Any] = {}
            if c.exclude is not None:
                constraints["exclude"] = [{"kind": item.kind, "id": item.id} for item in c.exclude]
            if c.limit is not None:
                constraints["limit"] = c.limit
            if c.scan_limit is not None:
                constraints["scan_limit"] = c.scan_limit
            if c.work_types is not None:
                constraints["work_types"] = list(c.work_types)
            view["constraints"] = constraints
        return view


class Task(_Request):
    """``$defs/Task``: the consumer's request (``POST /jobs`` body), with the admission rules.

    Validating a body against this model is the API's request validation (see the
    section comment above); :func:`curaflow.protocol.task.validate_task` turns the first
    error into the protocol's answer. Unknown fields are ignored at every level.
    """

    protocol_version: Annotated[str, BeforeValidator(_protocol_version)]
    job_type: Annotated[str, BeforeValidator(_job_type)] = Field(default=None, validate_default=True)
    idempotency_key: Annotated[str, BeforeValidator(_idempotency_key)]
    correlation_id: Annotated[str | None, BeforeValidator(_correlation_id)] = None
    callback_url: Annotated[str | None, BeforeValidator(_callback_url)] = None
    deadline_ms: Annotated[int | None, BeforeValidator(_deadline_ms)] = None
    labels: Annotated[dict[str, str] | None, BeforeValidator(_labels)] = None
    params: CandidateSearchParams

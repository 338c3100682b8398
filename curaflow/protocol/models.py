"""Pydantic models of the Workflow Protocol v1 wire shapes.

They mirror ``$defs`` of ``curaflow/protocol/schema/protocol.schema.json`` (``Job``,
``Event``, ``Error``, ``Capabilities`` …, and the page shapes of reference §4 —
``JobPage``, ``EventPage``, ``AckResult`` — that curaflow added to the vendored file).
The API publishes the schema file itself in ``/openapi.json``; :mod:`curaflow.client`
parses responses into these models. Unknown fields are kept (``extra="allow"``): the protocol is additive-only.
Times are epoch milliseconds (UTC).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Wire(BaseModel):
    model_config = ConfigDict(extra="allow")


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


class AckRequest(_Wire):
    """``POST /jobs/{id}/events/ack`` body."""

    ack_through: str


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


class TaskExclude(_Wire):
    """One ``params.constraints.exclude`` item."""

    kind: Literal["work", "candidate", "tag"]
    id: str


class TaskQuery(_Wire):
    """``params.query``."""

    tags: list[str]
    expand: bool | None = None


class TaskConstraints(_Wire):
    """``params.constraints``."""

    exclude: list[TaskExclude] | None = None
    limit: int | None = None
    scan_limit: int | None = None
    work_types: list[str] | None = None


class TaskSource(_Wire):
    """``params.source``."""

    platform: Literal["pixiv"] | None = None
    account: str | None = None


class CandidateSearchParams(_Wire):
    """``$defs/CandidateSearchParams`` plus the v1.1 ``target_id`` selector."""

    target_id: str | None = None
    source: TaskSource | None = None
    query: TaskQuery | None = None
    constraints: TaskConstraints | None = None


class Task(_Wire):
    """``$defs/Task``: the consumer's request. Documentation shape only: the API validates
    raw bodies with :func:`curaflow.protocol.task.validate_task` to keep the original's
    validation order and error codes."""

    protocol_version: str
    job_type: str
    idempotency_key: str
    correlation_id: str | None = None
    labels: dict[str, str] | None = None
    callback_url: str | None = None
    deadline_ms: int | None = None
    params: CandidateSearchParams

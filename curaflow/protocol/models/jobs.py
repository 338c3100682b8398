"""The Job and what it carries: ``$defs/Job`` with its progress, result (candidates, their
assets) and error, and the answers that hold jobs (``JobEnvelope``, ``JobPage``)."""

from __future__ import annotations

from typing import Any, Literal

from curaflow.protocol.models.base import AnswerShape


class Error(AnswerShape):
    """``$defs/Error``: consumers branch on ``code`` only."""

    code: str
    message: str | None = None
    retryable: bool = False
    detail: dict[str, Any] | None = None


class ErrorResponse(AnswerShape):
    """Body of every refused request on the job surface: ``{"error": Error}``."""

    error: Error


class Progress(AnswerShape):
    """``$defs/Progress``: an opaque stage label for display."""

    stage: str
    message: str | None = None
    at: int | None = None


class MatchedTag(AnswerShape):
    """``$defs/MatchedTag``: why a candidate matched."""

    tag: str
    source: str | None = None
    weight: float | None = None


class Locator(AnswerShape):
    """``$defs/Locator``."""

    kind: Literal["url", "path", "inline"]
    value: str


class Asset(AnswerShape):
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


class Candidate(AnswerShape):
    """``$defs/Candidate``: the delivered work of a cell."""

    candidate_id: str
    platform: str
    work_id: str
    work_type: str
    url: str | None = None
    tags: list[MatchedTag] | None = None
    assets: list[Asset] | None = None
    metadata: dict[str, Any] | None = None


class FilteredWork(AnswerShape):
    """One entry of ``Result_CandidateSearch.filtered``."""

    work_id: str
    reason: str


class ResultCandidateSearch(AnswerShape):
    """``$defs/Result_CandidateSearch``."""

    candidates: list[Candidate]
    scanned: int
    filtered: list[FilteredWork] | None = None


class Job(AnswerShape):
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


class JobEnvelope(AnswerShape):
    """``POST /jobs`` answer: ``{"job": Job}`` (202 first admission, 200 replay)."""

    job: Job


class JobPage(AnswerShape):
    """``GET /jobs?idempotency_key=`` answer (reference §9.1): zero or one job."""

    jobs: list[Job]
    server_time: int

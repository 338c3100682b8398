"""A job's lifecycle events (``$defs/Event``), their page and the ack of them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, StrictStr

from curaflow.protocol.models.base import AnswerShape, RequestShape
from curaflow.protocol.models.jobs import Error, Job, ResultCandidateSearch


def _nonblank_str(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


class EventPayload(AnswerShape):
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


class Event(AnswerShape):
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


class EventPage(AnswerShape):
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


class AckRequest(RequestShape):
    """``POST /jobs/{id}/events/ack`` body: a non-blank event id."""

    ack_through: Annotated[StrictStr, AfterValidator(_nonblank_str)]


class AckResult(AnswerShape):
    """``POST /jobs/{id}/events/ack`` answer (reference §4.6)."""

    job_id: str
    acked: int
    unacked: int
    server_time: int

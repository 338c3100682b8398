"""Job lifecycle events: append under the job row lock, page by cursor, ack.

Each job's events carry a gap-free sequence number assigned while the job row is locked
(``UPDATE jobs SET event_seq = event_seq + 1``), so a reader's cursor can never skip an
event that commits late (DESIGN.md decision 9; reference ``temporal-and-postgres-notes``
D5). Every append also sends ``NOTIFY curaflow_job_events, '<job_id>'``, delivered at
commit, which wakes long-polling readers (:mod:`curaflow.ledger.listen`), and, when the
job declared a ``callback_url``, enqueues the event's push (:mod:`curaflow.ledger.event_pushes`)
with the Event JSON frozen in the same transaction.

Event ids are opaque to consumers: ``evt-<seq>-<8 hex of the job id's hash>``. An id of
another job, or one that does not parse, is "unknown" and reads from the start
(reference §4.5).

Only the protocol's seven event types (:data:`PROTOCOL_EVENT_TYPES`) are ever served or
counted: a row of any other type in ``job_events`` (an internal kind, reference §4.2) is
skipped by every read, so a page always validates against the published schema and
``unacked`` can reach 0.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

import asyncpg

from curaflow.ledger.db import now_ms
from curaflow.ledger.event_pushes import enqueue_push
from curaflow.observability import metrics

NOTIFY_CHANNEL = "curaflow_job_events"

#: protocol type → the original's internal kind, sent as ``payload.detail.internal_kind``.
INTERNAL_KINDS = {
    "job.accepted": "job.requested",
    "job.started": "job.execution_started",
    "job.progress": "job.progressed",
    "job.succeeded": "job.outcome_succeeded",
    "job.failed": "job.outcome_failed",
    "job.expired": "job.outcome_expired",
    "job.cancelled": "job.outcome_cancelled",
}
#: The protocol's ``Event.type`` enum: the only types a read serves or counts.
PROTOCOL_EVENT_TYPES: tuple[str, ...] = tuple(INTERNAL_KINDS)
#: An event id as :func:`event_id` spells it: ASCII digits (``\d`` alone also reads ``١``,
#: ``１``), no leading zero, and nothing after the hash (``$`` alone also allows a ``\n``).
_EVENT_ID = re.compile(r"evt-([1-9][0-9]{0,8})-([0-9a-f]{8})")


def _job_hash(job_id: str) -> str:
    return hashlib.sha256(job_id.encode()).hexdigest()[:8]


def event_id(job_id: str, seq: int) -> str:
    """The opaque event id of event ``seq`` of ``job_id``."""
    return f"evt-{seq}-{_job_hash(job_id)}"


def parse_event_id(job_id: str, value: str | None) -> int | None:
    """The sequence number ``value`` names in ``job_id``'s stream, or None if it names none.

    Unparsable ids, ids of other jobs and any spelling other than the one :func:`event_id`
    issues (other digits, a leading zero, a trailing line break) give None ("unknown
    cursor": a page reads from the start, an ack is a no-op) — a forged cursor never
    skips or acknowledges events the consumer did not name.
    """
    if not value:
        return None
    match = _EVENT_ID.fullmatch(value)
    if not match or match.group(2) != _job_hash(job_id):
        return None
    return int(match.group(1))


def event_body(type_: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
    """The stored payload of an event of ``type_``: ``payload`` (``job``, ``result``,
    ``error``, ``progress`` …) with ``detail.internal_kind`` added (reference §4.2)."""
    body = dict(payload or {})
    body["detail"] = {**body.get("detail", {}), "internal_kind": INTERNAL_KINDS.get(type_, type_)}
    return body


#: One round trip: the SQL function ``curaflow_append_event`` (migration 0032) bumps the
#: sequence under the job row lock, inserts the row and sends the NOTIFY.
_APPEND = """SELECT o_seq AS seq, o_at AS at, o_callback_url AS callback_url, o_correlation_id AS correlation_id
             FROM curaflow_append_event($1, $2, $3, $4, $5)"""


async def append_event(
    conn: asyncpg.Connection,
    job_id: str,
    type_: str,
    payload: dict[str, Any] | None = None,
    *,
    at: int | None = None,
) -> int:
    """Append one event to ``job_id``'s stream inside the caller's transaction.

    The sequence bump takes the job row lock (held to commit), which serialises appends
    of one job and makes the sequence gap-free and commit-ordered.

    Args:
        conn: a connection inside a transaction.
        type_: protocol event type (``job.accepted`` …).
        payload: extra payload members (``job``, ``result``, ``error``, ``progress``);
            ``detail.internal_kind`` is added (:func:`event_body`).
        at: event time, epoch ms; defaults to now. Raised to the stream's latest ``at``
            so times never go backwards.

    Returns:
        The new sequence number.

    Raises:
        LookupError: the job does not exist.
    """
    at = at if at is not None else now_ms()
    body = event_body(type_, payload)
    row = await conn.fetchrow(_APPEND, job_id, type_, at, body, NOTIFY_CHANNEL)
    if row is None:
        raise LookupError(job_id)
    seq = int(row["seq"])
    await push_appended(conn, job_id, type_, seq, row["at"], body, row["callback_url"], row["correlation_id"])
    return seq


async def push_appended(
    conn: asyncpg.Connection,
    job_id: str,
    type_: str,
    seq: int,
    at: int,
    body: dict[str, Any],
    callback_url: str | None,
    correlation_id: str | None,
) -> None:
    """Enqueue the push of an event just appended, in its transaction, when the job
    declared a ``callback_url`` (reference §4.7): the Event JSON is frozen now. A type
    outside the protocol is never pushed, as it is never served."""
    if callback_url and type_ in PROTOCOL_EVENT_TYPES:
        event = render_event(job_id, seq, type_, at, body, correlation_id)
        await enqueue_push(conn, job_id, seq, event["event_id"], callback_url, event)


def render_event(
    job_id: str, seq: int, type_: str, at: int, payload: dict[str, Any], correlation_id: str | None
) -> dict[str, Any]:
    """Build the protocol ``Event`` dict (``$defs/Event``) of a stored row."""
    event: dict[str, Any] = {
        "protocol_version": "1",
        "event_id": event_id(job_id, seq),
        "job_id": job_id,
        "type": type_,
        "at": at,
    }
    if correlation_id:
        event["correlation_id"] = correlation_id
    event["payload"] = payload
    return event


@dataclass
class EventPageData:
    """One page of events plus the counters of reference §4.5."""

    events: list[dict[str, Any]]
    unacked: int
    total: int
    more: bool
    completed: bool = False


async def read_events(
    conn: asyncpg.Connection,
    job_id: str,
    *,
    after_seq: int | None,
    from_ack: bool,
    limit: int,
    correlation_id: str | None,
) -> EventPageData:
    """Read a page of ``job_id``'s events in ascending order.

    Args:
        after_seq: exclusive lower bound (None, or beyond the stream → from the start).
        from_ack: ``unacked=1``: start after the later of ``after_seq`` and the durable ack
            cursor, so a consumer paging with ``after=<next_after>&unacked=1`` moves on
            (an ``after`` behind the cursor never rewinds it).
        limit: page size.
        correlation_id: echoed in each event.

    Returns:
        The page; ``unacked`` counts the protocol events after the ack cursor,
        independent of ``after``; ``completed`` tells that the job is terminal (its
        terminal event is the last one). Rows of a type outside the protocol's enum are
        neither returned nor counted.
    """
    row = await conn.fetchrow(
        """SELECT j.event_seq, j.completed_at, COALESCE(c.acked_seq, 0) AS acked,
                  (SELECT count(*) FROM job_events e
                   WHERE e.job_id = j.job_id AND e.seq > COALESCE(c.acked_seq, 0)
                     AND e.type = ANY($2::text[])) AS unacked
           FROM jobs j LEFT JOIN event_cursors c ON c.job_id = j.job_id
           WHERE j.job_id = $1""",
        job_id,
        PROTOCOL_EVENT_TYPES,
    )
    total = int(row["event_seq"]) if row else 0
    acked = int(row["acked"]) if row else 0
    if after_seq is not None and after_seq > total:
        after_seq = None  # names no event of this stream: an unknown cursor reads from the start
    start = max(acked, after_seq or 0) if from_ack else (after_seq or 0)
    rows = await conn.fetch(
        """SELECT seq, type, at, payload FROM job_events
           WHERE job_id = $1 AND seq > $2 AND type = ANY($4::text[]) ORDER BY seq LIMIT $3""",
        job_id,
        start,
        limit + 1,
        PROTOCOL_EVENT_TYPES,
    )
    more = len(rows) > limit
    if rows:
        metrics.record_event_lag((now_ms() - int(rows[0]["at"])) / 1000)
    events = [render_event(job_id, r["seq"], r["type"], r["at"], r["payload"], correlation_id) for r in rows[:limit]]
    completed = bool(row and row["completed_at"] is not None)
    unacked = int(row["unacked"]) if row else 0
    return EventPageData(events=events, unacked=unacked, total=total, more=more, completed=completed)


async def ack_events(conn: asyncpg.Connection, job_id: str, seq: int | None) -> tuple[int, int]:
    """Move the durable ack cursor forward to ``seq`` (monotonic; never rewinds).

    Args:
        seq: the acknowledged sequence number, or None for a no-op (unknown cursor). A
            number beyond the stream is a no-op too.

    Returns:
        ``(acked, unacked)`` after the call: the protocol events up to the cursor and after
        it (reference §4.6: ``acked = total − unacked``; hidden rows are not counted).
    """
    total = await conn.fetchval("SELECT event_seq FROM jobs WHERE job_id = $1", job_id) or 0
    if seq is not None and 0 < seq <= total:
        await conn.execute(
            """INSERT INTO event_cursors (job_id, acked_seq, updated_at) VALUES ($1, $2, $3)
               ON CONFLICT (job_id) DO UPDATE
                 SET acked_seq = GREATEST(event_cursors.acked_seq, EXCLUDED.acked_seq),
                     updated_at = CASE WHEN EXCLUDED.acked_seq > event_cursors.acked_seq
                                       THEN EXCLUDED.updated_at ELSE event_cursors.updated_at END""",
            job_id,
            seq,
            now_ms(),
        )
    row = await conn.fetchrow(
        """SELECT COALESCE(c.acked_seq, 0) AS acked,
                  (SELECT count(*) FROM job_events e WHERE e.job_id = $1 AND e.type = ANY($2::text[])) AS total,
                  (SELECT count(*) FROM job_events e
                   WHERE e.job_id = $1 AND e.seq > COALESCE(c.acked_seq, 0) AND e.type = ANY($2::text[])) AS unacked
           FROM (SELECT 1) AS one LEFT JOIN event_cursors c ON c.job_id = $1""",
        job_id,
        PROTOCOL_EVENT_TYPES,
    )
    unacked = int(row["unacked"])
    return int(row["total"]) - unacked, unacked

"""Push state of job events sent to a job's ``callback_url`` (table ``event_pushes``).

Lifecycle of one row (one event of one job that declared a callback):

* **enqueue** — :func:`enqueue_push`, called by
  :func:`curaflow.ledger.events.append_event` in the event's own transaction, freezes the
  Event JSON (``body``) and the URL; status ``pending``;
* **claim** — :func:`claim_next` hands the *oldest* pending event of the job to one push
  attempt (a lease: ``claimed_by`` / ``claimed_until``) and counts the attempt (an event
  that used every attempt is dead-lettered there instead, however its last one ended). Events of
  one job are pushed in order: while the oldest pending event is claimed by another live
  attempt, nothing is handed out (the caller stops; that attempt will go on);
* **settle** — :func:`record_push` marks the row ``delivered`` (2xx or 409), ``dead``
  (another 4xx at once, or the last allowed attempt failed) or releases it for a retry —
  only while the row is still the settling attempt's claim: an attempt that outlived its
  lease (its worker stopped, its send cut at a job's end and answered late) settles
  nothing once another attempt claimed the event.

Every time of a row is the database's clock (:data:`~curaflow.ledger.db.DB_NOW_MS`, read
in the statement that writes or judges it): the claim is a lease another worker's pusher
judges (docs/DESIGN.md "Ledger times are the database's clock"), and the sweep's idle
time runs from ``updated_at``.

Push state is separate from the consumer's ack cursor (``event_cursors``) and never
changes the job: push and pull are independent (reference §4.7).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import asyncpg

from curaflow.domain.text import clean_text, clipped_within
from curaflow.ledger.db import DB_NOW_MS, REASON_CHARS

PENDING = "pending"
DELIVERED = "delivered"
DEAD = "dead"


@dataclass
class ClaimedPush:
    """One event handed to a push attempt.

    Attributes:
        seq: the event's sequence number in its job.
        event_id: the opaque event id (sent as the idempotency key).
        url: the job's callback URL, as admitted.
        body: the frozen Event JSON text (sent byte for byte).
        attempts: attempts of this event including the current one.
        owner: the claiming attempt (``claimed_by``): only it settles the send.
    """

    job_id: str
    seq: int
    event_id: str
    url: str
    body: str
    attempts: int
    owner: str


@dataclass
class Claim:
    """Answer of :func:`claim_next`: ``push`` is None when there is nothing to send now.

    Attributes:
        busy: True when the oldest pending event is being sent by another live attempt.
        dead: events dead-lettered by this claim without a send: they had used every
            attempt, the last one ending without a settled answer (its worker died, or
            it was cut by a heartbeat timeout).
    """

    push: ClaimedPush | None
    busy: bool = False
    dead: int = 0


async def enqueue_push(
    conn: asyncpg.Connection, job_id: str, seq: int, event_id: str, url: str, event: dict[str, Any]
) -> None:
    """Record a pending push of ``event`` to ``url`` (inside the event's transaction)."""
    await conn.execute(
        f"""INSERT INTO event_pushes (job_id, seq, event_id, url, body, created_at, updated_at)
            SELECT $1::text, $2::integer, $3::text, $4::text, $5::json, clock.now, clock.now
            FROM (SELECT {DB_NOW_MS} AS now) clock
            ON CONFLICT DO NOTHING""",
        job_id,
        seq,
        event_id,
        url,
        event,
    )


async def claim_next(
    pool: asyncpg.Pool, job_id: str, owner: str, lease_ms: int, *, max_attempts: int | None = None
) -> Claim:
    """Claim the oldest pending event of ``job_id`` for one send (own transaction).

    An attempt is counted when it is claimed, before anything is sent, so every attempt
    counts whatever way it ends — also one whose worker died or that was cut before it
    could settle. An event that has already used ``max_attempts`` is dead-lettered here
    instead of being sent again, and the next event is claimed.

    A claim ``owner`` holds already is returned, not counted again, its lease renewed
    (``lease_ms`` from now): the attempt's own claim, asked again because the answer to its
    ``COMMIT`` was lost (a restart, a connection lost after it, the pool's bounded wait;
    ``activities.push_events`` tries the claim again in the attempt). Until 2026-12-07 the
    attempt failed having sent nothing, and its counted claim was its last attempt for
    ``callback_max_attempts = 1``: the event dead-lettered "its last attempt ended without
    an answer", never sent; and until the lease's renewal (the same day) such a claim came
    back with what was left of its lease — another attempt could claim the event and send
    it while this one's send was out —, and once lapsed it was counted again (dead-lettered
    unsent at its last attempt). An attempt names its claims uniquely (worker, run, activity,
    attempt) and settles each before claiming the next.

    Args:
        owner: identity of the sending attempt (``claimed_by``).
        lease_ms: how long the claim protects the send (request timeout plus a margin).
        max_attempts: the policy's attempts per event (None: no limit here).

    Returns:
        The claimed push (its ``attempts`` already counts this send), or an empty
        :class:`Claim` (``busy`` when another live attempt holds the oldest event).
    """
    dead = 0
    async with pool.acquire() as conn, conn.transaction():
        while True:
            # The claim is judged and written on the database's clock, read here.
            row = await conn.fetchrow(
                f"""SELECT seq, event_id, url, body::text AS body, attempts, claimed_by, claimed_until,
                          {DB_NOW_MS} AS now
                   FROM event_pushes WHERE job_id = $1 AND status = 'pending'
                   ORDER BY seq LIMIT 1 FOR UPDATE""",
                job_id,
            )
            if row is None:
                return Claim(push=None, dead=dead)
            now = int(row["now"])
            if row["claimed_by"] == owner and row["claimed_until"] is not None:
                # This attempt's own claim, live or lapsed: its COMMIT went through and the
                # answer was lost (the module's doc, "claim"); no attempt claimed it since
                # (a claim names its own). It is the claim, counted once, its lease renewed
                # for the send that follows.
                await conn.execute(
                    "UPDATE event_pushes SET claimed_until = $3, updated_at = $4 WHERE job_id = $1 AND seq = $2",
                    job_id,
                    row["seq"],
                    now + lease_ms,
                    now,
                )
                return Claim(push=_claimed(job_id, row, owner, int(row["attempts"])), dead=dead)
            if row["claimed_until"] is not None and row["claimed_until"] > now:
                return Claim(push=None, busy=True, dead=dead)
            if max_attempts is None or row["attempts"] < max_attempts:
                break
            await conn.execute(
                """UPDATE event_pushes SET status = 'dead', claimed_by = NULL, claimed_until = NULL,
                          last_error = COALESCE(last_error || '; ', '') || 'its last attempt ended without an answer',
                          updated_at = $3, completed_at = $3
                   WHERE job_id = $1 AND seq = $2""",
                job_id,
                row["seq"],
                now,
            )
            dead += 1
        attempts = await conn.fetchval(
            """UPDATE event_pushes SET attempts = attempts + 1, claimed_by = $3, claimed_until = $4, updated_at = $5
               WHERE job_id = $1 AND seq = $2 RETURNING attempts""",
            job_id,
            row["seq"],
            owner,
            now + lease_ms,
            now,
        )
    return Claim(push=_claimed(job_id, row, owner, int(attempts)), dead=dead)


def _claimed(job_id: str, row: asyncpg.Record, owner: str, attempts: int) -> ClaimedPush:
    return ClaimedPush(
        job_id=job_id,
        seq=row["seq"],
        event_id=row["event_id"],
        url=row["url"],
        body=row["body"],
        attempts=attempts,
        owner=owner,
    )


async def record_push(
    pool: asyncpg.Pool, push: ClaimedPush, status: str, *, http_status: int | None, error: str | None
) -> bool:
    """Settle one send of ``push``, if the event is still ``push``'s claim.

    An attempt whose lease lapsed while its send was out (its worker stopped or paused,
    its send cut at a job's end and answered late) may find the event claimed, sent and
    settled by another attempt since (the job's next attempt, the sweeper's run): what it
    learnt then settles nothing — it would put a delivered event back to pending (sent
    again after the events that follow it) or free an event another attempt is sending
    (a third attempt would send it alongside). Until 2026-12-06 any attempt's record
    overwrote the row.

    Args:
        status: ``delivered``, ``dead`` or ``pending`` (released for a later retry).
        http_status: the answer's status, None when no answer came.
        error: a short description of a failure.

    Returns:
        True when the send was settled; False when the event was no longer ``push``'s
        claim (nothing written: the attempt holding it, or that settled it, has the say).
    """
    settled = await pool.fetchval(
        f"""WITH clock AS (SELECT {DB_NOW_MS} AS now)
           UPDATE event_pushes SET status = $3, last_status = $4, last_error = $5, claimed_by = NULL,
                  claimed_until = NULL, updated_at = clock.now,
                  completed_at = CASE WHEN $3 = 'pending' THEN NULL ELSE clock.now END
           FROM clock WHERE job_id = $1 AND seq = $2 AND status = 'pending' AND claimed_by = $6
           RETURNING true""",
        push.job_id,
        push.seq,
        status,
        http_status,
        clipped_within(clean_text(error), REASON_CHARS) if error else None,
        push.owner,
    )
    return bool(settled)


async def stale_jobs(pool: asyncpg.Pool, idle_ms: int, limit: int = 50) -> list[str]:
    """Jobs with a pending push nobody has worked on for ``idle_ms`` (oldest first).

    A pending event is *stale* when no attempt holds it and its row has not changed for
    ``idle_ms``: it was written while no workflow served the job (the reconciler or the
    HTTP cancel converged the ledger), or its job's workflow ended before pushing it.
    """
    rows = await pool.fetch(
        f"""WITH clock AS (SELECT {DB_NOW_MS} AS now)
           SELECT job_id FROM event_pushes, clock
           WHERE status = 'pending' AND updated_at <= clock.now - $1::bigint
             AND (claimed_until IS NULL OR claimed_until <= clock.now)
           GROUP BY job_id ORDER BY min(updated_at) LIMIT $2""",
        idle_ms,
        limit,
    )
    return [r["job_id"] for r in rows]


async def push_states(pool: asyncpg.Pool, job_id: str) -> list[dict[str, Any]]:
    """Every push row of ``job_id`` in event order (for diagnostics and tests), without bodies."""
    rows = await pool.fetch(
        """SELECT seq, event_id, status, attempts, last_status, last_error, completed_at
           FROM event_pushes WHERE job_id = $1 ORDER BY seq""",
        job_id,
    )
    return [dict(r) for r in rows]

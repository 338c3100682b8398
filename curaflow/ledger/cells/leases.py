"""A cell's lease: extended by each beat of the attempt holding it, released when it ends."""

from __future__ import annotations

import asyncpg

from curaflow.ledger.db import DB_NOW_MS

#: A statement's one read of the database's clock (:data:`DB_NOW_MS`), joined as ``clock``:
#: a cell's ``heartbeat_at`` and ``lease_until`` (and a send's ``send_until``) are that
#: clock's, the one every process judges them on.
_CLOCK = f"clock AS (SELECT {DB_NOW_MS} AS now)"


async def heartbeat(
    pool: asyncpg.Pool,
    job_id: str,
    target_id: str,
    lease_ms: int,
    *,
    send: tuple[str, str] | None = None,
    send_lease_ms: int | None = None,
) -> None:
    """Extend a cell's lease and stamp ``heartbeat_at`` (one statement, own transaction).

    Both are the database's clock (:data:`~curaflow.ledger.db.DB_NOW_MS`), not this
    process's: the reconciler (:data:`~curaflow.ledger.reconciler.NO_LIVE_ATTEMPT`), the
    API (``lease_active``) and the stall budget judge them on it, whatever host they run
    on (docs/DESIGN.md "Ledger times are the database's clock").

    Args:
        lease_ms: how long the lease holds from now (the database's clock) without
            another beat.
        send: ``(idempotency_key, owner)`` of the send this attempt has out: its intent's
            ``send_until`` is extended in the same statement, while it is still ``sending``
            from that attempt (:func:`curaflow.ledger.deliveries.claim_send` waits for it) —
            and only then the cell's lease: once the send's answer is recorded (the
            receipt ends the attempt's lease, :func:`curaflow.ledger.deliveries.record_delivered`)
            a beat that was under way meanwhile leases nothing again.
        send_lease_ms: how long the send holds from now (the database's clock) without
            another beat; None: ``lease_ms``
            (:func:`activities.deliver.recording.send_lease_ms` makes it outlast the
            recording of the send's answer).
    """
    if send is None:
        await pool.execute(
            f"""WITH {_CLOCK}
               UPDATE cells SET heartbeat_at = clock.now, lease_until = clock.now + $3::bigint FROM clock
               WHERE job_id = $1 AND target_id = $2""",
            job_id,
            target_id,
            lease_ms,
        )
        return
    await pool.execute(
        f"""WITH {_CLOCK},
                send AS (UPDATE delivery_intents SET send_until = clock.now + $4::bigint FROM clock
                         WHERE idempotency_key = $5 AND status = 'sending' AND send_owner = $6
                         RETURNING 1)
           UPDATE cells SET heartbeat_at = clock.now, lease_until = clock.now + $3::bigint FROM clock
           WHERE job_id = $1 AND target_id = $2 AND EXISTS (SELECT 1 FROM send)""",
        job_id,
        target_id,
        lease_ms,
        lease_ms if send_lease_ms is None else send_lease_ms,
        *send,
    )


async def end_lease(conn: asyncpg.Connection, job_id: str, target_id: str) -> None:
    """Release a cell's lease at the end of an activity attempt.

    The lease stays while another route's delivery of the same cell is in flight
    (an intent ``sending``): that attempt still holds the cell.
    """
    await conn.execute(
        """UPDATE cells SET lease_until = NULL, lease_owner = NULL
           WHERE job_id = $1 AND target_id = $2
             AND NOT EXISTS (SELECT 1 FROM delivery_intents d
                             WHERE d.job_id = $1 AND d.target_id = $2 AND d.status = 'sending')""",
        job_id,
        target_id,
    )

"""The scan frontier of each target, in the ledger (rules in :mod:`curaflow.sources.frontier`).

One row per (target, fingerprint). The ``search`` activity reads it when a scan starts
(a resumed attempt keeps the walk of its checkpoint) and writes the frontier the scan
leaves in the transaction that stores the scan's candidate report, so a job that dies
before it bound its work leaves the frontier as it was. Concurrent jobs of one target:
the last writer wins; the frontier is advisory (the ledger's intents decide what is
new), so the worst a lost write costs is pages read again.

Times are epoch milliseconds (UTC, :func:`~curaflow.ledger.db.now_ms`).
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from curaflow.ledger.db import now_ms
from curaflow.sources.frontier import Frontier


@dataclass
class StoredFrontier:
    """A ``scan_frontiers`` row (``updated_at``: epoch ms; ``job_id``: the job that wrote it)."""

    target_id: str
    fingerprint: str
    frontier: Frontier
    job_id: str | None
    updated_at: int


async def list_frontiers(conn: asyncpg.Connection | asyncpg.Pool) -> list[StoredFrontier]:
    """Every stored frontier, by target (rows this version cannot read are left out)."""
    rows = await conn.fetch(
        "SELECT target_id, fingerprint, frontier, job_id, updated_at FROM scan_frontiers ORDER BY target_id"
    )
    out: list[StoredFrontier] = []
    for row in rows:
        try:
            frontier = Frontier.model_validate(row["frontier"])
        except ValueError:
            continue
        out.append(StoredFrontier(row["target_id"], row["fingerprint"], frontier, row["job_id"], row["updated_at"]))
    return out


async def load_frontier(conn: asyncpg.Connection | asyncpg.Pool, target_id: str, fingerprint: str) -> Frontier | None:
    """The stored frontier of ``target_id`` for ``fingerprint``, or None (none yet, or unreadable)."""
    value = await conn.fetchval(
        "SELECT frontier FROM scan_frontiers WHERE target_id = $1 AND fingerprint = $2", target_id, fingerprint
    )
    if not isinstance(value, dict):
        return None
    try:
        return Frontier.model_validate(value)
    except ValueError:
        return None  # a shape this version cannot read: start afresh


async def save_frontier(
    conn: asyncpg.Connection, target_id: str, fingerprint: str, frontier: Frontier, *, job_id: str | None
) -> None:
    """Store ``frontier`` and forget the target's frontiers of other fingerprints (its old queries)."""
    await conn.execute(
        """WITH gone AS (DELETE FROM scan_frontiers WHERE target_id = $1 AND fingerprint <> $2)
           INSERT INTO scan_frontiers (target_id, fingerprint, frontier, job_id, updated_at)
           VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (target_id, fingerprint) DO UPDATE
             SET frontier = EXCLUDED.frontier, job_id = EXCLUDED.job_id, updated_at = EXCLUDED.updated_at""",
        target_id,
        fingerprint,
        frontier.model_dump(mode="json"),
        job_id,
        now_ms(),
    )


async def clear_frontiers(conn: asyncpg.Connection | asyncpg.Pool, target_id: str | None = None) -> int:
    """Forget the frontiers of ``target_id`` (every target's when None); returns how many.

    Their next jobs read from the top again. Needed when a lasting verdict is lifted (a
    refusal or an unavailable work cleared): the frontier would pass that work over.
    """
    rows = await conn.fetch(
        "DELETE FROM scan_frontiers WHERE $1::text IS NULL OR target_id = $1 RETURNING target_id", target_id
    )
    return len(rows)

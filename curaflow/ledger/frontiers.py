"""The scan frontier of each target, in the ledger: a source's memory, stored without being read.

A source that keeps frontiers (:attr:`~curaflow.sources.base.SourcePolicy.keeps_frontier`)
remembers, per target, where its next scan should read; the memory is the source's own
JSON (Pixiv's: :mod:`curaflow.sources.pixiv.frontier`). The ledger keeps one row per
(target, key) — the key is what the source names it by
(:meth:`~curaflow.sources.base.Source.frontier_key`, Pixiv's fingerprint) — and never
looks inside it: it stores what a scan left and hands it back to the next scan, which
alone interprets it.

The ``search`` activity reads it when a scan starts, with the cell's resume point
(:func:`curaflow.ledger.cells.search_resume`; a resumed attempt keeps the walk of its
checkpoint), and writes the frontier the scan leaves in the transaction that stores the
scan's candidate report, so a job that dies before it bound its work leaves the frontier
as it was. Concurrent jobs of one target: the last writer wins; the frontier is advisory
(the ledger's intents decide what is new), so the worst a lost write costs is pages read
again. Rows written before the frontier moved behind the source seam are the same JSON.

Times are epoch milliseconds (UTC, :func:`~curaflow.ledger.db.now_ms`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import asyncpg

from curaflow.ledger.db import now_ms


def stored_sql(target_id: str, key: str) -> str:
    """The stored frontier as a scalar SQL subquery (NULL when none), for a statement that
    reads it with other facts (:func:`curaflow.ledger.cells.search_resume`).

    Args:
        target_id / key: SQL expressions of the target's id and the key (parameters
            such as ``$2``).
    """
    return f"(SELECT f.frontier FROM scan_frontiers f WHERE f.target_id = {target_id} AND f.fingerprint = {key})"


@dataclass
class StoredFrontier:
    """A ``scan_frontiers`` row.

    Attributes:
        target_id: the target.
        fingerprint: the key its source stored it under.
        frontier: the source's JSON, as stored.
        job_id: the job that wrote it (None: written outside a job).
        updated_at: when (epoch ms).
    """

    target_id: str
    fingerprint: str
    frontier: dict[str, Any]
    job_id: str | None
    updated_at: int


async def list_frontiers(conn: asyncpg.Connection | asyncpg.Pool) -> list[StoredFrontier]:
    """Every stored frontier, by target (a row that holds no JSON object is left out)."""
    rows = await conn.fetch(
        "SELECT target_id, fingerprint, frontier, job_id, updated_at FROM scan_frontiers ORDER BY target_id"
    )
    return [
        StoredFrontier(row["target_id"], row["fingerprint"], row["frontier"], row["job_id"], row["updated_at"])
        for row in rows
        if isinstance(row["frontier"], dict)
    ]


async def load_frontier(
    conn: asyncpg.Connection | asyncpg.Pool, target_id: str, fingerprint: str
) -> dict[str, Any] | None:
    """The stored frontier of ``target_id`` under ``fingerprint``, or None (none yet, or not a JSON object)."""
    value = await conn.fetchval(f"SELECT {stored_sql('$1', '$2')}", target_id, fingerprint)
    return value if isinstance(value, dict) else None


async def save_frontier(
    conn: asyncpg.Connection, target_id: str, fingerprint: str, frontier: dict[str, Any], *, job_id: str | None
) -> None:
    """Store ``frontier`` (the source's JSON) and forget the target's frontiers under other
    keys (its old queries)."""
    await conn.execute(
        """WITH gone AS (DELETE FROM scan_frontiers WHERE target_id = $1 AND fingerprint <> $2)
           INSERT INTO scan_frontiers (target_id, fingerprint, frontier, job_id, updated_at)
           VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (target_id, fingerprint) DO UPDATE
             SET frontier = EXCLUDED.frontier, job_id = EXCLUDED.job_id, updated_at = EXCLUDED.updated_at""",
        target_id,
        fingerprint,
        frontier,
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

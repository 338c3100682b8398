"""Which artifact store holds which cell's files, until that store's worker deleted them.

Workers share no disk: the files of a fetched artifact are in the artifacts directory of
the process that fetched it (its *store*, :meth:`curaflow.artifacts.ArtifactStore.identity`),
and only a process on that host can delete them. So the fetch records the holding
(:func:`hold`, before its first byte) and the retention pass of every worker deletes the
folders its own store holds for pruned jobs, and for cells whose delivery made them
garbage on every store (:func:`done`: ``storage_mode = "cache"``, the cell submitted —
the host that delivered may not be the one that fetched), then forgets them
(:func:`release`). A prune
run anywhere (``curaflow prune``, another worker) reports the folders still held by other
stores (:func:`pending`): they go at those stores' next pass.

Tables ``artifact_stores`` and ``artifact_holdings`` (migration 0042; ``done_at``, 0048).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import NamedTuple

import asyncpg

from curaflow.artifacts import ArtifactStore
from curaflow.domain.text import clipped_within
from curaflow.ledger.db import now_ms
from curaflow.paths import PathEscape

#: Folders deleted per batch of a release (one query, one delete).
RELEASE_BATCH = 500


@dataclass(frozen=True)
class PendingStore:
    """Folders of pruned jobs a store still holds.

    Attributes:
        store_id / label: the store (``host:path`` of its artifacts directory; None for a
            store whose worker never ran a retention pass since it held them).
        folders: cells' folders still to delete there.
        seen_at_ms: the store's worker's last retention pass (epoch ms, UTC), or None.
    """

    store_id: str
    label: str | None
    folders: int
    seen_at_ms: int | None


def hold_sql(job: str, target: str, store: str, at: str) -> str:
    """The ``INSERT`` of :func:`hold` for a statement to carry as a common table expression
    (``WITH held AS (…)``): the binding that carries an ``acquire`` step on into its fetch
    records the holding in its own statement (:func:`curaflow.ledger.cells.bind_search`).

    Args:
        job / target / store / at: SQL of the values (parameters such as ``$1``).
    """
    return f"""INSERT INTO artifact_holdings (job_id, target_id, store_id, held_at)
               VALUES ({job}, {target}, {store}, {at}) ON CONFLICT DO NOTHING"""


async def hold(pool: asyncpg.Pool | asyncpg.Connection, store_id: str, job_id: str, target_id: str) -> None:
    """Record that ``store_id`` writes the artifact folder of cell ``(job_id, target_id)``
    (idempotent: a retried fetch records nothing new)."""
    await pool.execute(hold_sql("$1", "$2", "$3", "$4"), job_id, target_id, store_id, now_ms())


async def done(pool: asyncpg.Pool | asyncpg.Connection, job_id: str, target_id: str) -> None:
    """Record that the artifact folders of cell ``(job_id, target_id)`` are garbage on every
    store that holds one (``storage_mode = "cache"`` and the cell ``submitted``): each
    store's next retention pass deletes its folder (:func:`release`). Idempotent (one
    statement; a cell no store holds records nothing)."""
    await pool.execute(
        """UPDATE artifact_holdings SET done_at = $3
           WHERE job_id = $1 AND target_id = $2 AND done_at IS NULL""",
        job_id,
        target_id,
        now_ms(),
    )


async def register_store(pool: asyncpg.Pool, store: ArtifactStore, at_ms: int | None = None) -> None:
    """Name ``store`` in ``artifact_stores`` and note its worker's pass (``seen_at``)."""
    store_id, label = await asyncio.to_thread(store.identity)
    await pool.execute(
        """INSERT INTO artifact_stores (store_id, label, seen_at) VALUES ($1, $2, $3)
           ON CONFLICT (store_id) DO UPDATE SET label = EXCLUDED.label, seen_at = EXCLUDED.seen_at""",
        store_id,
        label,
        now_ms() if at_ms is None else at_ms,
    )


class Released(NamedTuple):
    """What one :func:`release` did.

    Attributes:
        removed: folders deleted (and forgotten).
        refused: one line for each folder that could not be deleted (``<job>/<target>:
            <why>``): it stays recorded, so it is still pending and the next pass tries it
            again.
    """

    removed: int
    refused: list[str]


async def release(pool: asyncpg.Pool, store: ArtifactStore) -> Released:
    """Delete the folders ``store`` holds for pruned jobs and for cells marked :func:`done`,
    then forget them.

    A folder is deleted before its row, and a row is deleted only once its folder is gone
    (:meth:`~curaflow.artifacts.ArtifactStore.remove`): a folder that cannot be deleted (a
    file the disk refuses to remove, a read-only mount, a folder an operator moved out of
    the root behind a symbolic link — never followed) keeps its row, is said in
    ``refused``, and the pass goes on with the other folders; the next pass tries it again.
    Until 2026-12-07 a failure was ignored and the row deleted all the same (the files
    stayed, recorded nowhere, counted as removed), and a folder leading out of the root
    stopped the pass at its first batch, every pass (``tests/integration/test_retention_disk.py``).
    """
    store_id, _ = await asyncio.to_thread(store.identity)
    removed = 0
    refused: list[str] = []
    skipped: list[tuple[str, str]] = []  # refused this pass: not asked for again
    while True:
        rows = await pool.fetch(
            """WITH skip AS (SELECT * FROM unnest($3::text[], $4::text[]) AS s(job_id, target_id))
               (SELECT h.job_id, h.target_id FROM artifact_holdings h JOIN jobs j USING (job_id)
                WHERE h.store_id = $1 AND j.pruned_at IS NOT NULL
                  AND (h.job_id, h.target_id) NOT IN (SELECT job_id, target_id FROM skip) LIMIT $2)
               UNION
               (SELECT h.job_id, h.target_id FROM artifact_holdings h
                WHERE h.store_id = $1 AND h.done_at IS NOT NULL
                  AND (h.job_id, h.target_id) NOT IN (SELECT job_id, target_id FROM skip) LIMIT $2)
               LIMIT $2""",
            store_id,
            RELEASE_BATCH,
            [c[0] for c in skipped],
            [c[1] for c in skipped],
        )
        if not rows:
            return Released(removed, refused)
        cells = [(r["job_id"], r["target_id"]) for r in rows]
        failures = await asyncio.to_thread(remove_folders, store, cells)
        gone = [c for c in cells if c not in failures]
        skipped += failures
        refused += [f"{job}/{target}: {why}" for (job, target), why in failures.items()]
        await pool.execute(
            """DELETE FROM artifact_holdings h USING unnest($2::text[], $3::text[]) AS c(job_id, target_id)
               WHERE h.store_id = $1 AND h.job_id = c.job_id AND h.target_id = c.target_id""",
            store_id,
            [c[0] for c in gone],
            [c[1] for c in gone],
        )
        removed += len(gone)
        if len(rows) < RELEASE_BATCH:
            return Released(removed, refused)


async def pending(pool: asyncpg.Pool) -> list[PendingStore]:
    """Every store that still holds folders of pruned jobs, most folders first."""
    rows = await pool.fetch(
        """SELECT h.store_id, s.label, s.seen_at, count(*) AS folders
           FROM artifact_holdings h JOIN jobs j USING (job_id) LEFT JOIN artifact_stores s USING (store_id)
           WHERE j.pruned_at IS NOT NULL
           GROUP BY h.store_id, s.label, s.seen_at ORDER BY folders DESC, h.store_id"""
    )
    return [PendingStore(r["store_id"], r["label"], int(r["folders"]), r["seen_at"]) for r in rows]


async def unheld(conn: asyncpg.Connection, job_ids: list[str]) -> set[tuple[str, str]]:
    """Cells of ``job_ids`` with an artifact and no holding (fetched before holdings were
    recorded): their folder can only be looked for where the prune runs."""
    rows = await conn.fetch(
        """SELECT c.job_id, c.target_id FROM cells c
           WHERE c.job_id = ANY($1::text[]) AND c.artifact IS NOT NULL
             AND NOT EXISTS (SELECT 1 FROM artifact_holdings h
                             WHERE h.job_id = c.job_id AND h.target_id = c.target_id)""",
        job_ids,
    )
    return {(r["job_id"], r["target_id"]) for r in rows}


def remove_folders(store: ArtifactStore, cells: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Remove each cell's folder (:meth:`~curaflow.artifacts.ArtifactStore.remove`);
    returns the cells whose folder stays, with why. Blocking."""
    failures: dict[tuple[str, str], str] = {}
    for job_id, target_id in cells:
        try:
            store.remove(job_id, target_id)
        except (OSError, PathEscape) as err:
            failures[(job_id, target_id)] = clipped_within(f"{type(err).__name__}: {err}", 300)
    return failures

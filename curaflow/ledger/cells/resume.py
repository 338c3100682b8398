"""Where a ``search`` attempt resumes: its saved checkpoint, the works its cell released,
the target's stored scan frontier."""

from __future__ import annotations

from typing import Any, NamedTuple

import asyncpg

from curaflow.ledger import frontiers
from curaflow.ledger.cells.steps import StepOpened


async def save_checkpoint(pool: asyncpg.Pool, job_id: str, target_id: str, checkpoint: dict[str, Any]) -> None:
    """Persist the search activity's resume point (own short transaction)."""
    await pool.execute(
        "UPDATE cells SET search_checkpoint = $3 WHERE job_id = $1 AND target_id = $2",
        job_id,
        target_id,
        checkpoint,
    )


class SearchResume(NamedTuple):
    """Where a ``search`` attempt resumes: see :func:`search_resume`."""

    released: set[str]  # works this cell bound and released as unavailable (skipped)
    checkpoint: dict[str, Any] | None  # the saved scan position, or None
    frontier: dict[str, Any] | None = None  # the target's stored scan frontier, or None
    # Of ``released``, the works released on an answer not recognised as theirs.
    unrecognised: frozenset[str] = frozenset()


async def search_resume(
    pool: asyncpg.Pool, job_id: str, target_id: str, frontier_key: str | None = None
) -> SearchResume:
    """The works this cell released as unavailable (a later pass skips them) and, of
    those, the ones released on an answer not recognised as theirs (``unrecognised``:
    the intents' ``release_unrecognised``, written by
    :func:`~curaflow.ledger.cells.rebind_next`; false on intents released before
    migration 0045), the saved search checkpoint and, with ``frontier_key``, the target's
    stored scan frontier (:mod:`curaflow.ledger.frontiers`, the source's JSON), in one
    statement (own short transaction).

    A search with no frontier to read, whose cell never bound a work (none released) and
    holds no checkpoint, has nothing to resume and skips this read (:func:`resume_needed`)."""
    frontier = frontiers.stored_sql("$2", "$3") if frontier_key is not None else "NULL::jsonb"
    row = await pool.fetchrow(
        f"""SELECT c.search_checkpoint,
                  ARRAY(SELECT DISTINCT d.work_id FROM delivery_intents d
                        WHERE d.job_id = $1 AND d.target_id = $2 AND d.status = 'released') AS released,
                  ARRAY(SELECT DISTINCT d.work_id FROM delivery_intents d
                        WHERE d.job_id = $1 AND d.target_id = $2 AND d.status = 'released'
                          AND d.release_unrecognised) AS unrecognised,
                  {frontier} AS frontier
           FROM cells c WHERE c.job_id = $1 AND c.target_id = $2""",
        job_id,
        target_id,
        *([frontier_key] if frontier_key is not None else []),
    )
    if row is None:
        return SearchResume(set(), None)
    checkpoint, stored = row["search_checkpoint"], row["frontier"]
    return SearchResume(
        set(row["released"]),
        checkpoint if isinstance(checkpoint, dict) else None,
        stored if isinstance(stored, dict) else None,
        frozenset(row["unrecognised"]),
    )


def resume_needed(opened: StepOpened, frontier_key: str | None) -> bool:
    """Whether a search step opened as ``opened`` has anything :func:`search_resume` would
    find: the target's stored frontier (``frontier_key``), works its cell released (only a
    cell that bound a work releases one) or a saved checkpoint."""
    if frontier_key is not None:
        return True
    return opened.cell is not None and (opened.cell.attempt > 0 or opened.checkpointed)

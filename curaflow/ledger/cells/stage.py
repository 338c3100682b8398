"""The job-level stage in the ledger: ``jobs.last_stage`` and the ``job.progress`` events,
moved by the rule :func:`curaflow.domain.projection.open_stage` (the job row locked)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import asyncpg

from curaflow.domain.cells import is_terminal
from curaflow.domain.models import CellSnapshot
from curaflow.domain.projection import open_stage
from curaflow.ledger.cells.rows import TERMINAL_STATE_NAMES
from curaflow.ledger.db import now_ms
from curaflow.ledger.events import NOTIFY_CHANNEL, event_body, push_appended

#: The job's last recorded stage and its open cells' stages, for :func:`sync_job_stage`.
_STAGES_SQL = """SELECT j.last_stage,
                        ARRAY(SELECT c.stage FROM cells c
                              WHERE c.job_id = j.job_id AND NOT (c.state = ANY ($2::text[]))) AS stages
                 FROM jobs j WHERE j.job_id = $1"""
#: The write of :func:`sync_job_stage`: ``curaflow_set_job_stage`` (migration 0040) moves
#: the stage it is given and appends the events; it decides nothing.
_SET_STAGE_SQL = """SELECT o_seq, o_type, o_at, o_payload, o_callback_url, o_correlation_id
                    FROM curaflow_set_job_stage($1, $2, $3, $4, $5, $6)"""


class StageFacts(NamedTuple):
    """What the stage rule reads of a job, when the caller already holds it: the stage
    ``jobs.last_stage`` records and the stages of the job's open cells."""

    last_stage: str | None
    open_stages: list[str]


def sole_cell_stage(job: asyncpg.Record | Mapping[str, Any] | None, cell: CellSnapshot | None) -> StageFacts | None:
    """The stage facts of a job with one cell, from what the caller's transaction already
    holds — the locked job row (``last_stage``, ``cells``: :func:`lock_job`) and that cell
    as the caller's statement wrote it — so :func:`sync_job_stage` reads nothing. None for
    a job of several cells (their stages are read) or when either is missing.

    Only rows the transaction locked or wrote are used (the rule of :func:`lock_job`).
    """
    if job is None or cell is None or job["cells"] != 1:
        return None
    return StageFacts(job["last_stage"], [] if is_terminal(cell.state) else [cell.stage])


async def sync_job_stage(
    conn: asyncpg.Connection,
    job_id: str,
    *,
    started: bool = False,
    at: int | None = None,
    known: StageFacts | None = None,
) -> None:
    """Emit ``job.progress`` when the job-level stage changed (job row must be locked).

    The job-level stage is decided by :func:`curaflow.domain.projection.open_stage`, the
    rule ``GET /jobs/{id}`` shows, from the open cells' stages read here (a statement of
    its own, after the caller's lock, so it sees every committed cell) — or given as
    ``known`` by a caller that holds them (a job of one cell: :func:`sole_cell_stage`).
    ``jobs.last_stage`` holds the stage of the job's last ``job.progress`` event; when
    the stage moved, or with ``started`` (the job's first step, ``job.started`` appended
    first), one more statement writes it and appends the events. Pushes of a job with a
    ``callback_url`` are enqueued in the same transaction.

    Args:
        at: the events' time, epoch ms (default now); :func:`start_step` passes the time
            it wrote as ``started_at`` (reference §4.3: ``job.started`` is at ``started_at``).
        known: the stage facts, when the caller holds them (no statement reads them).
    """
    if known is None:
        row = await conn.fetchrow(_STAGES_SQL, job_id, TERMINAL_STATE_NAMES)
        if row is None:
            return
        known = StageFacts(row["last_stage"], list(row["stages"]))
    stage = open_stage(known.open_stages)
    if not started and (stage is None or stage == known.last_stage):
        return
    rows = await conn.fetch(
        _SET_STAGE_SQL,
        job_id,
        at if at is not None else now_ms(),
        stage,
        event_body("job.started") if started else None,
        event_body("job.progress"),
        NOTIFY_CHANNEL,
    )
    for r in rows:
        await push_appended(
            conn, job_id, r["o_type"], r["o_seq"], r["o_at"], r["o_payload"], r["o_callback_url"], r["o_correlation_id"]
        )

"""The :class:`~curaflow.domain.messages.JobState` of a ledger job (pure).

What every reader outside the workflow answers for a job it reads from the ledger —
``finish``'s result, the ``admit`` step's answer for a job that already ended, the
``follow_job`` activity, the Nexus operations: status and stage by the shared projection
(:mod:`curaflow.domain.projection`), the business status once the job is terminal.

Each of them travels as a Temporal payload (a local activity's marker, an activity's or a
Nexus operation's result, the workflow's result or its failure's details), which the server
and the SDK refuse over ``limit.blobSize.error`` (2 MiB): the state is fitted under
:data:`STATE_MAX_BYTES` (:func:`fitted`).

Pure module: imported by workflows through the sandbox pass-through.
"""

from __future__ import annotations

from curaflow.domain.messages import JobState
from curaflow.domain.models import JobRecord
from curaflow.domain.outcome import business_status, is_alertable, job_deliveries
from curaflow.domain.projection import job_stage, job_status

#: The most bytes a job's state carries as a Temporal payload (its JSON): Temporal's warning
#: limit (``limit.blobSize.warn``, 512 KiB), a quarter of the error limit (2 MiB) — room for
#: the failure that wraps a failed job's state and for what a workflow task carries with it.
STATE_MAX_BYTES = 512 * 1024


def job_state(record: JobRecord) -> JobState:
    """The :class:`JobState` of a ledger job (status and stage by the shared projection),
    fitted under :data:`STATE_MAX_BYTES` (:func:`fitted`)."""
    status = job_status(record.cells)
    terminal = record.completed_at is not None
    verdict = business_status(record.cells) if terminal else None
    return fitted(
        JobState(
            job_id=record.job_id,
            job_type=record.job_type,
            status=status,
            stage=job_stage(record.cells, status),
            business_status=verdict.value if verdict else None,
            alertable=is_alertable(verdict) if verdict else None,
            cancel_requested=record.cancel_requested_at is not None,
            created_at_ms=record.created_at,
            deadline_at_ms=record.deadline_at,
            cells=record.cells,
            deliveries=job_deliveries(record.cells),
        )
    )


def fitted(state: JobState, limit: int = STATE_MAX_BYTES) -> JobState:
    """``state`` as it can travel in a Temporal payload: whole when its JSON is at most
    ``limit`` bytes; else every cell in its brief form
    (:meth:`~curaflow.domain.models.CellSnapshot.brief`: state, stage, reason and message,
    the work's id, title and URL — no page list, artifact, candidate report or delivery
    rows; the job's deliveries stay in ``deliveries``); else, still over, every cell
    without its work either (its ``work_id`` stays). Every cell and every delivery is kept:
    what is dropped is the ledger's (``GET /jobs/{id}``, ``curaflow status``).

    Until 2026-12-06 the state went whole: 40 cells of 200-page works (~2.8 MB) could not
    be recorded as ``finish``'s result, every workflow task of the job failed
    (``PayloadsTooLarge``) and its execution stayed running until it timed out.

    Args:
        state: the state as read from the ledger.
        limit: the most bytes of its JSON.
    """
    if len(state.model_dump_json()) <= limit:
        return state
    brief = state.model_copy(update={"cells": [cell.brief() for cell in state.cells]})
    if len(brief.model_dump_json()) <= limit:
        return brief
    return brief.model_copy(update={"cells": [cell.model_copy(update={"work": None}) for cell in brief.cells]})

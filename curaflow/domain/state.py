"""The :class:`~curaflow.domain.messages.JobState` of a ledger job (pure).

What every reader outside the workflow answers for a job it reads from the ledger —
``finish``'s result, the ``admit`` step's answer for a job that already ended, the
``follow_job`` activity, the Nexus operations: status and stage by the shared projection
(:mod:`curaflow.domain.projection`), the business status once the job is terminal.

Pure module: imported by workflows through the sandbox pass-through.
"""

from __future__ import annotations

from curaflow.domain.messages import JobState
from curaflow.domain.models import JobRecord
from curaflow.domain.outcome import business_status, is_alertable, job_deliveries
from curaflow.domain.projection import job_stage, job_status


def job_state(record: JobRecord) -> JobState:
    """The :class:`JobState` of a ledger job (status and stage by the shared projection)."""
    status = job_status(record.cells)
    terminal = record.completed_at is not None
    verdict = business_status(record.cells) if terminal else None
    return JobState(
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

"""Job status and stage derived from cells: the one rule both status readers use.

The workflow's ``status`` query and ``GET /jobs/{id}`` both call :func:`job_status` on
the same cell snapshots, so at any terminal state they agree (DESIGN.md decision 3).

Rules (reference §1.4, extended to jobs with several cells):

* any cell non-terminal: ``queued`` while every cell is still ``pending`` (the original's
  quirk: a claimed job whose cell has not reached ``selected`` reports ``queued``),
  otherwise ``running``;
* every cell terminal: any cell ``submitted`` → ``succeeded``; else a cell stopped on
  purpose (``cancelled_by_consumer``, ``execution_terminated``) and no system failure →
  ``cancelled``; a system failure → ``expired`` when every system-failed cell ended for
  an expiry reason (``queued_too_long``, ``stalled_no_heartbeat``,
  ``execution_timeout``), otherwise ``failed``; nothing found (``no_candidate`` /
  ``duplicate``) → ``failed`` (§7.4's mapping of the business status).

  For a single cell this is exactly the original's per-cell mapping.

Pure module: imported by workflows through the sandbox pass-through.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import StrEnum

from curaflow.domain.cells import STAGE_ORDER, CellState, is_terminal
from curaflow.domain.models import CellSnapshot
from curaflow.domain.outcome import CellCategory, cell_counts, classify_cell
from curaflow.domain.reasons import CANCEL_REASONS, EXPIRY_REASONS


class JobStatus(StrEnum):
    """Protocol ``Job.status`` values."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


TERMINAL_JOB_STATUSES: frozenset[str] = frozenset(
    {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.EXPIRED}
)


def all_terminal(cells: Sequence[CellSnapshot]) -> bool:
    """True when the job has cells and every one is terminal."""
    return bool(cells) and all(is_terminal(c.state) for c in cells)


def _system_failed(cells: Sequence[CellSnapshot]) -> list[CellSnapshot]:
    return [c for c in cells if classify_cell(c) in (CellCategory.EXECUTOR_FAILED, CellCategory.DELIVERY_FAILED)]


def job_status(cells: Sequence[CellSnapshot]) -> JobStatus:
    """Derive the protocol job status from the job's cells (rules in the module doc).

    Decided on the cells' categories, not on the business status: a cancelled job whose
    work reached a route is ``partial_success`` as business but ``cancelled`` as a job.
    """
    if not cells:
        return JobStatus.QUEUED
    if not all_terminal(cells):
        if all(c.state == CellState.PENDING for c in cells):
            return JobStatus.QUEUED
        return JobStatus.RUNNING
    counts = cell_counts(cells)
    if counts["submitted"] > 0:
        return JobStatus.SUCCEEDED
    failed = _system_failed(cells)
    if counts["cancelled"] > 0 and not failed:
        return JobStatus.CANCELLED
    if failed and all(c.reason in EXPIRY_REASONS for c in failed):
        return JobStatus.EXPIRED
    return JobStatus.FAILED


def representative_cell(cells: Sequence[CellSnapshot], status: str) -> CellSnapshot | None:
    """The cell whose reason explains a terminal non-success ``status``.

    Cancelled → the first cancelled cell; expired → the first expiry cell; failed → the
    first system-failed cell, else the first non-submitted cell. None otherwise.
    """
    if status == JobStatus.CANCELLED:
        return next((c for c in cells if c.reason in CANCEL_REASONS), None)
    if status == JobStatus.EXPIRED:
        return next((c for c in cells if c.reason in EXPIRY_REASONS), None)
    if status == JobStatus.FAILED:
        failed = _system_failed(cells)
        if failed:
            return failed[0]
        return next((c for c in cells if c.state != CellState.SUBMITTED), None)
    return None


def job_stage(cells: Sequence[CellSnapshot], status: str | None = None) -> str:
    """Progress stage of the job (protocol ``progress.stage``).

    Non-terminal jobs report the least advanced stage among their non-terminal cells
    (``queued`` < ``searching`` < ``fetching`` < ``delivering``); a succeeded job reports
    ``done``; other terminal jobs report their status word (reference §1.3).
    """
    status = status or job_status(cells)
    if status == JobStatus.SUCCEEDED:
        return "done"
    if status in TERMINAL_JOB_STATUSES:
        return str(status)
    return open_stage(c.stage for c in cells if not is_terminal(c.state)) or "queued"


def open_stage(stages: Iterable[str]) -> str | None:
    """The least advanced of the open cells' ``stages``; None when there is none.

    The one rule of the job-level stage: :func:`job_stage` shows it, and
    :func:`curaflow.ledger.cells.sync_job_stage` records it (``jobs.last_stage``,
    ``job.progress``). Order :data:`~curaflow.domain.cells.STAGE_ORDER`; a stage it does
    not know (written by a newer version) ranks as least advanced, and is shown as
    written; equal ranks go to the smaller name, so the answer never depends on the
    order the cells are read in.
    """
    return min(stages, key=lambda s: (STAGE_ORDER.get(s, 0), s), default=None)

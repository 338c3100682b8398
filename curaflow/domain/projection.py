"""Job status and stage derived from cells: the one rule both status readers use.

The workflow's ``status`` query and ``GET /jobs/{id}`` both call :func:`job_status` on
the same cell snapshots, so at any terminal state they agree (DESIGN.md decision 3).

Rules (reference §1.4, extended to jobs with several cells):

* any cell non-terminal: ``queued`` while every cell is still ``pending`` (the original's
  quirk: a claimed job whose cell has not reached ``selected`` reports ``queued``),
  otherwise ``running``;
* every cell terminal: the status follows the business status of the outcome
  (:func:`curaflow.domain.outcome.business_status`, its one owner) and one fact, whether
  the job was *stopped on purpose* — a cell ended ``cancelled_by_consumer`` or
  ``execution_terminated`` (:func:`stopped_on_purpose`):

  ==============================  =====================================================
  business status                 job status
  ==============================  =====================================================
  ``success``                     ``succeeded`` (every cell delivered: a cancel that
                                  arrived after that stopped nothing)
  ``partial_success``             ``cancelled`` when stopped on purpose (what landed is
                                  in ``error.detail.deliveries``), else ``succeeded``
  ``cancelled``                   ``cancelled``
  ``no_candidate``,               ``failed`` (``no_candidate``)
  ``duplicate_only``
  ``failed``                      ``expired`` when every system-failed cell ended for an
                                  expiry reason (``queued_too_long``,
                                  ``stalled_no_heartbeat``, ``execution_timeout``,
                                  ``step_paused``, ``pinned_build_unserved``:
                                  ``EXPIRY_REASONS``), else ``failed`` — a real
                                  failure outranks the cancel
  ==============================  =====================================================

  So a cancel decides the status once, for one target and many: a job the cancel
  stopped (any cell that had not delivered when it came) is ``cancelled``, whatever its
  other cells delivered — the protocol's cancel (reference §3: a cancelled job with a
  submitted cell answers ``cancelled``) — unless a system failure with nothing delivered
  makes it ``failed`` (§7.4: "unless a real failure coexists"). For a single cell this is
  exactly the original's per-cell mapping.

Pure module: imported by workflows through the sandbox pass-through.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import StrEnum

from curaflow.domain.cells import STAGE_ORDER, CellState, is_terminal
from curaflow.domain.models import CellSnapshot
from curaflow.domain.outcome import BusinessStatus, CellCategory, business_status, classify_cell
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


def stopped_on_purpose(cells: Sequence[CellSnapshot]) -> bool:
    """True when a cell of the job ended because the job was stopped on purpose: a
    consumer's cancel (``cancelled_by_consumer``) or an operator's terminate
    (``execution_terminated``), i.e. the cancel stopped something that had not delivered."""
    return any(classify_cell(c) == CellCategory.CANCELLED for c in cells)


def job_status(cells: Sequence[CellSnapshot]) -> JobStatus:
    """Derive the protocol job status from the job's cells (rules in the module doc).

    The one owner of a job's status under a cancel: every reader (``GET /jobs``, the
    cancel's answer, the terminal event, the ``status`` query, the outcome's search
    attribute, the execution's end) takes it from here. A terminal status follows
    :func:`~curaflow.domain.outcome.business_status` and :func:`stopped_on_purpose`: a
    cancelled job whose work reached a route is ``partial_success`` as business and
    ``cancelled`` as a job.
    """
    if not cells:
        return JobStatus.QUEUED
    if not all_terminal(cells):
        if all(c.state == CellState.PENDING for c in cells):
            return JobStatus.QUEUED
        return JobStatus.RUNNING
    verdict = business_status(cells)
    if verdict == BusinessStatus.FAILED:
        failed = _system_failed(cells)
        if failed and all(c.reason in EXPIRY_REASONS for c in failed):
            return JobStatus.EXPIRED
        return JobStatus.FAILED
    if verdict == BusinessStatus.CANCELLED or (verdict == BusinessStatus.PARTIAL_SUCCESS and stopped_on_purpose(cells)):
        return JobStatus.CANCELLED
    if verdict in (BusinessStatus.SUCCESS, BusinessStatus.PARTIAL_SUCCESS):
        return JobStatus.SUCCEEDED
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

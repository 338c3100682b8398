"""Cell classification, business status and the outcome record (reference §7).

Rules:

* classification precedence (§7.3): submitted → ``no_match`` (no_candidate) →
  duplicate → cancelled (failed + ``cancelled_by_consumer``) → ``delivery_failed``
  (a failure that originates in delivery) → ``executor_failed`` (any other failed) → other;
* business status (§7.4), with one deliberate fix: a duplicate cell is counted once.
  The original adds the number of ``duplicate_exhausted`` reasons to the number of
  ``duplicate`` cells, so a cell that is both is counted twice and an all-duplicate job
  is reported ``no_candidate``. Here a cell is *duplicate-like* when its state is
  ``duplicate`` or its reason is ``duplicate_exhausted``, and the job is
  ``duplicate_only`` when every non-submitted cell is duplicate-like. ``all_duplicates``
  (§7.2) uses the same test, so it is true exactly when the status is
  ``duplicate_only`` (the original tests the ``duplicate`` state only, and calls a job
  whose cells found nothing but already-delivered works ``duplicate_only`` with
  ``all_duplicates: false``);
* ``alertable`` is true only for ``failed``;
* what landed is never hidden (DESIGN.md decision 13): a cell that did not complete but
  whose work reached one of its routes (an intent ``delivered``) is *partially
  delivered*: counted in ``cells.partially_delivered``, every delivery of the job listed
  in the record's ``deliveries`` (:class:`~curaflow.domain.models.DeliveryReport`), and
  a job stopped on purpose (cancelled, terminated) after content went out is
  ``partial_success``, not ``cancelled`` with nothing out. A system failure stays
  ``failed`` (alertable) even when one of the cell's routes got the work: someone must
  act on the route that refused it;
* ``user_message`` is the business-status sentence followed by the message of the cell
  that explains it: the first system-failed cell, else the first cell without a work (a
  successful or cancelled job needs no second sentence). A cell that ended for what its
  search found says that first, from its tally (:mod:`curaflow.domain.tally`: what was
  found and what became of each work), then its reason's sentence; each reason's
  sentence says what happened and what to do (:mod:`curaflow.domain.reasons`).

Pure module: imported by workflows through the sandbox pass-through.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from curaflow.domain.cells import CellState, is_terminal
from curaflow.domain.models import CellSnapshot, DeliveryReport
from curaflow.domain.reasons import (
    CANCEL_REASONS,
    Origin,
    TerminalReason,
    parse_reason,
    reason_info,
    user_message,
)
from curaflow.domain.tally import cell_message

OUTCOME_VERSION = 2


class BusinessStatus(StrEnum):
    """Business meaning of a finished job; never drives scheduling (reference §5.1)."""

    SUCCESS = "success"
    PARTIAL_SUCCESS = "partial_success"
    NO_CANDIDATE = "no_candidate"
    DUPLICATE_ONLY = "duplicate_only"
    CANCELLED = "cancelled"
    FAILED = "failed"


class CellCategory(StrEnum):
    """The one category a cell is counted in (reference §7.3)."""

    SUBMITTED = "submitted"
    NO_MATCH = "no_match"
    DUPLICATE = "duplicate"
    CANCELLED = "cancelled"
    DELIVERY_FAILED = "delivery_failed"
    EXECUTOR_FAILED = "executor_failed"
    OTHER = "other"


BUSINESS_MESSAGES: dict[BusinessStatus, tuple[str, str]] = {
    BusinessStatus.SUCCESS: (
        "任务已完成，本轮内容已发布。",
        "The job completed and this round's content was published.",
    ),
    BusinessStatus.PARTIAL_SUCCESS: (
        "任务部分完成，部分内容已发布。",
        "The job partly completed; some content was published.",
    ),
    BusinessStatus.NO_CANDIDATE: (
        "本轮没有可发布的新作品，任务已正常结束。",
        "There was no new work to publish this round; the job finished normally.",
    ),
    BusinessStatus.DUPLICATE_ONLY: (
        "本轮没有可发布的新作品，任务已正常结束。",
        "There was no new work to publish this round; the job finished normally.",
    ),
    BusinessStatus.CANCELLED: (
        "本轮任务已取消，不会再发布任何内容。",
        "This round was cancelled; nothing more will be published.",
    ),
    BusinessStatus.FAILED: (
        # The remedy is the explaining reason's (never "retry later" for a failure a
        # retry cannot fix).
        "本轮任务失败。",
        "This round failed.",
    ),
}


def classify_cell(cell: CellSnapshot) -> CellCategory:
    """Return the single category of ``cell`` by the §7.3 precedence."""
    state = cell.state
    if state == CellState.SUBMITTED:
        return CellCategory.SUBMITTED
    if state == CellState.NO_CANDIDATE:
        return CellCategory.NO_MATCH
    if state == CellState.DUPLICATE:
        return CellCategory.DUPLICATE
    if state == CellState.FAILED:
        if cell.reason in CANCEL_REASONS:
            return CellCategory.CANCELLED
        if reason_info(cell.reason).origin == Origin.DELIVERY:
            return CellCategory.DELIVERY_FAILED
        return CellCategory.EXECUTOR_FAILED
    return CellCategory.OTHER


def cell_counts(cells: Sequence[CellSnapshot]) -> dict[str, Any]:
    """Count cells per category (§7.2 ``cells`` counts, ``all_duplicates`` included)."""
    counts: dict[str, Any] = {
        "total": len(cells),
        "submitted": 0,
        "no_match": 0,
        "duplicate": 0,
        "all_duplicates": False,
        "executor_failed": 0,
        "delivery_failed": 0,
        "cancelled": 0,
        "partially_delivered": 0,
    }
    for cell in cells:
        category = classify_cell(cell)
        if category != CellCategory.OTHER:
            counts[category.value] += 1
        if cell.state != CellState.SUBMITTED and cell.landed():
            counts["partially_delivered"] += 1
    non_submitted = [c for c in cells if c.state != CellState.SUBMITTED]
    counts["all_duplicates"] = bool(non_submitted) and all(_duplicate_like(c) for c in non_submitted)
    return counts


def _duplicate_like(cell: CellSnapshot) -> bool:
    return cell.state == CellState.DUPLICATE or cell.reason == TerminalReason.DUPLICATE_EXHAUSTED


def business_status(cells: Sequence[CellSnapshot]) -> BusinessStatus:
    """Derive the business status of a job from its cells (§7.4, duplicate counted once).

    Args:
        cells: every cell of the job; non-terminal cells count as neither submitted nor
            failed.
    """
    counts = cell_counts(cells)
    total = counts["total"]
    submitted = counts["submitted"]
    non_submitted = total - submitted
    system_failed = counts["executor_failed"] > 0 or counts["delivery_failed"] > 0
    if submitted > 0 and non_submitted == 0:
        return BusinessStatus.SUCCESS
    if submitted > 0:
        return BusinessStatus.PARTIAL_SUCCESS
    if non_submitted == 0:
        return BusinessStatus.SUCCESS
    if system_failed:
        return BusinessStatus.FAILED
    if counts["partially_delivered"] > 0:
        # Content went out before the job was stopped: never "nothing was published".
        return BusinessStatus.PARTIAL_SUCCESS
    if counts["cancelled"] > 0:
        return BusinessStatus.CANCELLED
    duplicates = sum(1 for c in cells if c.state != CellState.SUBMITTED and _duplicate_like(c))
    if duplicates == non_submitted:
        return BusinessStatus.DUPLICATE_ONLY
    return BusinessStatus.NO_CANDIDATE


def is_alertable(status: BusinessStatus | str) -> bool:
    """Only a system failure pages an operator (§7.4)."""
    return status == BusinessStatus.FAILED


def business_message(status: BusinessStatus | str, lang: str = "en") -> str:
    """User-facing sentence for a business status (``lang`` ``"en"`` or ``"zh"``)."""
    zh, en = BUSINESS_MESSAGES[BusinessStatus(status)]
    return zh if lang == "zh" else en


def job_deliveries(cells: Sequence[CellSnapshot]) -> list[DeliveryReport]:
    """Every delivery of a job's cells, in target then intent order."""
    return [report for cell in cells for report in cell.delivery_reports()]


def explaining_cell(
    cells: Sequence[CellSnapshot], status: BusinessStatus | str
) -> tuple[CellSnapshot, TerminalReason] | None:
    """The cell whose reason completes the outcome message of ``status``, with that reason.

    Returns:
        None for ``success`` and ``cancelled`` (the business sentence says it all);
        otherwise the first system-failed cell, else the first cell that is neither
        submitted nor cancelled (a cell ``no_candidate`` without a code counts as
        ``no_candidate``, one ``duplicate`` as ``duplicate_exhausted``); None when no
        cell carries one.
    """
    if status in (BusinessStatus.SUCCESS, BusinessStatus.CANCELLED):
        return None
    ranked = sorted(
        (c for c in cells if c.state != CellState.SUBMITTED and is_terminal(c.state)),
        key=lambda c: classify_cell(c) not in (CellCategory.EXECUTOR_FAILED, CellCategory.DELIVERY_FAILED),
    )
    for cell in ranked:
        if classify_cell(cell) == CellCategory.CANCELLED:
            continue
        if cell.reason is not None:
            return cell, parse_reason(cell.reason)
        if cell.state == CellState.NO_CANDIDATE:
            return cell, TerminalReason.NO_CANDIDATE
        if cell.state == CellState.DUPLICATE:
            return cell, TerminalReason.DUPLICATE_EXHAUSTED
    return None


def explaining_reason(cells: Sequence[CellSnapshot], status: BusinessStatus | str) -> TerminalReason | None:
    """The terminal reason whose sentence completes the outcome message of ``status``
    (:func:`explaining_cell`'s reason)."""
    found = explaining_cell(cells, status)
    return found[1] if found is not None else None


def outcome_message(cells: Sequence[CellSnapshot], status: BusinessStatus | str, lang: str = "en") -> str:
    """The outcome's user message: the business sentence, then the explaining cell's.

    The explaining cell's message (:func:`curaflow.domain.tally.cell_message`) is, for a
    cell that ended for what its search found, the sentence of its tally — what the
    search found and what became of each work — then its reason's; for any other cell
    its reason's sentence.

    Args:
        cells: every cell of the job.
        status: the job's business status.
        lang: ``"en"`` or ``"zh"``.
    """
    message = business_message(status, lang)
    found = explaining_cell(cells, status)
    if found is None:
        return message
    cell, reason = found
    explained = cell_message(cell.state, reason, cell.candidate_report, lang, held=cell.held_by) or user_message(
        reason, lang
    )
    return f"{message}{'' if lang == 'zh' else ' '}{explained}"


def ledger_status(cells: Sequence[CellSnapshot]) -> str:
    """The job's ledger status (reference §5.1 ``deriveSlotStatus``).

    Returns:
        ``pending`` (no cells), ``running`` (any cell non-terminal), ``success`` (all
        submitted), ``partial`` (some submitted or partially delivered) or ``failed``.
    """
    if not cells:
        return "pending"
    if any(not is_terminal(c.state) for c in cells):
        return "running"
    submitted = sum(1 for c in cells if c.state == CellState.SUBMITTED)
    if submitted == len(cells):
        return "success"
    if submitted or any(c.landed() for c in cells):
        return "partial"
    return "failed"


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat().replace("+00:00", "Z")


def build_outcome_record(
    *,
    job_id: str,
    job_type: str,
    schedule_id: str | None,
    occurrence_at_ms: int | None,
    occurrence_date: str | None,
    started_at_ms: int | None,
    completed_at_ms: int | None,
    cells: Sequence[CellSnapshot],
) -> dict[str, Any]:
    """Build the ``schedule.outcome`` record, ``outcome_version`` 2 (reference §7.2).

    Args:
        job_id: the job (the original's ``slot_id``; both keys are written).
        job_type: the job's type (its Task's ``job_type``; curaflow's addition to §7.2).
        schedule_id: the plan or schedule that owns the job.
        occurrence_at_ms / started_at_ms / completed_at_ms: epoch ms (UTC) or None.
        occurrence_date: ``YYYY-MM-DD`` in the plan's time zone, or None.
        cells: every cell, terminal.

    Returns:
        A JSON-ready dict; ``duration_ms`` only when both ends are known, floored at 0.
    """
    status = business_status(cells)
    record: dict[str, Any] = {
        "event": "schedule.outcome",
        "outcome_version": OUTCOME_VERSION,
        "schedule_id": schedule_id,
        "slot_id": job_id,
        "job_id": job_id,
        "job_type": job_type,
    }
    if occurrence_at_ms is not None:
        record["occurrence_at"] = _iso(occurrence_at_ms)
    record["occurrence_date"] = occurrence_date
    record["status"] = ledger_status(cells)
    record["business_status"] = status.value
    record["alertable"] = is_alertable(status)
    record["user_message"] = {"zh": outcome_message(cells, status, "zh"), "en": outcome_message(cells, status)}
    if started_at_ms is not None and completed_at_ms is not None:
        record["duration_ms"] = max(0, completed_at_ms - started_at_ms)
    targets = []
    for cell in cells:
        targets.append(
            {
                "target_id": cell.target_id,
                "status": cell.state.value,
                "work_id": cell.work_id,
                "error": None if cell.state == CellState.SUBMITTED else cell.reason_message,
                "terminal_reason_code": cell.reason,
                "terminal_reason_message": cell.reason_message,
                "candidate_report": cell.candidate_report.model_dump() if cell.candidate_report else None,
                # what held it when the job ended (curaflow.domain.holds), when something did
                **({"held_by": cell.held_by.model_dump()} if cell.held_by is not None else {}),
            }
        )
    record["cells"] = {**cell_counts(cells), "targets": targets}
    record["deliveries"] = [d.model_dump() for d in job_deliveries(cells)]
    return record

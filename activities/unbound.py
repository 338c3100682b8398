"""What a cell that bound nothing becomes: a wider pass, or its end with the reason its tally gives.

The one sequence both source steps end a cell with when no work could be bound — the
``search`` half when its scan left no candidate it could bind, the ``fetch`` half when
every stored candidate turned out unavailable:

1. another fallback pass, only when it is wider than this one
   (:func:`~curaflow.domain.fallback.another_pass`: never after a pass that exhausted
   the source or reached ``max_examined``); the cell stays ``pending`` and the workflow
   runs the next pass (``retry_stage``);
2. else the cell ends at once with the reason its tally gives
   (:func:`~curaflow.domain.verdicts.no_candidate_verdict`, its state
   :func:`~curaflow.domain.verdicts.no_candidate_state`) and a message saying what the
   search found (:func:`~curaflow.domain.tally.cell_message`).

Either way the step ends here, in the caller's transaction (the job row already locked
by the binding that found nothing), with the cell's lease released.
"""

from __future__ import annotations

import asyncpg
from temporalio import activity

from curaflow.domain.fallback import another_pass
from curaflow.domain.messages import CellUpdate, TargetSpec
from curaflow.domain.models import CandidateReport, CellSnapshot
from curaflow.domain.reasons import TerminalReason
from curaflow.domain.tally import DUPLICATE_WORDS, cell_message
from curaflow.domain.verdicts import no_candidate_state, no_candidate_verdict
from curaflow.ledger import cells as ledger


async def end_unbound(
    conn: asyncpg.Connection,
    job_id: str,
    target: TargetSpec,
    cell: CellSnapshot,
    *,
    fallback_pass: int,
    max_passes: int,
    max_examined: int,
) -> CellUpdate:
    """End the step of a ``pending`` cell that bound nothing (module doc).

    Args:
        conn: a connection inside the transaction that holds the job row lock.
        cell: the cell as the binding left it (its ``candidate_report``: the tally).
        fallback_pass / max_passes: the pass that just ended (0-based) and the passes allowed.
        max_examined: the source instance's ``max_examined``.

    Returns:
        ``pending`` with ``retry_stage`` (another pass), or the ended cell.

    Raises:
        ApplicationError: never; an unknown cell is curaflow's bug (``AssertionError``).
    """
    report = cell.candidate_report or CandidateReport()
    if another_pass(
        fallback_pass=fallback_pass,
        max_passes=max_passes,
        scan_limit=target.scan_limit,
        report=report,
        max_examined=max_examined,
    ):
        await ledger.set_fallback_pass(conn, job_id, target.target_id, fallback_pass + 1)
        return CellUpdate(cell=cell, retry_stage=True)
    reason = no_candidate_verdict(report, max_examined=max_examined)
    state = no_candidate_state(reason)
    ended = await ledger.finish_cell(
        conn, job_id, target.target_id, state, reason, cell_message(state, reason, report), locked=True
    )
    assert ended is not None
    _log_exhaustion(job_id, target.target_id, fallback_pass, reason, report)
    return CellUpdate(cell=ended)


def _log_exhaustion(
    job_id: str, target_id: str, fallback_pass: int, reason: TerminalReason, report: CandidateReport
) -> None:
    duplicates = sum(report.reasons.get(word, 0) for word in DUPLICATE_WORDS)
    activity.logger.info(
        "candidate_exhaustion",
        extra={
            "job_id": job_id,
            "target_id": target_id,
            "stage": fallback_pass,
            "reason": str(reason),
            "searched": report.fetched,
            "duplicates": duplicates,
            "filtered": report.rejected - duplicates,
            "exhausted": report.exhausted,
        },
    )

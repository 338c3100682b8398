"""The reason of a cell still open when its job finishes: why the job finishes
(:class:`FinishCause`), the failure the workflow saw, a recorded cancel."""

from __future__ import annotations

from enum import StrEnum

from curaflow.domain.cells import CellStage, CellState
from curaflow.domain.reasons import TerminalReason, parse_reason
from curaflow.domain.verdicts.failures import StepFailure, ended_by_deadline, failure_reason, operator_changed_options

R = TerminalReason


class FinishCause(StrEnum):
    """Why a job is being finished.

    ``completed`` / ``cancelled`` / ``deadline`` are the workflow's (through the
    ``finish`` activity); the others are the reconciler's, for jobs no workflow can
    finish (DESIGN.md decision 13).
    """

    COMPLETED = "completed"  # every cell task ended on its own
    CANCELLED = "cancelled"  # a consumer cancel, by any path
    DEADLINE = "deadline"  # the job's deadline passed
    QUEUED_TOO_LONG = "queued_too_long"  # admitted, never started within the queued budget
    STALLED = "stalled"  # started, no heartbeat within the stall budget, execution running
    TERMINATED = "terminated"  # an operator terminated the execution
    # Temporal terminated the execution itself: its history passed a limit (2026-12-07)
    HISTORY_LIMIT = "history_limit"
    DELETED = "deleted"  # an operator deleted the running execution: Temporal knows no run of the job
    TIMED_OUT = "timed_out"  # Temporal closed the execution at its execution timeout
    # Past the deadline, the execution pinned to a build no worker of which took its workflow
    # task, waiting since before the deadline (2026-12-07; ``deadline`` before): budget_cause
    PINNED_BUILD_UNSERVED = "pinned_build_unserved"
    WORKFLOW_FAILED = "workflow_failed"  # the execution failed (or closed without finishing)


#: Causes a workflow finishes with; it saw which barrier came first, so a cancel the
#: ledger recorded after that does not change its verdicts.
WORKFLOW_CAUSES = frozenset({FinishCause.COMPLETED, FinishCause.CANCELLED, FinishCause.DEADLINE})


def cancel_stopped(cause: FinishCause | str, cancel_requested_at_ms: int | None, closed_at_ms: int | None) -> bool:
    """Whether the consumer cancel the ledger holds is what stopped a job finished for
    ``cause`` (the ``cancel_requested`` of :func:`cell_verdict`).

    A workflow's cause already says which barrier came first (:data:`WORKFLOW_CAUSES`):
    never. A cause the reconciler found — a budget, or Temporal's close of the execution
    (``terminated``, ``timed_out``, ``workflow_failed``) — is the cancel's only when the
    cancel was recorded before the execution closed: a cancel recorded after it (a
    consumer's ``POST /jobs/{id}/cancel`` of a job whose run an operator had terminated
    or Temporal had timed out) stopped nothing, and the job ends as the close made it end
    (``execution_terminated``, ``execution_timeout``: expired, not cancelled). Until
    2026-12-05 any recorded cancel turned those reasons into ``cancelled_by_consumer``.
    A deleted execution (``deleted``) leaves no close time: a recorded cancel is taken as
    the stop, as the reconciler's rule for a cancel no workflow can act on converges such
    a job (``cancelled``).

    Args:
        cause: why the job finishes.
        cancel_requested_at_ms: when the ledger recorded the consumer cancel (epoch ms
            UTC), None when it holds none.
        closed_at_ms: when Temporal closed the execution (epoch ms UTC, its close time),
            for a cause read from that close; None when the cause is no close (a budget:
            the reconciler stops the job now, after any recorded cancel).

    Returns:
        True when the recorded cancel is the stop's reason.
    """
    if cancel_requested_at_ms is None or FinishCause(cause) in WORKFLOW_CAUSES:
        return False
    return closed_at_ms is None or cancel_requested_at_ms <= closed_at_ms


def waits_for_sends(cause: FinishCause | str, *, by_workflow: bool) -> bool:
    """Whether a job finished for ``cause`` waits for a send of it still out from a live
    attempt (an intent ``sending`` whose send lease has not lapsed, before the job's
    deadline: :func:`curaflow.ledger.finish.finish_job`) before it ends.

    The workflow's finish for ``completed`` or ``cancelled``, a consumer cancel recorded
    or not: the workflow stopped waiting for a step whose attempt still runs (an
    operator's ``temporal activity update-options`` that timed it out, a step completed
    or failed by hand; the attempt heard "not found" and lets its send end by its own
    bounds, which nothing cuts) — that send's answer is the job's truth and comes within
    the send's own bounds. Ended before it, the job said ``unknown`` and the late 200 then
    made the intent ``delivered`` (until 2026-12-05 a consumer cancel, recorded during the
    wait or the workflow's own, still ended the job so). A cancel's own steps were
    cancelled and waited for (their sends cut within ``CANCEL_GRACE_S``): no send of them
    is out then, and the cancel waits for nothing else. Never at the deadline: the outbound
    layer cuts every send there, so the job ends at once. Never for the reconciler
    (``by_workflow`` False): it finishes a job only once no attempt holds a live cell
    lease (:data:`curaflow.ledger.reconciler.convergence.NO_LIVE_ATTEMPT`), which a sending
    attempt's beats keep.

    Args:
        cause: why the job finishes.
        by_workflow: the finish is the workflow's (the ``finish`` activity), not the
            reconciler's.
    """
    return by_workflow and FinishCause(cause) in (FinishCause.COMPLETED, FinishCause.CANCELLED)


#: Reasons that mean "stopped", not "failed on its own": a recorded consumer cancel is
#: what stopped the cell, so the cancel is its reason.
STOPPED_REASONS: frozenset[TerminalReason] = frozenset(
    {
        R.QUEUED_TOO_LONG,
        R.STALLED_NO_HEARTBEAT,
        R.EXECUTION_TIMEOUT,
        R.DELIVERY_ABANDONED,
        R.EXECUTION_TERMINATED,
        R.EXECUTION_DELETED,
        R.HISTORY_LIMIT_EXCEEDED,
        R.PINNED_BUILD_UNSERVED,
    }
)

#: The default reason of an open cell for each finish cause (no failure fact).
CAUSE_REASONS: dict[FinishCause, TerminalReason] = {
    FinishCause.CANCELLED: R.CANCELLED_BY_CONSUMER,
    FinishCause.DEADLINE: R.EXECUTION_TIMEOUT,
    FinishCause.QUEUED_TOO_LONG: R.QUEUED_TOO_LONG,
    FinishCause.STALLED: R.STALLED_NO_HEARTBEAT,
    FinishCause.TERMINATED: R.EXECUTION_TERMINATED,
    FinishCause.HISTORY_LIMIT: R.HISTORY_LIMIT_EXCEEDED,
    FinishCause.DELETED: R.EXECUTION_DELETED,
    FinishCause.TIMED_OUT: R.EXECUTION_TIMEOUT,
    FinishCause.PINNED_BUILD_UNSERVED: R.PINNED_BUILD_UNSERVED,
    FinishCause.WORKFLOW_FAILED: R.INTERNAL_ERROR,
}


def cell_verdict(
    *,
    state: str,
    stage: str,
    cause: FinishCause | str,
    failure: StepFailure | None = None,
    reported_reason: str | None = None,
    cancel_requested: bool = False,
) -> TerminalReason:
    """The terminal reason of a cell that is still open when its job finishes.

    Args:
        state: the cell's ledger state (non-terminal).
        stage: the cell's ledger stage; ``queued`` means no step of it ever started.
        cause: why the job finishes (:class:`FinishCause`).
        failure: what the workflow saw of the cell's failed step, if one failed.
        reported_reason: a reason decided by a workflow started before this module
            existed (its ``finish`` input carried reasons, not facts); applied as given.
        cancel_requested: the ledger holds a consumer cancel of the job.

    Returns:
        The reason. Precedence: a step timed out by an operator's change of its options
        (:func:`~curaflow.domain.verdicts.failures.operator_changed_options`) is
        ``step_options_changed`` (owner ``operator``; ``internal_error``, "read the
        worker's log", until 2026-12-06); a step Temporal held paused by an operator
        when the deadline stopped it (``StepFailure.paused``) is ``step_paused`` (owner
        ``operator``; ``execution_timeout``, "retry with a longer deadline_ms", until
        2026-12-06); then the failure's own reason (a real failure that ended the
        cell before the job stopped stays its reason) — except that **the deadline owns
        every failure that happens after it passed**: when the job finishes for its
        deadline, a failure that ended after the workflow stopped the step, or a
        Temporal timeout of a step's budget (:func:`ended_by_deadline`), is the
        deadline's, and likewise **a cancel owns a failure that ended after it stopped
        the step** (retry state ``CANCEL_REQUESTED``: only the cancel kept Temporal from
        retrying it — a send whose own timeout fired within the cancel's grace); else
        the cause's default (a *stall* of a cell whose work was already
        handed to its routes is ``delivery_abandoned``, reference §5.4 and §8); then a
        cancel recorded in the ledger turns a *stopped* reason (:data:`STOPPED_REASONS`)
        into ``cancelled_by_consumer``; and ``queued_too_long`` by a cause, for a cell that
        already ran a step, becomes ``stalled_no_heartbeat`` (a step that timed out
        waiting in its queue stays ``queued_too_long``: it was waiting, not held).
    """
    cause = FinishCause(cause)
    in_delivery = state in (CellState.ARTIFACT_READY, CellState.DELIVERY_PENDING)
    reason: TerminalReason | None = None
    if reported_reason is not None:
        reason = parse_reason(reported_reason)
    elif failure is not None and operator_changed_options(failure, cause):
        reason = R.STEP_OPTIONS_CHANGED  # the operator's timeout, not curaflow's (2026-12-06)
    elif failure is not None and failure.paused and cause == FinishCause.DEADLINE:
        reason = R.STEP_PAUSED  # Temporal held it paused by an operator when the deadline came (2026-12-06)
    elif failure is not None and not (
        (cause == FinishCause.DEADLINE and ended_by_deadline(failure))
        or (cause == FinishCause.CANCELLED and failure.retry_state == "CANCEL_REQUESTED")
    ):
        reason = failure_reason(failure)
    if reason is None:
        if cause == FinishCause.COMPLETED:
            # A cell task ended without a terminal transition or a failure: only a
            # delivery can stop like that (its intents were never confirmed).
            reason = R.DELIVERY_ABANDONED if in_delivery else R.INTERNAL_ERROR
        elif cause == FinishCause.STALLED and in_delivery:
            # A delivery already handed off keeps its own lifecycle (reference §8: the
            # stall sweep leaves delivery cells alone; §5.4: the rollup abandons them).
            reason = R.DELIVERY_ABANDONED
        else:
            reason = CAUSE_REASONS[cause]
    if (cancel_requested or cause == FinishCause.CANCELLED) and reason in STOPPED_REASONS:
        reason = R.CANCELLED_BY_CONSUMER
    queued_step = failure is not None and failure.timeout_type == "SCHEDULE_TO_START"
    if reason == R.QUEUED_TOO_LONG and stage != CellStage.QUEUED and not queued_step:
        reason = R.STALLED_NO_HEARTBEAT
    return reason

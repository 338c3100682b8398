"""The one decider of a cell's terminal reason, of step retryability and of attempt budgets.

DESIGN.md decision 13 ("one owner per decision"). Everything that can end a cell hands
its *facts* to this module and applies the answer; nothing else maps failures to reasons:

* the workflow records what it saw of a failed step as a :class:`StepFailure` (raw facts
  from Temporal: the failure kind, the ``ApplicationError`` type, the timeout type, the
  retry state) and, when it finishes, why it is finishing (:class:`FinishCause`);
* the reconciler, for jobs no workflow can finish, only knows a cause (the execution was
  terminated, never started, lost its worker…);
* the ``finish`` step (:mod:`curaflow.ledger.finish`) calls :func:`cell_verdict` with
  those facts plus what the ledger knows of the cell (its stage, a recorded consumer
  cancel) and writes the answer, never rewriting it;
* the ``deliver`` activity asks :func:`delivery_verdict` what a failed send means for
  the intent and the cell;
* the ``search`` and ``fetch`` activities ask :func:`no_candidate_verdict` why a cell that
  bound nothing ends (a scan cap is not exhaustion).

Retryability of an activity failure comes from the reason catalogue
(:data:`curaflow.domain.reasons.REASONS`): :data:`NON_RETRYABLE_TYPES`.

**Attribution before judgement**: every failure arrives here as a reason code,
and the catalogue names the reason's one owner (:class:`~curaflow.domain.reasons.Owner`:
work, route, source, account, curaflow; :func:`owner_of`). The verdicts are judged from
that owner: only a failure owned by the *work* refuses the work for good on a route; a
*route*-owned failure ends the cell (alertable) and leaves the work free for a later job;
a final failure after part of the work was posted is *partial*. Routes and the source
only classify an answer into a reason; they never decide what it means.

Pure module: imported by workflows through the sandbox pass-through. Table-tested in
``tests/unit/test_verdicts.py``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel

from curaflow.domain.cells import CellStage, CellState
from curaflow.domain.models import CandidateReport
from curaflow.domain.reasons import (
    REASONS,
    Origin,
    Owner,
    TerminalReason,
    no_candidate_reason,
    parse_reason,
    reason_info,
)

R = TerminalReason
Step = Literal["search", "fetch", "acquire", "deliver"]


class FailureKind(StrEnum):
    """What kind of failure Temporal reported for a step."""

    APPLICATION = "application"  # the activity raised an ApplicationError (typed by reason code)
    TIMEOUT = "timeout"  # a Temporal timeout (see StepFailure.timeout_type)
    CANCELLED = "cancelled"  # the activity was cancelled (by this workflow)
    OTHER = "other"  # anything else Temporal reported (server error, terminated activity …)


class StepFailure(BaseModel):
    """Facts about a step of a cell that ended in a failure, as the workflow saw them.

    Attributes:
        step: ``acquire`` (``search`` then ``fetch``) | ``deliver`` (``search`` / ``fetch``
            for executions started before core v2).
        kind: the failure kind.
        error_type: the ``ApplicationError.type`` (a reason code) for ``application``.
        non_retryable: the ``ApplicationError`` was non-retryable.
        timeout_type: for ``timeout``: ``SCHEDULE_TO_START`` | ``START_TO_CLOSE`` |
            ``HEARTBEAT`` | ``SCHEDULE_TO_CLOSE`` (Temporal's ``TimeoutType`` names).
        retry_state: Temporal's ``RetryState`` name of the activity when it gave up
            (``MAXIMUM_ATTEMPTS_REACHED``, ``NON_RETRYABLE_FAILURE``, ``TIMEOUT`` …).
        first_step: the step was the cell's first (nothing of the cell ran before).
        route: the route of a ``deliver`` step.
        message: the failure's message (diagnostics only; never shown to consumers).
    """

    step: Step
    kind: FailureKind
    error_type: str | None = None
    non_retryable: bool = False
    timeout_type: str | None = None
    retry_state: str | None = None
    first_step: bool = False
    route: str | None = None
    message: str = ""

    @property
    def owner(self) -> Owner:
        """Who caused the failure: the owner of its reason (:func:`owner_of`)."""
        reason = failure_reason(self)
        return owner_of(reason) if reason is not None else Owner.CURAFLOW


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
    TIMED_OUT = "timed_out"  # Temporal closed the execution at its execution timeout
    WORKFLOW_FAILED = "workflow_failed"  # the execution failed (or closed without finishing)


#: Reasons that mean "stopped", not "failed on its own": a recorded consumer cancel is
#: what stopped the cell, so the cancel is its reason.
STOPPED_REASONS: frozenset[TerminalReason] = frozenset(
    {R.QUEUED_TOO_LONG, R.STALLED_NO_HEARTBEAT, R.EXECUTION_TIMEOUT, R.DELIVERY_ABANDONED, R.EXECUTION_TERMINATED}
)

#: Reasons that mean the retry budget is spent: final for the step by definition.
EXHAUSTION_REASONS: frozenset[TerminalReason] = frozenset({R.DELIVERY_ABANDONED})

#: ``ApplicationError`` types Temporal must not retry: every reason the catalogue marks
#: not retryable, plus the exhaustion reasons.
NON_RETRYABLE_TYPES: list[str] = sorted(
    {str(r) for r, info in REASONS.items() if not info.retryable} | {str(r) for r in EXHAUSTION_REASONS}
)

#: The default reason of an open cell for each finish cause (no failure fact).
CAUSE_REASONS: dict[FinishCause, TerminalReason] = {
    FinishCause.CANCELLED: R.CANCELLED_BY_CONSUMER,
    FinishCause.DEADLINE: R.EXECUTION_TIMEOUT,
    FinishCause.QUEUED_TOO_LONG: R.QUEUED_TOO_LONG,
    FinishCause.STALLED: R.STALLED_NO_HEARTBEAT,
    FinishCause.TERMINATED: R.EXECUTION_TERMINATED,
    FinishCause.TIMED_OUT: R.EXECUTION_TIMEOUT,
    FinishCause.WORKFLOW_FAILED: R.INTERNAL_ERROR,
}


def failure_reason(failure: StepFailure) -> TerminalReason | None:
    """The reason a failed step gives its cell, or None when the failure is a cancellation
    (the finish cause then decides: the workflow cancelled the step itself).

    Rules (reference §5.4, §8):

    * ``application``: the error type is the reason; a ``deliver`` whose retries ran out
      (``MAXIMUM_ATTEMPTS_REACHED`` on a retryable type) is ``delivery_abandoned``;
    * ``timeout``: a ``deliver`` that timed out is ``delivery_abandoned``; the first
      ``acquire`` (or ``search``) of a cell that never left its queue is
      ``queued_too_long``; anything else stopped making progress: ``stalled_no_heartbeat``;
    * ``other``: ``internal_error``.
    """
    if failure.kind == FailureKind.CANCELLED:
        return None
    if failure.kind == FailureKind.APPLICATION:
        if (
            failure.step == "deliver"
            and failure.retry_state == "MAXIMUM_ATTEMPTS_REACHED"
            and not failure.non_retryable
        ):
            return R.DELIVERY_ABANDONED
        return parse_reason(failure.error_type)
    if failure.kind == FailureKind.TIMEOUT:
        if failure.step == "deliver":
            return R.DELIVERY_ABANDONED
        first_source_step = failure.step in ("search", "acquire") and failure.first_step
        if failure.timeout_type == "SCHEDULE_TO_START" and first_source_step:
            return R.QUEUED_TOO_LONG
        return R.STALLED_NO_HEARTBEAT
    return R.INTERNAL_ERROR


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
        The reason. Precedence: the failure's own reason (a real failure that ended the
        cell before the job stopped stays its reason); else the cause's default; then a
        cancel recorded in the ledger turns a *stopped* reason (:data:`STOPPED_REASONS`)
        into ``cancelled_by_consumer``; and ``queued_too_long`` for a cell that already
        ran a step becomes ``stalled_no_heartbeat`` (it was not waiting to start).
    """
    cause = FinishCause(cause)
    reason: TerminalReason | None = None
    if reported_reason is not None:
        reason = parse_reason(reported_reason)
    elif failure is not None:
        reason = failure_reason(failure)
    if reason is None:
        if cause == FinishCause.COMPLETED:
            # A cell task ended without a terminal transition or a failure: only a
            # delivery can stop like that (its intents were never confirmed).
            in_delivery = state in (CellState.ARTIFACT_READY, CellState.DELIVERY_PENDING)
            reason = R.DELIVERY_ABANDONED if in_delivery else R.INTERNAL_ERROR
        else:
            reason = CAUSE_REASONS[cause]
    if (cancel_requested or cause == FinishCause.CANCELLED) and reason in STOPPED_REASONS:
        reason = R.CANCELLED_BY_CONSUMER
    if reason == R.QUEUED_TOO_LONG and stage != CellStage.QUEUED:
        reason = R.STALLED_NO_HEARTBEAT
    return reason


class DeliveryVerdict(BaseModel):
    """What a failed send means (:func:`delivery_verdict`).

    Attributes:
        reason: the cell's reason if the failure is final.
        final: the cell ends now (no further attempt).
        unknown: the request may have landed, or part of the work already did, and the
            route may not re-send it: the intent ends ``unknown`` (it keeps the work
            blocked on that route, so neither a later job nor ``curaflow refusals
            clear`` posts it again).
        outcome: the metric label: ``unknown`` | ``partial`` | ``rejected`` |
            ``abandoned`` | ``failed``.
        owner: who caused the failure (:class:`~curaflow.domain.reasons.Owner`).
        remember_refusal: the work itself can never be sent to this route (owner
            ``work``): the refusal is remembered per (route, work) so later jobs pick
            another work (docs/routes.md "Refusals are remembered"). A route-owned failure never is: the work is
            not used up.
        hold: the route refused the request for good and the refusal is the route's
            (owner ``route``: its destination, rights or limits, or an answer no route
            recognises as the work's): the work is not used up, but it is *held back*
            from that route for a while (:func:`curaflow.ledger.remembered.hold_work`),
            so the next job tries another work instead of sending the same one first for
            ever; the hold ends by itself (a later job sends the work again) or with
            ``curaflow routes resume``.
    """

    reason: TerminalReason
    final: bool
    unknown: bool
    outcome: Literal["unknown", "partial", "rejected", "abandoned", "failed"]
    owner: Owner | None = None
    remember_refusal: bool = False
    hold: bool = False


def owner_of(reason: str | None) -> Owner:
    """Who caused a failure with ``reason`` (the catalogue's owner; ``curaflow`` for a
    reason that is not a failure's or is unknown: nothing else can be blamed)."""
    return reason_info(reason).owner or Owner.CURAFLOW


#: Reasons of a route refusing the work itself (remembered per (route, work)): the
#: delivery reasons whose owner is the work.
REFUSAL_REASONS: frozenset[TerminalReason] = frozenset(
    r for r, info in REASONS.items() if info.owner == Owner.WORK and info.origin == Origin.DELIVERY
)


def delivery_verdict(
    *,
    reason: str,
    permanent: bool,
    ambiguous: bool,
    resend_safe: bool,
    attempt: int,
    max_attempts: int,
    posted: bool = False,
) -> DeliveryVerdict:
    """Decide what a failed delivery attempt means (reference §6; DESIGN.md decision 6),
    judged from the failure's owner (:func:`owner_of`).

    Args:
        reason: the route's reason code for the failure (it names the owner).
        permanent: another attempt cannot succeed (a refusal, a limit).
        ambiguous: the request may have reached the route (a timeout after sending).
        resend_safe: the route tolerates a re-send (stable idempotency key, or
            ``on_ambiguous = "retry"``).
        attempt / max_attempts: this attempt's number (1-based) and the budget
            (:func:`attempt_budget`).
        posted: part of the work is already at the route (a confirmed album or message
            of a multi-part send, or items of a partly posted album).

    Rules: an ambiguous send on a route that may not re-send → ``delivery_unknown``; a
    final failure after part of the work was posted → ``delivery_partial`` (intent
    ``unknown``: the route keeps what it has, nothing is refused, nothing is posted
    again); a
    permanent failure → ``rejected``, remembered as a refusal only when its owner is the
    work, the work held back from the route for a while when its owner is the route
    (``hold``); the last attempt of a retryable failure → ``delivery_abandoned``.
    """
    owner = owner_of(reason)
    if ambiguous and not resend_safe:
        return DeliveryVerdict(
            reason=R.DELIVERY_UNKNOWN, final=True, unknown=True, outcome="unknown", owner=Owner.ROUTE
        )
    if permanent or attempt >= max_attempts:
        final_reason = parse_reason(reason) if permanent else R.DELIVERY_ABANDONED
        if posted:
            return DeliveryVerdict(
                reason=R.DELIVERY_PARTIAL, final=True, unknown=True, outcome="partial", owner=Owner.ROUTE
            )
        if permanent:
            return DeliveryVerdict(
                reason=final_reason,
                final=True,
                unknown=False,
                outcome="rejected",
                owner=owner,
                remember_refusal=final_reason in REFUSAL_REASONS,
                hold=owner == Owner.ROUTE,
            )
        return DeliveryVerdict(reason=final_reason, final=True, unknown=False, outcome="abandoned", owner=owner)
    return DeliveryVerdict(reason=parse_reason(reason), final=False, unknown=False, outcome="failed", owner=owner)


def attempt_budget(step: Step, *, delivery_max_attempts: int, source_max_attempts: int) -> int:
    """Attempts Temporal makes of one step: ``deliver`` gets the delivery budget, a source
    step (``acquire``, ``search``, ``fetch``) the source budget (reference §8)."""
    return delivery_max_attempts if step == "deliver" else source_max_attempts


def no_candidate_verdict(report: CandidateReport | None, *, max_examined: int) -> TerminalReason:
    """The reason of a cell whose scan bound no work it could use.

    Args:
        report: the candidate report of the scan that ended (None: no scan report).
        max_examined: most works one scan examines (``pixiv.max_examined``).

    Returns:
        ``scan_capped`` when the scan stopped at ``max_examined`` while the source had
        more (``exhausted`` false): what it saw says nothing about the rest, and the
        target's frontier makes the next job go on from there. Otherwise the
        classification of what it saw (:func:`~curaflow.domain.reasons.no_candidate_reason`:
        ``duplicate_exhausted`` / ``filter_exhausted`` / ``no_candidate``).
    """
    if report is None:
        return R.NO_CANDIDATE
    if not report.exhausted and report.fetched >= max_examined > 0:
        return R.SCAN_CAPPED
    return no_candidate_reason(report.fetched, report.reasons)

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
    NO_CONTENT_REASONS,
    REASONS,
    Origin,
    Owner,
    TerminalReason,
    parse_reason,
    reason_info,
)
from curaflow.domain.tally import Tally

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
    * ``timeout``: a ``deliver`` that timed out is ``delivery_abandoned``; a source step
      (``acquire``, ``search``, ``fetch``) that waited in its queue past its
      ``schedule_to_start`` budget — the cell's first step, a retry of it after a fault,
      a later pass — is ``queued_too_long``: no worker held it, so it never stalled
      (stall budgets count only time a step was held by a worker); a held step that
      stopped beating (``HEARTBEAT``, ``START_TO_CLOSE`` …) is ``stalled_no_heartbeat``;
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
        if failure.timeout_type == "SCHEDULE_TO_START":
            return R.QUEUED_TOO_LONG
        return R.STALLED_NO_HEARTBEAT
    return R.INTERNAL_ERROR


#: Reasons of a step's budget running out (a Temporal timeout of a search or fetch).
BUDGET_REASONS: frozenset[TerminalReason] = frozenset({R.QUEUED_TOO_LONG, R.STALLED_NO_HEARTBEAT})


def ended_by_deadline(failure: StepFailure) -> bool:
    """Whether a failed step of a job that finished for its deadline is the deadline's.

    True when the step's attempt failed after the workflow asked to stop it
    (``retry_state`` ``CANCEL_REQUESTED``: Temporal took no retry because a cancel was
    pending — at the deadline, wherever the attempt was: a download the deadline cut,
    a decode, a ledger write), or when a Temporal timeout of the step's budget
    (:data:`BUDGET_REASONS`) stands beside the deadline: both say time ran out, and the
    deadline wins. A delivery that timed out keeps ``delivery_abandoned``, and an
    application failure Temporal reported before any stop keeps its reason.
    """
    if failure.retry_state == "CANCEL_REQUESTED":
        return True
    return failure.kind == FailureKind.TIMEOUT and failure_reason(failure) in BUDGET_REASONS


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
        cell before the job stopped stays its reason) — except that **the deadline owns
        every failure that happens after it passed**: when the job finishes for its
        deadline, a failure that ended after the workflow stopped the step, or a
        Temporal timeout of a step's budget (:func:`ended_by_deadline`), is the
        deadline's; else the cause's default (a *stall* of a cell whose work was already
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
    elif failure is not None and not (cause == FinishCause.DEADLINE and ended_by_deadline(failure)):
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
    """The reason of a cell whose search bound no work it could use, from its tally.

    The one owner of this decision (reference §5.4 "no_candidate outcome", amended). A
    pure function of the cell's :class:`~curaflow.domain.tally.Tally` — the works this
    scan examined and those earlier scans of the target ruled out for good and this one
    did not read again (the frontier's known run) — so identical ledger state gives the
    identical reason whether or not a frontier let the scan skip works.

    Args:
        report: the candidate report of the scan that ended (None: no scan report).
        max_examined: most works one scan examines (``pixiv.max_examined``).

    Returns:
        In this order:

        * ``no_candidate`` when the search found no work at all (the message says so);
        * ``source_unusable`` when every work ruled out was unusable for a reason that
          is the source's (``unusable`` / ``invalid``: an image URL on another host,
          fields not of the source's shape) and none for any other reason — the works
          tried one after another were all unusable, and nothing else was learnt: the
          source is broken, a failure (alertable), never "no new content";
        * ``scan_capped`` when the scan stopped at ``max_examined`` while the source had
          more (``exhausted`` false): what it saw says nothing about the rest, and the
          target's frontier makes the next job go on from there;
        * ``duplicate_exhausted`` when every work found was ruled out as delivered before;
        * ``filter_exhausted`` ("relax the target's filters") only when a filter rejected
          something and the filters and duplicates together account for at least half
          of the rejections;
        * otherwise ``no_candidate`` (works refused by a route, unavailable, excluded,
          unusable among others): relaxing a filter would change nothing.
    """
    if report is None:
        return R.NO_CANDIDATE
    tally = Tally.of(report)
    if tally.found == 0:
        return R.NO_CANDIDATE
    if tally.unusable > 0 and tally.unusable == tally.rejected:
        return R.SOURCE_UNUSABLE
    if not report.exhausted and report.fetched >= max_examined > 0:
        return R.SCAN_CAPPED
    total = tally.rejected
    if total == 0:
        return R.NO_CANDIDATE
    if tally.delivered == total:
        return R.DUPLICATE_EXHAUSTED
    filtered = sum(tally.filtered.values())
    if filtered > 0 and (filtered + tally.delivered) * 2 >= total:
        return R.FILTER_EXHAUSTED
    return R.NO_CANDIDATE


def no_candidate_state(reason: TerminalReason | str) -> CellState:
    """The state a cell ends in for a reason :func:`no_candidate_verdict` gave:
    ``no_candidate`` for "no new work", ``failed`` for a failure (``source_unusable``:
    counted as a system failure, alertable)."""
    return CellState.NO_CANDIDATE if reason in NO_CONTENT_REASONS else CellState.FAILED


class PendingStep(BaseModel):
    """What Temporal says of one pending step (activity) of a running job's execution.

    Attributes:
        held: a worker holds an attempt of it (started, or asked to cancel).
        last_beat_ms: for a held attempt, its last heartbeat or, before any, its start
            (epoch ms, UTC); None when unknown.
        backoff_until_ms: the next attempt is scheduled for this time (Temporal's retry
            backoff, or a rate limit's delay); None when it waits for a worker now.
        queue_served: a live worker serves the step's task queue (a waiting step is then
            queued behind others, not stalled).
    """

    held: bool
    last_beat_ms: int | None = None
    backoff_until_ms: int | None = None
    queue_served: bool = False


def step_alive(step: PendingStep, *, now_ms: int, stall_budget_ms: int) -> bool:
    """Whether a pending step is moving or waiting its turn (no stall time accrues).

    A held attempt is alive while its last sign of life is within the stall budget (a
    dead holder is Temporal's: its heartbeat timeout re-queues the step); a step in its
    retry backoff is waiting by design; a step waiting in a queue a live worker serves is
    queued behind others (decision 10: waiting there is queueing, not failure).
    """
    if step.held:
        return step.last_beat_ms is None or now_ms - step.last_beat_ms < stall_budget_ms
    if step.backoff_until_ms is not None and step.backoff_until_ms > now_ms:
        return True
    return step.queue_served


def budget_cause(
    *,
    now_ms: int,
    deadline_at_ms: int | None,
    created_at_ms: int,
    started_at_ms: int | None,
    last_progress_ms: int | None,
    queued_budget_ms: int,
    stall_budget_ms: int,
    deadline_grace_ms: int,
    pending: list[PendingStep] | None = None,
) -> FinishCause | None:
    """Which budget ended a job no workflow finished — the deadline winning — or None.

    The reconciler's one decision for an open job with no live lease (reference §8,
    amended). Each budget runs out at an instant: the deadline at ``deadline_at_ms``; the
    queued budget, for a job no step of which ever started, at ``created_at_ms +
    queued_budget_ms``; the stall budget, for a started job, at ``last_progress_ms +
    stall_budget_ms`` — counting only time a step was actually held by a worker, or
    waited in a queue no live worker serves: while Temporal reports a step held and
    beating, in its retry backoff or queued behind others (``pending``,
    :func:`step_alive`), no stall time accrues and the stall budget has not run out.

    The budget that ran out first is the cause; one that ran out at or after the
    deadline is the deadline's (``deadline``: the job expires ``deadline_exceeded``
    whatever happened after it passed, a worker lost while it passed included). A job
    only past its deadline is left to its workflow's own timer for ``deadline_grace_ms``.

    Args:
        now_ms / deadline_at_ms / created_at_ms / started_at_ms / last_progress_ms:
            epoch ms, UTC (``last_progress_ms``: the latest heartbeat of any cell, else
            ``started_at_ms``).
        queued_budget_ms / stall_budget_ms: the job's budgets (resolved, ms).
        deadline_grace_ms: how long past its deadline a job is left to its workflow.
        pending: what Temporal says of the execution's pending steps (None: not asked,
            the ledger's view alone).

    Returns:
        ``deadline`` | ``queued_too_long`` | ``stalled``, or None (nothing ran out yet).
    """
    ran_out: list[tuple[int, FinishCause]] = []
    if deadline_at_ms is not None and deadline_at_ms <= now_ms:
        ran_out.append((deadline_at_ms, FinishCause.DEADLINE))
    if started_at_ms is None:
        queued_at = created_at_ms + queued_budget_ms
        if queued_at <= now_ms:
            ran_out.append((queued_at, FinishCause.QUEUED_TOO_LONG))
    else:
        stalled_at = (last_progress_ms if last_progress_ms is not None else started_at_ms) + stall_budget_ms
        alive = pending is not None and any(
            step_alive(s, now_ms=now_ms, stall_budget_ms=stall_budget_ms) for s in pending
        )
        if stalled_at <= now_ms and not alive:
            ran_out.append((stalled_at, FinishCause.STALLED))
    if not ran_out:
        return None
    _, cause = min(ran_out, key=lambda item: (item[0], item[1] != FinishCause.DEADLINE))
    if cause == FinishCause.DEADLINE:
        others = [c for _, c in ran_out if c != FinishCause.DEADLINE]
        assert deadline_at_ms is not None
        if not others and now_ms < deadline_at_ms + deadline_grace_ms:
            return None  # the workflow's own deadline timer ends it
    return cause

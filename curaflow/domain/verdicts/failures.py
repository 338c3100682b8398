"""What a failed step means: the facts the workflow saw (:class:`StepFailure`), the reason
they give the cell, who owns it, what Temporal must not retry and how many attempts a
step gets."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, SerializerFunctionWrapHandler, model_serializer

from curaflow.domain.reasons import REASONS, Owner, TerminalReason, is_reason, parse_reason, reason_info

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
        paused: Temporal held the step paused by an operator (``temporal activity pause``,
            the UI's "Pause") when the job's deadline stopped it: the workflow asked
            Temporal at the deadline (:data:`workflows.job.PAUSED_STEPS`, 2026-12-06).
        by_hand: the step was ended from outside curaflow, recognised positively: failed
            by the Temporal CLI (``temporal activity fail``: the failure's ``source`` is
            ``CLI``) or completed with a result that is no ``CellUpdate`` (``temporal
            activity complete`` with junk: no worker of curaflow returns one) (2026-12-06).
        attempt: the number (1-based) of the attempt whose failure ended the step, as the
            worker reported it in the failure (:func:`attempt_detail`); None when the
            failure carries none (a timeout, an exception curaflow did not raise, a worker
            of an earlier release).
        max_attempts: the ``maximum_attempts`` of the retry policy the workflow scheduled
            the step with; set together with ``attempt``.
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
    paused: bool = False
    by_hand: bool = False
    attempt: int | None = None
    max_attempts: int | None = None

    @model_serializer(mode="wrap")
    def _without_unset_flags(self, handler: SerializerFunctionWrapHandler) -> Any:
        """``paused``, ``by_hand``, ``attempt`` and ``max_attempts`` are written only when
        set, so the facts every finish sends keep their bytes."""
        data = handler(self)
        if isinstance(data, dict):
            for flag in ("paused", "by_hand", "attempt", "max_attempts"):
                if not getattr(self, flag):
                    data.pop(flag, None)
        return data

    @property
    def owner(self) -> Owner:
        """Who caused the failure: the owner of its reason (:func:`owner_of`)."""
        reason = failure_reason(self)
        return owner_of(reason) if reason is not None else Owner.CURAFLOW


def owner_of(reason: str | None) -> Owner:
    """Who caused a failure with ``reason`` (the catalogue's owner; ``curaflow`` for a
    reason that is not a failure's or is unknown: nothing else can be blamed)."""
    return reason_info(reason).owner or Owner.CURAFLOW


#: Reasons that mean the retry budget is spent: final for the step by definition.
EXHAUSTION_REASONS: frozenset[TerminalReason] = frozenset({R.DELIVERY_ABANDONED})

#: ``ApplicationError`` types Temporal must not retry: every reason the catalogue marks
#: not retryable, plus the exhaustion reasons.
NON_RETRYABLE_TYPES: list[str] = sorted(
    {str(r) for r, info in REASONS.items() if not info.retryable} | {str(r) for r in EXHAUSTION_REASONS}
)


def failure_reason(failure: StepFailure) -> TerminalReason | None:
    """The reason a failed step gives its cell, or None when the failure is a cancellation
    (the finish cause then decides: the workflow cancelled the step itself).

    Rules (reference §5.4, §8):

    * ``application``: the error type is the reason; a ``deliver`` whose retries ran out
      (``MAXIMUM_ATTEMPTS_REACHED`` on a retryable type) is ``delivery_abandoned`` when
      that type is a reason of the catalogue (what the activity raises for a route's
      answer), else ``internal_error``: a type that is no reason is an exception curaflow's
      own code let out of the activity — the ledger's (a serialization failure, a
      deadlock, a reset connection, a statement timeout, a full disk), the rate gate's
      ``GateUnavailable``, a bug — which Temporal names by its class and retries as any
      other; its last attempt is curaflow's, never the route's (2026-12-05). A reason the
      catalogue gives to curaflow (``configuration_mismatch``: every attempt landed on a
      worker that does not know the route) keeps its own name when the retries ran out:
      the route was never asked, so the delivery was not abandoned by it (2026-12-05);
    * ``timeout``: any step that waited in its queue past its ``schedule_to_start``
      budget — a source step's (``acquire``, ``search``, ``fetch``) first attempt, a
      retry of it after a fault, a later pass, and a ``deliver`` attempt — is
      ``queued_too_long`` (owner ``curaflow``): no worker held it, so it never stalled
      (stall budgets count only time a step was held by a worker), and a send that never
      left is no route's failure (until 2026-12-06 a ``deliver`` that timed out so was
      ``delivery_abandoned``, owner ``route``, "no delivery attempt was left", with
      attempts left and the route never asked by it); a ``deliver`` held by a worker
      that timed out is ``delivery_abandoned``; a held source step that stopped beating
      (``HEARTBEAT``, ``START_TO_CLOSE`` …) is ``stalled_no_heartbeat`` (under a finish
      that is not the deadline's, :func:`~curaflow.domain.verdicts.finish.cell_verdict` takes a ``START_TO_CLOSE`` or
      ``SCHEDULE_TO_CLOSE`` timeout for an operator's change, :func:`operator_changed_options`);
    * ``other``: ``internal_error``;
    * whatever its kind, a step ended by hand from outside curaflow (``by_hand``: failed by
      the Temporal CLI, completed with a result that is no ``CellUpdate``) is
      ``step_ended_by_hand`` (owner ``operator``): until 2026-12-06 it was ``internal_error``,
      "An internal error occurred; read the worker's log", owner ``curaflow``.
    """
    if failure.by_hand:
        return R.STEP_ENDED_BY_HAND
    if failure.kind == FailureKind.CANCELLED:
        return None
    if failure.kind == FailureKind.APPLICATION:
        if (
            failure.step == "deliver"
            and failure.retry_state == "MAXIMUM_ATTEMPTS_REACHED"
            and not failure.non_retryable
            and is_reason(failure.error_type)
            and owner_of(failure.error_type) != Owner.CURAFLOW
        ):
            return R.DELIVERY_ABANDONED
        return parse_reason(failure.error_type)
    if failure.kind == FailureKind.TIMEOUT:
        if failure.timeout_type == "SCHEDULE_TO_START":
            return R.QUEUED_TOO_LONG
        if failure.step == "deliver":
            return R.DELIVERY_ABANDONED
        return R.STALLED_NO_HEARTBEAT
    return R.INTERNAL_ERROR


#: The ``source`` the Temporal CLI gives a failure it reports for an activity
#: (``temporal activity fail``): curaflow's workers never send it.
CLI_FAILURE_SOURCE = "CLI"

#: Temporal timeouts curaflow never lets fire before a job's deadline stopped its steps: a
#: step's start-to-close timeout is the deadline plus ``ATTEMPT_GRACE``
#: (:func:`workflows.steps.step_config`; the deadline's barrier cancels the step first) and
#: no step gets a schedule-to-close timeout.
OPERATOR_TIMEOUTS: frozenset[str] = frozenset({"START_TO_CLOSE", "SCHEDULE_TO_CLOSE"})


def operator_changed_options(failure: StepFailure, cause: str) -> bool:
    """Whether ``failure`` is an operator's change of the step's options, recognised positively.

    Either of two facts the options curaflow gave the step cannot produce means someone
    changed them (``temporal activity update-options``, the UI's "Update options"):

    * a Temporal timeout of :data:`OPERATOR_TIMEOUTS` reported to a job that finishes for
      any cause but its deadline (``--start-to-close-timeout 1s``);
    * Temporal retried the step no more (``MAXIMUM_ATTEMPTS_REACHED``) after a retryable
      failure of an attempt whose number, as its worker reported it (``attempt``), is below
      the ``maximum_attempts`` the workflow scheduled the step with (``max_attempts``):
      ``--retry-maximum-attempts 1`` alone. Until 2026-12-06 a delivery so cut ended
      ``delivery_abandoned`` (owner route, "no delivery attempt was left") and a source
      step with its last error's reason, attempts still ahead under curaflow's policy.
      A failure that carries no attempt (a timeout, an exception curaflow did not raise, a
      worker of an earlier release) is not recognised and keeps its reason.

    Such a step is ended from outside: ``step_options_changed`` (owner ``operator``),
    never a stall (the job ``expired`` with its deadline ahead, "a worker died or hung")
    nor the route's ``delivery_abandoned`` (2026-12-06), nor ``internal_error`` ("read the
    worker's log", owner ``curaflow``: a bug that never happened; until 2026-12-06). A
    shortened heartbeat timeout cannot be told from a worker that stopped beating and
    stays a stall.

    Args:
        failure: what the workflow saw of the step.
        cause: why the job finishes (a :class:`~curaflow.domain.verdicts.finish.FinishCause` value).
    """
    if failure.kind == FailureKind.TIMEOUT:
        return failure.timeout_type in OPERATOR_TIMEOUTS and cause != "deadline"
    return (
        failure.kind == FailureKind.APPLICATION
        and not failure.by_hand
        and not failure.non_retryable
        and failure.retry_state == "MAXIMUM_ATTEMPTS_REACHED"
        and failure.attempt is not None
        and failure.max_attempts is not None
        and failure.attempt < failure.max_attempts
    )


#: The key of the detail a step's retryable failure carries its attempt's number under
#: (:func:`attempt_detail`, :func:`attempt_of`).
ATTEMPT_DETAIL = "attempt"


def attempt_detail(attempt: int) -> dict[str, int]:
    """The ``ApplicationError`` detail that carries the failed attempt's number (1-based,
    ``activity.info().attempt``) to the workflow: Temporal's activity failure does not
    (``ActivityError`` has no attempt), and :func:`operator_changed_options` needs it."""
    return {ATTEMPT_DETAIL: attempt}


def attempt_of(details: Sequence[Any]) -> int | None:
    """The attempt's number an ``ApplicationError``'s ``details`` carry
    (:func:`attempt_detail`: a mapping whose ``attempt`` is a positive integer), or None
    when no detail is of that shape."""
    for detail in details:
        if isinstance(detail, dict):
            value = detail.get(ATTEMPT_DETAIL)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


#: Reasons of a step's budget running out (a Temporal timeout of a search or fetch).
BUDGET_REASONS: frozenset[TerminalReason] = frozenset({R.QUEUED_TOO_LONG, R.STALLED_NO_HEARTBEAT})


def ended_by_deadline(failure: StepFailure) -> bool:
    """Whether a failed step of a job that finished for its deadline is the deadline's.

    True when the step's attempt failed after the workflow asked to stop it
    (``retry_state`` ``CANCEL_REQUESTED``: Temporal took no retry because a cancel was
    pending — at the deadline, wherever the attempt was: a download the deadline cut,
    a decode, a ledger write), or when a Temporal timeout of the step's budget
    (:data:`BUDGET_REASONS`) stands beside the deadline: both say time ran out, and the
    deadline wins. A delivery that timed out keeps its own reason (``delivery_abandoned``,
    or ``queued_too_long`` for a send that waited in its queue), and an application
    failure Temporal reported before any stop keeps its reason.
    """
    if failure.retry_state == "CANCEL_REQUESTED":
        return True
    return (
        failure.kind == FailureKind.TIMEOUT and failure.step != "deliver" and failure_reason(failure) in BUDGET_REASONS
    )


def attempt_budget(step: Step, *, delivery_max_attempts: int, source_max_attempts: int) -> int:
    """Attempts Temporal makes of one step: ``deliver`` gets the delivery budget, a source
    step (``acquire``, ``search``, ``fetch``) the source budget (reference §8)."""
    return delivery_max_attempts if step == "deliver" else source_max_attempts

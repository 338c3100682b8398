"""The one decider of a cell's reason, of step retryability and of attempt budgets (table tests)."""

from __future__ import annotations

import pytest

from curaflow.domain.holds import hold_scope
from curaflow.domain.reasons import REASONS, Owner, TerminalReason
from curaflow.domain.verdicts import (
    NON_RETRYABLE_TYPES,
    FailureKind,
    FinishCause,
    PendingStep,
    StepFailure,
    attempt_budget,
    budget_cause,
    cancel_stopped,
    cell_verdict,
    delivery_verdict,
    failure_reason,
    operator_changed_options,
    waits_for_sends,
)
from curaflow.domain.verdicts.failures import attempt_detail, attempt_of

R = TerminalReason


def app(step: str, error_type: str, *, non_retryable: bool = False, retry_state: str | None = None) -> StepFailure:
    return StepFailure(
        step=step,  # type: ignore[arg-type]
        kind=FailureKind.APPLICATION,
        error_type=error_type,
        non_retryable=non_retryable,
        retry_state=retry_state,
    )


def timeout(step: str, timeout_type: str, *, first: bool = False) -> StepFailure:
    return StepFailure(step=step, kind=FailureKind.TIMEOUT, timeout_type=timeout_type, first_step=first)  # type: ignore[arg-type]


# Every timeout type × step (DESIGN.md decision 8): a delivery that timed out while a
# worker held it was abandoned; any step that timed out waiting in its queue — a source
# step's first attempt, a retry, a later pass, a send — was queued too long (no worker
# held it: never a stall, and a send never left: never the route's); a held step that
# stopped beating stalled.
TIMEOUT_TABLE = [
    ("search", "SCHEDULE_TO_START", True, R.QUEUED_TOO_LONG),
    ("search", "SCHEDULE_TO_START", False, R.QUEUED_TOO_LONG),
    ("acquire", "SCHEDULE_TO_START", False, R.QUEUED_TOO_LONG),
    ("search", "START_TO_CLOSE", True, R.STALLED_NO_HEARTBEAT),
    ("search", "HEARTBEAT", True, R.STALLED_NO_HEARTBEAT),
    ("search", "SCHEDULE_TO_CLOSE", False, R.STALLED_NO_HEARTBEAT),
    ("fetch", "SCHEDULE_TO_START", False, R.QUEUED_TOO_LONG),
    ("fetch", "START_TO_CLOSE", False, R.STALLED_NO_HEARTBEAT),
    ("fetch", "HEARTBEAT", False, R.STALLED_NO_HEARTBEAT),
    ("fetch", "SCHEDULE_TO_CLOSE", False, R.STALLED_NO_HEARTBEAT),
    ("deliver", "SCHEDULE_TO_START", False, R.QUEUED_TOO_LONG),
    ("deliver", "START_TO_CLOSE", False, R.DELIVERY_ABANDONED),
    ("deliver", "HEARTBEAT", False, R.DELIVERY_ABANDONED),
    ("deliver", "SCHEDULE_TO_CLOSE", False, R.DELIVERY_ABANDONED),
]


@pytest.mark.parametrize(("step", "kind", "first", "expected"), TIMEOUT_TABLE)
def test_every_timeout_type_for_every_step(step: str, kind: str, first: bool, expected: TerminalReason) -> None:
    assert failure_reason(timeout(step, kind, first=first)) == expected


@pytest.mark.parametrize("state", ["artifact_ready", "delivery_pending"])
@pytest.mark.parametrize("cause", ["completed", "deadline"])
def test_a_send_that_timed_out_in_its_queue_is_no_route_s_failure(state: str, cause: str) -> None:
    """A ``deliver`` whose attempt waited in its task queue past its ``schedule_to_start``
    budget (no worker of the route's queue took it; Temporal does not retry that timeout)
    never reached the route: nothing was sent by it. It ended ``delivery_abandoned``, owner
    ``route`` ("check the route's receiver"; the client's ``DeliveryAbandonedError`` "no
    delivery attempt was left") — blame on a route that was never asked, with attempts
    left. It is ``queued_too_long``, curaflow's (check that workers serve the queue)."""
    failure = timeout("deliver", "SCHEDULE_TO_START")
    reason = cell_verdict(state=state, stage="delivering", cause=cause, failure=failure)
    assert reason == R.QUEUED_TOO_LONG
    assert failure.owner == Owner.CURAFLOW


APPLICATION_TABLE = [
    (app("search", "auth_failed", non_retryable=True), R.AUTH_FAILED),
    (app("search", "rate_limited", retry_state="MAXIMUM_ATTEMPTS_REACHED"), R.RATE_LIMITED),
    (app("fetch", "download_failed", retry_state="MAXIMUM_ATTEMPTS_REACHED"), R.DOWNLOAD_FAILED),
    (app("acquire", "auth_failed", non_retryable=True, retry_state="NON_RETRYABLE_FAILURE"), R.AUTH_FAILED),
    (app("deliver", "delivery_rejected", non_retryable=True, retry_state="NON_RETRYABLE_FAILURE"), R.DELIVERY_REJECTED),
    (app("deliver", "delivery_unknown", non_retryable=True), R.DELIVERY_UNKNOWN),
    (app("search", "something_new"), R.INTERNAL_ERROR),
    (StepFailure(step="fetch", kind=FailureKind.OTHER), R.INTERNAL_ERROR),
]


# A deliver step whose retries ran out is the route's (``delivery_abandoned``) only when
# its last attempt failed with a reason of the catalogue — what the activity raises for a
# route's answer. Any other type is an exception curaflow's own code let out of the
# activity (the ledger: a serialization failure, a deadlock, a connection reset, too many
# connections, a statement timeout, a full disk; a bug): Temporal names it by its class,
# retried it as it retries any such, and its last attempt is curaflow's, never the route's
# (until 2026-12-05 it was ``delivery_abandoned``: "check the route's receiver").
EXHAUSTED_DELIVERIES = [
    ("delivery_failed", R.DELIVERY_ABANDONED),
    ("telegram_failed", R.DELIVERY_ABANDONED),
    ("rate_limited", R.DELIVERY_ABANDONED),
    ("SerializationError", R.INTERNAL_ERROR),
    ("DeadlockDetectedError", R.INTERNAL_ERROR),
    ("ConnectionDoesNotExistError", R.INTERNAL_ERROR),
    ("ConnectionResetError", R.INTERNAL_ERROR),
    ("TooManyConnectionsError", R.INTERNAL_ERROR),
    ("QueryCanceledError", R.INTERNAL_ERROR),
    ("DiskFullError", R.INTERNAL_ERROR),
    ("TimeoutError", R.INTERNAL_ERROR),
    ("InterfaceError", R.INTERNAL_ERROR),
    ("GateUnavailable", R.INTERNAL_ERROR),
    ("KeyError", R.INTERNAL_ERROR),
    # every attempt met a worker that does not know the route: the route was never asked
    ("configuration_mismatch", R.CONFIGURATION_MISMATCH),
]


@pytest.mark.parametrize(("error_type", "expected"), EXHAUSTED_DELIVERIES)
def test_a_delivery_exhausted_by_curaflows_own_failure_is_not_the_routes(error_type: str, expected: R) -> None:
    failure = app("deliver", error_type, retry_state="MAXIMUM_ATTEMPTS_REACHED")
    assert failure_reason(failure) == expected
    assert failure.owner == REASONS[expected].owner
    # and so the cell's reason at the finish, whatever the cause that finished the job
    assert cell_verdict(state="delivery_pending", stage="delivering", cause="completed", failure=failure) == expected


def test_temporal_names_an_untyped_exception_by_its_class_which_is_no_reason() -> None:
    """The premise of the rule above: what leaves an activity untyped reaches the workflow
    as an ``ApplicationError`` whose type is the exception's class name, retryable."""
    import asyncpg
    from temporalio.api.failure.v1 import Failure
    from temporalio.converter import DefaultFailureConverter, DefaultPayloadConverter

    from curaflow.domain.reasons import is_reason
    from curaflow.sources.gate import GateUnavailable

    for err in (asyncpg.exceptions.SerializationError("x"), GateUnavailable("x"), ConnectionResetError()):
        failure = Failure()
        DefaultFailureConverter().to_failure(err, DefaultPayloadConverter(), failure)
        info = failure.application_failure_info
        assert (info.type, info.non_retryable) == (type(err).__name__, False)
        assert not is_reason(info.type)


@pytest.mark.parametrize(("failure", "expected"), APPLICATION_TABLE)
def test_application_failures_carry_their_reason(failure: StepFailure, expected: TerminalReason) -> None:
    assert failure_reason(failure) == expected


def test_a_cancelled_step_leaves_the_reason_to_the_cause() -> None:
    cancelled = StepFailure(step="fetch", kind=FailureKind.CANCELLED)
    assert failure_reason(cancelled) is None
    assert cell_verdict(state="selected", stage="fetching", cause="cancelled", failure=cancelled) == (
        R.CANCELLED_BY_CONSUMER
    )
    assert cell_verdict(state="selected", stage="fetching", cause="deadline", failure=cancelled) == (
        R.EXECUTION_TIMEOUT
    )


CAUSE_TABLE = [
    # (cause, state, stage, cancel recorded, expected) for an open cell with no failure
    ("cancelled", "pending", "searching", False, R.CANCELLED_BY_CONSUMER),
    ("deadline", "selected", "fetching", False, R.EXECUTION_TIMEOUT),
    ("deadline", "selected", "fetching", True, R.CANCELLED_BY_CONSUMER),
    ("queued_too_long", "pending", "queued", False, R.QUEUED_TOO_LONG),
    ("queued_too_long", "pending", "searching", False, R.STALLED_NO_HEARTBEAT),  # a step already ran
    ("queued_too_long", "pending", "queued", True, R.CANCELLED_BY_CONSUMER),
    # A stall after the work was handed to its routes is the delivery's (reference §5.4,
    # §8: the stall sweep leaves delivery cells alone, the rollup abandons them) — as a
    # delivery step that timed out in the workflow is.
    ("stalled", "artifact_ready", "delivering", False, R.DELIVERY_ABANDONED),
    ("stalled", "delivery_pending", "delivering", False, R.DELIVERY_ABANDONED),
    ("stalled", "artifact_ready", "delivering", True, R.CANCELLED_BY_CONSUMER),
    ("stalled", "selected", "fetching", False, R.STALLED_NO_HEARTBEAT),
    ("stalled", "pending", "searching", False, R.STALLED_NO_HEARTBEAT),
    ("terminated", "pending", "searching", False, R.EXECUTION_TERMINATED),
    ("terminated", "pending", "searching", True, R.CANCELLED_BY_CONSUMER),
    # an operator deleted the running execution: a stop on purpose, like a terminate; a
    # deletion leaves no close time, so a recorded cancel is taken as the stop
    ("deleted", "delivery_pending", "delivering", False, R.EXECUTION_DELETED),
    ("deleted", "pending", "searching", False, R.EXECUTION_DELETED),
    ("deleted", "pending", "searching", True, R.CANCELLED_BY_CONSUMER),
    ("timed_out", "selected", "fetching", False, R.EXECUTION_TIMEOUT),
    # the deadline passed while no worker of the build the run is pinned to took its workflow
    # task: the pin, not the deadline; every open cell, whatever it waited on
    ("pinned_build_unserved", "selected", "fetching", False, R.PINNED_BUILD_UNSERVED),
    ("pinned_build_unserved", "delivery_pending", "delivering", False, R.PINNED_BUILD_UNSERVED),
    ("pinned_build_unserved", "pending", "queued", False, R.PINNED_BUILD_UNSERVED),
    ("pinned_build_unserved", "pending", "searching", True, R.CANCELLED_BY_CONSUMER),
    ("workflow_failed", "selected", "fetching", False, R.INTERNAL_ERROR),
    ("workflow_failed", "selected", "fetching", True, R.INTERNAL_ERROR),  # a bug is not a cancel
    ("completed", "delivery_pending", "delivering", False, R.DELIVERY_ABANDONED),
    ("completed", "pending", "searching", False, R.INTERNAL_ERROR),
]


@pytest.mark.parametrize(("cause", "state", "stage", "cancel", "expected"), CAUSE_TABLE)
def test_open_cells_by_cause(cause: str, state: str, stage: str, cancel: bool, expected: TerminalReason) -> None:
    assert cell_verdict(state=state, stage=stage, cause=cause, cancel_requested=cancel) == expected


def test_a_real_failure_keeps_its_reason_whatever_stopped_the_job() -> None:
    auth = app("search", "auth_failed", non_retryable=True)
    for cause in FinishCause:
        assert cell_verdict(state="pending", stage="searching", cause=cause, failure=auth) == R.AUTH_FAILED
    # ... but a stop caused by the cancel is the cancel.
    stalled = timeout("fetch", "HEARTBEAT")
    assert cell_verdict(state="selected", stage="fetching", cause="cancelled", failure=stalled) == (
        R.CANCELLED_BY_CONSUMER
    )


# The deadline owns every failure that happens after it passed (the job finishes for its
# deadline): a step whose attempt failed after the workflow stopped it at the deadline —
# a download the deadline cut, wherever the attempt was — or a Temporal timeout of a
# step's budget beside the deadline.
DEADLINE_TABLE = [
    (app("acquire", "download_timeout", retry_state="CANCEL_REQUESTED"), "deadline", R.EXECUTION_TIMEOUT),
    (app("acquire", "remote_http_error", retry_state="CANCEL_REQUESTED"), "deadline", R.EXECUTION_TIMEOUT),
    (
        app("acquire", "storage_full", non_retryable=True, retry_state="CANCEL_REQUESTED"),
        "deadline",
        R.EXECUTION_TIMEOUT,
    ),
    (app("deliver", "delivery_failed", retry_state="CANCEL_REQUESTED"), "deadline", R.EXECUTION_TIMEOUT),
    (timeout("acquire", "HEARTBEAT"), "deadline", R.EXECUTION_TIMEOUT),
    (timeout("acquire", "SCHEDULE_TO_START", first=True), "deadline", R.EXECUTION_TIMEOUT),
    (timeout("acquire", "SCHEDULE_TO_START"), "deadline", R.EXECUTION_TIMEOUT),
    # ... a failure Temporal reported before any stop keeps its own reason
    (app("acquire", "download_timeout", retry_state="MAXIMUM_ATTEMPTS_REACHED"), "deadline", R.DOWNLOAD_TIMEOUT),
    (app("acquire", "auth_failed", non_retryable=True, retry_state="NON_RETRYABLE_FAILURE"), "deadline", R.AUTH_FAILED),
    (timeout("deliver", "HEARTBEAT"), "deadline", R.DELIVERY_ABANDONED),  # a delivery's, not a budget's
    (timeout("deliver", "SCHEDULE_TO_START"), "deadline", R.QUEUED_TOO_LONG),  # a send's own wait, as it was
    # ... and without the deadline, nothing changes
    (app("acquire", "download_timeout", retry_state="CANCEL_REQUESTED"), "completed", R.DOWNLOAD_TIMEOUT),
    (timeout("acquire", "HEARTBEAT"), "completed", R.STALLED_NO_HEARTBEAT),
]


@pytest.mark.parametrize(("failure", "cause", "expected"), DEADLINE_TABLE)
def test_the_deadline_owns_what_happens_after_it(failure: StepFailure, cause: str, expected: TerminalReason) -> None:
    assert cell_verdict(state="selected", stage="fetching", cause=cause, failure=failure) == expected


# A cancel owns what fails after it stopped the step, as the deadline does: a send whose
# own timeout fired within the cancel's grace would have been retried (the route is
# resend-safe), and only the cancel kept Temporal from retrying it (retry state
# CANCEL_REQUESTED). Seen on a webhook that hung: the job ended failed / delivery_failed,
# alertable, its execution Failed, though the consumer's cancel stopped the cell.
CANCEL_TABLE = [
    (app("deliver", "delivery_failed", retry_state="CANCEL_REQUESTED"), R.CANCELLED_BY_CONSUMER),
    (app("acquire", "download_timeout", retry_state="CANCEL_REQUESTED"), R.CANCELLED_BY_CONSUMER),
    (app("acquire", "remote_http_error", retry_state="CANCEL_REQUESTED"), R.CANCELLED_BY_CONSUMER),
    # ... a failure Temporal reported before the cancel keeps its own reason
    (app("acquire", "auth_failed", non_retryable=True, retry_state="NON_RETRYABLE_FAILURE"), R.AUTH_FAILED),
    (app("deliver", "route_refused", non_retryable=True, retry_state="NON_RETRYABLE_FAILURE"), R.ROUTE_REFUSED),
]


@pytest.mark.parametrize(("failure", "expected"), CANCEL_TABLE)
def test_a_cancel_owns_what_fails_after_it_stopped_the_step(failure: StepFailure, expected: TerminalReason) -> None:
    assert cell_verdict(state="delivery_pending", stage="delivering", cause="cancelled", failure=failure) == expected


MIN = 60_000
T0 = 1_000_000_000_000


def cause_at(
    now: int,
    *,
    deadline: int | None = 30 * MIN,
    started: int | None = 0,
    progress: int | None = 0,
    pending: list[PendingStep] | None = None,
    pinned_since: int | None = None,
) -> FinishCause | None:
    """``budget_cause`` for a job created at T0 (times in ms after T0), queued 30 min, stall 15 min;
    ``pinned_since``: its run is pinned to a build and its workflow task waits since then."""
    return budget_cause(
        now_ms=T0 + now,
        deadline_at_ms=None if deadline is None else T0 + deadline,
        created_at_ms=T0,
        started_at_ms=None if started is None else T0 + started,
        last_progress_ms=None if progress is None else T0 + progress,
        queued_budget_ms=30 * MIN,
        stall_budget_ms=15 * MIN,
        deadline_grace_ms=10_000,
        pending=pending,
        pinned_unserved_since_ms=None if pinned_since is None else T0 + pinned_since,
    )


def held(beat: int) -> PendingStep:
    return PendingStep(held=True, last_beat_ms=T0 + beat)


WAITING_SERVED = PendingStep(held=False, queue_served=True)
WAITING_UNSERVED = PendingStep(held=False, queue_served=False)


def in_backoff(until: int) -> PendingStep:
    return PendingStep(held=False, backoff_until_ms=T0 + until)


BUDGET_TABLE = [
    # (now, kwargs, expected)
    (10 * MIN, {}, None),  # nothing ran out
    (16 * MIN, {}, FinishCause.STALLED),  # no progress for the stall budget (ledger only)
    (16 * MIN, {"pending": []}, FinishCause.STALLED),  # Temporal: no step pending at all
    (16 * MIN, {"pending": [WAITING_UNSERVED]}, FinishCause.STALLED),  # waiting for no worker
    # Stall budgets count only time a step was held by a worker or waited unserved:
    (16 * MIN, {"pending": [WAITING_SERVED]}, None),  # queued behind others in a backlog
    (16 * MIN, {"pending": [in_backoff(17 * MIN)]}, None),  # Temporal's retry backoff
    (16 * MIN, {"pending": [held(15 * MIN)]}, None),  # a held step beating in Temporal
    (16 * MIN, {"pending": [held(0)]}, FinishCause.STALLED),  # held, silent past the budget
    (16 * MIN, {"pending": [in_backoff(15 * MIN), WAITING_UNSERVED]}, FinishCause.STALLED),
    # The deadline first, then a stall: the deadline owns it (a worker lost while it passed).
    (31 * MIN, {"deadline": 10 * MIN}, FinishCause.DEADLINE),
    (16 * MIN, {"deadline": 15 * MIN}, FinishCause.DEADLINE),  # stall ran out at 15: a tie
    # within the deadline's grace, the stall ran out after it (at 16 min)
    (16 * MIN + 1_000, {"deadline": 15 * MIN + 55_000, "progress": MIN}, FinishCause.DEADLINE),
    # A stall that ran out before the deadline is the stall
    (16 * MIN, {"deadline": 15 * MIN + 30_000}, FinishCause.STALLED),
    # Past the deadline alone: the workflow's timer first, then the reconciler.
    (30 * MIN + 5_000, {"pending": [held(30 * MIN)]}, None),
    (30 * MIN + 10_000, {"pending": [held(30 * MIN)]}, FinishCause.DEADLINE),
    (30 * MIN + 10_000, {"pending": [WAITING_SERVED]}, FinishCause.DEADLINE),  # queued or not: over
    # Never started: the queued budget, then the deadline owns what comes after it
    (31 * MIN, {"started": None, "progress": None, "deadline": 60 * MIN}, FinishCause.QUEUED_TOO_LONG),
    (31 * MIN, {"started": None, "progress": None, "deadline": 29 * MIN}, FinishCause.DEADLINE),
    (31 * MIN, {"started": None, "progress": None, "deadline": None}, FinishCause.QUEUED_TOO_LONG),
    # A run pinned to a build whose workflow task waited for a worker of it since before the
    # deadline: no worker ran the workflow, the deadline was not the cause (2026-12-07).
    (30 * MIN + 10_000, {"progress": 20 * MIN, "pinned_since": 20 * MIN}, FinishCause.PINNED_BUILD_UNSERVED),
    (30 * MIN + 10_000, {"progress": 29 * MIN, "pinned_since": 30 * MIN - 1_000}, FinishCause.PINNED_BUILD_UNSERVED),
    # its first workflow task never started (a start pinned to a gone build, never started)
    (
        31 * MIN,
        {"started": None, "progress": None, "deadline": 29 * MIN, "pinned_since": 0},
        FinishCause.PINNED_BUILD_UNSERVED,
    ),
    # the task the deadline's own timer scheduled (the steps ran at the deadline): the deadline
    (30 * MIN + 10_000, {"progress": 29 * MIN, "pinned_since": 30 * MIN}, FinishCause.DEADLINE),
    (30 * MIN + 10_000, {"progress": 29 * MIN, "pinned_since": 30 * MIN - 999}, FinishCause.DEADLINE),
    (30 * MIN + 5_000, {"pinned_since": 20 * MIN, "pending": [held(30 * MIN)]}, None),  # the grace first
    # a stall or a queued budget that ran out before the deadline stays theirs
    (16 * MIN, {"pinned_since": 5 * MIN}, FinishCause.STALLED),
    (
        31 * MIN,
        {"started": None, "progress": None, "deadline": 60 * MIN, "pinned_since": 0},
        FinishCause.QUEUED_TOO_LONG,
    ),
]


@pytest.mark.parametrize(("now", "kw", "expected"), BUDGET_TABLE)
def test_which_budget_ended_a_job(now: int, kw: dict[str, object], expected: FinishCause | None) -> None:
    assert cause_at(now, **kw) == expected  # type: ignore[arg-type]


def test_a_retried_step_that_timed_out_in_its_queue_was_queued_not_stalled() -> None:
    # The step ran once (the cell's stage moved), failed, and its retry then waited in a
    # busy source queue past its schedule-to-start budget: no worker held it.
    retried = timeout("acquire", "SCHEDULE_TO_START", first=True)
    assert cell_verdict(state="pending", stage="searching", cause="completed", failure=retried) == R.QUEUED_TOO_LONG
    # A held step that stopped beating is a stall.
    held = timeout("acquire", "HEARTBEAT", first=True)
    assert cell_verdict(state="pending", stage="searching", cause="completed", failure=held) == R.STALLED_NO_HEARTBEAT


def test_reasons_reported_by_old_executions_are_applied_as_given() -> None:
    assert (
        cell_verdict(state="pending", stage="searching", cause="completed", reported_reason="network_error")
        == R.NETWORK_ERROR
    )


def test_non_retryable_types_come_from_the_catalogue() -> None:
    expected = {str(r) for r, info in REASONS.items() if not info.retryable} | {"delivery_abandoned"}
    assert set(NON_RETRYABLE_TYPES) == expected
    assert {"auth_failed", "delivery_rejected", "delivery_unknown", "configuration_error"} <= expected
    assert "rate_limited" not in expected and "download_failed" not in expected


DELIVERY_TABLE = [
    # (permanent, ambiguous, resend_safe, attempt, max) → (reason, final, unknown, outcome)
    (False, False, False, 1, 12, ("delivery_failed", False, False, "failed")),
    (False, False, False, 12, 12, ("delivery_abandoned", True, False, "abandoned")),
    (True, False, False, 1, 12, ("delivery_rejected", True, False, "rejected")),
    (False, True, False, 1, 12, ("delivery_unknown", True, True, "unknown")),
    (False, True, True, 1, 12, ("delivery_failed", False, False, "failed")),
    (True, True, False, 1, 12, ("delivery_unknown", True, True, "unknown")),
]


@pytest.mark.parametrize(("permanent", "ambiguous", "safe", "attempt", "budget", "expected"), DELIVERY_TABLE)
def test_delivery_verdicts(
    permanent: bool, ambiguous: bool, safe: bool, attempt: int, budget: int, expected: tuple[str, bool, bool, str]
) -> None:
    reason = "delivery_rejected" if permanent else "delivery_failed"
    verdict = delivery_verdict(
        reason=reason, permanent=permanent, ambiguous=ambiguous, resend_safe=safe, attempt=attempt, max_attempts=budget
    )
    assert (verdict.reason, verdict.final, verdict.unknown, verdict.outcome) == expected


def test_attempt_budgets() -> None:
    assert attempt_budget("deliver", delivery_max_attempts=12, source_max_attempts=10) == 12
    assert attempt_budget("search", delivery_max_attempts=12, source_max_attempts=10) == 10
    assert attempt_budget("fetch", delivery_max_attempts=12, source_max_attempts=10) == 10


def test_only_a_refusal_of_the_work_is_remembered() -> None:
    def verdict(reason: str) -> bool:
        return delivery_verdict(
            reason=reason, permanent=True, ambiguous=False, resend_safe=True, attempt=1, max_attempts=3
        ).remember_refusal

    assert verdict("delivery_rejected") and verdict("telepost_rejected")
    assert not verdict("configuration_error")  # a broken route, not a refused work
    assert not delivery_verdict(
        reason="delivery_failed", permanent=False, ambiguous=False, resend_safe=True, attempt=3, max_attempts=3
    ).remember_refusal


def test_a_route_refusing_the_request_holds_the_work_back_and_never_refuses_it() -> None:
    def verdict(reason: str, **kw: object) -> object:
        args: dict[str, object] = {
            "reason": reason,
            "permanent": True,
            "ambiguous": False,
            "resend_safe": True,
            "attempt": 1,
            "max_attempts": 3,
        }
        return delivery_verdict(**{**args, **kw})  # type: ignore[arg-type]

    refused = verdict("route_refused")
    assert refused.hold and not refused.remember_refusal and refused.final  # type: ignore[attr-defined]
    # the work's own refusal is remembered, never merely held
    work = verdict("delivery_rejected")
    assert work.remember_refusal and not work.hold  # type: ignore[attr-defined]
    # nothing is held when part of the work is at the route (partial), nor when it may be (unknown)
    assert not verdict("route_refused", posted=True).hold  # type: ignore[attr-defined]
    assert not verdict("route_refused", ambiguous=True, resend_safe=False).hold  # type: ignore[attr-defined]
    # a route that is down (retries ran out) is not a refusal: nothing held
    assert not verdict("delivery_failed", permanent=False, attempt=3).hold  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("cause", "cancel_at", "closed_at", "expected"),
    [
        # No cancel recorded: nothing to weigh.
        ("terminated", None, 1_000, False),
        ("queued_too_long", None, None, False),
        # A workflow's cause already says which barrier came first.
        ("completed", 500, None, False),
        ("cancelled", 500, None, False),
        ("deadline", 500, None, False),
        # Temporal's close: the cancel is the stop's reason only if it came first.
        ("terminated", 500, 1_000, True),
        ("terminated", 1_000, 1_000, True),
        ("terminated", 1_500, 1_000, False),
        ("timed_out", 500, 1_000, True),
        ("timed_out", 1_500, 1_000, False),
        # A budget: the reconciler stops the job now, after any recorded cancel.
        ("queued_too_long", 1_500, None, True),
        ("stalled", 1_500, None, True),
    ],
)
def test_a_cancel_recorded_after_the_close_stopped_nothing(
    cause: str, cancel_at: int | None, closed_at: int | None, expected: bool
) -> None:
    assert cancel_stopped(cause, cancel_at, closed_at) is expected


def test_a_timed_out_run_cancelled_afterwards_stays_expired() -> None:
    late = cancel_stopped("timed_out", 1_500, 1_000)
    assert cell_verdict(state="selected", stage="fetching", cause="timed_out", cancel_requested=late) == (
        R.EXECUTION_TIMEOUT
    )
    early = cancel_stopped("timed_out", 500, 1_000)
    assert cell_verdict(state="selected", stage="fetching", cause="timed_out", cancel_requested=early) == (
        R.CANCELLED_BY_CONSUMER
    )


@pytest.mark.parametrize("cause", list(FinishCause))
@pytest.mark.parametrize("by_workflow", [True, False])
def test_a_workflows_finish_but_at_the_deadline_waits_for_a_send_out(cause: FinishCause, by_workflow: bool) -> None:
    # A consumer cancel — the workflow's cause, or one recorded while the finish waits —
    # waits too: nothing cuts a send the workflow stopped waiting for, and its late answer
    # contradicted the job ended before it (until 2026-12-05). The deadline ends the job at
    # once (the outbound layer cuts every send there); the reconciler finishes only once no
    # attempt holds a live lease (it never asks).
    waits = by_workflow and cause in (FinishCause.COMPLETED, FinishCause.CANCELLED)
    assert waits_for_sends(cause, by_workflow=by_workflow) is waits


@pytest.mark.parametrize("step", ["search", "fetch", "acquire", "deliver"])
@pytest.mark.parametrize("timeout_type", ["START_TO_CLOSE", "SCHEDULE_TO_CLOSE"])
@pytest.mark.parametrize("cause", ["completed", "cancelled"])
def test_a_step_timed_out_by_an_operators_options_is_neither_a_stall_nor_the_routes(
    step: str, timeout_type: str, cause: str
) -> None:
    """curaflow gives a step a start-to-close timeout of the job's deadline plus
    ``ATTEMPT_GRACE`` and no schedule-to-close timeout, so either timeout before the
    deadline stopped the job is an operator's ``temporal activity update-options``
    (``--start-to-close-timeout 1s --retry-maximum-attempts 1``). It ended the job
    ``expired / stalled_no_heartbeat`` ("a worker died or hung") with its deadline ahead, or
    ``delivery_abandoned`` (the route's), then ``internal_error`` ("read the worker's log",
    owner curaflow: a bug that never happened) — it is ``step_options_changed``, the
    operator's."""
    state = "artifact_ready" if step == "deliver" else "pending"
    failure = StepFailure(step=step, kind=FailureKind.TIMEOUT, timeout_type=timeout_type, retry_state="TIMEOUT")  # type: ignore[arg-type]
    assert cell_verdict(state=state, stage="searching", cause=cause, failure=failure) == R.STEP_OPTIONS_CHANGED
    assert REASONS[R.STEP_OPTIONS_CHANGED].owner == Owner.OPERATOR
    assert operator_changed_options(failure, cause)
    # At the deadline the same timeout is the deadline's (``ended_by_deadline``), as before.
    if step != "deliver":
        assert cell_verdict(state=state, stage="searching", cause="deadline", failure=failure) == R.EXECUTION_TIMEOUT
    assert not operator_changed_options(failure, "deadline")
    assert not operator_changed_options(timeout(step, "HEARTBEAT"), cause)


@pytest.mark.parametrize(
    ("attempt", "max_attempts", "changed"),
    [(1, 12, True), (11, 12, True), (12, 12, False), (13, 12, False), (None, None, False)],
)
def test_a_step_whose_retries_ran_out_before_curaflows_policy_is_the_operators(
    attempt: int | None, max_attempts: int | None, changed: bool
) -> None:
    """Temporal retried a delivery no more (``MAXIMUM_ATTEMPTS_REACHED``) after a retryable
    failure of attempt ``attempt`` of the ``max_attempts`` curaflow scheduled: below it,
    an operator cut the step's retries (``step_options_changed``); at it, the route's
    failures used every attempt (``delivery_abandoned``); without the attempt's number
    nothing is recognised and the route keeps it, as before."""
    failure = StepFailure(
        step="deliver",
        kind=FailureKind.APPLICATION,
        error_type="delivery_failed",
        retry_state="MAXIMUM_ATTEMPTS_REACHED",
        attempt=attempt,
        max_attempts=max_attempts,
    )
    assert operator_changed_options(failure, "completed") is changed
    reason = cell_verdict(state="artifact_ready", stage="delivering", cause="completed", failure=failure)
    assert reason == (R.STEP_OPTIONS_CHANGED if changed else R.DELIVERY_ABANDONED)
    # A failure Temporal would not retry under any policy, or one ended by hand, is not a cut.
    assert not operator_changed_options(failure.model_copy(update={"non_retryable": True}), "completed")
    assert not operator_changed_options(failure.model_copy(update={"by_hand": True}), "completed")
    assert not operator_changed_options(failure.model_copy(update={"retry_state": "TIMEOUT"}), "completed")
    dumped = failure.model_dump()
    assert ("attempt" in dumped) is (attempt is not None)  # the facts keep their bytes without it


@pytest.mark.parametrize(
    ("details", "attempt"),
    [
        ((attempt_detail(3),), 3),
        (({"kept": 1}, attempt_detail(2)), 2),
        (({"attempt": True},), None),
        (({"attempt": 0},), None),
        (({"attempt": "3"},), None),
        (("attempt", 3), None),
        ((), None),
    ],
)
def test_the_attempt_a_failure_carries_is_read_only_in_its_shape(
    details: tuple[object, ...], attempt: int | None
) -> None:
    assert attempt_of(details) == attempt


@pytest.mark.parametrize("step", ["acquire", "deliver"])
def test_a_step_paused_at_the_deadline_is_the_operators_not_the_deadlines(step: str) -> None:
    """A step Temporal held paused by an operator when the deadline stopped it
    (``StepFailure.paused``) ended ``execution_timeout`` ("retry with a longer
    deadline_ms", owner curaflow): it is ``step_paused``, the operator's, and names no hold
    — under the deadline only (a cancel owns what it stopped)."""
    state = "artifact_ready" if step == "deliver" else "pending"
    paused = StepFailure(step=step, kind=FailureKind.CANCELLED, retry_state="CANCEL_REQUESTED", paused=True)  # type: ignore[arg-type]
    assert cell_verdict(state=state, stage="searching", cause="deadline", failure=paused) == R.STEP_PAUSED
    assert REASONS[R.STEP_PAUSED].owner == Owner.OPERATOR
    assert hold_scope(state, R.STEP_PAUSED, failure_step=step) is None
    assert cell_verdict(state=state, stage="searching", cause="cancelled", failure=paused) == R.CANCELLED_BY_CONSUMER
    unpaused = paused.model_copy(update={"paused": False})
    assert cell_verdict(state=state, stage="searching", cause="deadline", failure=unpaused) == R.EXECUTION_TIMEOUT
    assert "paused" not in unpaused.model_dump() and paused.model_dump()["paused"] is True


@pytest.mark.parametrize("kind", [FailureKind.APPLICATION, FailureKind.OTHER])
@pytest.mark.parametrize("cause", ["completed", "deadline", "cancelled"])
def test_a_step_ended_by_hand_is_the_operators_not_curaflows(kind: FailureKind, cause: str) -> None:
    """``temporal activity fail`` (source ``CLI``) or a junk ``complete``: the cell ended
    ``internal_error`` ("read the worker's log", owner curaflow); it is
    ``step_ended_by_hand``, the operator's, whatever stopped the job after it."""
    failure = StepFailure(
        step="acquire", kind=kind, non_retryable=True, retry_state="NON_RETRYABLE_FAILURE", by_hand=True
    )
    assert cell_verdict(state="pending", stage="fetching", cause=cause, failure=failure) == R.STEP_ENDED_BY_HAND
    assert failure.owner == Owner.OPERATOR
    plain = failure.model_copy(update={"by_hand": False})
    assert failure_reason(plain) == R.INTERNAL_ERROR
    assert "by_hand" not in plain.model_dump()

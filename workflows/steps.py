"""Options and failure facts of a job's steps (pure helpers of :mod:`workflows.job`).

* :func:`step_config`: the ``workflow.ActivityConfig`` of ``search`` / ``fetch`` /
  ``deliver`` under a job's budgets (DESIGN.md decision 8);
* :func:`finish_config` / :data:`CANCEL_CONFIG` / :data:`ADMIT_CONFIG`: the job-level
  steps, which only touch the ledger — local activities: no task-queue round trip, one
  history event each instead of three plus a workflow task; a worker lost while one runs
  costs the workflow task timeout (:data:`curaflow.domain.execution.JOB_TASK_TIMEOUT`), after
  which another worker replays and runs it again (all three are idempotent);
* :func:`failure_facts`: what Temporal reported about a failed step, as a
  :class:`~curaflow.domain.verdicts.StepFailure` — raw facts; the reason is decided by
  :func:`curaflow.domain.verdicts.cell_verdict` when the job finishes;
* :func:`step_result`: a step's result as a ``CellUpdate``, or what makes it no result of
  curaflow's (a step completed from outside) — never a bug taken for one;
* :func:`published_status`: the ``JobStatus`` search attribute value, by a workflow-local
  rule (it feeds ``upsert_search_attributes`` commands, so a change to the API's
  projection never changes what running executions replay).

Deterministic and sandbox-clean: imports only pure modules.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.common import RetryPolicy
from temporalio.converter import PayloadConverter
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError
from temporalio.exceptions import TimeoutError as ActivityTimeoutError

with workflow.unsafe.imports_passed_through():
    from curaflow.domain.messages import Budgets, CellUpdate
    from curaflow.domain.verdicts import NON_RETRYABLE_TYPES, FailureKind, Step, StepFailure, attempt_budget
    from curaflow.domain.verdicts.failures import CLI_FAILURE_SOURCE, attempt_of

#: How far an activity attempt may run past the job deadline: the deadline cancels running
#: attempts and waits for them, so a request already out is finished and reported instead
#: of being cut off; less than the execution's own grace (10 min).
ATTEMPT_GRACE = timedelta(minutes=5)

#: What a local activity that ended without a result raises in workflow code (temporalio
#: 1.35, checked 2026-12-07): the activity's own ``ApplicationError`` when it raised one —
#: not wrapped in an ``ActivityError``, as a regular activity's is — and an
#: ``ActivityError`` whose cause is the ``TimeoutError`` when it timed out. Catch both.
LOCAL_ACTIVITY_FAILURES: tuple[type[Exception], ...] = (ActivityError, ApplicationError)


def local_activity_failure(err: BaseException) -> BaseException:
    """The failure a local activity ended with (:data:`LOCAL_ACTIVITY_FAILURES`): an
    ``ActivityError``'s cause, else ``err`` itself (the activity's ``ApplicationError``)."""
    if isinstance(err, ActivityError) and err.cause is not None:
        return err.cause
    return err


#: ``admit`` (a Task a Temporal client started the job with): retried while the ledger is
#: unreachable, but bounded, so a submission never waits for ever.
ADMIT_CONFIG = workflow.LocalActivityConfig(
    start_to_close_timeout=timedelta(seconds=30),
    schedule_to_close_timeout=timedelta(minutes=5),
    retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=10)),
    summary="admit the task",
)

#: ``request_cancel``: one ledger write and one Temporal call, recorded without waiting
#: for a task queue (a local activity). An attempt whose worker died is re-run by the
#: next worker's workflow task; an attempt that hangs is retried after this long (it was
#: 30 s, and the chaos suite's cancel storm with worker kills saw cancels take 31 s).
CANCEL_ATTEMPT_TIMEOUT = timedelta(seconds=10)

CANCEL_CONFIG = workflow.LocalActivityConfig(
    start_to_close_timeout=CANCEL_ATTEMPT_TIMEOUT,
    retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=5)),
    summary="record the cancel",
)
#: ``request_cancel`` of a run that holds no job (a refused cron-scheduled start): the same
#: call, nothing recorded in the ledger.
CRON_CANCEL_CONFIG = workflow.LocalActivityConfig(
    start_to_close_timeout=CANCEL_ATTEMPT_TIMEOUT,
    retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=5)),
    summary="refuse the cron schedule",
)

#: ``request_cancel`` of a run whose job ended ``cancelled`` while the run did not take the
#: cancel path (``workflows.job.CANCELLED_END``): only the run is cancelled, nothing recorded.
CANCELLED_END_CONFIG = workflow.LocalActivityConfig(
    start_to_close_timeout=CANCEL_ATTEMPT_TIMEOUT,
    retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=5)),
    summary="end Canceled, as the job did",
)


#: ``ended_elsewhere`` (a ``JobInput`` run stopped by its deadline before its first step,
#: ``workflows.job.LATE_REPORTING_RUN``): one ledger read and, for an ended job, one
#: visibility list; retried while the ledger or Temporal is away, as ``finish`` is.
ENDED_ELSEWHERE_CONFIG = workflow.LocalActivityConfig(
    start_to_close_timeout=timedelta(seconds=10),
    retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=10)),
    summary="ask whether another run holds the ended job",
)


#: ``paused_steps`` (at a deadline with steps in flight, ``workflows.job.PAUSED_STEPS``): one
#: describe of the execution (and its history when a step is paused); not retried — an
#: answer that does not come names no pause, and the deadline's stop goes on.
PAUSED_STEPS_CONFIG = workflow.LocalActivityConfig(
    start_to_close_timeout=timedelta(seconds=10),
    retry_policy=RetryPolicy(maximum_attempts=1),
    summary="ask which steps an operator paused",
)


def finish_config(summary: str) -> workflow.LocalActivityConfig:
    """``finish``: one ledger transaction; retried (with backoff) while the ledger is away."""
    return workflow.LocalActivityConfig(
        start_to_close_timeout=timedelta(seconds=30),
        retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=10)),
        summary=summary,
    )


def step_config(
    step: Step, budgets: Budgets, *, first: bool, deadline_at_ms: int, now_ms: int, task_queue: str | None
) -> workflow.ActivityConfig:
    """Options of one cell step.

    Args:
        step: ``search`` | ``fetch`` | ``deliver``.
        budgets: the job's budgets (ms).
        first: the cell's first step: it may wait in its queue the *queued* budget; any
            later step the *stall* budget (``schedule_to_start_timeout``).
        deadline_at_ms / now_ms: epoch ms (UTC); an attempt may run until the deadline
            plus :data:`ATTEMPT_GRACE`.
        task_queue: the step's queue (the account's rate gate, a route's own queue), or
            None for the workflow's.
    """
    queued = budgets.queued_timeout_ms if first else budgets.stall_timeout_ms
    remaining_ms = max(1000, deadline_at_ms - now_ms)
    config = workflow.ActivityConfig(
        schedule_to_start_timeout=timedelta(milliseconds=queued),
        start_to_close_timeout=timedelta(milliseconds=remaining_ms) + ATTEMPT_GRACE,
        heartbeat_timeout=timedelta(milliseconds=budgets.heartbeat_timeout_ms),
        cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        retry_policy=RetryPolicy(
            initial_interval=timedelta(milliseconds=budgets.retry_initial_interval_ms),
            backoff_coefficient=2.0,
            maximum_interval=timedelta(milliseconds=budgets.retry_max_interval_ms),
            maximum_attempts=attempt_budget(
                step,
                delivery_max_attempts=budgets.delivery_max_attempts,
                source_max_attempts=budgets.source_max_attempts,
            ),
            non_retryable_error_types=NON_RETRYABLE_TYPES,
        ),
    )
    if task_queue:
        config["task_queue"] = task_queue
    return config


def failure_facts(
    err: ActivityError, step: Step, *, first: bool, route: str | None = None, max_attempts: int | None = None
) -> StepFailure:
    """The facts of a failed step, from the ``ActivityError`` Temporal raised.

    Args:
        err: what Temporal raised for the step.
        step: the step.
        first: the step was the cell's first.
        route: the route of a ``deliver`` step.
        max_attempts: the ``maximum_attempts`` of the retry policy the step was scheduled
            with: kept, with the attempt's number the failure carries
            (:func:`~curaflow.domain.verdicts.failures.attempt_of`), only when it carries
            one — an operator's cut of the step's retries is told by the two
            (:func:`~curaflow.domain.verdicts.failures.operator_changed_options`). Reading
            them issues no command.
    """
    cause = err.cause
    facts = StepFailure(
        step=step,
        kind=FailureKind.OTHER,
        retry_state=err.retry_state.name if err.retry_state is not None else None,
        first_step=first,
        route=route,
        message=str(cause or err)[:500],
    )
    if isinstance(cause, ApplicationError):
        facts.kind = FailureKind.APPLICATION
        facts.error_type = cause.type
        facts.non_retryable = cause.non_retryable
        facts.by_hand = cause.failure is not None and cause.failure.source == CLI_FAILURE_SOURCE
        attempt = attempt_of(cause.details)
        if attempt is not None and max_attempts is not None:
            facts.attempt, facts.max_attempts = attempt, max_attempts
    elif isinstance(cause, ActivityTimeoutError):
        facts.kind = FailureKind.TIMEOUT
        facts.timeout_type = cause.type.name if cause.type is not None else None
    elif isinstance(cause, CancelledError):
        facts.kind = FailureKind.CANCELLED
    return facts


#: The encoding of every step result a worker of curaflow returns (the pydantic converter's).
STEP_RESULT_ENCODING = b"json/plain"


def step_result(converter: PayloadConverter, payload: Payload) -> CellUpdate | str:
    """A step's result read from its payload (the workflow decodes it, not the SDK).

    Only a ``json/plain`` payload that validates as a ``CellUpdate`` is a result of
    curaflow's. Any other — another encoding (a client completing the step with ``None``
    or bytes sends ``binary/null`` / ``binary/plain``, which the SDK's converter decodes
    without error into ``None`` / ``bytes`` whatever type is asked), JSON that is no
    ``CellUpdate`` (``temporal activity complete --result '"junk"'``) — is a step completed
    from outside curaflow: the problem is returned, and the workflow counts the step as
    ended by hand (DESIGN.md "Foreign input").

    Args:
        converter: the workflow's payload converter (``workflow.payload_converter()``).
        payload: the step's result as Temporal holds it.

    Returns:
        The ``CellUpdate``, or a one-line problem (at most 400 characters).

    Raises:
        Exception: anything but pydantic's ``ValidationError`` raised while decoding — a
            bug of curaflow (a ``TypeError`` in a validator …): it fails the workflow
            task, never the job (until 2026-12-06 every exception was taken for a foreign
            result and the cell ended ``step_ended_by_hand``).
    """
    encoding = payload.metadata.get("encoding", b"")
    if encoding != STEP_RESULT_ENCODING:
        return f"a {encoding.decode('utf-8', 'replace')[:80]!r} payload, not JSON"
    try:
        update = converter.from_payload(payload, CellUpdate)
    except ValueError as err:  # pydantic's ValidationError (JSON that is no CellUpdate, or no JSON)
        return str(err)[:400]
    if not isinstance(update, CellUpdate):  # the converter's own fault: a bug, not the step's
        raise TypeError(f"json/plain payload decoded as {type(update).__name__}, not CellUpdate")
    return update


def published_status(pending: int, cells: int) -> str:
    """``JobStatus`` while the job runs: ``queued`` while every cell is pending, then
    ``running``. The terminal value comes from ``finish``'s result, never from here.

    Args:
        pending: how many of the job's cells are in state ``pending``.
        cells: how many cells the job has (a job of none is ``queued``).
    """
    return "queued" if pending == cells else "running"

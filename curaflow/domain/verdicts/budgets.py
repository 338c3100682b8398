"""Which budget ended a job no workflow finished (the reconciler's decision): the deadline,
the queued budget or the stall budget, counting only time a step was really stuck."""

from __future__ import annotations

from pydantic import BaseModel

from curaflow.domain.verdicts.finish import FinishCause


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


#: How long before the job's deadline a pinned execution's workflow task must have begun waiting
#: for a worker of its build for that wait, not the deadline, to be what ended the job
#: (:func:`budget_cause`): 1 s (ms). The workflow's deadline timer fires at the deadline itself
#: (``JobInput.deadline_at_ms``, the ledger's ``deadline_at``, on Temporal's clock, which
#: stamps both the timer and the task) and schedules a workflow task then; a task waiting
#: since then is the deadline's own — the job's steps were still running at its deadline. The
#: margin covers the timer's rounding to milliseconds, nothing else.
PINNED_WAIT_BEFORE_DEADLINE_MS = 1_000


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
    pinned_unserved_since_ms: int | None = None,
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

    The deadline is not what ended a job whose execution is pinned to a build (Temporal
    Worker Versioning) whose workflow task had waited for a worker of that build since
    before the deadline (``pinned_unserved_since_ms`` at least
    :data:`PINNED_WAIT_BEFORE_DEADLINE_MS` before it): the workflow could not run at all, so
    a longer deadline would not have helped — ``pinned_build_unserved`` (the job still
    expires, ``deadline_exceeded``; the reason names the pin: since 2026-12-07, before
    ``deadline``, "retry with a longer deadline_ms"). Only where the deadline is the cause:
    a stall or a queued budget that ran out before it stays what it is (their reasons say
    no worker ran the job, which is true).

    Args:
        now_ms / deadline_at_ms / created_at_ms / started_at_ms / last_progress_ms:
            epoch ms, UTC (``last_progress_ms``: the latest heartbeat of any cell, else
            ``started_at_ms``).
        queued_budget_ms / stall_budget_ms: the job's budgets (resolved, ms).
        deadline_grace_ms: how long past its deadline a job is left to its workflow.
        pending: what Temporal says of the execution's pending steps (None: not asked,
            the ledger's view alone).
        pinned_unserved_since_ms: when the pending workflow task of an execution pinned to
            a build began waiting for a worker (epoch ms, Temporal's clock: when its current
            attempt was scheduled, the first attempt's original scheduled time;
            :attr:`~curaflow.ledger.reconciler.executions.Execution.pinned_unserved_since_ms`);
            None when the execution is not pinned, or no workflow task of it waits.

    Returns:
        ``deadline`` | ``pinned_build_unserved`` | ``queued_too_long`` | ``stalled``, or
        None (nothing ran out yet).
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
        if (
            pinned_unserved_since_ms is not None
            and pinned_unserved_since_ms <= deadline_at_ms - PINNED_WAIT_BEFORE_DEADLINE_MS
        ):
            return FinishCause.PINNED_BUILD_UNSERVED  # no worker of its build ran the workflow
    return cause

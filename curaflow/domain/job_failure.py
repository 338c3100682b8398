"""How a job that ended ``failed`` or ``expired`` ends its Temporal execution (pure).

A job's execution **fails** when the job did (DESIGN.md decision 15): the Temporal UI's
list then shows a red *Failed* badge for it instead of a green *Completed* one, and
``temporal workflow list --query 'ExecutionStatus = "Failed"'`` finds failed jobs. The
result contract for Temporal clients:

* ``succeeded`` → the execution completes; its result is the final :class:`JobState`;
* ``cancelled`` by a cancel → the execution ends ``Canceled`` (decision 7);
* ``failed`` / ``expired`` → the execution fails with a non-retryable
  ``ApplicationError`` whose ``type`` is ``job_failed`` / ``job_expired`` and whose first
  detail is the final :class:`JobState` (status, business status, cells with their
  reasons, every delivery) — :func:`state_of` reads it back;
* a refused start (``invalid_params``, ``idempotency_conflict`` …) fails with the
  protocol code as ``type`` (no job state: there is no job).

Pure module: imported by workflows through the sandbox pass-through.
"""

from __future__ import annotations

from temporalio.exceptions import ApplicationError

from curaflow.domain.messages import JobState

#: Job status → the ``type`` of the failure its execution ends with.
JOB_FAILURE_TYPES: dict[str, str] = {"failed": "job_failed", "expired": "job_expired"}


def job_failure(state: JobState) -> ApplicationError:
    """The failure a job's execution ends with when ``state.status`` is ``failed`` /
    ``expired``: ``type`` from :data:`JOB_FAILURE_TYPES`, details ``[state]``, not retryable;
    the message names the job, its business status and the reason of its first failed cell.

    Raises:
        KeyError: ``state`` is not a failed or expired job.
    """
    kind = JOB_FAILURE_TYPES[str(state.status)]
    why = next((f"{c.target_id}: {c.reason}" for c in state.cells if c.reason), None)
    message = f"job {state.job_id} {state.status} (business status {state.business_status}" + (
        f"; {why})" if why else ")"
    )
    return ApplicationError(message, state, type=kind, non_retryable=True)


def state_of(error: BaseException | None) -> JobState | None:
    """The final :class:`JobState` carried by a failed job's execution failure.

    Args:
        error: what the client got — a ``WorkflowFailureError`` / ``ChildWorkflowError`` /
            ``NexusOperationError`` (its causes are read, at any depth: a Nexus
            operation's failure wraps the job's once or twice) or the ``ApplicationError``
            itself.

    Returns:
        The job state, or None when the failure is not a failed job's (a refused start, a
        bug, a terminate).
    """
    seen: set[int] = set()
    current = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ApplicationError) and current.type in JOB_FAILURE_TYPES.values() and current.details:
            return JobState.model_validate(current.details[0])
        current = getattr(current, "cause", None) or current.__cause__
    return None

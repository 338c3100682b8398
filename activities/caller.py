"""Which execution may run a job's activities: the job's own ``JobWorkflow``, nothing else.

Every activity that takes a job's input (``acquire``, ``search``, ``fetch``, ``deliver``,
``finish``, ``request_cancel``, ``admit``, ``push_events``) is registered on curaflow's
task queues under a plain name, so any workflow that schedules that name there — a
workflow of another type, a ``JobWorkflow`` started under another id, a standalone
activity (``temporal activity start``, no workflow at all) — would run the job's step
with a job id it chose: bind works, send, end another job in the ledger. The job's own
execution is the one whose workflow id *is* the job id (decision 1: HTTP, a Temporal
client's Task, a child job, the Nexus operation, a schedule's occurrence and the
reconciler all start ``JobWorkflow`` under the job id; a reset or a reporting run keeps
it), so each of these activities asks, before it touches anything, whether the calling
execution is that one (:func:`require_own_job`). A mismatch fails the attempt
non-retryably (type :data:`FOREIGN_CALLER`, both ids named) with nothing written.

The one other legitimate caller is the sweeper's ``EventPushWorkflow`` for
``push_events`` only, under :func:`curaflow.jobs.pushes.push_workflow_id` (or
``<job_id>/push-events``, the id it had before, for a push run still open from then).

Pure rule: :func:`foreign_caller`; the activity-side check: :func:`require_own_job`.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from curaflow.domain.execution import JOB_WORKFLOW, PUSH_WORKFLOW
from curaflow.jobs.pushes import push_workflow_id
from curaflow.observability.logs import get_logger

log = get_logger("curaflow.activities")

#: ``ApplicationError`` type of an attempt called by an execution that is not the job's.
FOREIGN_CALLER = "foreign_caller"


def legacy_push_workflow_id(job_id: str) -> str:
    """The id the sweeper's push run of ``job_id`` had before ``push-events:<job_id>``."""
    return f"{job_id}/push-events"


def foreign_caller(
    job_id: str | None,
    workflow_id: str | None,
    workflow_type: str | None,
    *,
    pushes: bool = False,
) -> str | None:
    """Why the execution ``(workflow_id, workflow_type)`` may not run an activity of job
    ``job_id``, or None when it may.

    Args:
        job_id: the job the activity's input names; for an activity whose job is the
            calling execution's own id (``request_cancel``), that id — None when no
            workflow called it.
        workflow_id / workflow_type: the calling execution (both None for a standalone
            activity, which no workflow started).
        pushes: the activity is ``push_events``, which the sweeper's
            ``EventPushWorkflow`` runs too (under :func:`~curaflow.jobs.pushes.push_workflow_id`
            or :func:`legacy_push_workflow_id`).

    Returns:
        None for ``JobWorkflow`` under the id ``job_id`` (and, with ``pushes``, for
        ``EventPushWorkflow`` under a push id of ``job_id``); else a sentence naming both ids
        (or saying it was called outside any workflow, naming no job, when ``job_id`` is None).
    """
    if job_id is None:  # the job would have been the caller's own id, and there is no caller
        return (
            f"called outside any workflow (a standalone activity): it runs only for the job of its own "
            f"{JOB_WORKFLOW} execution, and there is none: nothing done"
        )
    if workflow_type == JOB_WORKFLOW and workflow_id == job_id:
        return None
    if (
        pushes
        and workflow_type == PUSH_WORKFLOW
        and workflow_id in (push_workflow_id(job_id), legacy_push_workflow_id(job_id))
    ):
        return None
    if workflow_id is None:
        caller = "a standalone activity, outside any workflow"
    else:
        caller = f"workflow {workflow_id!r} of type {workflow_type!r}"
    return (
        f"job {job_id!r} runs only in its own {JOB_WORKFLOW} execution, whose workflow id is the job id; "
        f"called by {caller}: nothing done"
    )


def require_own_job(job_id: str | None, *, pushes: bool = False) -> None:
    """Fail this attempt unless the calling execution is job ``job_id``'s own (:func:`foreign_caller`;
    ``job_id`` None: the job is the caller's own id and no workflow called).

    Called first by every activity that takes a job's input, before it reads or writes the
    ledger, so a foreign caller gets nothing done and learns nothing of the job.

    Raises:
        ApplicationError: type :data:`FOREIGN_CALLER`, non-retryable (another attempt of
            the same caller is refused the same), details ``{job_id, workflow_id,
            workflow_type, activity_type}``.
    """
    info = activity.info()
    why = foreign_caller(job_id, info.workflow_id, info.workflow_type, pushes=pushes)
    if why is None:
        return
    log.warning(
        "activity.foreign_caller",
        activity=info.activity_type,
        job_id=job_id,
        workflow_id=info.workflow_id,
        workflow_type=info.workflow_type,
    )
    raise ApplicationError(
        f"{info.activity_type}: {why}",
        {
            "job_id": job_id,
            "workflow_id": info.workflow_id,
            "workflow_type": info.workflow_type,
            "activity_type": info.activity_type,
        },
        type=FOREIGN_CALLER,
        non_retryable=True,
    )

"""A job as a step of another workflow: start it as a child, or attach to it (docs/temporal.md
"From another workflow").

For workflows of curaflow's users, in curaflow's namespace (another namespace: the Nexus
service, :mod:`curaflow.temporal.nexus_service`). Both helpers return the job's final
:class:`~curaflow.domain.messages.JobState` whatever it ended as (``succeeded``,
``failed``, ``expired``, ``cancelled``) and raise only for a refusal:

.. code-block:: python

    from temporalio import workflow
    with workflow.unsafe.imports_passed_through():
        from workflows.callers import run_job

    @workflow.defn
    class Nightly:
        @workflow.run
        async def run(self, task: dict) -> str:
            state = await run_job(task)          # JobState
            return state.status

* :func:`run_job` starts the job as a **child workflow** under its job id (reuse policy
  ``REJECT_DUPLICATE``, parent close policy ``REQUEST_CANCEL``): the job shows as the
  parent's child in the UI, and cancelling (or terminating) the parent cancels the job —
  it ends ``cancelled``, its cells ``cancelled_by_consumer``, and the parent's
  cancellation goes on. So does every other close of the parent's run while the job
  runs, **continue-as-new included** (Temporal applies the parent close policy then too;
  a new run asking again is told ``cancelled``): await it before continuing as new, or
  use :func:`follow_job`, whose job a continue-as-new leaves to the new run. A reset of
  the parent cancels nothing: the job runs on and the new run attaches. When the id
  already has a run — the job was started over HTTP, by a schedule or by another
  client, or it already ended — Temporal refuses the child
  (``WorkflowAlreadyStartedError``) and the helper **attaches** to it instead
  (:func:`follow_job`): the same outcome, no second execution;
* :func:`follow_job` attaches to the job of a Task whoever started it: the
  ``follow_job`` activity on curaflow's task queue admits the Task as ``POST /jobs``
  does (the same Task is the same job, started if nobody did yet; another is
  ``idempotency_conflict``) and waits for the job's end; cancelling the caller cancels
  the job too (``cancel_job=False`` only stops waiting).

A refusal (``invalid_params``, ``idempotency_conflict`` …) is raised as a non-retryable
``ApplicationError`` whose ``type`` is the protocol code and whose first detail is
``{code, message, detail, http_status}`` (:mod:`curaflow.temporal.refusals`), so a caller
can branch on ``err.type``. Every helper call costs the caller's history a child
workflow (or an activity when it attaches) — nothing is added to the job's — and, for a
Task whose values hold markdown, one ``escaped-start-metadata`` marker (the child's summary
and details show them as text, :mod:`workflows.presentation_frozen`).

Deterministic and sandbox-clean: imports only pure modules.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import ChildWorkflowError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from curaflow.domain.execution import EXECUTION_GRACE, JOB_TASK_TIMEOUT, job_workflow
    from curaflow.domain.job_failure import state_of
    from curaflow.domain.messages import FollowJob, JobState
    from curaflow.domain.presentation import task_static_details, task_summary
    from curaflow.protocol.errors import PROTOCOL_CODES, ProtocolError, invalid_params
    from curaflow.protocol.models import MAX_DEADLINE_MS, Task
    from curaflow.protocol.task import manual_job_id, validate_task
    from curaflow.temporal.refusals import as_failure, refusal_of
    from workflows import presentation_frozen as frozen

#: The task queue curaflow's workers serve (``temporal.task_queue``) unless told otherwise.
DEFAULT_TASK_QUEUE = "curaflow"
#: The longest a job's execution may take: the longest deadline a Task may ask for plus
#: Temporal's grace (:data:`curaflow.jobs.submit.MAX_EXECUTION_TIMEOUT`).
MAX_JOB_RUN = timedelta(milliseconds=MAX_DEADLINE_MS) + EXECUTION_GRACE
#: A follower's heartbeat timeout: its activity reads the job every second.
FOLLOW_HEARTBEAT_TIMEOUT = timedelta(seconds=30)


def _body(task: Task | Mapping[str, Any]) -> dict[str, Any]:
    return task.model_dump(mode="json", exclude_none=True) if isinstance(task, Task) else dict(task)


def job_id_of(task: Task | Mapping[str, Any], target_id: str | None = None) -> str:
    """The job id of ``task`` (``<target_id>@manual-<key lowercased>``), validating it.

    Raises:
        ApplicationError: the Task is invalid, or names no target and ``target_id`` is not
            given (``invalid_params``, non-retryable).
    """
    try:
        validated = validate_task(_body(task))
    except ProtocolError as err:
        raise as_failure(err) from None
    target = validated.target_id or target_id
    if not target:
        raise as_failure(invalid_params("the task names no target: set params.target_id", field="params.target_id"))
    return manual_job_id(target, validated.idempotency_key)


async def run_job(
    task: Task | Mapping[str, Any], *, task_queue: str = DEFAULT_TASK_QUEUE, target_id: str | None = None
) -> JobState:
    """Run the job of ``task`` as a child workflow, or attach to it when its id has a run.

    Args:
        task: the protocol Task (a ``Task`` or its JSON).
        task_queue: curaflow's main task queue.
        target_id: the target when the Task names none (the server's single eligible one).

    Returns:
        The job's final state, whatever it ended as.

    Raises:
        ApplicationError: a refusal (non-retryable; ``type`` = the protocol code).
        ChildWorkflowError: this workflow was cancelled (the job was cancelled with it).
    """
    body = _body(task)
    job_id = job_id_of(body, target_id)
    # The job's summary and details show the Task's values as text (the UI renders
    # markdown); a workflow that called this before keeps the text it gave, asked only
    # where it differs (a Task holding markdown).
    summary, details = task_summary(body, job_id), task_static_details(body, job_id)
    before = frozen.task_summary(body, job_id), frozen.task_static_details(body, job_id)
    if (summary, details) != before and not workflow.patched(frozen.ESCAPED_METADATA):
        summary, details = before
    try:
        child = await workflow.start_child_workflow(
            job_workflow(str(body["job_type"])),  # validated by job_id_of
            body,
            id=job_id,
            task_queue=task_queue,
            result_type=JobState,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL,
            cancellation_type=workflow.ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED,
            execution_timeout=MAX_JOB_RUN,
            task_timeout=JOB_TASK_TIMEOUT,
            static_summary=summary,
            static_details=details,
        )
    except WorkflowAlreadyStartedError:
        return await follow_job(body, task_queue=task_queue)
    try:
        return await child
    except ChildWorkflowError as err:
        if workflow.cancellation_reason() is not None:
            raise  # this workflow was cancelled: the job was cancelled with it
        state = state_of(err)
        if state is not None:
            return state  # failed or expired: the final state rides on the failure
        refusal = refusal_of(err)
        if refusal is not None:
            raise as_failure(refusal) from None
        # Cancelled by someone else, terminated, timed out: the ledger has the outcome.
        return await follow_job(body, task_queue=task_queue, cancel_job=False)


async def follow_job(
    task: Task | Mapping[str, Any], *, task_queue: str = DEFAULT_TASK_QUEUE, cancel_job: bool = True
) -> JobState:
    """Attach to the job of ``task`` (started by anyone, or by this call) and wait for its end.

    Args:
        task: the protocol Task.
        task_queue: curaflow's main task queue (the ``follow_job`` activity runs there).
        cancel_job: cancel the job when this workflow is cancelled.

    Returns:
        The job's final state, whatever it ended as.

    Raises:
        ApplicationError: a refusal (non-retryable; ``type`` = the protocol code).
        ActivityError: this workflow was cancelled (the job too, with ``cancel_job``).
    """
    try:
        return await workflow.execute_activity(
            "follow_job",
            FollowJob(task=_body(task), cancel_job=cancel_job),
            result_type=JobState,
            task_queue=task_queue,
            start_to_close_timeout=MAX_JOB_RUN,
            heartbeat_timeout=FOLLOW_HEARTBEAT_TIMEOUT,
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            retry_policy=RetryPolicy(
                maximum_interval=timedelta(seconds=10), non_retryable_error_types=list(PROTOCOL_CODES)
            ),
            summary=f"follow job {job_id_of(task)}" if _names_target(task) else "follow job",
        )
    except Exception as err:
        refusal = refusal_of(err)
        if refusal is not None and workflow.cancellation_reason() is None:
            raise as_failure(refusal) from None
        raise


def _names_target(task: Task | Mapping[str, Any]) -> bool:
    params = _body(task).get("params")
    return isinstance(params, dict) and isinstance(params.get("target_id"), str)

"""Starting jobs from a Temporal client (docs/temporal.md "Starting jobs from a Temporal client").

A job is one ``JobWorkflow`` execution whose workflow id is the job id; a Temporal
client starts it with the protocol Task as its input (DESIGN.md decision 14).
:func:`start_job` does it idempotently like ``POST /jobs``, with Temporal's
update-with-start: the start (conflict policy ``USE_EXISTING``, reuse policy
``REJECT_DUPLICATE``) carries the ``admission`` update, which answers once the Task is
admitted:

.. code-block:: python

    from curaflow.protocol.models import Task
    from curaflow.jobs.submit import start_job

    task = Task.model_validate({"protocol_version": "1", "job_type": "candidate_search",
                                "idempotency_key": "tc-1", "params": {"target_id": "demo"}})
    handle = await start_job(client, task, task_queue="curaflow")
    state = await handle.result()   # JobState; handle.query(JobWorkflow.status) meanwhile

* the same Task again — while the job is queued, runs, or after it ended (completed,
  failed, cancelled, terminated) — returns the handle of the job's own execution;
  ``result()`` is its outcome (docs/temporal.md, the result contract);
* another Task under the same key raises :class:`~curaflow.protocol.errors.ProtocolError`
  ``idempotency_conflict``, in every state of the first job, as ``POST /jobs`` answers 409;
* an invalid Task raises ``ProtocolError`` (``invalid_params`` …) and leaves nothing behind.

Nothing of this adds a run under the job id (:mod:`curaflow.temporal.job_runs`): once
the job's run closed, Temporal refuses the start, and the answer is read from that run
(its ``admission_answer`` query: the same admission rules, no I/O).

Any SDK or the ``temporal`` CLI can do the same (``temporal workflow
execute-update-with-start --update-name admission --id-reuse-policy RejectDuplicate …``,
then ``temporal workflow query --type admission_answer`` once the job ended).

Pure helpers plus one thin start function; nothing here is needed by the worker.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from temporalio.client import Client, WithStartWorkflowOperation, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy

from curaflow.domain.execution import JOB_TASK_TIMEOUT, job_workflow
from curaflow.domain.messages import AdmissionAnswer, JobState
from curaflow.domain.presentation import task_static_details, task_summary
from curaflow.protocol.errors import ProtocolError
from curaflow.protocol.keys import manual_job_id
from curaflow.protocol.models import Task
from curaflow.protocol.task import validate_task
from curaflow.temporal.job_runs import JOB_ID_CONFLICT_POLICY, JOB_ID_REUSE_POLICY, JobRunClosed, start_run
from curaflow.temporal.refusals import from_details, refusal_of

#: Start options of a Temporal client's start: starting the job again while it is open
#: attaches to its execution; once it closed, Temporal refuses the start (no run is ever
#: added under a job id: :mod:`curaflow.temporal.job_runs`); a lost worker holds the job
#: up at most 5 s.
JOB_START_OPTIONS: dict[str, Any] = {
    "id_conflict_policy": JOB_ID_CONFLICT_POLICY,
    "id_reuse_policy": JOB_ID_REUSE_POLICY,
    "task_timeout": JOB_TASK_TIMEOUT,
}
#: The ``JobWorkflow`` update that admits a Task (update-with-start).
ADMISSION_UPDATE = "admission"
#: The ``JobWorkflow`` query that answers a Task from a run, open or closed.
ADMISSION_ANSWER_QUERY = "admission_answer"
#: The execution timeout ``start_job`` sets: the longest deadline a Task may ask for
#: (7 days) plus Temporal's grace. The job itself ends at its own deadline.
MAX_EXECUTION_TIMEOUT = timedelta(days=7, minutes=10)


def job_id_for(task: Task | Mapping[str, Any], *, target_id: str | None = None) -> str:
    """The job id (= workflow id) of ``task``: ``<target_id>@manual-<key lowercased>``.

    Args:
        task: the Task (model or plain JSON).
        target_id: the target when the Task does not name one in ``params.target_id``
            (a server with a single eligible target runs it there: pass that id).

    Raises:
        ValueError: the Task is invalid (the message is the protocol error) or names no
            target and ``target_id`` is not given.
    """
    body = task.model_dump(mode="json", exclude_none=True) if isinstance(task, Task) else dict(task)
    try:
        validated = validate_task(body)
    except ProtocolError as err:
        raise ValueError(f"{err.code}: {err.message} {err.detail or ''}".strip()) from err
    target = validated.target_id or target_id
    if not target:
        raise ValueError("the task names no target: set params.target_id, or pass target_id")
    return manual_job_id(target, validated.idempotency_key)


async def start_job(
    client: Client,
    task: Task | Mapping[str, Any],
    *,
    task_queue: str = "curaflow",
    target_id: str | None = None,
) -> WorkflowHandle[Any, JobState]:
    """Start, or attach to, the job of ``task``, once it is admitted (update-with-start).

    Returns:
        The handle of the job's execution, bound to its run (``result()`` → :class:`JobState`
        for a job that succeeded; see the result contract in docs/temporal.md).

    Raises:
        ValueError: the Task names no target and ``target_id`` is not given.
        ProtocolError: the Task is refused, with the ``code``, ``http_status`` and
            ``detail`` ``POST /jobs`` answers: an invalid Task before anything is sent
            (``invalid_params``, ``unsupported_protocol_version``), then admission's
            answers — ``idempotency_conflict`` for another Task under a used key,
            whatever state its job is in; ``unknown_target`` …
        temporalio.service.RPCError: Temporal refused the request.
        temporalio.client.RPCTimeoutOrCancelledError: no answer within the client's RPC
            timeout (no worker admitted the Task meanwhile); the same call again is safe.
        temporalio.client.WorkflowQueryFailedError: the job ended and no worker answered
            the ``admission_answer`` query.
    """
    body = task.model_dump(mode="json", exclude_none=True) if isinstance(task, Task) else dict(task)
    validated = validate_task(body)  # an invalid Task is refused here, before anything is sent
    target = validated.target_id or target_id
    if not target:
        raise ValueError("the task names no target: set params.target_id, or pass target_id")
    job_id = manual_job_id(target, validated.idempotency_key)

    async def send(reuse: WorkflowIDReusePolicy, update_id: str) -> WorkflowHandle[Any, JobState]:
        # Always USE_EXISTING: the admission update needs the run it reaches (a run of
        # another workflow type has no such update: the start fails with its refusal).
        operation: WithStartWorkflowOperation[Any, JobState] = WithStartWorkflowOperation(
            job_workflow(validated.job_type),  # by name: the workflow layer sits above this one (DESIGN.md "Layers")
            body,
            id=job_id,
            task_queue=task_queue,
            execution_timeout=MAX_EXECUTION_TIMEOUT,
            static_summary=task_summary(body, job_id),
            static_details=task_static_details(body, job_id),
            result_type=JobState,
            **{**JOB_START_OPTIONS, "id_reuse_policy": reuse},
        )
        try:
            await client.execute_update_with_start_workflow(
                ADMISSION_UPDATE, body, start_workflow_operation=operation, id=update_id, result_type=JobState
            )
        except BaseException:
            retrieve_start_error(operation)
            raise
        return await operation.workflow_handle()

    async def start(reuse: WorkflowIDReusePolicy, _: WorkflowIDConflictPolicy) -> WorkflowHandle[Any, JobState]:
        try:
            return await send(reuse, admission_update_id(body))
        except WorkflowUpdateFailedError as err:
            if refusal_of(err) is not None:
                raise refused(err) from None
        # Not admission's answer (a failure of the admit step itself, which the run may have
        # answered an earlier call with the same Task): asked once more, under an id of its own.
        try:
            return await send(reuse, f"admission-{uuid.uuid4().hex}")
        except WorkflowUpdateFailedError as err:
            raise refused(err) from None

    try:
        return await start_run(client, job_id, start)
    except JobRunClosed as closed:
        return await answer_from_run(client, job_id, closed.run_id, body)


def retrieve_start_error(operation: WithStartWorkflowOperation[Any, Any]) -> None:
    """Mark the error a failed update-with-start left in ``operation``'s handle as seen.

    The SDK sets the operation's handle future to the start's error whenever the call fails
    before Temporal answered the start (``WorkflowAlreadyStartedError``, an ``RPCError``, a
    cancelled or timed-out call: ``temporalio.client`` ``_on_start_error``); nobody awaits
    that future after a failed call, so asyncio logged "Future exception was never
    retrieved" with the whole traceback in the caller's process. The call's own exception is
    what the caller gets. The future is the SDK's private ``_workflow_handle``: when it
    moves, this does nothing.
    """
    future = getattr(operation, "_workflow_handle", None)
    if isinstance(future, asyncio.Future) and future.done() and not future.cancelled():
        future.exception()


async def answer_from_run(
    client: Client, job_id: str, run_id: str, task: Mapping[str, Any]
) -> WorkflowHandle[Any, JobState]:
    """The admission's answer to ``task`` for a job whose run closed: the run's
    ``admission_answer`` query (a worker replays the run; nothing is written, no run added).

    Returns:
        The handle of the job's run when the Task is the job's.

    Raises:
        ProtocolError: the refusal (``idempotency_conflict``, ``invalid_params`` …).
    """
    handle: WorkflowHandle[Any, JobState] = client.get_workflow_handle(job_id, run_id=run_id, result_type=JobState)
    answer = await handle.query(ADMISSION_ANSWER_QUERY, dict(task), result_type=AdmissionAnswer)
    if answer.refusal is not None:
        raise from_details(answer.refusal)
    return handle


def admission_update_id(body: Mapping[str, Any]) -> str:
    """The ``admission`` update's id for the Task ``body``: one id per Task text, so Temporal
    answers the same Task sent again to a run (a caller's retry, ``start_job`` of a running
    job) with that run's first answer instead of accepting another update.

    Each accepted update is recorded in the run's history with its input (up to
    ``api.max_body_bytes``, 64 KiB by default) and counts against Temporal's total of
    updates per run (``history.maxTotalUpdates``, 2 000 by default). Until 2026-12-07 every
    call sent an update with a random id: past that total, ``start_job`` of a running job
    raised Temporal's ``RPCError`` "The limit on the total number of distinct updates in
    this workflow has been reached" instead of answering the job, and ~800 calls with a
    64 KiB Task grew the history past Temporal's 50 MB limit, which terminates the run
    (``tests/workflow/test_update_limit.py``). Temporal's own advice: "Make sure any
    duplicate updates share an Update ID so the server can deduplicate them".

    Returns:
        ``admission-`` and the SHA-256 (hex) of the Task's JSON with sorted members (ids
        are compared as text: the same Task in another member order is the same id).
    """
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return f"admission-{hashlib.sha256(canonical.encode()).hexdigest()}"


def refused(err: WorkflowUpdateFailedError) -> Exception:
    """The :class:`ProtocolError` an ``admission`` update failed with (else ``err`` itself)."""
    return refusal_of(err) or err

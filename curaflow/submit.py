"""Starting jobs from a Temporal client (docs/temporal.md "Starting jobs from a Temporal client").

A job is one ``JobWorkflow`` execution whose workflow id is the job id; a Temporal
client starts it with the protocol Task as its input (DESIGN.md decision 14):

.. code-block:: python

    from curaflow.protocol.models import Task
    from curaflow.submit import job_id_for, start_job
    from workflows.job import JobWorkflow

    task = Task.model_validate({"protocol_version": "1", "job_type": "candidate_search",
                                "idempotency_key": "tc-1", "params": {"target_id": "demo"}})
    handle = await start_job(client, task, task_queue="curaflow")   # or, by hand:
    handle = await client.start_workflow(JobWorkflow.run, task, id=job_id_for(task),
                                         task_queue="curaflow", **JOB_START_OPTIONS)
    state = await handle.result()   # JobState; handle.query(JobWorkflow.status) meanwhile

The workflow admits the Task exactly as ``POST /jobs`` does (same validation order,
codes and idempotency — a key first used over HTTP and then from Temporal is one job);
a refusal fails the execution with a non-retryable ``ApplicationError`` whose ``type`` is
the protocol code. Any SDK or the ``temporal`` CLI can do the same with the Task as JSON.

Pure helpers plus one thin start function; nothing here is needed by the worker.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy

from curaflow.domain.execution import JOB_TASK_TIMEOUT
from curaflow.domain.messages import JobState
from curaflow.protocol.errors import ProtocolError
from curaflow.protocol.models import Task
from curaflow.protocol.task import manual_job_id, validate_task
from curaflow.temporal import JOB_ID_REUSE_POLICY

#: Start options that make a start idempotent like ``POST /jobs``: starting the same job
#: again attaches to its execution; an execution that failed before it became a job (a
#: refused Task) does not block the id; a lost worker holds the job up at most 5 s.
JOB_START_OPTIONS: dict[str, Any] = {
    "id_conflict_policy": WorkflowIDConflictPolicy.USE_EXISTING,
    "id_reuse_policy": JOB_ID_REUSE_POLICY,
    "task_timeout": JOB_TASK_TIMEOUT,
}
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
    """Start (or attach to) the job of ``task``; returns the handle of its execution.

    Raises:
        ValueError: as :func:`job_id_for`.
        temporalio.service.RPCError: Temporal refused the start.
    """
    from workflows.job import JobWorkflow

    body: Task | dict[str, Any] = task if isinstance(task, Task) else dict(task)
    return await client.start_workflow(
        JobWorkflow.run,
        body,
        id=job_id_for(task, target_id=target_id),
        task_queue=task_queue,
        execution_timeout=MAX_EXECUTION_TIMEOUT,
        **JOB_START_OPTIONS,
    )

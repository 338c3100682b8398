"""What Temporal says of a job's execution: whether it exists, why a closed one's job must
finish, how long its workflow task has waited for a worker, its pending steps; and the
executions of jobs that closed without their job's finish.

See :mod:`curaflow.ledger.reconciler` (rules 2–4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from curaflow.domain.execution import job_workflow_types
from curaflow.domain.verdicts import FinishCause, PendingStep

#: How far back a tick looks for closed executions.
CLOSED_WINDOW_MS = 3_600_000


#: Close status of an execution → why its job finishes.
CLOSE_CAUSES: dict[WorkflowExecutionStatus, FinishCause] = {
    WorkflowExecutionStatus.TERMINATED: FinishCause.TERMINATED,
    WorkflowExecutionStatus.TIMED_OUT: FinishCause.TIMED_OUT,
    WorkflowExecutionStatus.FAILED: FinishCause.WORKFLOW_FAILED,
    WorkflowExecutionStatus.CANCELED: FinishCause.CANCELLED,
    WorkflowExecutionStatus.COMPLETED: FinishCause.WORKFLOW_FAILED,  # closed without finishing its job
    WorkflowExecutionStatus.CONTINUED_AS_NEW: FinishCause.WORKFLOW_FAILED,
}


@dataclass
class Execution:
    """What Temporal says of a job's execution (:func:`describe_execution`).

    Attributes:
        exists: Temporal knows the execution.
        close_cause: why its job must finish when it is closed, else None.
        closed_at_ms: when it closed (epoch ms), else None.
        waiting_for_worker_ms: how long its pending workflow task has waited for a worker
            (0 when none waits or a worker holds it).
    """

    exists: bool
    close_cause: FinishCause | None = None
    closed_at_ms: int | None = None
    waiting_for_worker_ms: int = 0
    steps: list[PendingActivity] = field(default_factory=list)

    def pending(self, served: set[str]) -> list[PendingStep]:
        """Its pending steps as :func:`~curaflow.domain.verdicts.budget_cause` reads them,
        given the task queues a live worker serves (:func:`served_queues`)."""
        return [step.liveness(served) for step in self.steps]

    def closed_cause_for(self, created_at_ms: int) -> FinishCause | None:
        """The close cause, if this execution closed after a job created at
        ``created_at_ms`` (an earlier run under the same id — say a refused submission —
        is not the job's)."""
        if self.close_cause is None or self.closed_at_ms is None or self.closed_at_ms < created_at_ms:
            return None
        return self.close_cause


#: The ``task_queue`` word of a source queue (``<task_queue>-source-<account>``).
SOURCE_QUEUE_MARK = "-source-"
#: Activities that run on a source queue (by type, when Temporal does not say the queue).
SOURCE_ACTIVITIES = frozenset({"acquire", "search", "fetch"})


@dataclass
class PendingActivity:
    """One pending activity of a running execution, as its describe reports it.

    Attributes:
        held: a worker holds an attempt (``STARTED`` / ``CANCEL_REQUESTED``).
        last_beat_ms: the held attempt's last heartbeat, else its start (epoch ms).
        backoff_until_ms: the next attempt's scheduled time while in retry backoff (or
            paused: waiting on purpose), else None.
        task_queue: its task queue ("" when Temporal does not say).
        activity_type: its type (``acquire``, ``deliver`` …).
    """

    held: bool
    last_beat_ms: int | None
    backoff_until_ms: int | None
    task_queue: str
    activity_type: str

    def liveness(self, served: set[str]) -> PendingStep:
        """As a :class:`~curaflow.domain.verdicts.PendingStep`: a source queue is served
        when its lease has a live owner; any other queue when any worker process is alive
        (every worker process serves the main and route queues and stands by for every
        source queue, so a live lease owner is a live worker)."""
        source = SOURCE_QUEUE_MARK in self.task_queue or (
            not self.task_queue and self.activity_type in SOURCE_ACTIVITIES
        )
        queue_served = self.task_queue in served if source and self.task_queue else bool(served)
        return PendingStep(
            held=self.held,
            last_beat_ms=self.last_beat_ms,
            backoff_until_ms=self.backoff_until_ms,
            queue_served=queue_served,
        )


def _ms(ts: object) -> int | None:
    """Epoch ms of a protobuf ``Timestamp`` field that is set (seconds > 0), else None."""
    seconds = getattr(ts, "seconds", 0)
    if not seconds:
        return None
    return int(seconds * 1000 + getattr(ts, "nanos", 0) // 1_000_000)


def _pending_activities(raw: object) -> list[PendingActivity]:
    found: list[PendingActivity] = []
    for info in getattr(raw, "pending_activities", []):
        state = PendingActivityState.Name(info.state)
        held = state in ("PENDING_ACTIVITY_STATE_STARTED", "PENDING_ACTIVITY_STATE_CANCEL_REQUESTED")
        beats = [t for t in (_ms(info.last_heartbeat_time), _ms(info.last_started_time)) if t is not None]
        backoff = _ms(info.next_attempt_schedule_time)
        if info.paused or state in ("PENDING_ACTIVITY_STATE_PAUSED", "PENDING_ACTIVITY_STATE_PAUSE_REQUESTED"):
            backoff = 2**62  # paused by an operator: waiting on purpose
        queue = info.activity_options.task_queue.name if info.HasField("activity_options") else ""
        found.append(
            PendingActivity(
                held=held,
                last_beat_ms=max(beats) if beats else None,
                backoff_until_ms=None if held else backoff,
                task_queue=queue,
                activity_type=info.activity_type.name,
            )
        )
    return found


async def describe_execution(client: Client, job_id: str, now: int) -> Execution:
    """Ask Temporal about ``job_id``'s execution (one ``DescribeWorkflowExecution``)."""
    try:
        desc = await client.get_workflow_handle(job_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return Execution(exists=False)
        raise
    if desc.status is not None and desc.status != WorkflowExecutionStatus.RUNNING:
        closed_at = int(desc.close_time.timestamp() * 1000) if desc.close_time else now
        cause = CLOSE_CAUSES.get(desc.status, FinishCause.WORKFLOW_FAILED)
        return Execution(exists=True, close_cause=cause, closed_at_ms=closed_at)
    task = desc.raw_description.pending_workflow_task
    waiting = 0
    if task.HasField("scheduled_time") and not task.HasField("started_time"):
        since = task.original_scheduled_time if task.HasField("original_scheduled_time") else task.scheduled_time
        waiting = max(0, now - int(since.ToMilliseconds()))
    return Execution(exists=True, waiting_for_worker_ms=waiting, steps=_pending_activities(desc.raw_description))


def closed_executions_query(since: str) -> str:
    """The visibility query of jobs' executions that closed without their job's finish
    (terminated, timed out, failed) after ``since`` (``YYYY-MM-DDTHH:MM:SSZ``, UTC): every
    workflow type that runs jobs (:func:`curaflow.domain.execution.job_workflow_types`)."""
    types = " OR ".join(f"WorkflowType = '{name}'" for name in job_workflow_types())
    return f"({types}) AND ExecutionStatus IN ('Terminated', 'TimedOut', 'Failed') AND CloseTime > '{since}'"


async def _closed_executions(client: Client, now: int) -> dict[str, tuple[FinishCause, int]]:
    since = datetime.fromtimestamp((now - CLOSED_WINDOW_MS) / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    query = closed_executions_query(since)
    found: dict[str, tuple[FinishCause, int]] = {}
    async for execution in client.list_workflows(query):
        if execution.status is not None and execution.close_time is not None:
            closed_at = int(execution.close_time.timestamp() * 1000)
            cause = CLOSE_CAUSES.get(execution.status, FinishCause.WORKFLOW_FAILED)
            if execution.id not in found or found[execution.id][1] < closed_at:
                found[execution.id] = (cause, closed_at)
    return found

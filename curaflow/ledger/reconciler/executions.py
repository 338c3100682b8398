"""What Temporal says of a job's execution: whether it exists, why a closed one's job must
finish, how long its workflow task has waited for a worker, its pending steps; the
executions of jobs that closed without their job's finish; which of a list of jobs
visibility lists, and whether the namespace holds this ledger's jobs at all.

See :mod:`curaflow.ledger.reconciler` (rules 2–5).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import asyncpg
from temporalio.api.enums.v1 import PendingActivityState, TaskQueueType, VersioningBehavior
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflow.v1 import WorkflowExecutionVersioningInfo
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.service import RPCError

from curaflow.config import DEFAULT_FOREIGN_QUEUE_WAIT_MS
from curaflow.domain.execution import JOB_STATUS, JOB_TYPE, job_workflow_types
from curaflow.domain.projection import TERMINAL_JOB_STATUSES
from curaflow.domain.verdicts import FinishCause, PendingStep
from curaflow.temporal.answers import execution_not_found
from curaflow.temporal.job_runs import held_a_job, refused_run, terminated_at_history_limit

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


async def close_cause(client: Client, job_id: str, run_id: str, status: WorkflowExecutionStatus) -> FinishCause:
    """Why a job must finish whose run ``run_id`` closed with ``status``: its
    :data:`CLOSE_CAUSES` entry, except a run Temporal itself terminated because its
    history passed a limit (:func:`~curaflow.temporal.job_runs.terminated_at_history_limit`:
    the terminate's identity and reason are Temporal's own) — ``history_limit``, not an
    operator's ``terminated`` (2026-12-07; before, junk signals that grew a run's history
    past 50 MB ended its job "An operator terminated…"). One read of the close event, of a
    terminated run only.

    Raises:
        temporalio.service.RPCError: Temporal refused or did not answer.
    """
    if status == WorkflowExecutionStatus.TERMINATED and await terminated_at_history_limit(client, job_id, run_id):
        return FinishCause.HISTORY_LIMIT
    return CLOSE_CAUSES.get(status, FinishCause.WORKFLOW_FAILED)


@dataclass(frozen=True)
class PinnedBuild:
    """The Worker Deployment Version (Temporal Worker Versioning) an open run is pinned to:
    only a worker of that build takes its workflow tasks.

    Attributes:
        deployment_name / build_id: the version, as ``temporal workflow update-options
            --versioning-override-deployment-name`` / ``--versioning-override-build-id``
            name it.
        override: pinned by a versioning override (an operator's ``update-options``,
            ``pinned`` or ``one_time``, or a start's), not by the build that ran it.
    """

    deployment_name: str
    build_id: str
    override: bool


def pinned_build(info: WorkflowExecutionVersioningInfo) -> PinnedBuild | None:
    """The build a run's versioning info pins it to, else None.

    A versioning override decides when there is one: ``pinned`` (its version) and
    ``one_time`` (its target version, until a workflow task completes there) pin; an
    ``auto_upgrade`` override does not, whatever the build declared. Without one, a run
    whose behavior is ``PINNED`` (as curaflow's versioned workers declare every workflow) is
    pinned to its ``deployment_version``. Only the current fields are read: an override
    Temporal reports only in its deprecated fields (``behavior`` with ``pinned_version`` or
    ``deployment``), or a version without a build id, is not recognised — the run is taken
    for an unpinned one (the unknown is cheap: its job ends at its deadline as before).
    """
    if info.HasField("versioning_override"):
        override = info.versioning_override
        if override.HasField("pinned") and override.pinned.version.build_id:
            version = override.pinned.version
            return PinnedBuild(version.deployment_name, version.build_id, override=True)
        if override.HasField("one_time") and override.one_time.target_deployment_version.build_id:
            version = override.one_time.target_deployment_version
            return PinnedBuild(version.deployment_name, version.build_id, override=True)
        return None
    if info.behavior == VersioningBehavior.VERSIONING_BEHAVIOR_PINNED and info.deployment_version.build_id:
        version = info.deployment_version
        return PinnedBuild(version.deployment_name, version.build_id, override=False)
    return None


@dataclass
class Execution:
    """What Temporal says of a job's execution (:func:`describe_execution`).

    Attributes:
        exists: Temporal knows the execution.
        close_cause: why its job must finish when it is closed, else None.
        closed_at_ms: when it closed (epoch ms), else None.
        waiting_for_worker_ms: how long its pending workflow task has waited for a worker
            (0 when none waits or a worker holds it).
        waiting_since_ms: when that task's current attempt began waiting for a worker
            (epoch ms, Temporal's clock): for its first attempt, its original scheduled
            time (a sticky queue's timeout moves it to the normal queue without counting an
            attempt); for a retry (attempt 2 on), that attempt's scheduled time — an
            earlier attempt was taken (a bad deploy's worker failing it, or an unpinned
            worker holding it when an override pinned the run: Temporal fails that attempt
            and schedules the next on the pinned build), this one not yet: a live worker of
            the build takes a retry within a dispatch, a bad deploy's is held, not waiting
            (2026-12-08: a retry read None, and a run an operator pinned while its task was
            held ended ``execution_timeout``, "retry with a longer deadline_ms"). None when
            none waits or a worker holds it.
        pinned: the build the open run is pinned to (:func:`pinned_build`), None when it is
            not pinned (or closed).
        held_job: the run held a job (:func:`run_held_a_job`: it was started with an
            admitted job, or admitted its Task); False for a closed run that refused its
            own Task or stopped before admitting it — such a run never was the job's,
            whatever start attached to it. Always True for a running one.
        refused: the run failed refused as not the job's
            (:func:`curaflow.temporal.job_runs.refused_run`: its input was not the job's
            stored input; ``held_job`` is False then). Unlike a run that never admitted its
            Task, it may have run steps of the job first — the job's own steps, as its
            stored input holds them (``activities.caller``) — so a job it started is no more
            its verdict than one it did not (:meth:`no_verdict`).
    """

    exists: bool
    close_cause: FinishCause | None = None
    closed_at_ms: int | None = None
    held_job: bool = True
    refused: bool = False
    waiting_for_worker_ms: int = 0
    waiting_since_ms: int | None = None
    pinned: PinnedBuild | None = None
    steps: list[PendingActivity] = field(default_factory=list)

    @property
    def pinned_unserved_since_ms(self) -> int | None:
        """When the workflow task of a run pinned to a build began waiting for a worker of
        that build (epoch ms, Temporal's clock), None when the run is not pinned or no task
        of it waits: what :func:`~curaflow.domain.verdicts.budget_cause` reads to tell a
        pinned run no worker of its build served from a job that ran out its deadline."""
        return self.waiting_since_ms if self.pinned is not None else None

    def pending(self, served: set[str]) -> list[PendingStep]:
        """Its pending steps as :func:`~curaflow.domain.verdicts.budget_cause` reads them,
        given the task queues a live worker serves (:func:`served_queues`)."""
        return [step.liveness(served) for step in self.steps]

    def closed_cause_for(self, created_at_ms: int) -> FinishCause | None:
        """The close cause, if this execution closed after a job created at
        ``created_at_ms`` (an earlier run under the same id — say a refused submission —
        is not the job's; a job that never started whose run held no job:
        :meth:`closed_without_job`, asked first)."""
        if self.close_cause is None or self.closed_at_ms is None or self.closed_at_ms < created_at_ms:
            return None
        return self.close_cause

    def closed_without_job(self, created_at_ms: int) -> bool:
        """Whether this execution closed after a job created at ``created_at_ms`` without
        ever holding a job: the job's start attached to it while it was open (conflict
        policy ``USE_EXISTING`` — a Temporal client's Task run waiting out its
        ``start_delay``, or not yet admitted), and it then refused its own Task
        (``idempotency_conflict``: the key's job has other params) or was stopped before
        admitting it. Nothing ran the job: its close is no verdict on the job, which is to
        be started again as a job whose start never happened is
        (:mod:`curaflow.temporal.job_runs` frees the id of such a run)."""
        return (
            self.close_cause is not None
            and self.closed_at_ms is not None
            and self.closed_at_ms >= created_at_ms
            and not self.held_job
        )

    def no_verdict(self, created_at_ms: int, *, started: bool) -> bool:
        """Whether this execution's close is no verdict on a job created at
        ``created_at_ms`` (``started``: a step of the job opened): it closed without holding
        the job (:meth:`closed_without_job`) and either nothing ran the job, or it is a run
        refused as not the job's (:attr:`refused`), whose steps that ran were the job's own
        and whose verdict was refused (2026-12-07; before, the job it had started was ended
        ``internal_error`` for that run's failure). Such a job is to be started again as a
        job whose start never happened is."""
        return self.closed_without_job(created_at_ms) and (not started or self.refused)


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


def run_held_a_job(described: WorkflowExecutionDescription) -> bool:
    """Whether a described run held a job: it carries ``JobType``
    (:func:`curaflow.temporal.job_runs.held_a_job`: set at start for an admitted job,
    upserted once a Task is admitted) or ``JobStatus`` (published by a job's own run as
    soon as it holds the job — also by one a foreign client started with the job's input
    and no search attributes). A run with neither ran no step of any job."""
    return held_a_job(described) or described.typed_search_attributes.get(JOB_STATUS) is not None


async def describe_execution(client: Client, job_id: str, now: int) -> Execution:
    """Ask Temporal about ``job_id``'s execution (one ``DescribeWorkflowExecution``).

    ``exists`` is False only on Temporal's own "not found" of the execution
    (:func:`curaflow.temporal.answers.execution_not_found`): a ``NOT_FOUND`` of the
    namespace — this process's ``temporal.namespace`` not the jobs', or deleted — is raised
    like any other refusal (2026-12-07: it read as "no execution", and a cancel converged
    a running job ``cancelled``).

    Raises:
        temporalio.service.RPCError: Temporal refused or did not answer (not its "not found"
            of the execution).
    """
    try:
        desc = await client.get_workflow_handle(job_id).describe()
    except RPCError as err:
        if execution_not_found(err):
            return Execution(exists=False)
        raise
    if desc.status is not None and desc.status != WorkflowExecutionStatus.RUNNING:
        closed_at = int(desc.close_time.timestamp() * 1000) if desc.close_time else now
        cause = await close_cause(client, job_id, desc.run_id, desc.status)
        # A run refused as not the job's (started under its id with an input that is not
        # the job's: ``activities.caller``) carries the job's search attributes, yet held
        # nothing of it (asked only of a failed run: one history read of its close).
        refused = (
            run_held_a_job(desc)
            and desc.status == WorkflowExecutionStatus.FAILED
            and await refused_run(client, job_id, desc.run_id)
        )
        held = run_held_a_job(desc) and not refused
        if not held:
            # The latest run never held the job. When an earlier run did — the job's own
            # run, terminated by a client's start with another Task (conflict policy
            # TERMINATE_EXISTING, reuse policy TERMINATE_IF_RUNNING) whose run then refused
            # it — that run's close is the job's verdict, not the refusal's.
            earlier = await _latest_run_that_held_a_job(client, job_id, now)
            if earlier is not None:
                return Execution(exists=True, close_cause=earlier[0], closed_at_ms=earlier[1])
        return Execution(exists=True, close_cause=cause, closed_at_ms=closed_at, held_job=held, refused=refused)
    raw = desc.raw_description
    task = raw.pending_workflow_task
    waiting, since_ms = 0, None
    if task.HasField("scheduled_time") and not task.HasField("started_time"):
        since = task.original_scheduled_time if task.HasField("original_scheduled_time") else task.scheduled_time
        waiting = max(0, now - int(since.ToMilliseconds()))
        # A retried task (attempt 2 on) waits since this attempt was scheduled: an earlier
        # attempt was taken — by a worker of the build that then failed it, or by another
        # build's worker holding it when an override pinned the run (Temporal fails that
        # attempt) — but this one no worker has taken. A live worker of the build takes a
        # retry within a dispatch, so one still waiting at the deadline is unserved.
        first = task.attempt <= 1
        since_ms = int((since if first else task.scheduled_time).ToMilliseconds())
    return Execution(
        exists=True,
        waiting_for_worker_ms=waiting,
        waiting_since_ms=since_ms,
        pinned=pinned_build(raw.workflow_execution_info.versioning_info),
        steps=_pending_activities(raw),
    )


#: How long, by default, the first workflow task of a run that held no job must have waited
#: on a task queue other than curaflow's, which no worker polls, before the run is taken for
#: one no worker will ever serve (:func:`unserved_foreign_run`): the setting
#: ``foreign_queue_wait_ms``'s default (:data:`curaflow.config.DEFAULT_FOREIGN_QUEUE_WAIT_MS`),
#: which owns the value.
FOREIGN_QUEUE_WAIT_MS = DEFAULT_FOREIGN_QUEUE_WAIT_MS


@dataclass(frozen=True)
class ForeignQueueRun:
    """A run under a job's id that holds no job and waits on another task queue.

    Attributes:
        run_id: the run.
        task_queue: the queue its workflow task waits on (not curaflow's).
        waiting_ms: how long that task has waited for a worker.
    """

    run_id: str
    task_queue: str
    waiting_ms: int


#: The most runs :func:`unheld_runs_on_other_queues` reads per tick: one page of
#: ``ListWorkflowExecutions``, whatever the ledger's backlog.
FOREIGN_RUNS_LISTED = 1_000


async def unheld_runs_on_other_queues(client: Client, task_queue: str) -> list[str]:
    """The workflow ids of open job executions (every workflow type that runs jobs,
    :func:`curaflow.domain.execution.job_workflow_types`) on a task queue other than
    ``task_queue`` whose run holds no job — neither ``JobType`` nor ``JobStatus``, what
    :func:`run_held_a_job` reads —, as visibility lists them, sorted: at most
    :data:`FOREIGN_RUNS_LISTED` (one ``ListWorkflowExecutions`` page; Temporal's
    visibility lists open runs newest first). Empty when ``task_queue`` cannot be quoted
    into the query (:func:`_quotable`).

    Asked once per tick, before the ledger: its cost follows the namespace's runs that
    wait unheld on other queues (a client's mistyped ``--task-queue``, a Task run not yet
    admitted on another deployment's queue), not how many jobs the ledger holds queued —
    behind a backlog larger than a tick's ``limit``, a job attached to such a run is found
    the same (2026-12-06; before, the ledger's ``limit`` oldest queued jobs were asked
    about and a newer one was never reached). The ids may name runs that are no job of
    this ledger (another application's workflow under a job type's name, a run no start
    of curaflow attached to): the caller keeps only the ids its ledger holds as queued.
    Visibility may lag: :func:`unserved_foreign_run` describes each before anything is
    done.

    Raises:
        temporalio.service.RPCError: Temporal refused or did not answer the list.
    """
    if not _quotable(task_queue):
        return []
    query = (
        f"({_job_types()}) AND ExecutionStatus = 'Running' AND TaskQueue != '{task_queue}' "
        f"AND {JOB_TYPE.name} IS NULL AND {JOB_STATUS.name} IS NULL"
    )
    listed = client.list_workflows(query, limit=FOREIGN_RUNS_LISTED, page_size=FOREIGN_RUNS_LISTED)
    return sorted({execution.id async for execution in listed})


async def unserved_foreign_run(
    client: Client, job_id: str, task_queue: str, now: int, *, wait_ms: int = FOREIGN_QUEUE_WAIT_MS
) -> ForeignQueueRun | None:
    """The open run of ``job_id`` when it is recognised as one no worker will ever run: it
    runs on another task queue than ``task_queue``, it held no job
    (:func:`run_held_a_job`), its workflow task has waited for a worker at least
    ``wait_ms`` (the setting ``foreign_queue_wait_ms``; default
    :data:`FOREIGN_QUEUE_WAIT_MS`), and no worker polls that queue
    (:func:`queue_polled`) — a Temporal client's Task started with a wrong
    ``--task-queue``, to which a curaflow start of the same job attached (conflict policy
    ``USE_EXISTING``). Else None (one ``DescribeWorkflowExecution``, and one
    ``DescribeTaskQueue`` for a run that waited that long).

    A queue a worker polls is served, however long its task waits: another deployment's
    workers restarting, stopped or behind a backlog, or this deployment's own queue before
    a rolling change of ``temporal.task_queue`` — such a run waits for them (until
    2026-12-06 it was terminated after the wait alone).

    Raises:
        temporalio.service.RPCError: Temporal refused or did not answer a describe (not its
            "not found" of the execution, :func:`~curaflow.temporal.answers.execution_not_found`).
    """
    try:
        desc = await client.get_workflow_handle(job_id).describe()
    except RPCError as err:
        if execution_not_found(err):
            return None
        raise
    if desc.status != WorkflowExecutionStatus.RUNNING or desc.task_queue == task_queue or run_held_a_job(desc):
        return None
    task = desc.raw_description.pending_workflow_task
    if not task.HasField("scheduled_time") or task.HasField("started_time"):
        return None
    since = task.original_scheduled_time if task.HasField("original_scheduled_time") else task.scheduled_time
    waiting = max(0, now - int(since.ToMilliseconds()))
    if waiting < wait_ms or await queue_polled(client, desc.task_queue):
        return None
    return ForeignQueueRun(run_id=desc.run_id, task_queue=desc.task_queue, waiting_ms=waiting)


async def open_job_run(client: Client, job_id: str) -> bool:
    """Whether an open run of a workflow type that runs jobs
    (:func:`curaflow.domain.execution.job_workflow_types`) is under ``job_id`` (one
    ``DescribeWorkflowExecution``): a job whose start the ledger does not hold but whose
    run exists — a schedule's occurrence, whose trampoline starts the job's run after its
    admission and records no start (:func:`curaflow.schedules.admit.admit_occurrence`).

    Raises:
        temporalio.service.RPCError: Temporal refused or did not answer (not its "not found"
            of the execution, :func:`~curaflow.temporal.answers.execution_not_found`).
    """
    try:
        desc = await client.get_workflow_handle(job_id).describe()
    except RPCError as err:
        if execution_not_found(err):
            return False
        raise
    return desc.status == WorkflowExecutionStatus.RUNNING and desc.workflow_type in job_workflow_types()


async def queue_polled(client: Client, task_queue: str) -> bool:
    """Whether Temporal lists a poller of ``task_queue``'s workflow tasks (one
    ``DescribeTaskQueue``): a worker polled it within the server's poller window (five
    minutes on Temporal's default configuration), whether it is polling now, restarting,
    stopped or busy. Only a queue that lists none is taken for one no worker serves.

    Raises:
        temporalio.service.RPCError: Temporal refused or did not answer (nothing is
            inferred: the caller leaves the run as it is).
    """
    answer = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    return bool(answer.pollers)


async def _latest_run_that_held_a_job(client: Client, job_id: str, now: int) -> tuple[FinishCause, int] | None:
    """The close cause and close time (epoch ms) of the latest closed run of ``job_id`` that
    held a job (:func:`run_held_a_job`), or None when none did (or the id cannot be quoted
    into a visibility query, :func:`_quotable`). One ``ListWorkflowExecutions``, asked only
    when the id's latest run is closed and never held the job."""
    if not _quotable(job_id):
        return None
    latest: tuple[FinishCause, int] | None = None
    async for run in client.list_workflows(f"({_job_types()}) AND WorkflowId = '{job_id}'"):
        if run.status is None or run.status == WorkflowExecutionStatus.RUNNING:
            continue
        attributes = run.typed_search_attributes
        if attributes.get(JOB_TYPE) is None and attributes.get(JOB_STATUS) is None:
            continue
        if run.status == WorkflowExecutionStatus.FAILED and await refused_run(client, job_id, run.run_id):
            continue  # refused as not the job's: it held nothing of the job
        closed_at = int(run.close_time.timestamp() * 1000) if run.close_time else now
        if latest is None or closed_at > latest[1]:
            latest = (await close_cause(client, job_id, run.run_id, run.status), closed_at)
    return latest


def closed_executions_query(since: str) -> str:
    """The visibility query of jobs' executions that may have closed without their job's
    finish after ``since`` (``YYYY-MM-DDTHH:MM:SSZ``, UTC): every workflow type that runs jobs
    (:func:`curaflow.domain.execution.job_workflow_types`), terminated, timed out, or failed
    without publishing a terminal ``JobStatus``.

    A run publishes a terminal ``JobStatus`` only from its finish's result, after the ledger
    committed the outcome (``workflows.steps.published_status`` never does), so a failed run
    that published one — a job that ended ``failed`` or ``expired``, as a schedule's job that
    found nothing new does — has nothing to converge; until 2026-12-06 every one of them
    closed in the last hour was listed again on each tick. A run with no ``JobStatus`` (one
    that refused its Task, a reporting run) is still listed.
    """
    terminal = ", ".join(f"'{status}'" for status in sorted(TERMINAL_JOB_STATUSES))
    job_status = JOB_STATUS.name
    return (
        f"({_job_types()}) AND CloseTime > '{since}' AND (ExecutionStatus IN ('Terminated', 'TimedOut') OR "
        f"(ExecutionStatus = 'Failed' AND ({job_status} IS NULL OR {job_status} NOT IN ({terminal}))))"
    )


#: How much later than the ledger recorded a job's start its execution may have started
#: and still witness that a namespace holds this ledger's jobs (clocks of the ledger and
#: of Temporal differ by this much at most).
WITNESS_SKEW_MS = 60_000
#: How many of the namespace's latest job executions :func:`namespace_holds_jobs` reads
#: when none of the executions a tick looked up already witnesses it.
WITNESS_SAMPLE = 50


def _quotable(job_id: str) -> bool:
    """Whether ``job_id`` can be quoted into a visibility query as it is (a single-quoted
    string: no quote, no backslash, nothing unprintable); any other id is described."""
    return job_id.isprintable() and "'" not in job_id and "\\" not in job_id and '"' not in job_id


def _job_types() -> str:
    return " OR ".join(f"WorkflowType = '{name}'" for name in job_workflow_types())


async def listed_executions(client: Client, job_ids: list[str]) -> dict[str, int]:
    """The job executions Temporal's visibility lists under ``job_ids`` (any status, any
    run; one ``ListWorkflowExecutions``): job id → the start time of its earliest listed
    run (epoch ms UTC).

    An id it leaves out may still exist (visibility lags a start by a moment; an id that
    cannot be quoted, :func:`_quotable`, is not asked): only :func:`describe_execution`
    says an execution is not found.
    """
    quoted = [f"'{job_id}'" for job_id in job_ids if _quotable(job_id)]
    if not quoted:
        return {}
    query = f"({_job_types()}) AND WorkflowId IN ({', '.join(quoted)})"
    found: dict[str, int] = {}
    async for execution in client.list_workflows(query):
        started = int(execution.start_time.timestamp() * 1000)
        found[execution.id] = min(found.get(execution.id, started), started)
    return found


async def latest_job_executions(client: Client, limit: int = WITNESS_SAMPLE) -> dict[str, int]:
    """The namespace's latest ``limit`` job executions (any status), as
    :func:`listed_executions` answers: job id → earliest listed start (epoch ms UTC)."""
    found: dict[str, int] = {}
    async for execution in client.list_workflows(f"({_job_types()})", limit=limit):
        started = int(execution.start_time.timestamp() * 1000)
        found[execution.id] = min(found.get(execution.id, started), started)
    return found


async def namespace_holds_jobs(conn: asyncpg.Connection, client: Client, listed: dict[str, int]) -> bool:
    """Whether the client's namespace holds an execution of a job this ledger knows — the
    proof that it is the namespace curaflow's jobs run in, before "not found" may be read
    as "an operator deleted it" (:func:`~curaflow.ledger.reconciler.ticks.tick`'s rule
    for deleted executions).

    A process configured with another namespace (``temporal.namespace`` mistyped: the
    worker registers it at start) finds every job's execution not found; such a namespace
    holds none of this ledger's jobs. The witness: a job execution (``listed``, the
    executions a tick already listed, else the namespace's latest
    :data:`WITNESS_SAMPLE`, else this ledger's latest :data:`WITNESS_SAMPLE` started jobs
    looked up by id) whose id is a job of this ledger that is marked started and
    that started no later than the ledger recorded its start (plus
    :data:`WITNESS_SKEW_MS`). Not told apart: another curaflow instance's namespace whose
    job ids are this ledger's (the same targets and keys).

    Args:
        conn: a ledger connection.
        client: the Temporal client whose namespace is judged.
        listed: job id → earliest start (epoch ms) of executions already listed in it.

    Returns:
        True when a witness is found (at most two more ``ListWorkflowExecutions`` and one
        statement, the second only when the namespace's latest witness nothing).
    """

    async def witnessed(found: dict[str, int]) -> bool:
        if not found:
            return False
        held = await conn.fetchval(
            """SELECT EXISTS (SELECT 1 FROM unnest($1::text[], $2::bigint[]) AS e(job_id, started)
                              JOIN jobs j ON j.job_id = e.job_id
                              WHERE COALESCE(j.workflow_started_at, j.started_at) IS NOT NULL
                                AND e.started <= COALESCE(j.workflow_started_at, j.started_at) + $3::bigint)""",
            list(found),
            list(found.values()),
            WITNESS_SKEW_MS,
        )
        return held is True

    if await witnessed(listed) or await witnessed(await latest_job_executions(client)):
        return True
    # The namespace's latest may all be another ledger's (a namespace shared with another
    # deployment, a Temporal client's refused starts): look up this ledger's own latest
    # started jobs by id (2026-12-06; before, such a namespace never confirmed a deletion).
    own = await conn.fetch(
        """SELECT job_id FROM jobs WHERE workflow_started_at IS NOT NULL
           ORDER BY workflow_started_at DESC LIMIT $1""",
        WITNESS_SAMPLE,
    )
    return await witnessed(await listed_executions(client, [r["job_id"] for r in own]))


async def _closed_executions(
    client: Client, now: int, job_ids: list[str] | None = None
) -> dict[str, tuple[FinishCause, int]]:
    """The runs :func:`closed_executions_query` lists (closed within :data:`CLOSED_WINDOW_MS`
    of ``now``, epoch ms): workflow id → (its close's cause, its close time, epoch ms), the
    latest close of each id.

    Args:
        job_ids: only these ids (``WorkflowId IN (…)``: the open jobs a tick may finish),
            when every one can be quoted into the query (:func:`_quotable`); None, or an id
            that cannot: every run the query lists.

    Raises:
        temporalio.service.RPCError: Temporal refused or did not answer the list.
    """
    since = datetime.fromtimestamp((now - CLOSED_WINDOW_MS) / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    query = closed_executions_query(since)
    if job_ids is not None and all(_quotable(job_id) for job_id in job_ids):
        if not job_ids:
            return {}
        quoted = ", ".join(f"'{job_id}'" for job_id in job_ids)
        query = f"({query}) AND WorkflowId IN ({quoted})"
    found: dict[str, tuple[FinishCause, int]] = {}
    async for execution in client.list_workflows(query):
        if execution.status is not None and execution.close_time is not None:
            closed_at = int(execution.close_time.timestamp() * 1000)
            cause = CLOSE_CAUSES.get(execution.status, FinishCause.WORKFLOW_FAILED)
            if execution.id not in found or found[execution.id][1] < closed_at:
                found[execution.id] = (cause, closed_at)
    return found

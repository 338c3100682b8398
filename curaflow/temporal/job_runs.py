"""Which runs a job id may have: one run per job, for ever (DESIGN.md decision 1, as implemented).

A job is one ``JobWorkflow`` execution whose workflow id is the job id, so everything
that addresses the job by id — ``temporal workflow describe`` / ``result`` / ``query``,
the UI's page, the list queries — must keep reading *that* run. Temporal decides whether
a start may add a run under a closed id by the start's id reuse policy, chosen by whoever
starts; so every start curaflow makes (HTTP and the reconciler, ``start_job``, the
``follow_job`` activity, the Nexus service; schedules already did) goes through
:func:`start_run`:

1. the start asks ``REJECT_DUPLICATE`` with conflict policy ``FAIL``: a new run starts, or
   Temporal refuses because the id has a run, open or closed;
2. refused, the id's run is described. An open run of a workflow type that runs jobs
   (:func:`curaflow.domain.execution.job_workflow_types`) is attached to (the start again,
   conflict policy ``USE_EXISTING``: a Nexus operation's completion rides on it). An open
   run of **another workflow type** — a user's workflow whose id is in curaflow's id
   scheme, a parent named after its job — is no run of the job: :class:`JobIdHeld` is
   raised and nothing is started or attached (until 2026-12-07 the start attached to it,
   the job's start was recorded and nothing ever ran the job); the job waits, unstarted,
   and the next start (the reconciler's, every tick) starts it once that run closed;
3. a closed run that **held no job** (:func:`held_a_job` — it refused its Task, or was
   stopped before admitting it: it never published the job's search attributes; or it
   failed because its steps were refused as not the job's, :func:`refused_run`: started
   with an input that is not the job's, 2026-12-07) does not own the id, and the start
   is made again with ``ALLOW_DUPLICATE_FAILED_ONLY`` (a run that held no job never
   completes), or ``ALLOW_DUPLICATE`` for a closed run of another
   workflow type (which may have completed); a run that held the job raises
   :class:`JobRunClosed`, and the caller answers from it (its result, its
   ``admission_answer`` query) or from the ledger — nothing is started.

The update-with-start of :func:`curaflow.jobs.submit.start_job` keeps ``USE_EXISTING``
from its first start (an update needs a run to reach): a run of another workflow type
has no ``admission`` update, and the start fails with Temporal's refusal of it.

What no code of curaflow can decide: a start made by another client with Temporal's
default policy (``ALLOW_DUPLICATE``: the CLI's ``temporal workflow start``, any SDK's
plain start, a child workflow started without ``REJECT_DUPLICATE``) adds a run under a
closed job id, and no server setting refuses it. Such a run admits its Task, finds the
job ended and reports it (``workflows.job``: it publishes no ``JobStatus``, so the list
queries stay exact); docs/temporal.md tells every client to start with
``RejectDuplicate``. A run started with the job's ``JobInput`` instead (such a start with
a copied input, or ``temporal workflow reset`` of the job's closed run) learns it from its
first step, which asks :func:`held_by_another_run`, and reports the job the same way.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import HistoryEventFilterType
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import HistoryEvent, WorkflowExecutionTerminatedEventAttributes
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryRequest
from temporalio.client import Client, WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from curaflow.domain.execution import FOREIGN_CALLER, JOB_STATUS, JOB_TYPE, job_workflow_types

T = TypeVar("T")

#: The id reuse policy of every start curaflow makes: a closed job's run is never followed.
JOB_ID_REUSE_POLICY = WorkflowIDReusePolicy.REJECT_DUPLICATE
#: A start while the job's run is open attaches to it.
JOB_ID_CONFLICT_POLICY = WorkflowIDConflictPolicy.USE_EXISTING
#: The conflict policy of :func:`start_run`'s first start: an open run under the id is
#: described before anything attaches to it.
FIRST_START_CONFLICT_POLICY = WorkflowIDConflictPolicy.FAIL
#: The policy of the second start, once the closed run was found to hold no job.
FREED_ID_REUSE_POLICY = WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY
#: The policy of the second start after a closed run of a workflow type that runs no job.
FOREIGN_FREED_ID_REUSE_POLICY = WorkflowIDReusePolicy.ALLOW_DUPLICATE


class JobIdHeld(Exception):
    """An open run of a workflow type that runs no job holds the job id: the job's run
    cannot start under it (nor may anything attach to that run) until it closes.

    Attributes:
        job_id: the id.
        run_id: the run holding it.
        workflow_type: its workflow type.
    """

    def __init__(self, job_id: str, run_id: str, workflow_type: str) -> None:
        super().__init__(
            f"job {job_id}'s id is held by a running {workflow_type} execution (run {run_id}), which runs no "
            "job: the job starts once that execution closes (a workflow id in curaflow's id scheme, "
            "<target_id>@manual-<key>, belongs to the job of that key)"
        )
        self.job_id = job_id
        self.run_id = run_id
        self.workflow_type = workflow_type


class JobRunAdmitting(Exception):
    """An open job run under the id holds no job yet: another client's Task run that has not
    admitted its Task (it waits out a ``start_delay``, or for a worker) — it may refuse that
    Task (another Task under the key: ``idempotency_conflict``), be cancelled or terminated
    before admitting it. A caller whose outcome rides on the run it attaches to (a Nexus
    operation's completion) must not attach to it (:func:`start_run`, ``attach_holder_only``).

    Attributes:
        job_id: the id.
        run_id: the run holding it.
    """

    def __init__(self, job_id: str, run_id: str) -> None:
        super().__init__(
            f"job {job_id}'s id is held by a run that has not admitted its Task yet (run {run_id}): the job is "
            "attached to once that run holds it, or started once that run closed"
        )
        self.job_id = job_id
        self.run_id = run_id


class JobRunClosed(Exception):
    """The job id's run held the job and is closed: nothing may start under the id.

    Attributes:
        job_id: the id.
        run_id: the job's run.
        status: how it closed (``COMPLETED``, ``FAILED``, ``CANCELED``, ``TERMINATED``,
            ``TIMED_OUT``).
    """

    def __init__(self, job_id: str, run_id: str, status: WorkflowExecutionStatus | None) -> None:
        super().__init__(f"the run {run_id} of job {job_id} is closed ({status.name if status else 'unknown'})")
        self.job_id = job_id
        self.run_id = run_id
        self.status = status


def held_a_job(described: WorkflowExecutionDescription) -> bool:
    """Whether a run held a job: it carries the ``JobType`` search attribute, set at start
    for an admitted job (HTTP, schedules, the reconciler) and upserted by the workflow once
    it admitted its Task; a run that refused its Task, or stopped before admitting it,
    never has it."""
    return described.typed_search_attributes.get(JOB_TYPE) is not None


def refused_as_not_the_jobs(failure: Failure | None) -> bool:
    """Whether a run's failure is a step (or ``finish``) of it refused as not the job's —
    ``foreign_caller`` anywhere in the failure's causes (``activities.caller``): the run's
    input was not the job's input stored at admission, so nothing it did was the job's."""
    while failure is not None and failure.ByteSize():
        if failure.HasField("application_failure_info") and failure.application_failure_info.type == FOREIGN_CALLER:
            return True
        failure = failure.cause if failure.HasField("cause") else None
    return False


async def close_events(client: Client, job_id: str, run_id: str) -> Sequence[HistoryEvent]:
    """The close event of run ``run_id`` of ``job_id`` (none for an open run): one
    ``GetWorkflowExecutionHistory`` filtered to it (``HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT``:
    one event, whatever the history's size). The one read of a run's close here.

    Raises:
        temporalio.service.RPCError: Temporal refused or did not answer.
    """
    answer = await client.workflow_service.get_workflow_execution_history(
        GetWorkflowExecutionHistoryRequest(
            namespace=client.namespace,
            execution=WorkflowExecution(workflow_id=job_id, run_id=run_id),
            history_event_filter_type=HistoryEventFilterType.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT,
        )
    )
    return answer.history.events


async def refused_run(client: Client, job_id: str, run_id: str) -> bool:
    """Whether run ``run_id`` of ``job_id`` failed because a step of it was refused as not
    the job's (:func:`refused_as_not_the_jobs`): such a run carries ``JobType`` and
    ``JobStatus`` as the job's own run would (it held the job by its input), yet never held
    it — it wrote nothing, and its close is no verdict on the job. One
    ``GetWorkflowExecutionHistory`` of the close event alone; asked only of a closed run
    that failed (the reconciler, :func:`start_run`).

    Raises:
        temporalio.service.RPCError: Temporal refused or did not answer.
    """
    for event in await close_events(client, job_id, run_id):
        if event.HasField("workflow_execution_failed_event_attributes"):
            return refused_as_not_the_jobs(event.workflow_execution_failed_event_attributes.failure)
    return False


async def held_the_job(client: Client, described: WorkflowExecutionDescription) -> bool:
    """Whether a closed run held its job: :func:`held_a_job`, unless it failed as a run whose
    steps were refused as not the job's (:func:`refused_run`, asked only then)."""
    if not held_a_job(described):
        return False
    if described.status != WorkflowExecutionStatus.FAILED:
        return True
    return not await refused_run(client, described.id, described.run_id)


async def held_by_another_run(client: Client, job_id: str, run_id: str) -> bool:
    """Whether a run of ``job_id`` other than ``run_id`` holds the job: it carries the
    ``JobStatus`` search attribute, which only the job's own run publishes — so the
    documented list queries (docs/temporal.md) already name the job by that run — and no
    reset replaced it while it was open (:func:`replaced_by_reset`).

    Asked only by a step that found its job already ended in the ledger
    (:func:`curaflow.ledger.cells.start_step`), by ``finish`` repeating an ended job's
    finish, by a cancel or a deadline that found the job ended, and by ``admit`` answering
    an ended job: for a run added under an ended job's id (a ``temporal workflow reset`` of
    the job's closed run, a start with Temporal's default reuse policy) it answers True,
    and that run only reports the job (``workflows.job``, ``job-input-reporting-run``). For
    the job's own run — one the reconciler ended in the ledger while it waited for a worker
    (queued too long, past its deadline) — it answers False (no other run, or only a run
    that held no job), and that run publishes the job's end as the job's. So it does for
    the run a reset started from the job's *open* run: the reset terminated that run
    (frozen with the ``JobStatus`` it had, typically ``running``: in none of the lists),
    and when the ledger had ended the job meanwhile (the reconciler, while no worker could
    run the stuck run) the new run is the only one that can name the job's end — before
    2026-12-07 it took the terminated run for the job's and only reported, and the failed
    jobs' list named an expired job zero times.

    One visibility list of the id's runs (a handful), and one read of a run's close event
    for each run listed open or terminated with a ``JobStatus`` (rare: only after a
    terminate or a reset). Visibility is eventually consistent, but the other run was
    listed with its ``JobStatus`` from its start, long before a run could be added after
    it closed.

    Raises:
        temporalio.service.RPCError: Temporal refused or did not answer the list (the
            step's attempt fails and is retried).
    """
    async for execution in client.list_workflows(f"WorkflowId = {json.dumps(job_id)}"):
        if execution.run_id == run_id or execution.typed_search_attributes.get(JOB_STATUS) is None:
            continue
        if execution.status in REPLACEABLE_STATUSES and await replaced_by_reset(client, job_id, execution.run_id):
            continue
        return True
    return False


async def own_run_of_ended_job(client: Client, job_id: str, run_id: str, completed_at_ms: int) -> bool:
    """Whether run ``run_id`` is the job's own run though the ledger ended the job before
    the run admitted its Task: no other run of the id holds the job
    (:func:`held_by_another_run`) and the run began — its original start, which a reset
    keeps — no later than the job ended (``completed_at_ms``, epoch ms).

    True for the run a ``temporal workflow reset`` started from the job's open run after
    the reconciler ended the job (no worker could run it), and for the job's only run when
    it admits its Task after the reconciler ended the job a ``POST /jobs`` attached to it;
    such a run publishes the job's end (``workflows.job``, ``own-run-admitted-late``).
    False for a run added under an ended job's id — after the job's own run (which holds
    it), or after that run is gone (deleted, past the namespace's retention): that run began
    after the job ended, and only reports it, so no list names a long-ended job anew.

    One visibility list of the id's runs, and one describe of this run, only when the
    ledger had ended the job (clocks: Temporal's start time against the ledger's end; a
    run that began within a clock skew of its job's end with no other run holding the job
    — its own run deleted at once — is the only one misread).

    Raises:
        temporalio.service.RPCError: Temporal refused or did not answer (the activity's
            attempt fails and is retried).
    """
    if await held_by_another_run(client, job_id, run_id):
        return False
    described = await client.get_workflow_handle(job_id, run_id=run_id).describe()
    raw = described.raw_description
    extended = raw.workflow_extended_info
    began = (
        extended.original_start_time
        if extended.HasField("original_start_time")
        else raw.workflow_execution_info.start_time
    )
    return int(began.ToMilliseconds()) <= completed_at_ms


#: The identity Temporal's history service terminates a run with when a reset replaces it
#: while it is open (the server's ``consts.IdentityResetter``); an operator's terminate
#: carries the operator's client identity.
RESET_IDENTITY = "history-resetter"
#: How a run a reset replaced is listed: terminated — or still running, in the moment
#: before visibility learns it closed (the asking run being open, no other run is).
REPLACEABLE_STATUSES = frozenset({WorkflowExecutionStatus.TERMINATED, WorkflowExecutionStatus.RUNNING})


async def replaced_by_reset(client: Client, job_id: str, run_id: str) -> bool:
    """Whether run ``run_id`` of ``job_id`` was terminated by a reset that replaced it while
    it was open (``temporal workflow reset`` of a running run, the UI's *Reset*): its close
    event is the terminate of Temporal's resetter (:data:`RESET_IDENTITY`). A run reset
    after it closed keeps its own close (and holds the job it ended); a run an operator
    terminated carries the operator's identity. One ``GetWorkflowExecutionHistory`` of the
    close event alone (none for an open run).

    Raises:
        temporalio.service.RPCError: Temporal refused or did not answer.
    """
    terminate = await run_terminate(client, job_id, run_id)
    return terminate is not None and terminate.identity == RESET_IDENTITY


#: The identity Temporal's history service terminates a run with on its own account (the
#: server's ``consts.IdentityHistoryService``): a run past a history limit. An operator's
#: terminate carries the operator's client identity (``temporal`` CLI, the UI, an SDK's).
HISTORY_SERVICE_IDENTITY = "history-service"
#: The reasons Temporal's history service writes when it terminates a run because its
#: history passed a limit, word for word (the server's ``common.FailureReasonHistorySizeExceedsLimit``,
#: ``FailureReasonHistoryCountExceedsLimit``, ``FailureReasonMutableStateSizeExceedsLimit``;
#: the limits are the namespace's dynamic configuration ``limit.historySize.error`` — 50 MB
#: by default, the dev server's too —, ``limit.historyCount.error``, 51 200 events, and
#: ``limit.mutableStateSize.error``). Anything sent to a run — signals of any name,
#: updates, their inputs — is recorded in its history before a handler sees it, so junk
#: sent to a job's run by a Temporal client can pass them; curaflow cannot refuse a signal.
HISTORY_LIMIT_REASONS = frozenset(
    {
        "Workflow history size exceeds limit.",
        "Workflow history count exceeds limit.",
        "Workflow mutable state size exceeds limit.",
    }
)


def at_history_limit(terminate: WorkflowExecutionTerminatedEventAttributes) -> bool:
    """Whether a run's terminate is Temporal's own at a history limit: its identity is the
    history service's (:data:`HISTORY_SERVICE_IDENTITY`) and its reason one of
    :data:`HISTORY_LIMIT_REASONS`, both word for word. Anything else — an operator's
    terminate, whatever its reason says, a reset's, a reason Temporal may word otherwise
    one day — is read as before: a terminate (the unknown is cheap: positively recognised
    only)."""
    return terminate.identity == HISTORY_SERVICE_IDENTITY and terminate.reason in HISTORY_LIMIT_REASONS


async def run_terminate(client: Client, job_id: str, run_id: str) -> WorkflowExecutionTerminatedEventAttributes | None:
    """The terminate that closed run ``run_id`` of ``job_id`` (its close event's
    attributes: who terminated it, ``identity``, and why, ``reason``), None when it closed
    otherwise or is open. One ``GetWorkflowExecutionHistory`` of the close event alone
    (``HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT``: one event, whatever the history's size).

    Raises:
        temporalio.service.RPCError: Temporal refused or did not answer.
    """
    for event in await close_events(client, job_id, run_id):
        if event.HasField("workflow_execution_terminated_event_attributes"):
            return event.workflow_execution_terminated_event_attributes
    return None


async def terminated_at_history_limit(client: Client, job_id: str, run_id: str) -> bool:
    """Whether Temporal itself terminated run ``run_id`` of ``job_id`` because its history
    passed a limit (:func:`at_history_limit` of :func:`run_terminate`; one read of the close
    event). Asked only of a run listed terminated.

    Raises:
        temporalio.service.RPCError: Temporal refused or did not answer.
    """
    terminate = await run_terminate(client, job_id, run_id)
    return terminate is not None and at_history_limit(terminate)


async def start_run(
    client: Client,
    job_id: str,
    start: Callable[[WorkflowIDReusePolicy, WorkflowIDConflictPolicy], Awaitable[T]],
    *,
    attach_holder_only: bool = False,
) -> T:
    """Start (or attach to) the run of ``job_id`` under the rule of the module doc.

    Args:
        client: to describe the id's run when the start is refused.
        job_id: the workflow id.
        start: makes the start with the reuse and conflict policies given; raises
            ``WorkflowAlreadyStartedError`` when Temporal refuses it.
        attach_holder_only: attach only to an open run that holds the job
            (:func:`held_a_job`); an open job run that holds none raises
            :class:`JobRunAdmitting`. For a caller handed the run's end as the job's outcome
            (the Nexus operation, 2026-12-07): a Task run that had not admitted yet then
            refused its own Task, and the caller was told ``idempotency_conflict`` of a job
            that was admitted and ran. HTTP and the reconciler attach as before: they read the
            outcome from the ledger, and the reconciler starts a job such a run never held.

    Returns:
        What ``start`` returned.

    Raises:
        JobRunClosed: the id's run held the job and is closed.
        JobIdHeld: an open run of a workflow type that runs no job holds the id.
        JobRunAdmitting: ``attach_holder_only``, and the open job run holds no job yet.
        temporalio.service.RPCError: Temporal refused a request.
    """
    try:
        return await start(JOB_ID_REUSE_POLICY, FIRST_START_CONFLICT_POLICY)
    except WorkflowAlreadyStartedError:
        described = await client.get_workflow_handle(job_id).describe()
    runs_jobs = described.workflow_type in job_workflow_types()
    if described.status == WorkflowExecutionStatus.RUNNING:
        if not runs_jobs:
            raise JobIdHeld(job_id, described.run_id, described.workflow_type)
        if attach_holder_only and not held_a_job(described):
            raise JobRunAdmitting(job_id, described.run_id)
        return await start(JOB_ID_REUSE_POLICY, JOB_ID_CONFLICT_POLICY)  # the job's open run: attach to it
    if not runs_jobs:
        return await start(FOREIGN_FREED_ID_REUSE_POLICY, JOB_ID_CONFLICT_POLICY)
    if await held_the_job(client, described):
        raise JobRunClosed(job_id, described.run_id, described.status)
    return await start(FREED_ID_REUSE_POLICY, JOB_ID_CONFLICT_POLICY)

"""Which runs a job id may have: one run per job, for ever (DESIGN.md decision 1, as implemented).

A job is one ``JobWorkflow`` execution whose workflow id is the job id, so everything
that addresses the job by id — ``temporal workflow describe`` / ``result`` / ``query``,
the UI's page, the list queries — must keep reading *that* run. Temporal decides whether
a start may add a run under a closed id by the start's id reuse policy, chosen by whoever
starts; so every start curaflow makes (HTTP and the reconciler, ``start_job``, the
``follow_job`` activity, the Nexus service; schedules already did) goes through
:func:`start_run`:

1. the start asks ``REJECT_DUPLICATE`` with conflict policy ``USE_EXISTING``: an open run
   is attached to, a closed one is never followed by another;
2. when Temporal refuses it because the id's run is closed, that run is described: a run
   that **held no job** (:func:`held_a_job` — it refused its Task, or was stopped before
   admitting it: it never published the job's search attributes) does not own the id,
   and the start is made again with ``ALLOW_DUPLICATE_FAILED_ONLY`` (a run that held no
   job never completes); a run that held the job raises :class:`JobRunClosed`, and the
   caller answers from it (its result, its ``admission_answer`` query) or from the
   ledger — nothing is started.

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
from collections.abc import Awaitable, Callable
from typing import TypeVar

from temporalio.client import Client, WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from curaflow.domain.execution import JOB_STATUS, JOB_TYPE

T = TypeVar("T")

#: The id reuse policy of every start curaflow makes: a closed job's run is never followed.
JOB_ID_REUSE_POLICY = WorkflowIDReusePolicy.REJECT_DUPLICATE
#: A start while the job's run is open attaches to it.
JOB_ID_CONFLICT_POLICY = WorkflowIDConflictPolicy.USE_EXISTING
#: The policy of the second start, once the closed run was found to hold no job.
FREED_ID_REUSE_POLICY = WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY


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


async def held_by_another_run(client: Client, job_id: str, run_id: str) -> bool:
    """Whether a run of ``job_id`` other than ``run_id`` holds the job: it carries the
    ``JobStatus`` search attribute, which only the job's own run publishes — so the
    documented list queries (docs/temporal.md) already name the job by that run.

    Asked only by a step that found its job already ended in the ledger
    (:func:`curaflow.ledger.cells.start_step`): for a run added under an ended job's id (a
    ``temporal workflow reset`` of the job's closed run, a start with Temporal's default
    reuse policy) it answers True, and that run only reports the job
    (``workflows.job``, ``job-input-reporting-run``). For the job's own run — one the
    reconciler ended in the ledger while it waited for a worker (queued too long, past its
    deadline) — it answers False (no other run, or only a run that held no job), and that
    run publishes the job's end as the job's.

    One visibility list of the id's runs (a handful). Visibility is eventually consistent,
    but the other run was listed with its ``JobStatus`` from its start, long before a run
    could be added after it closed.

    Raises:
        temporalio.service.RPCError: Temporal refused or did not answer the list (the
            step's attempt fails and is retried).
    """
    async for execution in client.list_workflows(f"WorkflowId = {json.dumps(job_id)}"):
        if execution.run_id != run_id and execution.typed_search_attributes.get(JOB_STATUS) is not None:
            return True
    return False


async def start_run(client: Client, job_id: str, start: Callable[[WorkflowIDReusePolicy], Awaitable[T]]) -> T:
    """Start (or attach to) the run of ``job_id`` under the rule of the module doc.

    Args:
        client: to describe the id's run when the start is refused.
        job_id: the workflow id.
        start: makes the start with the reuse policy given (and
            :data:`JOB_ID_CONFLICT_POLICY`); raises ``WorkflowAlreadyStartedError`` when
            Temporal refuses it.

    Returns:
        What ``start`` returned.

    Raises:
        JobRunClosed: the id's run held the job and is closed.
        temporalio.service.RPCError: Temporal refused a request.
    """
    try:
        return await start(JOB_ID_REUSE_POLICY)
    except WorkflowAlreadyStartedError:
        described = await client.get_workflow_handle(job_id).describe()
    if described.status == WorkflowExecutionStatus.RUNNING:
        return await start(JOB_ID_REUSE_POLICY)  # a run started meanwhile: attach to it
    if held_a_job(described):
        raise JobRunClosed(job_id, described.run_id, described.status)
    return await start(FREED_ID_REUSE_POLICY)

"""``ScheduledJobWorkflow``: the trampoline a Temporal Schedule starts for each occurrence.

Why a trampoline: Temporal appends its own timestamp to a schedule action's workflow id
(``<id>-2025-01-01T09:00:00Z``), but a scheduled job's id must be
``<schedule_id>@<YYYY-MM-DD>T<HHMM><±hhmm>``, the nominal instant in the plan's time zone
with its UTC offset (DESIGN.md decision 1),
so a late or duplicate trigger of the same minute converges on one job. One run:

1. reads the occurrence's nominal time from the ``TemporalScheduledStartTime`` search
   attribute Temporal sets on scheduled starts (the trigger time for ``schedules
   trigger``), or ``OccurrenceInput.scheduled_at_ms`` when an operator starts the
   trampoline by hand to re-run a given occurrence (``workflow.now()`` if neither);
2. ``admit_occurrence`` (activity): computes the canonical job id in the plan's time
   zone and inserts the job into the ledger if absent (trigger ``schedule``,
   ``schedule_id``, ``occurrence_date``, fallback stages from the config, targets from
   the worker's live configuration), so ``GET /jobs/{id}`` knows it; it records no start
   (a trampoline stopped before step 3 leaves the job to the reconciler, which starts it);
3. starts ``JobWorkflow`` as a child under the canonical id with
   ``REJECT_DUPLICATE`` and ``ABANDON`` (cancelling or terminating the trampoline never
   touches the job) and the job task timeout every job start uses (``JOB_TASK_TIMEOUT``,
   behind the ``scheduled-job-task-timeout`` patch) and the job's static summary and details
   (:mod:`curaflow.domain.presentation`: every value as text, behind
   ``escaped-start-metadata`` where that changes them), with cancellation type ``ABANDON``
   (behind ``occurrence-abandons-its-job``: a cancel of the trampoline ends it *Canceled*
   and never reaches the job — before, the SDK forwarded it to the awaited child and the
   job was cancelled). A duplicate ends here (``duplicate=True``) — unless the run under
   the job id is this trampoline's own (an earlier run of it started it; a reset made this
   run: :data:`FOLLOWS_ITS_OWN_JOB`), which is waited for as the child is;
4. waits for the job, so the schedule's overlap policy ``SKIP`` applies to whole jobs:
   an occurrence firing while the previous job still runs is skipped by Temporal and
   counted (``curaflow schedules list``, the ``schedule.occurrence_missed`` log line and
   the ``curaflow_schedule_occurrences_missed_total`` metric).

Deterministic and sandbox-clean: only pure modules are imported.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    WorkflowAlreadyStartedError,
)

with workflow.unsafe.imports_passed_through():
    from activities.scheduled import ScheduledActivity
    from curaflow.domain.execution import JOB_TASK_TIMEOUT, execution_timeout
    from curaflow.domain.job_failure import state_of
    from curaflow.domain.messages import JobState
    from curaflow.domain.occurrence import (
        INVALID_OCCURRENCE_INPUT,
        AdmitOccurrenceInput,
        OccurrenceAdmission,
        OccurrenceJob,
        OccurrenceResult,
        OwnJobRun,
        closed_as,
        occurrence_ended,
        occurrence_failed,
        read_occurrence_input,
    )
    from curaflow.domain.presentation import (
        SCHEDULE_ID,
        SCHEDULED_START_TIME,
        job_search_attributes,
        job_static_details,
        job_summary,
    )
    from workflows import presentation_frozen as frozen
    from workflows.job import JobWorkflow


#: ``workflow.patched`` id: the child job gets :data:`JOB_TASK_TIMEOUT` as its task timeout.
JOB_TASK_TIMEOUT_PATCH = "scheduled-job-task-timeout"
#: ``workflow.patched`` id: the child job is started with cancellation type ``ABANDON``, so
#: a cancel of the trampoline never reaches the job (it ends the trampoline *Canceled*);
#: before, the SDK forwarded it to the awaited child and the job was cancelled.
ABANDON_JOB_ON_CANCEL = "occurrence-abandons-its-job"
#: ``workflow.patched`` id: a trampoline's start input whose JSON text has no one meaning — a
#: member twice (``"schedule_id":"a","schedule_id":"b"``), ``NaN`` / ``Infinity``, ``1e400``
#: — is refused (``invalid_occurrence_input`` naming ``POST /jobs``'s refusal of that text),
#: as the job workflow refuses it (``workflows.job.ONE_MEANING``). Before, the trampoline
#: took the SDK decoder's reading of it and admitted the last plan's job. Asked only for
#: such an input: a schedule curaflow wrote records no marker.
OCCURRENCE_ONE_MEANING = "occurrence-one-meaning-input"
#: ``workflow.patched`` id: a child start Temporal refused because the job id has a run is
#: asked whose run that is (``occurrence_job_run``); the occurrence's own — an earlier run of
#: this trampoline started it, and an operator's reset (``temporal workflow reset``) made
#: this run — is waited for (``follow_own_job``) and its outcome is the occurrence's, as
#: before the reset. Before, such a run ended at once ``duplicate=True`` with no status (its
#: details "duplicate"), as a second trigger of the minute does, and the schedule's ``SKIP``
#: no longer held its next time behind the job. Asked only on that refusal.
FOLLOWS_ITS_OWN_JOB = "occurrence-follows-its-own-job"
#: ``follow_own_job``: as long as a job may run; its heartbeat says it waits (every second).
OWN_JOB_WAIT = timedelta(days=7, minutes=10)
OWN_JOB_HEARTBEAT_TIMEOUT = timedelta(seconds=30)


@workflow.defn(name="ScheduledJobWorkflow")
class ScheduledJobWorkflow:
    """One occurrence of a recurring plan: admit the job, start it under its canonical id, wait."""

    @workflow.run
    async def run(self, *args: Any) -> OccurrenceResult:
        """Admit and run the occurrence's job; returns the job id and its final status.

        Args:
            args: one :class:`~curaflow.domain.occurrence.OccurrenceInput` (the schedule's
                action). Read by :func:`~curaflow.domain.occurrence.read_occurrence_input`,
                not by the SDK's decoder: input that is no plan (an operator's hand edit of
                the action) used to fail the workflow task on every attempt — the
                trampoline open for ever and every later time of the plan skipped behind it.

        Raises:
            ApplicationError: ``invalid_occurrence_input`` (non-retryable) for input that is
                no plan, or whose JSON text has no one meaning (behind
                :data:`OCCURRENCE_ONE_MEANING`, asked only for such a text: before, the
                trampoline admitted the last plan a text naming ``schedule_id`` twice
                named); nothing is admitted. Same commands as before for a plan's input;
                other input never completed a workflow task before the untyped reading, so
                that refusal has no patch.
        """
        inp = read_occurrence_input(args, one_meaning=lambda: workflow.patched(OCCURRENCE_ONE_MEANING))
        if isinstance(inp, str):
            raise ApplicationError(inp, type=INVALID_OCCURRENCE_INPUT, non_retryable=True)
        info = workflow.info()
        if inp.scheduled_at_ms is not None:
            scheduled = datetime.fromtimestamp(inp.scheduled_at_ms / 1000, tz=UTC)
        else:
            scheduled = info.typed_search_attributes.get(SCHEDULED_START_TIME) or workflow.now()
        workflow.upsert_search_attributes([SCHEDULE_ID.value_set(inp.schedule_id)])
        admission: OccurrenceAdmission = await workflow.execute_activity_method(
            ScheduledActivity.admit_occurrence,
            AdmitOccurrenceInput(
                occurrence=inp,
                scheduled_at_ms=int(scheduled.timestamp() * 1000),
                trampoline_id=info.workflow_id,
            ),
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=RetryPolicy(
                maximum_interval=timedelta(seconds=10), non_retryable_error_types=["configuration_error"]
            ),
            summary=f"admit occurrence of {inp.schedule_id} at {scheduled:%Y-%m-%d %H:%M} UTC",
        )
        job = admission.job_input
        workflow.set_current_details(
            f"job [`{job.job_id}`](../{job.job_id}) — {'new' if admission.created else 'duplicate'}"
        )
        # Occurrences started before this patch gave the child Temporal's default task
        # timeout (10 s); every job start uses JOB_TASK_TIMEOUT now (histories replay both).
        task_timeout = JOB_TASK_TIMEOUT if workflow.patched(JOB_TASK_TIMEOUT_PATCH) else None
        # The job's summary and details show their values as text (the UI renders markdown);
        # occurrences started before keep the text they gave, asked only where it differs.
        summary, details = job_summary(job), job_static_details(job)
        before = frozen.job_summary(job), frozen.job_static_details(job)
        if (summary, details) != before and not workflow.patched(frozen.ESCAPED_METADATA):
            summary, details = before
        # Occurrences started before this patch forward their own cancel to the job.
        abandon = workflow.patched(ABANDON_JOB_ON_CANCEL)
        cancellation = (
            workflow.ChildWorkflowCancellationType.ABANDON
            if abandon
            else workflow.ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED
        )
        try:
            handle = await workflow.start_child_workflow(
                JobWorkflow.run,
                job,
                id=job.job_id,
                task_queue=inp.task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                cancellation_type=cancellation,
                execution_timeout=execution_timeout(job.created_at_ms, job.deadline_at_ms),  # as for protocol jobs
                task_timeout=task_timeout,
                search_attributes=job_search_attributes(job),
                static_summary=summary,
                static_details=details,
            )
        except WorkflowAlreadyStartedError:
            if workflow.patched(FOLLOWS_ITS_OWN_JOB):
                own = await self._own_job_run(job.job_id)
                if own is not None:
                    return await self._follow_own_job(job.job_id, own)
            workflow.logger.info("occurrence converged on existing job %s", job.job_id)
            return OccurrenceResult(job_id=job.job_id, duplicate=True)
        try:
            state: JobState = await handle
        except ChildWorkflowError as err:
            if abandon and workflow.cancellation_reason() is not None:
                # This occurrence was cancelled, not its job: the job runs on (its end is
                # the ledger's); the trampoline ends Canceled.
                workflow.logger.info("occurrence cancelled; job %s runs on", job.job_id)
                raise asyncio.CancelledError(workflow.cancellation_reason()) from None
            # A failed / expired job fails its execution with its final state; any other
            # close is said (its outcome is in the ledger: the workflow's finish, or the
            # reconciler for a closed execution).
            if state_of(err) is None:
                workflow.logger.info("job %s execution %s: %s", job.job_id, closed_as(err), err.cause or err)
            return occurrence_failed(job.job_id, err)
        return occurrence_ended(job.job_id, state)

    async def _own_job_run(self, job_id: str) -> str | None:
        """The run under ``job_id`` when an earlier run of this trampoline started it (a
        reset made this run), else None (:data:`FOLLOWS_ITS_OWN_JOB`)."""
        return await workflow.execute_activity_method(
            ScheduledActivity.occurrence_job_run,
            OccurrenceJob(
                job_id=job_id,
                trampoline_id=workflow.info().workflow_id,
                trampoline_first_run_id=workflow.info().first_execution_run_id,
            ),
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=10)),
            summary=f"whose run is job {job_id}",
        )

    async def _follow_own_job(self, job_id: str, run_id: str) -> OccurrenceResult:
        """Wait for this occurrence's own job run, started by an earlier run of this
        trampoline; its outcome is the occurrence's, as the child's was to be. A cancel of
        the trampoline ends it *Canceled* and never reaches the job (as ``ABANDON``)."""
        workflow.set_current_details(
            f"job [`{job_id}`](../{job_id}) — this occurrence's own, started by an earlier run "
            "of it (a reset): waiting for it"
        )
        try:
            return await workflow.execute_activity_method(
                ScheduledActivity.follow_own_job,
                OwnJobRun(job_id=job_id, run_id=run_id),
                start_to_close_timeout=OWN_JOB_WAIT,
                heartbeat_timeout=OWN_JOB_HEARTBEAT_TIMEOUT,
                retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=10)),
                summary=f"wait for job {job_id}",
            )
        except ActivityError:
            if workflow.cancellation_reason() is not None:
                workflow.logger.info("occurrence cancelled; job %s runs on", job_id)
                raise asyncio.CancelledError(workflow.cancellation_reason()) from None
            raise

"""The activities of a scheduled occurrence (``ScheduledJobWorkflow``, :mod:`workflows.scheduled`).

* ``admit_occurrence``: the ledger side, before the trampoline starts the occurrence's
  ``JobWorkflow``; the logic is :func:`curaflow.schedules.admit_occurrence`;
* ``occurrence_job_run`` and ``follow_own_job``: when Temporal refused that start because
  the job id has a run, whether the run is this occurrence's own — an earlier run of the
  same trampoline started it, and an operator's reset (``temporal workflow reset``) made
  the run asking now — and then its end (2026-12-07).
"""

from __future__ import annotations

import asyncio

from temporalio import activity
from temporalio.client import WorkflowFailureError

from activities.deps import ActivityDeps
from activities.errors import permanent
from curaflow.domain.messages import JobState
from curaflow.domain.occurrence import (
    AdmitOccurrenceInput,
    OccurrenceAdmission,
    OccurrenceJob,
    OccurrenceResult,
    OwnJobRun,
    occurrence_ended,
    occurrence_failed,
)
from curaflow.domain.reasons import TerminalReason
from curaflow.schedules import OccurrenceConfigError, admit_occurrence

#: Seconds between two heartbeats of ``follow_own_job`` (its heartbeat timeout is 30 s).
FOLLOW_HEARTBEAT_S = 1.0


class ScheduledActivity:
    """Holds the worker's :class:`~activities.deps.ActivityDeps` for ``admit_occurrence``."""

    def __init__(self, deps: ActivityDeps) -> None:
        self.deps = deps

    @activity.defn(name="admit_occurrence")
    async def admit_occurrence(self, inp: AdmitOccurrenceInput) -> OccurrenceAdmission:
        """Insert the occurrence's job into the ledger if absent; returns its id and argument.

        Raises:
            ApplicationError: ``configuration_error`` (non-retryable) when none of the
                plan's targets is configured on this worker.
        """
        try:
            return await admit_occurrence(self.deps.pool, self.deps.settings, inp)
        except OccurrenceConfigError as err:
            raise permanent(TerminalReason.CONFIGURATION_ERROR, str(err)) from err

    @activity.defn(name="occurrence_job_run")
    async def occurrence_job_run(self, inp: OccurrenceJob) -> str | None:
        """The run under ``inp.job_id`` when it is the asking trampoline's own, else None.

        Own: its parent is the run of the trampoline's chain that started it — an earlier
        run of this occurrence started it as its child, and a reset of the trampoline started
        the run asking (the job's run goes on: ``ABANDON``; the reset run keeps its base
        run's ``first_execution_run_id``). Any other run (another trampoline of the same
        minute: a duplicate trigger; a second backfill of the time, whose trampoline has the
        first's workflow id but a chain of its own — read as its own until the fix of
        2026-12-07, its duplicate then waited for a job already ended and said
        ``duplicate=False``; a re-run by hand; the reconciler's start of a job whose
        trampoline stopped first) is not: the occurrence is a duplicate. Temporal's
        errors are retried.

        Returns:
            The job's run id, or None.
        """
        client = self.deps.client
        assert client is not None, "a worker has a Temporal client"
        described = await client.get_workflow_handle(inp.job_id).describe()
        own = described.parent_id == inp.trampoline_id and (
            inp.trampoline_first_run_id is None or described.parent_run_id == inp.trampoline_first_run_id
        )
        return described.run_id if own else None

    @activity.defn(name="follow_own_job")
    async def follow_own_job(self, inp: OwnJobRun) -> OccurrenceResult:
        """Wait for the occurrence's job run ``inp.run_id`` to close, heartbeating every
        :data:`FOLLOW_HEARTBEAT_S`; its result read as the trampoline reads its child's.

        Returns:
            The occurrence's result (:func:`~curaflow.domain.occurrence.occurrence_ended`,
            :func:`~curaflow.domain.occurrence.occurrence_failed`).

        Raises:
            asyncio.CancelledError: the trampoline was cancelled; the job runs on.
        """
        client = self.deps.client
        assert client is not None, "a worker has a Temporal client"
        handle = client.get_workflow_handle(inp.job_id, run_id=inp.run_id, result_type=JobState)
        ended = asyncio.ensure_future(handle.result(follow_runs=False))
        try:
            while not ended.done():
                activity.heartbeat(inp.run_id)
                await asyncio.wait([ended], timeout=FOLLOW_HEARTBEAT_S)
            return occurrence_ended(inp.job_id, ended.result())
        except WorkflowFailureError as err:
            return occurrence_failed(inp.job_id, err)
        finally:
            ended.cancel()

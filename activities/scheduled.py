"""The ``admit_occurrence`` activity: the ledger side of a scheduled occurrence.

Called by ``ScheduledJobWorkflow`` (:mod:`workflows.scheduled`) before it starts the
occurrence's ``JobWorkflow``; the logic is :func:`curaflow.schedules.admit_occurrence`.
"""

from __future__ import annotations

from temporalio import activity

from activities.deps import ActivityDeps
from activities.errors import permanent
from curaflow.domain.occurrence import AdmitOccurrenceInput, OccurrenceAdmission
from curaflow.domain.reasons import TerminalReason
from curaflow.schedules import OccurrenceConfigError, admit_occurrence


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

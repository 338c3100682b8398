"""Recurring plans on Temporal Schedules: sync with the configuration, admit occurrences, watch misses.

* :mod:`curaflow.schedules.sync` — a configured plan as a Temporal Schedule; :func:`sync_schedules`
  makes Temporal match the configuration (idempotent) and returns the diff;
* :mod:`curaflow.schedules.verbs` — ``curaflow schedules list|trigger|pause|unpause``;
* :mod:`curaflow.schedules.admit` — :func:`admit_occurrence`, the ledger side of an
  occurrence (called by the ``admit_occurrence`` activity);
* :mod:`curaflow.schedules.watch` — occurrences a plan did not run, each named by its
  nominal time and cause (catch-up window, overlap, outage), recorded, logged and counted
  once each.
"""

from curaflow.schedules.admit import OccurrenceConfigError, admit_occurrence, target_spec
from curaflow.schedules.sync import (
    MEMO_TASK_QUEUE,
    Change,
    ScheduleError,
    build_schedule,
    curaflows,
    current_input,
    describe_schedule,
    diff_plan,
    managed_schedule,
    occurrence_input,
    owned_schedule_ids,
    sync_schedules,
)
from curaflow.schedules.verbs import ScheduleView, Triggered, describe_schedules, pause, trigger, unpause
from curaflow.schedules.watch import Missed, RecordedMiss, list_misses, watch_forever, watch_tick

__all__ = [
    "MEMO_TASK_QUEUE",
    "Change",
    "Missed",
    "OccurrenceConfigError",
    "RecordedMiss",
    "ScheduleError",
    "ScheduleView",
    "Triggered",
    "admit_occurrence",
    "build_schedule",
    "curaflows",
    "current_input",
    "describe_schedule",
    "describe_schedules",
    "diff_plan",
    "list_misses",
    "managed_schedule",
    "occurrence_input",
    "owned_schedule_ids",
    "pause",
    "sync_schedules",
    "target_spec",
    "trigger",
    "unpause",
    "watch_forever",
    "watch_tick",
]

"""The ``schedule_id`` label of the occurrence metrics: a configured plan's id, never any text.

A trampoline (``ScheduledJobWorkflow``) takes its plan from its start argument: a Temporal
client of the namespace, or a hand edit of a schedule's action, can start one for any
``schedule_id`` — the activity admits it (a plan removed from the configuration still runs
until ``curaflow schedules sync``). Each id became a label value of
``curaflow_schedule_occurrences_total`` and 14 series of
``curaflow_schedule_start_lag_seconds`` in every worker, for the life of the process: a
client starting occurrences of ``x1``, ``x2``, … grew every worker's ``/metrics`` without
bound. An id that is no configured plan is counted under ``metrics.UNCONFIGURED_PLAN``.
"""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg
import pytest

from curaflow.config import Settings
from curaflow.config.schedules import ScheduleConfig
from curaflow.domain.occurrence import AdmitOccurrenceInput, OccurrenceInput
from curaflow.observability import metrics
from curaflow.observability.metrics import SCHEDULE_OCCURRENCES, SCHEDULE_START_LAG
from curaflow.schedules.admit import admit_occurrence
from tests.support import short_id

pytestmark = [pytest.mark.integration]


def labels() -> set[str]:
    return {
        sample.labels["schedule_id"]
        for metric in (SCHEDULE_OCCURRENCES, SCHEDULE_START_LAG)
        for family in metric.collect()
        for sample in family.samples
    }


async def test_occurrences_of_ids_no_plan_configures_count_under_one_label(ledger_pool: asyncpg.Pool) -> None:
    plan = f"nightly{short_id()}"
    settings = Settings(schedules=[ScheduleConfig(id=plan, cron=["0 3 * * *"])])
    at = int(datetime(2026, 12, 5, 3, tzinfo=UTC).timestamp() * 1000)
    forged = [f"forged-{short_id()}-{n}" for n in range(5)]
    for schedule_id in [plan, *forged, forged[0]]:  # the last one: a duplicate
        occurrence = OccurrenceInput(schedule_id=schedule_id, cron=["0 3 * * *"], task_queue="curaflow")
        await admit_occurrence(
            ledger_pool, settings, AdmitOccurrenceInput(occurrence=occurrence, scheduled_at_ms=at, trampoline_id="t")
        )
    seen = labels()
    assert not any(label.startswith("forged-") for label in seen)
    assert plan in seen and metrics.UNCONFIGURED_PLAN in seen
    [unconfigured] = [
        sample.value
        for family in SCHEDULE_OCCURRENCES.collect()
        for sample in family.samples
        if sample.name.endswith("_total")
        and sample.labels == {"schedule_id": metrics.UNCONFIGURED_PLAN, "result": "started"}
    ]
    assert unconfigured >= 5

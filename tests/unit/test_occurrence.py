"""Occurrence ids, schedule building and the sync diff (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from temporalio.client import ScheduleActionStartWorkflow, ScheduleOverlapPolicy

from curaflow.config import ScheduleConfig, Settings
from curaflow.domain.messages import JobInput, TargetSpec
from curaflow.domain.occurrence import (
    CATCHUP_WINDOW_S,
    MissCause,
    legacy_occurrence_job_id,
    name_misses,
    occurrence_job_id,
)
from curaflow.domain.presentation import job_search_attributes, job_static_details, job_summary
from curaflow.schedules import Change, build_schedule, diff_plan, occurrence_input


def test_occurrence_id_uses_the_plans_time_zone() -> None:
    at = datetime(2025, 3, 9, 23, 30, 42, tzinfo=UTC)
    assert occurrence_job_id("nightly", at, "UTC") == ("nightly@2025-03-09T2330+0000", "2025-03-09")
    # Tokyo is UTC+9: the local date is the next day
    assert occurrence_job_id("nightly", at, "Asia/Tokyo") == ("nightly@2025-03-10T0830+0900", "2025-03-10")
    # New York on the DST switch day (UTC-4 after 2025-03-09 07:00 UTC)
    assert occurrence_job_id("nightly", at, "America/New_York") == ("nightly@2025-03-09T1930-0400", "2025-03-09")


def test_the_two_instants_of_a_fall_back_hour_are_two_occurrences() -> None:
    """``@every 1h`` in Europe/Berlin on 2026-10-25: 02:00 CEST (00:00 UTC) and 02:00 CET
    (01:00 UTC) read the same on the wall clock; they are two jobs."""
    cest = datetime(2026, 10, 25, 0, 0, tzinfo=UTC)
    cet = datetime(2026, 10, 25, 1, 0, tzinfo=UTC)
    assert occurrence_job_id("hourly", cest, "Europe/Berlin") == ("hourly@2026-10-25T0200+0200", "2026-10-25")
    assert occurrence_job_id("hourly", cet, "Europe/Berlin") == ("hourly@2026-10-25T0200+0100", "2026-10-25")
    # every hour of the day around the switch has its own id (25 hours, 25 ids)
    day = [datetime(2026, 10, 24, 22, 0, tzinfo=UTC) + timedelta(hours=h) for h in range(25)]
    assert len({occurrence_job_id("hourly", t, "Europe/Berlin")[0] for t in day}) == 25
    # spring forward (2026-03-29, 02:00 CET → 03:00 CEST): 01:00 UTC is 03:00 CEST
    spring = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    assert occurrence_job_id("hourly", spring, "Europe/Berlin")[0] == "hourly@2026-03-29T0300+0200"


def test_a_legacy_id_stands_for_the_earlier_instant_of_its_wall_time() -> None:
    """Jobs admitted before ids carried the offset are found again for their instant only."""
    cest = datetime(2026, 10, 25, 0, 0, tzinfo=UTC)
    cet = datetime(2026, 10, 25, 1, 0, tzinfo=UTC)
    assert legacy_occurrence_job_id("hourly", cest, "Europe/Berlin") == "hourly@2026-10-25T0200"
    assert legacy_occurrence_job_id("hourly", cet, "Europe/Berlin") is None
    plain = datetime(2025, 3, 9, 23, 30, 42, tzinfo=UTC)
    assert legacy_occurrence_job_id("nightly", plain, "Asia/Tokyo") == "nightly@2025-03-10T0830"
    assert legacy_occurrence_job_id("nightly", plain, "UTC") == "nightly@2025-03-09T2330"


def test_occurrence_id_is_per_minute_seconds_do_not_matter() -> None:
    a = occurrence_job_id("p", datetime(2025, 1, 1, 9, 0, 0, tzinfo=UTC), "UTC")
    b = occurrence_job_id("p", datetime(2025, 1, 1, 9, 0, 59, tzinfo=UTC), "UTC")
    c = occurrence_job_id("p", datetime(2025, 1, 1, 9, 1, 0, tzinfo=UTC), "UTC")
    assert a == b != c


def test_naive_time_is_utc() -> None:
    assert occurrence_job_id("p", datetime(2025, 1, 1, 9, 5), "UTC")[0] == "p@2025-01-01T0905+0000"


def _settings(**plan: object) -> Settings:
    base = {"id": "nightly", "cron": ["0 3 * * *"], "timezone": "Europe/Paris", "target_ids": ["demo"]}
    return Settings(schedules=[ScheduleConfig.model_validate({**base, **plan})])


def test_schedule_policies_skip_overlap_90_min_catchup() -> None:
    settings = _settings(jitter_ms=30_000, paused=True)
    schedule = build_schedule(settings, settings.schedules[0])
    assert schedule.policy.overlap == ScheduleOverlapPolicy.SKIP
    assert schedule.policy.catchup_window == timedelta(seconds=CATCHUP_WINDOW_S) == timedelta(minutes=90)
    assert schedule.spec.cron_expressions == ["0 3 * * *"]
    assert schedule.spec.time_zone_name == "Europe/Paris"
    assert schedule.spec.jitter == timedelta(seconds=30)
    assert schedule.state.paused is True
    action = schedule.action
    assert isinstance(action, ScheduleActionStartWorkflow)
    assert action.workflow == "ScheduledJobWorkflow"
    assert action.task_queue == "curaflow"


def test_diff_names_each_changed_field() -> None:
    settings = _settings()
    plan = settings.schedules[0]
    desired = occurrence_input(settings, plan)
    assert diff_plan(desired, False, desired, plan) == {}
    current = desired.model_copy(update={"cron": ["0 4 * * *"]})
    changes = diff_plan(current, True, desired, plan)
    assert changes == {"cron": (["0 4 * * *"], ["0 3 * * *"]), "paused": (True, False)}
    assert Change("nightly", "update", changes).render() == (
        "~ nightly: cron ['0 4 * * *'] → ['0 3 * * *']; paused True → False"
    )
    assert Change("x", "create").render() == "+ x"
    assert Change("x", "delete").render() == "- x"


def test_presentation_of_a_scheduled_job() -> None:
    inp = JobInput(
        job_id="nightly@2025-01-01T0300",
        plan_id="nightly",
        schedule_id="nightly",
        trigger="schedule",
        created_at_ms=1_735_700_400_000,
        deadline_at_ms=1_735_702_200_000,
        targets=[TargetSpec(target_id="demo", query={"tags": ["風景", "空"], "relation": "or"})],
        max_fallback_stages=3,
    )
    attrs = {p.key.name: p.value for p in job_search_attributes(inp)}
    assert attrs == {
        "JobStatus": "queued",
        "JobType": "candidate_search",
        "TargetIds": ["demo"],
        "ScheduleId": "nightly",
    }
    assert job_summary(inp) == "candidate_search (schedule nightly) — demo: 風景 OR 空"
    details = job_static_details(inp)
    assert "**schedule** `nightly`" in details and "**fallback passes** 3" in details
    assert "2025-01-01 03:00:00 UTC" in details


def test_a_missed_time_is_named_by_its_cause() -> None:
    """The oldest times of an outage beyond the catch-up window are catch-up misses; a time
    skipped while a job of the plan was open is an overlap; one skipped while none was
    (Temporal or the workers were down) is an outage."""
    h = 3_600_000
    job = (10 * h + 5, 12 * h)  # admitted just after 10:00, finished at 12:00
    named = name_misses([8 * h, 9 * h, 11 * h, 12 * h], missed_catchup=1, skipped=3, open_jobs=[job])
    assert named == [
        (8 * h, MissCause.CATCHUP_WINDOW),
        (9 * h, MissCause.OUTAGE),
        (11 * h, MissCause.OVERLAP),
        (12 * h, MissCause.OUTAGE),  # the job had finished at that instant
    ]
    # a job still open (never finished) covers every later time
    assert name_misses([13 * h], missed_catchup=0, skipped=1, open_jobs=[(12 * h, None)]) == [
        (13 * h, MissCause.OVERLAP)
    ]


def test_only_as_many_times_as_temporal_counted_are_named_the_latest() -> None:
    """More matched times than Temporal dropped means the schedule was paused meanwhile (a
    paused time is no miss): the latest ones are named; nothing counted, nothing named."""
    assert name_misses([1, 2, 3], missed_catchup=0, skipped=1, open_jobs=[]) == [(3, MissCause.OUTAGE)]
    assert name_misses([1, 2, 3], missed_catchup=0, skipped=0, open_jobs=[]) == []
    assert name_misses([], missed_catchup=2, skipped=1, open_jobs=[]) == []


def test_the_trampoline_reads_its_input_and_says_what_is_wrong_with_junk() -> None:
    """Input an operator's hand edit of the action can pass: never raises, names what came."""
    from temporalio.api.common.v1 import Payload
    from temporalio.common import RawValue

    from curaflow.domain.occurrence import OccurrenceInput, read_occurrence_input

    plan = {"schedule_id": "nightly", "cron": ["0 3 * * *"], "task_queue": "q"}
    assert read_occurrence_input([plan]) == OccurrenceInput.model_validate(plan)
    model = OccurrenceInput.model_validate(plan)
    assert read_occurrence_input([model]) is model
    for args, says in (
        ([{"junk": 1}], "fields: cron, schedule_id, task_queue"),
        (["junk"], "a JSON string"),
        ([None], "a JSON null"),
        ([[plan]], "a JSON array"),
        ([], "0 arguments"),
        ([plan, plan], "2 arguments"),
        ([RawValue(Payload(metadata={"encoding": b"binary/plain"}, data=b"x"))], "not JSON"),
    ):
        problem = read_occurrence_input(args)
        assert isinstance(problem, str) and says in problem, (args, problem)
        assert "curaflow schedules sync" in problem


def test_every_miss_cause_is_a_series_of_the_missed_counter_from_a_workers_start() -> None:
    """``CuraflowScheduleOccurrencesMissed`` reads each cause's series from 0
    (:func:`curaflow.observability.metrics.initialise_series`)."""
    from curaflow.observability.metrics import MISS_CAUSES

    assert set(MISS_CAUSES) == {cause.value for cause in MissCause}

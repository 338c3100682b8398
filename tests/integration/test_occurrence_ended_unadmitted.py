"""An occurrence Temporal started that ended before its job was admitted is a named miss.

A trampoline is bounded (its action's ``execution_timeout``: the catch-up window plus the
job's run bound, DESIGN.md "An occurrence is bounded in time"): after every worker (or the
ledger) was down longer than that, the occurrence Temporal started at the first time of the
outage times out without a job. Temporal counts it as an action taken, never as a miss, so
the watch — which named the times skipped behind it ``skipped_outage`` — left that one time
said nowhere: no job, no miss, ``schedules misses`` silent about the first time of the
outage. The bound is shortened here by hand (3 s for 90 min and more) so the test need not
wait out a real outage. Real dev server, real PostgreSQL, no worker.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from temporalio.api.enums.v1.workflow_pb2 import WorkflowExecutionStatus as Status
from temporalio.api.schedule.v1 import ScheduleActionResult as ScheduleActionResultProto
from temporalio.api.workflowservice.v1 import DescribeScheduleResponse as ScheduleDescriptionProto
from temporalio.client import (
    Client,
    ScheduleActionStartWorkflow,
    ScheduleUpdate,
    ScheduleUpdateInput,
)

from curaflow import schedules as plans
from curaflow.domain.occurrence import AdmitOccurrenceInput, MissCause, occurrence_minute_ms
from curaflow.observability.metrics import SCHEDULE_MISSED
from curaflow.schedules import OccurrenceConfigError, admit_occurrence, watch
from curaflow.schedules.sync import occurrence_input
from curaflow.schedules.watch import record_misses, unadmitted_actions
from tests.conftest import StackFactory
from tests.integration.test_schedules import _cleanup, plan_config
from tests.support import eventually, short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CANCELED = Status.WORKFLOW_EXECUTION_STATUS_CANCELED
FAILED = Status.WORKFLOW_EXECUTION_STATUS_FAILED
TIMED_OUT = Status.WORKFLOW_EXECUTION_STATUS_TIMED_OUT


async def test_an_occurrence_that_timed_out_before_its_admission_is_a_named_miss(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client
) -> None:
    plan_id = f"plan-{short_id()}"
    stack = make_stack(plan_config(tmp_path, plan_id, cron=["@every 2s"], timezone="UTC"))
    client, pool = temporal_client, await stack.ledger()
    handle = client.get_schedule_handle(plan_id)
    try:
        await plans.sync_schedules(client, stack.settings)

        def shortened(current: ScheduleUpdateInput) -> ScheduleUpdate:
            schedule = current.description.schedule
            assert isinstance(schedule.action, ScheduleActionStartWorkflow)
            schedule.action.execution_timeout = timedelta(seconds=3)  # stands for hours without a worker
            return ScheduleUpdate(schedule=schedule)

        await handle.update(shortened)

        async def timed_out() -> list[int] | None:
            # The schedule's own record of the run's status, which the watch reads: Temporal's
            # scheduler learns of a started run's close after the run's own describe shows it
            # (a tick between the two saw the action still running and named nothing).
            await plans.watch_tick(pool, client, stack.settings)
            desc = await handle.describe()
            ended = [
                watch.nominal_ms(action)
                for action in desc.raw_description.info.recent_actions
                if action.start_workflow_status == TIMED_OUT
            ]
            return ended or None

        ended = await eventually(timed_out, timeout_s=30, interval_s=0.5, what="an occurrence timed out")
        await handle.pause()
        await plans.watch_tick(pool, client, stack.settings)

        assert not await pool.fetchval("SELECT count(*) FROM jobs WHERE schedule_id = $1", plan_id)
        recorded = {m.nominal_at: m.why for m in await plans.list_misses(pool, plan_id, limit=1000)}
        for at in ended:  # the time Temporal started, and whose occurrence ran no job, is said (its minute)
            assert recorded.get(occurrence_minute_ms(at)) == "not_admitted", (at, recorded)
        assert SCHEDULE_MISSED.labels(schedule_id=plan_id, why="not_admitted")._value.get() >= 1
        before = dict(recorded)
        await plans.watch_tick(pool, client, stack.settings)  # seen again: named once
        assert {m.nominal_at: m.why for m in await plans.list_misses(pool, plan_id, limit=1000)} == before
        assert "skipped_outage" in recorded.values()  # the times skipped behind it, as before
    finally:
        await _cleanup(client, plan_id)


def _action(workflow_id: str, schedule_ms: int, status: int) -> ScheduleActionResultProto:
    """A recent action as Temporal describes it: ``schedule_time`` includes the plan's jitter,
    the workflow id ends in the nominal time (measured on the dev server: nominal 19:53:40,
    ``schedule_time`` 19:53:41.443, ``TemporalScheduledStartTime`` 19:53:40)."""
    action = ScheduleActionResultProto(start_workflow_status=status)  # type: ignore[arg-type]
    action.schedule_time.FromMilliseconds(schedule_ms)
    action.actual_time.FromMilliseconds(schedule_ms + 20)
    action.start_workflow_result.workflow_id = workflow_id
    return action


async def test_an_occurrence_is_named_by_its_nominal_minute_not_its_jittered_action_time(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    """A plan with a jitter: Temporal's action time is the nominal time plus the jitter,
    which may fall in the next minute. An occurrence cancelled by hand once its job was
    admitted (the job runs on) is no miss, and one refused by the admission
    (``configuration_error``) is named once, under the minute the admission named."""
    plan_id = f"plan-{short_id()}"
    stack = make_stack(plan_config(tmp_path, plan_id, cron=["0 9 * * *"], timezone="UTC", jitter_ms=300_000))
    pool = await stack.ledger()
    nominal = int(datetime(2026, 12, 7, 9, 0, tzinfo=UTC).timestamp() * 1000)
    plan = stack.settings.schedules[0]
    occurrence = occurrence_input(stack.settings, plan)
    await admit_occurrence(pool, stack.settings, AdmitOccurrenceInput(occurrence=occurrence, scheduled_at_ms=nominal))
    refused = nominal + 24 * 3600 * 1000  # the next day: none of its targets configured on this worker
    unknown = stack.settings.model_copy(update={"schedules": [plan.model_copy(update={"target_ids": ["gone"]})]})
    with pytest.raises(OccurrenceConfigError):
        await admit_occurrence(pool, unknown, AdmitOccurrenceInput(occurrence=occurrence, scheduled_at_ms=refused))
    raw = ScheduleDescriptionProto()
    raw.info.recent_actions.extend(
        [
            _action(f"{plan_id}@occurrence-2026-12-07T09:00:00Z", nominal + 150_000, CANCELED),
            _action(f"{plan_id}@occurrence-2026-12-08T09:00:00Z", refused + 150_000, FAILED),
        ]
    )
    desc = SimpleNamespace(raw_description=raw)
    async with pool.acquire() as conn:
        assert await unadmitted_actions(conn, plan_id, desc) == [refused]  # type: ignore[arg-type]


async def test_an_occurrence_named_not_admitted_whose_admission_then_commits_is_no_miss(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    """A trampoline cancelled or terminated while its ``admit_occurrence`` runs closes at
    once; the activity (it hears no cancel) commits its job a moment later, which the
    reconciler then starts. A watch tick in between named the minute ``not_admitted``: the
    admission that commits the job takes that name back, so the ledger never holds a time
    both run and missed."""
    plan_id = f"plan-{short_id()}"
    stack = make_stack(plan_config(tmp_path, plan_id, cron=["0 9 * * *"], timezone="UTC"))
    pool = await stack.ledger()
    nominal = int(datetime(2026, 12, 7, 9, 0, tzinfo=UTC).timestamp() * 1000)
    async with pool.acquire() as conn:
        assert await record_misses(conn, plan_id, [(nominal, MissCause.NOT_ADMITTED)], nominal + 1000)
    occurrence = occurrence_input(stack.settings, stack.settings.schedules[0])
    admission = await admit_occurrence(
        pool, stack.settings, AdmitOccurrenceInput(occurrence=occurrence, scheduled_at_ms=nominal)
    )
    assert admission.created
    assert await plans.list_misses(pool, plan_id) == []


async def test_a_not_admitted_miss_that_retention_pruned_is_not_named_again(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Temporal lists a schedule's last ten actions for as long as they are its last ten
    (ten days of a daily plan, ten weeks of a weekly one), and retention deletes every miss
    older than ``retention.days`` (``curaflow.ledger.retention.prune``, each pass). A closed
    action whose miss was pruned, seen again by the next tick, was named ``not_admitted``
    again: logged, counted and alerted anew after every retention pass while Temporal
    listed it. A time retention prunes is named by no tick; a recent one still is, once."""
    plan_id = f"plan-{short_id()}"
    config = plan_config(tmp_path, plan_id, cron=["0 9 * * *"], timezone="UTC", paused=True)
    config["retention"] = {"days": 1}
    stack = make_stack(config)
    client, pool = temporal_client, await stack.ledger()
    now = int(datetime.now(UTC).timestamp() * 1000)
    recent = occurrence_minute_ms(now - 600_000)  # ten minutes ago: kept by retention
    old = occurrence_minute_ms(now - 3 * 24 * 3600 * 1000)  # three days ago: pruned by it

    def stamp(ms: int) -> str:
        return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    described = watch.describe_schedule

    async def with_closed_actions(client: Client, schedule_id: str) -> object:
        desc = await described(client, schedule_id)
        if desc is not None and schedule_id == plan_id:
            desc.raw_description.info.recent_actions.extend(
                [
                    _action(f"{plan_id}@occurrence-{stamp(old)}", old + 2_000, TIMED_OUT),
                    _action(f"{plan_id}@occurrence-{stamp(recent)}", recent + 2_000, TIMED_OUT),
                ]
            )
        return desc

    monkeypatch.setattr(watch, "describe_schedule", with_closed_actions)
    named: list[tuple[datetime, MissCause]] = []
    try:
        await plans.sync_schedules(client, stack.settings)
        for _ in range(3):  # a tick, then retention's pass, and again
            named += [d for missed in await plans.watch_tick(pool, client, stack.settings) for d in missed.dropped]
            await pool.execute(  # what retention's pass deletes of this plan's misses
                "DELETE FROM schedule_misses WHERE schedule_id = $1 AND nominal_at < $2",
                plan_id,
                now - stack.settings.retention.days * 24 * 3600 * 1000,  # type: ignore[operator]
            )
        at = {int(t.timestamp() * 1000) for t, why in named if why == MissCause.NOT_ADMITTED}
        assert [int(t.timestamp() * 1000) for t, _ in named] == [recent], named
        assert at == {recent}
    finally:
        await _cleanup(client, plan_id)


async def test_an_admission_committing_between_the_watch_reading_and_naming_the_minute_is_no_miss(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other order of the race above: the watch reads the closed action's minute and
    finds no job, the admission (its trampoline cancelled while it ran) commits the job —
    and finds no miss to take back —, then the watch records the miss. The ledger held
    the time both run and missed. The watch names the minute only if, under the minute's
    lock (the admission's), the ledger still holds no job of it."""
    plan_id = f"plan-{short_id()}"
    stack = make_stack(plan_config(tmp_path, plan_id, cron=["0 9 * * *"], timezone="UTC", paused=True))
    client, pool = temporal_client, await stack.ledger()
    nominal = occurrence_minute_ms(int(datetime.now(UTC).timestamp() * 1000) - 600_000)
    stamp = datetime.fromtimestamp(nominal / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    described = watch.describe_schedule

    async def with_a_cancelled_action(client: Client, schedule_id: str) -> object:
        desc = await described(client, schedule_id)
        if desc is not None and schedule_id == plan_id:
            desc.raw_description.info.recent_actions.append(
                _action(f"{plan_id}@occurrence-{stamp}", nominal + 2_000, CANCELED)
            )
        return desc

    occurrence = occurrence_input(stack.settings, stack.settings.schedules[0])
    admissions: list[asyncio.Future[object]] = []  # the one admission, started after the watch's first read
    read = watch.occurrence_job

    async def admitted_right_after_the_read(conn: object, schedule_id: str, minute_ms: int) -> str | None:
        found = await read(conn, schedule_id, minute_ms)  # type: ignore[arg-type]
        if schedule_id == plan_id and not admissions:
            admissions.append(
                asyncio.ensure_future(
                    admit_occurrence(
                        pool, stack.settings, AdmitOccurrenceInput(occurrence=occurrence, scheduled_at_ms=nominal)
                    )
                )
            )
            # committed before the watch goes on — unless the read was under the minute's
            # lock, which the admission then waits for (the watch goes first)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(admissions[0]), timeout=5)
        return found

    monkeypatch.setattr(watch, "describe_schedule", with_a_cancelled_action)
    monkeypatch.setattr(watch, "occurrence_job", admitted_right_after_the_read)
    try:
        await plans.sync_schedules(client, stack.settings)
        await plans.watch_tick(pool, client, stack.settings)
        assert admissions, "the watch read the closed action's minute"
        await admissions[0]
        assert await pool.fetchval("SELECT count(*) FROM jobs WHERE schedule_id = $1", plan_id) == 1
        assert await plans.list_misses(pool, plan_id) == []  # run, so not missed
    finally:
        await _cleanup(client, plan_id)

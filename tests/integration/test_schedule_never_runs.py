"""A plan whose schedule will never start another occurrence: said by ``sync`` and the watch.

A cron at the edge of the calendar (``0 0 30 2 *``, the 30th of February; ``0 0 31 4 *``)
passes the configuration's shape check and Temporal creates the schedule, which then
matches no time at all; an operator's edit can do the same to a plan that ran (its spec
emptied, an end time, a count of remaining actions). Before, nothing said so: ``sync``
printed ``+ id`` / ``= id``, the watch's ``curaflow_schedule_broken`` stayed 0, and the
plan stopped in silence. Real dev server, real PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from structlog.testing import capture_logs
from temporalio.client import Client, ScheduleSpec, ScheduleUpdate, ScheduleUpdateInput

from curaflow import schedules as plans
from tests.conftest import StackFactory
from tests.integration.test_schedules import _cleanup, plan_config
from tests.support import short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def never_runs(plan_id: str) -> float | None:
    return REGISTRY.get_sample_value("curaflow_schedule_broken", {"schedule_id": plan_id, "why": "never_runs"})


async def test_a_cron_matching_no_date_is_said_by_sync_and_by_the_watch(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client
) -> None:
    plan_id = f"plan-{short_id()}"
    stack = make_stack(plan_config(tmp_path, plan_id, cron=["0 0 30 2 *", "0 0 31 4 *"]))
    client, pool = temporal_client, await stack.ledger()
    try:
        [created] = await plans.sync_schedules(client, stack.settings)
        assert created.action == "create" and created.never_runs
        assert "never runs" in created.render()
        [again] = await plans.sync_schedules(client, stack.settings)
        assert again.action == "unchanged" and again.never_runs and "never runs" in again.render()

        with capture_logs() as logs:
            await plans.watch_tick(pool, client, stack.settings)
        assert [(e["event"], e["schedule_id"]) for e in logs if e["log_level"] == "warning"] == [
            ("schedule.never_runs", plan_id)
        ]
        assert never_runs(plan_id) == 1.0
    finally:
        await _cleanup(client, plan_id)


async def test_a_schedule_edited_to_run_no_more_is_a_change_sync_restores_and_the_watch_says(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client
) -> None:
    """The spec emptied, or a count of remaining actions set, with Temporal's tools: the plan's
    input, time zone and policies unchanged. ``sync`` printed ``= id`` and left it."""
    plan_id = f"plan-{short_id()}"
    stack = make_stack(plan_config(tmp_path, plan_id))  # 0 3 * * * Asia/Tokyo
    client, pool = temporal_client, await stack.ledger()
    handle = client.get_schedule_handle(plan_id)
    try:
        await plans.sync_schedules(client, stack.settings)
        await plans.watch_tick(pool, client, stack.settings)
        assert never_runs(plan_id) == 0.0

        def emptied(current: ScheduleUpdateInput) -> ScheduleUpdate:
            schedule = current.description.schedule
            schedule.spec = ScheduleSpec(time_zone_name=schedule.spec.time_zone_name)
            return ScheduleUpdate(schedule=schedule)

        await handle.update(emptied)
        with capture_logs() as logs:
            await plans.watch_tick(pool, client, stack.settings)
        assert [(e["event"], e["schedule_id"]) for e in logs if e["log_level"] == "warning"] == [
            ("schedule.never_runs", plan_id)
        ]
        assert never_runs(plan_id) == 1.0
        [change] = await plans.sync_schedules(client, stack.settings)
        assert change.action == "update" and change.changes == {"spec_expressions": (0, 1)}, change.render()
        assert (await handle.describe()).info.next_action_times
        await plans.watch_tick(pool, client, stack.settings)
        assert never_runs(plan_id) == 0.0

        def limited(current: ScheduleUpdateInput) -> ScheduleUpdate:
            schedule = current.description.schedule
            schedule.state.limited_actions, schedule.state.remaining_actions = True, 2
            return ScheduleUpdate(schedule=schedule)

        await handle.update(limited)
        [change] = await plans.sync_schedules(client, stack.settings)
        assert change.changes == {"limited_actions": (2, None)}, change.render()
        assert not (await handle.describe()).schedule.state.limited_actions
        assert [c.action for c in await plans.sync_schedules(client, stack.settings)] == ["unchanged"]
    finally:
        await _cleanup(client, plan_id)

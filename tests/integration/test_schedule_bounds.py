"""A plan's occurrences are bounded in time: the schedule's action carries an execution
timeout derived from what the trampoline waits for, and ``sync`` gives it to schedules
synced before it existed. Real dev server, real PostgreSQL, no worker (an occurrence no
worker takes is the one that would wait for ever)."""

from __future__ import annotations

import contextlib
import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.client import Client, ScheduleActionStartWorkflow, ScheduleUpdate, ScheduleUpdateInput

from curaflow import schedules as plans
from curaflow.domain.execution import EXECUTION_GRACE
from curaflow.domain.occurrence import CATCHUP_WINDOW_S, occurrence_timeout
from tests.conftest import StackFactory
from tests.integration.test_schedules import _cleanup, plan_config
from tests.support import eventually, short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def test_an_occurrence_is_bounded_by_its_job_s_run_and_sync_bounds_a_schedule_synced_before(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client
) -> None:
    """The schedule's action had no execution timeout: an occurrence no worker took (or whose
    admission never got through) stayed open for ever, and overlap ``SKIP`` skipped every
    later time of the plan behind it. The trampoline is now started with the catch-up window
    (to get its job admitted and started) plus its job's own run bound (the configured
    deadline plus Temporal's grace); ``sync`` reads the bound on Temporal's copy and
    rewrites a schedule that lacks it or holds another."""
    plan_id = f"plan-{short_id()}"
    config = plan_config(tmp_path, plan_id)
    config["budgets"] = {"default_deadline_ms": 45 * 60 * 1000}
    stack = make_stack(config)
    client = temporal_client
    bound = timedelta(seconds=CATCHUP_WINDOW_S) + timedelta(minutes=45) + EXECUTION_GRACE
    handle = client.get_schedule_handle(plan_id)
    trampoline = ""
    try:
        await plans.sync_schedules(client, stack.settings)
        assert occurrence_timeout(stack.settings.budgets.default_deadline_ms) == bound
        action = (await handle.describe()).schedule.action
        assert isinstance(action, ScheduleActionStartWorkflow)
        assert action.execution_timeout == bound

        # the occurrence Temporal starts carries it (no worker: it waits, bounded)
        await plans.trigger(client, plan_id, task_queue=stack.settings.temporal.task_queue)

        async def started() -> str | None:
            recent = (await handle.describe()).info.recent_actions
            return recent[-1].action.workflow_id if recent else None

        trampoline = await eventually(started, what="the trampoline")
        desc = await client.get_workflow_handle(trampoline).describe()
        assert desc.raw_description.execution_config.workflow_execution_timeout.ToTimedelta() == bound

        # a schedule synced before the bound (its action without one): sync says it and bounds it
        def unbounded(update: ScheduleUpdateInput) -> ScheduleUpdate:
            schedule = update.description.schedule
            assert isinstance(schedule.action, ScheduleActionStartWorkflow)
            action = dataclasses.replace(schedule.action, execution_timeout=None)
            return ScheduleUpdate(schedule=dataclasses.replace(schedule, action=action))

        await handle.update(unbounded)
        [change] = await plans.sync_schedules(client, stack.settings, dry_run=True)
        assert change.changes == {"execution_timeout": (None, bound)}
        assert "execution_timeout" in change.render()
        await plans.sync_schedules(client, stack.settings)
        action = (await handle.describe()).schedule.action
        assert isinstance(action, ScheduleActionStartWorkflow) and action.execution_timeout == bound
        assert [c.action for c in await plans.sync_schedules(client, stack.settings)] == ["unchanged"]

        # a configuration whose deadline changed: the bound follows it
        longer = stack.settings.model_copy(
            update={"budgets": stack.settings.budgets.model_copy(update={"default_deadline_ms": 2 * 3600 * 1000})}
        )
        [change] = await plans.sync_schedules(client, longer)
        wanted = timedelta(seconds=CATCHUP_WINDOW_S) + timedelta(hours=2) + EXECUTION_GRACE
        assert change.changes == {"execution_timeout": (bound, wanted)}
    finally:
        if trampoline:
            with contextlib.suppress(Exception):
                await client.get_workflow_handle(trampoline).terminate("test over")
        await _cleanup(client, plan_id)

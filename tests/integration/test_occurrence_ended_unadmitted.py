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

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.client import (
    Client,
    ScheduleActionStartWorkflow,
    ScheduleUpdate,
    ScheduleUpdateInput,
    WorkflowExecutionStatus,
)

from curaflow import schedules as plans
from curaflow.domain.occurrence import occurrence_minute_ms
from curaflow.observability.metrics import SCHEDULE_MISSED
from tests.conftest import StackFactory
from tests.integration.test_schedules import _cleanup, plan_config
from tests.support import eventually, short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]


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

        async def timed_out() -> list[datetime] | None:
            await plans.watch_tick(pool, client, stack.settings)
            desc = await handle.describe()
            ended = []
            for action in desc.info.recent_actions:
                run = await client.get_workflow_handle(action.action.workflow_id).describe()  # type: ignore[attr-defined]
                if run.status == WorkflowExecutionStatus.TIMED_OUT:
                    ended.append(action.scheduled_at)
            return ended or None

        ended = await eventually(timed_out, timeout_s=30, interval_s=0.5, what="an occurrence timed out")
        await handle.pause()
        await plans.watch_tick(pool, client, stack.settings)

        assert not await pool.fetchval("SELECT count(*) FROM jobs WHERE schedule_id = $1", plan_id)
        recorded = {m.nominal_at: m.why for m in await plans.list_misses(pool, plan_id, limit=1000)}
        for at in ended:  # the time Temporal started, and whose occurrence ran no job, is said (its minute)
            nominal = occurrence_minute_ms(int(at.astimezone(UTC).timestamp() * 1000))
            assert recorded.get(nominal) == "not_admitted", (at, recorded)
        assert SCHEDULE_MISSED.labels(schedule_id=plan_id, why="not_admitted")._value.get() >= 1
        before = dict(recorded)
        await plans.watch_tick(pool, client, stack.settings)  # seen again: named once
        assert {m.nominal_at: m.why for m in await plans.list_misses(pool, plan_id, limit=1000)} == before
        assert "skipped_outage" in recorded.values()  # the times skipped behind it, as before
    finally:
        await _cleanup(client, plan_id)

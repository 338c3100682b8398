"""An occurrence admitted by a worker whose configuration lacks the plan's targets: two
workers with different configurations (a rolling change: the plan and its target were
added and synced, this worker still runs the configuration before), or a plan removed
from the configuration whose schedule was not synced. Real dev server, real PostgreSQL,
a real worker process."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ActivityError, ApplicationError

from curaflow import schedules as plans
from curaflow.domain.occurrence import AdmitOccurrenceInput, occurrence_minute_ms
from curaflow.observability import metrics
from curaflow.observability.metrics import SCHEDULE_MISSED
from tests.conftest import StackFactory
from tests.integration.test_schedules import _cleanup, plan_config
from tests.jobs_support import scheduled_jobs
from tests.support import eventually, short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def test_an_occurrence_no_target_of_which_is_configured_where_it_is_admitted_is_a_named_miss(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client
) -> None:
    """The trampoline fails at once (``configuration_error``, nothing admitted) — and the
    time is a miss like any other time that started no job: recorded once in
    ``schedule_misses`` under its nominal time, logged ``schedule.occurrence_missed`` and
    counted in ``curaflow_schedule_occurrences_missed_total`` (alert
    ``CuraflowScheduleOccurrencesMissed``), and for an hour the plan is
    ``curaflow_schedule_broken{why="configuration_error"}`` (alert ``CuraflowScheduleBroken``,
    which pages also where the plan's miss series did not exist before). Before, nothing
    named it: the watch only names the times Temporal dropped, and Temporal started this one."""
    plan_id = f"plan-{short_id()}"
    config = plan_config(tmp_path, plan_id, cron=["0 3 * * *"], target_ids=["extra"])
    config["targets"].append({**config["targets"][0], "id": "extra"})
    stack = make_stack(config)
    client = temporal_client
    try:
        await plans.sync_schedules(client, stack.settings)  # the new configuration, synced
        synced = stack.settings
        # the worker that takes the occurrence still runs the configuration before it
        stack.reconfigure({"schedules": [], "targets": config["targets"][:1]})
        await stack.start_worker()
        triggered = await plans.trigger(client, plan_id, task_queue=stack.settings.temporal.task_queue)
        assert triggered is not None
        nominal_ms = occurrence_minute_ms(int(triggered.scheduled_at.timestamp() * 1000))  # its job id's minute

        async def trampoline_closed() -> str | None:
            desc = await client.get_schedule_handle(plan_id).describe()
            done = [a for a in desc.info.recent_actions if a.scheduled_at == triggered.scheduled_at]
            return done[0].action.workflow_id if done and not desc.info.running_actions else None

        trampoline = await eventually(trampoline_closed, timeout_s=60, what="the occurrence's trampoline closed")
        with pytest.raises(WorkflowFailureError) as failed:
            await client.get_workflow_handle(trampoline).result()
        assert isinstance(failed.value.cause, ActivityError)
        assert isinstance(failed.value.cause.cause, ApplicationError)
        assert failed.value.cause.cause.type == "configuration_error"
        assert await scheduled_jobs(stack, plan_id) == []  # nothing admitted

        pool = await stack.ledger()
        misses = await eventually(
            lambda: plans.list_misses(pool, plan_id), timeout_s=10, what="the occurrence named as a miss"
        )
        assert [(m.nominal_at, m.why) for m in misses] == [(nominal_ms, "configuration_error")]
        log = stack.worker_log(1)
        assert "schedule.occurrence_missed" in log and "configuration_error" in log

        # and the plan is said broken by the watch's holder, whether it configures the plan or
        # not — under its id where it is configured, else under the one label of plans not
        # configured (ids from trampolines' arguments never become label values)
        def broken(label: str, why: str) -> float | None:
            return REGISTRY.get_sample_value("curaflow_schedule_broken", {"schedule_id": label, "why": why})

        for settings, label in ((synced, plan_id), (stack.settings, metrics.UNCONFIGURED_PLAN)):
            metrics.clear_schedule_broken()
            await plans.watch_tick(pool, client, settings)
            assert (broken(label, "configuration_error"), broken(label, "not_found")) == (1.0, 0.0)
        assert broken(plan_id, "configuration_error") is None  # the unconfigured view names no id

        # The same time admitted again where the targets are still missing (a second
        # trampoline of it, in this process): the same miss, named and counted once.
        # (counted under the one label: this worker's configuration has no such plan)
        missed = SCHEDULE_MISSED.labels(schedule_id=metrics.UNCONFIGURED_PLAN, why="configuration_error")
        before = missed._value.get()
        occurrence = plans.occurrence_input(synced, synced.schedules[0])
        request = AdmitOccurrenceInput(occurrence=occurrence, scheduled_at_ms=nominal_ms + 7)
        for _ in range(2):
            with pytest.raises(plans.OccurrenceConfigError):
                await plans.admit_occurrence(pool, stack.settings, request)
        assert missed._value.get() == before
        assert len(await plans.list_misses(pool, plan_id)) == 1
        # a time not named yet: counted once in this process
        later = request.model_copy(update={"scheduled_at_ms": nominal_ms + 3_600_000})
        for _ in range(2):
            with pytest.raises(plans.OccurrenceConfigError):
                await plans.admit_occurrence(pool, stack.settings, later)
        assert missed._value.get() == before + 1
        assert REGISTRY.get_sample_value(
            "curaflow_schedule_occurrences_missed_total", {"schedule_id": plan_id, "why": "configuration_error"}
        ) in (None, 0.0)  # no series of the id itself in this process
        assert [m.nominal_at for m in await plans.list_misses(pool, plan_id)] == [
            nominal_ms + 3_600_000,
            nominal_ms,
        ]
    finally:
        await _cleanup(client, plan_id)

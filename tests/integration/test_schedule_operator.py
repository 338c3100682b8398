"""What an operator does to curaflow's schedules with Temporal's own tools (the UI, the
``temporal schedule`` CLI): trigger, backfill, hand edits of the spec or the action,
delete. Real dev server, real PostgreSQL, a real worker process."""

from __future__ import annotations

import asyncio
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionResult,
    ScheduleActionStartWorkflow,
    ScheduleDescription,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
)
from temporalio.exceptions import ApplicationError

from curaflow import schedules as plans
from curaflow.schedules.watch import WATCH_LOCK_KEY
from tests.conftest import StackFactory
from tests.integration.test_schedules import _cleanup, curaflow, plan_config
from tests.jobs_support import scheduled_jobs
from tests.support import closed_status, eventually, short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def temporal(address: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``temporal`` CLI against the session's dev server (exit 0 asserted)."""
    done = await asyncio.to_thread(
        subprocess.run,
        ["temporal", *args, "--address", address],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done


def at(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def hand_update(address: str, plan_id: str, task_queue: str, *, cron: str, input_json: str) -> None:
    """What an operator's ``temporal schedule update`` looks like: the whole schedule again."""
    await temporal(
        address,
        "schedule",
        "update",
        "--schedule-id",
        plan_id,
        "--cron",
        cron,
        "--workflow-id",
        f"{plan_id}@occurrence",
        "--task-queue",
        task_queue,
        "--type",
        "ScheduledJobWorkflow",
        "--input",
        input_json,
    )


async def test_triggers_and_backfills_run_each_nominal_time_once_with_its_own_id(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client, temporal_address: str
) -> None:
    """Guard. "Trigger now" twice in one minute is one job; a backfill of a past hour runs
    each time of the spec as its own job, with its nominal time, and a second backfill
    over times already run adds no job and no run. A job's deadline counts from its
    admission, not from its nominal time (DESIGN.md "Scheduled occurrences").

    The hour backfilled ends half a minute before the triggers' minute, so none of its
    times shares a job with a trigger (it used to end at the triggers' time: triggered in
    the first minute of a time of the spec, 3 minutes an hour, the trigger and that time
    were one job and the test waited for one more). Trampolines are waited for by their
    own status, never the schedule's ``running_actions``: Temporal lists there only the
    starts its overlap policy governs, never those of an ``AllowAll`` trigger or backfill
    (server 1.32) — the wait before the second backfill waited for nothing, and under load
    a trampoline of the first still ran: Temporal refused the second's start of that id."""
    plan_id = f"plan-{short_id()}"
    stack = make_stack(plan_config(tmp_path, plan_id, cron=["*/20 * * * *"], timezone="UTC"))
    await stack.start_worker()
    client = temporal_client
    try:
        await plans.sync_schedules(client, stack.settings)
        before = datetime.now(UTC)
        for _ in range(2):
            await temporal(
                temporal_address, "schedule", "trigger", "--schedule-id", plan_id, "--overlap-policy", "AllowAll"
            )
        await eventually(lambda: _completed(stack, plan_id, 1), timeout_s=60, what="the triggered job")
        fired = await eventually(
            lambda: _trampolines_closed(client, plan_id), timeout_s=30, what="the triggers' trampolines closed"
        )
        # one job per minute triggered: two triggers in one minute are one job (in one second,
        # Temporal starts one trampoline: the second has the first's id)
        minutes = {a.scheduled_at.replace(second=0, microsecond=0) for a in fired.info.recent_actions}
        triggered = await scheduled_jobs(stack, plan_id, order="occurrence_at")
        assert len(triggered) == len(minutes) and all(r["completed_at"] for r in triggered)
        # (end - 1 h, end]: neither bound is a time of the spec (they fall on :30 s), so
        # Temporal's bounds and these agree; every time is before the triggers' minute.
        end_ms = int(before.timestamp() * 1000) // 60_000 * 60_000 - 30_000
        window = ["--start-time", at(end_ms - 3_600_000), "--end-time", at(end_ms)]
        spec_times = {t for t in range(end_ms - 3_600_000, end_ms, 1_000) if t % 1_200_000 == 0}
        assert len(spec_times) == 3
        await temporal(
            temporal_address, "schedule", "backfill", "--schedule-id", plan_id, *window, "--overlap-policy", "AllowAll"
        )
        rows = await eventually(
            lambda: _completed(stack, plan_id, len(triggered) + len(spec_times)), timeout_s=90, what="backfilled jobs"
        )
        assert len(rows) == len(triggered) + len(spec_times)
        backfilled = [r for r in rows if r["occurrence_at"] in spec_times]
        assert {r["occurrence_at"] for r in backfilled} == spec_times
        pool = await stack.ledger()
        for row in backfilled:
            assert row["job_id"].endswith(
                datetime.fromtimestamp(row["occurrence_at"] / 1000, UTC).strftime("%Y-%m-%dT%H%M+0000")
            )
            record = await pool.fetchval("SELECT record FROM outcomes WHERE job_id = $1", row["job_id"])
            assert record["occurrence_at"] == at(row["occurrence_at"])
            job_input = row["workflow_input"]
            assert (
                job_input["deadline_at_ms"] - job_input["created_at_ms"] == stack.settings.budgets.default_deadline_ms
            )

        # the same hour again: every time already has its job; nothing runs twice. (Wait for the
        # trampolines to close first: one still open has the id the new one would get, and
        # Temporal refuses that start — not the convergence this looks at.)
        closed = await eventually(
            lambda: _trampolines_closed(client, plan_id), timeout_s=30, what="the first backfill's trampolines closed"
        )
        actions = closed.info.num_actions
        await temporal(
            temporal_address, "schedule", "backfill", "--schedule-id", plan_id, *window, "--overlap-policy", "AllowAll"
        )

        async def trampolines_done() -> list[str] | None:
            d = await _trampolines_closed(client, plan_id)
            if d is None or d.info.num_actions < actions + len(spec_times):
                return None
            return [_started(a).workflow_id for a in d.info.recent_actions][-len(spec_times) :]

        again = await eventually(trampolines_done, timeout_s=60, what="second backfill's trampolines")
        for wid in again:
            result = await client.get_workflow_handle(wid).result()
            assert result["duplicate"] is True
        assert len(await scheduled_jobs(stack, plan_id, order="occurrence_at")) == len(rows)
        for row in rows:
            runs = [w async for w in client.list_workflows(f"WorkflowId = '{row['job_id']}'")]
            assert len(runs) == 1, row["job_id"]
    finally:
        await _cleanup(client, plan_id)


async def _completed(stack: Any, plan_id: str, n: int) -> list[Any] | None:
    rows = await scheduled_jobs(stack, plan_id, order="occurrence_at")
    return rows if len(rows) >= n and all(r["completed_at"] for r in rows) else None


async def _trampolines_closed(client: Client, plan_id: str) -> ScheduleDescription | None:
    """The schedule once every trampoline among its recent actions has closed, else None:
    each trampoline's own status, not the schedule's ``running_actions``, which lists no
    start of an ``AllowAll`` trigger or backfill (``test_running_actions_lists_no_allow_all_start``)."""
    desc = await client.get_schedule_handle(plan_id).describe()
    for action in desc.info.recent_actions:
        started = _started(action)
        handle = client.get_workflow_handle(started.workflow_id, run_id=started.first_execution_run_id)
        if (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
            return None
    return desc


def _started(action: ScheduleActionResult) -> ScheduleActionExecutionStartWorkflow:
    assert isinstance(action.action, ScheduleActionExecutionStartWorkflow)
    return action.action


async def test_running_actions_lists_no_allow_all_start(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client, temporal_address: str
) -> None:
    """What Temporal does, which the test above met: the trampolines an ``AllowAll``
    backfill started run (no worker here) while the schedule's ``running_actions`` is
    empty — so a wait on it for them to close waits for nothing, and a second backfill of
    the same times then finds their ids still running (the server refuses those starts
    and only logs it)."""
    plan_id = f"plan-{short_id()}"
    stack = make_stack(plan_config(tmp_path, plan_id, cron=["*/20 * * * *"], timezone="UTC"))
    client = temporal_client
    trampolines: list[WorkflowHandle[Any, Any]] = []
    try:
        await plans.sync_schedules(client, stack.settings)
        end_ms = int(datetime.now(UTC).timestamp() * 1000) // 60_000 * 60_000 - 30_000
        window = ["--start-time", at(end_ms - 3_600_000), "--end-time", at(end_ms)]
        await temporal(
            temporal_address, "schedule", "backfill", "--schedule-id", plan_id, *window, "--overlap-policy", "AllowAll"
        )

        async def started() -> Any:
            d = await client.get_schedule_handle(plan_id).describe()
            return d if d.info.num_actions == 3 else None

        desc = await eventually(started, timeout_s=30, what="the backfill's three trampolines")
        trampolines = [client.get_workflow_handle(_started(a).workflow_id) for a in desc.info.recent_actions]
        for handle in trampolines:
            assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
        assert desc.info.running_actions == []
        assert await _trampolines_closed(client, plan_id) is None
    finally:
        await _cleanup(client, plan_id)
        for handle in trampolines:  # nothing would ever run them
            await handle.terminate("test over")


async def test_an_action_edited_to_junk_fails_its_occurrence_at_once_and_sync_restores_it(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client, temporal_address: str
) -> None:
    """An operator edits the action's input to something that is no plan: the occurrence's
    trampoline fails at once with ``invalid_occurrence_input`` (it used to fail its
    workflow task for ever: open, every later time skipped behind it), and ``sync``
    sees the schedule as its own (memo) and restores the action."""
    plan_id = f"plan-{short_id()}"
    stack = make_stack(plan_config(tmp_path, plan_id, cron=["0 3 * * *"], timezone="UTC"))
    await stack.start_worker()
    client = temporal_client
    try:
        await plans.sync_schedules(client, stack.settings)
        for junk in ('{"junk": 1}', '"junk"', "null"):
            await hand_update(temporal_address, plan_id, stack.task_queue, cron="0 3 * * *", input_json=junk)
            seen = len((await client.get_schedule_handle(plan_id).describe()).info.recent_actions)
            await temporal(
                temporal_address, "schedule", "trigger", "--schedule-id", plan_id, "--overlap-policy", "AllowAll"
            )

            async def started(seen: int = seen) -> str | None:
                recent = (await client.get_schedule_handle(plan_id).describe()).info.recent_actions
                return recent[-1].action.workflow_id if len(recent) > seen else None

            wid = await eventually(started, what="the trampoline")
            assert await closed_status(client, wid, timeout_s=30) == WorkflowExecutionStatus.FAILED
            with pytest.raises(WorkflowFailureError) as failed:
                await client.get_workflow_handle(wid).result()
            cause = failed.value.cause
            assert isinstance(cause, ApplicationError) and cause.type == "invalid_occurrence_input", junk
            assert "curaflow schedules sync" in cause.message
        assert await scheduled_jobs(stack, plan_id, order="occurrence_at") == []

        changes = await plans.sync_schedules(client, stack.settings, dry_run=True)
        assert [c.action for c in changes] == ["update"]
        assert "schedule_id" in changes[0].changes  # the whole plan differs
        await plans.sync_schedules(client, stack.settings)
        assert [c.action for c in await plans.sync_schedules(client, stack.settings)] == ["unchanged"]
    finally:
        await _cleanup(client, plan_id)


async def test_a_hand_edited_schedule_is_a_change_sync_prints_and_restores(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client, temporal_address: str
) -> None:
    """``temporal schedule update`` with the plan's own input but another cron: Temporal resets
    what the command does not name (time zone UTC, a catch-up window of a year). ``sync``
    used to print ``= id``; it prints what differs and restores the plan's schedule."""
    plan_id = f"plan-{short_id()}"
    stack = make_stack(plan_config(tmp_path, plan_id))  # 0 3 * * * Asia/Tokyo
    client = temporal_client
    try:
        await plans.sync_schedules(client, stack.settings)
        same_input = plans.occurrence_input(stack.settings, stack.settings.schedules[0]).model_dump_json()
        await hand_update(temporal_address, plan_id, stack.task_queue, cron="5 * * * *", input_json=same_input)

        [change] = await plans.sync_schedules(client, stack.settings, dry_run=True)
        assert change.action == "update"
        assert change.changes["time_zone"] == ("UTC", "Asia/Tokyo")
        assert change.changes["catchup_window"] == (timedelta(days=365), timedelta(minutes=90))
        assert "time_zone" in change.render()
        await plans.sync_schedules(client, stack.settings)
        desc = await client.get_schedule_handle(plan_id).describe()
        assert desc.schedule.spec.time_zone_name == "Asia/Tokyo"
        assert desc.schedule.policy.catchup_window == timedelta(minutes=90)
        assert [c.action for c in await plans.sync_schedules(client, stack.settings)] == ["unchanged"]

        # paused or unpaused by hand (the UI's toggle): a change sync prints, then restores
        await temporal(temporal_address, "schedule", "toggle", "--schedule-id", plan_id, "--pause", "--reason", "x")
        [change] = await plans.sync_schedules(client, stack.settings)
        assert change.changes == {"paused": (True, False)}
        assert (await client.get_schedule_handle(plan_id).describe()).schedule.state.paused is False
    finally:
        await _cleanup(client, plan_id)


async def test_a_schedule_deleted_or_broken_by_hand_is_reported_by_the_watch_and_sync_recreates_it(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client, temporal_address: str
) -> None:
    """The watch used to skip a configured plan without a schedule in silence: the plan ran
    nothing and nobody was told until someone ran ``sync``. It logs ``schedule.not_found``
    (and ``schedule.action_not_a_plan`` for an action edited to junk) on every tick, and
    exports ``curaflow_schedule_broken`` (alert ``CuraflowScheduleBroken``) while it lasts."""
    from prometheus_client import REGISTRY
    from structlog.testing import capture_logs

    def broken() -> dict[str, float | None]:
        return {
            why: REGISTRY.get_sample_value("curaflow_schedule_broken", {"schedule_id": plan_id, "why": why})
            for why in ("not_found", "action_not_a_plan")
        }

    plan_id = f"plan-{short_id()}"
    stack = make_stack(plan_config(tmp_path, plan_id))
    client = temporal_client
    pool = await stack.ledger()
    try:
        await plans.sync_schedules(client, stack.settings)
        with capture_logs() as logs:
            await plans.watch_tick(pool, client, stack.settings)
        assert not [e for e in logs if e["log_level"] == "warning"]
        assert broken() == {"not_found": 0.0, "action_not_a_plan": 0.0}

        await hand_update(temporal_address, plan_id, stack.task_queue, cron="0 3 * * *", input_json='{"junk": 1}')
        with capture_logs() as logs:
            await plans.watch_tick(pool, client, stack.settings)
        assert [(e["event"], e["schedule_id"]) for e in logs if e["log_level"] == "warning"] == [
            ("schedule.action_not_a_plan", plan_id)
        ]
        assert broken() == {"not_found": 0.0, "action_not_a_plan": 1.0}

        await temporal(temporal_address, "schedule", "delete", "--schedule-id", plan_id)
        with capture_logs() as logs:
            await plans.watch_tick(pool, client, stack.settings)
        warned = [e for e in logs if e["log_level"] == "warning"]
        assert [(e["event"], e["schedule_id"]) for e in warned] == [("schedule.not_found", plan_id)]
        assert "curaflow schedules sync" in warned[0]["detail"]
        assert broken() == {"not_found": 1.0, "action_not_a_plan": 0.0}

        assert [c.render() for c in await plans.sync_schedules(client, stack.settings)] == [f"+ {plan_id}"]
        with capture_logs() as logs:
            await plans.watch_tick(pool, client, stack.settings)
        assert not [e for e in logs if e["log_level"] == "warning"]
        assert broken() == {"not_found": 0.0, "action_not_a_plan": 0.0}

        # another process holds the watch's lock: this one's values are no longer the state
        async with pool.acquire() as holder:
            await holder.execute("SELECT pg_advisory_lock($1)", WATCH_LOCK_KEY)
            try:
                assert await plans.watch_tick(pool, client, stack.settings) == []
            finally:
                await holder.execute("SELECT pg_advisory_unlock($1)", WATCH_LOCK_KEY)
        assert broken() == {"not_found": None, "action_not_a_plan": None}
    finally:
        await _cleanup(client, plan_id)


async def test_a_trigger_of_a_schedule_whose_action_is_no_plan_is_refused_and_starts_nothing(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client
) -> None:
    """``curaflow schedules trigger`` of a schedule whose action was edited by hand into no
    plan (or a schedule of the namespace that is not curaflow's) started the action and
    printed a job id in UTC — a job that never exists: the trampoline fails
    ``invalid_occurrence_input`` and admits nothing. It is refused, naming the repair."""
    plan_id = f"plan-{short_id()}"
    stack = make_stack(plan_config(tmp_path, plan_id, cron=["0 3 * * *"], timezone="Asia/Tokyo"))
    client, pool = temporal_client, await stack.ledger()
    handle = client.get_schedule_handle(plan_id)
    try:
        await plans.sync_schedules(client, stack.settings)

        def junk(current: ScheduleUpdateInput) -> ScheduleUpdate:
            schedule = current.description.schedule
            assert isinstance(schedule.action, ScheduleActionStartWorkflow)
            schedule.action.args = ["junk"]
            return ScheduleUpdate(schedule=schedule)

        await handle.update(junk)
        with pytest.raises(plans.ScheduleError) as refused:
            await plans.trigger(client, plan_id, task_queue=stack.settings.temporal.task_queue, wait_s=2, pool=pool)
        assert "no curaflow plan" in str(refused.value) and "curaflow schedules sync" in str(refused.value)
        assert (await handle.describe()).info.num_actions == 0  # nothing started
    finally:
        await _cleanup(client, plan_id)


async def test_the_acting_verbs_refuse_a_schedule_that_is_not_curaflows_and_change_nothing(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client
) -> None:
    """``curaflow schedules pause`` and ``unpause`` acted on any schedule of the namespace:
    another application's, or a curaflow plan of another stack (another task queue) — an
    operator could pause someone else's Temporal schedule through curaflow, and ``trigger``
    started another stack's plan. Each acting verb refuses a schedule that is not a plan
    curaflow manages on its task queue (``sync``'s rule), changes nothing, and the command
    exits 1 naming why; curaflow's own plan is paused and unpaused as before."""
    plan_id, theirs, other_stacks = f"plan-{short_id()}", f"theirs-{short_id()}", f"other-{short_id()}"
    stack = make_stack(plan_config(tmp_path, plan_id))
    client, tq = temporal_client, stack.settings.temporal.task_queue
    other = stack.settings.model_copy(
        update={
            "temporal": stack.settings.temporal.model_copy(update={"task_queue": f"{tq}-other"}),
            "schedules": [stack.settings.schedules[0].model_copy(update={"id": other_stacks})],
        }
    )
    try:
        await client.create_schedule(
            theirs,
            Schedule(
                action=ScheduleActionStartWorkflow("TheirWorkflow", id=f"{theirs}-run", task_queue="theirs"),
                spec=ScheduleSpec(cron_expressions=["0 3 * * *"]),
                state=ScheduleState(note="theirs"),
            ),
        )
        await plans.sync_schedules(client, other)
        for sid in (theirs, other_stacks):
            for verb in (plans.pause, plans.unpause):
                with pytest.raises(plans.ScheduleError) as refused:
                    await verb(client, sid, task_queue=tq)
                assert "not a curaflow plan" in str(refused.value) and repr(tq) in str(refused.value)
            with pytest.raises(plans.ScheduleError):
                await plans.trigger(client, sid, task_queue=tq, wait_s=1)
            desc = await client.get_schedule_handle(sid).describe()
            assert not desc.schedule.state.paused and desc.info.num_actions == 0
        assert (await client.get_schedule_handle(theirs).describe()).schedule.state.note == "theirs"

        shown = await curaflow("schedules", "pause", theirs, config=stack.config_path)
        assert shown.returncode == 1 and "not a curaflow plan" in shown.stderr, shown
        assert not (await client.get_schedule_handle(theirs).describe()).schedule.state.paused

        await plans.sync_schedules(client, stack.settings)
        await plans.pause(client, plan_id, task_queue=tq)
        assert (await client.get_schedule_handle(plan_id).describe()).schedule.state.paused
        await plans.unpause(client, plan_id, task_queue=tq)
        assert not (await client.get_schedule_handle(plan_id).describe()).schedule.state.paused
    finally:
        for sid in (plan_id, theirs, other_stacks):
            await _cleanup(client, sid)

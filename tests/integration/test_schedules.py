"""Recurring plans on Temporal Schedules: real dev server, real PostgreSQL, a real worker process."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, ScheduleOverlapPolicy, WorkflowExecutionStatus

from curaflow import schedules as plans
from curaflow.config import load_settings
from curaflow.domain.messages import JobInput
from curaflow.domain.occurrence import occurrence_job_id
from curaflow.ledger.jobs import NewJob, insert_job, workflow_input
from tests.conftest import StackFactory
from tests.fakes.webhook import Reply, WebhookReceiver
from tests.jobs_support import scheduled_jobs
from tests.support import eventually, short_id, waiting_for_a_lock, whsec
from tests.zygote import curaflow_command

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def plan_config(tmp_path: Path, plan_id: str, **plan: Any) -> dict[str, Any]:
    route = f"out-{short_id()}"
    return {
        "routes": {route: {"kind": "directory", "path": str(tmp_path / "delivered")}},
        "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [route]}],
        "schedules": [{"id": plan_id, "cron": ["0 3 * * *"], "timezone": "Asia/Tokyo", "target_ids": ["demo"], **plan}],
        "max_fallback_passes": 2,
    }


async def test_sync_is_idempotent_prints_updates_and_deletes(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client
) -> None:
    plan_id = f"plan-{short_id()}"
    stack = make_stack(plan_config(tmp_path, plan_id))
    client = temporal_client
    try:
        first = await plans.sync_schedules(client, stack.settings)
        assert [c.render() for c in first] == [f"+ {plan_id}"]
        again = await plans.sync_schedules(client, stack.settings)
        assert [c.render() for c in again] == [f"= {plan_id}"]

        desc = await client.get_schedule_handle(plan_id).describe()
        assert desc.schedule.policy.overlap == ScheduleOverlapPolicy.SKIP
        assert desc.schedule.policy.catchup_window == timedelta(minutes=90)
        assert desc.schedule.spec.time_zone_name == "Asia/Tokyo"

        changed = plan_config(tmp_path, plan_id, cron=["30 4 * * *"], paused=True)
        stack.config["schedules"] = changed["schedules"]
        stack.config_path.write_text(__import__("tomli_w").dumps(stack.config))
        settings = load_settings(stack.config_path)
        dry = await plans.sync_schedules(client, settings, dry_run=True)
        assert dry[0].action == "update" and dry[0].changes["cron"] == (["0 3 * * *"], ["30 4 * * *"])
        assert dry[0].changes["paused"] == (False, True)
        assert (await client.get_schedule_handle(plan_id).describe()).schedule.state.paused is False
        await plans.sync_schedules(client, settings)
        desc = await client.get_schedule_handle(plan_id).describe()
        assert desc.schedule.state.paused is True
        assert [c.action for c in await plans.sync_schedules(client, settings)] == ["unchanged"]

        # removing the plan from the config deletes the schedule (only ours: memo task queue)
        gone = settings.model_copy(update={"schedules": []})
        deleted = await eventually(
            lambda: _deleted(client, gone, plan_id), timeout_s=20, what="owned schedule listed for deletion"
        )
        assert [c.render() for c in deleted] == [f"- {plan_id}"]
        with pytest.raises(plans.ScheduleError):
            await plans.trigger(client, plan_id, task_queue=stack.settings.temporal.task_queue)
    finally:
        await _cleanup(client, plan_id)


async def test_sync_with_no_plan_configured_deletes_nothing_without_allow_empty(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client
) -> None:
    plan_id = f"plan-{short_id()}"
    stack = make_stack(plan_config(tmp_path, plan_id))
    client = temporal_client
    try:
        await plans.sync_schedules(client, stack.settings)
        empty = stack.settings.model_copy(update={"schedules": []})
        await eventually(lambda: _deleted(client, empty, plan_id, dry_run=True), timeout_s=20, what="schedule listed")
        del stack.config["schedules"]
        stack.config_path.write_text(__import__("tomli_w").dumps(stack.config))

        refused = await curaflow("schedules", "sync", config=stack.config_path)
        assert refused.returncode == 2
        assert plan_id in refused.stderr and "--allow-empty" in refused.stderr
        assert (await client.get_schedule_handle(plan_id).describe()).schedule.state.paused is False  # still there

        allowed = await curaflow("schedules", "sync", "--allow-empty", config=stack.config_path)
        assert allowed.returncode == 0, allowed.stderr
        assert f"- {plan_id}" in allowed.stdout
        with pytest.raises(plans.ScheduleError):
            await plans.trigger(client, plan_id, task_queue=stack.settings.temporal.task_queue)
    finally:
        await _cleanup(client, plan_id)


async def test_two_syncs_at_once_both_end_and_say_what_each_did(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client
) -> None:
    """Two deploys syncing the same new plan at once: both find no schedule, both create it;
    the second's create used to fail (``cannot create schedule …: Schedule already running``,
    exit 1, the plans after it not synced by that run) although the schedule it wanted exists."""
    plan_id = f"plan-{short_id()}"
    stack = make_stack(plan_config(tmp_path, plan_id))
    client = temporal_client
    try:
        results = await asyncio.gather(
            plans.sync_schedules(client, stack.settings), plans.sync_schedules(client, stack.settings)
        )
        assert sorted(c.render() for [c] in results) == sorted([f"+ {plan_id}", f"= {plan_id}"])
        assert [c.action for c in await plans.sync_schedules(client, stack.settings)] == ["unchanged"]
    finally:
        await _cleanup(client, plan_id)


async def curaflow(*args: str, config: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CURAFLOW_", "TEMPORAL_"))}
    env["CURAFLOW_CONFIG"] = str(config)
    return await asyncio.to_thread(curaflow_command, args, env=env, cwd=config.parent, timeout=60)


async def _deleted(client: Client, settings: Any, plan_id: str, *, dry_run: bool = False) -> list[plans.Change]:
    changes = await plans.sync_schedules(client, settings, dry_run=dry_run)
    return [c for c in changes if c.schedule_id == plan_id]


async def _cleanup(client: Client, plan_id: str) -> None:
    with contextlib.suppress(Exception):  # already deleted
        await client.get_schedule_handle(plan_id).delete()


async def test_trigger_starts_one_job_with_the_canonical_id_and_a_duplicate_converges(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client
) -> None:
    plan_id = f"plan-{short_id()}"
    stack = make_stack(plan_config(tmp_path, plan_id))
    await stack.start_worker()
    client = temporal_client
    try:
        await plans.sync_schedules(client, stack.settings)
        before = datetime.now(UTC)
        await plans.trigger(client, plan_id, task_queue=stack.settings.temporal.task_queue)
        rows = await eventually(lambda: scheduled_jobs(stack, plan_id), what="scheduled job in the ledger")
        after = datetime.now(UTC)
        assert len(rows) == 1
        row = rows[0]
        expected = {occurrence_job_id(plan_id, t, "Asia/Tokyo") for t in (before, after)}
        assert (row["job_id"], row["occurrence_date"]) in expected
        assert row["trigger"] == "schedule" and row["schedule_id"] == plan_id
        assert row["workflow_input"]["max_fallback_stages"] == 2  # scheduled jobs use fallback stages
        record = await stack.wait_terminal(row["job_id"])
        assert record.business_status == "success"
        # GET /jobs/{id} knows the scheduled job
        http = await stack.start_api()
        got = await http.get(f"/jobs/{row['job_id']}")
        assert got.status_code == 200 and got.json()["status"] == "succeeded"
        # the job's workflow carries the search attributes the UI filters on (the last
        # ones are set after the finish activity returned: wait for the workflow's end)
        await client.get_workflow_handle(row["job_id"]).result()
        desc = await client.get_workflow_handle(row["job_id"]).describe()
        attrs = {k.name: v for k, v in ((p.key, p.value) for p in desc.typed_search_attributes)}
        assert attrs["ScheduleId"] == plan_id and attrs["JobStatus"] == "succeeded"
        assert attrs["BusinessStatus"] == "success" and attrs["TargetIds"] == ["demo"]

        # A late or duplicate run of one occurrence (two trampolines for the same nominal
        # minute, as a re-run by hand or a duplicate trigger would start) converges on one job.
        nominal = datetime(2025, 1, 1, 18, 0, 41, tzinfo=UTC)  # 03:00 in Tokyo
        occ = plans.occurrence_input(stack.settings, stack.settings.schedules[0]).model_copy(
            update={"scheduled_at_ms": int(nominal.timestamp() * 1000)}
        )
        handles = [
            await client.start_workflow(
                "ScheduledJobWorkflow", occ, id=f"{plan_id}@rerun-{n}", task_queue=stack.task_queue
            )
            for n in (1, 2)
        ]
        results = [await h.result() for h in handles]
        job_id = f"{plan_id}@2025-01-02T0300+0900"
        assert [r["job_id"] for r in results] == [job_id, job_id]
        assert sorted(bool(r["duplicate"]) for r in results) == [False, True]
        rows = await scheduled_jobs(stack, plan_id)
        assert [r["job_id"] for r in rows].count(job_id) == 1
        assert [r["occurrence_date"] for r in rows if r["job_id"] == job_id] == ["2025-01-02"]
        assert (await stack.wait_terminal(job_id)).business_status in ("success", "no_candidate", "duplicate_only")
    finally:
        await _cleanup(client, plan_id)


@pytest.mark.parametrize("stop", ["cancel", "terminate", None])
async def test_an_occurrence_stopped_while_it_admits_its_job_still_runs_it(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client, stop: str | None
) -> None:
    """An operator cancels or terminates an occurrence's trampoline while its
    ``admit_occurrence`` runs (the activity hears no cancel: it never heartbeats, and is
    short): the activity admitted the job and recorded its start, but the trampoline was
    gone before it started the child. The job stayed queued, never run, until a rule ended
    it as deleted or queued too long. Cancelling or terminating the trampoline never
    touches the job (``ABANDON``): it is admitted, so it runs — the reconciler starts it.
    An occurrence left alone runs its job as its child, and the reconciler only records
    that start."""
    plan_id = f"plan-{short_id()}"
    stack = make_stack(plan_config(tmp_path, plan_id))
    await stack.start_worker()
    client = temporal_client
    nominal = datetime(2025, 1, 1, 18, 0, tzinfo=UTC)  # 03:00 in Tokyo
    occ = plans.occurrence_input(stack.settings, stack.settings.schedules[0]).model_copy(
        update={"scheduled_at_ms": int(nominal.timestamp() * 1000)}
    )
    job_id = f"{plan_id}@2025-01-02T0300+0900"
    pool = await stack.ledger()
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("LOCK TABLE cells IN EXCLUSIVE MODE")  # the admission's insert waits
        trampoline = await client.start_workflow(
            "ScheduledJobWorkflow", occ, id=f"{plan_id}@rerun-{stop}", task_queue=stack.task_queue
        )
        await waiting_for_a_lock(pool)
        if stop is not None:
            await (trampoline.cancel() if stop == "cancel" else trampoline.terminate(reason="test"))

            async def closed() -> bool:
                return (await trampoline.describe()).status != WorkflowExecutionStatus.RUNNING

            await eventually(closed, timeout_s=20, what="the trampoline closed")
    # The lock is gone: the admission goes through (after the trampoline closed).
    await eventually(lambda: _admitted(pool, job_id), timeout_s=30, what="the occurrence's job admitted")
    record = await stack.wait_terminal(job_id, 60)
    assert (record.business_status, record.cells[0].reason) == ("success", None), record.cells[0]
    assert record.workflow_started_at is not None
    described = await client.get_workflow_handle(job_id).describe()
    assert described.workflow_type == "JobWorkflow"
    assert described.parent_id == (trampoline.id if stop is None else None)


async def _admitted(pool: Any, job_id: str) -> bool:
    return bool(await pool.fetchval("SELECT count(*) FROM jobs WHERE job_id = $1", job_id))


async def test_overlapping_trigger_is_skipped_and_reported(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client
) -> None:
    plan_id = f"plan-{short_id()}"
    stack = make_stack(plan_config(tmp_path, plan_id))
    client = temporal_client
    try:
        await plans.sync_schedules(client, stack.settings)
        pool = await stack.ledger()
        assert await plans.watch_tick(pool, client, stack.settings) == []
        # no worker yet: the first occurrence's trampoline stays open, the second is skipped
        await plans.trigger(client, plan_id, task_queue=stack.settings.temporal.task_queue)
        await plans.trigger(client, plan_id, task_queue=stack.settings.temporal.task_queue)

        async def skipped() -> Any:
            return (await client.get_schedule_handle(plan_id).describe()).info.num_actions_skipped_overlap

        assert await eventually(skipped, timeout_s=20, what="overlap skip counted") == 1
        missed = await plans.watch_tick(pool, client, stack.settings)
        assert [(m.schedule_id, m.skipped_overlap, m.missed_catchup) for m in missed] == [(plan_id, 1, 0)]
        # reported once only
        assert await plans.watch_tick(pool, client, stack.settings) == []
        from curaflow.observability.metrics import SCHEDULE_MISSED

        assert SCHEDULE_MISSED.labels(schedule_id=plan_id, why="skipped_overlap")._value.get() == 1
        # a worker then runs the one occurrence that was not skipped
        await stack.start_worker()
        rows = await eventually(lambda: scheduled_jobs(stack, plan_id), what="scheduled job")
        assert len(rows) == 1
        await stack.wait_terminal(rows[0]["job_id"])
    finally:
        await _cleanup(client, plan_id)


async def test_the_two_instants_of_a_fall_back_hour_are_two_jobs_with_their_nominal_times(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client
) -> None:
    """``@every 1h`` in Europe/Berlin: 02:00 CEST and 02:00 CET on 2026-10-25 both run, each
    job's outcome names its nominal instant; a job admitted under the legacy id (local
    wall time alone) is still the occurrence of the earlier instant."""
    plan_id = f"plan-{short_id()}"
    stack = make_stack(plan_config(tmp_path, plan_id, cron=["@every 1h"], timezone="Europe/Berlin"))
    await stack.start_worker()
    client = temporal_client
    occ = plans.occurrence_input(stack.settings, stack.settings.schedules[0])

    async def run(at: datetime, n: str) -> dict[str, Any]:
        inp = occ.model_copy(update={"scheduled_at_ms": int(at.timestamp() * 1000)})
        handle = await client.start_workflow(
            "ScheduledJobWorkflow", inp, id=f"{plan_id}@rerun-{n}", task_queue=stack.task_queue
        )
        result: dict[str, Any] = await handle.result()
        return result

    cest, cet = datetime(2026, 10, 25, 0, 0, tzinfo=UTC), datetime(2026, 10, 25, 1, 0, tzinfo=UTC)
    first, second = await run(cest, "cest"), await run(cet, "cet")
    assert (first["job_id"], first["duplicate"]) == (f"{plan_id}@2026-10-25T0200+0200", False)
    assert (second["job_id"], second["duplicate"]) == (f"{plan_id}@2026-10-25T0200+0100", False)
    pool = await stack.ledger()
    for result, at in ((first, cest), (second, cet)):
        await stack.wait_terminal(result["job_id"])
        record = await pool.fetchval("SELECT record FROM outcomes WHERE job_id = $1", result["job_id"])
        assert record["occurrence_at"] == at.strftime("%Y-%m-%dT%H:%M:%SZ")  # nominal, not the actual start
        assert record["occurrence_date"] == "2026-10-25"

    # an occurrence an earlier version admitted under the wall-clock id converges on it
    legacy = datetime(2026, 10, 26, 0, 0, tzinfo=UTC)  # 01:00 CET
    stored = JobInput.model_validate(
        {**(await workflow_input_of(pool, first["job_id"])).model_dump(), "job_id": f"{plan_id}@2026-10-26T0100"}
    )
    async with pool.acquire() as conn:
        await insert_job(conn, NewJob(job_input=stored, occurrence_date="2026-10-26"))
    again = await run(legacy, "legacy")
    assert again["job_id"] == f"{plan_id}@2026-10-26T0100"
    assert [r["job_id"] for r in await scheduled_jobs(stack, plan_id)].count(f"{plan_id}@2026-10-26T0100+0100") == 0


async def workflow_input_of(pool: Any, job_id: str) -> JobInput:
    async with pool.acquire() as conn:
        stored = await workflow_input(conn, job_id)
    assert stored is not None
    return stored


async def test_runs_not_started_are_named_by_nominal_time_and_real_cause(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client, webhook: WebhookReceiver
) -> None:
    """A real Schedule (``@every 2s``): while no worker runs, the occurrence Temporal started
    waits and the next times are skipped — an outage, not an overlap; while the job runs
    (a receiver holding its delivery until the test has seen an overlap named), the times
    skipped are overlaps. Each dropped time is named; the job's ``occurrence_at`` is its
    nominal time, not its late start."""
    plan_id = f"plan-{short_id()}"
    config = plan_config(tmp_path, plan_id, cron=["@every 2s"], timezone="UTC")
    route = f"hook-{short_id()}"
    config["routes"] = {route: {"kind": "webhook", "url": webhook.url + "/slow", "secret": whsec()}}
    config["targets"][0]["routes"] = [route]
    # held until an overlap is named (it was 8 s whatever happened: 14.7 s a run)
    answer = asyncio.Event()
    webhook.script["/slow"] = [Reply(delay_s=60, released=answer)]
    stack = make_stack(config)
    client = temporal_client
    pool = await stack.ledger()
    seen: list[plans.Missed] = []

    async def tick() -> list[plans.Missed]:
        found = await plans.watch_tick(pool, client, stack.settings)
        seen.extend(found)
        return found

    def named() -> list[tuple[datetime, str]]:
        return [(at, str(why)) for m in seen for at, why in m.dropped]

    try:
        await plans.sync_schedules(client, stack.settings)
        await tick()
        # no worker: the first occurrence's trampoline waits for one, the next times are skipped
        await eventually(
            lambda: _after(tick, lambda: len(named()) >= 2),
            timeout_s=30,
            interval_s=0.5,
            what="times skipped during the outage",
        )
        assert {why for _, why in named()} == {"skipped_outage"}
        assert sum(m.skipped_overlap for m in seen) == 0
        # a worker comes back; the first delivery is held: the times skipped meanwhile are overlaps.
        # The worker's own watcher ticks too and may name them first: the ledger is asked, not `seen`.
        await stack.start_worker()

        async def overlap_named() -> bool:
            await tick()
            return any(m.why == "skipped_overlap" for m in await plans.list_misses(pool, plan_id, limit=1000))

        await eventually(overlap_named, timeout_s=60, interval_s=0.5, what="times skipped while the job ran")
        await client.get_schedule_handle(plan_id).pause()
        answer.set()
        rows = await eventually(lambda: scheduled_jobs(stack, plan_id), what="the scheduled job")
        first = await stack.wait_terminal(rows[0]["job_id"])
        await tick()
        jobs = await pool.fetch(
            "SELECT job_id, occurrence_at, created_at, completed_at FROM jobs WHERE schedule_id = $1 "
            "ORDER BY created_at",
            plan_id,
        )
        # the job of the occurrence that waited for a worker carries its nominal time (a time of the spec)
        assert jobs[0]["occurrence_at"] % 2000 == 0 and jobs[0]["created_at"] - jobs[0]["occurrence_at"] > 2000
        outcome = await pool.fetchval("SELECT record FROM outcomes WHERE job_id = $1", first.job_id)
        assert outcome["occurrence_at"] == datetime.fromtimestamp(jobs[0]["occurrence_at"] / 1000, UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )
        # the ledger names each dropped time once (the worker's own watcher ticks too: the
        # ledger, not this process, has them all), and accounts for all Temporal counted
        recorded = await plans.list_misses(pool, plan_id, limit=1000)
        times = [m.nominal_at for m in recorded]
        assert len(times) == len(set(times)) and all(t % 2000 == 0 for t in times)  # spec times, each once
        assert not set(times) & {j["occurrence_at"] for j in jobs}  # never a time that ran
        assert {(int(at.timestamp() * 1000), why) for at, why in named()} <= {(m.nominal_at, m.why) for m in recorded}
        for miss in recorded:
            running = any(j["created_at"] <= miss.nominal_at < (j["completed_at"] or 2**62) for j in jobs)
            assert miss.why == ("skipped_overlap" if running else "skipped_outage"), (miss, jobs)
        desc = await client.get_schedule_handle(plan_id).describe()
        assert len(recorded) == desc.info.num_actions_skipped_overlap + desc.info.num_actions_missed_catchup_window
        # the operator reads them by plan
        shown = await curaflow("schedules", "misses", plan_id, "--json", config=stack.config_path)
        assert shown.returncode == 0, shown.stderr
        assert [(r["nominal_at"], r["why"]) for r in json.loads(shown.stdout)] == [
            (datetime.fromtimestamp(m.nominal_at / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), m.why) for m in recorded
        ]
        from curaflow.observability.metrics import SCHEDULE_MISSED

        assert SCHEDULE_MISSED.labels(schedule_id=plan_id, why="skipped_outage")._value.get() >= 2
    finally:
        await _cleanup(client, plan_id)


async def _after(act: Any, check: Any) -> bool | None:
    """An ``eventually`` probe that acts first: ``check()`` after ``await act()``, None while false."""
    await act()
    return True if check() else None

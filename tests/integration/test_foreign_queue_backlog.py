"""A job attached to a run on a queue no worker polls is found behind any backlog.

The reconciler restarts on curaflow's queue a queued job whose start attached to a Temporal
client's Task run left on a task queue no worker polls (DESIGN.md "A run that never held
the job is no verdict on it"; ``tests/integration/test_temporal_clients.py`` runs the whole
path with a worker). Its candidates were the ``limit`` oldest queued jobs: behind more
than ``limit`` older queued jobs (a burst, workers scaled down) such a job was never
looked at, and under a backlog that lasted it ended ``queued_too_long``. Here the tick is
called directly, without a worker, with a small ``limit`` and a later clock (the run's
first workflow task "waited" :data:`FOREIGN_QUEUE_WAIT_MS` without the test sleeping).
"""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from curaflow.domain.messages import JobInput, TargetSpec
from curaflow.jobs.submit import JOB_START_OPTIONS
from curaflow.ledger.db import now_ms
from curaflow.ledger.jobs import NewJob, insert_job, mark_workflow_started
from curaflow.ledger.reconciler import FOREIGN_QUEUE_WAIT_MS, TickReport, tick
from curaflow.ledger.reconciler import ticks as reconciler_ticks
from curaflow.protocol.models import Task
from tests.support import eventually, short_id
from workflows.job import JobWorkflow

pytestmark = pytest.mark.integration

LIMIT = 2


def task(key: str) -> Task:
    return Task.model_validate(
        {
            "protocol_version": "1",
            "job_type": "candidate_search",
            "idempotency_key": key,
            "params": {"target_id": "demo"},
        }
    )


async def queued_job(pool: asyncpg.Pool, job_id: str, created_at_ms: int) -> None:
    """A job admitted at ``created_at_ms`` whose workflow start is recorded and that never
    ran a step (``queued``)."""
    inp = JobInput(
        job_id=job_id, plan_id="demo", created_at_ms=created_at_ms, deadline_at_ms=created_at_ms + 3_600_000,
        targets=[TargetSpec(target_id="demo")],
    )  # fmt: skip
    async with pool.acquire() as conn:
        await insert_job(conn, NewJob(job_input=inp))
        await mark_workflow_started(conn, job_id)


async def test_a_job_attached_to_a_run_no_worker_polls_is_found_behind_more_than_limit_older_queued_jobs(
    temporal_client: Client, ledger_pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Workers scaled down during a burst: more than `limit` queued jobs older than the one
    # whose start attached to a client's Task run on a mistyped queue. Before, the rule
    # looked only at the `limit` oldest queued jobs and never reached it.
    nobody = f"nobody-polls-{short_id()}"
    queue = f"curaflow-{short_id()}"  # curaflow's own queue: nothing needs to poll it here
    created = now_ms() - 10 * 60_000
    backlog = [f"demo@manual-backlog-{i}-{short_id()}" for i in range(LIMIT + 1)]
    for i, job_id in enumerate(backlog):
        await queued_job(ledger_pool, job_id, created + i * 1_000)
    key = f"wrongq-{short_id()}"
    job_id = f"demo@manual-{key}"
    await queued_job(ledger_pool, job_id, created + 60_000)  # newer than the whole backlog
    handles = [
        await temporal_client.start_workflow(
            JobWorkflow.run, task(key), id=job_id, task_queue=nobody, **JOB_START_OPTIONS
        ),
        # Not curaflow's: a workflow of another type under a queued job's id, and a job
        # workflow under an id the ledger does not hold. Neither is touched.
        await temporal_client.start_workflow("ClientsOwnWorkflow", id=backlog[0], task_queue=nobody),
        await temporal_client.start_workflow(
            JobWorkflow.run, task(f"stray-{short_id()}"), id=f"demo@manual-stray-{short_id()}", task_queue=nobody,
            **JOB_START_OPTIONS,
        ),
    ]  # fmt: skip
    later = now_ms() + FOREIGN_QUEUE_WAIT_MS + 60_000  # the runs' first workflow tasks waited that long
    monkeypatch.setattr(reconciler_ticks, "now_ms", lambda: later)  # the module whose tick reads it
    started: list[str] = []

    async def start(jid: str) -> None:
        started.append(jid)

    reports: list[TickReport] = []

    async def ticked() -> bool:
        reports.append(await tick(ledger_pool, start, temporal_client, limit=LIMIT, task_queue=queue))
        return job_id in started

    try:
        # visibility lists a new run within moments: a few ticks at most
        await eventually(ticked, timeout_s=10, interval_s=0.3, what=lambda: f"the job started again: {reports}")
        foreign = await handles[0].describe()
        assert foreign.status == WorkflowExecutionStatus.TERMINATED
        history = await handles[0].fetch_history()
        reason = history.events[-1].workflow_execution_terminated_event_attributes.reason
        assert nobody in reason and queue in reason, reason
        # only that job, once: the same tick's closed-run rule leaves what it acted on
        # (this start hook adds no run, so the terminated run is still the id's latest)
        assert started == [job_id], started
        for other in handles[1:]:
            assert (await other.describe()).status == WorkflowExecutionStatus.RUNNING
        row: Any = await ledger_pool.fetchrow("SELECT completed_at FROM jobs WHERE job_id = $1", backlog[0])
        assert row["completed_at"] is None
    finally:
        for handle in handles:
            if (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
                await handle.terminate(reason="test over")

"""Who records an occurrence's job as started (the reconciler's rule 1 and a job's first step).

A schedule's occurrence admits its job (``admit_occurrence``) and its trampoline then starts
the job's run as its child; the admission records no start, so a trampoline stopped before
that start (``tests/integration/test_schedules.py``) leaves a job rule 1 starts. A job whose
run the trampoline did start is recorded by the job's first step, or — when that step waits
longer than the start grace (its source queue busy) — by rule 1, which finds the run open
and records it: it starts nothing, and counts nothing as started. The tick is called
directly, without a worker: the run waits on a queue nobody polls.
"""

from __future__ import annotations

import asyncpg
import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from curaflow.domain.messages import JobInput, TargetSpec
from curaflow.ledger.db import now_ms
from curaflow.ledger.jobs import NewJob, insert_job
from curaflow.ledger.reconciler import START_GRACE_MS, TickReport, tick
from curaflow.temporal.connection import job_start_options
from tests.support import eventually, short_id
from workflows.job import JobWorkflow

pytestmark = pytest.mark.integration


async def admitted(pool: asyncpg.Pool, job_id: str) -> JobInput:
    """An occurrence's job as its admission leaves it: admitted, no start recorded, older
    than the start grace."""
    created = now_ms() - START_GRACE_MS - 60_000
    inp = JobInput(
        job_id=job_id, plan_id="plan", schedule_id="plan", trigger="schedule", created_at_ms=created,
        deadline_at_ms=created + 3_600_000, targets=[TargetSpec(target_id="demo")],
    )  # fmt: skip
    async with pool.acquire() as conn:
        row = await insert_job(conn, NewJob(job_input=inp))
    assert row.job_input is not None
    return row.job_input


async def test_rule_1_records_an_occurrences_open_run_and_starts_only_a_job_without_one(
    temporal_client: Client, ledger_pool: asyncpg.Pool
) -> None:
    nobody = f"nobody-polls-{short_id()}"
    running, lost = f"plan-{short_id()}@2025-01-02T0300+0900", f"plan-{short_id()}@2025-01-02T0300+0900"
    inp = await admitted(ledger_pool, running)
    await admitted(ledger_pool, lost)
    # The trampoline's child: the job's run, waiting for its first step.
    handle = await temporal_client.start_workflow(JobWorkflow.run, inp, **job_start_options(inp, nobody))
    started: list[str] = []

    async def start(job_id: str) -> None:
        started.append(job_id)

    reports: list[TickReport] = []

    async def ticked() -> bool:
        reports.append(await tick(ledger_pool, start, temporal_client))
        return any(running in r.recorded for r in reports) and lost in started

    try:
        await eventually(ticked, timeout_s=10, interval_s=0.3, what=lambda: f"rule 1: {reports}")
        assert running not in started  # found running: recorded, not started again
        recorded = await ledger_pool.fetchval("SELECT workflow_started_at FROM jobs WHERE job_id = $1", running)
        assert recorded is not None
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
    finally:
        await handle.terminate(reason="test over")
        await ledger_pool.execute(
            "UPDATE jobs SET completed_at = created_at WHERE job_id = ANY($1::text[])", [running, lost]
        )

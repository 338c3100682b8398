"""The reconciler's closed-execution rule asks Temporal only about the jobs it could finish.

Rule 2 (``curaflow.ledger.reconciler.ticks``) lists the runs closed within
``CLOSED_WINDOW_MS`` without their job's status and matches them against the ledger's open
jobs no attempt holds a live lease on. A tick whose ledger holds no such job lists nothing;
with up to ``limit`` of them, it lists their ids only — nothing else listed could be
matched. Before (2026-12-07) every tick listed every such run of the namespace whatever the
ledger held — with 400 of them, an idle worker ticking every 500 ms kept the dev server at
~17 % of a core. A job whose run closed converges with its close, as before.
"""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from curaflow.domain.execution import JOB_TYPE
from curaflow.domain.messages import JobInput, TargetSpec
from curaflow.jobs.submit import JOB_START_OPTIONS
from curaflow.ledger.db import now_ms
from curaflow.ledger.jobs import NewJob, insert_job, mark_workflow_started
from curaflow.ledger.reconciler import TickReport, tick
from curaflow.ledger.reconciler import ticks as reconciler_ticks
from curaflow.ledger.reconciler.convergence import NO_LIVE_ATTEMPT
from curaflow.protocol.models import Task
from tests.support import eventually, short_id
from workflows.job import JobWorkflow

pytestmark = pytest.mark.integration


def task(key: str) -> Task:
    return Task.model_validate(
        {"protocol_version": "1", "job_type": "candidate_search", "idempotency_key": key, "params": {"target_id": "t"}}
    )


async def terminated_run(client: Client, job_id: str) -> None:
    """A run of ``job_id`` that held its job (``JobType`` set) and was terminated: what rule 2
    lists (on a queue nobody polls: nothing runs it)."""
    handle = await client.start_workflow(
        JobWorkflow.run,
        task(job_id.removeprefix("demo@manual-")),
        id=job_id,
        task_queue=f"nobody-polls-{short_id()}",
        search_attributes=TypedSearchAttributes([SearchAttributePair(JOB_TYPE, "candidate_search")]),
        **JOB_START_OPTIONS,
    )
    await handle.terminate(reason="an operator, in the test")


async def test_a_tick_lists_closed_runs_only_of_the_jobs_it_could_finish(
    temporal_client: Client, ledger_pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    listings: list[dict[str, Any]] = []
    real = reconciler_ticks._closed_executions

    async def counted(client: Client, now: int, *job_ids: Any) -> Any:
        found = await real(client, now, *job_ids)
        listings.append(found)
        return found

    monkeypatch.setattr(reconciler_ticks, "_closed_executions", counted)
    unheld = await ledger_pool.fetchval(f"SELECT count(*) FROM jobs j WHERE completed_at IS NULL AND {NO_LIVE_ATTEMPT}")
    assert unheld == 0, "the session's ledger holds open jobs of another test"
    # A closed run the ledger holds no job of: listing it could finish nothing.
    stranger = f"demo@manual-stranger-{short_id()}"
    await terminated_run(temporal_client, stranger)
    for _ in range(3):
        assert await tick(ledger_pool, None, temporal_client) == TickReport()
    assert listings == []

    # An open job whose run is then terminated: only its id is asked about, and the job
    # ends with the close.
    job_id = f"demo@manual-closed-{short_id()}"
    created = now_ms()
    inp = JobInput(
        job_id=job_id, plan_id="demo", created_at_ms=created, deadline_at_ms=created + 3_600_000,
        targets=[TargetSpec(target_id="t")],
    )  # fmt: skip
    async with ledger_pool.acquire() as conn:
        await insert_job(conn, NewJob(job_input=inp))
        await mark_workflow_started(conn, job_id)
    await terminated_run(temporal_client, job_id)
    reports: list[TickReport] = []

    async def converged() -> bool:
        reports.append(await tick(ledger_pool, None, temporal_client))
        return job_id in reports[-1].closed

    await eventually(converged, timeout_s=20, interval_s=0.3, what=lambda: f"{job_id} closed: {reports}")
    assert listings and job_id in listings[-1]
    assert all(stranger not in found for found in listings), listings
    row: Any = await ledger_pool.fetchrow("SELECT completed_at FROM jobs WHERE job_id = $1", job_id)
    assert row["completed_at"] is not None

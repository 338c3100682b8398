"""The outcome record, search attributes and the budgets a job runs under."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from curaflow.ledger.finish import finish_job
from tests.conftest import StackFactory
from tests.support import Stack, eventually, shared_stack, short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def directory_config(tmp_path: Path, **extra: object) -> dict[str, object]:
    out = f"out-{short_id()}"
    return {
        "routes": {out: {"kind": "directory", "path": str(tmp_path / "out")}},
        "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [out]}],
        **extra,
    }


@pytest.fixture(scope="module")
async def shared(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str, ledger_pool: Any
) -> AsyncIterator[Stack]:
    """One worker process for the job-level tests, each on a target of its own (``logged``, ``demo``)."""
    tmp = tmp_path_factory.mktemp("outcome")
    suffix = short_id()
    config = {
        "routes": {f"{t}-{suffix}": {"kind": "directory", "path": str(tmp / t)} for t in ("logged", "demo")},
        "targets": [
            {"id": t, "query": {"tags": ["オリジナル"]}, "routes": [f"{t}-{suffix}"]} for t in ("logged", "demo")
        ],
    }
    async with shared_stack(tmp, temporal_address, database_url, config) as stack:
        yield stack


async def test_outcome_record_is_written_and_logged_exactly_once(shared: Stack, temporal_client: Client) -> None:
    stack = shared
    job_id = await stack.admit(stack.task(target_id="logged", query={"tags": ["オリジナル"]}))
    await stack.wait_terminal(job_id)
    await asyncio.wait_for(temporal_client.get_workflow_handle(job_id).result(), 20)

    pool = await stack.ledger()
    rows = await pool.fetch("SELECT record FROM outcomes WHERE job_id = $1", job_id)
    assert len(rows) == 1
    record = rows[0]["record"]
    for field in (
        "event", "outcome_version", "schedule_id", "slot_id", "occurrence_at", "occurrence_date", "status",
        "business_status", "alertable", "duration_ms", "cells",
    ):  # fmt: skip
        assert field in record, field
    assert (record["outcome_version"], record["status"], record["business_status"]) == (2, "success", "success")
    lines = [
        json.loads(line)
        for line in stack.worker_log().splitlines()
        if line.startswith("{") and '"schedule.outcome"' in line and job_id in line
    ]
    assert len(lines) == 1
    assert lines[0]["business_status"] == "success" and lines[0]["alertable"] is False
    # Finishing again (a retried finish activity, a reconciler pass) writes nothing more.
    async with pool.acquire() as conn:
        again = await finish_job(conn, job_id)
    assert again is not None and again.outcome is None
    assert (
        await pool.fetchval("SELECT count(*) FROM job_events WHERE job_id = $1 AND type = 'job.succeeded'", job_id) == 1
    )


async def test_search_attributes_let_operators_filter_jobs(shared: Stack, temporal_client: Client) -> None:
    stack = shared
    job_id = await stack.admit(stack.task(target_id="demo", query={"tags": ["no-such-tag-anywhere"]}))
    await stack.wait_terminal(job_id)
    query = (
        f"WorkflowId = '{job_id}' AND JobStatus = 'failed' AND BusinessStatus = 'no_candidate' "
        "AND JobType = 'candidate_search' AND TargetIds = 'demo'"
    )

    async def found() -> list[str]:
        return [w.id async for w in temporal_client.list_workflows(query)]

    assert await eventually(found, timeout_s=20, what="the job listed by its search attributes") == [job_id]


async def test_capabilities_show_the_resolved_budgets(make_stack: StackFactory, tmp_path: Path) -> None:
    stack = make_stack(
        directory_config(
            tmp_path,
            budgets={
                "queued_timeout_ms": 120_000,
                "stall_timeout_ms": 30_000,  # below the 60 s floor → the default
                "heartbeat_interval_ms": 1000,
                "default_deadline_ms": 600_000,
            },
        )
    )
    http = await stack.start_api()
    job_type = (await http.get("/capabilities")).json()["job_types"][0]
    assert job_type["queued_timeout_ms"] == 120_000
    assert job_type["stall_timeout_ms"] == 900_000
    assert job_type["heartbeat_interval_ms"] == 1000
    assert job_type["default_deadline_ms"] == 600_000

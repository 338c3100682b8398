"""``curaflow upgrade-check`` against the session's Temporal dev server.

An execution whose history holds no ``core-v2`` marker (here: one no worker has served
yet, as an execution started before core v2 looks to the check) keeps ``job_v1``; an
execution served by today's worker records the marker and does not.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.worker import Worker

from curaflow.process.worker import sandbox_runner
from curaflow.temporal.upgrades import legacy_executions
from tests.integration.test_cli_operator import clean_env, curaflow
from tests.support import eventually, short_id
from workflows.job import JobWorkflow

# A command over executions that waits on Temporal visibility: the full suite only.
pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def test_upgrade_check_lists_executions_without_the_core_v2_marker(
    temporal_client: Client, temporal_address: str, tmp_path: Path
) -> None:
    client = temporal_client
    unserved = await client.start_workflow(
        "JobWorkflow",
        {"job_id": "pre-v2"},
        id=f"pre-v2-{short_id()}",
        task_queue=f"unserved-{short_id()}",
        execution_timeout=timedelta(minutes=5),
    )
    queue = f"served-{short_id()}"
    async with Worker(client, task_queue=queue, workflows=[JobWorkflow], workflow_runner=sandbox_runner()):
        served = await client.start_workflow(
            "JobWorkflow",
            "not an object",
            id=f"v2-{short_id()}",
            task_queue=queue,
            execution_timeout=timedelta(minutes=5),
        )
        with pytest.raises(WorkflowFailureError):
            await served.result()
    try:

        async def listed(**kwargs: object) -> set[str]:
            return {e.workflow_id for e in await legacy_executions(client, **kwargs)}  # type: ignore[arg-type]

        async def visible() -> set[str] | None:  # visibility is eventually consistent
            found = await listed(include_closed=True)
            return found if unserved.id in found else None

        found = await eventually(visible, timeout_s=10, interval_s=0.2, what=f"{unserved.id} listed")
        assert served.id not in found  # its first workflow task recorded core-v2
        assert unserved.id not in await listed(started_before=datetime.now(UTC) - timedelta(hours=1))

        env = clean_env(TEMPORAL_ADDRESS=temporal_address)
        result = await asyncio.to_thread(curaflow, "upgrade-check", "--json", cwd=tmp_path, env=env)
        assert result.returncode == 1, result.stderr
        report = json.loads(result.stdout)
        assert report["retirable"] is False
        assert unserved.id in {e["workflow_id"] for e in report["executions"]}
        early = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
        result = await asyncio.to_thread(curaflow, "upgrade-check", "--started-before", early, cwd=tmp_path, env=env)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "can be retired" in result.stdout
    finally:
        await unserved.terminate("test over")

"""An HTTP cancel of a job just started from a Temporal client, before its ``admit`` step ran.

The case (a cancel storm with worker kills, ``curaflow chaos``): a job started with
``start_job`` and cancelled through ``POST /jobs/{id}/cancel`` within a second must not
answer 404 ``unknown_job`` because the workflow has not admitted its Task into the ledger
yet, nor run on until it fails. The cancel must reach
the job whichever path started it and whichever path cancels it.

No worker serves the task queue while the cancel arrives, so the execution exists and
its Task is not admitted yet; a worker starts a second later.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus

from curaflow.jobs.submit import job_id_for, start_job
from curaflow.temporal.connection import connect
from tests.conftest import StackFactory
from tests.fakes.replay import ReplayServer
from tests.support import eventually, short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def test_a_cancel_before_admission_reaches_the_job(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer, temporal_address: str
) -> None:
    out = f"out-{short_id()}"
    stack = make_stack(
        {
            "pixiv": {"api_url": replay.url},
            "api": {"cancel_wait_ms": 20_000},
            "routes": {out: {"kind": "directory", "path": str(tmp_path / "out")}},
            "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [out]}],
        }
    )
    http = await stack.start_api()
    client = await connect(temporal_address)
    task = stack.task(target_id="demo")
    # start_job answers once the Task is admitted, which takes a worker: it waits meanwhile.
    started = asyncio.create_task(start_job(client, task, task_queue=stack.task_queue))
    job_id = job_id_for(task)

    async def exists() -> bool:
        return [w async for w in client.list_workflows(f"WorkflowId = '{job_id}'")] != []

    await eventually(exists, timeout_s=15, what="the execution")
    cancel = asyncio.create_task(http.post(f"/jobs/{job_id}/cancel"))

    async def cancel_reached_the_execution() -> bool:
        history = await client.get_workflow_handle(job_id).fetch_history()
        return any(e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED for e in history.events)

    await eventually(cancel_reached_the_execution, timeout_s=15, what="the cancel request in the history")
    assert not cancel.done(), (await cancel).text  # once: 404 unknown_job at once
    assert not started.done()
    await stack.start_worker()
    answer = await asyncio.wait_for(cancel, 60)
    handle = await asyncio.wait_for(started, 30)

    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "cancelled", answer.json()
    assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED
    assert not list((tmp_path / "out").glob("*/manifest.json"))  # nothing was delivered
    record = await stack.wait_terminal(handle.id, 30)
    assert record.cancel_requested_at is not None

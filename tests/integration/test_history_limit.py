"""Temporal terminates a job's run itself when signals sent to it pass its history limit.

A breaker sent 29 signals of 1.9 MB (any name) to a running ``JobWorkflow``: its history
passed Temporal's 50 MB limit in seconds and Temporal terminated the run; the reconciler
read that as an operator's terminate (``cancelled / execution_terminated``, "An operator
terminated…"). Here a dev server of its own, with a 1 MiB history limit
(``limit.historySize.error``: the session's server is every test's), terminates a job run
that junk signals fill, and :func:`describe_execution` reads the cause as Temporal's own
(``history_limit``), while an operator's terminate with the very same reason stays a
terminate. No worker: the signals are recorded whether or not a worker runs the run. A job
admitted as ``POST /jobs`` admits it (its run started on that server) is then converged as
the reconciler's rule 2 converges it, with the cause read (the session's ledger is every
test's, so no whole tick runs against this server: it would find the others' jobs gone).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from curaflow.devstack.temporal import temporal_binary
from curaflow.domain.execution import CUSTOM_SEARCH_ATTRIBUTES, JOB_TYPE, job_workflow_types
from curaflow.domain.verdicts import FinishCause
from curaflow.ledger.db import now_ms
from curaflow.ledger.reconciler import converge
from curaflow.ledger.reconciler.executions import describe_execution
from curaflow.temporal.job_runs import HISTORY_LIMIT_REASONS
from tests.support import Stack

#: The history limit of this test's dev server (bytes); Temporal's default is 50 MB.
HISTORY_LIMIT_BYTES = 1 << 20
#: One junk signal's argument (bytes): a few fill the history past the limit.
JUNK_BYTES = 300_000


async def start_job_run(client: Client) -> str:
    """A run of the job workflow type under a fresh id, as admitted jobs start (``JobType``
    set), on a task queue no worker polls."""
    job_id = f"history-limit-{uuid.uuid4().hex[:8]}"
    await client.start_workflow(
        job_workflow_types()[0],
        id=job_id,
        task_queue="history-limit-nobody",
        search_attributes=TypedSearchAttributes([SearchAttributePair(JOB_TYPE, "candidate_search")]),
    )
    return job_id


async def fill_history(client: Client, job_id: str) -> None:
    """Send the run junk signals of names it has no handler for until Temporal terminates it."""
    handle = client.get_workflow_handle(job_id)
    for n in range(4 * HISTORY_LIMIT_BYTES // JUNK_BYTES):
        try:
            await handle.signal(f"junk-{n}", "x" * JUNK_BYTES)
        except RPCError:
            break  # Temporal terminated the run: a signal of a closed run is refused
    for _ in range(100):
        if (await handle.describe()).status == WorkflowExecutionStatus.TERMINATED:
            return
        await asyncio.sleep(0.1)


async def test_a_run_temporal_terminated_at_its_history_limit_is_not_an_operators_terminate(
    tmp_path: Path, database_url: str
) -> None:
    env = await WorkflowEnvironment.start_local(
        data_converter=pydantic_data_converter,
        search_attributes=CUSTOM_SEARCH_ATTRIBUTES,
        dev_server_existing_path=temporal_binary(),
        dev_server_log_level="error",
        dev_server_startup_timeout=timedelta(seconds=60),
        dev_server_extra_args=[
            "--dynamic-config-value",
            f"limit.historySize.error={HISTORY_LIMIT_BYTES}",
            "--dynamic-config-value",
            f"limit.historySize.warn={HISTORY_LIMIT_BYTES // 2}",
        ],
    )
    try:
        client = env.client
        filled = await start_job_run(client)
        await fill_history(client, filled)
        execution = await describe_execution(client, filled, 0)
        assert execution.closed_cause_for(0) == FinishCause.HISTORY_LIMIT

        # A job admitted as POST /jobs admits it ends failed, with a reason naming the limit.
        config: dict[str, Any] = {
            "pixiv": {"api_url": "http://127.0.0.1:9"},
            "routes": {"out": {"kind": "directory", "path": str(tmp_path / "out")}},
            "targets": [{"id": "demo", "query": {"tags": ["x"]}, "routes": ["out"]}],
        }
        stack = Stack(tmp_path, env.client.service_client.config.target_host, database_url, config)
        try:
            job_id = await stack.admit(stack.task(target_id="demo"))
            await fill_history(client, job_id)
            execution = await describe_execution(client, job_id, now_ms())
            cause = execution.closed_cause_for(0)
            assert cause == FinishCause.HISTORY_LIMIT
            await converge(await stack.ledger(), job_id, cause, closed_at_ms=execution.closed_at_ms)
            record = await stack.job(job_id)
            cell = record.cells[0]
            assert (record.business_status, cell.state, cell.reason) == ("failed", "failed", "history_limit_exceeded")
            assert "Temporal terminated the execution itself" in (cell.reason_message or "")
        finally:
            await stack.stop()

        # An operator's terminate, even one that types Temporal's words, stays an operator's.
        terminated = await start_job_run(client)
        await client.get_workflow_handle(terminated).terminate(reason=sorted(HISTORY_LIMIT_REASONS)[0])
        execution = await describe_execution(client, terminated, 0)
        assert execution.closed_cause_for(0) == FinishCause.TERMINATED
    finally:
        await env.shutdown()

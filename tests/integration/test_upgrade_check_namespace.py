"""``curaflow upgrade-check`` answers only about the namespace curaflow's jobs run in.

"job_v1 can be retired" (exit 0) is the go-ahead to delete code that open executions
replay. Asked of another namespace — ``TEMPORAL_NAMESPACE`` mistyped, the cluster's
``default`` while the jobs run in ``curaflow`` — the list of executions without a
core-v2 marker is empty because no job runs there, and the command said "can be
retired" all the same. Now it says it cannot tell, and why (exit 1, as for a namespace
that does not exist).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from google.protobuf.duration_pb2 import Duration
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest, RegisterNamespaceRequest
from temporalio.client import Client
from temporalio.service import RPCError

from curaflow.ledger.db import now_ms
from curaflow.temporal.namespace import ensure_search_attributes
from tests.integration.test_cli_operator import clean_env, curaflow
from tests.jobs_support import spec_for
from tests.support import Stack, ledger_job, short_id

pytestmark = [pytest.mark.integration]


async def other_namespace(client: Client, *, with_search_attributes: bool) -> str:
    name = f"not-the-jobs-{short_id()}"
    await client.workflow_service.register_namespace(
        RegisterNamespaceRequest(namespace=name, workflow_execution_retention_period=Duration(seconds=86400))
    )
    other = await Client.connect(client.service_client.config.target_host, namespace=name)
    for _ in range(50):  # a new namespace is served within a moment
        try:
            await other.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=name))
            break
        except RPCError:
            await asyncio.sleep(0.2)
    if with_search_attributes:  # as a curaflow worker started there once would leave it
        await ensure_search_attributes(other, time.monotonic() + 30)
    return name


async def test_a_namespace_curaflow_never_ran_in_is_not_retirable(
    temporal_client: Client, temporal_address: str, tmp_path: Path
) -> None:
    name = await other_namespace(temporal_client, with_search_attributes=False)
    env = clean_env(TEMPORAL_ADDRESS=temporal_address, TEMPORAL_NAMESPACE=name)
    result = await asyncio.to_thread(curaflow, "upgrade-check", cwd=tmp_path, env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "can be retired" not in result.stdout
    assert name in result.stderr and "search attributes" in result.stderr


async def test_a_namespace_that_holds_none_of_the_ledgers_jobs_is_not_retirable(
    temporal_client: Client,
    temporal_address: str,
    database_url: str,
    ledger_pool: asyncpg.Pool,
    make_stack: Callable[[dict[str, Any]], Stack],
    tmp_path: Path,
) -> None:
    name = await other_namespace(temporal_client, with_search_attributes=True)
    # The ledger holds an open job whose workflow started — in the jobs' namespace, not here.
    job_id = await ledger_job(ledger_pool, spec_for(make_stack({})), label="upgrade-check")
    await ledger_pool.execute(
        "UPDATE jobs SET workflow_started_at = $2, started_at = $2 WHERE job_id = $1", job_id, now_ms()
    )
    env = clean_env(TEMPORAL_ADDRESS=temporal_address, TEMPORAL_NAMESPACE=name, DATABASE_URL=database_url)
    result = await asyncio.to_thread(curaflow, "upgrade-check", cwd=tmp_path, env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "can be retired" not in result.stdout
    assert name in result.stderr and "none of the ledger's jobs" in result.stderr


async def test_the_check_finds_the_running_curaflow_dev_of_its_directory(
    temporal_client: Client, temporal_address: str, database_url: str, tmp_path: Path
) -> None:
    # A `curaflow dev` running on this directory's state (its stack file, a live pid): the
    # check asks its Temporal and its ledger, as `schedules` and the ledger commands do —
    # it said "set TEMPORAL_ADDRESS" (exit 2) beside a running stack until 2026-12-07.
    state = tmp_path / ".curaflow"
    state.mkdir()
    (state / "stack.json").write_text(
        json.dumps({"pid": os.getpid(), "temporal_address": temporal_address, "database_url": database_url})
    )
    env = clean_env(TEMPORAL_NAMESPACE=temporal_client.namespace)
    before = "2000-01-01T00:00:00"  # no execution started before: the answer depends on no other test's
    result = await asyncio.to_thread(curaflow, "upgrade-check", "--started-before", before, cwd=tmp_path, env=env)
    assert "TEMPORAL_ADDRESS" not in result.stderr, result.stderr
    assert result.returncode in (0, 1), result.stdout + result.stderr
    assert "job_v1" in result.stdout + result.stderr, result.stdout + result.stderr
    # Asked of a namespace no curaflow worker served, it still tells it apart (the dev stack's Temporal)
    name = await other_namespace(temporal_client, with_search_attributes=False)
    other = await asyncio.to_thread(curaflow, "upgrade-check", cwd=tmp_path, env=clean_env(TEMPORAL_NAMESPACE=name))
    assert other.returncode == 1 and name in other.stderr and "search attributes" in other.stderr, other.stderr

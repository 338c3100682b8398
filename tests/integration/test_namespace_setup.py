"""A namespace other than ``default``, against the real dev server.

Each test uses a namespace that does not exist yet: the worker (and the compose stack's
``curaflow temporal-setup`` service) must register it and its search attributes, then a
job runs there and the Temporal UI's filters find it. A namespace that cannot be made
ready stops the worker with the reason.
"""

from __future__ import annotations

import os
import subprocess
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.service import RPCError

from curaflow.devstack.processes import WorkerProcess
from curaflow.temporal.connection import SEARCH_ATTRIBUTES, connect
from curaflow.temporal.namespace import TemporalSetupError, ensure_namespace, prepare_namespace
from tests.conftest import StackFactory
from tests.support import eventually, short_id
from tests.zygote import curaflow_command

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def config_in(namespace: str, tmp_path: Path) -> dict[str, Any]:
    out = f"out-{short_id()}"
    return {
        "temporal": {"namespace": namespace},
        "routes": {out: {"kind": "directory", "path": str(tmp_path / "delivered")}},
        "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [out]}],
    }


async def test_prepare_registers_a_fresh_namespace_and_its_attributes_idempotently(temporal_address: str) -> None:
    namespace = f"curaflow-{short_id()}"
    client = await connect(temporal_address, namespace)

    first = await prepare_namespace(client, timeout_s=30)
    assert first.created_namespace is True
    assert first.added_attributes == sorted(SEARCH_ATTRIBUTES)
    assert first.attributes == {
        "JobStatus": "Keyword",
        "BusinessStatus": "Keyword",
        "JobType": "Keyword",
        "TargetIds": "KeywordList",
        "ScheduleId": "Keyword",
    }
    second = await prepare_namespace(client, timeout_s=30)
    assert (second.created_namespace, second.added_attributes) == (False, [])
    assert second.attributes == first.attributes


async def test_a_worker_runs_jobs_in_a_namespace_it_registered(
    make_stack: StackFactory, tmp_path: Path, temporal_address: str
) -> None:
    namespace = f"curaflow-{short_id()}"
    stack = make_stack(config_in(namespace, tmp_path))
    await stack.start_worker()  # registers the namespace and the search attributes
    assert "temporal.namespace_registered" in stack.worker_log()

    job_id = await stack.admit(stack.task(query={"tags": ["オリジナル"]}))
    record = await stack.wait_terminal(job_id)
    assert record.business_status == "success"

    client = await connect(temporal_address, namespace)
    await client.get_workflow_handle(job_id).result()
    found = [w.id async for w in client.list_workflows('JobStatus = "succeeded" AND TargetIds = "demo"')]
    assert found == [job_id]  # the UI's filters work in that namespace
    # docs/temporal.md's query for open jobs (a closed run keeps its last JobStatus)
    open_now = [w.id async for w in client.list_workflows('ExecutionStatus = "Running" AND JobStatus = "succeeded"')]
    assert job_id not in open_now
    default = await connect(temporal_address)
    assert [w.id async for w in default.list_workflows(f'WorkflowId = "{job_id}"')] == []


async def test_an_attribute_of_the_wrong_type_is_refused_loudly(
    make_stack: StackFactory, tmp_path: Path, temporal_address: str
) -> None:
    clash = f"curaflow-{short_id()}"
    client = await connect(temporal_address, clash)
    await ensure_namespace(client, retention=timedelta(days=1), deadline=time.monotonic() + 30)
    request = AddSearchAttributesRequest(
        search_attributes={"JobStatus": IndexedValueType.INDEXED_VALUE_TYPE_TEXT}, namespace=clash
    )

    async def added() -> bool:  # a just-registered namespace takes a moment to reach the operator service
        await client.operator_service.add_search_attributes(request)
        return True

    await eventually(
        added,
        timeout_s=20,
        interval_s=0.2,
        ignore=(RPCError,),
        what="the search attribute added",
    )
    with pytest.raises(TemporalSetupError, match=r"JobStatus is Text \(curaflow needs Keyword\)"):
        await prepare_namespace(client, timeout_s=10)

    # a worker configured for that namespace exits with the reason instead of polling nothing
    stack = make_stack(config_in(clash, tmp_path))
    log = tmp_path / "worker-clash.log"
    worker = WorkerProcess(stack.worker_env(), log).start()
    await eventually(lambda: not worker.alive(), timeout_s=60, what="the worker exited")
    assert worker.process is not None and worker.process.returncode == 2, log.read_text(errors="replace")[-2000:]
    assert "JobStatus is Text" in log.read_text(errors="replace")


def test_the_setup_command_prepares_a_namespace_and_is_idempotent(temporal_address: str, tmp_path: Path) -> None:
    namespace = f"curaflow-{short_id()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CURAFLOW_", "TEMPORAL_"))}
    endpoint, queue = f"jobs-{short_id()}", f"q-{short_id()}"
    env.update(
        TEMPORAL_ADDRESS=temporal_address,
        TEMPORAL_NAMESPACE=namespace,
        CURAFLOW_TEMPORAL__NEXUS_ENDPOINT=endpoint,
        CURAFLOW_TEMPORAL__TASK_QUEUE=queue,
    )

    def setup(**extra: str) -> subprocess.CompletedProcess[str]:
        return curaflow_command(["temporal-setup"], env={**env, **extra}, cwd=tmp_path, timeout=120)

    runs = [setup() for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    assert f"namespace {namespace}: registered" in runs[0].stdout
    assert "search attribute JobStatus (Keyword): added" in runs[0].stdout
    assert f"Nexus endpoint {endpoint} → task queue {queue}: created" in runs[0].stdout
    assert f"namespace {namespace}: exists" in runs[1].stdout
    assert "search attribute TargetIds (KeywordList): ok" in runs[1].stdout
    assert f"Nexus endpoint {endpoint} → task queue {queue}: exists" in runs[1].stdout
    # The endpoint is never changed: another task queue is a warning naming the fix.
    elsewhere = setup(CURAFLOW_TEMPORAL__TASK_QUEUE="another-queue")
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert f"Nexus endpoint '{endpoint}' targets namespace '{namespace}' task queue '{queue}'" in " ".join(
        elsewhere.stderr.split()
    )


async def test_a_retention_other_than_the_namespaces_is_a_warning_never_a_change(
    temporal_address: str, tmp_path: Path
) -> None:
    namespace = f"curaflow-{short_id()}"
    client = await connect(temporal_address, namespace)
    first = await prepare_namespace(client, retention=timedelta(days=3), timeout_s=30)
    assert first.created_namespace and first.retention == timedelta(days=3) and first.warnings == []

    second = await prepare_namespace(client, retention=timedelta(days=7), timeout_s=30)
    assert second.retention == timedelta(days=3)  # left as it is
    assert len(second.warnings) == 1
    assert "keeps closed executions 3 days, not the configured 7 days" in second.warnings[0]
    # the command as it runs: the namespace as a flag (the temporal CLI 1.x warns "Passing the
    # namespace as an argument is now deprecated" for the positional a newcomer copied), and
    # the address of the server curaflow talks to (a stack on another port than the CLI's
    # default 127.0.0.1:7233 was not the one the command changed)
    command = (
        f"temporal operator namespace update --address {temporal_address} --namespace {namespace} --retention 168h"
    )
    assert command in second.warnings[0]
    assert (await prepare_namespace(client, retention=timedelta(days=3), timeout_s=30)).warnings == []

    # the setup command says it on stderr and still succeeds
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CURAFLOW_", "TEMPORAL_"))}
    env.update(TEMPORAL_ADDRESS=temporal_address, TEMPORAL_NAMESPACE=namespace)
    env["CURAFLOW_TEMPORAL__NAMESPACE_RETENTION_DAYS"] = "7"
    run = curaflow_command(["temporal-setup"], env=env, cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "warning: namespace" in run.stderr and "not the configured 7 days" in " ".join(run.stderr.split())

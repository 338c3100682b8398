"""A Task's ``job_type`` is carried end to end (DESIGN.md "What a second job type touches").

The protocol's schema allows any word as ``job_type``; curaflow accepts those of
:data:`curaflow.domain.execution.JOB_WORKFLOWS`. The test adds a second, test-only job
type run by ``JobWorkflow`` (in this process, where admission runs; the worker never
judges a job type) and follows one job of it through every place a job's type is
written: the ledger row, the workflow type, its input, its ``JobType`` search attribute,
its result, the outcome record, the protocol Job and the admission metric.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from curaflow.domain import execution
from curaflow.domain.execution import JOB_TYPE, JOB_WORKFLOW, job_workflow
from curaflow.domain.messages import JobState
from curaflow.protocol.projection import project_job
from curaflow.temporal.connection import connect_configured
from tests.conftest import StackFactory
from tests.support import short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: A job type only this test accepts.
PROBE = "candidate_search_probe"


def admitted(job_type: str) -> float:
    return REGISTRY.get_sample_value("curaflow_jobs_admitted_total", {"trigger": "protocol", "job_type": job_type}) or 0


async def test_a_task_s_job_type_reaches_every_place(
    make_stack: StackFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(execution.JOB_WORKFLOWS, PROBE, JOB_WORKFLOW)
    out = f"out-{short_id()}"
    stack = make_stack(
        {
            "routes": {out: {"kind": "directory", "path": str(tmp_path / "out")}},
            "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [out]}],
        }
    )
    await stack.start_worker()
    counted = admitted(PROBE)

    job_id = await stack.admit({**stack.task(query={"tags": ["オリジナル"]}), "job_type": PROBE})
    record = await stack.wait_terminal(job_id)

    assert record.cells[0].state == "submitted", record
    assert record.job_type == PROBE  # the ledger's jobs row
    assert admitted(PROBE) == counted + 1  # curaflow_jobs_admitted_total{job_type}
    handle = (await connect_configured(stack.settings.temporal)).get_workflow_handle(job_id)
    described = await handle.describe()
    assert described.workflow_type == job_workflow(PROBE)
    assert described.typed_search_attributes.get(JOB_TYPE) == PROBE
    history = await handle.fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    assert json.loads(started.input.payloads[0].data)["job_type"] == PROBE  # JobInput
    assert JobState.model_validate(await handle.result()).job_type == PROBE
    outcome = await (await stack.ledger()).fetchval("SELECT record FROM outcomes WHERE job_id = $1", job_id)
    assert outcome["job_type"] == PROBE
    assert project_job(record)["job_type"] == PROBE  # GET /jobs/{id}

"""Which job types curaflow accepts and which workflow type runs each: one table
(:data:`curaflow.domain.execution.JOB_WORKFLOWS`), read by every place that needs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from curaflow.config import Settings
from curaflow.domain import execution
from curaflow.domain.execution import JOB_WORKFLOW, UnknownJobType, job_workflow, job_workflow_types
from curaflow.jobs.admission import Admitter
from curaflow.ledger.reconciler import closed_executions_query
from curaflow.protocol.errors import ProtocolError, supported_job_types
from curaflow.protocol.task import validate_task
from curaflow.routes import DirectoryRouteConfig

PROBE = "candidate_search_probe"


def task(job_type: str) -> dict[str, object]:
    return {"protocol_version": "1", "job_type": job_type, "idempotency_key": "k", "params": {"target_id": "demo"}}


def test_candidate_search_is_run_by_job_workflow() -> None:
    assert job_workflow("candidate_search") == JOB_WORKFLOW == "JobWorkflow"
    assert supported_job_types() == ["candidate_search"]
    assert job_workflow_types() == [JOB_WORKFLOW]
    with pytest.raises(UnknownJobType, match=r"'translate' is not accepted \(known: \['candidate_search'\]\)"):
        job_workflow("translate")


def test_the_protocol_accepts_exactly_the_table_s_job_types(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ProtocolError) as refused:
        validate_task(task(PROBE))
    assert refused.value.detail == {
        "reason": "unsupported_job_type",
        "job_type": PROBE,
        "supported": ["candidate_search"],
    }

    monkeypatch.setitem(execution.JOB_WORKFLOWS, PROBE, "ProbeWorkflow")
    assert validate_task(task(PROBE)).job_type == PROBE
    assert supported_job_types() == ["candidate_search", PROBE]
    assert job_workflow_types() == [JOB_WORKFLOW, "ProbeWorkflow"]
    # The reconciler looks for closed executions of every type that runs jobs.
    query = closed_executions_query("2026-01-01T00:00:00Z")
    assert query.startswith("(WorkflowType = 'JobWorkflow' OR WorkflowType = 'ProbeWorkflow') AND ")


async def test_a_temporal_client_s_task_must_be_run_by_its_job_type_s_workflow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Refused before anything is written (no ledger here): a Task of a job type another
    # workflow type runs cannot become the job of this execution.
    monkeypatch.setitem(execution.JOB_WORKFLOWS, PROBE, "ProbeWorkflow")
    settings = Settings(state_dir=tmp_path, routes={"out": DirectoryRouteConfig(path=tmp_path)})
    admitter = Admitter(settings, None, None)  # type: ignore[arg-type]
    with pytest.raises(ProtocolError) as refused:
        await admitter.admit(task(PROBE), trigger="temporal", workflow_id="demo@manual-k", workflow_type=JOB_WORKFLOW)
    assert refused.value.code == "invalid_params"
    assert refused.value.detail == {"field": "job_type", "expected": "ProbeWorkflow", "received": JOB_WORKFLOW}

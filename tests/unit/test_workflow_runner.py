"""``temporal.workflow_sandbox``: which runner a worker's workflows run in."""

from __future__ import annotations

import pytest
from temporalio.worker import UnsandboxedWorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from curaflow.config import Settings, load_settings
from curaflow.process.worker import workflow_runner


def test_production_workers_run_workflows_unsandboxed_by_default() -> None:
    assert isinstance(workflow_runner(Settings()), UnsandboxedWorkflowRunner)


def test_the_sandbox_comes_back_from_the_file_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(
        workflow_runner(Settings.model_validate({"temporal": {"workflow_sandbox": True}})), SandboxedWorkflowRunner
    )
    monkeypatch.setenv("CURAFLOW_TEMPORAL__WORKFLOW_SANDBOX", "true")
    assert isinstance(workflow_runner(load_settings(None)), SandboxedWorkflowRunner)

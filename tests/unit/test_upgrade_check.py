"""Which recorded executions replay the frozen core v1 orchestration (``curaflow.temporal.upgrades``)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from temporalio.api.history.v1 import History
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner

from curaflow.temporal.connection import DATA_CONVERTER
from curaflow.temporal.upgrades import legacy_query, replays_core_v1
from tests.unit.test_replay_histories import HISTORIES, job_history, patches

JOB_HISTORIES = [p for p in HISTORIES if job_history(p)]


@pytest.mark.parametrize("path", JOB_HISTORIES, ids=[p.stem for p in JOB_HISTORIES])
async def test_an_execution_is_listed_exactly_when_the_workflow_replays_it_as_core_v1(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workflow's own decision, observed in a replay (it builds ``JobV1`` for a core v1
    execution), not the rule restated: a ``core-v3`` history holds no ``core-v2`` marker
    and is still no core v1 execution."""
    import workflows.job

    built: list[object] = []

    class Recording(workflows.job.JobV1):  # type: ignore[misc]
        def __init__(self, *args: object, **kwargs: object) -> None:
            built.append(self)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(workflows.job, "JobV1", Recording)
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    replayer = Replayer(
        workflows=[workflows.job.JobWorkflow],
        data_converter=DATA_CONVERTER,
        workflow_runner=UnsandboxedWorkflowRunner(),
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure}"
    assert replays_core_v1(History(events=history.events)) is bool(built)


def test_executions_started_on_core_v3_are_not_listed() -> None:
    v3 = [p for p in JOB_HISTORIES if patches(p) == {"core-v3"}]
    assert v3 and not any(
        replays_core_v1(History(events=WorkflowHistory.from_json(p.stem, p.read_text()).events)) for p in v3
    )


def test_both_shapes_are_told_apart() -> None:
    verdicts = {
        replays_core_v1(History(events=WorkflowHistory.from_json(p.stem, p.read_text()).events)) for p in JOB_HISTORIES
    }
    assert verdicts == {True, False}


def test_the_visibility_query_names_open_job_executions_started_before_the_rollout() -> None:
    rollout = datetime(2026, 12, 1, 18, 0, tzinfo=UTC)
    assert legacy_query(started_before=rollout) == (
        "WorkflowType = 'JobWorkflow' AND ExecutionStatus = 'Running' AND StartTime < '2026-12-01T18:00:00Z'"
    )
    assert legacy_query(include_closed=True) == "WorkflowType = 'JobWorkflow'"

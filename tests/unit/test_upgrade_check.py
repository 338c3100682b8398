"""Which recorded executions replay the frozen core v1 orchestration (``curaflow.temporal.upgrades``)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from temporalio.api.history.v1 import History
from temporalio.client import WorkflowHistory

from curaflow.temporal.upgrades import legacy_query, replays_core_v1
from tests.unit.test_replay_histories import HISTORIES, job_history, patches

JOB_HISTORIES = [p for p in HISTORIES if job_history(p)]


@pytest.mark.parametrize("path", JOB_HISTORIES, ids=[p.stem for p in JOB_HISTORIES])
def test_an_execution_replays_core_v1_exactly_when_its_history_has_no_core_v2_marker(path: Path) -> None:
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    expected = "core-v2" not in patches(path)
    assert replays_core_v1(History(events=history.events)) is expected


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

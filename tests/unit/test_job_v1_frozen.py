"""The frozen core v1 orchestration (``workflows/job_v1.py``) decides only with frozen rules.

Executions started before core v2 replay :class:`workflows.job_v1.JobV1`. If it called a
live rule (``is_terminal``, ``job_status``, ``parse_reason``, ``render_details`` …), a
change to that rule would change what those executions do: the reason a failed step
gives its cell, the published search attributes and details, the options of a push.
"""

from __future__ import annotations

import ast
import inspect
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

import workflows.job_v1
import workflows.job_v1_rules
from curaflow.process.worker import sandbox_runner
from curaflow.temporal.connection import DATA_CONVERTER
from tests.unit.test_replay_histories import HISTORIES, job_history, patches
from workflows.job import JobWorkflow

FROZEN_MODULES = (workflows.job_v1, workflows.job_v1_rules)
PROJECT_PACKAGES = ("curaflow", "workflows", "activities")

#: The live rules the frozen copy once imported; each is made to fail in the replay test.
LIVE_RULES = [
    ("curaflow.domain.cells", "is_terminal"),
    ("curaflow.domain.projection", "job_status"),
    ("curaflow.domain.projection", "job_stage"),
    ("curaflow.domain.reasons", "parse_reason"),
    ("workflows.details", "render_details"),
    ("workflows.event_push", "push_options"),
]


def project_imports(module: object) -> list[tuple[str, str]]:
    """``(module, name)`` of every ``from <project module> import <name>`` in ``module``'s source."""
    tree = ast.parse(Path(inspect.getfile(module)).read_text())  # type: ignore[arg-type]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, "*") for a in node.names if a.name.split(".")[0] in PROJECT_PACKAGES]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PROJECT_PACKAGES:
            found += [(node.module, a.name) for a in node.names]
    return found


@pytest.mark.parametrize("module", FROZEN_MODULES, ids=lambda m: m.__name__)
def test_the_frozen_copy_imports_no_live_rule(module: object) -> None:
    """Only the activities' wire messages (pydantic models) and the frozen rules module:
    no live function, enum or constant of the project."""
    import importlib

    live = []
    for source, name in project_imports(module):
        if source == workflows.job_v1_rules.__name__:
            continue
        value = getattr(importlib.import_module(source), name, None) if name != "*" else None
        if not (isinstance(value, type) and issubclass(value, BaseModel)):
            live.append(f"{source}.{name}")
    assert live == [], f"{module.__name__} imports live rules: {live}"  # type: ignore[attr-defined]


V1_HISTORIES = [p for p in HISTORIES if job_history(p) and not patches(p) & {"core-v2", "core-v3"}]


def test_there_are_histories_of_executions_started_before_core_v2() -> None:
    assert len(V1_HISTORIES) >= 3


@pytest.mark.parametrize("path", V1_HISTORIES, ids=[p.stem for p in V1_HISTORIES])
async def test_a_v1_history_replays_whatever_the_live_rules_do(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With every live rule the copy once used made to raise, the executions started
    before core v2 still replay: nothing they do depends on a live rule."""
    import importlib

    def changed(*_args: object, **_kwargs: object) -> object:
        raise AssertionError("a live rule was called by a frozen execution")

    for module, name in LIVE_RULES:
        monkeypatch.setattr(importlib.import_module(module), name, changed)
    # The workflow imports the copy through the sandbox's pass-through: drop the loaded
    # copy so that this replay imports it afresh, binding whatever the live rules are now.
    for frozen in FROZEN_MODULES:
        monkeypatch.delitem(sys.modules, frozen.__name__)
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    replayer = Replayer(workflows=[JobWorkflow], data_converter=DATA_CONVERTER, workflow_runner=sandbox_runner())
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure}"


def test_the_frozen_reasons_are_those_core_v1_knew() -> None:
    """A reason code added since (live ``TerminalReason``) is ``internal_error`` to v1."""
    rules = workflows.job_v1_rules
    assert rules.parse_reason("auth_failed") == "auth_failed"
    assert rules.parse_reason("some_reason_added_later") == "internal_error"
    assert rules.parse_reason(None) == "internal_error"
    assert len(rules.REASON_CODES) == 23

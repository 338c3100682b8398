"""Only a ``FailureError`` fails a curaflow workflow; any other exception fails its task.

Temporal's default, kept on purpose (DESIGN.md "A bug is no outcome"): a bug in workflow
code (``TypeError``, ``KeyError``, ``AttributeError``, pydantic's ``ValidationError`` …)
fails the workflow *task*, which is retried until a fixed worker replays it. Naming such
a type in ``@workflow.defn(failure_exception_types=...)`` or the worker's
``workflow_failure_exception_types`` would turn a bug into a failed execution — for a job,
an outcome.
"""

from __future__ import annotations

import ast
import inspect

import pytest

import curaflow.process.worker
from workflows.event_push import EventPushWorkflow
from workflows.job import JobWorkflow
from workflows.scheduled import ScheduledJobWorkflow


@pytest.mark.parametrize("defn", [JobWorkflow, ScheduledJobWorkflow, EventPushWorkflow], ids=lambda d: d.__name__)
def test_no_workflow_names_a_failure_exception_type(defn: type) -> None:
    assert getattr(defn, "__temporal_workflow_definition").failure_exception_types == []


def test_no_worker_names_a_workflow_failure_exception_type() -> None:
    tree = ast.parse(inspect.getsource(curaflow.process.worker))
    named = [
        kw.arg
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        for kw in node.keywords
        if kw.arg == "workflow_failure_exception_types"
    ]
    assert named == []

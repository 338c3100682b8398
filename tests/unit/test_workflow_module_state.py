"""Workflow modules keep no mutable module state.

Production workers run workflows without the SDK's sandbox
(:func:`curaflow.process.worker.workflow_runner`, DESIGN.md "Steps of a job and what they
cost"). In the sandbox each execution re-imports the module that defines its workflow
class; without it, every execution in a process shares one import of that module, so a
dict, list or set assigned there would be state one execution could leave for the next.
(Modules imported through the sandbox's pass-through were shared either way.) The
constants of those modules are immutable: tuples, frozensets, ``MappingProxyType``.
"""

from __future__ import annotations

import ast
import importlib
import inspect

import pytest

from curaflow.process import worker

MUTABLE = (dict, list, set, bytearray)


def workflow_modules() -> list[str]:
    """The modules defining the workflow classes a worker registers (and the frozen v1
    orchestration, replayed by the same worker)."""
    source = inspect.getsource(worker)
    names = {"workflows.job_v1", "workflows.job_v1_rules"}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("workflows."):
            names.add(node.module)
    return sorted(names)


def assigned_names(module_name: str) -> list[str]:
    tree = ast.parse(inspect.getsource(importlib.import_module(module_name)))
    names: list[str] = []
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        names += [t.id for t in targets if isinstance(t, ast.Name)]
    return names


def test_the_registered_workflow_modules_are_found() -> None:
    assert {"workflows.job", "workflows.scheduled", "workflows.event_push"} <= set(workflow_modules())


@pytest.mark.parametrize("module_name", workflow_modules())
def test_no_mutable_value_assigned_at_module_level(module_name: str) -> None:
    module = importlib.import_module(module_name)
    mutable = sorted(n for n in assigned_names(module_name) if isinstance(getattr(module, n, None), MUTABLE))
    assert mutable == [], f"{module_name} holds mutable module state: {mutable}"

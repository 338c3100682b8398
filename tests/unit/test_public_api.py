"""Every public import path docs/http-api.md lists imports, and every moved one still does.

The section "Public Python API" of docs/http-api.md is the list: its first table names the
public paths (each must import without a warning), its second the paths a reorganisation
moved (each must still import — the very object at its new path — with a
``DeprecationWarning`` naming the new path, and the table must list every alias
:mod:`curaflow.moved` serves). ``from curaflow.submit import start_job`` failed once the
module moved to ``curaflow.jobs.submit``.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from curaflow.moved import MOVED_MODULES, MOVED_NAMES

ROOT = Path(__file__).resolve().parents[2]
SECTION = ROOT / "docs" / "http-api.md"
NAME = re.compile(r"`((?:curaflow|workflows)(?:\.[A-Za-z_][A-Za-z0-9_]*)+)`")


def section() -> tuple[list[str], list[tuple[str, str]]]:
    """The public paths (first table) and the (old, new) pairs (second table) of the section."""
    text = SECTION.read_text()
    body = text[text.index("## Public Python API") :]
    body = body[: body.index("\n## ", 1)]
    tables: list[list[str]] = []
    for block in re.split(r"\n(?=\| [a-z]+ )", body)[1:]:
        rows = [line for line in block.splitlines() if line.startswith("| `")]
        tables.append(rows)
    public = [name for row in tables[0] for name in NAME.findall(row.split("|")[1])]
    moved = []
    for row in tables[1]:
        old_cell, new_cell = row.split("|")[1:3]
        new = NAME.findall(new_cell)[0]
        moved += [(old, new) for old in NAME.findall(old_cell) if old in MOVED_MODULES or old == new_name(old)[0]]
    return public, moved


def new_name(old: str) -> tuple[str, str]:
    """``(old, its new path)`` when ``old`` is a moved name of a package (``curaflow.temporal.connect``),
    else ``("", "")``: the section's prose may name the package itself."""
    package, _, name = old.rpartition(".")
    module = MOVED_NAMES.get(package, {}).get(name)
    return (old, f"{module}.{name}") if module else ("", "")


def resolve(path: str) -> Any:
    """The module or object ``path`` names (its longest importable module prefix, then attributes)."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            target = getattr(target, attr)
        return target
    raise ImportError(path)


PUBLIC, MOVED = section()


def test_the_section_lists_the_public_paths_and_every_moved_one() -> None:
    assert "curaflow.jobs.submit.start_job" in PUBLIC and "curaflow.client.CuraflowClient" in PUBLIC
    documented = {old for old, _ in MOVED}
    assert set(MOVED_MODULES) <= documented
    assert dict(MOVED)["curaflow.submit"] == "curaflow.jobs.submit"
    for package, names in MOVED_NAMES.items():
        assert any(old.startswith(package + ".") and old.rsplit(".", 1)[1] in names for old in documented), package


@pytest.mark.parametrize("path", PUBLIC)
def test_every_public_path_imports_without_a_warning(path: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert resolve(path) is not None


@pytest.mark.parametrize(("old", "new"), MOVED, ids=[old for old, _ in MOVED])
def test_every_moved_path_still_imports_with_a_deprecation_warning(old: str, new: str) -> None:
    package, _, name = old.rpartition(".")
    sys.modules.pop(old, None)
    if old in MOVED_MODULES:
        with pytest.warns(DeprecationWarning, match=re.escape(new)):
            module = importlib.import_module(old)
        assert module is importlib.import_module(new)
    else:  # a name of a module that became a package
        vars(importlib.import_module(package)).pop(name, None)
        with pytest.warns(DeprecationWarning, match=re.escape(new)):
            value = getattr(importlib.import_module(package), name)
        assert value is resolve(new)


def test_the_documented_form_works_in_a_fresh_interpreter() -> None:
    # what users' code writes, attributed to their line
    code = (
        "import warnings; warnings.simplefilter('always')\n"
        "from curaflow.submit import start_job\n"
        "from curaflow.temporal import connect\n"
        "from curaflow.jobs.submit import start_job as new_start\n"
        "from curaflow.temporal.connection import connect as new_connect\n"
        "assert start_job is new_start and connect is new_connect\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "<string>:2: DeprecationWarning: curaflow.submit is deprecated: import curaflow.jobs.submit" in done.stderr
    assert "<string>:3: DeprecationWarning: curaflow.temporal.connect is deprecated" in done.stderr


def test_the_project_itself_imports_no_former_path() -> None:
    import ast

    former = set(MOVED_MODULES)
    users = []
    for folder in ("curaflow", "workflows", "activities", "bench", "scripts", "tests", "examples"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name in ("test_public_api.py", "moved.py"):
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
                else:
                    continue
                users += [f"{path.relative_to(ROOT)}: {name}" for name in names if name in former]
                if isinstance(node, ast.ImportFrom) and node.module in MOVED_NAMES:
                    moved_names = MOVED_NAMES[node.module]
                    users += [
                        f"{path.relative_to(ROOT)}: {node.module}.{a.name}" for a in node.names if a.name in moved_names
                    ]
    assert users == []

"""Imports only go down: the layer list of DESIGN.md ("Layers") holds for every import.

Every import of the product's code counts — at module level, inside a function, and under
``TYPE_CHECKING`` — because each one is a dependency a reader has to follow. A unit is a
package of ``curaflow/`` (``curaflow.ledger``), a loose module of it (``curaflow.config``)
or a top-level folder (``activities``, ``workflows``, ``bench``, ``scripts``, ``worker``).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "DESIGN.md"
PRODUCT = ("curaflow", "activities", "workflows", "bench", "scripts")


def product_modules(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name → file, for every product module (tests excluded)."""
    files = [p for d in PRODUCT for p in sorted((root / d).rglob("*.py"))] + [root / "worker.py"]
    found: dict[str, Path] = {}
    for path in files:
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The product modules ``name`` imports (any import statement anywhere in the file)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            # ``from pkg import mod`` imports the module pkg.mod; ``from mod import name`` the module.
            targets = [f"{module}.{alias.name}" for alias in node.names] or [module]
            targets = [t if t in modules else module for t in targets]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def layer_list(text: str) -> list[list[str]]:
    """The numbered list under DESIGN.md's "## Layers" heading: each line's units, bottom first."""
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    return [re.findall(r"`([\w.]+)`", line) for line in section.splitlines() if re.match(r"^\d+\. ", line)]


def unit_of(module: str, units: set[str]) -> str | None:
    """The longest listed unit that is ``module`` or a package holding it."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        candidate = ".".join(parts[:n])
        if candidate in units:
            return candidate
    return None


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _graph() -> dict[str, set[str]]:
    modules = product_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def test_every_module_has_a_layer() -> None:
    units = {u for line in layer_list(DESIGN.read_text(encoding="utf-8")) for u in line}
    missing = sorted(m for m in product_modules() if unit_of(m, units) is None)
    assert not missing, f"modules in no layer of DESIGN.md's 'Layers': {missing}"


def test_imports_only_go_down() -> None:
    layers = layer_list(DESIGN.read_text(encoding="utf-8"))
    rank = {unit: i for i, line in enumerate(layers) for unit in line}
    upward: dict[str, list[str]] = defaultdict(list)
    for module, targets in _graph().items():
        mine = unit_of(module, set(rank))
        for target in targets:
            theirs = unit_of(target, set(rank))
            if mine is None or theirs is None or mine == theirs:
                continue
            if rank[theirs] >= rank[mine]:
                upward[f"{mine} (layer {rank[mine] + 1})"].append(f"{module} -> {target} (layer {rank[theirs] + 1})")
    assert not upward, "imports that do not go down a layer:\n" + "\n".join(
        f"  {unit}: {line}" for unit, lines in sorted(upward.items()) for line in sorted(lines)
    )


def test_no_import_cycles() -> None:
    assert cycles(_graph()) == []


def test_the_checks_see_what_they_guard(tmp_path: Path) -> None:
    """The parser finds relative, function-level and TYPE_CHECKING imports, and a cycle."""
    pkg = tmp_path / "curaflow" / "low"
    pkg.mkdir(parents=True)
    (tmp_path / "curaflow" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from curaflow.high import b\n"
        "def f():\n    from . import c\n"
    )
    (pkg / "c.py").write_text("from curaflow.low.a import f\n")
    (tmp_path / "worker.py").write_text("")
    (tmp_path / "curaflow" / "high").mkdir()
    (tmp_path / "curaflow" / "high" / "__init__.py").write_text("")
    (tmp_path / "curaflow" / "high" / "b.py").write_text("")
    modules = product_modules(tmp_path)
    graph = {n: imports_of(n, p, modules) for n, p in modules.items()}
    assert graph["curaflow.low.a"] == {"curaflow.high.b", "curaflow.low.c"}
    assert cycles(graph) == [["curaflow.low.a", "curaflow.low.c"]]
    assert layer_list("x\n## Layers\n\n1. `a`, `b`\n2. `c`\n\n## Next\n3. `d`\n") == [["a", "b"], ["c"]]

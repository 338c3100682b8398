"""The source seam holds: what is Pixiv's lives in ``curaflow/sources/pixiv/``, the rest names nothing of it.

* The source steps (``search``, ``fetch``, ``acquire``, the end of a cell that bound
  nothing) know a source only through the ``Source`` protocol: they name no Pixiv word or
  rule — no fingerprint, settle days, offsets, date windows, ugoira.
* The generic modules (the protocol, registry, paging, guard, errors, filters, gate,
  animation, decoding, the ledger's frontier store, the domain's ``Work``, every
  activity) import nothing of ``curaflow.sources.pixiv``, define no name of Pixiv's and
  do not describe a generic thing as Pixiv's ("a Pixiv account", "a Pixiv
  illustration", ``UgoiraMetadata``).
* Pixiv's scan frontier is Pixiv's: ``curaflow/sources/frontier.py`` is gone.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: The source steps of a job.
SOURCE_STEPS = ["activities/search.py", "activities/fetch.py", "activities/acquire.py", "activities/unbound.py"]
#: Words and rules only Pixiv's modules may name (case-insensitive).
PIXIV_ONLY = re.compile(
    r"pixiv|ugoira|illust\b|fingerprint|settle|offset|end_date|start_date|app-api|sources\.frontier|\bfr\.",
    re.IGNORECASE,
)

GENERIC = [
    *(
        f"curaflow/sources/{name}.py"
        for name in ("base", "registry", "paging", "guard", "errors", "filters", "gate", "animation", "decoding")
    ),
    "curaflow/ledger/frontiers.py",
    "curaflow/domain/models.py",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "activities").rglob("*.py")),
]
#: A generic thing described as Pixiv's.
PIXIV_PHRASES = re.compile(r"\ba pixiv (account|illustration)|\bpixiv accounts? or|ugoirametadata", re.IGNORECASE)
#: Names a generic module may not define or use.
PIXIV_NAME = re.compile(r"pixiv|ugoira", re.IGNORECASE)


@pytest.mark.parametrize("path", SOURCE_STEPS)
def test_the_source_steps_name_nothing_of_pixiv(path: str) -> None:
    text = (ROOT / path).read_text()
    found = sorted({m.group(0).lower() for m in PIXIV_ONLY.finditer(text)})
    assert not found, f"{path} names what is Pixiv's: {found}"


def _names(tree: ast.AST) -> set[str]:
    """Every name a module defines, assigns, passes or reads (not its strings)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg) or (isinstance(node, ast.keyword) and node.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name)
    return names


def _imports(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


@pytest.mark.parametrize("path", GENERIC)
def test_a_generic_module_imports_defines_and_describes_nothing_as_pixivs(path: str) -> None:
    text = (ROOT / path).read_text()
    tree = ast.parse(text)
    imported = sorted(
        m for m in _imports(tree) if m.startswith(("curaflow.sources.pixiv", "curaflow.sources.frontier"))
    )
    assert not imported, f"{path} imports Pixiv's modules: {imported}"
    named = sorted(n for n in _names(tree) if PIXIV_NAME.search(n))
    assert not named, f"{path} uses names of Pixiv's: {named}"
    phrases = sorted({m.group(0) for m in PIXIV_PHRASES.finditer(text)})
    assert not phrases, f"{path} describes a generic thing as Pixiv's: {phrases}"


def test_pixivs_scan_frontier_lives_with_pixiv() -> None:
    assert not (ROOT / "curaflow/sources/frontier.py").exists()
    assert not (ROOT / "curaflow/sources/ugoira.py").exists()
    assert (ROOT / "curaflow/sources/pixiv/frontier/__init__.py").is_file()  # a package of Pixiv's own

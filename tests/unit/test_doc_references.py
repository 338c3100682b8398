"""Every code name the docs cite resolves: a moved or renamed module fails here, not a reader.

``docs/*.md`` and ``README.md`` name owners of decisions and rules by dotted path
(``curaflow.jobs.admission.Admitter.admit``) and files by path (``curaflow/ledger/cells.py``).
Each dotted name must import (its longest module prefix) and resolve attribute by
attribute; each path must exist.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from curaflow.moved import MOVED_MODULES, MOVED_NAMES

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
DOTTED = re.compile(r"`((?:curaflow|workflows|activities|bench)(?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
PATH = re.compile(r"`((?:curaflow|workflows|activities|bench|tests|deploy|scripts|examples)/[\w./-]*\w)`")


#: Dotted names that are file names (``curaflow.toml``), not code.
FILE_SUFFIXES = {"toml", "py", "md", "json", "yml", "yaml", "env", "sql", "txt", "log", "pem", "key"}


def resolves(name: str) -> bool:
    parts = name.split(".")
    if parts[-1] in FILE_SUFFIXES:
        return True
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(target, attr):
                return False
            target = getattr(target, attr)
        return True
    return False


def moved(name: str) -> bool:
    """A former import path (it still resolves, through :mod:`curaflow.moved`, with a warning)."""
    if any(name == old or name.startswith(old + ".") for old in MOVED_MODULES):
        return True
    package, _, attr = name.rpartition(".")
    return attr in MOVED_NAMES.get(package, {})


def moved_table() -> str:
    """The one place the docs cite former paths: the "Moved paths" table of docs/http-api.md."""
    text = (ROOT / "docs" / "http-api.md").read_text()
    return text[text.index("**Moved paths**") :].split("\n## ", 1)[0]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_dotted_name_resolves(doc: Path) -> None:
    text = doc.read_text()
    if doc.name == "http-api.md":
        text = text.replace(moved_table(), "")
    names = sorted(set(DOTTED.findall(text)))
    broken = [name for name in names if moved(name) or not resolves(name)]
    assert not broken, f"{doc.name} cites names that do not resolve (or only by a former path): {broken}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_cited_path_exists(doc: Path) -> None:
    paths = sorted(set(PATH.findall(doc.read_text())))
    # a file the user makes from a shipped example (deploy/routes.env from routes.env.example) counts
    gone = [p for p in paths if not (ROOT / p).exists() and not (ROOT / f"{p}.example").exists()]
    assert not gone, f"{doc.name} cites paths that do not exist: {gone}"

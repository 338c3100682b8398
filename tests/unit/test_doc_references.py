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


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_dotted_name_resolves(doc: Path) -> None:
    names = sorted(set(DOTTED.findall(doc.read_text())))
    broken = [name for name in names if not resolves(name)]
    assert not broken, f"{doc.name} cites names that do not resolve: {broken}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_cited_path_exists(doc: Path) -> None:
    paths = sorted(set(PATH.findall(doc.read_text())))
    # a file the user makes from a shipped example (deploy/routes.env from routes.env.example) counts
    gone = [p for p in paths if not (ROOT / p).exists() and not (ROOT / f"{p}.example").exists()]
    assert not gone, f"{doc.name} cites paths that do not exist: {gone}"

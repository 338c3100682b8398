"""docs/DESIGN.md's layout names every module of the tree, and nothing that is gone.

The layout section is where a maintainer looks for "where does X live"; a module it does
not name, or a name it keeps after a move, sends them to the wrong place. Each product
module (``curaflow/``, ``workflows/``, ``activities/``, ``bench/``) must be named in the
layout block by its file stem, on the lines of its own package; each ``name.py`` the
block mentions must exist.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("curaflow", "workflows", "activities", "bench")


def layout_block() -> list[str]:
    text = (ROOT / "docs" / "DESIGN.md").read_text()
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```", 2)[1].splitlines()


def package_lines(lines: list[str]) -> dict[str, str]:
    """The layout's text for each package folder: its line and its continuation lines.

    A folder line is ``  name/  …`` at some indent; the folder's text runs until the next
    line at the same or a smaller indent that starts a new entry.
    """
    texts: dict[str, str] = {}
    stack: list[tuple[int, str]] = []  # (indent, folder path)
    for line in lines:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        first = line.strip().split()[0]
        starts_entry = indent < 20  # continuation lines are indented past the names' column
        if starts_entry:
            while stack and stack[-1][0] >= indent:
                stack.pop()
            if first.endswith("/"):
                parent = stack[-1][1] if stack else ""
                stack.append((indent, parent + first))
        where = stack[-1][1] if stack else ""
        texts[where] = texts.get(where, "") + " " + line
    return texts


def modules() -> list[Path]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name == "__init__.py" or "results" in path.parts:
                continue
            found.append(path.relative_to(ROOT))
    return found


def test_every_module_is_named_in_its_package_lines() -> None:
    texts = package_lines(layout_block())
    missing = []
    for module in modules():
        folder = "/".join(module.parts[:-1]) + "/"
        # the nearest folder the layout describes (a subpackage may be described by its parent)
        parts = list(module.parts[:-1])
        while parts and "/".join(parts) + "/" not in texts:
            parts.pop()
        text = texts.get("/".join(parts) + "/", "")
        stem = module.stem
        if not re.search(rf"(?<![\w]){re.escape(stem)}(?![\w])", text):
            missing.append(f"{module} (looked in {folder})")
    assert not missing, "modules the layout in docs/DESIGN.md does not name:\n" + "\n".join(missing)


def test_every_file_the_layout_names_exists() -> None:
    texts = package_lines(layout_block())
    gone = []
    for folder, text in texts.items():
        for name in re.findall(r"(?<![\w./])([a-z_0-9]+\.py)\b", text):
            candidates = [ROOT / name, *(ROOT / p / name for p in ("", folder, "curaflow/" + folder))]
            if not any(c.exists() for c in candidates):
                gone.append(f"{name} (under {folder or 'the root'})")
    assert not gone, "files the layout in docs/DESIGN.md names that do not exist:\n" + "\n".join(gone)

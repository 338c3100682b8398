"""Every link to a section of a document (``file.md#anchor``, ``#anchor``) names a heading
that exists (GitHub's anchors: lower case, punctuation dropped, spaces to hyphens)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]*?)#([^)\s]+)\)")


def anchors(path: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings (outside code fences)."""
    out: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        match = None if fenced else re.match(r"#{1,6} (.+)", line)
        if match:
            slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_every_section_link_names_a_heading() -> None:
    broken = []
    for doc in DOCS:
        for target, anchor in LINK.findall(doc.read_text()):
            if target.startswith(("http://", "https://")):
                continue
            path = (doc.parent / target).resolve() if target else doc
            if path.suffix != ".md" or not path.exists():
                continue
            if anchor not in anchors(path):
                broken.append(f"{doc.relative_to(ROOT)}: {target}#{anchor}")
    assert not broken, "links to sections that do not exist:\n" + "\n".join(broken)

"""A rule of every source names the setting every source has, not Pixiv's spelling of it.

``unavailable_ttl_ms``, ``unrecognised_hold_ms``, ``max_examined`` … are settings of every
source instance (:class:`curaflow.sources.base.SourceConfig`: ``[pixiv]`` /
``[pixiv.accounts.<name>]`` for a Pixiv account, ``[sources.<name>]`` for any other kind).
Text outside Pixiv's own modules that cites ``pixiv.<setting>`` for a rule every source
follows sent the operator of a ``[sources.<name>]`` instance to a section that does not
configure it (until 2026-12-07: the unavailable works' memory, the cell's tally, the
artifact store, the fallback's bound). Such text names the generic form (the account's
``unrecognised_hold_ms``), or both (``pixiv.unrecognised_hold_ms``, or
``sources.<name>.unrecognised_hold_ms``) in the same string.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

from curaflow.sources.base import SourceConfig
from tests.unit.test_layers import ROOT, product_modules

#: Modules that are Pixiv's own (its source, its login command, the bench that drives its
#: replay): there ``pixiv.<setting>`` is the setting meant.
PIXIV_OWN = ("curaflow/sources/pixiv/", "curaflow/cli/pixiv.py", "bench/")

#: The settings every source instance has (``kind`` is no setting a rule cites).
EVERY_SOURCES = sorted(set(SourceConfig.model_fields) - {"kind"})

_CITED = re.compile(r"pixiv\.(" + "|".join(EVERY_SOURCES) + r")\b")


def texts(path: Path) -> list[tuple[int, str]]:
    """The docstrings, string literals and comments of ``path``, with their first line."""
    source = path.read_text(encoding="utf-8")
    return [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type in (tokenize.STRING, tokenize.COMMENT) or token.type == getattr(tokenize, "FSTRING_MIDDLE", -1)
    ]


def test_text_outside_pixivs_own_modules_names_every_sources_setting() -> None:
    assert {"unavailable_ttl_ms", "unrecognised_hold_ms", "max_examined"} <= set(EVERY_SOURCES)
    found = []
    for path in product_modules().values():
        where = path.relative_to(ROOT).as_posix()
        if where.startswith(PIXIV_OWN):
            continue
        for line, text in texts(path):
            for cited in _CITED.finditer(text):
                if f"sources.<name>.{cited.group(1)}" not in text:
                    found.append(f"{where}:{line + text[: cited.start()].count(chr(10))}: {cited.group(0)}")
    assert not found, found

"""Which source kinds a text says something happened at (a report never says more than
what happened: a text about any source instance names no kind but as a case)."""

from __future__ import annotations

import re


def kinds_said(text: str, kinds: set[str]) -> set[str]:
    """The source kinds ``text`` says something happened at: a kind's name as a word, once
    what only names a case is set aside — a setting (``pixiv.min_interval_ms``), a variable
    (``PIXIV_REFRESH_TOKEN``), a command (``curaflow pixiv login``), a case named as one
    ("for a Pixiv account", "（Pixiv：登录 pixiv.net 查看通知）")."""
    said: set[str] = set()
    for kind in kinds:
        word = re.escape(kind)
        rest = re.sub(rf"\b{word}\.[\w.<>-]+|\b{word.upper()}_[A-Z_]+\b|\bcuraflow {word} \w+", " ", text)
        rest = re.sub(rf"\bfor\s+an?\s+{word}\s+account\b", " ", rest, flags=re.IGNORECASE)
        rest = re.sub(rf"（{word}[^：）]*：[^）]*）", " ", rest, flags=re.IGNORECASE)
        if re.search(rf"(?<![A-Za-z]){word}(?![A-Za-z])", rest, flags=re.IGNORECASE):
            said.add(kind)
    return said

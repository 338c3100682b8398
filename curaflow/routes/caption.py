"""The text that goes with a delivered work on chat routes (Telegram caption, Discord content).

Layout, one item per line::

    <title>
    by <author>
    https://www.pixiv.net/artworks/<id>        (" (2/3)" on later parts of a split work)
    #tag #tag …                                 (first part only)

Truncation policy, applied until the text fits the route's limit (Telegram 1024,
Discord 2000; a route may configure less):

1. the work's URL line is never cut: it carries the Pixiv id, the key a human or a bot
   uses to reconcile a delivery whose outcome was unknown;
2. hashtags are added whole, in order, only while they fit (tags that do not fit are
   dropped, never cut);
3. the title, then the author line, are shortened with a trailing ``…``;
4. only if the URL line alone is longer than the limit is it cut too.

Length is measured by the route: Telegram counts UTF-16 code units (:func:`utf16_len`),
Discord characters.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from curaflow.domain.models import Work

ELLIPSIS = "…"
Measure = Callable[[str], int]
_NOT_HASHTAG = re.compile(r"[^\w]+", re.UNICODE)


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units (how Telegram counts caption characters)."""
    return len(text.encode("utf-16-le")) // 2


def cut(text: str, budget: int, measure: Measure = len) -> str:
    """``text`` shortened to at most ``budget`` (by ``measure``), ending in ``…`` when cut."""
    if measure(text) <= budget:
        return text
    if budget <= 0:
        return ""
    if budget < measure(ELLIPSIS):
        return ""
    room = budget - measure(ELLIPSIS)
    out = []
    used = 0
    for ch in text:
        size = measure(ch)
        if used + size > room:
            break
        out.append(ch)
        used += size
    return "".join(out).rstrip() + ELLIPSIS


def hashtag(tag: str) -> str:
    """A tag as a hashtag: characters that would end a hashtag become ``_``."""
    body = _NOT_HASHTAG.sub("_", tag.strip()).strip("_")
    return f"#{body}" if body else ""


def build_caption(work: Work, limit: int, *, measure: Measure = len, part: tuple[int, int] | None = None) -> str:
    """The caption of ``work`` within ``limit`` (see the module doc for layout and policy).

    Args:
        work: the delivered work.
        limit: most units allowed (as counted by ``measure``).
        measure: ``len`` (characters) or :func:`utf16_len`.
        part: ``(index, count)`` (1-based) when the work goes as several messages.

    Returns:
        The caption; ``measure(result) <= limit`` always holds.
    """
    index, count = part or (1, 1)
    url_line = work.url + (f" ({index}/{count})" if count > 1 else "")
    if measure(url_line) >= limit:
        return cut(url_line, limit, measure)
    budget = limit - measure(url_line)
    head: list[str] = []
    wanted = [work.title.strip(), f"by {work.author}" if work.author else ""]
    # Reserve the head lines first (title may be shortened), then spend the rest on tags.
    for text in wanted:
        if not text or budget <= 1:
            continue
        line = cut(text, budget - 1, measure)
        if line:
            head.append(line)
            budget -= measure(line) + 1
    tags: list[str] = []
    if index == 1:
        for tag in work.tags:
            tag_text = hashtag(tag)
            if tag_text and tag_text not in tags and measure(tag_text) + 1 <= budget:
                tags.append(tag_text)
                budget -= measure(tag_text) + 1
    lines = [*head, url_line]
    if tags:
        lines.append(" ".join(tags))
    return "\n".join(lines)

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
Discord code points (``len``). Why (2026-12-06): Discord's API is Python 3 and counts a
``content``'s code points (a Discord engineer in discord-api-docs #1315; serenity's
``MESSAGE_CODE_LIMIT`` says the same), which ``len`` counts — an emoji of the astral plane
is one, each combining mark one; a grapheme count would be lower, never higher. The Bot
API counts a caption "after entities parsing" (curaflow sends no ``parse_mode``: the text
as sent); whether its unit is the UTF-16 unit of its entity offsets or the code point
(a live probe of ``sendMessage`` accepted 4 096 astral emoji, 8 192 units), UTF-16 is
the larger of the two counts, so a caption within it is within Telegram's either way.

Text from the source (title, author, tags) never steers how the caption is shown:
bidirectional controls (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C: a title
that reverses the URL after it) are removed on every route (:func:`strip_bidi`), and a
route that renders Markdown passes ``escape`` — Discord's :func:`escape_markdown`, so a
title's ``**``, ``||spoiler||``, ``# heading``, ``[masked](link)``, ``<@mention>`` or
``https://`` is shown as written, never formatted or linked. The URL line is curaflow's
own and is never escaped. Length limits count the escaped text.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from curaflow.domain.models import Work

ELLIPSIS = "…"
Measure = Callable[[str], int]
Escape = Callable[[str], str]
_NOT_HASHTAG = re.compile(r"[^\w]+", re.UNICODE)
#: Bidirectional formatting characters (Unicode UAX #9): embeddings, overrides, isolates, marks.
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
#: Characters Discord's Markdown gives a meaning: emphasis, code, spoilers, quotes,
#: headings, lists, masked links, mentions / emoji / timestamps (``<…>``), link schemes.
_MARKDOWN = re.compile(r"([\\*_~`|>#\-\[\]()<:])")


def strip_bidi(text: str) -> str:
    """``text`` without bidirectional formatting characters (see the module doc)."""
    return _BIDI.sub("", text)


def escape_markdown(text: str) -> str:
    """``text`` with every character Discord's Markdown gives a meaning backslash-escaped
    (shown as written: ``**bold**`` → ``\\*\\*bold\\*\\*``)."""
    return _MARKDOWN.sub(r"\\\1", text)


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


def build_caption(
    work: Work,
    limit: int,
    *,
    measure: Measure = len,
    part: tuple[int, int] | None = None,
    escape: Escape | None = None,
) -> str:
    """The caption of ``work`` within ``limit`` (see the module doc for layout and policy).

    Args:
        work: the delivered work.
        limit: most units allowed (as counted by ``measure``).
        measure: ``len`` (characters) or :func:`utf16_len`.
        part: ``(index, count)`` (1-based) when the work goes as several messages.
        escape: how the route escapes source text for its renderer (Discord:
            :func:`escape_markdown`), character by character; None: shown as plain text.

    Returns:
        The caption; ``measure(result) <= limit`` always holds.
    """
    shown: Escape = escape or (lambda text: text)

    def size(text: str) -> int:
        return measure(shown(text))

    index, count = part or (1, 1)
    url_line = work.url + (f" ({index}/{count})" if count > 1 else "")
    if measure(url_line) >= limit:
        return cut(url_line, limit, measure)
    budget = limit - measure(url_line)
    head: list[str] = []
    author = strip_bidi(work.author or "").strip()
    wanted = [strip_bidi(work.title).strip(), f"by {author}" if author else ""]
    # Reserve the head lines first (title may be shortened), then spend the rest on tags.
    # A title or author line of several lines is one line of the caption.
    for text in (" ".join(w.split()) for w in wanted):
        if not text or budget <= 1:
            continue
        line = cut(text, budget - 1, size)
        if line:
            head.append(shown(line))
            budget -= size(line) + 1
    tags: list[str] = []
    if index == 1:
        for tag in work.tags:
            tag_text = hashtag(strip_bidi(tag))
            if tag_text and shown(tag_text) not in tags and size(tag_text) + 1 <= budget:
                tags.append(shown(tag_text))
                budget -= size(tag_text) + 1
    lines = [*head, url_line]
    if tags:
        lines.append(" ".join(tags))
    return "\n".join(lines)

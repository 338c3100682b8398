"""How the Temporal UI shows a text it renders as markdown, for tests of what curaflow puts there.

The UI (2.54.1) renders an execution's static summary, static details and current details
as markdown in a frame of its own: a link there is live, an image is fetched by the
operator's browser, raw HTML is rendered, and a URL in the text (``http://``, ``https://``,
``ftp://``, any case) becomes a link of its own. CommonMark (markdown-it, HTML allowed — as
the UI allows it) with those URLs linked (:class:`SchemeLinks`) stands for that renderer
here; ``tests/ui/test_temporal_ui.py`` drives the UI itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html import unescape
from types import SimpleNamespace

from markdown_it import MarkdownIt


class SchemeLinks:
    """The URLs the UI's renderer links in text, for markdown-it's ``linkify`` inline rule:
    ``http``, ``https`` and ``ftp`` URLs, any case (probed on UI 2.54.1; ``www.`` and bare
    e-mail addresses stay text). An escaped colon (``http\\://``) is no URL there, nor here:
    the escape rule takes it first."""

    _URL = re.compile(r"(?:https?|ftp)://[^\s<]*", re.IGNORECASE)

    def match_at_start(self, text: str) -> SimpleNamespace | None:
        found = self._URL.match(text)
        return SimpleNamespace(url=found.group()) if found else None


MD = MarkdownIt("commonmark", {"linkify": True})
MD.linkify = SchemeLinks()
MD.inline.ruler.enable("linkify")
#: The same, its escapes kept apart from the text (``text_special`` tokens) to find a ``$``
#: the UI would read as math (``$5 and $6`` is an inline formula there; ``\\$`` is text).
TOKENS = MarkdownIt("commonmark")
TOKENS.core.ruler.disable("text_join")

#: Text a consumer (a Task's key, tags, target, correlation id) or a third party (a work's
#: title, a receiver's answer) may hold, each a markup of its own were it read as markdown:
#: a live link, an image the browser fetches (from inside the operator's network), raw
#: HTML, a heading, emphasis, a code span running on, a line of its own.
HOSTILE = (
    "[click](http://evil.test/x)",
    "see HTTPS://evil.test/y and mailto:a@evil.test",
    "$5 and $6",
    "![x](http://127.0.0.1:1/internal.png)",
    "<img src=http://127.0.0.1:1/raw.png>",
    "# heading",
    "**bold** _em_ `tick",
    "<b>html</b> &amp;",
    "a\n\n- forged: line",
)


@dataclass(frozen=True)
class Shown:
    """What CommonMark makes of a markdown text.

    Attributes:
        tags: the names of the HTML elements it renders (``p``, ``strong``, ``a`` …).
        text: the visible text (elements removed, entities decoded).
        codes: the text of each code span.
    """

    tags: frozenset[str]
    text: str
    codes: list[str]


def _math(markdown: str) -> bool:
    """Whether ``markdown`` holds a ``$`` outside code and escapes (the UI's math delimiter)."""
    for block in TOKENS.parse(markdown):
        for token in block.children or []:
            if token.type == "text" and "$" in token.content:
                return True
    return False


def shown(markdown: str) -> Shown:
    """How ``markdown`` shows (:class:`Shown`); ``tags`` holds ``math`` when the UI would
    render a formula."""
    html = MD.render(markdown)
    return Shown(
        tags=frozenset(re.findall(r"<([a-zA-Z][a-zA-Z0-9]*)", html)) | ({"math"} if _math(markdown) else set()),
        text=unescape(re.sub(r"<[^>]+>", "", html)),
        codes=[unescape(code) for code in re.findall(r"<code>(.*?)</code>", html, re.S)],
    )


def as_one_line(value: str) -> str:
    """``value`` as a line of markdown text shows it: its line breaks a space each."""
    return re.sub(r"\s*\n\s*", " ", value).strip()

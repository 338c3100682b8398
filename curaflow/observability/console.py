"""What a process prints to a terminal: a console that reads no markup and writes no secret
the process holds (the commands', the benchmark's and the chaos suite's), and the plain
lines a command prints beside it (``--json``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.protocol import rich_cast
from rich.segment import Segment
from rich.text import Span, Text

from curaflow.observability.secrets import MASK, held_spans, masked_spans, redacted, redacted_texts


def masked_text(text: Text) -> Text:
    """``text`` with every secret the process holds replaced by :data:`MASK`
    (:func:`~curaflow.observability.secrets.held_spans`), its styles kept: a style that
    covers any part of a secret covers its mask. ``text`` itself when it holds none."""
    plain = text.plain
    secrets = held_spans(plain)
    if not secrets:
        return text

    def moved(offset: int, *, end: bool) -> int:
        shift = 0
        for start, stop in secrets:
            if stop <= offset:
                shift += stop - start - len(MASK)
            elif start < offset:  # inside a secret: the mask's start, or its end
                return start - shift + (len(MASK) if end else 0)
            else:
                break
        return offset - shift

    masked = text.blank_copy(masked_spans(plain, secrets))
    moved_spans = [Span(moved(span.start, end=False), moved(span.end, end=True), span.style) for span in text.spans]
    masked.spans = [span for span in moved_spans if span.end > span.start]
    return masked


class MaskedConsole(Console):
    """A :class:`rich.console.Console` that renders every text — a string, a
    :class:`rich.text.Text`, a table's cell and title, a live display's line — with the
    secrets the process holds masked *before* it is laid out: a table or a line folds a
    word wider than its column into pieces, none of them the secret the mask knows
    (:func:`masked_text`)."""

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        """:meth:`rich.console.Console.render` of ``renderable`` masked: every renderable
        it holds is rendered by this method too (rich's recursion, a cell's padding)."""
        renderable = rich_cast(renderable)
        if isinstance(renderable, str):
            renderable = redacted(renderable)
        elif isinstance(renderable, Text):
            renderable = masked_text(renderable)
        return super().render(renderable, options)


def text_console(**options: Any) -> Console:
    """A console that prints every string **as text, never as rich markup**, and **with
    every secret the process holds masked** — the one way the ``curaflow`` commands (and
    ``bench``, ``chaos``) make a console.

    What a command prints is mostly not its own words: a receiver's or a source's answer
    (``refusals list``'s answer, ``unavailable list``'s why, a pause reason), a route's,
    an account's or a plan's name from the configuration, a job id or key a consumer chose,
    a path, an exception's text. Read as markup, their square brackets were style tags:
    ``HTTP 400: [b]bad[/b] tag`` was printed ``HTTP 400: bad tag``, ``[link=…]y`` as ``y``,
    and a ``[/]`` ended the command with a ``MarkupError`` — a report saying less than what
    happened, or nothing (until 2026-12-07, a newcomer's finding). Markup is off for every
    string it prints — lines, table cells and titles — and so are emoji codes (``:x:`` of
    an answer would be a cross mark); curaflow's own emphasis is a ``style=`` or a
    :class:`rich.text.Text` (``options``: :class:`rich.console.Console`'s; ``markup`` and
    ``emoji`` cannot be turned back on).

    A library's words quote what it was given — a ``DATABASE_URL`` with its password, the
    Telegram Bot API URL with the bot's token, a webhook URL with its token — and a
    command's error line quotes them: every text is masked as the log lines are
    (:class:`MaskedConsole`, :mod:`curaflow.observability.secrets`; until 2026-12-07 a
    command printed them whole, ``tests/unit/test_cli_secrets_masked.py``, failed first).
    """
    return MaskedConsole(**{**options, "markup": False, "emoji": False})


def print_text(text: str, *, err: bool = False, end: str = "\n", flush: bool = False) -> None:
    """Print ``text`` as it is — no console, no wrapping, no colour — with every secret the
    process holds masked (:func:`~curaflow.observability.secrets.redacted`): the one way a
    command prints a plain line (a prompt, an exit message, a traceback).

    A JSON is :func:`print_json`'s: masked as text, a secret's characters may stand across
    one of its escapes, and the mask would leave no JSON.

    Args:
        text: the line, without its end.
        err: on stderr rather than stdout.
        end: what follows it (``""`` for a prompt).
        flush: flush the stream after it (a prompt, a line a reader waits for).
    """
    print(redacted(text), end=end, file=sys.stderr if err else sys.stdout, flush=flush)


def print_json(value: Any, *, flush: bool = False, **dumps_options: Any) -> None:
    """Print ``value`` as JSON on stdout, every text in it masked *before* it is written
    (:func:`~curaflow.observability.secrets.redacted_texts`: the line stays JSON whatever a
    secret's characters, numbers as they are) — the one way a command prints ``--json``
    (rows, a job's body, its events, ``run``'s outcome).

    Args:
        value: what ``json.dumps`` takes (a mapping, a list, strings, numbers …).
        flush: flush stdout after it (an event a reader waits for).
        dumps_options: ``json.dumps``'s (``indent``, ``ensure_ascii``, ``separators``).
    """
    print(json.dumps(redacted_texts(value), **dumps_options), flush=flush)

"""What a process prints to a terminal: a console that reads no markup (the commands', the
benchmark's and the chaos suite's)."""

from __future__ import annotations

from typing import Any

from rich.console import Console


def text_console(**options: Any) -> Console:
    """A console that prints every string **as text, never as rich markup** — the one way
    the ``curaflow`` commands (and ``bench``, ``chaos``) make a console.

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
    ``emoji`` cannot be turned back on)."""
    return Console(**{**options, "markup": False, "emoji": False})

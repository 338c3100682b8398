"""Cleaning text that comes from third parties (issue 12, item 4).

Every string a source or a destination hands us — titles, captions, tags, user names,
error texts, remote ids — may carry characters that cannot be stored or sent: a NUL
(PostgreSQL refuses it in ``text`` and ``jsonb``), a lone UTF-16 surrogate (a broken
emoji arrives as a lone ``\\ud83d`` JSON escape and decodes to a code point no UTF-8
encoder accepts: asyncpg raises ``DataError``, Temporal cannot serialise it), or control
characters (terminal escapes in a title). :func:`clean_text` removes or replaces them;
:func:`clean_json` applies it to every string and key of a parsed JSON document.

Rules: a surrogate code point (U+D800–U+DFFF; in a Python ``str`` decoded from JSON it is
always unpaired, since valid pairs decode to one astral code point) becomes U+FFFD, the
Unicode replacement character; NUL, the other C0 controls except TAB, LF and CR, DEL and
the C1 controls (U+0080–U+009F) are removed. Everything else is kept as is.

Pure module: imported by workflows through the sandbox pass-through.
"""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def clean_text(value: str) -> str:
    """``value`` without NUL and control characters, lone surrogates replaced by U+FFFD.

    The result always encodes as UTF-8 and is accepted by PostgreSQL ``text``/``jsonb``.
    TAB, LF and CR are kept (captions may span lines).
    """
    if not _BAD.search(value):
        return value
    return _CONTROL.sub("", _SURROGATE.sub("\ufffd", value))


def clean_json(value: Any) -> Any:
    """A copy of a parsed JSON value with :func:`clean_text` applied to every string and key.

    Numbers, booleans and None pass through unchanged.
    """
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(k) if isinstance(k, str) else k: clean_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_json(v) for v in value]
    return value


def clean_optional(value: str | None) -> str | None:
    """:func:`clean_text` for an optional string."""
    return None if value is None else clean_text(value)

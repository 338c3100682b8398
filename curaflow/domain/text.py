"""Cleaning text that comes from third parties.

Every string a source or a destination hands us — titles, captions, tags, user names,
error texts, remote ids — may carry characters that cannot be stored or sent: a NUL
(PostgreSQL refuses it in ``text`` and ``jsonb``), a lone UTF-16 surrogate (a broken
emoji arrives as a lone ``\\ud83d`` JSON escape and decodes to a code point no UTF-8
encoder accepts: asyncpg raises ``DataError``, Temporal cannot serialise it), or control
characters (terminal escapes in a title). :func:`clean_text` removes or replaces them;
:func:`clean_json` applies it to every string and key of a parsed JSON document.
:func:`markdown_text` and :func:`markdown_code` put such text into a line of markdown
(the Temporal UI's details) as text, never markup.

Rules: a surrogate code point (U+D800–U+DFFF; in a Python ``str`` decoded from JSON it is
always unpaired, since valid pairs decode to one astral code point) becomes U+FFFD, the
Unicode replacement character; NUL, the other C0 controls except TAB, LF and CR, DEL and
the C1 controls (U+0080–U+009F) are removed. Everything else is kept as is.

Pure module: imported by workflows through the sandbox pass-through.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


#: What a configured text may not hold: every C0 control (TAB, LF and CR included), DEL,
#: the C1 controls and a lone surrogate — a token, a URL, a name, a queue or a path holding
#: one cannot be sent in a header, stored, or shown as it was written.
_SETTING_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def setting_text_problem(value: str) -> str | None:
    """What is wrong with ``value`` as an operator's text setting, or None.

    A setting is never blank — an empty or whitespace-only value would silently mean
    something else (the current directory for a path, every interface for a host, the
    default for a URL) or nothing usable (a token, a chat id) — and never holds a control
    character (:data:`_SETTING_CONTROL`; a secret file's trailing newline is stripped
    before this is asked, ``curaflow.config.environment``).

    Returns:
        ``"is empty"``, ``"is only whitespace"``, ``"holds a control character (U+0000 at
        position 2)"``, or None when the text is fine.
    """
    if not value:
        return "is empty"
    if not value.strip():
        return "is only whitespace (empty)"
    found = _SETTING_CONTROL.search(value)
    if found:
        return f"holds a control character (U+{ord(found.group()):04X} at position {found.start()})"
    return None


def setting_path(value: Any) -> Any:
    """A path setting's raw value, refused when it is blank or holds a control character
    (:func:`setting_text_problem`) — ``Path("")`` is the current directory, which no
    operator means by leaving a path empty. Other values are returned unchanged for the
    field's own validation.

    Raises:
        ValueError: ``path is empty`` … (pydantic names the setting).
    """
    if isinstance(value, str):
        problem = setting_text_problem(value)
        if problem:
            raise ValueError(f"path {problem}: give a directory or file, or leave the setting out")
    return value


def clean_text(value: str) -> str:
    """``value`` without NUL and control characters, lone surrogates replaced by U+FFFD.

    The result always encodes as UTF-8 and is accepted by PostgreSQL ``text``/``jsonb``.
    TAB, LF and CR are kept (captions may span lines).
    """
    if not _BAD.search(value):
        return value
    return _CONTROL.sub("", _SURROGATE.sub("\ufffd", value))


def clipped(value: str, limit: int) -> str:
    """``value`` when it is at most ``limit`` characters, else its first ``limit - 1``
    followed by ``…`` (the marker that it was cut): at most ``limit`` characters.

    Raises:
        ValueError: ``limit`` below 1.
    """
    if limit < 1:
        raise ValueError("limit must be at least 1")
    return value if len(value) <= limit else value[: limit - 1] + "…"


def cut_mark(left_out: int) -> str:
    """What ends a text cut short: an ellipsis and how many characters were left out
    (``… (+1920 characters)``). The one shape of the mark, for what the ledger stores
    (:func:`clipped_within`) and what the command line shows (``curaflow.cli.common.clipped``).
    """
    return f"… (+{left_out} characters)"


def clipped_within(value: str, limit: int) -> str:
    """``value`` whole when it has at most ``limit`` characters; else as much of its start
    as fits in ``limit`` characters together with :func:`cut_mark` of the rest: at most
    ``limit`` characters, and a reader sees that the text was cut and by how much.

    For text kept where the bound is the store's (the ledger keeps a receiver's answer in
    2 000 characters, a why in 500): until 2026-12-07 it was cut there with no mark, and a
    report said less than what happened without saying so.

    Args:
        value: the text (a receiver's answer, a source's why, a pause reason).
        limit: the most characters of the result.

    Raises:
        ValueError: ``limit`` cannot hold the mark of the cut (a programming error: the
            bounds are constants).
    """
    if len(value) <= limit:
        return value
    # The mark is shorter the more is kept: start from the shortest mark, step back while
    # the longer mark of what is left out does not fit (at most a few steps: one per digit).
    kept = limit - len(cut_mark(len(value) - limit))
    while kept >= 0 and kept + len(cut_mark(len(value) - kept)) > limit:
        kept -= 1
    if kept < 0:
        raise ValueError(f"a limit of {limit} characters cannot hold the mark of a cut")
    return value[:kept] + cut_mark(len(value) - kept)


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


#: A JSON escape that decodes to a character :func:`clean_text` would change, surrogates
#: aside: a ``\u`` escape of a C0/C1 control, or the short escapes ``\b`` (backspace) and
#: ``\f`` (form feed) of RFC 8259 §7. An escaped backslash before ``b``, ``f`` or ``u``
#: matches too: a false alarm only costs the walk.
_RISKY_ESCAPE = re.compile(r"\\(?:[bf]|u(?:00[0-1][0-9a-fA-F]|007[fF]|00[89][0-9a-fA-F]))")
#: A ``\u`` escape of a lone surrogate: a high one not followed by a low one, or a low one
#: not preceded by a high one. Exact only where every ``\u`` is an escape, i.e. the text
#: holds no escaped backslash (``\\``), else an escaped backslash before "ud83d" would
#: look like one.
_LONE_SURROGATE_ESCAPE = re.compile(
    r"\\u[dD](?:[89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|[c-fC-F][0-9a-fA-F]{2}(?<!\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}))"
)


#: One pass for both escape checks, and for an escaped backslash (``\\``, group 1), which
#: makes the second inexact: the leftmost match decides. Every backslash before an escaped
#: one starts a genuine escape, so a risky or lone-surrogate escape found first is real
#: (the text needs its walk); an escaped backslash found first sends the text to the two
#: checks above, done the slow way. Three passes over a 130 KB search page took ~240 µs,
#: this one ~90 µs.
_ESCAPE_TO_CHECK = re.compile(
    r"\\(?:(\\)|[bf]|u(?:00[0-1][0-9a-fA-F]|007[fF]|00[89][0-9a-fA-F]"
    r"|[dD](?:[89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|[c-fC-F][0-9a-fA-F]{2}(?<!\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}))))"
)


def _surrogates_paired(text: str, value: Any) -> bool:
    """True when no string or key of ``value`` (parsed from ``text``) holds a lone surrogate.

    Valid pairs decode to one code point each, so only lone ones are left to find: by the
    escapes when the text has no escaped backslash, else by encoding the parsed value's
    JSON as UTF-8 (in C; a lone surrogate cannot be encoded).
    """
    if "\\\\" not in text:
        return _LONE_SURROGATE_ESCAPE.search(text) is None
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


#: Every ASCII digit byte as ``0``, every other byte as a space: with it, a run of 19
#: digits is one substring search in C (a regular expression took 3 ms on a search page).
_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
#: 19 digits: a JSON integer this long may lie beyond 64 bits, which orjson reads as a
#: float (the standard library keeps every digit).
_LONG_NUMBER = b"0" * 19


def parse_json(text: str) -> Any:
    """``json.loads(text)``, in C where it reads the same: orjson (a 150 KB search page in
    about 0.7 ms with this check, against 1.2 ms) unless ``text`` holds a run of 19 digits,
    and the standard library for what orjson refuses or reads otherwise — a lone surrogate
    (escaped or raw), ``NaN`` and ``Infinity``, a number out of a float's range, nesting
    over 1 024 levels. The result is the one ``json.loads`` gives (the same types, the last
    of duplicate keys).

    Raises:
        ValueError: ``text`` is not JSON (``json.JSONDecodeError``).
        RecursionError: nesting deeper than the standard library's parser recurses.
    """
    data = text.encode("utf-8", "surrogatepass")  # a raw lone surrogate: bytes orjson refuses
    if _LONG_NUMBER not in data.translate(_DIGITS_AS_ZERO):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass  # the standard library decides: it reads some of these, and words the error
    return json.loads(text)


def loads_clean(text: str) -> Any:
    """Parse a JSON document and clean it like :func:`clean_json`, skipping the walk when the
    text cannot hold a character to clean: no raw character to remove, no escape of a
    control, and surrogate escapes (if any) all paired — emoji in Pixiv's ASCII-only JSON
    must not send every page down the walk (it cost the worker ~2 ms per ranking page).

    Valid JSON holds no raw C0 control but TAB, LF and CR (``json.loads`` refuses them), so
    an ASCII text can only hold DEL raw; any other text is searched for every character
    :func:`clean_text` changes.

    Raises:
        ValueError: ``text`` is not JSON, or is nested deeper than the parser (and the
            cleaning walk) can recurse: a third party's malformed answer, never a crash.
    """
    try:
        value = parse_json(text)
        raw = ("\x7f" in text) if text.isascii() else (_BAD.search(text) is not None)
        if raw:
            return clean_json(value)
        found = _ESCAPE_TO_CHECK.search(text)
        if found is None:
            return value
        if found.group(1) is None:
            return clean_json(value)
        nothing_to_clean = _RISKY_ESCAPE.search(text) is None and _surrogates_paired(text, value)
        return value if nothing_to_clean else clean_json(value)
    except RecursionError:
        raise ValueError("JSON nested too deep") from None


#: What ends a line in some renderer or reader of a line of markdown: line feed, carriage
#: return, tab, vertical tab, form feed, NEL (U+0085), the line and paragraph separators.
_LINE_BREAKS = re.compile("[\t\n\x0b\x0c\r\x85\u2028\u2029]+")
#: Bidi embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069): they reorder the
#: rest of the line as shown, around text the line's author wrote.
_BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")
#: ASCII punctuation markdown reads inline (emphasis, code, links, images, HTML, entities,
#: tables): CommonMark §2.4 lets a backslash escape any ASCII punctuation. And what the
#: Temporal UI's renderer (2.54.1) reads beyond CommonMark: ``:`` — it links a URL in the
#: text (``http://``, ``https://``, ``ftp://``, ``mailto:``, any case), an escaped colon
#: ends that — and ``$``, a formula's delimiter (``$5 and $6``). It takes these escapes and
#: shows the character; ``@``, ``/``, ``=`` it does not take (the backslash would show).
_MARKDOWN_INLINE = re.compile(r"([\\`*_~<>&!\[\]()|#:$])")


def _one_line(value: str) -> str:
    return _BIDI_CONTROLS.sub("", _LINE_BREAKS.sub(" ", value))


def markdown_text(value: str, limit: int | None = None) -> str:
    """``value`` as literal text inside one line of markdown (the Temporal UI's details).

    Its line breaks become a space (it can start no line: no heading, bullet or quote of
    its own), bidi controls are dropped (they reorder what follows on the line), it is
    stripped and cut at ``limit`` characters, then every ASCII punctuation markdown reads
    inline is backslash-escaped (:data:`_MARKDOWN_INLINE`): it shows as written, adds no
    emphasis, code, link, image, HTML, entity, linked URL or formula, and cannot escape the
    markup around it (a trailing backslash no longer escapes a link's ``]``). The result is
    at most ``2 × limit`` characters.
    """
    text = _one_line(value).strip()
    if limit is not None:
        text = text[:limit]
    return _MARKDOWN_INLINE.sub(r"\\\1", text)


def markdown_code(value: str) -> str:
    """``value`` as one inline code span of markdown, whatever it holds (CommonMark §6.1).

    Line breaks become spaces and bidi controls are dropped (as :func:`markdown_text`); the
    fence is one backtick longer than the longest run of backticks in ``value``, and a
    space pads a value that starts or ends with a backtick, or with a space at both ends
    (CommonMark strips one such space from each end): the span shows ``value`` exactly.
    """
    text = _one_line(value)
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    both_spaces = text.startswith(" ") and text.endswith(" ") and text.strip() != ""
    pad = " " if text.startswith("`") or text.endswith("`") or both_spaces else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def clean_optional(value: str | None) -> str | None:
    """:func:`clean_text` for an optional string."""
    return None if value is None else clean_text(value)


def json_type_name(value: Any) -> str:
    """The JSON type of a decoded value, as an error message names what it received:
    ``null``, ``boolean``, ``number``, ``string``, ``array``, else the Python type's name
    (``dict`` for an object; any other type a decoder would not produce)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return type(value).__name__

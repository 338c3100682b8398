"""The idempotency key: one reading of it for every path that takes one.

Every entry that receives a key reads it through :func:`normalise_key` — admission
(``POST /jobs``, the ``admit`` activity of a Temporal client's start, ``curaflow run``,
through the ``Task`` model), the lookup ``GET /jobs?idempotency_key=``, the legacy
shim's ``requestId`` (both routes) and :func:`manual_job_id` — so a key any of them
accepts reaches its job through all of them.

The rule (DESIGN.md decision 1, as implemented):

* **Whitespace at either end is not part of the key**: it is trimmed as Python's
  ``str.strip()`` trims — every character ``str.isspace()`` calls whitespace (the Unicode
  ``White_Space`` set: U+0020, U+00A0, U+1680, U+2000–U+200A, U+2028, U+2029, U+202F,
  U+205F, U+3000 … plus the ASCII separators U+001C–U+001F). This is the set admission has
  trimmed since the first version, so every stored key is already in this form; widening
  it (U+FEFF, say) would give a stored key a second job id.
* **No Unicode normalisation (neither NFC nor NFKC).** A key is the client's opaque token,
  compared code point by code point: the JSON body, the query string and a Temporal
  payload all carry it unchanged, so a client that sends its key again reaches its job.
  NFKC would merge keys the client holds apart (``"①"`` and ``"1"``, ``"ﬁ"`` and ``"fi"``),
  answering a different request as a replay; NFC would give every stored non-NFC key a
  second spelling whose job id (``…@manual-<key lowercased>``, the workflow id, which
  cannot change) no longer matches it. So ``"é"`` (U+00E9) and ``"e\\u0301"`` are two keys,
  two jobs.
* **Case is kept**: the key is matched exactly, case-sensitively; only the job id lowercases
  it. Two keys that differ only in case would name one job: the second is refused
  (``409 idempotency_conflict``, reference §1.2). The legacy shim's ``requestId`` is a UUID,
  and a UUID is the same UUID in either case (RFC 9562 §4): :func:`same_request_id`.
* **Refused**: a key that is blank once trimmed, holds a control character (Unicode
  category ``Cc``: it could not travel in a path, so its job could not be addressed), a
  NUL or a lone surrogate (the ledger could not store it), or is longer than
  :data:`MAX_KEY_LENGTH` characters once trimmed (:func:`key_refusal`).

Pure module.
"""

from __future__ import annotations

import re
import unicodedata

#: The longest key, in characters, once trimmed (reference §1.5).
MAX_KEY_LENGTH = 200
#: A UUID in its hyphenated text form, any letter case (RFC 9562 §4).
_UUID_TEXT = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.IGNORECASE)


def normalise_key(value: str) -> str:
    """The key as curaflow stores, compares and derives job ids from: ``value`` with the
    whitespace at both ends trimmed (see the module doc); nothing else changes."""
    return value.strip()


def has_control_character(value: str) -> bool:
    """True when ``value`` holds a C0 or C1 control character (Unicode category ``Cc``:
    NUL, tab, line feed, carriage return, DEL, NEL…).

    Such a key could not address its job: the job id embeds the key, and a path
    parameter cannot carry a line break, so ``GET /jobs/{id}``, its ``events_url`` and
    its cancel would all answer 404. Keys are identifiers; a control character in one is
    a client bug, refused at admission.
    """
    return any(unicodedata.category(c) == "Cc" for c in value)


def storable(value: object) -> bool:
    """A string PostgreSQL can store and UTF-8 can encode: no NUL character, no lone
    surrogate (JSON escapes such as ``"\\ud800"`` decode to one)."""
    if not isinstance(value, str) or "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def key_refusal(key: str) -> str | None:
    """Why the normalised ``key`` cannot be an idempotency key, or None when it can.

    Returns:
        ``"blank"``, ``"control"`` (a control character, a NUL or a lone surrogate) or
        ``"length"`` (over :data:`MAX_KEY_LENGTH` characters); None for a valid key.
    """
    if not key:
        return "blank"
    if not storable(key) or has_control_character(key):
        return "control"
    if len(key) > MAX_KEY_LENGTH:
        return "length"
    return None


def manual_job_id(target_id: str, idempotency_key: str) -> str:
    """The job id of a submitted Task: ``<target_id>@manual-<key lowercased>`` (DESIGN.md
    decision 1), the key read by :func:`normalise_key` first."""
    return f"{target_id}@manual-{normalise_key(idempotency_key).lower()}"


def same_request_id(stored_key: str, request_id: str) -> bool:
    """Whether the legacy shim's ``request_id`` names the job stored under ``stored_key``:
    both are the same UUID, whatever the letter case (RFC 9562 §4: the hex digits are case
    insensitive on input). Keys that are not UUIDs in hyphenated form are compared exactly."""
    stored, asked = normalise_key(stored_key), normalise_key(request_id)
    if stored == asked:
        return True
    return bool(_UUID_TEXT.match(stored) and _UUID_TEXT.match(asked)) and stored.lower() == asked.lower()

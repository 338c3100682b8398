"""The secrets this process holds, and the one way a text loses them before it is written out.

curaflow never passes a secret to a text it writes itself (a log call, an error's words,
a stored reason). A secret still reaches such a text in words curaflow did not choose: a
library's exception quotes what it was given — httpx's ``raise_for_status`` names the
request's URL, query string included — and a route or source kind of the operator's
(``route_modules``, ``source_modules``) may let one escape, or quote its own settings.
curaflow words such a failure by its type or quotes it, and raises its own error *from*
it; the chain goes where curaflow cannot take it back: Temporal's history (an activity's
failure with each cause's message and stack trace, shown by the Temporal UI) and the log
lines (a traceback quotes every exception of its chain). Until 2026-12-07 a route kind's
token in the URL it requested reached both
(``tests/unit/test_secrets_unwritten.py``, failed first).

:func:`redacted` replaces, in a text, every value this process holds as a secret by
:data:`MASK`. The places that write out a text holding words curaflow did not choose call
it: the failure converter of :data:`curaflow.temporal.connection.DATA_CONVERTER` (every
failure this process's workers and clients hand Temporal), the log renderer
(:mod:`curaflow.observability.logs`: a JSON line's every text before it is written, a console
line whole; tracebacks included), the error
types whose words are stored and answered (``SourceError``, ``WorkUnavailable``,
``RouteError``: a source guard's quote of a source's exception is the cell's message), and
a failing loop's words (:mod:`curaflow.observability.supervision`: ``/ready``, which
anyone may ask, and the process's exit reason; :mod:`curaflow.process.readiness`), and
what a command prints (:mod:`curaflow.observability.console`: its console, its plain
lines and ``--json``, :func:`redacted_texts`; until 2026-12-07 a command's error line
quoted a library's words whole).

What is held (:func:`hold`): every secret setting of every configuration the process
loaded (``curaflow.config.load_settings``: ``Settings.secret_settings`` — the API token,
the Pixiv refresh tokens, the database password, each route's and source's ``SecretStr``),
and what a source obtains as it runs (a Pixiv access token, a rotated refresh token). A
value shorter than :data:`MIN_CHARS` is not held: it would mask the same letters in any
word and protects nothing. Each value is held as written, without the whitespace around
it, percent-decoded (a password in ``DATABASE_URL``), as a URL writes it (percent-encoded)
and as JSON writes it (escaped); a URL held as a
secret (a Discord webhook's carries its token) also by each path segment and query value
of at least :data:`URL_PART_CHARS` characters, since a library quotes the URL as it
normalised it. A URL setting that is no secret (a webhook receiver's ``url``, a Telegram
``api_url``, a source's ``url``: ``Settings.url_settings``) has those parts held, not the
whole (:func:`hold_url_parts`): its host stays in every text (until 2026-12-07 a token in
a webhook URL's query or path was written out wherever a library quoted the URL).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, unquote_plus, urlsplit

#: What stands for a secret in a text written out.
MASK = "***"
#: The shortest value held, characters: a credential is far longer (a Pixiv token ~43, a
#: Telegram bot token ~46, a Discord webhook token 68); a shorter value is a word — the
#: Pixiv replay's stand-in refresh token is ``replay``, which would mask that word in
#: every line of a replay worker.
MIN_CHARS = 8
#: The shortest part of a URL held as a secret on its own (a path segment, a query value),
#: characters: a token's length; shorter parts are words (``api``, ``webhooks``, an id).
URL_PART_CHARS = 16

_lock = threading.Lock()
#: The held forms, longest first (a URL is masked whole before its parts); replaced whole,
#: never changed in place, so a reader on another thread sees one tuple or the other.
_held: tuple[str, ...] = ()


def url_parts(url: str) -> set[str]:
    """The parts of ``url`` that may be a credential: each path segment and query value of
    at least :data:`URL_PART_CHARS` characters — as written, percent-decoded and, for a
    query value, decoded as a form (``+`` a space) — and the password of its user
    information. Empty for a text that is no URL (no ``://``, or one ``urlsplit`` refuses).
    """
    if "://" not in url:
        return set()
    try:
        parts = urlsplit(url.strip())
        password = parts.password
    except ValueError:
        return set()
    written = [pair.partition("=")[2] for pair in parts.query.split("&")]
    values = [*written, *(unquote_plus(value) for value in written), *(v for _, v in parse_qsl(parts.query))]
    pieces = {form for piece in [*parts.path.split("/"), *values] for form in (piece, unquote(piece))}
    return {piece for piece in pieces if len(piece) >= URL_PART_CHARS} | ({password} if password else set())


def _forms(value: str) -> set[str]:
    """The ways ``value`` may appear in a text."""
    forms = {value, value.strip(), unquote(value.strip())}
    forms |= {quote(form, safe="") for form in list(forms)} | {json.dumps(form)[1:-1] for form in list(forms)}
    return forms | url_parts(value)


def hold(*values: str | None) -> None:
    """Hold ``values`` as secrets of this process (``None`` and values shorter than
    :data:`MIN_CHARS` are skipped); idempotent."""
    found = {form for value in values if value for form in _forms(value) if len(form) >= MIN_CHARS}
    if not found:
        return
    global _held
    with _lock:
        if found <= set(_held):
            return
        _held = tuple(sorted(found | set(_held), key=lambda form: (-len(form), form)))


def hold_url_parts(*urls: str | None) -> None:
    """Hold the parts of each of ``urls`` that may be a credential (:func:`url_parts`), not
    the URL: a URL setting that is no secret (a webhook receiver's ``url``) keeps its host
    and its short words in every text, and loses the token a receiver put in its query or
    path (``?token=…``, Slack-like ``/services/T…/B…/<24 characters>``)."""
    hold(*(part for url in urls if url for part in url_parts(url)))


def held_spans(text: str) -> list[tuple[int, int]]:
    """Where ``text`` holds a secret this process holds: ``(start, end)`` character offsets,
    in order, none overlapping another — each held form, longest first, at each occurrence
    (left to right) that a longer one does not already cover. The one rule of what is
    masked: :func:`redacted` replaces these spans of a string, and a console keeps the
    styles around them (:func:`curaflow.observability.console.text_console`)."""
    spans: list[tuple[int, int]] = []
    for secret in _held:
        if secret not in text:
            continue
        start = text.find(secret)
        while start != -1:
            end = start + len(secret)
            if any(start < taken_end and taken_start < end for taken_start, taken_end in spans):
                start = text.find(secret, start + 1)
            else:
                spans.append((start, end))
                start = text.find(secret, end)
    return sorted(spans)


def redacted(text: str) -> str:
    """``text`` with every secret this process holds replaced by :data:`MASK`
    (:func:`held_spans`)."""
    spans = held_spans(text)
    return masked_spans(text, spans) if spans else text


def masked_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each of ``spans`` (``(start, end)`` character offsets, in order, none
    overlapping: :func:`held_spans`) replaced by :data:`MASK`."""
    pieces: list[str] = []
    position = 0
    for start, end in spans:
        pieces += [text[position:start], MASK]
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


def redacted_texts(value: Any, written: Callable[[Any], Any] = repr) -> Any:
    """``value`` — a JSON-like structure — with every text in it masked (:func:`redacted`):
    a string, the strings of a mapping (its keys too) or of a list or tuple (a list);
    a number, a boolean and None as they are (the writer's own values: counts, times,
    sizes); any other object as ``written`` gives it (``repr`` by default), masked.

    Masking each text before the JSON is written, not the JSON text, keeps it JSON: a held
    secret's characters are found where they stand in the text, never inside a number nor
    across a JSON escape (a secret beginning with ``n`` in the JSON text ``\\nQ7x…``) —
    the log lines' rule (:mod:`curaflow.observability.logs`) and ``--json``'s
    (:func:`curaflow.observability.console.print_json`)."""
    if isinstance(value, str):
        return redacted(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, dict):
        return {
            (redacted(key) if isinstance(key, str) else key): redacted_texts(item, written)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redacted_texts(item, written) for item in value]
    return redacted_texts(written(value), written)

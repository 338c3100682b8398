"""Structured logging: one JSON line per event (structlog), secrets never logged.

:func:`configure_logging` routes both structlog and the standard ``logging`` module
(Temporal's SDK, uvicorn) through one JSON renderer on stderr. Values of keys that look
like secrets (``token``, ``secret``, ``authorization``, ``password``,
``refresh_token``) are replaced by ``"***"`` before rendering, and every secret the
process holds (:mod:`curaflow.observability.secrets`: its configuration's, its sources'
tokens) is masked whatever the key — a library's record or an exception's words in a
traceback may quote one (2026-12-07): in a JSON line, in every text of the event before it
is rendered (:func:`_mask_texts`: the line stays JSON whatever the secret's characters); in
a console line, in the rendered line. A line logged with
``exc_info`` (structlog's or the standard library's) carries the exception's traceback as
text in its ``exception`` field — still one line: JSON escapes its line breaks — but a
library's line about a ledger outage, which is expected, carries no traceback: the error's
``<type>: <message>`` in ``error`` (:func:`_outage_in_one_line`). No
traceback, JSON or console, shows the values of a frame's variables (a token a variable
holds would be written out).

A line's ``event`` is exactly the message its caller wrote, so operators can match it
exactly (``event = "candidate_exhaustion"``): Temporal's ``activity.logger`` and
``workflow.logger`` are told not to append their context dict to the message; the
context stays available as the ``temporal_activity`` / ``temporal_workflow`` fields.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, MutableMapping
from typing import Any

import structlog

from curaflow.observability.secrets import redacted, redacted_texts

SECRET_KEYS = ("token", "secret", "authorization", "password", "refresh_token", "api_key")


def _redact(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
    for key in list(event):
        if any(mark in key.lower() for mark in SECRET_KEYS):
            event[key] = "***"
    return event


def _masked(renderer: Any) -> Any:
    """``renderer`` whose line holds none of the secrets this process holds
    (:func:`curaflow.observability.secrets.redacted`): a value curaflow did not write — a
    library's record, an exception's words in a traceback — may quote one, under any key.
    The console's line (text for a person, its traceback rendered by the renderer itself)."""

    def render(logger: Any, name: str, event: dict[str, Any]) -> Any:
        line = renderer(logger, name, event)
        return redacted(line) if isinstance(line, str) else line

    return render


def _written(value: Any) -> Any:
    """How the JSON renderer writes an object that is no JSON value (structlog's fallback:
    ``__structlog__`` or its ``repr``)."""
    written = getattr(value, "__structlog__", None)
    return written() if callable(written) else repr(value)


def _masked_text(value: Any) -> Any:
    """``value`` (an event's value) with every text in it masked
    (:func:`~curaflow.observability.secrets.redacted_texts`): a string, the strings of a
    mapping (its keys too) or a sequence; any other object as the JSON renderer would write
    it (:func:`_written`), masked. A number, a boolean and None are written as they are:
    curaflow's own values (counts, times, sizes)."""
    return redacted_texts(value, _written)


def _mask_texts(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
    """The event with every text masked before the JSON renderer writes it
    (:func:`_masked_text`), the traceback's (``exception``) too.

    Until 2026-12-07 the rendered JSON line was masked as text: a held secret's characters
    were replaced wherever they stood in it — a secret of digits (a weak database password)
    inside a number curaflow logged cut the number around ``***``, a secret that begins
    with a letter JSON escapes (``n``, ``t``) took that letter of an escape such as ``\\n``,
    one ending with a backslash took the backslash of a ``\\"`` — and the line was no JSON
    any more; a secret with characters beyond ASCII and a quote was held JSON-escaped as an
    ASCII-only writer writes it, not as the line did, and was not masked
    (``tests/unit/test_secrets_unwritten.py::test_a_json_log_line_stays_json_and_holds_no_held_secret_whatever_its_characters``).
    """
    return {key: _masked_text(value) for key, value in event.items()}


#: What tells an expected outage's exception (each: ``exception -> bool``), registered by
#: the layer that knows the service (:func:`outage_is`): this layer imports no ledger.
_OUTAGES: list[Callable[[BaseException], bool]] = []


def outage_is(predicate: Callable[[BaseException], bool]) -> None:
    """Register ``predicate`` as telling an expected outage's exception (the ledger registers
    :func:`curaflow.ledger.db.is_unavailable` on import: any process with a ledger pool has it):
    a library's line logged with such an exception is one line (:func:`_outage_in_one_line`)."""
    if predicate not in _OUTAGES:
        _OUTAGES.append(predicate)


def _outage_in_one_line(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """A library's line (the standard library's record) logged with the exception of a
    ledger outage: the traceback dropped, the error's ``<type>: <message>`` kept in ``error``
    on one line, as curaflow's own outage lines say it. An outage is expected (PostgreSQL
    restarting, unreachable: :func:`curaflow.ledger.db.is_unavailable` is the one
    classification, registered with :func:`outage_is`); asyncpg's pool logs "Failed to
    restore the pool connection floor; retrying" with ``exc_info`` at every retry of an
    outage, and each line carried the whole traceback (until 2026-12-08). Any other exception keeps its traceback."""
    info = event.get("exc_info")
    error: Any = info[1] if isinstance(info, tuple) and len(info) == 3 else info
    if not isinstance(error, BaseException):
        return event
    if not any(outage(error) for outage in _OUTAGES):
        return event
    del event["exc_info"]
    text = redacted(f"{type(error).__name__}: {error}")
    event.setdefault("error", " ".join(line.strip() for line in text.splitlines() if line.strip()))
    return event


_configured = False


def configure_logging(level: str = "INFO", json_lines: bool = True) -> None:
    """Configure structlog and stdlib logging once per process.

    Args:
        level: ``DEBUG`` | ``INFO`` | ``WARNING`` | ``ERROR``.
        json_lines: one JSON object per line (default); False renders for a console.
    """
    global _configured
    # A console traceback shows files, lines and code, never a frame's variables: structlog's
    # default shows them (rich's show_locals), and a token held by a variable (the Pixiv
    # client's headers) was written out by any failure logged there with exc_info. It is
    # Python's own text, never folded: rich folded a word wider than the terminal (a webhook
    # URL quoted in an exception) onto the next line, in pieces the mask of the held secrets
    # (_masked) does not know (2026-12-07).
    renderer: Any = (
        structlog.processors.JSONRenderer(ensure_ascii=False)
        if json_lines
        else structlog.dev.ConsoleRenderer(exception_formatter=structlog.dev.plain_traceback)
    )
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _redact,
    ]
    # A structlog line below the level is dropped before the chain runs (filter_by_level,
    # the level read at each line as the standard library reads it): the standard library's
    # logger dropped it only after the chain — the context, an ISO time stamp, the secrets'
    # mask — had run for it, ~16-40 µs a line: the worker's `activity.attempt_done` debug
    # line at every activity attempt (2026-12-08, docs/performance.md "Twenty-eighth
    # session"). The standard library's own records are filtered by their logger already.
    structlog.configure(
        processors=[structlog.stdlib.filter_by_level, *shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    # A JSON line renders exc_info as the traceback's text in the one field `exception`
    # (JSONRenderer alone wrote the exception's repr, or for the standard library's
    # records a tuple ending "<traceback object at 0x…>": the traceback was lost); the
    # console renderer prints the traceback itself.
    tracebacks: list[Any] = [structlog.processors.format_exc_info] if json_lines else []
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.ExtraAdder(), _outage_in_one_line],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            *tracebacks,
            *([_mask_texts, renderer] if json_lines else [_masked(renderer)]),
        ],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level.upper())
    for noisy in ("httpx", "httpcore", "asyncio"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from temporalio import activity, workflow

    activity.logger.activity_info_on_message = False  # the context goes to `temporal_activity`
    workflow.logger.workflow_info_on_message = False  # … and to `temporal_workflow`
    _configured = True


def get_logger(name: str) -> Any:
    """A structlog logger bound to ``name`` (the ``logger`` field of each line)."""
    return structlog.get_logger(name)

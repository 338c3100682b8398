"""Reading a client's JSON text: one meaning, or a refusal saying why.

One reading for every door a Task comes through: the body of ``POST /jobs`` (and of the
ack and the legacy shim: :mod:`curaflow.api.body`, after the body's label) and the JSON
payload a Temporal client starts ``JobWorkflow`` with, sends the ``admission`` update or
asks the ``admission_answer`` query with, and the input of a Nexus operation of
curaflow's service (the worker's payload converter:
:class:`curaflow.temporal.connection.InputPayloadConverter`). A text a parser could read in
more than one way, or not as the client wrote it, is refused with what was wrong
(``detail.reason``) instead of being taken in one of its readings:

* **its bytes**: not UTF-8 → ``400`` ``not_utf8`` (with the offset); a leading UTF-8 byte
  order mark is ignored (RFC 8259 §8.1 allows it);
* **its grammar**: not JSON → ``400`` ``invalid_json`` (with line and column); nested too
  deeply → ``400`` ``too_deep``;
* **its meaning**: a member name twice in one object → ``400`` ``duplicate_member``
  (parsers disagree on which one counts, RFC 8259 §4); ``NaN`` / ``Infinity`` (not JSON)
  → ``400`` ``not_json_number``; a number no double can hold (``1e400``) or an integer of
  more digits than Python reads (4300) → ``400`` ``number_out_of_range``;
* **its kind**: a JSON text that is no object where an object is asked (a Task, an ack:
  ``[]``, ``"x"``, ``3``, ``null``, ``true``) → ``400`` ``not_an_object``, with
  ``detail.received`` its JSON type (:func:`object_refusal`, the one answer of every door
  that takes an object: ``POST /jobs`` and the ack by their body, a Task that came another
  way by :func:`curaflow.protocol.task.validate_task`; 2026-12-07: it was the one body
  refusal with no ``detail.reason``, and the ack's named ``ack_through`` as if the member
  were wrong).

Every refusal is ``invalid_params`` with the message and ``detail`` ``POST /jobs`` answers.
Pure: no I/O, deterministic (a workflow's payload converter runs it on replay).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any

from curaflow.domain.text import json_type_name
from curaflow.protocol.errors import ProtocolError, invalid_params

_BOM = b"\xef\xbb\xbf"

#: What a JSON text that is no object is told (:func:`object_refusal`); a Temporal start or
#: update that is no one JSON value is told the same (``workflows.submission``).
NOT_AN_OBJECT = "request body must be a JSON object"


class AmbiguousObject(dict[str, Any]):
    """A JSON object read from a text that has no one meaning: the members a lenient
    reader took (the last of a member given twice, ``inf`` for ``1e400`` …), and
    :attr:`refusal`, what :func:`parse_json` says of the text.

    A ``dict``, so code that reads it as the lenient reader's object does what it did
    before the text was checked (a workflow replaying a history recorded then); code that
    admits a Task refuses it (:func:`ambiguity`), and so does the reading of a push run's or
    a trampoline's start (:func:`curaflow.domain.workflow_input.read_one_input`, by its
    :attr:`refusal`).
    """

    def __init__(self, members: dict[str, Any], refusal: ProtocolError) -> None:
        super().__init__(members)
        self.refusal = refusal


def ambiguity(value: Any) -> ProtocolError | None:
    """Why ``value`` (a decoded JSON value) is no one reading of what its client sent:
    :attr:`AmbiguousObject.refusal`, or None."""
    return value.refusal if isinstance(value, AmbiguousObject) else None


class _Unreadable(ValueError):
    """Raised from inside the JSON decoder's hooks: carries the refusal."""

    def __init__(self, refusal: ProtocolError) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


def refused(message: str, reason: str, *, http_status: int = 400, **detail: Any) -> ProtocolError:
    """An ``invalid_params`` refusal of a body with ``detail.reason`` ``reason`` (and ``detail``)."""
    return invalid_params(message, http_status=http_status, reason=reason, **detail)


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        name = next(key for key, count in Counter(key for key, _ in pairs).items() if count > 1)
        raise _Unreadable(
            refused(
                f"request body has the member {name!r} more than once in one object",
                "duplicate_member",
                member=name[:200],
            )
        )
    return result


def _constant(token: str) -> Any:
    raise _Unreadable(refused(f"request body holds {token}, which is not a JSON number", "not_json_number"))


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _Unreadable(_too_large(text))
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:  # more digits than sys.get_int_max_str_digits()
        raise _Unreadable(_too_large(text)) from None


def _too_large(text: str) -> ProtocolError:
    shown = text if len(text) <= 40 else f"{text[:20]}…({len(text)} characters)"
    return refused(f"request body holds the number {shown}, out of range", "number_out_of_range")


def parse_json(raw: bytes) -> Any:
    """Decode ``raw`` as one JSON text with exactly one meaning (see the module doc).

    Raises:
        ProtocolError: 400 ``invalid_params`` with ``detail.reason`` ``not_utf8``,
            ``invalid_json``, ``too_deep``, ``duplicate_member``, ``not_json_number`` or
            ``number_out_of_range``.
    """
    if raw.startswith(_BOM):
        raw = raw[len(_BOM) :]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise refused(
            f"request body is not UTF-8: byte 0x{raw[err.start]:02x} at offset {err.start}",
            "not_utf8",
            offset=err.start,
        ) from None
    try:
        return json.loads(text, object_pairs_hook=_object, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except _Unreadable as err:
        raise err.refusal from None
    except json.JSONDecodeError as err:
        raise refused(
            f"request body is not valid JSON: {err.msg} at line {err.lineno} column {err.colno}",
            "invalid_json",
            line=err.lineno,
            column=err.colno,
        ) from None
    except RecursionError:
        raise refused("request body is nested too deeply", "too_deep") from None


def json_text_refusal(raw: bytes) -> ProtocolError | None:
    """Why ``raw`` is no JSON text with one meaning (:func:`parse_json`'s refusal), or None."""
    try:
        parse_json(raw)
    except ProtocolError as err:
        return err
    return None


def object_refusal(value: Any) -> ProtocolError | None:
    """Why ``value`` (a decoded JSON value) is not the JSON object asked for, or None when it is one.

    Returns:
        None for an object (a ``dict``); else ``400`` ``invalid_params`` :data:`NOT_AN_OBJECT`
        with ``detail.reason`` ``not_an_object`` and ``detail.received`` the value's JSON type
        (``array``, ``string``, ``number``, ``boolean``, ``null``:
        :func:`curaflow.domain.text.json_type_name`).
    """
    if isinstance(value, dict):
        return None
    return refused(NOT_AN_OBJECT, "not_an_object", received=json_type_name(value))

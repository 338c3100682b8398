"""The Task's admission rules: those of reference §1.5 ("Other Task fields",
then the ``candidate_search`` params) plus curaflow's own, in the original's order:
pydantic validates fields in declaration order, so the first entry of
``ValidationError.errors()`` is the first rule the body breaks ("first failure wins";
:func:`curaflow.protocol.task.validate_task` turns it into the protocol error). Every
rule raises a :class:`~pydantic_core.PydanticCustomError` of type ``invalid_params``
with the rule's sentence; pydantic's own errors (a missing member, a wrong type) get
the sentence of their member from :data:`RULES`. Two rules have their own protocol
answer: ``unsupported_protocol_version`` and ``unsupported_job_type``.

Curaflow rules the original lacks, because the ledger must be able to store what it
admits and the API to address it: ``deadline_ms`` is at most :data:`MAX_DEADLINE_MS`
(7 days), no stored string may contain a NUL character or a lone surrogate
(:func:`curaflow.protocol.keys.storable`), and the idempotency key holds no control
character (:mod:`curaflow.protocol.keys`, the one reading of a key). Values are
normalised as the original does: keys, tags, ids and the account trimmed, an empty
``correlation_id`` dropped, ``scan_limit`` capped at :data:`MAX_SCAN_LIMIT`.

Each ``check_*`` is the before-validator of one member of
:class:`curaflow.protocol.models.tasks.Task` or its params.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel
from pydantic_core import PydanticCustomError

from curaflow.protocol.errors import SUPPORTED_PROTOCOL_VERSIONS, required_sentence, supported_job_types
from curaflow.protocol.keys import MAX_KEY_LENGTH, key_refusal, normalise_key, storable

MAX_CORRELATION_LENGTH = 200
MAX_CALLBACK_LENGTH = 2000
MIN_DEADLINE_MS = 1000
MAX_DEADLINE_MS = 7 * 24 * 3600 * 1000
MAX_TAGS = 20
MAX_TAG_LENGTH = 100
MAX_EXCLUDE = 100
MAX_EXCLUDE_ID_LENGTH = 100
MAX_ACCOUNT_LENGTH = 100
MAX_SCAN_LIMIT = 100
EXCLUDE_KINDS = ("work", "candidate", "tag")
#: What every string rule says of :func:`~curaflow.protocol.keys.storable`, so a refused
#: short string says why (2026-12-07: a 2-character correlation id holding a NUL was told
#: "at most 200 characters", a tag "a\x00" "a non-blank string"). The legacy shim's
#: ``correlationId`` says the same.
STORABLE = "without NUL or a lone surrogate"

#: The Task's required members (``$defs/Task``'s ``required``, and ``params.query.tags`` of
#: ``params.query``): absent or ``null``, each is refused "<member> is required"
#: (:func:`required_sentence`) — reference §1.5 says so of ``protocol_version``; since
#: 2026-12-07 of each (before, a Task without ``job_type`` was "unsupported job_type", and
#: a missing key, ``params`` or tags were told the rule of a value). ``params.query`` is
#: required unless ``params.target_id`` is given (its own check says so).
REQUIRED = ("protocol_version", "job_type", "idempotency_key", "params", "params.query.tags")


#: The sentence of each member's rule (``detail.field`` → message), used for pydantic's
#: own errors (a wrong type) at that member; an absent member is told
#: :func:`required_sentence` instead.
RULES: dict[str, str] = {
    "protocol_version": required_sentence("protocol_version"),
    "idempotency_key": (
        "idempotency_key must be a non-blank string without control characters (line breaks, tabs…), "
        "NUL or a lone surrogate"
    ),
    "correlation_id": f"correlation_id must be a string of at most {MAX_CORRELATION_LENGTH} characters, {STORABLE}",
    "callback_url": f"callback_url must be a string of at most {MAX_CALLBACK_LENGTH} characters, {STORABLE}",
    "deadline_ms": f"deadline_ms must be an integer from {MIN_DEADLINE_MS} to {MAX_DEADLINE_MS}",
    "labels": f"labels must be an object of string values, {STORABLE}",
    "params": "params must be an object",
    "params.target_id": f"params.target_id must be a non-blank string, {STORABLE}",
    "params.source": "params.source must be an object",
    "params.source.platform": 'params.source.platform must be "pixiv"',
    "params.source.account": (
        f"params.source.account must be a non-blank string of at most {MAX_ACCOUNT_LENGTH} characters, {STORABLE}"
    ),
    "params.query": "params.query must be an object",
    "params.query.tags": f"params.query.tags must be an array of 1-{MAX_TAGS} tags",
    "params.query.expand": "params.query.expand must be a boolean",
    "params.constraints": "params.constraints must be an object",
    "params.constraints.exclude": f"params.constraints.exclude must be an array of at most {MAX_EXCLUDE} items",
    "params.constraints.limit": "params.constraints.limit must be an integer >= 1",
    "params.constraints.scan_limit": "params.constraints.scan_limit must be an integer >= 1",
    "params.constraints.work_types": f"params.constraints.work_types must be an array of non-empty strings, {STORABLE}",
}

#: What an item of an array member is told (the predicate of its sentence; the subject is
#: the item's place, ``params.constraints.exclude[17].kind``, written by
#: :func:`curaflow.protocol.task.refusal`, with ``detail.index``). Since 2026-12-08: before,
#: every bad item of an array was told one sentence ("each exclude item needs kind …", "each
#: tag must be …") naming no item, and a consumer with a hundred items could not find it.
ITEM_RULES: dict[str, str] = {
    "params.query.tags": f"must be a non-blank string of at most {MAX_TAG_LENGTH} characters, {STORABLE}",
    "params.constraints.exclude": "must be an object with kind and id",
    "params.constraints.exclude.kind": 'must be "work", "candidate" or "tag"',
    "params.constraints.exclude.id": (
        f"must be a non-blank string of at most {MAX_EXCLUDE_ID_LENGTH} characters, {STORABLE}"
    ),
    "params.constraints.work_types": f"must be a non-empty string, {STORABLE}",
}


def _nonblank(value: Any) -> bool:
    return isinstance(value, str) and value.strip() != "" and storable(value)


def whole_number(value: Any) -> int | None:
    """``value`` as the integer it is, or None when it is no integer.

    JSON has one number type: ``6e4`` and ``60000.0`` are the integer 60000 — to the
    protocol's schema (JSON Schema's ``"type": "integer"`` is any number whose fraction
    is zero) and to the original (a JavaScript number) — though Python's decoder reads
    them as floats; they are taken as that ``int`` (2026-12-06: they were refused "must
    be an integer", a Task the published schema accepts). A bool is no integer.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def refuse(field: str, message: str | None = None) -> PydanticCustomError:
    """The ``invalid_params`` error of ``field``: ``message``, else its sentence in :data:`RULES`."""
    return PydanticCustomError("invalid_params", message or RULES[field])


def refuse_item(rule: str) -> PydanticCustomError:
    """The ``invalid_item`` error of an array item (or a member of one) whose rule is
    ``rule``, a key of :data:`ITEM_RULES`: its message is the rule's predicate, and
    :func:`curaflow.protocol.task.refusal` writes the item's place before it (pydantic's
    location holds its index; the check of one item does not know it)."""
    return PydanticCustomError("invalid_item", ITEM_RULES[rule])


def missing(field: str) -> PydanticCustomError:
    """The ``invalid_params`` error of a required member ``field`` given as ``null``
    (:data:`REQUIRED`: a ``null`` is no value, told as an absent member is)."""
    return PydanticCustomError("invalid_params", required_sentence(field))


def check_protocol_version(value: Any) -> Any:
    """The rule of ``protocol_version``: a supported version (else ``unsupported_protocol_version``)."""
    if value is None:
        raise missing("protocol_version")
    if not isinstance(value, str) or value not in SUPPORTED_PROTOCOL_VERSIONS:
        raise PydanticCustomError("unsupported_protocol_version", "unsupported protocol_version")
    return value


def check_job_type(value: Any) -> Any:
    """The rule of ``job_type``: one of the supported job types (else ``unsupported_job_type``,
    reference §1.5 step 3); ``null`` is no type: :func:`missing`."""
    if value is None:
        raise missing("job_type")
    if not isinstance(value, str) or value not in supported_job_types():
        raise PydanticCustomError("unsupported_job_type", "unsupported job_type")
    return value


def check_idempotency_key(value: Any) -> Any:
    """The rule of ``idempotency_key``: read as :mod:`curaflow.protocol.keys` reads it; normalised."""
    # The one reading of a key (curaflow.protocol.keys), shared with the lookup and the legacy shim.
    if value is None:
        raise missing("idempotency_key")
    if not isinstance(value, str):
        raise refuse("idempotency_key")
    key = normalise_key(value)
    refused = key_refusal(key)
    if refused == "length":
        raise refuse("idempotency_key", f"idempotency_key must be at most {MAX_KEY_LENGTH} characters")
    if refused is not None:
        raise refuse("idempotency_key")
    return key


def check_correlation_id(value: Any) -> Any:
    """The rule of ``correlation_id``: storable, at most :data:`MAX_CORRELATION_LENGTH`; empty becomes None."""
    if value is not None and (not storable(value) or len(value) > MAX_CORRELATION_LENGTH):
        raise refuse("correlation_id")
    return value or None  # an empty correlation id is not stored


def check_callback_url(value: Any) -> Any:
    """The rule of ``callback_url``: an http(s) URL httpx can send to, at most :data:`MAX_CALLBACK_LENGTH`."""
    if value is None:
        return None
    if not storable(value) or len(value) > MAX_CALLBACK_LENGTH:
        raise refuse("callback_url")
    try:
        parts = urlsplit(value)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname)
        _ = parts.port  # raises ValueError for a port outside 0..65535 or not a number
        # The pushes are sent with httpx: a URL it cannot parse (an IPv4 host with an
        # octal or out-of-range part, 0177.0.0.2 or 256.0.0.1; a broken IPv6 literal)
        # could never be pushed to, so it is refused here, like any other bad URL.
        valid = valid and bool(httpx.URL(value).host)
    except (ValueError, httpx.InvalidURL):
        valid = False
    if not valid:
        raise refuse("callback_url", "callback_url must be an http(s) URL")
    return value


def check_deadline_ms(value: Any) -> Any:
    """The rule of ``deadline_ms``: an integer (:func:`whole_number`) from :data:`MIN_DEADLINE_MS`
    to :data:`MAX_DEADLINE_MS`; returns it as an ``int``."""
    if value is None:
        return None
    number = whole_number(value)
    if number is None or not MIN_DEADLINE_MS <= number <= MAX_DEADLINE_MS:
        raise refuse("deadline_ms")
    return number


def check_params(value: Any) -> Any:
    """The rule of ``params`` before its members': ``null`` is :func:`missing` (any other value
    is the params model's to read: an object, else "params must be an object")."""
    if value is None:
        raise missing("params")
    return value


def check_labels(value: Any) -> Any:
    """The rule of ``labels``: an object of storable strings."""
    if value is not None and (
        not isinstance(value, dict) or not all(storable(k) and storable(v) for k, v in value.items())
    ):
        raise refuse("labels")
    return value


def target_id_as_read(value: str) -> str:
    """The target a target id names: the text with whitespace at its ends dropped
    (``str.strip``) — the one reading of a Task's ``params.target_id`` and of the legacy
    shim's ``{target_id}``, on its ``POST`` and on its status ``GET`` alike (2026-12-07:
    the ``GET`` read the segment as it came, and answered ``unknown target`` at the address
    its ``POST`` had admitted a refetch at)."""
    return value.strip()


def check_target_id(value: Any) -> Any:
    """The rule of ``params.target_id``: a non-blank string (:func:`target_id_as_read`); an
    explicit null is refused."""
    # Only called for a member that is present: an explicit null is refused too.
    if not _nonblank(value):
        raise refuse("params.target_id")
    return target_id_as_read(value)


def check_account(value: Any) -> Any:
    """The rule of ``params.source.account``: non-blank, at most :data:`MAX_ACCOUNT_LENGTH` (trimmed)."""
    if value is None:
        return None
    if not _nonblank(value) or len(value) > MAX_ACCOUNT_LENGTH:
        raise refuse("params.source.account")
    return value.strip()


def check_tags(value: Any) -> Any:
    """The rule of ``params.query.tags`` as an array: 1 to :data:`MAX_TAGS` items (each
    item's: :func:`check_tag`)."""
    if value is None:
        raise missing("params.query.tags")
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_TAGS:
        raise refuse("params.query.tags")
    return value


def check_tag(value: Any) -> Any:
    """The rule of one tag: a non-blank string of at most :data:`MAX_TAG_LENGTH` characters,
    the length checked before trimming (reference §1.5); stored trimmed."""
    if not _nonblank(value) or len(value) > MAX_TAG_LENGTH:
        raise refuse_item("params.query.tags")
    return value.strip()


def check_exclude(value: Any) -> Any:
    """The rule of ``params.constraints.exclude`` as an array: at most :data:`MAX_EXCLUDE`
    items (each item's: :func:`check_exclude_item`, :func:`check_exclude_kind`,
    :func:`check_exclude_id`)."""
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > MAX_EXCLUDE:
        raise refuse("params.constraints.exclude")
    return value


def check_exclude_item(value: Any) -> Any:
    """The rule of one exclude item: an object (its members: kind, then id)."""
    if not isinstance(value, dict | BaseModel):
        raise refuse_item("params.constraints.exclude")
    return value


def check_exclude_kind(value: Any) -> Any:
    """The rule of an exclude item's ``kind``: one of :data:`EXCLUDE_KINDS`."""
    if value not in EXCLUDE_KINDS:
        raise refuse_item("params.constraints.exclude.kind")
    return value


def check_exclude_id(value: Any) -> Any:
    """The rule of an exclude item's ``id``: a non-blank string of at most
    :data:`MAX_EXCLUDE_ID_LENGTH` characters (before trimming); stored trimmed."""
    if not _nonblank(value) or len(value) > MAX_EXCLUDE_ID_LENGTH:
        raise refuse_item("params.constraints.exclude.id")
    return value.strip()


def check_work_types(value: Any) -> Any:
    """The rule of ``params.constraints.work_types`` as an array (each item's:
    :func:`check_work_type`)."""
    if value is not None and not isinstance(value, list):
        raise refuse("params.constraints.work_types")
    return value


def check_work_type(value: Any) -> Any:
    """The rule of one work type: a non-empty storable string."""
    if not storable(value) or value == "":
        raise refuse_item("params.constraints.work_types")
    return value


def check_positive(field: str) -> Any:
    """The check of an integer member ``field`` (:func:`whole_number`) that must be ≥ 1 when
    present; returns it as an ``int``."""

    def check(value: Any) -> Any:
        if value is None:
            return None
        number = whole_number(value)
        if number is None or number < 1:
            raise refuse(field)
        return number

    return check

"""Validation and normalisation of a Workflow Protocol v1 ``Task`` (``POST /jobs`` body).

Checks run in the original's order and the first failure wins (reference §1.5 "Other
Task fields", then the ``candidate_search`` params). Unknown fields are ignored at
every level. Curaflow rules the original lacks, because the ledger must be able to
store what it admits and the API to address it: ``deadline_ms`` is at most
:data:`MAX_DEADLINE_MS` (7 days), no stored string (key, correlation id, callback URL,
labels, tags, ids) may contain a NUL character, and the idempotency key holds no control
character (:func:`has_control_character`). The normalised params ("retrieval view") are rebuilt in the fixed key
order ``source, query{tags, expand?}, constraints{exclude?, limit?, scan_limit?,
work_types?}`` with absent members dropped; that JSON is what an idempotency replay is
compared against.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from curaflow.protocol.errors import (
    SUPPORTED_JOB_TYPES,
    SUPPORTED_PROTOCOL_VERSIONS,
    ProtocolError,
    invalid_params,
)

MAX_KEY_LENGTH = 200
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


@dataclass
class ValidatedTask:
    """A ``Task`` that passed validation.

    Attributes:
        idempotency_key: trimmed key (lookups are exact and case-sensitive).
        correlation_id: None when absent or empty (an empty string is not stored).
        callback_url: None when absent.
        deadline_ms: None when absent (the configured default applies).
        labels: validated caller labels (not echoed in the Job, like the original).
        params: the normalised retrieval view (see module doc); may be empty.
        target_id: the ``params.target_id`` selector (protocol v1.1), not part of the view.
    """

    protocol_version: str
    job_type: str
    idempotency_key: str
    correlation_id: str | None = None
    callback_url: str | None = None
    deadline_ms: int | None = None
    labels: dict[str, str] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    target_id: str | None = None

    @property
    def tags(self) -> list[str] | None:
        """Tags from ``params.query.tags``, or None when the task has no query."""
        query = self.params.get("query")
        return list(query["tags"]) if query else None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def storable(value: Any) -> bool:
    """A string PostgreSQL can store and UTF-8 can encode: no NUL character, no lone
    surrogate (JSON escapes such as ``"\\ud800"`` decode to one)."""
    if not isinstance(value, str) or "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_storable = storable


def has_control_character(value: str) -> bool:
    """True when ``value`` holds a C0 or C1 control character (Unicode category ``Cc``:
    NUL, tab, line feed, carriage return, DEL, NEL…).

    Such a key could not address its job: the job id embeds the key, and a path
    parameter cannot carry a line break, so ``GET /jobs/{id}``, its ``events_url`` and
    its cancel would all answer 404. Keys are identifiers; a control character in one is
    a client bug, refused at admission.
    """
    return any(unicodedata.category(c) == "Cc" for c in value)


def _nonblank(value: Any) -> bool:
    return isinstance(value, str) and value.strip() != "" and storable(value)


def validate_task(body: Any) -> ValidatedTask:
    """Validate a decoded ``POST /jobs`` body.

    Args:
        body: the JSON-decoded request body.

    Returns:
        The :class:`ValidatedTask`.

    Raises:
        ProtocolError: ``invalid_params`` (400) or ``unsupported_protocol_version`` (400)
            for the first rule the body breaks, with ``detail.field`` or ``detail.reason``.
    """
    if not isinstance(body, dict):
        raise invalid_params("request body must be a JSON object")

    version = body.get("protocol_version")
    if version is None:
        raise invalid_params("protocol_version is required", field="protocol_version")
    if not isinstance(version, str) or version not in SUPPORTED_PROTOCOL_VERSIONS:
        raise ProtocolError(
            "unsupported_protocol_version",
            400,
            "unsupported protocol_version",
            {"received": version, "supported": list(SUPPORTED_PROTOCOL_VERSIONS)},
        )

    job_type = body.get("job_type")
    if job_type not in SUPPORTED_JOB_TYPES:
        raise invalid_params(
            "unsupported job_type",
            reason="unsupported_job_type",
            job_type=job_type,
            supported=list(SUPPORTED_JOB_TYPES),
        )

    raw_key = body.get("idempotency_key")
    if not isinstance(raw_key, str) or not _nonblank(raw_key) or has_control_character(raw_key.strip()):
        raise invalid_params(
            "idempotency_key must be a non-blank string without control characters (line breaks, tabs, NUL…)",
            field="idempotency_key",
        )
    key = raw_key.strip()
    if len(key) > MAX_KEY_LENGTH:
        raise invalid_params(f"idempotency_key must be at most {MAX_KEY_LENGTH} characters", field="idempotency_key")

    correlation = body.get("correlation_id")
    if correlation is not None and (not _storable(correlation) or len(correlation) > MAX_CORRELATION_LENGTH):
        raise invalid_params(
            f"correlation_id must be a string of at most {MAX_CORRELATION_LENGTH} characters",
            field="correlation_id",
        )

    callback = body.get("callback_url")
    if callback is not None:
        if not _storable(callback) or len(callback) > MAX_CALLBACK_LENGTH:
            raise invalid_params(
                f"callback_url must be a string of at most {MAX_CALLBACK_LENGTH} characters",
                field="callback_url",
            )
        try:
            parts = urlsplit(callback)
            valid = parts.scheme in ("http", "https") and bool(parts.hostname)
            _ = parts.port  # raises ValueError for a port outside 0..65535 or not a number
        except ValueError:
            valid = False
        if not valid:
            raise invalid_params("callback_url must be an http(s) URL", field="callback_url")

    deadline = body.get("deadline_ms")
    if deadline is not None and (not _is_int(deadline) or not MIN_DEADLINE_MS <= deadline <= MAX_DEADLINE_MS):
        raise invalid_params(
            f"deadline_ms must be an integer from {MIN_DEADLINE_MS} to {MAX_DEADLINE_MS}", field="deadline_ms"
        )

    labels = body.get("labels")
    if labels is not None and (
        not isinstance(labels, dict) or not all(_storable(k) and _storable(v) for k, v in labels.items())
    ):
        raise invalid_params("labels must be an object of string values", field="labels")

    params, target_id = validate_params(body.get("params"))
    return ValidatedTask(
        protocol_version=version,
        job_type=job_type,
        idempotency_key=key,
        correlation_id=correlation or None,
        callback_url=callback,
        deadline_ms=deadline,
        labels=dict(labels or {}),
        params=params,
        target_id=target_id,
    )


def validate_params(params: Any) -> tuple[dict[str, Any], str | None]:
    """Validate and normalise ``candidate_search`` params (reference §1.5).

    Returns:
        ``(view, target_id)``: the normalised retrieval view and the optional selector.

    Raises:
        ProtocolError: ``invalid_params`` (400) with ``detail.field`` naming the member.
    """
    if not isinstance(params, dict):
        raise invalid_params("params must be an object", field="params")

    target_id: str | None = None
    if "target_id" in params and params["target_id"] is not None:
        raw = params["target_id"]
        if not _nonblank(raw):
            raise invalid_params("params.target_id must be a non-blank string", field="params.target_id")
        target_id = raw.strip()
    elif "target_id" in params:
        raise invalid_params("params.target_id must be a non-blank string", field="params.target_id")

    view: dict[str, Any] = {}

    source = params.get("source")
    if source is not None:
        if not isinstance(source, dict):
            raise invalid_params("params.source must be an object", field="params.source")
        norm_source: dict[str, Any] = {}
        platform = source.get("platform")
        if platform is not None:
            if platform != "pixiv":
                raise invalid_params('params.source.platform must be "pixiv"', field="params.source.platform")
            norm_source["platform"] = platform
        account = source.get("account")
        if account is not None:
            if not _nonblank(account) or len(account) > MAX_ACCOUNT_LENGTH:
                raise invalid_params(
                    f"params.source.account must be a non-blank string of at most {MAX_ACCOUNT_LENGTH} characters",
                    field="params.source.account",
                )
            norm_source["account"] = account.strip()
        view["source"] = norm_source

    query = params.get("query")
    if query is None:
        if target_id is None:
            raise invalid_params("params.query is required", field="params.query")
    else:
        if not isinstance(query, dict):
            raise invalid_params("params.query must be an object", field="params.query")
        tags = query.get("tags")
        if not isinstance(tags, list) or not 1 <= len(tags) <= MAX_TAGS:
            raise invalid_params(f"params.query.tags must be an array of 1-{MAX_TAGS} tags", field="params.query.tags")
        clean: list[str] = []
        for tag in tags:
            if not _nonblank(tag) or len(tag) > MAX_TAG_LENGTH:
                raise invalid_params(
                    f"each tag must be a non-blank string of at most {MAX_TAG_LENGTH} characters",
                    field="params.query.tags",
                )
            clean.append(tag.strip())
        norm_query: dict[str, Any] = {"tags": clean}
        expand = query.get("expand")
        if expand is not None and not isinstance(expand, bool):
            raise invalid_params("params.query.expand must be a boolean", field="params.query.expand")
        if expand is True:
            norm_query["expand"] = True
        view["query"] = norm_query

    constraints = params.get("constraints")
    if constraints is not None:
        if not isinstance(constraints, dict):
            raise invalid_params("params.constraints must be an object", field="params.constraints")
        norm_constraints: dict[str, Any] = {}
        exclude = constraints.get("exclude")
        if exclude is not None:
            if not isinstance(exclude, list) or len(exclude) > MAX_EXCLUDE:
                raise invalid_params(
                    f"params.constraints.exclude must be an array of at most {MAX_EXCLUDE} items",
                    field="params.constraints.exclude",
                )
            items = []
            for item in exclude:
                if (
                    not isinstance(item, dict)
                    or item.get("kind") not in EXCLUDE_KINDS
                    or not _nonblank(item.get("id"))
                    or len(item["id"]) > MAX_EXCLUDE_ID_LENGTH
                ):
                    raise invalid_params(
                        "each exclude item needs kind work|candidate|tag and a non-blank id "
                        f"of at most {MAX_EXCLUDE_ID_LENGTH} characters",
                        field="params.constraints.exclude",
                    )
                items.append({"kind": item["kind"], "id": item["id"].strip()})
            norm_constraints["exclude"] = items
        limit = constraints.get("limit")
        if limit is not None:
            if not _is_int(limit) or limit < 1:
                raise invalid_params(
                    "params.constraints.limit must be an integer >= 1", field="params.constraints.limit"
                )
            norm_constraints["limit"] = limit
        scan_limit = constraints.get("scan_limit")
        if scan_limit is not None:
            if not _is_int(scan_limit) or scan_limit < 1:
                raise invalid_params(
                    "params.constraints.scan_limit must be an integer >= 1",
                    field="params.constraints.scan_limit",
                )
            norm_constraints["scan_limit"] = min(scan_limit, MAX_SCAN_LIMIT)
        work_types = constraints.get("work_types")
        if work_types is not None:
            if not isinstance(work_types, list) or not all(_storable(w) and w != "" for w in work_types):
                raise invalid_params(
                    "params.constraints.work_types must be an array of non-empty strings",
                    field="params.constraints.work_types",
                )
            norm_constraints["work_types"] = list(work_types)
        view["constraints"] = norm_constraints

    return view, target_id


def manual_job_id(target_id: str, idempotency_key: str) -> str:
    """The job id of a submitted Task: ``<target_id>@manual-<idempotency_key lowercased>``
    (DESIGN.md decision 1; the key as :func:`validate_task` keeps it: trimmed)."""
    return f"{target_id}@manual-{idempotency_key.lower()}"

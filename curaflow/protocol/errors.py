"""Workflow Protocol v1 error codes and the request error raised by the job surface.

The 16 codes and their default ``retryable`` come from
``curaflow/protocol/schema/error-mapping.json`` (vendored from ``shared/protocol/v1``,
reference §2.2); a unit test checks this table against that file. Consumers branch only
on ``code``.

An ``Error`` is always encodable (:func:`encodable`): a refusal may name what the consumer
sent (``detail.received``, ``detail.job_type``, ``detail.member`` …), and JSON's escapes let a
consumer send a lone surrogate (``"\\ud800"``), which has no UTF-8 encoding.
"""

from __future__ import annotations

import re
from typing import Any

from curaflow.domain.execution import JOB_WORKFLOWS

#: protocol code → default ``retryable`` (reference §2.2).
PROTOCOL_CODES: dict[str, bool] = {
    "no_candidate": True,
    "source_error": True,
    "auth_error": False,
    "quota_exceeded": True,
    "resource_busy": True,
    "queued_too_long": True,
    "stalled_no_progress": True,
    "deadline_exceeded": True,
    "cancelled_by_consumer": False,
    "idempotency_conflict": False,
    "unsupported_protocol_version": False,
    "invalid_params": False,
    "delivery_failed": True,
    "delivery_rejected": False,
    "delivery_abandoned": True,
    "internal_error": False,
}

SUPPORTED_PROTOCOL_VERSIONS = ["1"]


def supported_job_types() -> list[str]:
    """The job types a Task may name: those curaflow runs
    (:data:`curaflow.domain.execution.JOB_WORKFLOWS`), sorted."""
    return sorted(JOB_WORKFLOWS)


def default_retryable(code: str) -> bool:
    """Default ``retryable`` of a protocol code; unknown codes are not retryable."""
    return PROTOCOL_CODES.get(code, False)


#: A UTF-16 surrogate code point: in a Python string decoded from JSON, always a lone one
#: (a pair decodes to the one character it encodes).
_SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings — object keys included, at any
    depth — replaced by U+FFFD (the replacement character), so that its JSON can be
    encoded in UTF-8. Other values are returned as they are.

    The one owner of "an error can always be answered": :func:`error_body` applies it to
    the message and the detail (2026-12-06: ``protocol_version`` ``"\\ud800"`` was a 500,
    its refusal echoing it in ``detail.received``).
    """
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {encodable(key): encodable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [encodable(item) for item in value]
    return value


def error_body(
    code: str,
    message: str | None = None,
    *,
    detail: dict[str, Any] | None = None,
    retryable: bool | None = None,
) -> dict[str, Any]:
    """Build a protocol ``Error`` object (``$defs/Error``).

    Args:
        code: one of :data:`PROTOCOL_CODES`.
        message: human-readable text, never used for control flow.
        detail: free-form diagnostics (``detail.reason``, ``detail.field`` …).
        retryable: overrides the code's default.

    Returns:
        ``{code, message?, retryable, detail?}``; its strings are :func:`encodable` (a lone
        surrogate the consumer sent, echoed in the detail, is U+FFFD).
    """
    body: dict[str, Any] = {"code": code}
    if message:
        body["message"] = encodable(message)
    body["retryable"] = default_retryable(code) if retryable is None else retryable
    if detail:
        body["detail"] = encodable(detail)
    return body


class ProtocolError(Exception):
    """A request the job surface refuses; rendered as ``{"error": Error}`` with ``http_status``.

    Attributes:
        code: protocol error code.
        http_status: 400, 404, 409, 413, 500 or 503 (reference §2.2 "HTTP statuses").
        message: human-readable text.
        detail: diagnostics; ``detail.reason`` is non-normative.
    """

    def __init__(
        self,
        code: str,
        http_status: int,
        message: str,
        detail: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.http_status = http_status
        self.message = message
        self.detail = detail or {}

    def body(self) -> dict[str, Any]:
        """The response body ``{"error": {code, message, retryable, detail?}}``."""
        return {"error": error_body(self.code, self.message, detail=self.detail or None)}


def invalid_params(message: str, *, http_status: int = 400, **detail: Any) -> ProtocolError:
    """Shorthand for an ``invalid_params`` :class:`ProtocolError` with ``detail`` keywords."""
    return ProtocolError("invalid_params", http_status, message, detail or None)


def required_sentence(field: str) -> str:
    """What a required request member absent or ``null`` is told: ``"<field> is required"``
    (``detail.field`` names it) — a Task's (:data:`curaflow.protocol.models.rules.REQUIRED`),
    the ack's ``ack_through``, ``GET /jobs``'s ``idempotency_key`` (reference §2.5's wording)."""
    return f"{field} is required"

"""Workflow Protocol v1 error codes and the request error raised by the job surface.

The 16 codes and their default ``retryable`` come from
``curaflow/protocol/schema/error-mapping.json`` (vendored from ``shared/protocol/v1``,
reference §2.2); a unit test checks this table against that file. Consumers branch only
on ``code``.
"""

from __future__ import annotations

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
        ``{code, message?, retryable, detail?}``.
    """
    body: dict[str, Any] = {"code": code}
    if message:
        body["message"] = message
    body["retryable"] = default_retryable(code) if retryable is None else retryable
    if detail:
        body["detail"] = detail
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

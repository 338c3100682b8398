"""A protocol refusal as a Temporal failure, and back (pure).

Admission refuses a Task with a :class:`~curaflow.protocol.errors.ProtocolError`
(``POST /jobs`` answers it as ``{"error": …}`` with its HTTP status). Everywhere else the
refusal travels as a Temporal failure: the ``admit`` activity's, the ``admission``
update's, a refused start's execution, a child job's, a Nexus operation's. One shape
for all of them: a non-retryable ``ApplicationError`` whose ``type`` is the protocol
code and whose first detail is ``{code, message, detail, http_status}``
(:func:`as_failure`). :func:`refusal_of` reads it back from whatever error a caller got —
a ``WorkflowUpdateFailedError``, ``WorkflowFailureError``, ``ChildWorkflowError``,
``ActivityError`` or ``NexusOperationError`` — by walking its causes, since each layer
(a Nexus operation error wraps its handler's, a child's wraps the job's) adds one.

Pure module: imported by workflows through the sandbox pass-through.
"""

from __future__ import annotations

from typing import Any

from temporalio.exceptions import ApplicationError

from curaflow.protocol.errors import PROTOCOL_CODES, ProtocolError


def refusal_details(err: ProtocolError) -> dict[str, Any]:
    """``{code, message, detail, http_status}``: what ``POST /jobs`` answers, as data."""
    return {"code": err.code, "message": err.message, "detail": err.detail or {}, "http_status": err.http_status}


def as_failure(err: ProtocolError) -> ApplicationError:
    """The non-retryable ``ApplicationError`` of a refusal: ``type`` = the protocol code,
    details ``[{code, message, detail, http_status}]``."""
    return ApplicationError(err.message, refusal_details(err), type=err.code, non_retryable=True)


def from_details(details: dict[str, Any]) -> ProtocolError:
    """The :class:`ProtocolError` of ``{code, message, detail, http_status}``."""
    return ProtocolError(
        str(details.get("code", "internal_error")),
        int(details.get("http_status", 400)),
        str(details.get("message", "")),
        details.get("detail") or None,
    )


def refusal_of(error: BaseException | None) -> ProtocolError | None:
    """The protocol refusal carried by ``error`` or one of its causes, else None.

    A refusal is a non-retryable ``ApplicationError`` (:func:`as_failure`) whose ``type`` is
    a protocol code and whose first detail is a dict (a job's own failure, ``job_failed`` /
    ``job_expired``, is not one; nor is a cell step's retryable failure typed by a reason
    that is also a protocol code, its detail the attempt's number:
    :func:`curaflow.domain.verdicts.failures.attempt_detail`).

    Args:
        error: what the caller caught (any depth of wrapping: ``cause`` and ``__cause__``).
    """
    seen: set[int] = set()
    current = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if (
            isinstance(current, ApplicationError)
            and current.non_retryable
            and current.type in PROTOCOL_CODES
            and current.details
            and isinstance(current.details[0], dict)
        ):
            details = dict(current.details[0])
            details.setdefault("code", current.type)
            details.setdefault("message", current.message)
            return from_details(details)
        current = getattr(current, "cause", None) or current.__cause__
    return None

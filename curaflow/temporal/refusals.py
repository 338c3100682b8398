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

from temporalio.exceptions import ApplicationError, FailureError

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


#: The failure type of an admission the ledger could not serve (PostgreSQL unreachable,
#: restarting, failing over …: :func:`curaflow.ledger.db.is_unavailable`) — the word the
#: API's ``503`` says in ``detail.reason``. The ``admit`` activity fails an attempt with it
#: (retryable, :func:`ledger_outage`); an admission that ran out of its budget on it is
#: curaflow's failure (:func:`admission_failure`), never a refusal of the Task.
LEDGER_UNAVAILABLE = "ledger_unavailable"

#: The failure type of an admission that failed for any other reason than the Task's
#: refusal or the ledger's outage (a bug, a step that timed out): curaflow's failure,
#: the protocol's code for it (``internal_error``), never read as a refusal (retryable).
ADMISSION_FAILED = "internal_error"


def ledger_outage(err: BaseException) -> ApplicationError:
    """The retryable ``ApplicationError`` (type :data:`LEDGER_UNAVAILABLE`) of an ``admit``
    attempt the ledger could not serve; ``err`` (the ledger's error) is named by its class."""
    return ApplicationError(
        f"the ledger is unavailable ({type(err).__name__}); nothing was admitted",
        type=LEDGER_UNAVAILABLE,
        non_retryable=False,
    )


def admission_failure(err: BaseException) -> ApplicationError:
    """What an execution's admission ended with, as its failure: the Task's refusal as it is
    (:func:`refusal_of`: non-retryable, ``type`` = the protocol code), anything else as
    curaflow's own failure — never the Task's.

    Rule (2026-12-07): the Task's refusals are the protocol's (``invalid_params``,
    ``idempotency_conflict`` …); the ledger away for the whole of admission's budget, or
    any other failure of the step, is curaflow's (owner ``curaflow``, as
    :class:`curaflow.domain.reasons.Owner` attributes ``internal_error``), retryable by the
    caller — the same Task again is admitted once the ledger is back, as ``POST /jobs``
    answers ``503 ledger_unavailable``. Before, every failure of ``admit`` was re-raised
    non-retryable under its own type: a run whose ledger was away "refused" its Task with
    ``ConnectionFailureError`` (asyncpg's class name), and its ``status`` query said so.

    Returns:
        The refusal; else a retryable ``ApplicationError`` of type :data:`LEDGER_UNAVAILABLE`
        (the step's last attempt was the ledger's outage) or :data:`ADMISSION_FAILED`,
        details ``[{owner: "curaflow", reason, retryable: true, cause}]`` (``cause``: the
        last attempt's failure type, or its exception's class name).
    """
    refused = refusal_of(err)
    if refused is not None:
        return as_failure(refused)
    cause: BaseException = err
    while isinstance(cause, FailureError) and not isinstance(cause, ApplicationError) and cause.cause is not None:
        cause = cause.cause  # an ActivityError's: its TimeoutError
    cause_type = cause.type if isinstance(cause, ApplicationError) and cause.type else type(cause).__name__
    if cause_type == LEDGER_UNAVAILABLE:
        kind, message = LEDGER_UNAVAILABLE, "the ledger was unavailable for the whole of admission; start again"
    else:
        kind, message = ADMISSION_FAILED, f"admission failed ({cause_type}); start again"
    details = {"owner": "curaflow", "reason": kind, "retryable": True, "cause": cause_type}
    return ApplicationError(message, details, type=kind, non_retryable=False)

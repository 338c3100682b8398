"""Admission view of a Workflow Protocol v1 ``Task`` (``POST /jobs`` body).

The rules live on the wire model (:class:`curaflow.protocol.models.Task`: reference §1.5
in the original's order, plus curaflow's storability rules). This module turns a body
into what admission needs — :class:`ValidatedTask`, with the normalised params
("retrieval view") an idempotency replay is compared against — and the model's first
validation error into the protocol's answer (:func:`refusal`): the first failure wins,
``detail.field`` names the member. A required member absent or ``null`` is told
"<member> is required" (:data:`~curaflow.protocol.models.rules.REQUIRED`; 2026-12-07: a
Task without ``job_type`` was "unsupported job_type", a missing key, ``params`` or tags
were told the rule of a value they never had); a body that is no object is
:func:`~curaflow.protocol.json_text.object_refusal`'s.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from curaflow.protocol.errors import (
    SUPPORTED_PROTOCOL_VERSIONS,
    ProtocolError,
    invalid_params,
    required_sentence,
    supported_job_types,
)
from curaflow.protocol.json_text import object_refusal
from curaflow.protocol.keys import has_control_character, manual_job_id, storable
from curaflow.protocol.models import MAX_DEADLINE_MS, RULES, Task

__all__ = [
    "MAX_DEADLINE_MS",
    "ValidatedTask",
    "has_control_character",
    "identity_conflict",
    "manual_job_id",
    "refusal",
    "storable",
    "validate_task",
]


@dataclass
class ValidatedTask:
    """A ``Task`` that passed validation.

    Attributes:
        idempotency_key: trimmed key (lookups are exact and case-sensitive).
        correlation_id: None when absent or empty (an empty string is not stored).
        callback_url: None when absent.
        deadline_ms: None when absent (the configured default applies).
        labels: validated caller labels (not echoed in the Job, like the original).
        params: the normalised retrieval view
            (:meth:`~curaflow.protocol.models.CandidateSearchParams.retrieval_view`); may be empty.
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


def _place(loc: tuple[int | str, ...]) -> tuple[str, int | None, str]:
    """Where an error is: ``detail.field`` (the member path up to the first array index),
    that index (None when the error is not in an array item) and the place written out
    (``loc`` ``("params", "constraints", "exclude", 17, "kind")`` →
    ``("params.constraints.exclude", 17, "params.constraints.exclude[17].kind")``)."""
    names: list[str] = []
    index: int | None = None
    place = ""
    for part in loc:
        if isinstance(part, int):
            index = part if index is None else index
            place += f"[{part}]"
            continue
        if index is None:
            names.append(part)
        place += f".{part}" if place else part
    return ".".join(names), index, place


def refusal(err: ValidationError, body: Any) -> ProtocolError:
    """The protocol error of the first rule ``body`` broke (see the module doc).

    Returns:
        ``unsupported_protocol_version`` (400, ``detail.received`` / ``supported``), or
        ``invalid_params`` (400) with ``detail.field`` — "<member> is required" for a member
        absent (pydantic's ``missing``; a ``null`` is refused so by its rule); for an array
        item also ``detail.index``, its index, and the message names the item's place
        (``params.constraints.exclude[17].kind must be …``,
        :data:`~curaflow.protocol.models.rules.ITEM_RULES`) — or, for the
        job type, ``detail.reason: unsupported_job_type`` with ``job_type`` and
        ``supported`` — an absent or ``null`` one too, as reference §1.5 step 3 answers
        every ``job_type`` but a supported one ("job_type is required", ``job_type: null``,
        ``detail.field``: a consumer branching on the reason meets what the original
        answered); for a body that is no object, :func:`object_refusal`'s.
    """
    # No input and no context: they may hold a lone surrogate, which errors() cannot encode.
    first = err.errors(include_url=False, include_input=False, include_context=False)[0]
    kind = first["type"]
    if kind == "unsupported_protocol_version":
        return ProtocolError(
            "unsupported_protocol_version",
            400,
            "unsupported protocol_version",
            {"received": body.get("protocol_version"), "supported": list(SUPPORTED_PROTOCOL_VERSIONS)},
        )
    if kind == "unsupported_job_type":
        return invalid_params(
            "unsupported job_type",
            reason="unsupported_job_type",
            job_type=body.get("job_type"),
            supported=supported_job_types(),
        )
    name, index, place = _place(first["loc"])
    if index is not None:  # an array item, named by its index (rules.ITEM_RULES)
        if kind == "missing":
            message = required_sentence(place)
        elif kind == "invalid_item":
            message = f"{place} {first['msg']}"
        else:
            message = f"{place} is invalid"
        return invalid_params(message, field=name, index=index)
    if not name:  # the body itself (validate_task refuses a non-object first)
        return object_refusal(body) or invalid_params("request body must be a JSON object")
    if name == "job_type":  # absent or null: said missing, under the reference's reason (§1.5 step 3)
        return invalid_params(
            required_sentence(name),
            reason="unsupported_job_type",
            job_type=None,
            supported=supported_job_types(),
            field=name,
        )
    if kind == "missing":
        message = required_sentence(name)
    elif kind == "invalid_params":
        message = first["msg"]
    else:
        message = RULES.get(name, f"invalid {name}")
    return invalid_params(message, field=name)


def oversized_task(body: Any, limit: int) -> ProtocolError | None:
    """Whether a Task that did not come as a ``POST /jobs`` body is larger than that
    body may be: ``POST /jobs`` refuses a body over ``api.max_body_bytes`` before reading
    it (:func:`curaflow.api.body.read_json`), and a Task a Temporal client, a parent
    workflow, the ``follow_job`` activity, the Nexus operation or ``curaflow run`` hands
    the admission must not pass where that one is refused (its ``labels`` are the one
    member no rule bounds, stored whole in the ledger).

    Args:
        body: the decoded Task (JSON values, or a ``Task``).
        limit: the largest size in bytes (``api.max_body_bytes``).

    Returns:
        None when its compact UTF-8 JSON (``separators=(",", ":")``, no ASCII escaping —
        never longer than the body that decoded to it, but for numbers written shorter
        than Python writes them) is at most ``limit`` bytes; else the answer of
        ``POST /jobs`` to such a body: 413 ``invalid_params`` with ``detail.limit``. A
        body that is not JSON at all is left to :func:`validate_task`.
    """
    if isinstance(body, Task):
        body = body.model_dump(mode="json", exclude_none=True)
    try:
        size = len(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))
    except (TypeError, ValueError, RecursionError):
        return None
    if size <= limit:
        return None
    return ProtocolError("invalid_params", 413, f"task larger than {limit} bytes", {"limit": limit, "size": size})


def validate_task(body: Any) -> ValidatedTask:
    """Validate a decoded ``POST /jobs`` body against :class:`~curaflow.protocol.models.Task`.

    Args:
        body: the JSON-decoded request body (or a ``Task``).

    Returns:
        The :class:`ValidatedTask`.

    Raises:
        ProtocolError: ``invalid_params`` (400) or ``unsupported_protocol_version`` (400)
            for the first rule the body breaks, with ``detail.field`` or ``detail.reason``
            (``not_an_object`` for a body that is no JSON object: :func:`object_refusal`).
    """
    if isinstance(body, Task):
        body = body.model_dump(mode="json", exclude_none=True)
    not_an_object = object_refusal(body)
    if not_an_object is not None:
        raise not_an_object
    try:
        task = Task.model_validate(body)
    except ValidationError as err:
        raise refusal(err, body) from None
    return ValidatedTask(
        protocol_version=task.protocol_version,
        job_type=task.job_type,
        idempotency_key=task.idempotency_key,
        correlation_id=task.correlation_id,
        callback_url=task.callback_url,
        deadline_ms=task.deadline_ms,
        labels=dict(task.labels or {}),
        params=task.params.retrieval_view(),
        target_id=task.params.target_id,
    )


def workflow_id_conflict(job_id: str, workflow_id: str) -> ProtocolError | None:
    """Whether an execution under ``workflow_id`` may run job ``job_id``: only the job's own
    execution, whose workflow id is the job id (DESIGN.md decision 1).

    The one rule for both ways an execution is handed a job: a Task admitted for it
    (:meth:`curaflow.jobs.admission.Admitter.admit`) and a job's ``JobInput`` it was
    started with (``JobWorkflow``; a copy of another execution's input under a fresh id).

    Args:
        job_id: the job's id (the Task's, or the ``JobInput``'s).
        workflow_id: the id of the execution handed the job.

    Returns:
        None when they are the same; else ``invalid_params`` (400) with ``detail.field:
        workflow_id``, ``expected`` (the job id) and ``received`` (the workflow id).
    """
    if workflow_id == job_id:
        return None
    return invalid_params(
        f"the workflow id must be the job id {job_id!r}", field="workflow_id", expected=job_id, received=workflow_id
    )


def follower_conflict(job_id: str, follower_id: str) -> ProtocolError | None:
    """Whether a workflow under ``follower_id`` may follow job ``job_id`` (the ``follow_job``
    activity, which ``run_job`` falls back to when its child start is refused): not when
    it holds the job's own id — the job can run only under that id (DESIGN.md decision 1),
    so it would wait for itself.

    Returns:
        None when the ids differ; else ``invalid_params`` (400) with ``detail.field:
        workflow_id`` and ``job_id``.
    """
    if follower_id != job_id:
        return None
    return invalid_params(
        f"this workflow's id is the job id {job_id!r} of its Task: the job can run only under its own id, "
        "which this workflow holds; start this workflow under another id",
        field="workflow_id",
        job_id=job_id,
    )


def identity_conflict(
    job_id: str,
    *,
    key: str | None,
    target_ids: list[str],
    params: dict[str, Any] | None,
    task: ValidatedTask,
    target_id: str,
) -> ProtocolError | None:
    """Whether ``task`` is another request than the job's (DESIGN.md decisions 1–2): the one
    comparison of an idempotent replay, used by admission against the ledger row and by a
    job's execution against the identity it carries.

    Args:
        job_id: the job's id (named in the refusal).
        key: the key the job was admitted with (exact, case-sensitive); None when the
            record predates carrying it — then only the job id, which holds the key
            lowercased, says it is the job's.
        target_ids: the job's targets.
        params: the normalised params the job was admitted with; None: it keeps none (a
            legacy refetch, or a record that predates carrying them) and params are not
            compared.
        task: the Task that arrived, validated.
        target_id: the target ``task`` resolves to.

    Returns:
        None when the Task is the job's (a replay); else the 409 ``idempotency_conflict``
        ``POST /jobs`` answers, ``detail.reason`` ``idempotency_conflict``.
    """
    same_key = key == task.idempotency_key if key is not None else True
    same_target = target_ids == [target_id]
    same_params = params is None or params == (task.params or {})
    if same_key and same_target and same_params:
        return None
    reason = "the idempotency key was first used with different params"
    if not same_key:
        reason = "the job id is owned by a different idempotency key"
    elif not same_target:
        reason = "the idempotency key was first used for a different target"
    return ProtocolError("idempotency_conflict", 409, reason, {"reason": "idempotency_conflict", "job_id": job_id})

"""What a ``JobWorkflow`` execution was started with (pure helper of :mod:`workflows.job`).

``JobWorkflow`` takes its input as ``*args`` without type hints, so the SDK hands it the
payloads as decoded JSON (or, for a payload the worker's converter cannot decode, as a
:class:`~temporalio.common.RawValue`: :class:`curaflow.temporal.connection.InputPayloadConverter`).
:func:`read_submission` is the one place that says what that input is — explicitly, not
by pydantic's smart union:

* exactly one JSON object holding any member a protocol Task has and ``JobInput`` has not
  (``protocol_version``, ``idempotency_key``, ``params``, …) is a **Task** to admit — a
  Temporal client's start (typed, plain JSON, any SDK, the CLI). It is passed on as the
  client sent it; admission validates it, once;
* exactly one JSON object that is a valid ``JobInput`` and holds no Task member is a job
  **already admitted** (HTTP, schedules, the reconciler started it);
* any other JSON object is a Task too: admission answers what is wrong with it, as
  ``POST /jobs`` would;
* anything else — no input, two inputs, a string, a number, an undecodable payload — is
  refused here with ``invalid_params`` "request body must be a JSON object", the code and
  message ``POST /jobs`` gives a body that is not a JSON object (``detail.reason:
  workflow_input``, with the number of arguments or the payload's encoding); a JSON payload
  that does not decode because ``POST /jobs`` would refuse its text (not UTF-8, not JSON)
  gets that refusal instead (:func:`curaflow.protocol.json_text.parse_json`);
* a JSON object whose text has no one meaning (an
  :class:`~curaflow.protocol.json_text.AmbiguousObject`: a member twice, ``NaN``,
  ``1e400``) carries the refusal ``POST /jobs`` gives that text
  (:attr:`Submission.ambiguous`); the workflow refuses it (``workflows.job.ONE_MEANING``).

Deterministic and sandbox-clean: imports only pure modules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from curaflow.domain.messages import JobInput
    from curaflow.domain.text import json_type_name
    from curaflow.protocol.errors import ProtocolError, invalid_params
    from curaflow.protocol.json_text import NOT_AN_OBJECT, ambiguity, json_text_refusal
    from curaflow.protocol.models import Task

#: Members only a protocol Task has: their presence makes an object a Task to admit.
TASK_ONLY_FIELDS = frozenset(Task.model_fields) - frozenset(JobInput.model_fields)


@dataclass(frozen=True)
class Submission:
    """What the execution was started with; exactly one attribute is set.

    Attributes:
        job_input: an admitted job's workflow argument.
        task: a Task to admit (the JSON object as the client sent it).
        refusal: why the input is no job at all (``invalid_params``).
        mixed: a Task that would also validate as ``JobInput`` (executions started
            before the explicit resolution took it for a ``JobInput``).
        ambiguous: beside ``task`` or ``job_input``: the refusal of an input whose JSON
            text has no one meaning (executions started before ``one-meaning-input``
            took the lenient reading of it).
    """

    job_input: JobInput | None = None
    task: dict[str, Any] | None = None
    refusal: ProtocolError | None = None
    mixed: bool = False
    ambiguous: ProtocolError | None = None


def not_one_value(args: Sequence[Any], reason: str) -> ProtocolError | None:
    """The refusal of untyped handler input that is not exactly one decoded JSON value.

    A handler taking ``*args`` without type hints gets whatever a client sent: no argument,
    several, or a payload the worker's converter cannot decode (a
    :class:`~temporalio.common.RawValue`, :class:`curaflow.temporal.connection.InputPayloadConverter`).

    Args:
        args: the handler's decoded arguments.
        reason: ``detail.reason`` of the refusal — what the input was (``workflow_input``
            for the start, ``update_input`` / ``query_input`` for ``admission`` /
            ``admission_answer``).

    Returns:
        ``invalid_params`` "request body must be a JSON object" with ``detail.arguments``
        (their number) or ``detail.encoding`` (the payload's, ≤ 80 characters) — for a
        ``json/plain`` payload whose text ``POST /jobs`` refuses (not UTF-8, not JSON),
        that refusal (``detail.reason`` ``not_utf8``, ``invalid_json`` …); None for one
        decoded value (``args[0]``, any JSON value). Never raises.
    """
    if len(args) != 1:
        return invalid_params(NOT_AN_OBJECT, reason=reason, arguments=len(args))
    if isinstance(args[0], RawValue):
        payload = args[0].payload
        encoding = payload.metadata.get("encoding", b"")
        explained = json_text_refusal(payload.data) if encoding == b"json/plain" else None
        return explained or invalid_params(
            NOT_AN_OBJECT, reason=reason, encoding=encoding.decode("utf-8", "replace")[:80]
        )
    return None


def not_one_task_value(args: Sequence[Any], reason: str) -> ProtocolError | None:
    """:func:`not_one_value`, and the refusal of one JSON object whose text has no one
    meaning (:func:`curaflow.protocol.json_text.ambiguity`): what a handler taking a Task
    (the ``admission`` update, the ``admission_answer`` query) refuses before reading it.
    Never raises."""
    return not_one_value(args, reason) or (ambiguity(args[0]) if len(args) == 1 else None)


def read_submission(args: Sequence[Any]) -> Submission:
    """Resolve ``JobWorkflow``'s positional input (see the module doc).

    Args:
        args: the decoded start arguments (JSON values or ``RawValue``).

    Returns:
        The :class:`Submission`; never raises.
    """
    refused = not_one_value(args, "workflow_input")
    if refused is not None:
        return Submission(refusal=refused)
    [value] = args
    if not isinstance(value, dict):
        return Submission(
            refusal=invalid_params(NOT_AN_OBJECT, reason="workflow_input", received=json_type_name(value))
        )
    ambiguous = ambiguity(value)
    try:
        job_input = JobInput.model_validate(value)
    except ValidationError:
        return Submission(task=value, ambiguous=ambiguous)
    if TASK_ONLY_FIELDS & value.keys():
        return Submission(task=value, job_input=job_input, mixed=True, ambiguous=ambiguous)
    return Submission(job_input=job_input, ambiguous=ambiguous)

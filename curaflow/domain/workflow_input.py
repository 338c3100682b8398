"""Reading a workflow's one untyped start argument: the model it takes, or why not.

A workflow whose ``run`` takes ``*args`` without type hints (``EventPushWorkflow``,
``ScheduledJobWorkflow``) gets whatever its starter sent, as the worker's payload converter
decoded it (:class:`curaflow.temporal.connection.InputPayloadConverter`): no argument,
several, any JSON value, the model itself (a starter in this process), or a payload the
converter could not decode (a :class:`~temporalio.common.RawValue`). Were the arguments
typed, the SDK's decoder would fail the workflow task on every attempt for such input and
leave the run open for ever (DESIGN.md "Foreign input", "Scheduled occurrences").
:func:`read_one_input` is the one reading of such input; each workflow words its refusal
(:class:`InputRefusals`) and fails its run with it, non-retryably.

The rule, in order:

1. not exactly one argument → ``arguments(count)``;
2. an instance of the model → that instance, as is;
3. anything but a JSON object (a ``dict``) → ``not_an_object(kind)``, ``kind`` naming what
   came: ``"a payload that is not JSON"`` for an undecodable payload (anything with a
   ``payload`` attribute: a ``RawValue``), else ``"a JSON <type>"``
   (:func:`curaflow.domain.text.json_type_name`: ``a JSON string``, ``a JSON null`` …);
4. an object whose JSON text has no one meaning — a member twice, ``NaN`` / ``Infinity``,
   ``1e400``: the text ``POST /jobs`` refuses, which the worker's payload converter decodes
   as an :class:`~curaflow.protocol.json_text.AmbiguousObject`, a ``dict`` carrying that
   refusal as its ``refusal`` attribute (read by name: this layer sits below the
   protocol's) → ``no_one_meaning(message)``, the refusal's message (``request body has
   the member 'job_id' more than once in one object`` …), when the workflow's
   ``one_meaning()`` says so (its ``workflow.patched``, asked only here); else the object
   is read as in 5, the SDK decoder's reading (the last of a member given twice), as runs
   started before the workflow's patch read it. The same texts the job workflow refuses
   (``workflows.job.ONE_MEANING``), by the same decode (one owner:
   :func:`curaflow.protocol.json_text.parse_json`);
5. an object the model validates → the model (pydantic's rules: unknown members ignored);
   else ``invalid_object(fields)``: the dotted locations of the failing fields (``input``
   for the object itself), sorted, de-duplicated, the first five, joined by ``", "``.

A ``json/plain`` payload that does not decode at all (not UTF-8, not JSON) is a
``RawValue`` and refused in 3, as before.

Pure and deterministic (imported by workflows through the sandbox pass-through).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from curaflow.domain.text import json_type_name

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class InputRefusals:
    """How a workflow words the refusal of start input that is not its model.

    Each answer is the run's failure message (one line); a workflow's recorded failures and
    its operators' runbooks quote it, so a workflow keeps its wording.

    Attributes:
        arguments: given the number of arguments (not 1).
        not_an_object: given what the one argument is (``"a JSON string"``,
            ``"a payload that is not JSON"`` …).
        invalid_object: given the failing fields of an object
            (``"cron, schedule_id, task_queue"``).
        no_one_meaning: given why an object's JSON text has no one meaning (``POST /jobs``'s
            refusal of it: ``"request body has the member 'job_id' more than once in one
            object"``).
    """

    arguments: Callable[[int], str]
    not_an_object: Callable[[str], str]
    invalid_object: Callable[[str], str]
    no_one_meaning: Callable[[str], str]


def _always() -> bool:
    return True


def read_one_input(
    args: Sequence[Any], model: type[M], refusals: InputRefusals, *, one_meaning: Callable[[], bool] = _always
) -> M | str:
    """A workflow's start arguments as one ``model``, or why they are not one (see the module doc).

    Args:
        args: the decoded start arguments (JSON values, models or ``RawValue``).
        model: the pydantic model the workflow takes.
        refusals: the workflow's wording of each refusal.
        one_meaning: whether an object whose JSON text has no one meaning is refused
            (rule 4); called only for such an object. A workflow passes its
            ``workflow.patched`` of the change; default: refused.

    Returns:
        The model (``args[0]`` itself when it already is one), or the refusal's text.
        Never raises for any input (pydantic's ``ValidationError`` becomes a refusal).
    """
    if len(args) != 1:
        return refusals.arguments(len(args))
    [value] = args
    if isinstance(value, model):
        return value
    if not isinstance(value, dict):
        kind = "a payload that is not JSON" if hasattr(value, "payload") else f"a JSON {json_type_name(value)}"
        return refusals.not_an_object(kind)
    refusal = getattr(value, "refusal", None)  # an AmbiguousObject's (rule 4)
    if refusal is not None and one_meaning():
        return refusals.no_one_meaning(str(refusal))
    try:
        return model.model_validate(value)
    except ValidationError as err:
        fields = sorted({".".join(str(p) for p in e["loc"]) or "input" for e in err.errors()})[:5]
        return refusals.invalid_object(", ".join(fields))

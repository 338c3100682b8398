"""A boolean is no number in curaflow's configuration.

pydantic's lax mode reads a boolean as an integer or a float (``true`` → 1, ``false`` →
0), so a TOML ``true`` written where a number belongs loaded as 1: ``retention.days =
true`` pruned everything older than a day, a source account's ``min_interval_ms =
true`` spaced its requests 1 ms apart (until 2026-12-07). TOML keeps booleans and numbers apart
(TOML 1.0, "Boolean", "Integer", "Float"), as a Task does (a bool is no number of a Task:
``curaflow.protocol.models.rules.whole_number``). :class:`BooleansAreNoNumbers` refuses
such a value where the setting is validated, located at the setting — at the key below it
when the boolean sits in a list, a table or a plain model of the setting
(``targets.0.filters.min_bookmarks``: :class:`~curaflow.domain.messages.TargetFilters`).
Text still reads as the number it writes (an environment variable: ``CURAFLOW_API__PORT=9000``),
and a setting that takes a boolean takes one.

Every configuration model inherits it: the settings root and its sections
(:mod:`curaflow.config`), ``[outbound]``, every route kind's and source kind's model.

Pure module: no I/O (the domain package's rule, DESIGN.md decision 11).
"""

from __future__ import annotations

import decimal
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ModelWrapValidatorHandler, ValidationError, model_validator
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError

#: What :func:`boolean_for_a_number` returns: where, below the setting, a boolean stands
#: for a number (``()``: the setting's own value), as keys and list indexes.
Where = tuple[str | int, ...]

_SEQUENCES = (list, tuple, set, frozenset)
_NUMBERS = (int, float, decimal.Decimal)


def _members(annotation: Any) -> list[Any]:
    """``annotation`` without ``Annotated`` and with each member of a union on its own."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _members(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        return [member for arg in get_args(annotation) for member in _members(arg)]
    return [annotation]


def _takes_a_boolean(member: Any) -> bool:
    if member is bool or member is Any or member is object:
        return True
    if get_origin(member) is Literal:
        return any(isinstance(arg, bool) for arg in get_args(member))
    return isinstance(member, typing.TypeVar)


def _takes_a_number(member: Any) -> bool:
    return isinstance(member, type) and issubclass(member, _NUMBERS) and member is not bool


def boolean_for_a_number(annotation: Any, value: Any) -> Where | None:
    """Where in ``value`` a boolean stands for a number ``annotation`` takes, or None.

    The value's own type decides among a union's members: a boolean is refused when no
    member takes a boolean and one takes a number (a text setting's own validation refuses
    it otherwise, in its words); a list is read by the first member that is a sequence, a
    table by the first that is a mapping or a model. A model that inherits
    :class:`BooleansAreNoNumbers` reads its own fields and is not entered.
    """
    members = _members(annotation)
    if isinstance(value, bool):
        if any(_takes_a_boolean(member) for member in members):
            return None
        return () if any(_takes_a_number(member) for member in members) else None
    for member in members:
        origin = get_origin(member) or member
        args = get_args(member)
        if isinstance(value, list | tuple) and isinstance(origin, type) and issubclass(origin, _SEQUENCES):
            for index, item in enumerate(value):
                element = args[0] if args and (origin is not tuple or args[-1] is Ellipsis or len(args) == 1) else None
                if origin is tuple and args and args[-1] is not Ellipsis:
                    element = args[index] if index < len(args) else None
                if element is None:
                    continue
                found = boolean_for_a_number(element, item)
                if found is not None:
                    return (index, *found)
            return None
        if isinstance(value, dict):
            if isinstance(origin, type) and issubclass(origin, BaseModel):
                if issubclass(origin, BooleansAreNoNumbers):
                    return None
                for key, item in value.items():
                    field = origin.model_fields.get(str(key))
                    if field is None:
                        continue
                    found = boolean_for_a_number(field.annotation, item)
                    if found is not None:
                        return (str(key), *found)
                return None
            if isinstance(origin, type) and issubclass(origin, Mapping) and len(args) == 2:
                for key, item in value.items():
                    found = boolean_for_a_number(args[1], item)
                    if found is not None:
                        return (str(key), *found)
                return None
    return None


def booleans_for_numbers(annotation: Any, value: Any) -> list[Where]:
    """Every place in ``value`` where a boolean stands for a number ``annotation`` takes
    (:func:`boolean_for_a_number`, whose rules it applies), in the value's order."""
    found: list[Where] = []
    where = boolean_for_a_number(annotation, value)
    if where is None:
        return found
    if where == () or not isinstance(value, dict | list | tuple):
        return [where]
    # the first place is in one item: read each item of the table or list on its own
    items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
    for key, item in items:
        sub = boolean_for_a_number(annotation, {key: item} if isinstance(value, dict) else _only(value, key, item))
        if sub is not None:
            found.append(sub)
    return found


def _only(value: list[Any] | tuple[Any, ...], index: int, item: Any) -> list[Any] | tuple[Any, ...]:
    """``value`` with every item but the one at ``index`` a placeholder no rule reads."""
    kept = [None] * len(value)
    kept[index] = item
    return type(value)(kept) if isinstance(value, tuple) else kept


#: The words of the refusal (``type`` ``boolean_for_a_number`` in pydantic's errors).
REFUSAL = "a boolean (true / false) is no number: write the number this setting takes"


class BooleansAreNoNumbers(BaseModel):
    """A configuration model: a boolean given for a setting that takes a number is
    refused (:func:`boolean_for_a_number`), never read as 1 or 0.

    Read over the model's input as a whole, around its validation (``mode="wrap"``): each
    refusal located at its setting as pydantic locates its own errors
    (``targets.0.filters.min_bookmarks``), and said with every other problem of the table —
    pydantic's own errors and the model's rules, but at a refused setting
    (:meth:`_refusals_below` adds a subclass's refusals of the same kind:
    :class:`curaflow.config.base.Section`'s keys a plain model does not define). Until
    later on 2026-12-07 the refusal was raised before the table was validated, and every
    other problem of it went unsaid (fixed, reloaded, refused again).
    """

    @classmethod
    def _refusals_below(cls, annotation: Any, value: Any) -> list[tuple[Where, PydanticCustomError | str]]:
        """What this model refuses in ``value`` given for a field typed ``annotation``: each as
        where below the field, and the error (its type's name, or a custom error)."""
        return [
            (where, PydanticCustomError("boolean_for_a_number", REFUSAL))
            for where in booleans_for_numbers(annotation, value)
        ]

    @model_validator(mode="wrap")
    @classmethod
    def _refuse_a_boolean_for_a_number(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        # Around the model's validation, not each field's: a wrap validator may not stand on
        # a union's tag (a route's ``kind``).
        if not isinstance(data, dict):
            return handler(data)
        errors: list[InitErrorDetails] = []
        for name, field in cls.model_fields.items():
            for key in {name, field.alias, field.validation_alias if isinstance(field.validation_alias, str) else None}:
                if key is None or key not in data:
                    continue
                errors += [
                    InitErrorDetails(type=error, loc=(key, *where), input=_at(data[key], where))
                    for where, error in cls._refusals_below(field.annotation, data[key])
                ]
        if not errors:
            return handler(data)
        refused = [detail["loc"] for detail in errors]
        try:  # the table's other problems, said with these (not again at a refused setting)
            handler(data)
        except ValidationError as err:
            errors += [
                _again(detail)
                for detail in err.errors(include_url=False)
                if not any(detail["loc"][: len(loc)] == loc for loc in refused)
            ]
        raise ValidationError.from_exception_data(cls.__name__, errors)


def _again(detail: ErrorDetails) -> InitErrorDetails:
    """One of pydantic's errors, to be raised again with others (its type kept: a custom
    type's, whose name pydantic does not know, as a custom error of the same words)."""
    again = InitErrorDetails(type=detail["type"], loc=detail["loc"], input=detail["input"])
    if "ctx" in detail:
        again["ctx"] = detail["ctx"]
    try:
        ValidationError.from_exception_data("", [again])  # made, not raised: is the type known?
    except (KeyError, TypeError, ValueError):  # KeyError "Invalid error type"
        return InitErrorDetails(
            type=PydanticCustomError(detail["type"], detail["msg"]), loc=detail["loc"], input=detail["input"]
        )
    return again


def _at(value: Any, where: Where) -> Any:
    """The value ``where`` points at in ``value``."""
    for key in where:
        value = value[key]
    return value

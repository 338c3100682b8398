"""What every section of the configuration shares: unknown keys refused, one id shape, and
how a rule across settings names the settings it is about."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, get_args

from pydantic import BaseModel, ConfigDict
from pydantic_core import PydanticCustomError

from curaflow.domain.config_numbers import BooleansAreNoNumbers, Where

#: The shape of every configured name: a target, a schedule, a route, a source instance.
ID_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def unknown_keys(model: type[BaseModel], value: Any) -> list[tuple[str, ...]]:
    """Where ``value`` (a table given for ``model``) holds a key ``model`` does not define,
    in it or in a table of a model below it (each as the keys leading to it); empty for a
    value that is no table or a model that refuses such keys itself (``extra="forbid"``)."""
    if not isinstance(value, dict) or model.model_config.get("extra") == "forbid":
        return []
    known = {key: field for name, field in model.model_fields.items() for key in (name, field.alias) if key}
    found: list[tuple[str, ...]] = []
    for key, item in value.items():
        field = known.get(str(key))
        if field is None:
            found.append((str(key),))
            continue
        for member in (field.annotation, *get_args(field.annotation)):
            if isinstance(member, type) and issubclass(member, BaseModel):
                found += [(str(key), *below) for below in unknown_keys(member, item)]
    return found


class Section(BooleansAreNoNumbers):
    """A section (or entry) of the configuration file: a key it does not define is an error,
    a boolean given for a number too (:mod:`curaflow.domain.config_numbers`).

    A field whose type is a model of another package that ignores keys it does not define
    (a target's ``query`` and ``filters``: the domain's
    :class:`~curaflow.domain.messages.TargetQuery` and
    :class:`~curaflow.domain.messages.TargetFilters`, workflow inputs) is held to the same
    rule here (:func:`unknown_keys`, in :meth:`_refusals_below`): until 2026-12-07 ``filters = { min_bookmark = 100 }``
    loaded and was dropped, the target running unfiltered.
    """

    model_config = ConfigDict(extra="forbid")

    @classmethod
    def _refusals_below(cls, annotation: Any, value: Any) -> list[tuple[Where, PydanticCustomError | str]]:
        """A boolean for a number (the base's), and each key a plain model of the field does
        not define (:func:`unknown_keys`, type ``extra_forbidden``): said with the table's
        other problems (until 2026-12-07 raised before them, and they went unsaid)."""
        found = super()._refusals_below(annotation, value)
        for member in (annotation, *get_args(annotation)):
            if isinstance(member, type) and issubclass(member, BaseModel):
                found += [(where, "extra_forbidden") for where in unknown_keys(member, value)]
        return found


#: Where a value sits in the settings, as pydantic locates an error: section, key, a
#: mapping's name, a list's index (``("targets", 0, "filters", "start_date")``).
Loc = tuple[str | int, ...]


def dotted(loc: Loc) -> str:
    """``loc`` written as the configuration checks name a setting:
    ``targets[0].filters.start_date``, ``pixiv.accounts.main.refresh_token``."""
    text = ""
    for key in loc:
        text += f"[{key}]" if isinstance(key, int) else f"{'.' if text else ''}{key}"
    return text


class SettingsProblem(ValueError):
    """A rule broken by settings its validator names itself — a rule across settings,
    checked where all of them are known (the Settings root, a section).

    Attributes:
        settings: where each setting the rule is about sits, relative to the model whose
            validator raised it (the root's: from the top), so the report names where
            each one's value came from (:func:`curaflow.config.loading.origin_of`); empty
            when the problem is no setting's (a token stored by ``curaflow pixiv login``).
    """

    def __init__(self, message: str, settings: Iterable[Loc] = ()) -> None:
        super().__init__(message)
        self.settings: tuple[Loc, ...] = tuple(settings)

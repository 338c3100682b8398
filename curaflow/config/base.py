"""What every section of the configuration shares: unknown keys refused, one id shape, and
how a rule across settings names the settings it is about."""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import ConfigDict

from curaflow.domain.config_numbers import BooleansAreNoNumbers

#: The shape of every configured name: a target, a schedule, a route, a source instance.
ID_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class Section(BooleansAreNoNumbers):
    """A section (or entry) of the configuration file: a key it does not define is an error,
    a boolean given for a number too (:mod:`curaflow.domain.config_numbers`)."""

    model_config = ConfigDict(extra="forbid")


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

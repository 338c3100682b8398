"""What every section of the configuration shares: unknown keys refused, one id shape."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

#: The shape of every configured name: a target, a schedule, a route, a source instance.
ID_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class Section(BaseModel):
    """A section (or entry) of the configuration file: a key it does not define is an error."""

    model_config = ConfigDict(extra="forbid")

"""The ``[retention]`` section: how long a finished job's bulky records are kept."""

from __future__ import annotations

from pydantic import Field

from curaflow.config.base import Section


class RetentionSettings(Section):
    """How long a finished job's bulky records are kept (:mod:`curaflow.ledger.retention`).

    Attributes:
        days: prune what finished more than this many days ago — every worker does it
            every ``interval_ms``, and it is ``curaflow prune``'s default age; None (the
            default, as in the reference) keeps everything.
        interval_ms: how often a worker prunes when ``days`` is set.
    """

    days: int | None = Field(default=None, ge=1)
    interval_ms: int = Field(default=3_600_000, ge=1000)

"""The ``[supervision]`` section: how a process restarts its background loops."""

from __future__ import annotations

from pydantic import Field

from curaflow.config.base import Section


class SupervisionSettings(Section):
    """Supervision of every background loop of a process (:mod:`curaflow.observability.supervision`).

    Attributes:
        initial_backoff_ms / max_backoff_ms: a failed loop restarts after a backoff that
            doubles from the first to the second (the first above the second is refused at
            load: :data:`curaflow.config.checks.ORDERED_SETTINGS`).
        fatal_after_ms: a loop that has not recovered for this long fails the process,
            which exits with status 3 so its supervisor restarts it.
    """

    initial_backoff_ms: int = Field(default=500, ge=10)
    max_backoff_ms: int = Field(default=30_000, ge=10)
    fatal_after_ms: int = Field(default=300_000, ge=100)

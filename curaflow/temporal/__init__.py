"""curaflow's side of Temporal: connecting (profile, converter), preparing a namespace, upgrades."""

from typing import Any


def __getattr__(name: str) -> Any:
    # ``curaflow.temporal`` was a module before it became this package: its names still
    # answer, with a DeprecationWarning naming curaflow.temporal.connection (curaflow.moved).
    from curaflow.moved import moved_attribute

    return moved_attribute(__name__, name)

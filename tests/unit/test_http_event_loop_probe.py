"""httpcore finds the event loop without searching ``sys.path`` on every request.

httpcore asks which async library runs (``current_async_library``) when it opens and
closes connections and shields a close from cancellation, i.e. several times per request.
It asks ``sniffio``; without that package installed each ask is a failed ``import`` that
walks every ``sys.path`` entry (about 2.5 % of the worker's Python time on a one-cell job,
docs/performance.md). ``sniffio`` is a dependency for that reason.
"""

from __future__ import annotations

import asyncio
import sys
from importlib.machinery import ModuleSpec
from types import ModuleType

import pytest
from httpcore import _synchronization


class SearchSpy:
    """A ``sys.meta_path`` finder that records each module the import system looks for."""

    def __init__(self) -> None:
        self.searched: list[str] = []

    def find_spec(self, name: str, path: object = None, target: ModuleType | None = None) -> ModuleSpec | None:
        self.searched.append(name)
        return None


def test_asking_for_the_event_loop_imports_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    async def ask() -> str:
        return _synchronization.current_async_library()

    assert asyncio.run(ask()) == "asyncio"  # the first ask may import sniffio once
    spy = SearchSpy()
    monkeypatch.setattr(sys, "meta_path", [spy, *sys.meta_path])
    for _ in range(3):
        assert asyncio.run(ask()) == "asyncio"
    assert spy.searched == [], f"each ask searched for {sorted(set(spy.searched))}"

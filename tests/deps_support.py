"""A worker's activity dependencies opened on a test stack, for activities run in the test
process (``ActivityEnvironment``) against the real ledger, the replay source over real
HTTP and the artifact store on disk."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from activities.deps import close_deps, open_deps
from tests.conftest import StackFactory
from tests.fakes.replay import ReplayServer
from tests.support import Stack, short_id


@asynccontextmanager
async def opened_deps(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer, **pixiv: Any
) -> AsyncIterator[tuple[Stack, Any]]:
    """A stack (target ``demo`` searching the replay, one directory route under
    ``tmp_path``; ``pixiv`` fields over the replay's ``[pixiv]``) and a worker's
    dependencies opened on it, closed on exit."""
    out = f"out-{short_id()}"
    stack = make_stack(
        {
            "pixiv": {**replay.config(), **pixiv},
            "routes": {out: {"kind": "directory", "path": str(tmp_path / "delivered")}},
            "targets": [{"id": "demo", "query": {"tags": ["x"]}, "routes": [out]}],
        }
    )
    opened = await open_deps(stack.settings, None, replay_url=replay.url)
    try:
        yield stack, opened
    finally:
        await close_deps(opened)


@pytest.fixture
async def deps(make_stack: StackFactory, tmp_path: Path, replay: ReplayServer) -> AsyncIterator[tuple[Stack, Any]]:
    """:func:`opened_deps` over the replay's own settings, as a fixture (import it into the module)."""
    async with opened_deps(make_stack, tmp_path, replay) as opened:
        yield opened


def unrecognised_count(kind: str, account: str = "default") -> float:
    """This process's ``curaflow_source_unrecognised_answers_total`` of ``account`` and
    ``kind`` (0 before the first count)."""
    value = REGISTRY.get_sample_value("curaflow_source_unrecognised_answers_total", {"account": account, "kind": kind})
    return value or 0.0

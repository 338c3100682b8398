"""Fixtures of the job-level modules that share one worker process among their tests.

Such a module defines ``shared_config(env: SharedEnv) -> dict`` (the TOML of its slots:
one target per test, its routes named by ``env.route``, accounts where it needs them) and
asks for :func:`env` in its tests; the worker starts with the first test that asks
(docs/testing.md, "Worker processes are shared per module").
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.jobs_support import Fakes, SharedEnv
from tests.support import shared_stack


@pytest.fixture(scope="module")
async def shared_env(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    temporal_address: str,
    database_url: str,
    ledger_pool: Any,
) -> AsyncIterator[SharedEnv]:
    """The module's :class:`SharedEnv`: its fakes, then one worker on ``shared_config(env)``."""
    shared_config = getattr(request.module, "shared_config", None)
    assert shared_config is not None, f"{request.module.__name__} defines no shared_config(env)"
    fakes = await Fakes.start()
    env = SharedEnv(fakes, tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1]))
    try:
        async with shared_stack(env.root, temporal_address, database_url, shared_config(env)) as stack:
            env._stack = stack
            yield env
    finally:
        await fakes.stop()


@pytest.fixture
def env(shared_env: SharedEnv) -> SharedEnv:
    """The module's :class:`SharedEnv`, its fakes reset: they saw nothing and have no script."""
    shared_env.fakes.reset()
    return shared_env

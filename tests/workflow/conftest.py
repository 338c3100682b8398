"""Fixtures of the workflow-level tests: one :class:`~tests.workflow.harness.Env` per test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from temporalio.client import Client

from tests.workflow.harness import Env, serving


@pytest.fixture
async def env(temporal_client: Client, temporal_address: str) -> AsyncIterator[Env]:
    """Fakes and in-process workers (sandboxed, as in production) on queues of their own."""
    async with serving(temporal_client, temporal_address, sandboxed=True) as env:
        yield env  # its open jobs terminated before the workers stop: nothing left for them to wait on

"""A job whose execution a worker drops from its cache ends as it would have.

A workflow worker keeps at most ``max_cached_workflows`` executions in memory; past that
— and on a worker's shutdown, a sticky queue's timeout, a nondeterminism error — the SDK
evicts one: it cancels every task of the execution and expects them to end, then replays
the history on the next activation. With a cache of 0 every activation is followed by an
eviction, so each phase of a job — its steps, a cancel, its finish, its pushes — meets
one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from curaflow.domain.messages import CallbackPolicy
from tests.workflow.fakes import Act
from tests.workflow.harness import Env, cancel_by, result_of, workers

pytestmark = pytest.mark.integration


@pytest.fixture
async def evicting(temporal_client: Client, temporal_address: str) -> AsyncIterator[Env]:
    """Workers that evict every execution after each activation (``max_cached_workflows=0``)."""
    env = Env(temporal_client, temporal_address)
    async with workers(env, sandboxed=True, max_cached_workflows=0):
        yield env


async def test_a_job_evicted_after_every_activation_ends_as_it_would_have(evicting: Env) -> None:
    handle = await evicting.start(evicting.job({"t": ["a", "b"]}))
    assert await evicting.closed(handle, timeout_s=30) == WorkflowExecutionStatus.COMPLETED
    assert (await handle.result()).status == "succeeded"


async def test_a_job_with_a_callback_evicted_after_every_activation_ends(evicting: Env) -> None:
    policy = CallbackPolicy(timeout_ms=1_000, initial_interval_ms=100, max_interval_ms=200)
    handle = await evicting.start(evicting.job(callback=True, callback_policy=policy))
    assert await evicting.closed(handle, timeout_s=30) == WorkflowExecutionStatus.COMPLETED
    assert (await handle.result()).status == "succeeded"


@pytest.mark.parametrize("path", ["signal", "temporal"])
async def test_a_job_cancelled_while_evicted_after_every_activation_ends_cancelled(evicting: Env, path: str) -> None:
    evicting.fakes.on("fetch", "t", Act("hang"))
    handle = await evicting.start(evicting.job())
    await evicting.called("fetch")
    await cancel_by(evicting, path, handle)
    assert await evicting.closed(handle, timeout_s=30) == WorkflowExecutionStatus.CANCELED
    state = await result_of(handle)
    assert (state.status, state.cells[0].reason) == ("cancelled", "cancelled_by_consumer")

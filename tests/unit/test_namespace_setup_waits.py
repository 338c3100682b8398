"""The namespace setup waits out Temporal's refusals of the moment (``curaflow.temporal.namespace``).

A worker's start prepares its namespace (``ensure_namespace``, the search attributes, the
Nexus endpoint); a Temporal answer that says the service cannot serve the request now — an
outage, or its rate limit (``RESOURCE_EXHAUSTED``: a namespace's requests per second, Temporal
Cloud's limits) — is waited out until the setup's time ends, as the outage statuses were.
Until 2026-12-07 a rate limit at start-up was the setup's failure: the worker exited 2
("cannot start"), the status of a configuration to mend, and a supervisor restarting it
into the same limit.
"""

from __future__ import annotations

import time

import pytest
from temporalio.service import RPCError, RPCStatusCode

from curaflow.temporal.namespace import TemporalSetupError, _retrying


@pytest.mark.parametrize("status", [RPCStatusCode.RESOURCE_EXHAUSTED, RPCStatusCode.UNAVAILABLE, RPCStatusCode.ABORTED])
async def test_a_refusal_of_the_moment_is_waited_out(status: RPCStatusCode) -> None:
    calls: list[int] = []

    async def call() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise RPCError("namespace rate limit exceeded", status, b"")
        return "described"

    assert await _retrying("describe namespace", time.monotonic() + 30, call) == "described"
    assert len(calls) == 3


@pytest.mark.parametrize("status", [RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.INVALID_ARGUMENT])
async def test_a_refusal_for_good_fails_the_setup_at_once(status: RPCStatusCode) -> None:
    calls: list[int] = []

    async def call() -> str:
        calls.append(1)
        raise RPCError("refused", status, b"")

    with pytest.raises(TemporalSetupError, match=status.name):
        await _retrying("describe namespace", time.monotonic() + 30, call)
    assert len(calls) == 1

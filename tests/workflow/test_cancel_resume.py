"""A worker lost while it records a cancel (``request_cancel``) costs seconds, not 30.

The case (a cancel storm with worker kills, ``curaflow chaos``): a job cancelled by the
``cancel`` signal whose worker is SIGKILLed while it runs ``request_cancel`` must not end
31 s later, its attempt retried only when a 30 s start-to-close timeout expires (it has
no heartbeat), while every other step resumes
within its heartbeat timeout and ``finish`` within 10 s.
"""

from __future__ import annotations

import time

import pytest
from temporalio.client import WorkflowExecutionStatus

from tests.workflow.fakes import Act
from tests.workflow.harness import Env

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.timeout(90)
async def test_a_worker_lost_during_request_cancel_is_replaced_within_ten_seconds(env: Env) -> None:
    env.fakes.on("search", "t", Act("hang"))
    env.fakes.cancel_acts = [Act("silent", seconds=120)]  # the first attempt's worker is gone
    handle = await env.start(env.job())
    await env.called("search")

    began = time.monotonic()
    await handle.cancel()
    status = await env.closed(handle, timeout_s=60)
    took = time.monotonic() - began

    assert status == WorkflowExecutionStatus.CANCELED
    assert len(env.fakes.cancels) == 2  # the lost attempt, then its retry
    assert took < 20, f"cancel converged after {took:.1f} s"

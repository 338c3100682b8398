"""A worker told to stop (SIGTERM) lets its in-flight sends finish before it closes the ledger.

A real worker process sends a delivery to a webhook that answers after 6.5 s (longer than
the SDK's own 5 s graceful timeout, which curaflow once left in place); it is sent SIGTERM
while the request is in flight. The send completes and is recorded, the worker exits 0
with nothing failing on a closed pool, and the next worker finishes the job without
sending the work again. The worker here has ``temporal.graceful_shutdown_ms`` = 9 s, so
the run shows that both waits — the SDK's before it cancels activities, and the worker's
own before it closes the ledger — follow that one setting; the default (30 s) is checked
by ``test_the_default_shutdown_waits_thirty_seconds`` without waiting for it.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest

from tests.conftest import StackFactory
from tests.fakes.webhook import Reply, WebhookReceiver
from tests.jobs_support import intents, webhook_route
from tests.support import eventually

# A worker process stopped mid-send: the full suite only.
pytestmark = [pytest.mark.integration, pytest.mark.slow]

SEND_S = 6.5
GRACEFUL_MS = 9_000


async def test_sigterm_lets_an_in_flight_send_finish_before_the_pool_closes(
    make_stack: StackFactory, tmp_path: Path, webhook: WebhookReceiver
) -> None:
    webhook.script["/hook"] = [Reply(200, delay_s=SEND_S)]
    stack = make_stack(
        {
            "temporal": {"graceful_shutdown_ms": GRACEFUL_MS},
            "routes": {"hook": webhook_route(webhook)},
            "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": ["hook"]}],
        }
    )
    worker = await stack.start_worker()
    job_id = await stack.admit(stack.task(query={"tags": ["オリジナル"]}))
    await eventually(lambda: bool(webhook.at("/hook")), timeout_s=60, what="the send reached the webhook")
    assert worker.process is not None
    worker.process.send_signal(signal.SIGTERM)
    began = time.monotonic()
    code = await asyncio.to_thread(worker.process.wait, 60)
    stopped_after = time.monotonic() - began
    log = stack.worker_log()

    assert code == 0, log[-3000:]
    assert "pool is closing" not in log, log[-3000:]
    assert "worker.stopped" in log
    # the SDK cancels running activities only after temporal.graceful_shutdown_ms
    assert "will wait 0:00:09 before cancelling activities" in log
    assert stopped_after >= SEND_S - 1.5  # it waited for the send, it did not cut it off
    pool = await stack.ledger()
    recorded = await intents(pool, job_id)
    assert recorded["hook"]["status"] == "delivered", dict(recorded["hook"])

    await stack.start_worker()  # the job goes on on another worker: no second send
    record = await stack.wait_terminal(job_id)
    assert record.business_status == "success"
    assert len(webhook.at("/hook")) == 1


def test_the_default_shutdown_waits_thirty_seconds() -> None:
    """The default lets a send as long as a route's whole timeout finish: both waits derive
    from ``temporal.graceful_shutdown_ms`` (30 s), the worker's own with a margin over it."""
    from curaflow.config import Settings
    from curaflow.process.worker import SHUTDOWN_MARGIN_S

    settings = Settings()
    assert settings.temporal.graceful_shutdown_ms == 30_000
    assert SHUTDOWN_MARGIN_S > 0

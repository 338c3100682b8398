"""An operator's *raised* retry budget on a running delivery is honoured: real worker
process, Temporal dev server (its ``temporal`` CLI), PostgreSQL, a webhook receiver.

``temporal activity update-options --retry-maximum-attempts N`` on a job's ``deliver``
step changes the retry policy Temporal holds for it. A *lowered* budget is the
operator's cut (``step_options_changed``, tests/integration/test_operator_report.py); a
raised one must give the step the attempts the operator granted — the step judged its
last attempt from the budget the workflow scheduled and ended the cell
``delivery_abandoned`` while Temporal would have retried it.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest
from temporalio.client import Client

from curaflow.devstack.temporal import temporal_binary
from tests.conftest import StackFactory
from tests.fakes.webhook import Reply, WebhookReceiver
from tests.operator_support import pending_step
from tests.support import Stack, eventually, whsec

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def update_options(address: str, job_id: str, step: str, *options: str) -> None:
    """``temporal activity update-options`` with ``options`` on the job's step ``step``."""
    done = await asyncio.to_thread(
        subprocess.run,
        [temporal_binary(), "activity", "update-options", "-w", job_id, "-a", step, *options, "--address", address],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def hook_stack(make_stack: StackFactory, webhook: WebhookReceiver, path: str, **delivery: object) -> Stack:
    """A stack of one target whose webhook route posts to ``path``; two delivery attempts
    scheduled, 200 ms apart, unless ``delivery`` says otherwise."""
    return make_stack(
        {
            "delivery": {"max_attempts": 2, "retry_initial_interval_ms": 200, "retry_max_interval_ms": 200, **delivery},
            "routes": {"hook": {"kind": "webhook", "url": webhook.url + path, "secret": whsec()}},
            "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": ["hook"]}],
        }
    )


async def test_a_delivery_whose_retry_budget_an_operator_raised_gets_the_attempts_granted(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client, temporal_address: str, webhook: WebhookReceiver
) -> None:
    # Two attempts scheduled; the receiver answers 503 three times (the first held 3 s
    # while the operator raises the budget to 5), then 200.
    webhook.script["/raise"] = [Reply(503, delay_s=3.0), Reply(503), Reply(503), Reply(200)]
    stack = hook_stack(make_stack, webhook, "/raise")
    await stack.start_worker()
    job_id = await stack.admit(stack.task(query={"tags": ["オリジナル"]}))
    await asyncio.wait_for(webhook.arrived.wait(), timeout=60)
    step = await pending_step(temporal_client, job_id, "deliver")

    await update_options(temporal_address, job_id, step, "--retry-maximum-attempts", "5")

    record = await stack.wait_terminal(job_id)
    [cell] = record.cells
    assert (cell.state, cell.reason) == ("submitted", None), record
    assert [r.path for r in webhook.received] == ["/raise"] * 4  # the fourth attempt, granted, delivered


async def test_a_budget_raised_while_the_scheduled_last_attempt_runs_gives_that_attempt_a_next_one(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client, temporal_address: str, webhook: WebhookReceiver
) -> None:
    # The operator raises the budget to 5 while the second — the scheduled last — attempt
    # waits for its answer (held 3 s), then 503. Temporal would retry it; the attempt
    # judged itself against the policy it started with (2) and ended the cell
    # `delivery_abandoned`, owner route, the raise ignored.
    webhook.script["/raise-late"] = [Reply(503), Reply(503, delay_s=3.0), Reply(503), Reply(200)]
    stack = hook_stack(make_stack, webhook, "/raise-late")
    await stack.start_worker()
    job_id = await stack.admit(stack.task(query={"tags": ["オリジナル"]}))
    await eventually(lambda: len(webhook.received) >= 2, timeout_s=60, what="the second attempt's send")
    step = await pending_step(temporal_client, job_id, "deliver")
    await update_options(temporal_address, job_id, step, "--retry-maximum-attempts", "5")

    record = await stack.wait_terminal(job_id)
    [cell] = record.cells
    assert (cell.state, cell.reason) == ("submitted", None), record
    assert [r.path for r in webhook.received] == ["/raise-late"] * 4

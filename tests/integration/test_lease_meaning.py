"""What ``lease_active`` means on a running job (docs/http-api.md "Liveness fields").

curaflow keeps no job-level lease: ``lease_active`` is true exactly while an activity
attempt of one of the job's cells runs and heartbeats (its cell lease), false between
steps and while Temporal waits to retry a failed attempt — a delivery's retry backoff —
even though the job is ``running``. This test pins that documented meaning on a real
delivery that is refused twice (503) and then accepted after a slow answer.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import StackFactory
from tests.fakes.webhook import Reply, WebhookReceiver
from tests.jobs_support import webhook_route
from tests.support import short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def test_lease_active_follows_activity_attempts_not_the_running_period(
    make_stack: StackFactory, webhook: WebhookReceiver, tmp_path: Path
) -> None:
    hook = f"hook-{short_id()}"
    stack = make_stack(
        {
            "routes": {hook: webhook_route(webhook, "/lease")},
            "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [hook]}],
            # a backoff long enough to be observed between two delivery attempts
            "delivery": {"retry_initial_interval_ms": 3000, "retry_max_interval_ms": 3000},
        }
    )
    webhook.script["/lease"] = [Reply(status=503), Reply(status=503), Reply(delay_s=1.5)]
    await stack.start_worker()
    http = await stack.start_api()
    job_id = (await http.post("/jobs", json=stack.task(query={"tags": ["オリジナル"]}))).json()["job"]["job_id"]

    seen: list[tuple[float, dict[str, Any], int]] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job = (await http.get(f"/jobs/{job_id}")).json()
        seen.append((time.monotonic(), job, len(webhook.at("/lease"))))
        if job["status"] not in ("queued", "running"):
            break
        await asyncio.sleep(0.05)
    final = seen[-1][1]
    assert final["status"] == "succeeded", final
    assert len(webhook.at("/lease")) == 3

    delivering = [
        (job, sent) for _, job, sent in seen if job["status"] == "running" and job["progress"]["stage"] == "delivering"
    ]
    # between the refused attempts, waiting for Temporal's retry: running, but no lease
    backoff = [job for job, sent in delivering if sent in (1, 2) and not job["lease_active"]]
    assert len(backoff) >= 10, [(j["lease_active"], s) for j, s in delivering]
    assert all(job["lease_expires_at"] is None for job in backoff)
    # while the accepted attempt is in flight (its slow answer): the cell's lease is live
    in_flight = [job for job, sent in delivering if sent == 3 and job["lease_active"]]
    assert in_flight, [(j["lease_active"], s) for j, s in delivering]
    assert all(job["lease_expires_at"] is not None for job in in_flight)
    # once terminal, never a lease
    assert final["lease_active"] is False and final["lease_expires_at"] is None

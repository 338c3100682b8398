"""Cancellation: three ways in, one path; in-flight work stops; no cancel ever lies.

One real worker process, the API in the test process, the Pixiv replay server and a
webhook receiver in the test process (their faults are changed per test).
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus

from curaflow.devstack.temporal import temporal_binary
from curaflow.domain.messages import JobState
from tests.fakes.webhook import Reply, WebhookReceiver
from tests.jobs_support import WebhookEnv, webhook_env
from tests.support import activity_attempts, closed_status, eventually, job_in_stage, short_id, whsec

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@dataclass
class Env(WebhookEnv):
    """:class:`~tests.jobs_support.WebhookEnv` with the directory route's folder."""

    out_dir: Path = Path()


@pytest.fixture(scope="module")
async def env(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str, ledger_pool: Any
) -> AsyncIterator[Env]:
    tmp = tmp_path_factory.mktemp("cancel")
    out, web = f"out-{short_id()}", f"hook-{short_id()}"

    def config(hook: WebhookReceiver) -> dict[str, Any]:
        return {
            "api": {"cancel_wait_ms": 8000},
            "routes": {
                out: {"kind": "directory", "path": str(tmp / "out")},
                web: {"kind": "webhook", "url": hook.url + "/slow", "secret": whsec()},
            },
            "targets": [
                {"id": "dir", "query": {"tags": ["オリジナル"]}, "routes": [out]},
                {"id": "hook", "query": {"tags": ["風景"]}, "routes": [web]},
            ],
        }

    async with webhook_env(tmp, temporal_address, database_url, config) as opened:
        yield Env(**vars(opened), out_dir=tmp / "out")


@pytest.fixture(autouse=True)
def reset_faults(env: Env) -> None:
    env.replay.faults.search_delay_s = 0.0
    env.replay.faults.slow_images_s = 0.0
    env.hook.script.clear()


async def submit(env: Env, target: str) -> str:
    response = await env.http.post("/jobs", json=env.stack.task(target_id=target))
    assert response.status_code == 202, response.text
    return response.json()["job"]["job_id"]


def assert_cancelled(job: dict[str, Any]) -> None:
    assert job["status"] == "cancelled", job
    assert job["error"]["code"] == "cancelled_by_consumer"
    assert job["error"]["retryable"] is False
    assert job["error"]["detail"]["internal_code"] == "cancelled_by_consumer"
    # Nothing went out: a bound work's intents are reported, released.
    assert {d["status"] for d in job["error"]["detail"]["deliveries"]} <= {"released"}
    assert job["progress"]["stage"] == "cancelled"


async def assert_cancelled_outcome(env: Env, job_id: str) -> None:
    pool = await env.stack.ledger()
    row = await pool.fetchrow("SELECT business_status, alertable, record FROM outcomes WHERE job_id = $1", job_id)
    assert (row["business_status"], row["alertable"]) == ("cancelled", False)
    target = row["record"]["cells"]["targets"][0]
    assert (target["status"], target["terminal_reason_code"]) == ("failed", "cancelled_by_consumer")
    assert row["record"]["cells"]["cancelled"] == 1


async def test_http_cancel_while_searching_stops_the_search(env: Env) -> None:
    env.replay.faults.search_delay_s = 30
    job_id = await submit(env, "dir")
    await job_in_stage(env.http, job_id, "searching")

    started = time.monotonic()
    response = await env.http.post(f"/jobs/{job_id}/cancel")
    took = time.monotonic() - started

    assert response.status_code == 200
    assert_cancelled(response.json())
    assert took < 5, f"cancel took {took:.1f}s with a 1 s heartbeat interval"
    assert await closed_status(env.client, job_id) == WorkflowExecutionStatus.CANCELED
    await assert_cancelled_outcome(env, job_id)
    state = await env.client.get_workflow_handle(job_id).query("status", result_type=JobState)
    assert state.status == "cancelled"


async def test_http_cancel_while_fetching_never_delivers(env: Env) -> None:
    env.replay.faults.slow_images_s = 30
    job_id = await submit(env, "hook")
    await job_in_stage(env.http, job_id, "fetching")

    response = await env.http.post(f"/jobs/{job_id}/cancel")

    assert_cancelled(response.json())
    assert "deliver" not in await activity_attempts(env.client, job_id)  # closed: it never will be
    assert [r for r in env.hook.received if job_id in r.headers.get("webhook-id", "")] == []
    pool = await env.stack.ledger()
    statuses = await pool.fetch("SELECT status FROM delivery_intents WHERE job_id = $1", job_id)
    assert [r["status"] for r in statuses] == ["released"]


async def test_cancel_during_an_in_flight_delivery_reports_what_landed(env: Env) -> None:
    # The receiver answers 0.3 s after it got the request: the answer lands within the
    # grace a cancel gives a send that is out (CANCEL_GRACE_S), so it is recorded and
    # the job reports the delivery instead of claiming a cancel.
    env.hook.script["/slow"] = [Reply(200, {"status": "accepted"}, delay_s=0.3)]
    job_id = await submit(env, "hook")
    await asyncio.wait_for(env.hook.arrived.wait(), 20)
    env.hook.arrived.clear()

    response = await env.http.post(f"/jobs/{job_id}/cancel")

    job = response.json()
    assert job["status"] == "succeeded", job
    assert len([r for r in env.hook.received if job_id in r.headers["webhook-id"]]) == 1
    record = await env.stack.job(job_id)
    assert record.cells[0].state == "submitted"
    assert record.business_status == "success"


async def test_cancel_during_a_send_that_does_not_answer_cuts_it_and_reports_it_unknown(env: Env) -> None:
    # The answer would come 20 s after the request: a cancel cuts the send within about
    # a second; the job is cancelled and the send, which may have landed, is unknown —
    # never delivered, never released.
    env.hook.script["/slow"] = [Reply(200, {"status": "accepted"}, delay_s=20)]
    job_id = await submit(env, "hook")
    await asyncio.wait_for(env.hook.arrived.wait(), 20)
    env.hook.arrived.clear()

    started = time.monotonic()
    response = await env.http.post(f"/jobs/{job_id}/cancel")
    assert response.json()["status"] == "cancelled", response.json()
    assert time.monotonic() - started < 4.0
    record = await env.stack.job(job_id)
    assert record.cells[0].state == "failed"
    pool = await env.stack.ledger()
    status = await pool.fetchval("SELECT status FROM delivery_intents WHERE job_id = $1", job_id)
    assert status == "unknown"


async def test_cancel_while_the_receiver_asked_to_come_back_later_ends_now(env: Env) -> None:
    # Guard: the receiver answered 503 with a Retry-After of 10 min (within the job's
    # 30 min deadline), which the delivery waits as asked (recorded on its intent). A
    # cancel meanwhile ends the job within the API's cancel wait, not after the 10 min:
    # nothing is out, nothing is sent again, the intent is released, and a cancel names
    # no hold.
    env.hook.script["/slow"] = [Reply(503, {"error": "down for maintenance"}, headers={"Retry-After": "600"})]
    job_id = await submit(env, "hook")
    await asyncio.wait_for(env.hook.arrived.wait(), 20)
    env.hook.arrived.clear()
    pool = await env.stack.ledger()
    await eventually(  # the 503 is recorded: the delivery waits out the stated hour
        lambda: pool.fetchval(
            "SELECT last_error IS NOT NULL AND status = 'reserved' FROM delivery_intents WHERE job_id = $1", job_id
        ),
        what="the 503 recorded on the intent",
    )

    response = await env.http.post(f"/jobs/{job_id}/cancel")

    job = response.json()
    assert_cancelled(job)  # converged within api.cancel_wait_ms (8 s), not the 10 min
    assert "held_by" not in job["error"]["detail"]
    assert await closed_status(env.client, job_id) == WorkflowExecutionStatus.CANCELED
    await assert_cancelled_outcome(env, job_id)
    assert len([r for r in env.hook.received if job_id in r.headers["webhook-id"]]) == 1


async def test_cancel_signal_from_the_temporal_cli(env: Env, temporal_address: str) -> None:
    env.replay.faults.slow_images_s = 30
    job_id = await submit(env, "dir")
    await job_in_stage(env.http, job_id, "fetching")

    subprocess.run(
        [temporal_binary(), "workflow", "signal", "--address", temporal_address, "-w", job_id, "--name", "cancel"],
        check=True,
        capture_output=True,
        timeout=30,
    )

    assert await closed_status(env.client, job_id) == WorkflowExecutionStatus.CANCELED
    record = await env.stack.wait_terminal(job_id, 20)
    assert (record.cells[0].state, record.cells[0].reason) == ("failed", "cancelled_by_consumer")
    assert_cancelled((await env.http.get(f"/jobs/{job_id}")).json())
    await assert_cancelled_outcome(env, job_id)
    assert not (env.out_dir / (record.cells[0].work_id or "none")).exists()


async def test_temporal_cancel_request_from_the_cli(env: Env, temporal_address: str) -> None:
    env.replay.faults.search_delay_s = 30
    job_id = await submit(env, "dir")
    await job_in_stage(env.http, job_id, "searching")

    subprocess.run(
        [temporal_binary(), "workflow", "cancel", "--address", temporal_address, "-w", job_id],
        check=True,
        capture_output=True,
        timeout=30,
    )

    assert await closed_status(env.client, job_id) == WorkflowExecutionStatus.CANCELED
    await env.stack.wait_terminal(job_id, 20)
    assert_cancelled((await env.http.get(f"/jobs/{job_id}")).json())
    await assert_cancelled_outcome(env, job_id)


async def test_handle_cancel_with_reason(env: Env) -> None:
    env.replay.faults.slow_images_s = 30
    job_id = await submit(env, "dir")
    await job_in_stage(env.http, job_id, "fetching")

    await env.client.get_workflow_handle(job_id).cancel(reason="cancelled_by_consumer")

    assert await closed_status(env.client, job_id) == WorkflowExecutionStatus.CANCELED
    await env.stack.wait_terminal(job_id, 20)
    assert_cancelled((await env.http.get(f"/jobs/{job_id}")).json())


async def test_cancelling_a_terminal_job_is_a_no_op(env: Env) -> None:
    job_id = await submit(env, "dir")
    done = await env.stack.wait_terminal(job_id)
    assert done.cells[0].state == "submitted"
    before = (await env.http.get(f"/jobs/{job_id}")).json()

    first = await env.http.post(f"/jobs/{job_id}/cancel")
    second = await env.http.post(f"/jobs/{job_id}/cancel", json={"ignored": True})

    assert first.status_code == second.status_code == 200
    assert first.json() == second.json() == before
    assert before["status"] == "succeeded"
    assert await closed_status(env.client, job_id) == WorkflowExecutionStatus.COMPLETED


async def test_second_cancel_returns_an_identical_body(env: Env) -> None:
    env.replay.faults.search_delay_s = 30
    job_id = await submit(env, "dir")
    await job_in_stage(env.http, job_id, "searching")

    first = await env.http.post(f"/jobs/{job_id}/cancel")
    second = await env.http.post(f"/jobs/{job_id}/cancel")

    assert_cancelled(first.json())
    assert first.json() == second.json()


async def test_cancel_unknown_job(env: Env) -> None:
    response = await env.http.post("/jobs/nope@manual-x/cancel")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "invalid_params"
    assert response.json()["error"]["detail"]["reason"] == "unknown_job"


async def test_cancel_before_the_workflow_exists_still_ends_canceled(env: Env) -> None:
    from curaflow.jobs.admission import Admitter

    pool = await env.stack.ledger()
    # Admitted, but its workflow not started yet (the API starts it in the background;
    # here nobody does until the reconciler): the HTTP cancel cannot reach Temporal.
    admission = await Admitter(env.stack.settings, pool, None).admit(env.stack.task(target_id="dir"))
    job_id = admission.job_id

    response = await env.http.post(f"/jobs/{job_id}/cancel")

    assert_cancelled(response.json())
    # The API's background starter gets to it now: the workflow finds the cancel in the
    # ledger and ends the execution Canceled instead of running (or completing) the job.
    await Admitter(env.stack.settings, pool, env.client).start(job_id)
    assert await closed_status(env.client, job_id) == WorkflowExecutionStatus.CANCELED
    assert_cancelled((await env.http.get(f"/jobs/{job_id}")).json())
    await assert_cancelled_outcome(env, job_id)


async def test_a_cancel_recorded_in_the_ledger_but_lost_on_the_way_to_temporal(env: Env) -> None:
    env.replay.faults.search_delay_s = 2
    job_id = await submit(env, "hook")
    await job_in_stage(env.http, job_id, "searching")
    pool = await env.stack.ledger()
    # What POST /jobs/{id}/cancel writes first; its Temporal cancel request is "lost".
    await pool.execute(
        "UPDATE jobs SET cancel_requested_at = $2, cancel_reason = 'cancelled_by_consumer' WHERE job_id = $1",
        job_id,
        int(time.time() * 1000),
    )

    assert await closed_status(env.client, job_id, timeout_s=30) == WorkflowExecutionStatus.CANCELED
    record = await env.stack.wait_terminal(job_id, 20)
    assert (record.cells[0].state, record.cells[0].reason) == ("failed", "cancelled_by_consumer")
    assert_cancelled((await env.http.get(f"/jobs/{job_id}")).json())
    assert [r for r in env.hook.received if job_id in r.headers.get("webhook-id", "")] == []


@pytest.mark.parametrize("payload", ["5", "[1, 2]", '{"reason": 5}', '"operator stop"'])
async def test_any_cancel_signal_argument_cancels(env: Env, temporal_address: str, payload: str) -> None:
    env.replay.faults.slow_images_s = 30
    job_id = await submit(env, "dir")
    await job_in_stage(env.http, job_id, "fetching")

    subprocess.run(
        [temporal_binary(), "workflow", "signal", "--address", temporal_address, "-w", job_id, "--name", "cancel",
         "--input", payload],
        check=True,
        capture_output=True,
        timeout=30,
    )  # fmt: skip

    assert await closed_status(env.client, job_id) == WorkflowExecutionStatus.CANCELED
    await env.stack.wait_terminal(job_id, 20)
    assert_cancelled((await env.http.get(f"/jobs/{job_id}")).json())

"""What a job reports when an operator acted on it in the Temporal UI or CLI: its outcome
record, its cell's reason and message and ``GET /jobs/{id}`` name what the operator did,
and blame the operator — not curaflow, a worker, a route or the deadline.

The stack of :mod:`tests.operator_support` (a real worker process, the replay, a webhook
receiver, the fake Telegram).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.webhook import Reply
from tests.operator_support import OperatorEnv, cli, env, no_faults_left, running_step, submit
from tests.support import job_in_stage, recorded_history, terminal_job

pytestmark = [pytest.mark.integration, pytest.mark.slow]

Env = OperatorEnv
ROOT = Path(__file__).resolve().parents[2]
__all__ = ["env", "no_faults_left"]  # the module's fixtures (tests.operator_support)


async def outcome_of(env: Env, job_id: str) -> dict[str, Any]:
    """The job's outcome record (the ledger's ``outcomes.record``)."""
    pool = await env.stack.ledger()
    record = await pool.fetchval("SELECT record FROM outcomes WHERE job_id = $1", job_id)
    assert record is not None, job_id
    return dict(record)


async def test_a_download_an_operator_timed_out_by_its_options_reports_the_operators_change(env: Env) -> None:
    # The download is slow (4 s an image); the operator gives the running step a 1 s
    # start-to-close timeout and one attempt: Temporal times it out, the deadline far
    # ahead. The report said `internal_error`, "An internal error occurred; read the
    # worker's log", owner `curaflow`: a bug of curaflow's that never happened — the log
    # holds nothing of it, and a rerun as the sentence implies repeats nothing.
    env.replay.faults.slow_images_s = 4
    job_id = await submit(env, "dir")
    await job_in_stage(env.http, job_id, "fetching")
    step = await running_step(env, job_id, "acquire")

    changed = await asyncio.to_thread(
        cli,
        env,
        "activity",
        "update-options",
        "-w",
        job_id,
        "-a",
        step,
        "--start-to-close-timeout",
        "1s",
        "--retry-maximum-attempts",
        "1",
    )
    assert changed.returncode == 0, changed.stderr

    job = await terminal_job(env.http, job_id, timeout_s=60)
    assert job["status"] == "failed", job
    error = job["error"]
    assert (error["detail"]["internal_code"], error["detail"].get("owner")) == ("step_options_changed", "operator"), job
    assert "operator" in error["message"] and "options" in error["message"], error["message"]
    assert "internal error" not in error["message"], error["message"]
    outcome = await outcome_of(env, job_id)
    [cell] = outcome["cells"]["targets"]
    assert cell["terminal_reason_code"] == "step_options_changed", cell
    assert "operator" in outcome["user_message"]["en"], outcome["user_message"]


async def test_a_download_an_operator_failed_by_hand_reports_the_operators_hand(env: Env) -> None:
    # `temporal activity fail` on the running download: GET /jobs said `internal_error`,
    # "An internal error occurred; read the worker's log", owner `curaflow`.
    env.replay.faults.slow_images_s = 4
    job_id = await submit(env, "dir")
    await job_in_stage(env.http, job_id, "fetching")
    step = await running_step(env, job_id, "acquire")

    failed = await asyncio.to_thread(cli, env, "activity", "fail", "-w", job_id, "-a", step, "--reason", "ops: stop")
    assert failed.returncode == 0, failed.stderr

    job = await terminal_job(env.http, job_id, timeout_s=60)
    if job["status"] == "succeeded":  # the step's own attempt bound and stored its work first: delivered
        return
    error = job["error"]
    assert (job["status"], error["detail"]["internal_code"], error["detail"].get("owner")) == (
        "failed",
        "step_ended_by_hand",
        "operator",
    ), job
    assert "by hand" in error["message"] and "internal error" not in error["message"], error["message"]


#: The paused delivery's deadline: past the receiver's answer (3 s after the send arrived,
#: itself a second or two after the job's start) with room for a busy machine, and all
#: the test then waits for (20 s until 2026-12-07: ~8 s more of nothing happening).
PAUSED_DEADLINE_MS = 12_000


async def test_a_delivery_an_operator_paused_until_the_deadline_names_the_pause(env: Env) -> None:
    # The receiver answers 503 (no Retry-After) 3 s after it got the send; the operator
    # pauses the step meanwhile. The attempt ends by that answer and the pause holds the
    # next one; nobody unpauses, and the job's deadline (:data:`PAUSED_DEADLINE_MS`) passes. The report said
    # `expired / execution_timeout`: "The job ran past its deadline; retry with a longer
    # deadline_ms or a narrower query", owner `curaflow` — naming no pause, and a remedy
    # that does not help while the step stays paused.
    env.hook.script["/slow"] = [Reply(503, {"error": "down"}, delay_s=3)]
    response = await env.http.post(
        "/jobs", json={**env.stack.task(target_id="hook"), "deadline_ms": PAUSED_DEADLINE_MS}
    )
    assert response.status_code == 202, response.text
    job_id = str(response.json()["job"]["job_id"])
    await asyncio.wait_for(env.hook.arrived.wait(), 20)
    env.hook.arrived.clear()
    step = await running_step(env, job_id, "deliver")
    paused = await asyncio.to_thread(cli, env, "activity", "pause", "-w", job_id, "-a", step)
    assert paused.returncode == 0, paused.stderr

    job = await terminal_job(env.http, job_id, timeout_s=60)
    record_history(env, job_id, HISTORY_NAME)
    assert job["status"] == "expired", job
    error = job["error"]
    assert (error["code"], error["detail"]["internal_code"], error["detail"].get("owner")) == (
        "deadline_exceeded",
        "step_paused",
        "operator",
    ), job
    assert "paused" in error["message"] and "deadline_ms" not in error["message"], error["message"]
    outcome = await outcome_of(env, job_id)
    [cell] = outcome["cells"]["targets"]
    assert cell["terminal_reason_code"] == "step_paused", cell
    assert "paused" in outcome["user_message"]["en"], outcome["user_message"]
    assert len([r for r in env.hook.received if job_id in r.headers["webhook-id"]]) == 1  # never sent again


#: The history :func:`record_history` writes (``CURAFLOW_RECORD_HISTORIES=1``; on the commit
#: before ``paused-steps``, ``CURAFLOW_HISTORY_NAME`` names the file of the old shape).
HISTORY_NAME = os.environ.get("CURAFLOW_HISTORY_NAME", "job_paused_at_deadline_core_v3")


def record_history(env: Env, job_id: str, name: str) -> None:
    """Write the job's history to tests/histories (``CURAFLOW_RECORD_HISTORIES=1``)."""
    if os.environ.get("CURAFLOW_RECORD_HISTORIES") != "1":
        return
    done = cli(env, "workflow", "show", "-w", job_id, "-o", "json")
    assert done.returncode == 0, done.stderr
    (ROOT / "tests" / "histories" / f"{name}.json").write_text(recorded_history(done.stdout))

"""What a job reports when an operator acted on it in the Temporal UI or CLI: its outcome
record, its cell's reason and message and ``GET /jobs/{id}`` name what the operator did,
and blame the operator — not curaflow, a worker, a route or the deadline.

The stack of :mod:`tests.operator_support` (a real worker process, the replay, a webhook
receiver, the fake Telegram).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.operator_support import OperatorEnv, cli, env, no_faults_left, running_step, submit
from tests.support import job_in_stage, terminal_job

pytestmark = [pytest.mark.integration, pytest.mark.slow]

Env = OperatorEnv
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

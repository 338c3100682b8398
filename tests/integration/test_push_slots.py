"""A consumer's receiver that never answers holds pushes, never a job's own steps.

Each push (``push_events``) holds a worker's activity slot for as long as its send is out
(``api.callback_timeout_ms``, 30 s by default), and pushes are owed long after their jobs
ended (the sweeper's ``EventPushWorkflow`` runs). A receiver that accepts connections and
never answers — one consumer's outage — must cost pushes only: the jobs a worker runs
meanwhile (theirs and every other consumer's) take their steps as if it answered.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import asyncpg
import pytest
from temporalio.client import Client
from temporalio.service import RPCError

from curaflow.domain.execution import PUSH_WORKFLOW
from curaflow.domain.messages import PushInput
from curaflow.jobs.pushes import push_workflow_id
from tests.conftest import StackFactory
from tests.fakes.hostile import Behaviour, HostileParty
from tests.support import eventually, job_owing_pushes, push_config, terminal_job

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: Push runs started at once: as many as the Temporal SDK's activity slots of a worker's
#: task queue when none is configured (``WorkerTuner.create_fixed``: 100).
PUSH_RUNS = 100
#: One push's whole time in this test (ms): far longer than a job of the replay takes.
PUSH_TIMEOUT_MS = 90_000


async def test_pushes_to_a_receiver_that_never_answers_never_hold_a_jobs_steps(
    make_stack: StackFactory, ledger_pool: asyncpg.Pool, temporal_client: Client, tmp_path: Path
) -> None:
    # 100 ended jobs owe their consumer an event; its receiver takes each connection and
    # never answers. Their push runs take every slot they can, each for PUSH_TIMEOUT_MS.
    # A job submitted meanwhile (no callback) runs to its end while every push still
    # hangs. Until 2026-12-07 pushes shared the main task queue's 100 activity slots with
    # every job's `deliver`: the job's delivery waited until the receiver's sends timed
    # out, one job's consumer's outage held every job of the worker.
    receiver = await HostileParty(default=Behaviour("hang")).start()
    stack = make_stack(push_config(tmp_path, tags=("オリジナル",), callback_timeout_ms=PUSH_TIMEOUT_MS))
    owed: list[str] = []
    try:
        owed += [
            await job_owing_pushes(ledger_pool, f"{receiver.url}/hook", label="owed", ended=True)
            for _ in range(PUSH_RUNS)
        ]
        await stack.start_worker()
        policy = stack.settings.push_policy()
        for job_id in owed:
            await temporal_client.start_workflow(
                PUSH_WORKFLOW,
                PushInput(job_id=job_id, policy=policy),
                id=push_workflow_id(job_id),
                task_queue=stack.task_queue,
            )
        await eventually(
            lambda: len(receiver.connections) >= PUSH_RUNS // 4 or None,
            timeout_s=60,
            what="the pushes out to the receiver",
        )
        http = await stack.start_api()
        job_id = (await http.post("/jobs", json=stack.task(query={"tags": ["オリジナル"]}))).json()["job"]["job_id"]

        job = await terminal_job(http, job_id, timeout_s=PUSH_TIMEOUT_MS / 1000 + 60)

        hanging = [c for c in receiver.connections if c.closed is None]
        assert job["status"] == "succeeded", job
        # every push the worker took was still out when the job ended
        assert len(hanging) == len(receiver.connections) >= PUSH_RUNS // 4, (len(hanging), len(receiver.connections))
    finally:
        for job_id in owed:
            with contextlib.suppress(RPCError):  # closed already
                await temporal_client.get_workflow_handle(push_workflow_id(job_id)).terminate(reason="the test ended")
        await stack.stop()
        await receiver.stop()
        # owed no more: the session's other workers' sweepers would push them to a receiver gone
        await ledger_pool.execute(
            "UPDATE event_pushes SET status = 'dead' WHERE status = 'pending' AND job_id = ANY($1::text[])", owed
        )

"""Run a curaflow job as a step of your own workflow (same namespace): a child workflow.

    curaflow dev                                      # in another terminal: the embedded stack
    python examples/child_job.py --key nightly-1      # your workflow runs the job as its child
    python examples/child_job.py --key nightly-1      # again: it attaches to the same job
    python examples/child_job.py --key nightly-2 --cancel-after 2   # cancel your workflow: the job too

``OneNewWork`` is the workflow of a curaflow user: it needs "one new work delivered" as
one of its steps. It calls :func:`workflows.callers.run_job`, which starts the job as a
child workflow under the job id — or, when the job already runs or ran under that id
(started over HTTP, by a schedule, by another client), attaches to it — and returns the
job's final ``JobState``. A refusal (``invalid_params``, ``idempotency_conflict`` …)
arrives as an ``ApplicationError`` whose ``type`` is the protocol code; cancelling
``OneNewWork`` cancels the job (it ends ``cancelled``). This script runs a worker for
``OneNewWork`` on its own task queue and starts it once.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from pydantic import BaseModel
from temporalio import workflow
from temporalio.client import Client, WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from workflows.callers import run_job

#: The task queue of this example's own workflow (not curaflow's).
CALLER_QUEUE = "one-new-work"


class OneNewWorkInput(BaseModel):
    """What ``OneNewWork`` is asked: the protocol Task, and curaflow's task queue."""

    task: dict[str, Any]
    curaflow_queue: str = "curaflow"


class OneNewWorkResult(BaseModel):
    """What ``OneNewWork`` reports: the job's outcome, or why it was refused."""

    job_id: str | None = None
    status: str | None = None
    business_status: str | None = None
    deliveries: list[str] = []
    refused: str | None = None
    message: str | None = None


@workflow.defn(name="OneNewWork")
class OneNewWork:
    """A user's workflow with a curaflow job as one step."""

    @workflow.run
    async def run(self, inp: OneNewWorkInput) -> OneNewWorkResult:
        """Run (or attach to) the job of ``inp.task``; report its outcome or its refusal."""
        try:
            state = await run_job(inp.task, task_queue=inp.curaflow_queue)
        except ApplicationError as refused:  # invalid_params, idempotency_conflict …
            return OneNewWorkResult(refused=refused.type, message=refused.message)
        return OneNewWorkResult(
            job_id=state.job_id,
            status=str(state.status),
            business_status=state.business_status,
            deliveries=[f"{d.route}: {d.status} {d.work_id}" for d in state.deliveries],
        )


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", default="127.0.0.1:7233")
    parser.add_argument("--task-queue", default="curaflow", help="curaflow's task queue")
    parser.add_argument("--target", default="demo")
    parser.add_argument("--key", required=True, help="idempotency key: the same key is the same job")
    parser.add_argument("--tag", action="append", help="search tag (repeat for several)")
    parser.add_argument("--cancel-after", type=float, help="cancel OneNewWork after this many seconds")
    args = parser.parse_args()

    client = await Client.connect(args.address, data_converter=pydantic_data_converter)
    params: dict[str, Any] = {"target_id": args.target}
    if args.tag:
        params["query"] = {"tags": args.tag}
    task = {"protocol_version": "1", "job_type": "candidate_search", "idempotency_key": args.key, "params": params}
    async with Worker(client, task_queue=CALLER_QUEUE, workflows=[OneNewWork]):
        handle = await client.start_workflow(
            OneNewWork.run,
            OneNewWorkInput(task=task, curaflow_queue=args.task_queue),
            id=f"one-new-work-{args.key}-{os.getpid()}",
            task_queue=CALLER_QUEUE,
        )
        print(f"OneNewWork {handle.id} started")
        if args.cancel_after is not None:
            await asyncio.sleep(args.cancel_after)
            await handle.cancel()
        try:
            result = await handle.result()
        except WorkflowFailureError as err:
            print(f"OneNewWork ended: {err.cause}")
            return 1
    if result.refused:
        print(f"refused: {result.refused} — {result.message}")
        return 2
    print(f"job {result.job_id}: {result.status} (business status {result.business_status})")
    for line in result.deliveries:
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    code = asyncio.run(main())
    # The Temporal client's native threads can outlive the event loop (temporalio/sdk-python
    # issue 300): flush and leave without the interpreter's teardown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

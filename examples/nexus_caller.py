"""Run a curaflow job from a workflow in *another* namespace, through curaflow's Nexus service.

    curaflow dev                                       # in another terminal: creates the endpoint
    temporal operator namespace create --namespace my-team --address 127.0.0.1:7233
    python examples/nexus_caller.py --namespace my-team --key team-1
    python examples/nexus_caller.py --namespace my-team --key team-2 --cancel-after 2

``TeamStep`` is another team's workflow, in its own namespace. It calls the ``start_job``
operation of :class:`curaflow.temporal.nexus_service.JobService` through the Nexus
endpoint ``curaflow-jobs`` (``curaflow temporal-setup`` / ``curaflow dev`` create it,
targeting curaflow's namespace and task queue); the operation's result is the job's final
``JobState``. The same key again is the same job (its outcome at once once it ended);
a refusal is a ``NexusOperationError`` whose cause carries the protocol code
(:func:`curaflow.temporal.refusals.refusal_of`); cancelling ``TeamStep`` cancels the job.
This script runs a worker for ``TeamStep`` in that namespace and starts it once.
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
from temporalio.exceptions import NexusOperationError
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from curaflow.domain.job_failure import state_of
    from curaflow.temporal.nexus_service import DEFAULT_NEXUS_ENDPOINT, JobService
    from curaflow.temporal.refusals import refusal_of

#: The task queue of this example's own workflow, in its own namespace.
CALLER_QUEUE = "team-step"


class TeamStepInput(BaseModel):
    """What ``TeamStep`` is asked: the protocol Task and the endpoint of curaflow's service."""

    task: dict[str, Any]
    endpoint: str = DEFAULT_NEXUS_ENDPOINT


class TeamStepResult(BaseModel):
    """The job's outcome, or why it was refused."""

    job_id: str | None = None
    status: str | None = None
    business_status: str | None = None
    deliveries: list[str] = []
    refused: str | None = None
    message: str | None = None


@workflow.defn(name="TeamStep")
class TeamStep:
    """Another team's workflow with a curaflow job as one step, across namespaces."""

    @workflow.run
    async def run(self, inp: TeamStepInput) -> TeamStepResult:
        """Run the job of ``inp.task`` through the Nexus endpoint; report its outcome or its refusal."""
        jobs = workflow.create_nexus_client(service=JobService, endpoint=inp.endpoint)
        try:
            state = await jobs.execute_operation(JobService.start_job, inp.task)
        except NexusOperationError as err:
            refusal = refusal_of(err)
            if refusal is not None:  # invalid_params, idempotency_conflict …
                return TeamStepResult(refused=refusal.code, message=refusal.message)
            failed = state_of(err)  # the job failed or expired: its final state
            if failed is None:
                raise  # cancelled (this workflow, or the job by someone else)
            state = failed
        return TeamStepResult(
            job_id=state.job_id,
            status=str(state.status),
            business_status=state.business_status,
            deliveries=[f"{d.route}: {d.status} {d.work_id}" for d in state.deliveries],
        )


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", default="127.0.0.1:7233")
    parser.add_argument("--namespace", required=True, help="the caller's namespace (not curaflow's)")
    parser.add_argument("--endpoint", default=DEFAULT_NEXUS_ENDPOINT)
    parser.add_argument("--target", default="demo")
    parser.add_argument("--key", required=True, help="idempotency key: the same key is the same job")
    parser.add_argument("--tag", action="append", help="search tag (repeat for several)")
    parser.add_argument("--cancel-after", type=float, help="cancel TeamStep after this many seconds")
    args = parser.parse_args()

    client = await Client.connect(args.address, namespace=args.namespace, data_converter=pydantic_data_converter)
    params: dict[str, Any] = {"target_id": args.target}
    if args.tag:
        params["query"] = {"tags": args.tag}
    task = {"protocol_version": "1", "job_type": "candidate_search", "idempotency_key": args.key, "params": params}
    async with Worker(client, task_queue=CALLER_QUEUE, workflows=[TeamStep]):
        handle = await client.start_workflow(
            TeamStep.run,
            TeamStepInput(task=task, endpoint=args.endpoint),
            id=f"team-step-{args.key}-{os.getpid()}",
            task_queue=CALLER_QUEUE,
        )
        print(f"TeamStep {handle.id} started in namespace {args.namespace}")
        if args.cancel_after is not None:
            await asyncio.sleep(args.cancel_after)
            await handle.cancel()
        try:
            result = await handle.result()
        except WorkflowFailureError as err:
            print(f"TeamStep ended: {err.cause}")
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

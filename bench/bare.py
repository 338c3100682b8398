"""The bare-engine baseline: a workflow with curaflow's activity round trips, all no-ops.

``BareWorkflow`` runs, per cell and concurrently, the same sequence of activities as
``JobWorkflow`` — ``search`` and ``fetch`` on a source task queue (an account's rate
gate), one ``deliver`` per route on the main queue — then one ``finish``, with the same
timeouts, retry policy and worker settings, but every activity returns at once and
touches nothing. The ratio of curaflow's
throughput to this workflow's is what the domain, the ledger and the projection cost.

Run its worker with ``python -m bench.bare --address HOST:PORT --task-queue Q``.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from datetime import timedelta

from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.worker import Worker


class BareSpec(BaseModel):
    """How many cells and routes the baseline job has."""

    cells: int = 1
    routes: int = 1
    source_queue: str


class BareArg(BaseModel):
    """The argument of every no-op activity (similar in size to curaflow's)."""

    job_id: str
    cell: int
    step: str


@activity.defn(name="bare_noop")
async def bare_noop(arg: BareArg) -> BareArg:
    """Return the argument unchanged; the ``finish`` step also prints ``finished <job id>``
    (how the benchmark tells a job is done without asking Temporal)."""
    if arg.step == "finish":
        print(f"finished {arg.job_id}", flush=True)
    return arg


async def _step(arg: BareArg, task_queue: str | None = None) -> BareArg:
    """One no-op round trip with curaflow's activity options."""
    return await workflow.execute_activity(
        bare_noop,
        arg,
        task_queue=task_queue,
        schedule_to_start_timeout=timedelta(minutes=30),
        start_to_close_timeout=timedelta(minutes=30),
        heartbeat_timeout=timedelta(seconds=60),
        cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        retry_policy=RetryPolicy(maximum_attempts=10),
    )


@workflow.defn(name="BareWorkflow")
class BareWorkflow:
    """The baseline workflow (see the module doc)."""

    @workflow.run
    async def run(self, spec: BareSpec) -> int:
        job_id = workflow.info().workflow_id

        async def cell(i: int) -> None:
            await _step(BareArg(job_id=job_id, cell=i, step="search"), spec.source_queue)
            await _step(BareArg(job_id=job_id, cell=i, step="fetch"), spec.source_queue)
            await asyncio.gather(*[_step(BareArg(job_id=job_id, cell=i, step="deliver")) for _ in range(spec.routes)])

        await asyncio.gather(*[cell(i) for i in range(spec.cells)])
        await _step(BareArg(job_id=job_id, cell=-1, step="finish"))
        return spec.cells


async def serve(
    address: str, task_queue: str, source_queue: str, source_concurrency: int, sandbox: bool = False
) -> None:
    """Serve the baseline's main and source task queues until SIGTERM; its workflows in the
    SDK's sandbox only when ``sandbox`` (``--workflow-sandbox``: as curaflow's worker in the
    same run, :func:`curaflow.process.worker.runner_for`)."""
    from curaflow.process.worker import runner_for
    from curaflow.temporal.connection import connect

    client = await connect(address)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    main = Worker(
        client,
        task_queue=task_queue,
        workflows=[BareWorkflow],
        activities=[bare_noop],
        workflow_runner=runner_for(sandbox=sandbox),
    )
    source = Worker(
        client, task_queue=source_queue, activities=[bare_noop], max_concurrent_activities=source_concurrency
    )
    async with main, source:
        print("worker.started", flush=True)
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description="curaflow benchmark: bare-engine baseline worker")
    parser.add_argument("--address", required=True)
    parser.add_argument("--task-queue", required=True)
    parser.add_argument("--source-queue", required=True)
    parser.add_argument("--source-concurrency", type=int, default=4)
    parser.add_argument(
        "--workflow-sandbox",
        action="store_true",
        help="run the workflows in the SDK's sandbox (as curaflow's worker does when temporal.workflow_sandbox is set)",
    )
    args = parser.parse_args()
    asyncio.run(serve(args.address, args.task_queue, args.source_queue, args.source_concurrency, args.workflow_sandbox))


if __name__ == "__main__":
    main()

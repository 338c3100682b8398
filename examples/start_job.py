"""Start a curaflow job from a Temporal client, follow it, and print its outcome.

    curaflow dev                                  # in another terminal: the embedded stack
    python examples/start_job.py --key my-first-job --tag 風景
    python examples/start_job.py --key my-second-job --cancel   # cancel a job once it started

The job's workflow id is its job id (``<target>@manual-<key lowercased>``); the input is
the protocol Task, the same object ``POST /jobs`` takes. Starting twice with the same key
and the same tags attaches to the same job; another Task under a used key is refused
(``idempotency_conflict``, printed, exit status 2). Follow it with Temporal's own tools: the ``status`` query (live
cells, stage, deliveries), the ``cancel`` signal or a plain cancel request, ``result()``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from temporalio.client import Client, WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter

from curaflow.domain.job_failure import state_of
from curaflow.domain.messages import JobState
from curaflow.jobs.submit import start_job
from curaflow.protocol.errors import ProtocolError
from curaflow.protocol.models import Task
from workflows.job import JobWorkflow


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", default="127.0.0.1:7233")
    parser.add_argument("--task-queue", default="curaflow")
    parser.add_argument("--target", default="demo")
    parser.add_argument("--key", required=True, help="idempotency key: the same key is the same job")
    parser.add_argument("--tag", action="append", help="search tag (repeat for several)")
    parser.add_argument("--cancel", action="store_true", help="cancel the job once it started")
    args = parser.parse_args()

    # curaflow's workflows speak pydantic: use its data converter.
    client = await Client.connect(args.address, data_converter=pydantic_data_converter)
    params: dict[str, object] = {"target_id": args.target}
    if args.tag:
        params["query"] = {"tags": args.tag}
    task = Task.model_validate(
        {"protocol_version": "1", "job_type": "candidate_search", "idempotency_key": args.key, "params": params}
    )
    try:
        handle = await start_job(client, task, task_queue=args.task_queue)
    except ProtocolError as refused:  # idempotency_conflict, invalid_params …
        print(f"refused: {refused.code} — {refused.message}")
        return 2
    print(f"job {handle.id} started (run {handle.result_run_id})")

    # Follow it: the status query answers the live state (the same projection as GET /jobs/{id}).
    for _ in range(600):
        state = await handle.query(JobWorkflow.status)
        cells = ", ".join(f"{c.target_id}: {c.state}/{c.stage}" for c in state.cells)
        print(f"  {state.status:9} stage={state.stage:11} {cells}")
        if args.cancel and state.status in ("queued", "running"):
            await handle.signal(JobWorkflow.cancel)  # or: await handle.cancel()
            args.cancel = False
        if state.status not in ("queued", "running"):
            break
        await asyncio.sleep(0.5)

    try:
        final: JobState = await handle.result()
    except WorkflowFailureError as err:  # the job failed or expired, or it was cancelled
        print(f"execution ended: {err.cause}")
        final = state_of(err) or await handle.query(JobWorkflow.status)
    print(f"{final.status} (business status {final.business_status})")
    for delivery in final.deliveries:
        print(f"  {delivery.route}: {delivery.status} {delivery.work_id} {delivery.remote_id or ''}")
    return 0


if __name__ == "__main__":
    code = asyncio.run(main())
    # The Temporal client's native threads can outlive the event loop, and tearing the
    # interpreter down under them can abort the process ("PyGILState_Release: thread state
    # must be current", exit -6) after the job was followed to its end (temporalio/sdk-python
    # issue 300). Flush and leave without the teardown, as `curaflow`'s own commands do.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

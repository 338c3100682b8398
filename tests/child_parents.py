"""Parents of child jobs (test-only; sandbox-clean) for tests/integration/test_child_job_parents.py:
``ContinuingParent`` runs the job with ``run_job`` and continues as new while it runs;
``HandWrittenParent`` starts it as a child with the options a caller chose; ``Squatter`` is
a workflow of another kind that a test starts under a job's id."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.common import WorkflowIDReusePolicy

with workflow.unsafe.imports_passed_through():
    from curaflow.domain.messages import JobState
    from workflows.callers import job_id_of, run_job


@workflow.defn(name="ContinuingParent")
class ContinuingParent:
    """Runs the job of ``args["task"]`` with ``run_job``; on the ``go`` signal continues as
    new while the job runs; the new run runs the job again (attaching) and returns its state."""

    def __init__(self) -> None:
        self.go = False

    @workflow.signal
    def proceed(self) -> None:
        self.go = True

    @workflow.run
    async def run(self, args: dict[str, Any]) -> dict[str, Any]:
        if args.get("continued"):
            state = await run_job(args["task"], task_queue=args["queue"])
            return state.model_dump(mode="json")
        background = asyncio.ensure_future(run_job(args["task"], task_queue=args["queue"]))
        await workflow.wait_condition(lambda: self.go or background.done())
        if background.done():
            return (await background).model_dump(mode="json")
        workflow.continue_as_new({**args, "continued": True})


@workflow.defn(name="HandWrittenParent")
class HandWrittenParent:
    """Starts the job as a child with ``args["parent_close_policy"]`` (``REJECT_DUPLICATE``,
    as docs/temporal.md asks), then, with ``wait``, completes on ``proceed`` while the job
    runs; else returns the job's state."""

    def __init__(self) -> None:
        self.go = False

    @workflow.signal
    def proceed(self) -> None:
        self.go = True

    @workflow.run
    async def run(self, args: dict[str, Any]) -> Any:
        options: dict[str, Any] = {}
        if "parent_close_policy" in args:
            options["parent_close_policy"] = workflow.ParentClosePolicy[args["parent_close_policy"]]
        child = await workflow.start_child_workflow(
            "JobWorkflow",
            args["task"],
            id=job_id_of(args["task"]),
            task_queue=args["queue"],
            result_type=JobState,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            **options,
        )
        if args.get("wait"):
            await workflow.wait_condition(lambda: self.go)
            return None
        return (await child).model_dump(mode="json")


@workflow.defn(name="Squatter")
class Squatter:
    """A workflow of no job, under whatever id it is given: completes on ``proceed``."""

    def __init__(self) -> None:
        self.go = False

    @workflow.signal
    def proceed(self) -> None:
        self.go = True

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.go)
        return "done"

"""Workflows the caller tests run beside the examples' (test-only; sandbox-clean), in the
callers' namespace: ``CancelJobCaller`` calls the ``cancel_job`` operation of curaflow's
Nexus service; ``BoundedCaller`` calls ``start_job`` with the Nexus options a caller
chooses (its schedule-to-close timeout, its cancellation type); ``RawCaller`` sends an
operation's input as the JSON text it is given. And in curaflow's
namespace: ``FollowingParent`` attaches to a job with ``follow_job`` on the task queue it
is given (a queue a test serves with an activity worker of its own)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.common import RawValue
from temporalio.exceptions import NexusOperationError

with workflow.unsafe.imports_passed_through():
    from curaflow.domain.messages import CancelJob, JobState
    from curaflow.temporal.nexus_service import JobService
    from workflows.callers import follow_job


@workflow.defn(name="CancelJobCaller")
class CancelJobCaller:
    """Cancel a job through the endpoint; returns the job's state after the cancel."""

    @workflow.run
    async def run(self, args: dict[str, Any]) -> JobState:
        jobs = workflow.create_nexus_client(service=JobService, endpoint=args["endpoint"])
        return await jobs.execute_operation(JobService.cancel_job, CancelJob(job_id=args["job_id"]))


@workflow.defn(name="BoundedCaller")
class BoundedCaller:
    """Run the job of ``args["task"]`` with ``schedule_to_close_s`` and / or
    ``cancellation_type`` (a ``NexusOperationCancellationType`` name); returns the job's
    state, or ``{"failed": <the cause's class name>}`` when the operation did not
    complete (timed out, cancelled)."""

    @workflow.run
    async def run(self, args: dict[str, Any]) -> dict[str, Any]:
        jobs = workflow.create_nexus_client(service=JobService, endpoint=args["endpoint"])
        options: dict[str, Any] = {}
        if "schedule_to_close_s" in args:
            options["schedule_to_close_timeout"] = timedelta(seconds=args["schedule_to_close_s"])
        if "cancellation_type" in args:
            options["cancellation_type"] = workflow.NexusOperationCancellationType[args["cancellation_type"]]
        try:
            state = await jobs.execute_operation(JobService.start_job, args["task"], **options)
        except NexusOperationError as err:
            return {"failed": type(err.cause).__name__}
        return state.model_dump(mode="json")


@workflow.defn(name="FollowingParent")
class FollowingParent:
    """Attach to the job of ``args["task"]`` through ``follow_job`` on ``args["queue"]``."""

    @workflow.run
    async def run(self, args: dict[str, Any]) -> JobState:
        return await follow_job(args["task"], task_queue=args["queue"])


@workflow.defn(name="RawCaller")
class RawCaller:
    """Call ``args["operation"]`` (``start_job`` / ``cancel_job``) with ``args["text"]``
    as its input's JSON text, sent as written (a ``json/plain`` payload: what another
    SDK, a hand-built payload or a proxy may send); returns the operation's result as
    JSON, or ``{"failed": <the cause's class name>}``."""

    @workflow.run
    async def run(self, args: dict[str, Any]) -> Any:
        jobs = workflow.create_nexus_client(service=JobService, endpoint=args["endpoint"])
        raw = RawValue(Payload(metadata={"encoding": b"json/plain"}, data=args["text"].encode()))
        operation = JobService.start_job if args["operation"] == "start_job" else JobService.cancel_job
        state = await jobs.execute_operation(operation, raw, schedule_to_close_timeout=timedelta(seconds=60))  # type: ignore[arg-type]
        return state.model_dump(mode="json")

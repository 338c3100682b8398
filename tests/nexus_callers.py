"""A workflow the caller tests run beside the examples' (test-only; sandbox-clean):
``CancelJobCaller`` calls the ``cancel_job`` operation of curaflow's Nexus service from
the callers' namespace."""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from curaflow.domain.messages import CancelJob, JobState
    from curaflow.temporal.nexus_service import JobService


@workflow.defn(name="CancelJobCaller")
class CancelJobCaller:
    """Cancel a job through the endpoint; returns the job's state after the cancel."""

    @workflow.run
    async def run(self, args: dict[str, Any]) -> JobState:
        jobs = workflow.create_nexus_client(service=JobService, endpoint=args["endpoint"])
        return await jobs.execute_operation(JobService.cancel_job, CancelJob(job_id=args["job_id"]))

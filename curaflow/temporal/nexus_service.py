"""The Nexus service of curaflow's jobs: its contract, for callers in any namespace.

A workflow of another team — in its own namespace — runs a curaflow job as a step
through a Nexus endpoint (``curaflow temporal-setup`` creates it: ``temporal.nexus_endpoint``,
default ``curaflow-jobs``, targeting curaflow's namespace and main task queue):

.. code-block:: python

    from temporalio import workflow
    with workflow.unsafe.imports_passed_through():
        from curaflow.temporal.nexus_service import JobService

    jobs = workflow.create_nexus_client(service=JobService, endpoint="curaflow-jobs")
    state = await jobs.execute_operation(JobService.start_job, task)   # JobState

Operations (handled by curaflow's workers: :mod:`curaflow.jobs.nexus`):

* ``start_job`` — input: the protocol Task (plain JSON, or a ``Task``); result: the job's
  final :class:`~curaflow.domain.messages.JobState`. Admitted exactly as ``POST /jobs``
  admits it, so it is idempotent on the key: the same Task again (from this caller,
  HTTP, a schedule, any client) is the same job and the same outcome; while the job runs
  the operation waits for it, once it ended the answer comes at once. A refusal
  (``invalid_params``, ``idempotency_conflict`` …) is a non-retryable operation error
  whose cause carries the protocol code (:func:`curaflow.temporal.refusals.refusal_of`);
  a job that failed or expired fails the operation as it fails its execution
  (``job_failed`` / ``job_expired``, the final state as details:
  :func:`curaflow.domain.job_failure.state_of`); a job cancelled ends it cancelled.
  Cancelling the operation — the caller workflow cancelled — cancels the job (it ends
  ``cancelled``, its cells ``cancelled_by_consumer``).
* ``cancel_job`` — input: :class:`~curaflow.domain.messages.CancelJob`; result: the job's
  state after the cancel (``POST /jobs/{id}/cancel``'s path).

Callers use a pydantic data converter (``temporalio.contrib.pydantic.pydantic_data_converter``):
``JobState`` is a pydantic model.

Pure module: callers import it into their workflows through the sandbox pass-through.
"""

from __future__ import annotations

from typing import Any

import nexusrpc

from curaflow.domain.messages import CancelJob, JobState

#: The endpoint ``curaflow temporal-setup`` creates when ``temporal.nexus_endpoint`` is not set.
DEFAULT_NEXUS_ENDPOINT = "curaflow-jobs"
#: The service's name on the wire.
SERVICE_NAME = "CuraflowJobs"


@nexusrpc.service(name=SERVICE_NAME)
class JobService:
    """curaflow's jobs as Nexus operations (see the module doc)."""

    start_job: nexusrpc.Operation[dict[str, Any], JobState]
    cancel_job: nexusrpc.Operation[CancelJob, JobState]

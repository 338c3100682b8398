"""The ``admit`` activity: a Task a Temporal client started ``JobWorkflow`` with becomes a job.

A Temporal client (any SDK, the ``temporal`` CLI) starts ``JobWorkflow`` with the
protocol Task as plain JSON and the job id as workflow id (docs/temporal.md "Starting jobs from
a Temporal client"). The workflow's first step is this activity, which runs the very
admission of ``POST /jobs`` (:meth:`curaflow.jobs.admission.Admitter.admit`): validation in
the protocol's order, target resolution, idempotency shared with HTTP (one key → one
job, whoever used it first), the ledger row, ``job.accepted``, callbacks, the deadline.
The execution itself is the job's workflow, so nothing else is started.

A refusal fails the activity with a non-retryable ``ApplicationError`` whose ``type`` is
the protocol error code and whose details carry ``{code, message, detail}``
(``detail.field`` for a validation error); the workflow then fails with it. An attempt
the ledger could not serve fails retryable, type ``ledger_unavailable``; a step that spent
its budget on it fails the workflow as curaflow's failure, not a refusal. Nothing is
written, and the failed execution does not block the id: it held no job, and a later
start frees the id of such a run (:mod:`curaflow.temporal.job_runs`).
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.caller import require_own_job
from activities.deps import ActivityDeps
from activities.finish import job_state
from curaflow.domain.messages import Admitted, SubmitInput
from curaflow.jobs.admission import Admitter
from curaflow.ledger.db import is_unavailable
from curaflow.ledger.jobs import mark_workflow_started, workflow_input
from curaflow.ledger.records import load_job
from curaflow.observability import metrics
from curaflow.protocol.errors import ProtocolError
from curaflow.temporal.job_runs import own_run_of_ended_job
from curaflow.temporal.refusals import as_failure, ledger_outage

#: The non-retryable ``ApplicationError`` of an admission refusal (type = the protocol code).
refusal = as_failure


class AdmitActivity:
    """Holds the worker's :class:`~activities.deps.ActivityDeps` for the ``admit`` activity."""

    def __init__(self, deps: ActivityDeps) -> None:
        self.deps = deps

    @activity.defn(name="admit")
    async def admit(self, inp: SubmitInput) -> Admitted:
        """Admit ``inp.task`` as the job of this execution.

        Returns:
            The job's workflow argument; ``final`` set when the job had already ended (a
            replay: the execution reports it and runs nothing).

        Raises:
            ApplicationError: ``foreign_caller`` (non-retryable, nothing done) when the calling
                execution is not the job's own (:func:`activities.caller.require_own_job`).
            ApplicationError: non-retryable, ``type`` = the protocol code
                (``invalid_params``, ``unsupported_protocol_version``,
                ``idempotency_conflict``); ledger errors are retried.
            ApplicationError: ``ledger_unavailable`` (retryable,
                :func:`curaflow.temporal.refusals.ledger_outage`) when the ledger could not
                serve the attempt (:func:`curaflow.ledger.db.is_unavailable`); until
                2026-12-07 asyncpg's error went out as it was, typed by its class name.
        """
        require_own_job(inp.workflow_id)  # the id the Task must be the job of is the caller's own
        try:
            return await self._admit(inp)
        except ApplicationError:
            raise
        except Exception as err:
            if not is_unavailable(err):
                raise
            # The ledger could not serve the attempt: named as such (not by asyncpg's class),
            # retried within the step's budget; the workflow reports a budget spent on it as
            # curaflow's failure, never the Task's refusal (refusals.admission_failure).
            metrics.record_ledger_unavailable("activity")
            raise ledger_outage(err) from err

    async def _admit(self, inp: SubmitInput) -> Admitted:
        deps = self.deps
        try:
            admission = await Admitter(deps.settings, deps.pool, None).admit(
                inp.task,
                trigger="temporal",
                workflow_id=inp.workflow_id,
                workflow_type=activity.info().workflow_type,
                start=False,
                run_limit=inp.run_limit,
            )
        except ProtocolError as err:
            raise refusal(err) from err
        async with deps.pool.acquire() as conn:
            job_input = admission.job_input or await workflow_input(conn, admission.job_id)
            record = await load_job(conn, admission.job_id)
            assert job_input is not None and record is not None
            if record.completed_at is not None:
                own_run = await self._own_run(admission.job_id, record.completed_at)
                return Admitted(job_input=job_input, created=False, final=job_state(record), own_run=own_run)
            await mark_workflow_started(conn, admission.job_id)
        return Admitted(job_input=job_input, created=not admission.replayed)

    async def _own_run(self, job_id: str, completed_at_ms: int) -> bool:
        """The job had ended before this run admitted its Task: whether this run is the
        job's own nevertheless (:func:`~curaflow.temporal.job_runs.own_run_of_ended_job`).
        False without a Temporal client or a run id (nothing to compare: the run reports)."""
        own_run = activity.info().workflow_run_id
        if self.deps.client is None or not own_run:
            return False
        return await own_run_of_ended_job(self.deps.client, job_id, own_run, completed_at_ms)

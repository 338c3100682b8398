"""The reconciler: nothing admitted is ever lost, no job stays open forever.

The second (and last) writer of terminal state (DESIGN.md decision 13): it finishes
only jobs no workflow can finish — never started, execution closed, no worker. It runs
in the API process and in every worker; each tick runs under a PostgreSQL advisory lock
held for the whole tick, so one process ticks at a time. It asks Temporal what happened
(visibility and describe), it does not infer it from budgets. Each tick, over open jobs
(``completed_at IS NULL``), using each job's own budgets (stored with its workflow
input):

1. **unstarted workflow**: admitted in the ledger but ``workflow_started_at`` is null
   for more than a few seconds (a crash between insert and start; a schedule's occurrence
   whose trampoline was cancelled or terminated before it started the job) → start it;
   when a run of the job is open already (the trampoline started it: it records no
   start, :func:`open_job_run`), record the start instead (``TickReport.recorded``);
2. **closed execution**: Temporal lists the job's execution as terminated, timed out or
   failed without a terminal ``JobStatus`` (closed within the last :data:`CLOSED_WINDOW_MS`:
   :func:`closed_executions_query`; asked only about the open jobs no attempt holds a
   live lease on, the only jobs a listed run is matched against — none: no list; up to
   the tick's ``limit``: their ids in the query; more: every run it lists) → finish with
   that cause
   (``execution_terminated`` / ``execution_timeout`` / ``internal_error``; a run Temporal
   itself terminated at a history limit, :func:`~.executions.close_cause`:
   ``history_limit_exceeded``) once no
   attempt of the job holds a live lease (a send already out lands and is recorded
   first, so the outcome record reports it); an operator's terminate converges within
   a tick of its attempts ending, not after the stall budget. Unless the closed run
   never held the job (:meth:`Execution.closed_without_job`, :func:`run_held_a_job`)
   and the job never started: its start attached to a Temporal client's Task run
   (conflict policy ``USE_EXISTING``) that then refused its own Task
   (``idempotency_conflict``) or stopped before admitting it — nothing ran the job, so
   it is started again as rule 1 starts one (the start frees the id of such a run);
   rules 3 and 5 read such a run as no verdict either (a recorded cancel ends the job
   ``cancelled``; its budgets decide). When the latest run never held the job but an
   earlier run of the id did — the job's own run, terminated by a client's start with
   another Task (``TERMINATE_EXISTING`` / ``TERMINATE_IF_RUNNING``) whose run then
   refused it — the earlier run's close is the verdict (:func:`describe_execution`). A
   run that failed because its steps were refused as not the job's (started under the id
   with an input that is not the job's stored input: it carries the job's search
   attributes; :func:`curaflow.temporal.job_runs.refused_run`, one read of a failed run's
   close event) is such a run too (2026-12-07), **whether or not it started the job**: the
   steps it ran before its ``finish`` was refused were the job's own
   (:meth:`Execution.no_verdict`), so the job is started again all the same.
   And a job whose start attached to a Task run still open on another task queue than
   curaflow's, holding no job, its workflow task taken by no worker for
   :data:`FOREIGN_QUEUE_WAIT_MS` on a queue no worker polls (:func:`queue_polled`; a
   client's mistyped ``--task-queue``): that run is
   terminated, its reason naming both queues, and the job is started the same way —
   found behind any backlog of queued jobs (visibility lists such runs first,
   :func:`unheld_runs_on_other_queues`, then the ledger is asked which are its queued jobs);
3. **cancel with no worker**: a consumer cancel recorded more than
   :data:`CANCEL_GRACE_MS` ago, no live lease, and Temporal says no workflow can act on
   it (the execution does not exist or is closed, or its workflow task has waited for a
   worker longer than the grace) → finish ``cancelled``;
4. **deleted execution**: a job whose start was recorded (``workflow_started_at``; a step
   run or not — a scheduled occurrence only once it ran one: its trampoline records its
   start before the execution exists), whose execution Temporal does not know under its id — an operator
   deleted it (``temporal workflow delete``, the UI's "Delete"): visibility lists no
   run and a describe answers Temporal's own ``NOT_FOUND`` of the execution
   (:func:`curaflow.temporal.answers.execution_not_found`; a namespace's is no such
   answer) — → finish ``execution_deleted`` once no
   attempt holds a live lease (a send out at the deletion lands and is recorded first),
   and only when the namespace holds an execution of a job this ledger knows
   (:func:`namespace_holds_jobs`): a process configured with another namespace sees
   every job "not found" and ends nothing (``TickReport.unconfirmed``);
5. **budgets**, each checked with Temporal first (a closed execution converges with its
   close cause): past ``deadline_at`` (plus :data:`DEADLINE_GRACE_MS`) with no live
   lease → ``execution_timeout`` (``pinned_build_unserved`` when the execution is pinned to a
   build — Temporal Worker Versioning: an operator's versioning override, or the build that
   started it — whose workflow task has waited for a worker of that build since before the
   deadline: read from the describe it makes anyway, :attr:`Execution.pinned_unserved_since_ms`;
   since 2026-12-07); never started, older than the queued budget →
   ``queued_too_long``; started, no progress within the stall budget →
   ``stalled_no_heartbeat`` (a cell whose work was handed to its routes:
   ``delivery_abandoned``). Which budget ended the job is decided by
   :func:`curaflow.domain.verdicts.budget_cause`: the one that ran out first, the
   deadline owning any that ran out after it passed; the stall budget counts only time a
   step was held by a worker or waited in a queue no live worker serves — a step Temporal
   reports held and beating, in its retry backoff, or queued behind others on a served
   queue (:func:`served_queues`) is not stalled.

Every rule acts on Temporal's positive answers only. A question about one job that
Temporal refuses for that request alone (:func:`curaflow.temporal.answers.refused_one_request`:
an ``INTERNAL`` of an execution it cannot read, a ``FAILED_PRECONDITION``) leaves that job
as it is for the tick, logged ``reconciler.temporal_refused``, and the other jobs go on;
an outage, a refusal of this process's access or of the namespace fails the tick (the
supervised loop retries it). A refusal is one job's only among answers: a tick in which
Temporal refused every request about a job's execution — at least two jobs, none answered
(a proxy answering ``INTERNAL`` to every describe while it passes the lists) — is its
outage (:class:`curaflow.temporal.answers.Refusals`, 2026-12-07): the tick fails once its
other work is done, and, as on any outage, the loop sets
``curaflow_temporal_unavailable_last_seconds{where="reconciler"}`` (``CuraflowTemporalUnavailable``).
The ledger's refusals are read alike: a finish PostgreSQL refuses for one job
alone (:func:`curaflow.ledger.db.refused_statement`: a constraint, an internal error reading
its rows, a ``RAISE``) leaves that job open, logged ``reconciler.finish_refused``, and the
others converge (:func:`~curaflow.ledger.reconciler.convergence.converge`); an outage fails
the tick.

The reasons come from :func:`curaflow.domain.verdicts.cell_verdict` (a cancel recorded
in the ledger makes a stopped cell ``cancelled_by_consumer``). When a worker later runs
the workflow, its steps find the job terminal and it adopts that verdict.

One concern per module, every name imported from here:
:mod:`~curaflow.ledger.reconciler.ticks` (:func:`tick`: the rules under the lock;
:func:`run_forever`: the supervised loop), :mod:`~curaflow.ledger.reconciler.executions`
(what Temporal says of an execution; the closed executions a tick looks at; the jobs
visibility lists and the namespace's witness) and
:mod:`~curaflow.ledger.reconciler.convergence` (:func:`converge`: a job finished on behalf
of no workflow; :func:`converge_unserved_cancel`: rule 3 for one job).
"""

from __future__ import annotations

from curaflow.ledger.reconciler.convergence import (
    CANCEL_GRACE_MS,
    NO_LIVE_ATTEMPT,
    attempt_live,
    converge,
    converge_unserved_cancel,
)
from curaflow.ledger.reconciler.executions import (
    CLOSE_CAUSES,
    CLOSED_WINDOW_MS,
    FOREIGN_QUEUE_WAIT_MS,
    FOREIGN_RUNS_LISTED,
    SOURCE_ACTIVITIES,
    SOURCE_QUEUE_MARK,
    WITNESS_SAMPLE,
    WITNESS_SKEW_MS,
    Execution,
    ForeignQueueRun,
    PendingActivity,
    PinnedBuild,
    closed_executions_query,
    describe_execution,
    latest_job_executions,
    listed_executions,
    namespace_holds_jobs,
    open_job_run,
    pinned_build,
    queue_polled,
    run_held_a_job,
    unheld_runs_on_other_queues,
    unserved_foreign_run,
)
from curaflow.ledger.reconciler.ticks import (
    DEADLINE_GRACE_MS,
    LOCK_KEY,
    START_GRACE_MS,
    StartHook,
    TickReport,
    run_forever,
    served_queues,
    tick,
)

__all__ = [
    "CANCEL_GRACE_MS",
    "CLOSED_WINDOW_MS",
    "CLOSE_CAUSES",
    "DEADLINE_GRACE_MS",
    "FOREIGN_QUEUE_WAIT_MS",
    "FOREIGN_RUNS_LISTED",
    "LOCK_KEY",
    "NO_LIVE_ATTEMPT",
    "SOURCE_ACTIVITIES",
    "SOURCE_QUEUE_MARK",
    "START_GRACE_MS",
    "WITNESS_SAMPLE",
    "WITNESS_SKEW_MS",
    "Execution",
    "ForeignQueueRun",
    "PendingActivity",
    "PinnedBuild",
    "StartHook",
    "TickReport",
    "attempt_live",
    "closed_executions_query",
    "converge",
    "converge_unserved_cancel",
    "describe_execution",
    "latest_job_executions",
    "listed_executions",
    "namespace_holds_jobs",
    "open_job_run",
    "pinned_build",
    "queue_polled",
    "run_forever",
    "run_held_a_job",
    "served_queues",
    "tick",
    "unheld_runs_on_other_queues",
    "unserved_foreign_run",
]

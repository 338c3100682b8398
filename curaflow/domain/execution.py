"""A job as a Temporal execution: workflow type names, custom search attributes, timeout.

The one definition of what clients, the reconciler, the schedule sync, the namespace
setup and the workflows themselves must agree on:

* the registered workflow types (:data:`JOB_WORKFLOW`, :data:`SCHEDULED_WORKFLOW`,
  :data:`PUSH_WORKFLOW`) — a start by name, a visibility query or a schedule action that
  names another type would miss;
* the job types curaflow accepts and the workflow type that runs each
  (:data:`JOB_WORKFLOWS`, :func:`job_workflow`);
* the custom search attributes every job carries (:data:`CUSTOM_SEARCH_ATTRIBUTES`, each
  key with its type; the namespace setup registers exactly these);
* the execution timeout of a job's run: its deadline plus :data:`EXECUTION_GRACE`, a
  backstop for jobs no worker ever runs (the job's own deadline timer ends it first).

Pure module: imported by workflows through the sandbox pass-through.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Literal

from temporalio.common import SearchAttributeKey

#: ``JobWorkflow``: one job (:mod:`workflows.job`).
JOB_WORKFLOW = "JobWorkflow"
#: ``ScheduledJobWorkflow``: one occurrence of a recurring plan (:mod:`workflows.scheduled`).
SCHEDULED_WORKFLOW = "ScheduledJobWorkflow"
#: ``EventPushWorkflow``: pushes a job's pending events (:mod:`workflows.event_push`).
PUSH_WORKFLOW = "EventPushWorkflow"

#: ``ApplicationError`` type of a job's step (or ``finish``) refused as not the job's: its
#: caller is not the job's execution, or its input is not the job's stored input
#: (``activities.caller``, docs/DESIGN.md "Who may run a job's activities"). Read by the
#: reconciler too: a run that failed with it never held the job
#: (:func:`curaflow.temporal.job_runs.refused_run`).
FOREIGN_CALLER = "foreign_caller"

#: The job types curaflow accepts (a Task's ``job_type``; any other is refused
#: ``unsupported_job_type``) and the workflow type that runs a job of each. The one list:
#: admission, every start of a job's execution, the reconciler's visibility query and the
#: capabilities read it (DESIGN.md "What a second job type touches").
JOB_WORKFLOWS: dict[str, str] = {"candidate_search": JOB_WORKFLOW}


class UnknownJobType(ValueError):
    """A job type :data:`JOB_WORKFLOWS` does not list."""


def job_workflow(job_type: str) -> str:
    """The workflow type that runs a job of ``job_type``.

    Raises:
        UnknownJobType: curaflow does not accept ``job_type``.
    """
    try:
        return JOB_WORKFLOWS[job_type]
    except KeyError:
        raise UnknownJobType(f"job type {job_type!r} is not accepted (known: {sorted(JOB_WORKFLOWS)})") from None


def job_workflow_types() -> list[str]:
    """Every workflow type that runs jobs (sorted, each once)."""
    return sorted(set(JOB_WORKFLOWS.values()))


#: The job's protocol status (``queued`` … ``expired``), kept current by the workflow.
JOB_STATUS = SearchAttributeKey.for_keyword("JobStatus")
#: The business status of the outcome record, set when the job ends.
BUSINESS_STATUS = SearchAttributeKey.for_keyword("BusinessStatus")
#: The job's type (its Task's ``job_type``, :data:`JOB_WORKFLOWS`).
JOB_TYPE = SearchAttributeKey.for_keyword("JobType")
#: The ids of the job's targets.
TARGET_IDS = SearchAttributeKey.for_keyword_list("TargetIds")
#: The recurring plan of a scheduled job (and of its trampoline).
SCHEDULE_ID = SearchAttributeKey.for_keyword("ScheduleId")
#: Every custom search attribute of curaflow, registered on the namespace.
CUSTOM_SEARCH_ATTRIBUTES: tuple[SearchAttributeKey[Any], ...] = (
    JOB_STATUS,
    BUSINESS_STATUS,
    JOB_TYPE,
    TARGET_IDS,
    SCHEDULE_ID,
)
#: Set by Temporal on workflows started by a Schedule: the occurrence's nominal time.
SCHEDULED_START_TIME = SearchAttributeKey.for_datetime("TemporalScheduledStartTime")

#: The most targets one job runs (a schedule's plan; a protocol job runs one): half of
#: what ``tests/workflow/test_job_size.py`` runs (1 000 targets, no workflow task failing on
#: the worker; the sandboxed first activation of 1 000 replays in ~0.33 s against the SDK's
#: 2 s deadlock limit). It was 200 until 2026-12-06, when that activation — which starts
#: every cell — re-rendered the UI details at each cell's start (quadratic): 500, 1 000 and
#: 2 100 targets failed it.
MAX_JOB_TARGETS = 500
#: The most deliveries one job may have pending at once (every route of every target):
#: Temporal's ``limit.numPendingActivities.error`` (2 000), beyond which the server fails
#: the job's workflow task, for ever.
MAX_JOB_SENDS = 2000
#: Grace after the job deadline before Temporal itself closes the run (a backstop for
#: jobs no worker ever runs; the reconciler converges their ledger state). It holds the
#: job's :func:`run_end_room_ms` for every heartbeat interval the configuration accepts
#: (:data:`MAX_HEARTBEAT_INTERVAL_MS`).
EXECUTION_GRACE = timedelta(minutes=10)
#: The shortest run a job's execution is given, however close its deadline.
MIN_RUN = timedelta(seconds=1)


#: What a job needs between its deadline and the moment Temporal closes its run, besides
#: the heartbeat timeout of a step whose worker was lost (:func:`run_end_room_ms`): the
#: live steps in flight are stopped through their heartbeats (a live attempt hears a cancel
#: within a second), a send out is given its cancel grace, then ``finish`` records the
#: outcome.
RUN_END_MARGIN = timedelta(seconds=30)
#: The Temporal start options that close a run on their own: ``run_timeout`` (a workflow
#: retry policy then starts another run) and ``execution_timeout``.
RunTimeout = Literal["run_timeout", "execution_timeout"]
#: The longest ``budgets.heartbeat_interval_ms`` a configuration may set: its heartbeat
#: timeout (twice it) plus :data:`RUN_END_MARGIN` fits in :data:`EXECUTION_GRACE`, so a
#: step whose worker was lost at the deadline is given up before Temporal closes the run
#: (``curaflow.config.checks.OWN_CEILINGS``; until 2026-12-06 any interval loaded).
MAX_HEARTBEAT_INTERVAL_MS = int((EXECUTION_GRACE - RUN_END_MARGIN).total_seconds() * 1000) // 2


def run_end_room_ms(heartbeat_timeout_ms: int) -> int:
    """How long a job's run must still have after the job's deadline to end itself, ms.

    At the deadline the workflow cancels its steps in flight and waits for them
    (``WAIT_CANCELLATION_COMPLETED``). A cancel reaches an activity only in the answer to
    one of its heartbeats: a step whose worker was lost (killed, frozen, cut off) hears
    none, and Temporal gives it up only when its heartbeat timeout passes — up to that
    long after the deadline. Then :data:`RUN_END_MARGIN` (the live steps' stop, a send's
    cancel grace, ``finish``). Until 2026-12-06 the room was the margin alone (30 s), less
    than a ``deliver`` step's heartbeat timeout (twice the 30 s heartbeat interval): a
    worker lost while it held a step in a run a Temporal client limited left the job to be
    timed out by Temporal before it ended itself — the execution ``TimedOut``, not failed
    ``job_expired``, and under a workflow retry policy another run of the job's id.

    Args:
        heartbeat_timeout_ms: the longest heartbeat timeout of the job's steps
            (:attr:`curaflow.domain.messages.Budgets.heartbeat_timeout_ms`: a source
            step's is never longer).
    """
    return int(RUN_END_MARGIN.total_seconds() * 1000) + heartbeat_timeout_ms


def run_deadline_bound(run_ends_at_ms: int | None, *, heartbeat_timeout_ms: int) -> int | None:
    """The latest deadline of a job admitted by a run that Temporal closes at
    ``run_ends_at_ms`` (epoch ms, Temporal's clock; None: no run or execution timeout):
    :func:`run_end_room_ms` before the run's end — so the job ends itself, ``expired``
    with a deadline that says when, instead of being timed out by Temporal (a retry
    policy then runs the job again in a new run under its id, and the report said it
    "ran past its deadline" with the deadline still ahead).

    The job's deadline is then the earlier of its own (its creation plus ``deadline_ms``)
    and this bound, never before its creation; a bound that leaves less than the
    shortest deadline creates no job (the caller refuses the run). The admission's insert
    applies it, with the creation read on the database's clock
    (:class:`curaflow.ledger.jobs.NewJob` ``deadline_bound_ms``).

    Args:
        run_ends_at_ms: when Temporal closes the run (epoch ms), or None.
        heartbeat_timeout_ms: the longest heartbeat timeout of the job's steps, ms
            (:func:`run_end_room_ms`).

    Returns:
        The bound (epoch ms), or None when the run is not limited.
    """
    if run_ends_at_ms is None:
        return None
    return run_ends_at_ms - run_end_room_ms(heartbeat_timeout_ms)


def execution_timeout(created_at_ms: int, deadline_at_ms: int) -> timedelta:
    """The execution timeout of a job's run: from its creation to its deadline (at least
    :data:`MIN_RUN`) plus :data:`EXECUTION_GRACE`. Times are epoch milliseconds (UTC)."""
    run = max(MIN_RUN, timedelta(milliseconds=deadline_at_ms - created_at_ms))
    return run + EXECUTION_GRACE


#: Workflow task timeout of a job's execution: how long a lost worker holds the job up
#: before another worker takes its workflow task over. The job-level steps (``finish``,
#: ``request_cancel``, ``admit``) are local activities run inside workflow tasks, so this is
#: also how long a worker killed during ``finish`` costs (Temporal's default is 10 s).
#: Every start of a job's execution uses it: HTTP and the reconciler
#: (:func:`curaflow.temporal.connection.start_job_workflow`), Temporal clients
#: (:data:`curaflow.jobs.submit.JOB_START_OPTIONS`), schedules (``workflows/scheduled.py``).
JOB_TASK_TIMEOUT = timedelta(seconds=5)


#: What a job's end gives its callback pushes besides one push's whole time
#: (``callback_timeout_ms``): scheduling the ``push_events`` activity, the ledger's claim and
#: record, a refused connection's first quick retries (:func:`end_push_wait`).
END_PUSH_GRACE = timedelta(seconds=5)


def end_push_wait(timeout_ms: int, run_left: timedelta | None) -> timedelta:
    """How long a job's execution waits for its callback pushes once ``finish`` recorded
    the outcome (the terminal event is then in the ledger, its push just requested).

    One push's whole time (``timeout_ms``, the policy's ``callback_timeout_ms``) plus
    :data:`END_PUSH_GRACE` — 35 s under the default policy — and never past
    :data:`JOB_TASK_TIMEOUT` before Temporal closes the run (``run_left``: a run or
    execution timeout its starter set), so the run ends with the job's result, never
    ``TimedOut``. A receiver that answers has the terminal event before the run closes;
    one that is down or hangs holds the run no longer: what is still pending stays in the
    ledger and the push sweeper (:mod:`curaflow.jobs.pushes`) sends it, in order.

    Args:
        timeout_ms: the total time of one push, ms.
        run_left: how long until Temporal closes the run, or None (no limit).

    Returns:
        The wait (zero: no time is left; hand everything over at once).
    """
    wait = timedelta(milliseconds=timeout_ms) + END_PUSH_GRACE
    if run_left is not None:
        wait = min(wait, run_left - JOB_TASK_TIMEOUT)
    return max(wait, timedelta(0))

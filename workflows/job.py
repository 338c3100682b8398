"""``JobWorkflow``: one execution per job (workflow id = job id), one concurrent cell per target.

Per cell: ``acquire`` (``search`` then ``fetch`` in one step, on the account's rate-gate
task queue: binds a work, downloads it) → ``deliver`` on every route concurrently; a
scheduled job's cell may run up to ``max_fallback_stages`` search passes
(:mod:`curaflow.domain.fallback`). Every activity writes its own cell transition to the
ledger and returns the cell as the ledger holds it.

Besides ordering the steps, the workflow admits its own Task when started by a Temporal
client (the ``admit`` local activity; a refused Task fails the execution with the
protocol code), serves the ``status`` query and the ``cancel`` signal, and keeps what
operators see current: the ``JobStatus`` / ``BusinessStatus`` search attributes and the
UI's current details (:mod:`workflows.details`, re-rendered only when what they show
changed).

The job moves through one explicit :class:`Phase`: ``running → cancelling → finishing
→ done``. Two barriers end ``running`` (DESIGN.md decision 13):

* a cancel, by any path — the ``cancel`` signal, a Temporal cancel request (UI, CLI,
  ``POST /jobs/{id}/cancel``), or a cancel an activity found in the ledger — all go
  through :meth:`JobWorkflow._request_cancel`; the workflow then first records it in the
  ledger (``request_cancel``: from then on no step opens and no delivery is claimed)
  and asks Temporal to cancel the execution, then cancels the cells' in-flight steps;
* the deadline timer (named ``job deadline`` in the UI), or a step that found the
  deadline passed in the ledger: the cells' in-flight steps are cancelled.

After a barrier no step that searches, fetches or sends is scheduled; steps in flight
are cancelled through their heartbeats and waited for (a send already out is finished
and reported). Then ``finish`` gets the facts — the cause and each failed step as
Temporal reported it — and the ledger decides every open cell's reason
(:func:`curaflow.domain.verdicts.cell_verdict`); the workflow adopts the result. Only
expected failures become facts: an ``ActivityError`` or a cancellation. Any other
exception is a bug and fails the workflow task, so the execution waits for a fixed
worker and replays.

Executions started before this shape replay :mod:`workflows.job_v1` (no ``core-v2``
patch marker in their history). Executions started from ``core-v3`` on take every later
change with that one marker (:data:`CORE_V3`); those with ``core-v2`` and no ``core-v3``
keep the shape they were started with, one ``workflow.patched`` call per change.

Deterministic and sandbox-clean: imports only pure modules and activity definitions.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from datetime import timedelta
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from activities.admit import AdmitActivity, refusal
    from activities.finish import UNKNOWN_JOB, FinishActivity
    from curaflow.domain.cells import CellState, is_terminal
    from curaflow.domain.execution import CUSTOM_SEARCH_ATTRIBUTES, EXECUTION_GRACE, RunTimeout, end_push_wait
    from curaflow.domain.job_failure import JOB_FAILURE_TYPES, job_failure
    from curaflow.domain.messages import (
        AcquireInput,
        AdmissionAnswer,
        Admitted,
        CancelRequest,
        CellUpdate,
        DeliverInput,
        FinishedElsewhere,
        FinishInput,
        JobInput,
        JobState,
        PausedStep,
        RunLimit,
        SubmitInput,
        TargetSpec,
    )
    from curaflow.domain.models import CellSnapshot, DeliveryReport
    from curaflow.domain.presentation import BUSINESS_STATUS, JOB_STATUS, JOB_TYPE, job_search_attributes
    from curaflow.domain.projection import TERMINAL_JOB_STATUSES, JobStatus, job_stage, job_status
    from curaflow.domain.verdicts import FailureKind, FinishCause, Step, StepFailure
    from curaflow.protocol.errors import ProtocolError, invalid_params
    from curaflow.protocol.models import MAX_DEADLINE_MS, Task
    from curaflow.protocol.task import (
        identity_conflict,
        manual_job_id,
        oversized_task,
        validate_task,
        workflow_id_conflict,
    )
    from curaflow.temporal.refusals import admission_failure, refusal_details
    from workflows.details import render_details
    from workflows.event_push import EventPusher
    from workflows.job_v1 import JobV1
    from workflows.steps import (
        ADMIT_CONFIG,
        CANCEL_CONFIG,
        CANCELLED_END_CONFIG,
        CRON_CANCEL_CONFIG,
        ENDED_ELSEWHERE_CONFIG,
        LOCAL_ACTIVITY_FAILURES,
        PAUSED_STEPS_CONFIG,
        failure_facts,
        finish_config,
        local_activity_failure,
        published_status,
        step_config,
        step_result,
    )
    from workflows.submission import Submission, not_one_task_value, read_submission

CORE_V2 = "core-v2"
#: The shape of executions started from this version on, under one marker: every patch
#: below (``source-heartbeat``, ``explicit-submission``, ``cell-progress``,
#: ``failed-execution``, ``reporting-run``) without a marker of its own — each marker costs
#: a history event and the SDK's ``TemporalChangeVersion`` upsert, on every job — and the
#: deadline timer left to expire with the execution instead of cancelled (one event less
#: per job that ends in time).
CORE_V3 = "core-v3"
#: A source step's heartbeat timeout is the source-queue lease (``Budgets.source_heartbeat_timeout_ms``):
#: a step taken by a frozen process's poll is back in the queue within it.
SOURCE_HEARTBEAT = "source-heartbeat"
#: A start input that is both a valid ``JobInput`` and a Task is admitted as a Task
#: (before, pydantic's smart union could take it for an admitted job).
EXPLICIT_SUBMISSION = "explicit-submission"
#: The ``cell_progress`` signal (a cell bound its work) updates the live state.
CELL_PROGRESS = "cell-progress"
#: A job that ended ``failed`` / ``expired`` fails its execution (it completed before).
FAILED_EXECUTION = "failed-execution"
#: A run another client added under an ended job's id reports the job without publishing
#: ``JobStatus`` / ``BusinessStatus`` (it published them as if it were the job before).
REPORTING_RUN = "reporting-run"
#: Input from outside curaflow the SDK would fail the workflow task on for ever — a signal
#: with more or fewer arguments than its handler takes, a step "completed" (``temporal
#: activity complete``) with a result that is no ``CellUpdate`` — or a ``cell_progress``
#: snapshot no ``acquire`` sends (a terminal cell): dropped, or the step counted as failed.
#: Called only where such input arrived, so a job that never gets any records no marker.
FOREIGN_INPUT = "foreign-input"
#: A ``JobInput`` of a job whose id is not the execution's (a copy of a job's input started
#: under a fresh id: the UI's "start workflow like this one", a copied ``--input``) is
#: refused with ``invalid_params`` (``detail.field: workflow_id``), as a Task under another
#: id is; before, the copy ran the job's steps and finished it. Called only for such an
#: input, so a job's own execution records no marker.
OWN_JOB_ONLY = "own-job-only"
#: A run started with a job's ``JobInput`` whose first step finds the job ended in the ledger
#: and held by another run of its id (``CellUpdate.ended_in_another_run``: a ``temporal
#: workflow reset`` of a closed HTTP job's run, a start under its id with Temporal's default
#: reuse policy) only reports the job, as :data:`REPORTING_RUN` does for a Task: it publishes
#: no ``JobStatus`` / ``BusinessStatus`` (and drops the ``JobStatus`` it was started with),
#: so the list queries name the job once; before, it published ``running`` then the job's end.
#: Called only where that result arrived, so a job's own execution records no marker.
JOB_INPUT_REPORTING_RUN = "job-input-reporting-run"
#: curaflow's own search attributes (``JobStatus``, ``BusinessStatus``, ``JobType``,
#: ``TargetIds``, ``ScheduleId``) that a run's starter set otherwise than curaflow starts a
#: job (``temporal workflow start --search-attribute 'JobStatus="failed"'``, another SDK's
#: ``search_attributes=``) are removed in the run's first workflow task: a Task's run
#: carries none until it admits its Task (admission sets the job's), a ``JobInput``'s run
#: none that differs from the job's (:func:`~curaflow.domain.presentation.job_search_attributes`).
#: Before, a refused run kept
#: a forged ``JobType`` — it then looked like the job's own run and blocked its key — and a
#: forged ``JobStatus`` put it in the failed jobs' list. Asked only where they differ, so a
#: run started by curaflow records no marker.
STARTER_ATTRIBUTES = "starter-attributes"
#: A run started with a cron schedule (``temporal workflow start --cron``, another SDK's
#: ``cron_schedule=``) is refused (``invalid_params``, ``detail.field: cron_schedule``) in its
#: first workflow task, before anything is written, and ends ``Canceled`` — the one end
#: after which Temporal starts no next run of the schedule (a failed or completed run has
#: its next one started with it). Before, the first run ran the job, and Temporal then
#: added a run under the job id at every occurrence, for ever: each admitted the same Task,
#: the same job, and only reported it, while an open run waiting for the next occurrence
#: held the id (starts attached to it). Asked only for a run with a cron schedule.
NO_CRON = "no-cron"
#: A Task's run whose starter set a run or execution timeout that could end the run
#: before the job's deadline (``run_timeout=``, ``execution_timeout=``, the CLI's
#: ``--run-timeout`` / ``--execution-timeout``) tells admission when the run ends
#: (:class:`~curaflow.domain.messages.RunLimit`): the job's deadline comes
#: :data:`~curaflow.domain.execution.RUN_END_MARGIN` before it, so the job expires on its
#: own, in its one run — or, when no deadline fits, the Task is refused (``invalid_params``,
#: ``detail.field`` the timeout). Before, Temporal timed the run out mid-job: under a
#: workflow retry policy it started another run under the job id, which admitted the same
#: Task and ran the job again (each cut, each left ``JobStatus = running`` on a TimedOut
#: run), and the report said the job "ran past its deadline" with its deadline still ahead.
#: Asked only for a run whose limit is shorter than the longest deadline plus the margin,
#: so a run started by ``start_job`` (7 days + 10 min) or curaflow records no marker.
RUN_LIMIT = "run-limit"
#: A run whose job ended ``cancelled`` without this run taking the cancel path — a run
#: another client added under the id of a job that was cancelled or terminated (the
#: ledger's ``cancelled / execution_terminated``: the documented ``temporal workflow start``
#: with Temporal's default reuse policy, a ``temporal workflow reset`` of the job's closed
#: run, ``start_job`` once the job's execution was deleted, a start with the job's
#: ``JobInput``), or a job's own run that found it ended so — ends ``Canceled``, as the
#: result contract says of a cancelled job: it asks Temporal to cancel this run
#: (``request_cancel`` with ``no_job``: nothing is written in the ledger) and ends once the
#: request arrives. Before, it completed with the cancelled state as its result, and the
#: job id read as a green *Completed* in the UI, ``describe`` and ``result()``. Asked only
#: where such a run ends, so every other run records no marker.
CANCELLED_END = "cancelled-end"
#: A job with a callback waits for its pushes after ``finish`` at most
#: :func:`~curaflow.domain.execution.end_push_wait` — one push's whole time plus 5 s, never
#: past the run's own limit — then hands what is still pending to the push sweeper
#: (:meth:`workflows.event_push.EventPusher.settled_within`) and closes with the job's
#: result. Before, the end waited until every push settled, for as long as the callback
#: policy's retries lasted (up to ``callback_max_attempts`` sends of every pending event,
#: minutes): a receiver that was down kept the run open after the outcome was recorded —
#: ``JobStatus`` said the job ended while the execution was Running, and a run its
#: starter limited was timed out by Temporal. Asked only by a job with a callback, at its
#: end, so a job without one records no marker.
PUSH_BOUND = "push-bound"
#: A job whose deadline stops steps still in flight asks Temporal which of them an operator
#: paused (``temporal activity pause``, the UI's "Pause": the ``paused_steps`` local
#: activity, one describe) before it cancels them, and reports such a cell ``step_paused``
#: (owner ``operator``, :attr:`~curaflow.domain.verdicts.StepFailure.paused`). Before, the
#: cell ended ``execution_timeout`` — "The job ran past its deadline; retry with a longer
#: deadline_ms or a narrower query", owner ``curaflow`` — while Temporal held the step paused
#: and no deadline would have helped. Asked only at a deadline with steps in flight, so a job
#: that ends in time records no marker.
PAUSED_STEPS = "paused-steps"
#: A start input whose JSON text has no one meaning — a member twice (``"limit":0,"limit":2``),
#: ``NaN`` / ``Infinity``, ``1e400``: the text ``POST /jobs`` refuses (``duplicate_member``,
#: ``not_json_number``, ``number_out_of_range``) — is refused with that refusal, at once,
#: nothing written (:class:`~curaflow.protocol.json_text.AmbiguousObject`, read by the
#: worker's payload converter). Before, the run took the SDK decoder's reading of it — the
#: last member given twice, ``inf`` for ``1e400`` (a limit then dropped) — and admitted the
#: Task: one Task, two answers, one per door. Asked only for such an input, so a run
#: started by curaflow or with well-formed JSON records no marker.
ONE_MEANING = "one-meaning-input"
#: ``paused_steps`` failing at the deadline (Temporal's describe refused or unanswered: the
#: activity's ``RPCError``) names no pause and the deadline's stop goes on, as
#: :data:`PAUSED_STEPS` meant. Before, that failure reached the workflow as the activity's
#: own ``ApplicationError`` — a local activity's failure is not wrapped in the
#: ``ActivityError`` that ``_paused_steps`` caught — and failed the run with it: no finish,
#: the job left open for the reconciler, the execution's failure a transport error. Asked
#: only where that failure arrived, so a job that ends in time records no marker.
PAUSED_STEPS_UNANSWERED = "paused-steps-unanswered"
#: A run whose job ended ``cancelled`` and that was sent a ``cancel`` signal it never took
#: the cancel path for — a signal-with-start of ``cancel`` under the id of a job that
#: was cancelled (Temporal's default reuse policy adds a run: it admits its Task, finds
#: the job ended and only reports it), or a ``cancel`` signal reaching such a run while
#: it admitted — ends ``Canceled`` as :data:`CANCELLED_END` says. Before, the run waited
#: for the Temporal cancel request its own cancel path asks for, which it never asked
#: for: it stayed open for ever (the id read Running with the job long ended, its
#: execution timeout the only end). Asked only there, so every other run records no marker.
REPORTING_RUN_CANCEL = "reporting-run-cancel"
#: A run added with a job's ``JobInput`` under the id of a job that had ended, sent a
#: ``cancel`` before its first step — a signal-with-start of ``cancel`` with the input
#: ``workflow show`` lists, a ``temporal workflow reset`` of a run that got a ``cancel``
#: signal (the reset reapplies it to the new run) — only reports the job, as
#: :data:`JOB_INPUT_REPORTING_RUN` says: its first step, which tells such a run so, never
#: opens behind the cancel, so ``request_cancel`` tells it
#: (``CancelAnswer.ended_in_another_run``). Before, the run published the job's end as its
#: own ``JobStatus`` / ``BusinessStatus`` (the lists named the job twice) and the ledger
#: recorded a cancel on the ended job. Asked only where that answer arrived.
CANCEL_REPORTING_RUN = "cancel-reporting-run"
#: A run added with a job's ``JobInput`` under the id of a job that had ended, whose
#: deadline (the ``JobInput``'s, copied) was behind it when it began — a ``temporal workflow
#: reset --type FirstWorkflowTask`` of the job's closed run more than ``deadline_ms`` (30 min
#: by default) after the job was admitted, a start with the input ``workflow show`` lists —
#: stops before its first step, which is what tells such a run that it only reports the job
#: (:data:`JOB_INPUT_REPORTING_RUN`). It now asks the same question before its finish
#: (the ``ended_elsewhere`` local activity, :data:`~workflows.steps.ENDED_ELSEWHERE_CONFIG`)
#: and only reports the job. Before, it published the job's end as its own ``JobStatus`` /
#: ``BusinessStatus``: the failed jobs' list named a failed job twice. Asked only by a
#: ``JobInput`` run that the deadline stopped before any step opened.
LATE_REPORTING_RUN = "late-reporting-run"
#: A run that only reports a job (:meth:`JobWorkflow._report_only`) started without the
#: job's ``JobType`` — a plain start with the job's ``JobInput`` (a reset copies the start's
#: attributes, a plain start carries none) — upserts the job's attributes but its state
#: (``JobType``, ``TargetIds``…), as a Task's reporting run does, so the id's latest run is
#: read as one that held the job (:func:`curaflow.temporal.job_runs.held_a_job`). Before, it
#: was read as a run that held no job: ``start_job`` with the job's Task tried the start
#: again with ``ALLOW_DUPLICATE_FAILED_ONLY``, which Temporal refuses after a completed run —
#: the client got a bare ``RPCError`` ("Update-with-Start could not be executed") instead of
#: the job's state — and after a cancelled or failed one added yet another run. Asked only
#: where such a run reports, without ``JobType``.
REPORTING_RUN_ATTRIBUTES = "reporting-run-attributes"
#: A run whose ``finish`` found its job already ended and held by another run of its id
#: (:class:`~curaflow.domain.messages.FinishedElsewhere`: a ``temporal workflow reset`` of
#: an ended job's closed run to a workflow task after its first step's result — a failed
#: Task job reset past its ``acquire`` — replays that result, so the first step never tells
#: it so) only reports the job (:meth:`JobWorkflow._report_only`): it removes the
#: ``JobStatus`` / ``BusinessStatus`` the reset copied and publishes the job's end as no
#: state of its own. Before, it published ``JobStatus = failed`` as the job's run: the
#: lists named the job twice, by two runs that each ended it. Asked only where that answer
#: arrived, so a job that ends in its own run records no marker.
FINISH_REPORTING_RUN = "finish-reporting-run"
#: A Task's run that admits its Task after the ledger ended its job while it is the job's own
#: run (``Admitted.own_run``: no other run of its id holds the job, and the run began before
#: the job ended — the run a ``temporal workflow reset`` started from the job's open run, the
#: reconciler having ended the job while no worker could run it; the job's only run, which
#: admitted its Task after the reconciler ended the job a ``POST /jobs`` attached to it)
#: publishes the job's end as the job's run does: its ``JobStatus`` / ``BusinessStatus``.
#: Before, admission's ``final`` made every such run only report the job (as a run added
#: under an ended job's id must): no run named the job's end, and the failed jobs' list
#: named an expired job zero times. Asked only where that answer arrived.
OWN_RUN_ADMITTED_LATE = "own-run-admitted-late"
#: The run limits that can come before a job's deadline plus the room it needs to end
#: itself (:data:`RUN_LIMIT`): the longest deadline plus the longest room any configuration
#: asks for — :data:`~curaflow.domain.execution.EXECUTION_GRACE`, which holds
#: :func:`~curaflow.domain.execution.run_end_room_ms` for every heartbeat interval the
#: configuration accepts. Until 2026-12-06 it was the longest deadline plus
#: ``RUN_END_MARGIN`` (30 s), the room before it took in a step's heartbeat timeout: a
#: limit between the two (7 days + 60 s with a 7-day ``deadline_ms``) was not passed to
#: admission and left the job less room than it needs. ``start_job``'s and ``run_job``'s
#: limit (7 days + 10 min) is not under it: those runs record no marker, as before. A
#: history recorded before replays: a run in between then recorded no marker, so
#: ``workflow.patched`` answers False for it and the limit is not passed, as then.
RUN_LIMIT_FLOOR = timedelta(milliseconds=MAX_DEADLINE_MS) + EXECUTION_GRACE
#: What a refused cron start says (:data:`NO_CRON`).
CRON_REFUSED = (
    "a job runs once: a cron schedule would start it again under its id at every occurrence; "
    "start it without one, and use curaflow's schedules for a recurring job"
)
#: The search attributes that say a job's state: only the job's own run carries them.
JOB_STATE_ATTRIBUTES = frozenset({JOB_STATUS.name, BUSINESS_STATUS.name})
STAGE_OF: Mapping[Step, str] = MappingProxyType(
    {
        "acquire": "searching",
        "search": "searching",
        "fetch": "fetching",
        "deliver": "delivering",
    }
)


class Phase(StrEnum):
    """Where the job is: steps are scheduled only while ``running``."""

    RUNNING = "running"
    CANCELLING = "cancelling"  # a barrier fired: in-flight steps are being stopped
    FINISHING = "finishing"
    DONE = "done"


#: What ``JobWorkflow`` is started with, resolved by :func:`workflows.submission.read_submission`:
#: a protocol Task (Temporal clients: typed, or plain JSON from any SDK or the CLI) or the
#: ``JobInput`` of a job already admitted (HTTP, schedules, the reconciler); any other
#: input is refused with ``invalid_params``.
JobSubmission = JobInput | Task | dict[str, Any]


@workflow.defn(name="JobWorkflow")
class JobWorkflow:
    """One job: cells run concurrently; the ``status`` query answers the live :class:`JobState`.

    Started with a Task, it admits it first (the ``admit`` activity, the admission of
    ``POST /jobs``); until then it holds no job (``status`` answers stage ``admitting``).
    Any other input — none, two arguments, a non-object, an undecodable payload, a JSON
    text with no one meaning (:data:`ONE_MEANING`), a
    ``JobInput`` of a job whose id is not the workflow id (:data:`OWN_JOB_ONLY`) — fails
    the execution at once with ``invalid_params`` (never the workflow task), so no input
    makes a zombie, blocks the id or runs another execution's job. The input is taken untyped (``*args``) and resolved
    by :func:`workflows.submission.read_submission`.
    """

    @workflow.init
    def __init__(self, *args: Any) -> None:
        self._submission: Submission = read_submission(args)
        self._inp: JobInput | None = None
        self._cells: dict[str, CellSnapshot] = {}
        self._pending = 0  # how many of the cells are pending (JobStatus): see _set_cell
        self._pusher: EventPusher | None = None
        self._admitted = False  # the job of this execution is known (admitted, or started admitted)
        self._refused: ApplicationError | None = None  # this execution's Task refused, or its admission failed
        self._cron = bool(workflow.info().cron_schedule) and workflow.patched(NO_CRON)
        if self._cron:
            self._submission = Submission(
                refusal=invalid_params(CRON_REFUSED, field="cron_schedule", received=workflow.info().cron_schedule)
            )
        elif self._submission.ambiguous is not None and workflow.patched(ONE_MEANING):
            self._submission = Submission(refusal=self._submission.ambiguous)
        admitted = self._submission.job_input
        if self._submission.task is None and admitted is not None:
            other = workflow_id_conflict(admitted.job_id, workflow.info().workflow_id)
            if other is not None and workflow.patched(OWN_JOB_ONLY):
                self._submission = Submission(refusal=other)
            else:
                self._begin(admitted)
        self._deliveries: dict[tuple[str, str], DeliveryReport] = {}
        self._failures: dict[str, StepFailure] = {}
        self._phase = Phase.RUNNING
        self._cause = FinishCause.COMPLETED
        self._temporal_cancel = False  # a Temporal cancel request reached the execution
        self._cancel_asked = False  # this run's cancel path asked Temporal to cancel it
        self._stepped = False  # a step of this run was scheduled (LATE_REPORTING_RUN)
        self._final: JobState | None = None
        self._published = ("queued", "")  # set at start (curaflow.temporal.connection)
        self._details = ""
        self._shown: tuple[Any, ...] = ()
        self._details_due = False  # the details may be stale: _show_details renders them
        self._details_task: asyncio.Task[None] | None = None
        self._version: int | None = None
        self._v1: JobV1 | None = None
        self._reporting = False  # a run added under an ended job's id: it only reports the job
        self._no_job: ApplicationError | None = None  # the ledger does not know this run's job

    def _begin(self, inp: JobInput) -> None:
        """Hold the admitted job (once per execution)."""
        self._inp = inp
        self._cells = {t.target_id: CellSnapshot(target_id=t.target_id) for t in inp.targets}
        self._pending = len(self._cells)  # cells in state pending: kept by _set_cell
        self._pusher = EventPusher(inp.job_id, inp.callback_policy if inp.callback else None)

    def _legacy(self) -> JobV1 | None:
        """The core v1 orchestration for executions whose history predates core v2.

        Decides the execution's shape once (:data:`CORE_V3`, else ``core-v2``, else v1): a
        new execution records only the ``core-v3`` marker."""
        if self._version is None:
            self._version = 3 if workflow.patched(CORE_V3) else 2 if workflow.patched(CORE_V2) else 1
            self._v1 = JobV1(self._inp) if self._version == 1 and self._inp is not None else None
        return self._v1

    def _has(self, patch: str) -> bool:
        """Whether a change made after core v2 applies: always from ``core-v3`` on, else
        by its own marker (executions started between core v2 and core v3)."""
        self._legacy()
        return self._version == 3 or workflow.patched(patch)

    # ---- queries and signals ----------------------------------------------------

    @workflow.query
    def status(self) -> JobState:
        """The live job state: status and stage from the same projection as ``GET /jobs/{id}``.

        Raises:
            ApplicationError: this run holds no job and never will — it refused its input
                (its Task, or input that is none), its admission failed (curaflow's failure,
                retryable: ``ledger_unavailable``, ``internal_error``; since 2026-12-07),
                or the ledger does not know the job of
                its ``JobInput`` (``unknown_job``): the query fails with that refusal
                (``type`` its code, its details), as ``GET /jobs/{id}`` answers 404 for an
                id no job has. Until 2026-12-07 such a run answered ``queued`` /
                ``admitting`` (``running`` / ``finishing`` for a stale ``JobInput``) for
                ever. While its Task is being admitted a run answers stage ``admitting``.
        """
        held = self._holds_no_job()
        if held is not None:
            raise ApplicationError(
                f"this run holds no job: {held.type}: {held.message}",
                *held.details,
                type=held.type,
                non_retryable=held.non_retryable,
            )
        return self._live_state()

    def _holds_no_job(self) -> ApplicationError | None:
        """Why this run holds no job and never will, once it knows: its input's refusal,
        its Task's, or the ledger's ``unknown_job``; else None."""
        if self._submission.refusal is not None:
            return refusal(self._submission.refusal)
        return self._refused or self._no_job

    def _live_state(self) -> JobState:
        """The state the ``status`` query answers (see :meth:`status`)."""
        if self._v1 is not None:
            return self._v1.status()
        if self._final is not None:
            return self._final
        if self._inp is None:  # no job yet: the Task is being admitted
            return JobState(
                job_id=workflow.info().workflow_id,
                stage="admitting",
                cancel_requested=self._cause == FinishCause.CANCELLED,
                created_at_ms=int(workflow.info().start_time.timestamp() * 1000),
            )
        cells = [self._cells[t.target_id] for t in self._inp.targets]
        status = job_status(cells)
        stage = job_stage(cells, status)
        if status in TERMINAL_JOB_STATUSES:  # every verdict is in; the finish has not committed
            status, stage = JobStatus.RUNNING, "finishing"
        if self._cause == FinishCause.CANCELLED:
            stage = "cancelling"
        return JobState(
            job_id=self._inp.job_id,
            job_type=self._inp.job_type,
            status=status,
            stage=stage,
            cancel_requested=self._cause == FinishCause.CANCELLED,
            created_at_ms=self._inp.created_at_ms,
            deadline_at_ms=self._inp.deadline_at_ms,
            cells=cells,
            deliveries=list(self._deliveries.values()),
        )

    @workflow.signal
    async def cancel(self, *args: Any) -> None:
        """Cancel the job (any argument: none, ``{"reason": …}``, a string …; more than one
        is foreign input, :data:`FOREIGN_INPUT`, and cancels too); the execution ends
        ``Canceled``. Ignored once the job is finishing."""
        if len(args) > 1:
            self._foreign(f"cancel signal with {len(args)} arguments")
        legacy = self._legacy()
        if legacy is not None:
            await legacy.cancel(args[0] if args else None)
            return
        self._request_cancel()

    @workflow.signal(name="cell_progress")
    def cell_progress(self, *args: Any) -> None:
        """A cell's step moved on inside one activity (``acquire`` bound a work and fetches
        it): the live state follows the ledger without waiting for the step's result.

        Takes one :class:`CellSnapshot` of a cell still ``pending`` here. Anything else is
        dropped: no argument or several (:data:`FOREIGN_INPUT`; they failed the workflow
        task), one that is no snapshot (as the SDK dropped it), a terminal snapshot
        (``acquire`` never sends one; :data:`FOREIGN_INPUT`). The snapshot is the live
        state only until the step's result, the ledger's, replaces it."""
        if len(args) != 1:
            self._foreign(f"cell_progress signal with {len(args)} arguments")
            return
        try:
            cell = CellSnapshot.model_validate(args[0])
        except ValueError:  # pydantic's ValidationError: not a snapshot, dropped
            workflow.logger.warning("cell_progress signal dropped: no cell snapshot")
            return
        if self._inp is None or self._phase != Phase.RUNNING or not self._has(CELL_PROGRESS):
            return
        current = self._cells.get(cell.target_id)
        if current is None or is_terminal(current.state) or current.state != CellState.PENDING:
            return
        if is_terminal(cell.state) and self._foreign(f"cell_progress signal with a {cell.state} cell", taken=True):
            return
        self._set_cell(cell)
        self._publish()

    def _foreign(self, what: str, *, taken: bool = False) -> bool:
        """Drop (True) input only a foreign client sends (:data:`FOREIGN_INPUT`).

        Args:
            taken: before :data:`FOREIGN_INPUT` the workflow took ``what`` as it came (a
                terminal ``cell_progress`` snapshot); else it failed the workflow task.

        Returns:
            False only for ``taken`` input in a run whose :data:`FOREIGN_INPUT` answers
            False: a history recorded before the patch in which ``what`` was taken. Input
            that failed the workflow task before the patch is always dropped: no history
            completes a task that held it, so nothing recorded depends on it — and
            ``workflow.patched`` answers a run the same once asked, so a run that
            replayed a forged snapshot taken before the patch answers False for the rest
            of its life, on the new code too (raising then left the job stuck until its
            execution timeout; tests/workflow/test_foreign_input.py).
        """
        if workflow.patched(FOREIGN_INPUT) or not taken:
            workflow.logger.warning("foreign input dropped: %s", what)
            return True
        return False

    @workflow.update(name="admission")
    async def admission(self, *args: Any) -> JobState:
        """Admit the Task ``args[0]`` as this execution's job, as ``POST /jobs`` does; the
        Temporal clients' idempotent start (update-with-start: :func:`curaflow.jobs.submit.start_job`).

        Takes its input untyped (``*args``): its validator (:meth:`_admission_input`) has
        refused any other than one valid Task before the update is accepted.

        The Task this execution was started with is admitted once, by the execution
        itself; any other Task goes through the same admission (``admit``), which answers
        a replay of the job's key and params with the job and anything else with the
        protocol's refusal — whether the job is queued, running or ended.

        Returns:
            The job's live state once admitted (its final state when it had ended).

        Raises:
            ApplicationError: the refusal (``type`` = protocol code, details
                ``{code, message, detail}``): ``idempotency_conflict``,
                ``invalid_params`` …; else curaflow's failure of the admission, no refusal
                (retryable ``ledger_unavailable`` / ``internal_error``:
                :func:`~curaflow.temporal.refusals.admission_failure`).
        """
        task: dict[str, Any] = args[0]
        await workflow.wait_condition(
            lambda: self._admitted or self._refused is not None or self._submission.refusal is not None
        )
        if self._submission.refusal is not None:
            raise refusal(self._submission.refusal)
        if self._refused is not None:
            raise ApplicationError(
                self._refused.message,
                *self._refused.details,
                type=self._refused.type,
                non_retryable=self._refused.non_retryable,
            )
        if task != self._submission.task:
            await self._admit(task)
        return self._live_state()

    @workflow.query(name="admission_answer")
    def admission_answer(self, *args: Any) -> AdmissionAnswer:
        """What admission answers the Task ``args[0]`` for this job, read from the execution
        alone (no I/O, so it answers on a closed run too: a worker replays it).

        The answer for a job whose run closed — Temporal refuses any start under its id
        (:mod:`curaflow.temporal.job_runs`), so :func:`curaflow.jobs.submit.start_job`,
        the CLI and other SDKs ask here. The rules are admission's: the Task validated
        as ``POST /jobs`` validates it, then compared with the job's key, target and
        params (:func:`curaflow.protocol.task.identity_conflict`). The checks that need
        the configuration (target eligibility, callback allow-list, account, work
        types) ran when the job was admitted and are not run again.

        Returns:
            ``state`` (the job's state, final once the workflow finished it) when the Task
            is the job's; ``refusal`` (``{code, message, detail, http_status}``)
            otherwise — ``invalid_params`` "request body must be a JSON object" for no
            argument, several or an undecodable one (``detail.reason: query_input``), and
            for one that is no object (``detail.reason: not_an_object``); the refusal
            ``POST /jobs`` gives a text with no one meaning (``duplicate_member``,
            ``not_json_number``, ``number_out_of_range``: :data:`ONE_MEANING`). A run that
            holds no job refuses an invalid Task the same way — that needs no job — and
            answers a valid one ``unanswered``: ``admitting`` while it admits its own Task,
            ``no_job`` once it refused it (since 2026-12-07; before, neither member was set
            for any Task). During its ``start_delay`` a run has no workflow task: Temporal
            refuses the query itself ("Workflow task is not scheduled yet.") and no worker
            sees it.
        """
        inp = self._inp
        refused = not_one_task_value(args, "query_input") or self._oversized(args[0])
        if refused is not None:
            return AdmissionAnswer(refusal=refusal_details(refused))
        try:
            task_view = validate_task(args[0])
        except ProtocolError as err:
            return AdmissionAnswer(refusal=refusal_details(err))
        if inp is None:
            return AdmissionAnswer(unanswered="no_job" if self._holds_no_job() is not None else "admitting")
        targets = [t.target_id for t in inp.targets]
        key, params = self._identity()
        if key is None and manual_job_id(targets[0], task_view.idempotency_key) != inp.job_id:
            key = ""  # not even the job id matches: another request
        conflict = identity_conflict(
            inp.job_id,
            key=key,
            target_ids=targets,
            params=params,
            task=task_view,
            target_id=task_view.target_id or (targets[0] if len(targets) == 1 else ""),
        )
        if conflict is not None:
            return AdmissionAnswer(refusal=refusal_details(conflict))
        return AdmissionAnswer(state=self._live_state())

    def _identity(self) -> tuple[str | None, dict[str, Any] | None]:
        """The job's key and params: carried by its ``JobInput``, else those of the Task this
        execution admitted, else unknown (a job admitted before identities were carried)."""
        assert self._inp is not None
        if self._inp.identity is not None:
            return self._inp.identity.idempotency_key, self._inp.identity.params
        if self._submission.task is not None:
            try:
                own = validate_task(self._submission.task)
            except ProtocolError:
                return None, None
            return own.idempotency_key, own.params
        return None, None

    @admission.validator
    def _admission_input(self, *args: Any) -> None:
        """Reject, without a trace in the history, an update input that is no valid Task
        (DESIGN.md "Foreign input"). No patch: a validator runs only when the update
        arrives, never on replay, so it changes no recorded history.

        Raises:
            ApplicationError: the protocol's refusal (``type`` = its code, details
                ``{code, message, detail}``): ``invalid_params`` "request body must be a
                JSON object" for no argument, several, an undecodable one
                (``detail.reason: update_input``) or one that is no object
                (``not_an_object``, :func:`~curaflow.protocol.task.validate_task`); the refusal
                ``POST /jobs`` gives a text with no one meaning (:data:`ONE_MEANING`); else
                :func:`~curaflow.protocol.task.validate_task`'s first broken rule
                (``invalid_params`` with ``detail.field``, ``unsupported_protocol_version``) —
                what ``POST /jobs`` answers that body, and what admission would answer first.
        """
        try:
            refused = not_one_task_value(args, "update_input") or self._oversized(args[0])
            if refused is None:
                validate_task(args[0])
        except ProtocolError as err:
            refused = err
        if refused is not None:
            raise refusal(refused)

    def _oversized(self, task: Any) -> ProtocolError | None:
        """The refusal of a Task larger than the job was admitted to take
        (``JobInput.max_task_bytes``: 413 ``invalid_params``, what ``POST /jobs`` answers
        such a body first), else None — also before this run holds a job, and for a job
        admitted before the limit was carried. Read by the ``admission`` update's validator
        (a Task admission would refuse by its size is never recorded: each such update put
        up to Temporal's payload limit into the history, and a few dozen grew it past
        Temporal's history limit, which terminated the job; until 2026-12-07) and by
        ``admission_answer``."""
        limit = self._inp.max_task_bytes if self._inp is not None else None
        return oversized_task(task, limit) if limit is not None else None

    # ---- main -------------------------------------------------------------------

    @workflow.run
    async def run(self, *args: Any) -> JobState:
        """Run every cell, then finish; ends ``Canceled`` when the job ended cancelled by a
        cancel, fails (``job_failed`` / ``job_expired``, the final state as details) when
        it ended failed or expired (:mod:`curaflow.domain.job_failure`).

        Args:
            args: one :data:`JobSubmission` (anything else is refused, see the class doc).

        Raises:
            ApplicationError: a refused input or Task (``type`` = the protocol code, details
                ``{code, message, detail}``) or a job the ledger does not know
                (``unknown_job``); all non-retryable, all within seconds.
        """
        legacy = self._legacy()
        if legacy is not None:
            assert self._inp is not None
            return await legacy.run(self._inp)
        self._own_attributes()
        submission = self._submission
        if submission.refusal is not None:
            await workflow.wait_condition(workflow.all_handlers_finished)
            if self._cron:
                await self._end_schedule(submission.refusal)
            raise refusal(submission.refusal)
        if submission.mixed and not self._has(EXPLICIT_SUBMISSION):
            assert submission.job_input is not None  # started before the explicit resolution
            self._submission = Submission(job_input=submission.job_input)
            self._begin(submission.job_input)
        job = asyncio.create_task(self._job())
        while True:
            try:
                final = await asyncio.shield(job)
                break
            except asyncio.CancelledError:
                if job.cancelled():
                    # The job's own task was cancelled: only the SDK's eviction does that
                    # (it cancels every task of the execution and waits for them to end,
                    # then replays). Nothing is left to wait for; waiting again raised at
                    # once, for ever — until 2026-12-06 an eviction at the job's end (its
                    # finish, its push wait) spun here and held the worker's slot.
                    raise
                # A Temporal cancel request (UI, CLI, HTTP): the job itself is never
                # interrupted; it takes the cancel path.
                self._temporal_cancel = True
                self._request_cancel()
        if (
            self._cause == FinishCause.CANCELLED
            and final.status == JobStatus.CANCELLED
            and (self._temporal_cancel or self._cancel_asked or not workflow.patched(REPORTING_RUN_CANCEL))
        ):
            # ``request_cancel`` asked Temporal to cancel this execution; end Canceled once
            # that request arrived. A run that only reported the job never asked for it
            # (:data:`REPORTING_RUN_CANCEL`): it ends as any run of a cancelled job, below.
            with contextlib.suppress(asyncio.CancelledError):
                await workflow.wait_condition(lambda: self._temporal_cancel)
            raise CancelledError("cancelled_by_consumer")
        if final.status == JobStatus.CANCELLED and workflow.patched(CANCELLED_END):
            await self._end_canceled()
        if str(final.status) in JOB_FAILURE_TYPES and self._has(FAILED_EXECUTION):
            # The UI lists a failed job as Failed, not as a green Completed; the final
            # state travels in the failure's details (curaflow.domain.job_failure).
            raise job_failure(final)
        return final

    async def _end_canceled(self) -> None:
        """End this run ``Canceled``: its job ended ``cancelled``, and this run did not take
        the cancel path (:data:`CANCELLED_END`). A cancel request already delivered (an
        operator's, racing the end) is the one the SDK ends the run with; otherwise the run
        asks Temporal to cancel itself — only this run, nothing written — and ends once the
        request arrives.

        Raises:
            temporalio.exceptions.CancelledError: always (the SDK ends the run ``Canceled``,
                a cancel having been requested).
        """
        if not self._temporal_cancel:
            with contextlib.suppress(asyncio.CancelledError):
                await workflow.execute_local_activity_method(
                    FinishActivity.request_cancel,
                    CancelRequest(reason="the job ended cancelled", no_job=True),
                    **CANCELLED_END_CONFIG,
                )
                await workflow.wait_condition(lambda: False)
        raise CancelledError("cancelled_by_consumer")

    async def _end_schedule(self, refused: ProtocolError) -> None:
        """End this cron-scheduled run ``Canceled`` (:data:`NO_CRON`): a failed run would have
        the schedule's next run started with it. The run asks Temporal to cancel itself and
        ends once the request arrives (``request_cancel`` with ``no_job``: nothing is written);
        its current details say why (the cancel carries no message).

        Raises:
            asyncio.CancelledError: the cancel arrived (the SDK ends the run ``Canceled``).
        """
        workflow.logger.warning("cron-scheduled start refused: %s", refused.message)
        workflow.set_current_details(
            f"refused (`{refused.code}`, `cron_schedule`): {refused.message} — nothing was written, "
            "and no next run of the schedule starts"
        )
        await workflow.execute_local_activity_method(
            FinishActivity.request_cancel,
            CancelRequest(reason="cron_schedule refused", no_job=True),
            **CRON_CANCEL_CONFIG,
        )
        await workflow.wait_condition(lambda: False)

    def _own_attributes(self) -> None:
        """Remove curaflow's search attributes its starter set otherwise than curaflow
        starts this run (:data:`STARTER_ATTRIBUTES`): any for a Task (or a refused input),
        admission sets the job's; for an admitted ``JobInput``, any that differs from the
        job's. Only removed, never added: a ``JobType`` added to a run that may yet fail
        (a stale ``JobInput`` the ledger does not know) would make it look like the job's
        own run. One upsert, only where they differ.
        """
        carried = workflow.info().typed_search_attributes
        expected = job_search_attributes(self._inp) if self._inp is not None else None
        forged = [
            key
            for key in CUSTOM_SEARCH_ATTRIBUTES
            if carried.get(key) is not None and (expected is None or carried.get(key) != expected.get(key))
        ]
        if forged and workflow.patched(STARTER_ATTRIBUTES):
            workflow.logger.warning(
                "search attributes set by the starter removed: %s", ", ".join(key.name for key in forged)
            )
            workflow.upsert_search_attributes([key.value_unset() for key in forged])
            if JOB_STATUS in forged and self._inp is not None:
                self._published = ("", "")  # the admitted job publishes its own at once

    async def _job(self) -> JobState:
        if self._inp is None:
            assert self._submission.task is not None
            try:
                admitted = await self._admit(self._submission.task)
            except ApplicationError as err:
                self._refused = err
                await workflow.wait_condition(workflow.all_handlers_finished)
                raise
            self._begin(admitted.job_input)
            attributes = list(job_search_attributes(admitted.job_input))
            if (
                admitted.final is not None
                and self._has(REPORTING_RUN)
                and not (admitted.own_run and workflow.patched(OWN_RUN_ADMITTED_LATE))
            ):
                # A run another client added under an ended job's id (Temporal's default
                # reuse policy): it reports the job, it is not the job — no JobStatus, so
                # the list queries keep listing the job's own run only. The job's own run
                # admitting late (OWN_RUN_ADMITTED_LATE) publishes the job's end instead.
                self._reporting = True
                attributes = [pair for pair in attributes if pair.key.name not in JOB_STATE_ATTRIBUTES]
            workflow.upsert_search_attributes([pair.key.value_set(pair.value) for pair in attributes])
            if admitted.final is not None:  # a replay of a job that already ended
                self._final, self._phase = admitted.final, Phase.DONE
                self._admitted = True
                self._publish()
                await workflow.wait_condition(workflow.all_handlers_finished)
                return admitted.final
        self._admitted = True
        assert self._inp is not None and self._pusher is not None
        self._publish()
        self._pusher.request()
        remaining_s = (self._inp.deadline_at_ms - int(workflow.time() * 1000)) / 1000
        if remaining_s <= 0:
            self._stop(FinishCause.DEADLINE)
        cells = [asyncio.create_task(self._run_cell(t)) for t in self._inp.targets]

        def settled() -> bool:
            return self._phase != Phase.RUNNING or all(t.done() for t in cells) or _bug(cells) is not None

        if not settled() and self._version == 3:
            # The timer is never cancelled: an execution that ends before it leaves it
            # pending (no ``TIMER_CANCELED`` event); one that fires later does nothing.
            deadline = asyncio.create_task(workflow.sleep(remaining_s, summary="job deadline"))
            await workflow.wait_condition(lambda: settled() or deadline.done())
            if deadline.done():
                self._stop(FinishCause.DEADLINE)
        elif not settled():
            try:
                await workflow.wait_condition(settled, timeout=remaining_s, timeout_summary="job deadline")
            except TimeoutError:
                self._stop(FinishCause.DEADLINE)
        if (bug := _bug(cells)) is not None:
            raise bug
        if self._cause == FinishCause.CANCELLED:
            self._cancel_asked = True
            answer = await workflow.execute_local_activity_method(
                FinishActivity.request_cancel, CancelRequest(), **CANCEL_CONFIG
            )
            if (
                answer is not None
                and answer.ended_in_another_run
                and not self._reporting
                and workflow.patched(CANCEL_REPORTING_RUN)
            ):
                self._report_only()
        paused: dict[str, PausedStep] = {}
        if self._cause == FinishCause.DEADLINE and not all(t.done() for t in cells) and workflow.patched(PAUSED_STEPS):
            paused = await self._paused_steps()
        for task in cells:
            task.cancel()
        await workflow.wait_condition(lambda: all(t.done() for t in cells))
        if (bug := _bug(cells)) is not None:
            raise bug
        self._mark_paused(paused)
        if (
            self._cause == FinishCause.DEADLINE
            and not self._stepped
            and self._submission.task is None
            and not self._reporting
            and workflow.patched(LATE_REPORTING_RUN)
        ):
            ended_elsewhere = await workflow.execute_local_activity_method(
                FinishActivity.ended_elsewhere, **ENDED_ELSEWHERE_CONFIG
            )
            if ended_elsewhere:
                self._report_only()
        self._phase = Phase.FINISHING
        try:
            # The run's input goes with the facts: only the run of the job's stored input ends
            # the job (activities.caller.finish_own_job). A local activity's input is not in
            # the history (its marker holds the result), so every history replays as before.
            final = await workflow.execute_local_activity_method(
                FinishActivity.finish,
                FinishInput(job_id=self._inp.job_id, cause=self._cause, failures=self._failures, job_input=self._inp),
                **finish_config(f"finish ({self._cause})"),
            )
        except LOCAL_ACTIVITY_FAILURES as err:
            failed = local_activity_failure(err)
            if isinstance(failed, ApplicationError) and failed.type == UNKNOWN_JOB:
                self._no_job = ApplicationError(
                    f"job {self._inp.job_id} is not in the ledger: start jobs with a protocol Task "
                    "(docs/temporal.md: Starting jobs from a Temporal client)",
                    type=UNKNOWN_JOB,
                    non_retryable=True,
                )
                raise self._no_job from None
            raise
        if isinstance(final, FinishedElsewhere):
            if not self._reporting and workflow.patched(FINISH_REPORTING_RUN):
                self._report_only()
            final = final.state()  # the job's state is the run's result, without the flag
        self._final, self._phase = final, Phase.DONE
        self._publish()
        await self._settle_pushes()
        await workflow.wait_condition(workflow.all_handlers_finished)
        self._raise_details_bug()
        return final

    async def _paused_steps(self) -> dict[str, PausedStep]:
        """The job's steps Temporal holds paused by an operator, by target id (the
        ``paused_steps`` local activity, :data:`PAUSED_STEPS`); empty when Temporal did not
        answer — no pause is named then, as before."""
        try:
            steps = await workflow.execute_local_activity_method(FinishActivity.paused_steps, **PAUSED_STEPS_CONFIG)
        except LOCAL_ACTIVITY_FAILURES as err:
            # A timeout arrives as an ActivityError; the activity's own failure (Temporal's
            # describe refused or unanswered: an RPCError) as its ApplicationError, which
            # failed the run before PAUSED_STEPS_UNANSWERED.
            if not isinstance(err, ActivityError) and not workflow.patched(PAUSED_STEPS_UNANSWERED):
                raise
            workflow.logger.warning(
                "paused steps not known at the deadline: %s", str(local_activity_failure(err))[:300]
            )
            return {}
        return {step.target_id: step for step in steps}

    def _mark_paused(self, paused: Mapping[str, PausedStep]) -> None:
        """Record, for each cell whose step Temporal held paused at the deadline, that its
        step was paused (``StepFailure.paused``), unless a failure of its own (not the
        deadline's cancel) already ended it."""
        for tid, step in paused.items():
            seen = self._failures.get(tid)
            if seen is not None and seen.kind != FailureKind.CANCELLED:
                continue
            who = f" by {step.by}" if step.by else ""
            self._failures[tid] = StepFailure(
                step="deliver" if step.route is not None else "acquire",
                kind=FailureKind.CANCELLED,
                retry_state=seen.retry_state if seen is not None else None,
                first_step=seen.first_step if seen is not None else False,
                route=step.route,
                message=f"paused{who} at the deadline" + (f": {step.note}" if step.note else ""),
                paused=True,
            )

    async def _settle_pushes(self) -> None:
        """Wait for the job's callback pushes (the terminal event's among them), at most
        :func:`~curaflow.domain.execution.end_push_wait` (:data:`PUSH_BOUND`); the rest is
        the push sweeper's."""
        assert self._inp is not None and self._pusher is not None
        if not self._inp.callback or not workflow.patched(PUSH_BOUND):
            await self._pusher.settled()
            return
        wait = end_push_wait(self._inp.callback_policy.timeout_ms, _run_left())
        if not await self._pusher.settled_within(wait):
            workflow.logger.warning(
                "callback pushes still pending after %.1f s: left to the push sweeper (push-events:%s)",
                wait.total_seconds(),
                self._inp.job_id,
            )

    async def _admit(self, task: dict[str, Any]) -> Admitted:
        """Admit ``task`` as this execution's job, as ``POST /jobs`` does.

        Raises:
            ApplicationError: :func:`~curaflow.temporal.refusals.admission_failure` of what
                the step ended with: the Task's refusal (non-retryable, ``type`` = protocol
                code), else curaflow's failure (retryable: ``ledger_unavailable`` when the
                ledger was away for the step's whole budget, else ``internal_error``).
                Until 2026-12-07 any failure was re-raised non-retryable under its own type
                (``ConnectionFailureError``: the ledger's outage as the Task's refusal), and
                a step that timed out failed the run with its ``ActivityError``. Only the
                failure's content changed: the run fails either way (no new command).
        """
        submitted = SubmitInput(task=task, workflow_id=workflow.info().workflow_id, run_limit=_run_limit())
        try:
            return await workflow.execute_local_activity_method(AdmitActivity.admit, submitted, **ADMIT_CONFIG)
        except LOCAL_ACTIVITY_FAILURES as err:
            raise admission_failure(local_activity_failure(err)) from None

    def _request_cancel(self) -> None:
        """The one cancel path (signal, Temporal cancel request, cancel found in the ledger)."""
        if self._phase == Phase.RUNNING:
            self._phase, self._cause = Phase.CANCELLING, FinishCause.CANCELLED
            self._publish()

    def _stop(self, cause: FinishCause) -> None:
        if self._phase == Phase.RUNNING and not all(is_terminal(c.state) for c in self._cells.values()):
            self._phase, self._cause = Phase.CANCELLING, cause
            self._publish()

    # ---- per cell ---------------------------------------------------------------

    async def _run_cell(self, target: TargetSpec) -> None:
        inp, tid = self._inp, target.target_id
        assert inp is not None
        queue = inp.source_task_queues.get(target.account) or f"{workflow.info().task_queue}-source-{target.account}"
        interval = inp.budgets.heartbeat_interval_ms
        stages = max(1, inp.max_fallback_stages)
        update: CellUpdate | None = None
        for stage in range(stages):  # fallback passes (scheduled jobs); each a wider search
            acquire = AcquireInput(
                job_id=inp.job_id,
                target=target,
                fallback_stage=stage,
                max_fallback_stages=stages,
                heartbeat_interval_ms=interval,
            )
            summary = f"search and fetch {tid}" + (f" (stage {stage + 1})" if stage else "")
            update = await self._step(tid, "acquire", acquire, first=stage == 0, queue=queue, summary=summary)
            if update is None or is_terminal(update.cell.state):
                return
            if not update.retry_stage:
                break
        if update is None or update.retry_stage:
            return
        work_id = update.cell.work_id
        await asyncio.gather(
            *[
                self._step(
                    tid,
                    "deliver",
                    DeliverInput(
                        job_id=inp.job_id,
                        target=target,
                        route=route,
                        heartbeat_interval_ms=interval,
                        max_attempts=inp.budgets.delivery_max_attempts,
                    ),
                    queue=route.task_queue,
                    route=route.name,
                    summary=f"deliver {tid} work {work_id} to {route.name}",
                )
                for route in target.routes
            ]
        )

    async def _step(
        self,
        tid: str,
        step: Step,
        arg: AcquireInput | DeliverInput,
        *,
        queue: str | None,
        summary: str,
        first: bool = False,
        route: str | None = None,
    ) -> CellUpdate | None:
        """Run one step of cell ``tid``; None when the job stopped or the step failed."""
        inp = self._inp
        if self._phase != Phase.RUNNING or inp is None:
            return None
        self._stepped = True
        cell = self._cells[tid]
        if not is_terminal(cell.state):
            self._set_cell(cell.model_copy(update={"stage": STAGE_OF[step]}))
            self._publish()  # the details show the step; the search attributes follow the state
        config = step_config(
            step,
            inp.budgets,
            first=first,
            deadline_at_ms=inp.deadline_at_ms,
            now_ms=int(workflow.time() * 1000),
            task_queue=queue,
        )
        config["summary"] = summary
        if step == "acquire" and inp.budgets.source_heartbeat_timeout_ms is not None and self._has(SOURCE_HEARTBEAT):
            config["heartbeat_timeout"] = timedelta(milliseconds=inp.budgets.source_step_heartbeat_timeout_ms())
        try:
            # Decoded here, not by the SDK: a result no worker of ours returned (``temporal
            # activity complete`` with junk) failed the workflow task for ever.
            # By name: a definition's return annotation would override ``result_type``.
            raw = await workflow.execute_activity(step, arg, result_type=RawValue, **config)
        except ActivityError as err:
            policy = config.get("retry_policy")  # the policy the step was scheduled with
            scheduled = policy.maximum_attempts if policy is not None else None
            facts = failure_facts(err, step, first=first, route=route, max_attempts=scheduled)
            self._failures.setdefault(tid, facts)
            return None
        # Only a result that is no CellUpdate is foreign; a bug while reading one raises
        # (the workflow task fails, not the job): workflows.steps.step_result.
        update = step_result(workflow.payload_converter(), raw.payload)
        if isinstance(update, str):
            self._foreign(f"{step} step completed with a result that is no CellUpdate: {update[:300]}")
            self._failures.setdefault(
                tid,
                StepFailure(
                    step=step,
                    kind=FailureKind.OTHER,
                    first_step=first,
                    route=route,
                    message=f"completed with a result that is no CellUpdate: {update}",
                    by_hand=True,  # no worker of curaflow returns one: ended from outside
                ),
            )
            return None
        if update.ended_in_another_run and not self._reporting and workflow.patched(JOB_INPUT_REPORTING_RUN):
            self._report_only()
        self._apply(update)
        if update.cancel_requested:
            self._request_cancel()
        if update.deadline_passed:
            self._stop(FinishCause.DEADLINE)
        return update

    def _report_only(self) -> None:
        """This run was added under the id of a job that ended and another run holds
        (:data:`JOB_INPUT_REPORTING_RUN` from its first step, :data:`CANCEL_REPORTING_RUN`
        from ``request_cancel``, :data:`LATE_REPORTING_RUN` from ``ended_elsewhere``,
        :data:`FINISH_REPORTING_RUN` from ``finish``): from now on it publishes no job
        state, and the state it carries (an HTTP start's ``JobStatus = queued`` or the
        ``running`` a reset copied with the events before its point) is removed — from
        the first step, before anything else was published, as the step's result is
        applied after this."""
        self._reporting = True
        carried = workflow.info().typed_search_attributes
        stale = [key.value_unset() for key in (JOB_STATUS, BUSINESS_STATUS) if carried.get(key) is not None]
        held: list[Any] = []
        if carried.get(JOB_TYPE) is None and workflow.patched(REPORTING_RUN_ATTRIBUTES):
            assert self._inp is not None
            held = [
                pair.key.value_set(pair.value)
                for pair in job_search_attributes(self._inp)
                if pair.key.name not in JOB_STATE_ATTRIBUTES
            ]
        if stale or held:
            workflow.upsert_search_attributes([*stale, *held])

    def _apply(self, update: CellUpdate) -> None:
        cell = update.cell
        current = self._cells.get(cell.target_id)
        if current is None or not is_terminal(current.state) or is_terminal(cell.state):
            self._set_cell(cell)
        if update.delivery is not None:
            self._deliveries[(update.delivery.target_id, update.delivery.route)] = update.delivery
        self._publish()
        if self._pusher is not None:
            self._pusher.request()

    def _set_cell(self, cell: CellSnapshot) -> None:
        """Hold ``cell`` as its target's live snapshot, keeping the count of pending cells
        (what ``JobStatus`` is published from) without reading the other cells."""
        held = self._cells.get(cell.target_id)
        self._pending += (cell.state == CellState.PENDING) - (held is not None and held.state == CellState.PENDING)
        self._cells[cell.target_id] = cell

    def _publish(self) -> None:
        """Keep the ``JobStatus`` / ``BusinessStatus`` search attributes and the UI details current.

        The search attributes are upserted at once, where the job's state changed (they are
        commands: their place in the history is the replay's); deciding costs the same for
        any number of cells. The details issue no command: they are only marked due, and
        :meth:`_show_details` renders them once the activation's work is done — once per
        activation, not once per cell (before, a job of 500 targets rendered them at each of
        its cells' first steps, in one activation: quadratic, past the SDK's 2 s deadlock
        detector).
        """
        if self._inp is None:  # no job yet
            return
        if self._final is not None:
            published = (str(self._final.status), self._final.business_status or "")
        else:
            published = (published_status(self._pending, len(self._cells)), "")
        if published != self._published and not self._reporting:  # a reporting run publishes no state
            pairs = [JOB_STATUS.value_set(published[0])]
            if published[1]:
                pairs.append(BUSINESS_STATUS.value_set(published[1]))
            self._published = published
            workflow.upsert_search_attributes(pairs)
        self._raise_details_bug()
        self._details_due = True
        if self._details_task is None:
            self._details_task = asyncio.create_task(self._show_details())

    def _raise_details_bug(self) -> None:
        """Raise what the details' task died of, if anything: it only ends with the
        execution, so an exception it ended with is a bug, and fails the workflow task —
        until 2026-12-06 it went unseen and the details stayed stale for the rest of the job."""
        task = self._details_task
        if task is not None and task.done() and not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]

    async def _show_details(self) -> None:
        """Render the UI details each time they are due, once nothing else of the activation
        is ready to run: ``wait_condition`` is checked after the ready callbacks ran, within
        the same activation. Issues no command (``set_current_details``); ends with the
        execution (cancelled at an eviction)."""
        while True:
            await workflow.wait_condition(lambda: self._details_due)
            self._details_due = False
            self._render_details()

    def _render_details(self) -> None:
        """Set the current details from the live state; rendering (and the status it needs)
        only when what they show changed."""
        assert self._inp is not None
        shown = (
            self._phase,
            self._cause,
            self._final is not None,
            tuple((c.state, c.stage, c.work_id, c.reason, c.fallback_pass) for c in self._cells.values()),
            tuple((d.route, d.status) for d in self._deliveries.values()),
        )
        if shown != self._shown:
            self._shown = shown
            details = render_details(self._inp, self._live_state())
            if details != self._details:
                self._details = details
                workflow.set_current_details(details)


def _run_limit() -> RunLimit | None:
    """When Temporal closes this run by a timeout its starter set, if that may come before
    the job's deadline and the run takes :data:`RUN_LIMIT`; else None. The execution
    timeout is named when both end the run at once."""
    info = workflow.info()
    named: tuple[tuple[timedelta | None, RunTimeout], ...] = (
        (info.execution_timeout, "execution_timeout"),
        (info.run_timeout, "run_timeout"),
    )
    limits = [(t, name) for t, name in named if t]
    if not limits:
        return None
    limit, name = min(limits, key=lambda pair: pair[0])
    if limit >= RUN_LIMIT_FLOOR or not workflow.patched(RUN_LIMIT):
        return None
    ends_at = info.workflow_start_time + limit
    return RunLimit(ends_at_ms=int(ends_at.timestamp() * 1000), timeout=name)


def _run_left() -> timedelta | None:
    """How long until Temporal closes this run by a run or execution timeout its starter
    set (the earlier; from this run's start, as :func:`_run_limit` reads them), or None."""
    info = workflow.info()
    limits = [info.workflow_start_time + t for t in (info.execution_timeout, info.run_timeout) if t]
    return min(limits) - workflow.now() if limits else None


def _bug(tasks: list[asyncio.Task[None]]) -> BaseException | None:
    """The exception a cell task died of, if any: every expected failure is caught in
    :meth:`JobWorkflow._step`, so anything here is a bug (it fails the workflow task)."""
    for task in tasks:
        if task.done() and not task.cancelled() and task.exception() is not None:
            return task.exception()
    return None

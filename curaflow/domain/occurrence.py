"""Scheduled occurrences: the trampoline's argument and results, and the occurrence job id.

A recurring plan (``[[schedules]]`` in the config) is a Temporal Schedule whose action
starts ``ScheduledJobWorkflow`` (the *trampoline*, :mod:`workflows.scheduled`) with an
:class:`OccurrenceInput`. Temporal appends its own timestamp to a schedule action's
workflow id, so the trampoline derives the job's canonical id
``<schedule_id>@<YYYY-MM-DD>T<HHMM><±hhmm>`` (the nominal instant as the plan's local
time *with its UTC offset*, DESIGN.md decision 1) and starts ``JobWorkflow`` under that
id with ``REJECT_DUPLICATE``: a late or duplicate trigger of the same minute converges
on one job, and the two instants a daylight-saving fall-back reads as the same wall
time (02:00 CEST and 02:00 CET) are two jobs.

Pure module (imported by workflows through the sandbox pass-through), except
:func:`occurrence_job_id`, which reads the time-zone database and is only called from
activities and the CLI.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import BaseModel, Field
from temporalio.exceptions import CancelledError, TerminatedError
from temporalio.exceptions import TimeoutError as ExecutionTimeoutError

from curaflow.domain.execution import EXECUTION_GRACE, MIN_RUN
from curaflow.domain.job_failure import state_of
from curaflow.domain.messages import JobInput, JobState
from curaflow.domain.workflow_input import InputRefusals, read_one_input

#: How late Temporal may still start an occurrence (server down, schedule paused…);
#: anything later is counted as missed, never back-filled.
CATCHUP_WINDOW_S = 90 * 60


def occurrence_timeout(default_deadline_ms: int) -> timedelta:
    """The execution timeout of a plan's occurrence (the schedule's action, DESIGN.md
    "Scheduled occurrences"): what its trampoline waits for, bounded.

    The trampoline waits for a worker, for ``admit_occurrence`` (retried while the ledger is
    away) and for its job's run. It is given :data:`CATCHUP_WINDOW_S` to get its job admitted
    and started — as late as Temporal itself still starts a time — then the job's own run
    bound: the execution timeout every job start uses
    (:func:`curaflow.domain.execution.execution_timeout`: its deadline, at least
    :data:`~curaflow.domain.execution.MIN_RUN`, plus
    :data:`~curaflow.domain.execution.EXECUTION_GRACE`), the job's deadline being the
    configuration's ``budgets.default_deadline_ms`` counted from its admission. Before
    (until 2026-12-06) the action had none: an occurrence no worker took, or whose admission
    never got through, stayed open for ever and overlap ``SKIP`` skipped every later time of
    the plan behind it.

    Args:
        default_deadline_ms: ``budgets.default_deadline_ms`` of the configuration the
            schedule is synced from (the workers' must be the same).

    Returns:
        The timeout (a :class:`~datetime.timedelta`).
    """
    run = max(MIN_RUN, timedelta(milliseconds=default_deadline_ms)) + EXECUTION_GRACE
    return timedelta(seconds=CATCHUP_WINDOW_S) + run


#: Bump when the meaning of :class:`OccurrenceInput` fields changes (``schedules sync``
#: then updates every schedule).
SPEC_VERSION = 1


class OccurrenceInput(BaseModel):
    """The argument a Temporal Schedule passes to ``ScheduledJobWorkflow``.

    It is also the fingerprint ``curaflow schedules sync`` compares with the
    configuration (the server rewrites cron strings into calendars, so the spec cannot
    be compared directly).

    Attributes:
        schedule_id: the plan's id (= the Temporal Schedule id).
        cron: the plan's cron expressions.
        timezone: IANA zone of the cron expressions and of the occurrence id.
        target_ids: targets at sync time (the worker resolves the live ones; empty means
            every configured target).
        jitter_ms: random delay Temporal adds to each occurrence.
        task_queue: the main task queue of the jobs.
        version: :data:`SPEC_VERSION` at sync time.
        scheduled_at_ms: the nominal time (epoch ms, UTC) when the trampoline is started by
            hand to re-run a given occurrence; schedules leave it unset and the time
            comes from ``TemporalScheduledStartTime``.
    """

    schedule_id: str
    cron: list[str]
    timezone: str = "UTC"
    target_ids: list[str] = Field(default_factory=list)
    jitter_ms: int = 0
    task_queue: str
    version: int = SPEC_VERSION
    scheduled_at_ms: int | None = None


#: The failure type of a trampoline started with input that is no :class:`OccurrenceInput`.
INVALID_OCCURRENCE_INPUT = "invalid_occurrence_input"


_FIX = "run `curaflow schedules sync` to restore the plan's action"

#: How ``ScheduledJobWorkflow`` words the refusal of input that is no :class:`OccurrenceInput`.
OCCURRENCE_INPUT_REFUSALS = InputRefusals(
    arguments=lambda count: f"the schedule's action passed {count} arguments, not one plan; {_FIX}",
    not_an_object=lambda kind: f"the schedule's action passed {kind}, not a plan object; {_FIX}",
    invalid_object=lambda fields: f"the schedule's action passed an object that is no plan (fields: {fields}); {_FIX}",
    no_one_meaning=lambda why: f"the schedule's action passed a JSON text with no one meaning ({why}); {_FIX}",
)


def read_occurrence_input(
    args: Sequence[Any], *, one_meaning: Callable[[], bool] = lambda: True
) -> OccurrenceInput | str:
    """The trampoline's start arguments as an :class:`OccurrenceInput`, or why they are not one.

    A schedule curaflow wrote passes exactly one JSON object of that shape; an operator's
    hand edit of the action (``temporal schedule update --input …``, the UI) can pass
    anything — another object, a string, ``null``, no argument, several, a payload of
    another encoding (``RawValue``), a JSON text with no one meaning
    (``"schedule_id":"a","schedule_id":"b"``). Read by
    :func:`curaflow.domain.workflow_input.read_one_input`, worded by
    :data:`OCCURRENCE_INPUT_REFUSALS`. Pure and total: never raises.

    Args:
        args: the decoded start arguments (JSON values, models or ``RawValue``).
        one_meaning: whether a JSON text with no one meaning is refused (the trampoline's
            ``workflow.patched("occurrence-one-meaning-input")``, called only for such a
            text; before it, the trampoline admitted the last plan it named). Default:
            refused.

    Returns:
        The plan's input, or a one-line problem naming what was received and how to
        restore the action (``curaflow schedules sync``); the trampoline fails with it.
    """
    return read_one_input(args, OccurrenceInput, OCCURRENCE_INPUT_REFUSALS, one_meaning=one_meaning)


class AdmitOccurrenceInput(BaseModel):
    """Argument of the ``admit_occurrence`` activity.

    Attributes:
        occurrence: the schedule's argument.
        scheduled_at_ms: the occurrence's nominal time, epoch ms (UTC), from the
            ``TemporalScheduledStartTime`` search attribute (the trigger time for a
            manual trigger).
        trampoline_id: the trampoline's workflow id (for logs).
    """

    occurrence: OccurrenceInput
    scheduled_at_ms: int
    trampoline_id: str = ""


class OccurrenceAdmission(BaseModel):
    """Result of ``admit_occurrence``.

    Attributes:
        job_id: the canonical job id.
        created: False when the ledger already had this occurrence's job (a duplicate
            or late trigger).
        job_input: the job's workflow argument as stored in the ledger.
    """

    job_id: str
    created: bool
    job_input: JobInput


class OccurrenceResult(BaseModel):
    """Result of ``ScheduledJobWorkflow``: the job it started or converged on.

    Attributes:
        status: the job's protocol status when its execution completed or was cancelled
            (``cancelled``); None when the job's execution ended otherwise — see
            ``execution`` — or the occurrence converged on an existing job.
        execution: how the job's execution closed when it did not complete:
            ``canceled`` | ``terminated`` | ``timed_out`` | ``failed`` (its outcome is in
            the ledger: ``GET /jobs/{job_id}``).
    """

    job_id: str
    duplicate: bool = False
    status: str | None = None
    business_status: str | None = None
    execution: str | None = None


class OccurrenceJob(BaseModel):
    """Argument of the ``occurrence_job_run`` activity: whose is the run under ``job_id``.

    Attributes:
        job_id: the occurrence's canonical job id (a run under it refused the child start).
        trampoline_id: the asking trampoline's workflow id.
        trampoline_first_run_id: the first run of the asking trampoline's chain
            (``workflow.info().first_execution_run_id``): a reset run keeps its base run's,
            which started the job; a fresh start under the same workflow id — Temporal names
            a schedule's start ``<id>-<nominal time>``, so a second backfill of the time has
            the first's id — has its own, and is a duplicate. None (an input recorded before
            2026-12-07's fix): the workflow id alone.
    """

    job_id: str
    trampoline_id: str
    trampoline_first_run_id: str | None = None


class OwnJobRun(BaseModel):
    """Argument of the ``follow_own_job`` activity: the occurrence's job run to wait for.

    Attributes:
        job_id: the occurrence's canonical job id.
        run_id: the job's run, which an earlier run of the same trampoline started.
    """

    job_id: str
    run_id: str


def occurrence_ended(job_id: str, state: JobState) -> OccurrenceResult:
    """The occurrence's result for its job's execution that completed with ``state``."""
    return OccurrenceResult(job_id=job_id, status=state.status, business_status=state.business_status)


def occurrence_failed(job_id: str, error: BaseException) -> OccurrenceResult:
    """The occurrence's result for its job's execution that did not complete: a failed or
    expired job's final state (its failure carries it, :func:`~curaflow.domain.job_failure.state_of`),
    else how the execution closed (``execution``; ``status`` ``cancelled`` for a canceled
    one; the outcome is the ledger's).

    Args:
        error: what Temporal raised for the execution: a ``ChildWorkflowError`` (the
            trampoline's child) or a ``WorkflowFailureError`` (a client's ``result()``);
            both carry how it closed as their ``cause``.
    """
    failed = state_of(error)
    if failed is not None:
        return OccurrenceResult(job_id=job_id, status=failed.status, business_status=failed.business_status)
    execution = closed_as(error)
    return OccurrenceResult(job_id=job_id, status="cancelled" if execution == "canceled" else None, execution=execution)


def closed_as(error: BaseException) -> str:
    """How a job's execution closed (``canceled`` | ``terminated`` | ``timed_out`` |
    ``failed``), from the error Temporal raised for it (its ``cause``)."""
    cause = getattr(error, "cause", None)
    if isinstance(cause, CancelledError):
        return "canceled"
    if isinstance(cause, TerminatedError):
        return "terminated"
    if isinstance(cause, ExecutionTimeoutError):
        return "timed_out"
    return "failed"


def _local(scheduled_at: datetime, timezone: str) -> datetime:
    if scheduled_at.tzinfo is None:
        scheduled_at = scheduled_at.replace(tzinfo=UTC)
    return scheduled_at.astimezone(ZoneInfo(timezone))


def occurrence_job_id(schedule_id: str, scheduled_at: datetime, timezone: str) -> tuple[str, str]:
    """The canonical job id of an occurrence and its local date.

    The id names the nominal *instant* to the minute: the plan's local wall time and
    the zone's UTC offset at that instant (DESIGN.md decision 1), so every instant has
    one id and no two instants share one, also across a daylight-saving fall-back
    (``nightly@2026-10-25T0200+0200`` then ``nightly@2026-10-25T0200+0100`` in
    Europe/Paris). Seconds are dropped: triggers within one minute are one occurrence.

    Args:
        schedule_id: the plan's id.
        scheduled_at: the nominal time (aware; naive values are taken as UTC).
        timezone: IANA zone name (``Europe/Paris``); the id shows local wall time.

    Returns:
        ``("<schedule_id>@<YYYY-MM-DD>T<HHMM><±hhmm>", "YYYY-MM-DD")``.

    Raises:
        zoneinfo.ZoneInfoNotFoundError: unknown zone.
    """
    local = _local(scheduled_at, timezone)
    return f"{schedule_id}@{local:%Y-%m-%dT%H%M%z}", f"{local:%Y-%m-%d}"


def legacy_occurrence_job_id(schedule_id: str, scheduled_at: datetime, timezone: str) -> str | None:
    """The id an occurrence had before ids named the instant, when it is this instant's.

    Ids used to be the local wall time alone (``<schedule_id>@<YYYY-MM-DD>T<HHMM>``), so
    a fall-back's repeated hour mapped two instants onto one id and the second was
    dropped as a duplicate. The compatibility rule: a legacy id stands for the
    *earlier* instant of its wall-clock reading (the one the old rule admitted first);
    admission converges on a job stored under it only for that instant.

    Returns:
        The legacy id, or None when ``scheduled_at`` is the later of two instants with
        the same local reading (no legacy job can be its own).

    Raises:
        zoneinfo.ZoneInfoNotFoundError: unknown zone.
    """
    local = _local(scheduled_at, timezone)
    if local.replace(fold=0).utcoffset() != local.utcoffset():
        return None
    return f"{schedule_id}@{local:%Y-%m-%dT%H%M}"


class MissCause(StrEnum):
    """Why a plan did not run one of its nominal times (the ``why`` of a named miss).

    * ``missed_catchup_window`` — Temporal reached the time more than the catch-up window
      (:data:`CATCHUP_WINDOW_S`) late (the server, or the schedule's history, was
      unavailable for that long): the oldest times of such an outage;
    * ``skipped_overlap`` — a job of the plan was open (admitted, not finished) at that
      time: the previous occurrence ran longer than the interval;
    * ``skipped_outage`` — Temporal skipped the time (its overlap policy) while no job of
      the plan was open: the server was down and caught up one time only, or the
      previous occurrence's trampoline waited for a worker — an outage, not an overlap;
    * ``configuration_error`` — Temporal started the time, but the worker that admitted
      it has none of the plan's targets configured (workers with different
      configurations, or a plan removed from the configuration whose schedule was not
      synced): the trampoline failed and no job exists. Named by the admission
      (:func:`~curaflow.schedules.admit.admit_occurrence`), never by :func:`name_misses`;
    * ``not_admitted`` — Temporal started the time, but its occurrence (the trampoline)
      closed before its job was admitted: it timed out (every worker, or the ledger, away
      longer than :func:`occurrence_timeout`), an operator terminated or cancelled it, its
      action was no plan. Temporal counts it as an action taken, never as a miss. Named by
      the watch (:func:`~curaflow.schedules.watch.unadmitted_actions`, 2026-12-07: said
      nowhere before — the first time of a long outage had no job and no miss), never by
      :func:`name_misses`.
    """

    CATCHUP_WINDOW = "missed_catchup_window"
    OVERLAP = "skipped_overlap"
    OUTAGE = "skipped_outage"
    CONFIGURATION_ERROR = "configuration_error"
    NOT_ADMITTED = "not_admitted"


#: One minute in ms: an occurrence is its nominal time to the minute (its job id).
MINUTE_MS = 60_000


def occurrence_minute_ms(scheduled_at_ms: int) -> int:
    """The nominal time of an occurrence as its job id names it: epoch ms, to the minute.

    Triggers within one minute are one occurrence (:func:`occurrence_job_id` drops the
    seconds); a miss named for an occurrence the watch never saw dropped (the admission
    refused it) is recorded under this time, so each such occurrence is named once.
    """
    return scheduled_at_ms - scheduled_at_ms % MINUTE_MS


def name_misses(
    dropped_ms: list[int],
    *,
    missed_catchup: int,
    skipped: int,
    open_jobs: list[tuple[int, int | None]],
) -> list[tuple[int, MissCause]]:
    """Name the nominal times a plan did not run, each with its cause.

    The one owner of a miss's cause. Temporal only counts what it dropped
    (``missed_catchup`` beyond the catch-up window, ``skipped`` by the overlap policy)
    and labels every skip "overlap"; the ledger knows whether a job of the plan was open.

    Args:
        dropped_ms: nominal times (epoch ms, UTC) the plan's spec matched, that Temporal
            has processed, and that started nothing (no action, no job).
        missed_catchup: how many times Temporal newly counted as beyond the catch-up window.
        skipped: how many times Temporal newly counted as skipped by the overlap policy.
        open_jobs: the plan's jobs as ``(admitted_at_ms, completed_at_ms or None)``.

    Returns:
        ``(nominal_ms, cause)`` ascending, at most ``missed_catchup + skipped`` of them:
        when more times match than Temporal counted (the schedule was paused meanwhile,
        and a paused time is not a miss), the latest ones are kept. The oldest
        ``missed_catchup`` are beyond the catch-up window (an outage drops its oldest
        times first); each other one is an overlap when a job of the plan was open at
        that instant, an outage otherwise.
    """
    counted = max(0, missed_catchup) + max(0, skipped)
    times = sorted(set(dropped_ms))[-counted:] if counted else []
    named: list[tuple[int, MissCause]] = []
    for index, at in enumerate(times):
        if index < missed_catchup:
            named.append((at, MissCause.CATCHUP_WINDOW))
        elif any(start <= at and (end is None or end > at) for start, end in open_jobs):
            named.append((at, MissCause.OVERLAP))
        else:
            named.append((at, MissCause.OUTAGE))
    return named

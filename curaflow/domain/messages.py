"""Arguments and results of the JobWorkflow and its activities.

One pydantic model per workflow / activity / query argument, so fields can be added
later without breaking running histories (DESIGN.md decision 11). Secrets never appear
here: routes are referenced by name and resolved from the worker's configuration.

Pure module: imported by workflows through the sandbox pass-through.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from curaflow.domain.execution import RunTimeout
from curaflow.domain.models import CellSnapshot, DeliveryReport
from curaflow.domain.projection import JobStatus
from curaflow.domain.verdicts import FinishCause, StepFailure
from curaflow.domain.workflow_input import InputRefusals, read_one_input


class RouteRef(BaseModel):
    """A delivery route of a target, by its configured name and kind.

    Attributes:
        task_queue: the route's own task queue for ``deliver``, or None for the main one.
    """

    name: str
    kind: str
    task_queue: str | None = None


class TargetQuery(BaseModel):
    """What to search for (reference ``pixiv-and-delivery-apis.md`` §1.2, §2.2).

    Attributes:
        mode: ``search`` (tag search) or ``ranking``.
        tags: tag words; AND by default, OR when ``relation == "or"``.
        search_target: ``partial_match_for_tags`` | ``exact_match_for_tags`` |
            ``title_and_caption``.
        sort: ``date_desc`` | ``date_asc`` | ``popular_desc``.
        duration: ``within_last_day`` | ``within_last_week`` | ``within_last_month``.
        ranking_mode / ranking_date: for ``mode == "ranking"`` (``day``, ``week`` …; date
            ``YYYY-MM-DD``).

    The words are the target's source's, sent as written: a configured target's are
    checked as the configuration loads against its source kind's
    (:meth:`curaflow.sources.base.SourceConfig.query_problems`; Pixiv's:
    ``curaflow.sources.pixiv.query_words``), not here — a workflow history holding a word
    refused since must still replay.
    """

    mode: Literal["search", "ranking"] = "search"
    tags: list[str] = Field(default_factory=list)
    relation: Literal["and", "or"] = "and"
    search_target: str = "partial_match_for_tags"
    sort: str = "date_desc"
    duration: str | None = None
    ranking_mode: str = "day"
    ranking_date: str | None = None


class TargetFilters(BaseModel):
    """Local filters applied to every candidate (reference §1.2 target fields)."""

    min_bookmarks: int | None = None
    exclude_ai: bool = False
    r18: bool = False
    max_page_count: int | None = None
    start_date: str | None = None
    end_date: str | None = None


class TargetSpec(BaseModel):
    """The effective target of one cell: base target ∘ this job's overrides, frozen at start.

    Attributes:
        target_id: configured target id.
        account: the source instance whose rate gate serves the search (a Pixiv account, or a
            ``[sources.<name>]`` entry).
        limit: works per run (only 1 is delivered per cell today).
        scan_limit: bound of the candidate scan, 1..100: the most eligible candidates a
            cell keeps in rank order (fallback stage N: ``scan_limit × (N+1)``, cap
            100); works examined are bounded by the account's ``max_examined``.
        exclude_work_ids: works excluded for this job only (protocol ``exclude`` kind
            ``work``).
        storage_mode: ``persistent`` keeps artifacts; ``cache`` deletes them once every
            route confirmed.
    """

    target_id: str
    account: str = "default"
    work_type: str = "illustration"
    query: TargetQuery = Field(default_factory=TargetQuery)
    filters: TargetFilters = Field(default_factory=TargetFilters)
    limit: int = 1
    scan_limit: int = 30
    exclude_work_ids: list[str] = Field(default_factory=list)
    storage_mode: Literal["persistent", "cache"] = "persistent"
    routes: list[RouteRef] = Field(default_factory=list)


class Budgets(BaseModel):
    """Time budgets of a job, resolved at admission (reference §8; DESIGN.md decision 8).

    All values in milliseconds.
    """

    queued_timeout_ms: int = 1_800_000
    stall_timeout_ms: int = 900_000
    heartbeat_interval_ms: int = 30_000
    delivery_max_attempts: int = 12
    retry_initial_interval_ms: int = 1_000
    retry_max_interval_ms: int = 300_000
    source_max_attempts: int = 10
    #: Heartbeat timeout of a source step (``acquire`` on the account's source queue):
    #: the source-queue lease, so a step handed to a frozen process's outstanding poll is
    #: timed out and back in the queue as soon as the lease moved. None for jobs admitted
    #: before it existed (their steps keep :attr:`heartbeat_timeout_ms`).
    source_heartbeat_timeout_ms: int | None = None

    @property
    def heartbeat_timeout_ms(self) -> int:
        """Heartbeat timeout of long activities: twice the heartbeat interval."""
        return self.heartbeat_interval_ms * 2

    def source_step_heartbeat_timeout_ms(self) -> int:
        """Heartbeat timeout of a source step: :attr:`source_heartbeat_timeout_ms`, never
        longer than :attr:`heartbeat_timeout_ms`."""
        if self.source_heartbeat_timeout_ms is None:
            return self.heartbeat_timeout_ms
        return min(self.source_heartbeat_timeout_ms, self.heartbeat_timeout_ms)


class CallbackPolicy(BaseModel):
    """How a job's events are pushed to its ``callback_url`` (reference §4.7).

    Attributes:
        max_attempts: sends of one event before it is dead-lettered (2xx / 409 end it
            earlier; another 4xx dead-letters it at once).
        timeout_ms: timeout of one POST.
        initial_interval_ms / max_interval_ms: retry backoff of the ``push_events``
            activity (doubling, capped).
        task_queue: the task queue ``push_events`` runs on — the pushes' own,
            ``<temporal.task_queue>-pushes`` (:meth:`curaflow.config.Settings.push_task_queue`),
            whose activity slots no job step shares; None: the workflow's own task queue
            (a job admitted before 2026-12-07, when a receiver that never answered held
            the slots of every job's ``deliver``).
    """

    max_attempts: int = 8
    timeout_ms: int = 30_000
    initial_interval_ms: int = 1_000
    max_interval_ms: int = 60_000
    task_queue: str | None = None


class JobIdentity(BaseModel):
    """What makes a submitted Task this job's, as admission stored it (DESIGN.md decision 2):
    the idempotency key (exact, case-sensitive) and the normalised params it was first
    admitted with (None: the job keeps no params — a legacy refetch — and a replay
    compares none). Carried by :class:`JobInput` so a job's execution can answer a Task
    after it closed without the ledger (the ``admission_answer`` query)."""

    idempotency_key: str
    params: dict[str, Any] | None = None


class JobInput(BaseModel):
    """The argument of ``JobWorkflow.run``.

    Attributes:
        job_id: the workflow id.
        plan_id: the plan that owns the targets (schedule id, or target id for manual
            jobs).
        trigger: ``protocol`` (HTTP ``POST /jobs``), ``temporal`` (a Temporal client
            started ``JobWorkflow`` with a Task), ``cli`` or ``schedule``.
        created_at_ms / deadline_at_ms: epoch ms (UTC); the deadline is a workflow timer.
        targets: one cell per target, in order.
        max_fallback_stages: passes per cell for scheduled jobs (1 = no fallback).
        source_task_queues: account → the task queue of its rate gate.
        callback: whether lifecycle events are pushed to a ``callback_url``.
        callback_policy: retry budget of those pushes.
        identity: the key and params of a submitted Task's job (None: a scheduled
            occurrence, or a job admitted before identities were carried).
        max_task_bytes: the largest Task admission took when it admitted this job
            (``api.max_body_bytes``, bytes of compact UTF-8 JSON:
            :func:`curaflow.protocol.task.oversized_task`): the job's execution refuses a
            larger Task in its ``admission`` update's validator and its ``admission_answer``
            query (413 ``invalid_params``, as ``POST /jobs`` answers such a body) — a
            workflow reads no configuration. None: a job admitted before it was carried
            (2026-12-07), for which neither measures.
    """

    job_id: str
    job_type: str = "candidate_search"
    plan_id: str
    schedule_id: str | None = None
    trigger: Literal["protocol", "temporal", "cli", "schedule"] = "protocol"
    created_at_ms: int
    deadline_at_ms: int
    targets: list[TargetSpec]
    budgets: Budgets = Field(default_factory=Budgets)
    max_fallback_stages: int = 1
    source_task_queues: dict[str, str] = Field(default_factory=dict)
    callback: bool = False
    callback_policy: CallbackPolicy = Field(default_factory=CallbackPolicy)
    identity: JobIdentity | None = None
    max_task_bytes: int | None = None


class PushInput(BaseModel):
    """Argument of the ``push_events`` activity and of ``EventPushWorkflow``: push a job's pending events."""

    job_id: str
    policy: CallbackPolicy = Field(default_factory=CallbackPolicy)


#: The failure type of an ``EventPushWorkflow`` started with input that is no :class:`PushInput`.
INVALID_PUSH_INPUT = "invalid_push_input"


_PUSH_EXPECTED = "EventPushWorkflow takes one PushInput {job_id, policy} (curaflow's push sweeper starts it)"

#: How ``EventPushWorkflow`` words the refusal of input that is no :class:`PushInput`.
PUSH_INPUT_REFUSALS = InputRefusals(
    arguments=lambda count: f"{_PUSH_EXPECTED}; got {count} arguments",
    not_an_object=lambda kind: f"{_PUSH_EXPECTED}; got {kind}",
    invalid_object=lambda fields: f"{_PUSH_EXPECTED}; got an object that is none (fields: {fields})",
    no_one_meaning=lambda why: f"{_PUSH_EXPECTED}; got a JSON text with no one meaning: {why}",
)


def read_push_input(args: Sequence[Any], *, one_meaning: Callable[[], bool] = lambda: True) -> PushInput | str:
    """``EventPushWorkflow``'s start arguments as a :class:`PushInput`, or why they are not one.

    The push sweeper (:func:`curaflow.jobs.pushes.sweep_once`) passes exactly one; a client
    starting the workflow by hand (the CLI, the UI's "start workflow like this one" with
    its input edited) can pass anything — no argument, several, a string, an object of
    other members, a payload of another encoding (``RawValue``), a JSON text with no one
    meaning (``{"job_id":"a","job_id":"b"}``). Read by
    :func:`curaflow.domain.workflow_input.read_one_input`, worded by
    :data:`PUSH_INPUT_REFUSALS`. Pure and total: never raises.

    Args:
        args: the decoded start arguments (JSON values, models or ``RawValue``).
        one_meaning: whether a JSON text with no one meaning is refused (the workflow's
            ``workflow.patched("push-one-meaning-input")``, called only for such a text;
            before it, the run took the last ``job_id`` of it). Default: refused.

    Returns:
        The input, or a one-line problem naming what was received; the workflow fails
        with it (:data:`INVALID_PUSH_INPUT`).
    """
    return read_one_input(args, PushInput, PUSH_INPUT_REFUSALS, one_meaning=one_meaning)


class PushReport(BaseModel):
    """Result of ``push_events``: what this attempt settled.

    Attributes:
        delivered / dead: events settled by this attempt.
        busy: another attempt was sending the job's oldest pending event; it goes on.
    """

    job_id: str
    delivered: int = 0
    dead: int = 0
    busy: bool = False


class PausedStep(BaseModel):
    """A step of a job that Temporal holds paused by an operator (``temporal activity pause``,
    the UI's "Pause"): the ``paused_steps`` activity's answer, one per paused step.

    Attributes:
        activity_id: the step's Temporal activity id.
        target_id: the cell whose step it is.
        route: the route of a ``deliver`` step; None for ``acquire``.
        by: who paused it, as Temporal recorded it (the CLI's or the UI's identity; may be
            empty); diagnostics only.
        note: the operator's reason, as given (at most 200 characters); diagnostics only.
    """

    activity_id: str
    target_id: str
    route: str | None = None
    by: str = ""
    note: str = ""


class CancelRequest(BaseModel):
    """Argument of the ``cancel`` signal and of the ``request_cancel`` activity.

    Attributes:
        reason: the cancel's reason, recorded on the job.
        no_job: the asking run holds no job (a refused cron-scheduled start,
            ``workflows.job.NO_CRON``): nothing is recorded in the ledger, only Temporal is
            asked to cancel that run. Written only when set, so the cancels every job
            records keep their bytes.
    """

    reason: str = "cancelled_by_consumer"
    no_job: bool = False

    @model_serializer(mode="wrap")
    def _without_unset_flag(self, handler: SerializerFunctionWrapHandler) -> Any:
        """``no_job`` is written only when set."""
        data = handler(self)
        if isinstance(data, dict) and not self.no_job:
            data.pop("no_job", None)
        return data


class CancelAnswer(BaseModel):
    """Result of the ``request_cancel`` activity when it has something to say (it returns
    None otherwise, as it always did: the cancels recorded in histories keep their bytes).

    Attributes:
        ended_in_another_run: the job had already ended in the ledger, so no cancel was
            recorded, and another run of its id holds it
            (:func:`curaflow.temporal.job_runs.held_by_another_run`): the asking execution
            is a run added under an ended job's id that was sent a cancel before its first
            step could tell it so — it only reports the job (``workflows.job``,
            ``cancel-reporting-run``).
    """

    ended_in_another_run: bool = False


class SearchInput(BaseModel):
    """Argument of the ``search`` activity: scan the source and bind a work to the cell."""

    job_id: str
    target: TargetSpec
    fallback_stage: int = 0
    max_fallback_stages: int = 1
    heartbeat_interval_ms: int = 30_000


class AcquireInput(SearchInput):
    """Argument of the ``acquire`` activity: ``search`` then ``fetch`` in one step.

    The same fields as :class:`SearchInput`: the cell's fallback stage, the stages
    allowed, the heartbeat interval (ms).
    """


class FetchInput(BaseModel):
    """Argument of the ``fetch`` activity: fetch the bound work's artifact.

    Attributes:
        fallback_stage / max_fallback_stages: the cell's current stage and the stages
            allowed; when every stored candidate turns out unavailable and another stage
            is allowed, ``fetch`` hands the cell back for a wider search.
    """

    job_id: str
    target: TargetSpec
    heartbeat_interval_ms: int = 30_000
    fallback_stage: int = 0
    max_fallback_stages: int = 1


class DeliverInput(BaseModel):
    """Argument of the ``deliver`` activity: deliver the cell's artifact on one route."""

    job_id: str
    target: TargetSpec
    route: RouteRef
    heartbeat_interval_ms: int = 30_000
    max_attempts: int = 12


class CellUpdate(BaseModel):
    """Result of search / fetch / deliver: the cell as the ledger holds it afterwards.

    Attributes:
        cell: the snapshot after the activity's transition, in its brief form
            (:meth:`~curaflow.domain.models.CellSnapshot.brief`) to keep history small.
        retry_stage: set by ``search`` (nothing bindable) or ``fetch`` (every stored
            candidate unavailable) when a scheduled job should run another fallback
            stage instead of ending ``no_candidate`` / ``duplicate``.
        cancel_requested: the ledger holds a consumer cancel of this job (recorded by
            ``POST /jobs/{id}/cancel``) that the workflow may not have received: the
            activity went no further (no work when found at the step's opening; a
            cell ``acquire`` had just bound stays ``selected``), and the workflow takes
            the cancel path.
        deadline_passed: the job's deadline (``jobs.deadline_at``) had passed when the
            activity opened or carried on its step: it went no further, and the
            workflow stops the job.
        delivery: ``deliver`` only: the route's delivery afterwards.
        ended_in_another_run: the job had already ended in the ledger when the step
            opened (it did nothing) and another run of its id holds it
            (:func:`curaflow.temporal.job_runs.held_by_another_run`): the execution that
            asked is a run added under an ended job's id, which only reports the job.
            Absent (False) in results recorded before it existed.
    """

    cell: CellSnapshot
    retry_stage: bool = False
    cancel_requested: bool = False
    deadline_passed: bool = False
    delivery: DeliveryReport | None = None
    ended_in_another_run: bool = False

    @field_validator("cell")
    @classmethod
    def _brief(cls, cell: CellSnapshot) -> CellSnapshot:
        return cell.brief()

    @model_serializer(mode="wrap")
    def _without_unset_flag(self, handler: SerializerFunctionWrapHandler) -> Any:
        """``ended_in_another_run`` is written only when set: every other step result keeps
        the bytes it had (a job's history does not grow)."""
        data = handler(self)
        if isinstance(data, dict) and not self.ended_in_another_run:
            data.pop("ended_in_another_run", None)
        return data


class FinishInput(BaseModel):
    """Argument of the ``finish`` activity: the facts the workflow saw, no decisions.

    Attributes:
        cause: why the workflow is finishing: ``completed``, ``cancelled`` or
            ``deadline`` (:class:`~curaflow.domain.verdicts.FinishCause`).
        failures: target id → what the workflow saw of the cell's failed step (the first
            one), for cells that ended without a ledger transition. The ledger decides
            each open cell's reason from these facts with
            :func:`curaflow.domain.verdicts.cell_verdict`; cells it already holds as
            terminal keep their state.
        verdicts: target id → reason code, as sent by executions started before the
            facts existed (their workflow decided reasons itself); applied as given.
        job_input: the ``JobInput`` the finishing run holds (it was started with it, or
            admitted its Task to it): ``finish`` ends the job only when it is the job's
            input stored at admission (``activities.caller.foreign_run_input``, 2026-12-07);
            None — a caller that sends none (an execution replaying ``workflows.job_v1``,
            a test's direct call) — is not judged.
    """

    job_id: str
    cause: FinishCause = FinishCause.COMPLETED
    failures: dict[str, StepFailure] = Field(default_factory=dict)
    verdicts: dict[str, str] = Field(default_factory=dict)
    job_input: JobInput | None = None


class JobState(BaseModel):
    """Live state of a job: the ``status`` query's answer and ``finish``'s result.

    ``status`` and ``stage`` come from :func:`curaflow.domain.projection.job_status` /
    :func:`~curaflow.domain.projection.job_stage` over ``cells`` (``stage`` is
    ``cancelling`` / ``finishing`` while the job stops or finishes, as in
    ``GET /jobs/{id}``). ``deliveries`` lists every delivery known so far (the final
    state: every delivery of the job, from the ledger), whatever the status.
    """

    job_id: str
    job_type: str = "candidate_search"
    status: JobStatus = JobStatus.QUEUED
    stage: str = "queued"
    business_status: str | None = None
    alertable: bool | None = None
    cancel_requested: bool = False
    created_at_ms: int = 0
    deadline_at_ms: int | None = None
    cells: list[CellSnapshot] = Field(default_factory=list)
    deliveries: list[DeliveryReport] = Field(default_factory=list)


class FinishedElsewhere(JobState):
    """``finish``'s answer for a job that had already ended in the ledger when this finish
    came (a repeat: it wrote nothing) and that another run of its id holds
    (:func:`curaflow.temporal.job_runs.held_by_another_run`): the asking run is no job's own
    run — a ``temporal workflow reset`` of the job's closed run to a point after its first
    step's result — and only reports the job (``workflows.job``, ``finish-reporting-run``).

    Every other finish answers a plain :class:`JobState`, as it always did: the finishes
    recorded in histories keep their bytes. The workflow reads ``finish``'s result as
    ``JobState | FinishedElsewhere`` (a JSON object with ``ended_in_another_run`` is this
    one, any other a ``JobState``) and goes on with :meth:`state`.

    Attributes:
        ended_in_another_run: always True (required: a plain ``JobState`` never reads as
            this).
    """

    ended_in_another_run: Literal[True]

    def state(self) -> JobState:
        """The job's final state without the flag: what the run reports and ends with."""
        return JobState.model_validate(self.model_dump(exclude={"ended_in_another_run"}))


class RunLimit(BaseModel):
    """When Temporal closes the run that admits a Task, by a timeout its starter set
    (``workflows.job.RUN_LIMIT``): the job's deadline is bounded by it
    (:func:`curaflow.domain.execution.run_deadline_bound`).

    Attributes:
        ends_at_ms: the run's start plus the shorter of its run and execution timeouts
            (epoch ms, UTC).
        timeout: the start option that sets it: ``run_timeout`` or ``execution_timeout``.
    """

    ends_at_ms: int
    timeout: RunTimeout


class SubmitInput(BaseModel):
    """Argument of the ``admit`` activity: a Task a Temporal client started ``JobWorkflow`` with.

    Attributes:
        task: the Task exactly as the client sent it (plain JSON), validated by the same
            admission as ``POST /jobs``.
        workflow_id: the execution's workflow id; it must be the Task's job id.
        run_limit: when Temporal closes the execution by a timeout its starter set, if
            that could come before the job's deadline; None otherwise.
    """

    task: dict[str, Any]
    workflow_id: str
    run_limit: RunLimit | None = None

    @model_serializer(mode="wrap")
    def _without_unset_limit(self, handler: SerializerFunctionWrapHandler) -> Any:
        """``run_limit`` is written only when set, so every other admission keeps its bytes."""
        data = handler(self)
        if isinstance(data, dict) and self.run_limit is None:
            data.pop("run_limit", None)
        return data


class Admitted(BaseModel):
    """Result of the ``admit`` activity.

    Attributes:
        job_input: the job's workflow argument as the ledger holds it.
        created: this submission created the job (False: a replay of an existing one).
        final: the job's final state when it had already ended (a replay of a finished
            job: the execution reports it and runs nothing).
        own_run: with ``final``: the asking run is the job's own nevertheless
            (:func:`curaflow.temporal.job_runs.own_run_of_ended_job`: no other run of its id
            holds the job and it began before the job ended — the run a reset started from
            the job's open run, or the job's only run admitting late): it publishes the
            job's end (``workflows.job``, ``own-run-admitted-late``) instead of only
            reporting it. Written only when set: every other admission keeps its bytes.
    """

    job_input: JobInput
    created: bool
    final: JobState | None = None
    own_run: bool = False

    @model_serializer(mode="wrap")
    def _without_unset_flag(self, handler: SerializerFunctionWrapHandler) -> Any:
        """``own_run`` is written only when set: every other admission keeps its bytes."""
        data = handler(self)
        if isinstance(data, dict) and not self.own_run:
            data.pop("own_run", None)
        return data


class AdmissionAnswer(BaseModel):
    """What admission answers a Task for a job, read from the job's execution: the answer
    of the ``admission_answer`` query (any run of ``JobWorkflow``, open or closed).

    Exactly one of ``state`` / ``refusal`` / ``unanswered`` is set: ``refusal`` for a Task
    that is not valid whatever the run holds, else ``state`` or ``refusal`` when the run
    holds a job, else ``unanswered`` (since 2026-12-07; until then a run holding no job
    answered neither, ``{state: null, refusal: null}``).

    Attributes:
        state: the Task is this job's: the job's state as the run holds it (its final
            state once the job ended in the workflow).
        refusal: the Task is not this job's, or not valid: ``{code, message, detail,
            http_status}`` as ``POST /jobs`` answers (``idempotency_conflict`` 409,
            ``invalid_params`` 400 …).
        unanswered: why this run cannot answer a valid Task: ``admitting`` — it started
            with a Task it has not admitted yet (its ``start_delay`` just over, the ledger
            slow): ask again, or send the ``admission`` update, which waits for it;
            ``no_job`` — it refused its own Task (or its input) and holds no job, for good:
            the key's job, if any, is answered by ``POST /jobs`` or ``start_job``. Written
            only when set: every other answer keeps its members.
    """

    state: JobState | None = None
    refusal: dict[str, Any] | None = None
    unanswered: Literal["admitting", "no_job"] | None = None

    @model_serializer(mode="wrap")
    def _unanswered_only_when_set(self, handler: SerializerFunctionWrapHandler) -> Any:
        """``unanswered`` is written only when set: an answer keeps the members it had."""
        data = handler(self)
        if isinstance(data, dict) and self.unanswered is None:
            data.pop("unanswered", None)
        return data


class FollowJob(BaseModel):
    """Argument of the ``follow_job`` activity: a workflow attaches to the job of ``task``.

    Attributes:
        task: the protocol Task (plain JSON), admitted as ``POST /jobs`` admits it.
        cancel_job: cancel the job when the follower is cancelled (the follower's
            cancellation propagates, as for a child job).
    """

    task: dict[str, Any]
    cancel_job: bool = True


class CancelJob(BaseModel):
    """Argument of the Nexus ``cancel_job`` operation: cancel a job by its id.

    Attributes:
        job_id: the job id (``<target_id>@manual-<key lowercased>`` for a submitted Task).
    """

    job_id: str

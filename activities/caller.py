"""Which execution may run a job's activities: the job's own ``JobWorkflow``, nothing else.

Every activity that takes a job's input (``acquire``, ``search``, ``fetch``, ``deliver``,
``finish``, ``request_cancel``, ``admit``, ``push_events``) is registered on curaflow's
task queues under a plain name, so any workflow that schedules that name there — a
workflow of another type, a ``JobWorkflow`` started under another id, a standalone
activity (``temporal activity start``, no workflow at all) — would run the job's step
with a job id it chose: bind works, send, end another job in the ledger. The job's own
execution is the one whose workflow id *is* the job id (decision 1: HTTP, a Temporal
client's Task, a child job, the Nexus operation, a schedule's occurrence and the
reconciler all start ``JobWorkflow`` under the job id; a reset or a reporting run keeps
it), so each of these activities asks, before it touches anything, whether the calling
execution is that one (:func:`require_own_job`). A mismatch fails the attempt
non-retryably (type :data:`FOREIGN_CALLER`, both ids named) with nothing written.

The one other legitimate caller is the sweeper's ``EventPushWorkflow`` for
``push_events`` only, under :func:`curaflow.jobs.pushes.push_workflow_id` (or
``<job_id>/push-events``, the id it had before, for a push run still open from then).

The job's own execution runs only the job's steps (2026-12-07). A run of ``JobWorkflow``
under the job id can still carry an input that is not the job's: a Temporal client (or the
UI's "start workflow like this one", its input edited) starts the id with the job's input
edited — another route, another query, other budgets — with ``TerminateExisting`` or while
the job's start is deferred. The job's input stored at admission (``jobs.workflow_input``)
is the only truth of what the job does: each step opens (:func:`open_own_step`) only
when the fields it acts on (:class:`~curaflow.ledger.cells.StepClaim`) are that input's
(:func:`foreign_input`), else it fails the same way — ``foreign_caller``, non-retryable,
the fields named — before any write; ``finish`` refuses a run one of whose steps was so
refused (:func:`refused_step`), so the job is left as its real run left it.

A run's input can differ in fields no step reads but the workflow does — an earlier
``deadline_at_ms`` (the run stops the job's steps and finishes it ``deadline``), a target
left out (its cell never stepped, judged open), ``source_task_queues`` (a source step on
a queue no worker polls fails ``queued_too_long``), the budgets of its steps' options
(attempts, timeouts) —: its steps are the job's, its verdict would not be. So ``finish``
ends the job only when the whole input its run holds is the stored one
(:func:`foreign_run_input`, judged in the job's read: :func:`finish_own_job`) (2026-12-07).

Pure rules: :func:`foreign_caller`, :func:`foreign_input`, :func:`foreign_run_input`; the
activity-side checks: :func:`require_own_job`, :func:`claim_of`, :func:`open_own_step`,
:func:`require_own_finish`, :func:`finish_own_job`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import asyncpg
from pydantic import BaseModel, ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from curaflow.domain.cells import CellStage
from curaflow.domain.execution import FOREIGN_CALLER, JOB_WORKFLOW, PUSH_WORKFLOW
from curaflow.domain.messages import Budgets, CallbackPolicy, DeliverInput, FetchInput, JobInput, SearchInput
from curaflow.domain.verdicts import StepFailure
from curaflow.jobs.pushes import push_workflow_id
from curaflow.ledger.cells import StepClaim, StepOpened, start_step
from curaflow.ledger.finish import RunInputDiffers
from curaflow.observability.logs import get_logger

log = get_logger("curaflow.activities")

T = TypeVar("T")

__all__ = [
    "FOREIGN_CALLER",
    "claim_of",
    "finish_own_job",
    "foreign_caller",
    "foreign_input",
    "foreign_run_input",
    "legacy_push_workflow_id",
    "open_own_step",
    "refused_step",
    "require_own_finish",
    "require_own_job",
]


def legacy_push_workflow_id(job_id: str) -> str:
    """The id the sweeper's push run of ``job_id`` had before ``push-events:<job_id>``."""
    return f"{job_id}/push-events"


def foreign_caller(
    job_id: str | None,
    workflow_id: str | None,
    workflow_type: str | None,
    *,
    pushes: bool = False,
) -> str | None:
    """Why the execution ``(workflow_id, workflow_type)`` may not run an activity of job
    ``job_id``, or None when it may.

    Args:
        job_id: the job the activity's input names; for an activity whose job is the
            calling execution's own id (``request_cancel``), that id — None when no
            workflow called it.
        workflow_id / workflow_type: the calling execution (both None for a standalone
            activity, which no workflow started).
        pushes: the activity is ``push_events``, which the sweeper's
            ``EventPushWorkflow`` runs too (under :func:`~curaflow.jobs.pushes.push_workflow_id`
            or :func:`legacy_push_workflow_id`).

    Returns:
        None for ``JobWorkflow`` under the id ``job_id`` (and, with ``pushes``, for
        ``EventPushWorkflow`` under a push id of ``job_id``); else a sentence naming both ids
        (or saying it was called outside any workflow, naming no job, when ``job_id`` is None).
    """
    if job_id is None:  # the job would have been the caller's own id, and there is no caller
        return (
            f"called outside any workflow (a standalone activity): it runs only for the job of its own "
            f"{JOB_WORKFLOW} execution, and there is none: nothing done"
        )
    if workflow_type == JOB_WORKFLOW and workflow_id == job_id:
        return None
    if (
        pushes
        and workflow_type == PUSH_WORKFLOW
        and workflow_id in (push_workflow_id(job_id), legacy_push_workflow_id(job_id))
    ):
        return None
    if workflow_id is None:
        caller = "a standalone activity, outside any workflow"
    else:
        caller = f"workflow {workflow_id!r} of type {workflow_type!r}"
    return (
        f"job {job_id!r} runs only in its own {JOB_WORKFLOW} execution, whose workflow id is the job id; "
        f"called by {caller}: nothing done"
    )


def require_own_job(job_id: str | None, *, pushes: bool = False) -> None:
    """Fail this attempt unless the calling execution is job ``job_id``'s own (:func:`foreign_caller`;
    ``job_id`` None: the job is the caller's own id and no workflow called).

    Called first by every activity that takes a job's input, before it reads or writes the
    ledger, so a foreign caller gets nothing done and learns nothing of the job.

    Raises:
        ApplicationError: type :data:`FOREIGN_CALLER`, non-retryable (another attempt of
            the same caller is refused the same), details ``{job_id, workflow_id,
            workflow_type, activity_type}``.
    """
    info = activity.info()
    why = foreign_caller(job_id, info.workflow_id, info.workflow_type, pushes=pushes)
    if why is None:
        return
    log.warning(
        "activity.foreign_caller",
        activity=info.activity_type,
        job_id=job_id,
        workflow_id=info.workflow_id,
        workflow_type=info.workflow_type,
    )
    raise ApplicationError(
        f"{info.activity_type}: {why}",
        {
            "job_id": job_id,
            "workflow_id": info.workflow_id,
            "workflow_type": info.workflow_type,
            "activity_type": info.activity_type,
        },
        type=FOREIGN_CALLER,
        non_retryable=True,
    )


def foreign_input(stored: Any, claim: StepClaim) -> list[str]:
    """The fields of a step's input that are not what the job's stored input holds for it
    (empty: the step is the job's).

    The job's input stored at admission (``jobs.workflow_input``) is the only truth of what
    the job does; a step acts on its cell's target spec (query, filters, limits, excluded
    works, storage, routes), a source step's fallback stages and ``deliver``'s route and
    attempts — each must be the stored input's, read as a :class:`~curaflow.domain.messages.JobInput` (the defaults of a
    field the stored input predates filled, as its own run reads it).

    Args:
        stored: the stored input (the ``jsonb`` value as read).
        claim: what the step's input asks (:class:`~curaflow.ledger.cells.StepClaim`).

    Returns:
        The differing fields by name (``target``, ``route``, ``max_fallback_stages``,
        ``budgets.delivery_max_attempts``); ``["workflow_input"]`` when the stored input is
        no ``JobInput`` (nothing can be judged the job's then).
    """
    try:
        job = JobInput.model_validate(stored)
    except ValidationError:
        return ["workflow_input"]
    target = next((t for t in job.targets if t.target_id == claim.target.target_id), None)
    differs: list[str] = []
    if target is None or target != claim.target:
        differs.append("target")
    if claim.route is not None and (target is None or claim.route not in target.routes):
        differs.append("route")
    if claim.max_fallback_stages is not None and claim.max_fallback_stages != max(1, job.max_fallback_stages):
        differs.append("max_fallback_stages")
    if claim.delivery_max_attempts is not None and claim.delivery_max_attempts != job.budgets.delivery_max_attempts:
        differs.append("budgets.delivery_max_attempts")
    return differs


def foreign_run_input(stored: Any, run_input: JobInput) -> list[str]:
    """The fields of the input a run holds that are not the job's stored input (empty: the
    run's input is the job's; ``finish`` ends the job only then).

    Every field is compared: the stored input is the only truth of what the job does, and a
    field no step reads can still change what the job reports through the workflow, which
    reads it — ``deadline_at_ms`` (its timer stops the job's steps and finishes it
    ``deadline``), ``targets`` (a target left out is never stepped and judged open),
    ``source_task_queues`` (a source step on a queue no worker polls ends
    ``queued_too_long``), ``budgets`` (its steps' attempts and timeouts),
    ``max_fallback_stages`` —; the others (``job_type``, ``identity``, ``callback_policy``
    …) are what the run shows and answers of the job. Every legitimate run holds the
    stored input itself: it was started with it or admitted its Task to it (docs/DESIGN.md
    "Who may run a job's activities").

    Args:
        stored: the job's stored input (``jobs.workflow_input``, the ``jsonb`` value as
            read), read as a :class:`~curaflow.domain.messages.JobInput` — the defaults of a
            field it predates filled, as its own run reads it.
        run_input: the ``JobInput`` the finishing run holds.

    Returns:
        The differing fields by name, a field of ``budgets`` or ``callback_policy`` by its
        dotted name (``budgets.queued_timeout_ms``); ``["workflow_input"]`` when the stored
        input is no ``JobInput`` (nothing can be judged the job's then).
    """
    try:
        job = JobInput.model_validate(stored)
    except ValidationError:
        return ["workflow_input"]
    return _differing(job, run_input)


def _differing(stored: BaseModel, run: BaseModel, prefix: str = "") -> list[str]:
    """The fields of ``run`` that are not ``stored``'s (both of one model), by name; those of
    a nested :class:`~curaflow.domain.messages.Budgets` / ``CallbackPolicy`` by dotted name."""
    differs: list[str] = []
    for name in type(stored).model_fields:
        ours, theirs = getattr(stored, name), getattr(run, name)
        if ours == theirs:
            continue
        if isinstance(ours, Budgets | CallbackPolicy) and type(theirs) is type(ours):
            differs.extend(_differing(ours, theirs, f"{prefix}{name}."))
        else:
            differs.append(f"{prefix}{name}")
    return differs


async def finish_own_job(
    job_id: str, run_input: JobInput | None, finish: Callable[[JobInput | None], Awaitable[T]]
) -> T:
    """Finish the job only if the input the finishing run holds is the job's.

    ``finish`` is the ledger's finish (:func:`curaflow.ledger.finish.finish_job`) given the
    run's input to compare (or None: not compared). It compares it with the job's stored
    input in the job's read (``jsonb`` equality: no statement added); an input that differs
    there at a glance is judged by :func:`foreign_run_input` on the stored input that read
    returned — a stored input that predates a field is the run's once its defaults are
    filled, and that job is then finished with a second call, not compared (only such jobs
    pay it). ``run_input`` None (a run that names none) is not judged.

    Raises:
        ApplicationError: ``foreign_caller`` (non-retryable, the differing fields named)
            when the run's input is not the job's: nothing written.
    """
    try:
        return await finish(run_input)
    except RunInputDiffers as differs:
        assert run_input is not None  # compared only when given
        fields = foreign_run_input(differs.stored_input, run_input)
        if fields:
            raise _input_refusal(
                job_id,
                fields,
                f"job {job_id!r} ends only by the run of its input stored at admission; this run's input has "
                f"another {', '.join(fields)}: not the job's run, nothing written",
            ) from None
    return await finish(None)


def _input_refusal(job_id: str, fields: list[str], why: str | None = None) -> ApplicationError:
    """The failure of a step (or ``finish``) whose input is not the job's: ``foreign_caller``,
    non-retryable, details ``{job_id, workflow_id, workflow_type, activity_type, fields}``.

    The same type as a foreign caller's refusal: for the workflow, ``finish`` and the
    reconciler it means the same — the attempt is not the job's, nothing was done — so
    they need not tell the two apart; ``fields`` names what differed."""
    info = activity.info()
    log.warning(
        "activity.foreign_input",
        activity=info.activity_type,
        job_id=job_id,
        workflow_id=info.workflow_id,
        run_id=info.workflow_run_id,
        fields=fields,
    )
    why = why or (
        f"job {job_id!r} does only what its input stored at admission holds; this run's input asks for "
        f"another {', '.join(fields)}: not the job's step, nothing done"
    )
    return ApplicationError(
        f"{info.activity_type}: {why}",
        {
            "job_id": job_id,
            "workflow_id": info.workflow_id,
            "workflow_type": info.workflow_type,
            "activity_type": info.activity_type,
            "fields": fields,
        },
        type=FOREIGN_CALLER,
        non_retryable=True,
    )


def claim_of(inp: SearchInput | FetchInput | DeliverInput) -> StepClaim:
    """What a step's input asks of its job (:class:`~curaflow.ledger.cells.StepClaim`),
    after the checks the input answers by itself: ``deliver``'s route is one its target
    names, a source step's stage is one of its stages.

    Raises:
        ApplicationError: ``foreign_caller`` (non-retryable, :func:`_input_refusal`) when
            the input contradicts itself: no job's run sends it.
    """
    if isinstance(inp, DeliverInput):
        if inp.route not in inp.target.routes:
            raise _input_refusal(inp.job_id, ["route"])
        return StepClaim(inp.target, route=inp.route, delivery_max_attempts=inp.max_attempts)
    if not 0 <= inp.fallback_stage < inp.max_fallback_stages:
        raise _input_refusal(inp.job_id, ["fallback_stage"])
    return StepClaim(inp.target, max_fallback_stages=inp.max_fallback_stages)


async def open_own_step(
    conn: asyncpg.Connection,
    job_id: str,
    claim: StepClaim,
    *,
    stage: CellStage,
    attempt: int,
    lease_ms: int,
    owner: str,
) -> StepOpened:
    """Open the step (:func:`~curaflow.ledger.cells.start_step`) only if its input is the
    job's: the claim is judged in the step's opening statement, before any write; a claim
    that does not match there at a glance (``jsonb`` equality) is judged by
    :func:`foreign_input` on the stored input that statement returned — a job admitted
    before a field existed matches once its defaults are filled, and its step opens with a
    second statement (only such jobs pay it).

    Raises:
        ApplicationError: ``foreign_caller`` (non-retryable, the differing fields named)
            when the input is not the job's: nothing written.
    """
    opened = await start_step(
        conn, job_id, claim.target.target_id, stage=stage, attempt=attempt, lease_ms=lease_ms, owner=owner, claim=claim
    )
    if opened.stored_input is None:
        return opened
    differs = foreign_input(opened.stored_input, claim)
    if differs:
        raise _input_refusal(job_id, differs)
    return await start_step(
        conn, job_id, claim.target.target_id, stage=stage, attempt=attempt, lease_ms=lease_ms, owner=owner
    )


async def require_own_input(pool: asyncpg.Pool, job_id: str, claim: StepClaim) -> None:
    """Fail unless the claim is the job's (:func:`foreign_input`), reading the stored input
    (one statement): for a step that writes before it opens — ``deliver``'s hold of a route
    this worker does not know. A job the ledger does not know passes (its step says so)."""
    stored = await pool.fetchval("SELECT workflow_input FROM jobs WHERE job_id = $1", job_id)
    if stored is None:
        return
    differs = foreign_input(stored, claim)
    if differs:
        raise _input_refusal(job_id, differs)


def refused_step(failures: Mapping[str, StepFailure]) -> str | None:
    """The target id of a step of this run that was refused as not the job's (its failure
    is ``foreign_caller``), or None: a run with such a step is not the job's run."""
    return next((tid for tid, failure in failures.items() if failure.error_type == FOREIGN_CALLER), None)


def require_own_finish(job_id: str, failures: Mapping[str, StepFailure]) -> None:
    """Fail ``finish`` of a run one of whose steps was refused as not the job's
    (:func:`refused_step`): its input is not the job's, so its facts and its cause are no
    verdict on the job. Judged on the input alone: no statement.

    Raises:
        ApplicationError: ``foreign_caller`` (non-retryable), nothing written.
    """
    tid = refused_step(failures)
    if tid is not None:
        raise _input_refusal(
            job_id,
            ["targets"],
            f"job {job_id!r}'s step of target {tid!r} in this run was refused as not the job's (the run's input "
            "is not the job's input stored at admission): this run is not the job's, nothing written",
        )

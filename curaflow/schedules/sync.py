"""Configured plans → Temporal Schedules: build, compare and sync (idempotent).

A plan (``[[schedules]]``: id, cron list, time zone, target ids, jitter, paused) is one
Temporal Schedule with the same id whose action starts ``ScheduledJobWorkflow`` (the
trampoline, :mod:`workflows.scheduled`) on the main task queue with an
:class:`~curaflow.domain.occurrence.OccurrenceInput`. Policies: overlap ``SKIP``, a
catch-up window of 90 minutes, no back-fill beyond it (``sync`` never back-fills).
:func:`sync_schedules` creates, updates and deletes schedules to match the configuration
and returns the diff. Only schedules curaflow owns on this task queue are considered
(memo ``curaflow_task_queue``), so plans of other applications or stacks sharing the
namespace are never touched.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleDescription,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError

from curaflow.config import ScheduleConfig, Settings
from curaflow.domain.execution import SCHEDULE_ID, SCHEDULED_WORKFLOW
from curaflow.domain.occurrence import CATCHUP_WINDOW_S, OccurrenceInput, occurrence_timeout, read_occurrence_input
from curaflow.domain.presentation import occurrence_summary
from curaflow.observability.logs import get_logger
from curaflow.temporal.answers import execution_not_found

#: Memo key naming the task queue of the stack that owns a schedule.
MEMO_TASK_QUEUE = "curaflow_task_queue"
log = get_logger("curaflow.schedules")


class ScheduleError(Exception):
    """A schedule operation failed (unknown schedule, server refused); ``str()`` is readable."""


def occurrence_input(settings: Settings, plan: ScheduleConfig) -> OccurrenceInput:
    """The trampoline argument (and sync fingerprint) of a configured plan."""
    return OccurrenceInput(
        schedule_id=plan.id,
        cron=list(plan.cron),
        timezone=plan.timezone,
        target_ids=list(plan.target_ids),
        jitter_ms=plan.jitter_ms,
        task_queue=settings.temporal.task_queue,
    )


def build_schedule(settings: Settings, plan: ScheduleConfig) -> Schedule:
    """The Temporal :class:`Schedule` of a configured plan (overlap SKIP, 90 min catch-up;
    each occurrence started with the execution timeout
    :func:`~curaflow.domain.occurrence.occurrence_timeout` of the configured
    ``budgets.default_deadline_ms``, so none holds the overlap slot for ever)."""
    inp = occurrence_input(settings, plan)
    return Schedule(
        action=ScheduleActionStartWorkflow(
            SCHEDULED_WORKFLOW,
            args=[inp],
            id=f"{plan.id}@occurrence",
            task_queue=settings.temporal.task_queue,
            execution_timeout=occurrence_timeout(settings.budgets.default_deadline_ms),
            typed_search_attributes=TypedSearchAttributes([SearchAttributePair(SCHEDULE_ID, plan.id)]),
            static_summary=occurrence_summary(plan.id, list(plan.cron), plan.timezone),
        ),
        spec=ScheduleSpec(
            cron_expressions=list(plan.cron),
            time_zone_name=plan.timezone,
            jitter=timedelta(milliseconds=plan.jitter_ms) if plan.jitter_ms else None,
        ),
        policy=SchedulePolicy(
            overlap=ScheduleOverlapPolicy.SKIP,
            catchup_window=timedelta(seconds=CATCHUP_WINDOW_S),
            pause_on_failure=False,
        ),
        state=ScheduleState(paused=plan.paused, note="paused in the configuration" if plan.paused else ""),
    )


@dataclass
class Change:
    """One line of the sync diff.

    Attributes:
        action: ``create`` | ``update`` | ``delete`` | ``unchanged``.
        changes: for ``update``: field → ``(current, desired)``.
        never_runs: the schedule as it now stands (after the change; as it would be for a
            dry run's create or update: unknown, False) is not paused and matches no future
            time — a cron at the edge of the calendar (``0 0 30 2 *``), a year gone by —
            so the plan will never start an occurrence (:func:`never_runs`).
    """

    schedule_id: str
    action: str
    changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    never_runs: bool = False

    def render(self) -> str:
        """``+ id``, ``- id``, ``~ id: field a → b; …`` or ``= id``; then, for a plan that will
        never start an occurrence, `` (never runs: …)``."""
        mark = {"create": "+", "delete": "-", "update": "~", "unchanged": "="}[self.action]
        text = f"{mark} {self.schedule_id}"
        if self.changes:
            text += ": " + "; ".join(f"{k} {a!r} → {b!r}" for k, (a, b) in self.changes.items())
        if self.never_runs:
            text += f" ({NEVER_RUNS})"
        return text


#: What ``sync`` and the watch say of a plan whose schedule will never start an occurrence.
NEVER_RUNS = (
    "never runs: its schedule matches no future time — check the cron's dates (the 30th of "
    "February, the 31st of a 30-day month, a past year) in its time zone"
)


def never_runs(desc: ScheduleDescription) -> bool:
    """Whether a schedule, not paused, will never start another action: Temporal gives it no
    next action time (a spec that matches no future time, an end time gone by, its remaining
    actions used up). A paused schedule keeps its next times: its pause is said as such."""
    return not desc.schedule.state.paused and not desc.info.next_action_times


async def current_input(client: Client, desc: ScheduleDescription) -> OccurrenceInput | None:
    """The plan a curaflow schedule runs (its action's argument), or None for a schedule
    that is not a curaflow plan.

    A described schedule's argument is the payload its trampolines get, decoded as their
    worker decodes it and read as they read it
    (:func:`curaflow.domain.occurrence.read_occurrence_input`, all its arguments): an action
    whose JSON text has no one meaning (``"schedule_id":"x","schedule_id":"nightly"``), or
    that passes anything after the plan (the trampoline takes exactly one argument), is no
    plan here either — every occurrence refuses it — so the watch says
    ``action_not_a_plan`` and ``sync`` restores it (until 2026-12-07 its last reading, of
    its first argument alone, was compared with the plan: ``unchanged``).
    """
    action = desc.schedule.action
    if not isinstance(action, ScheduleActionStartWorkflow) or action.workflow != SCHEDULED_WORKFLOW or not action.args:
        return None
    args = list(action.args)
    if all(isinstance(arg, Payload) for arg in args):
        # Every argument, as the trampoline gets them: a plan followed by anything else is
        # "2 arguments" there (until 2026-12-07 only the first was read here: `unchanged`).
        try:
            args = await client.data_converter.decode(args)
        except (ValueError, TypeError):
            return None
    plan = read_occurrence_input(args)
    return None if isinstance(plan, str) else plan


def diff_plan(
    current: OccurrenceInput | None, paused: bool, desired: OccurrenceInput, plan: ScheduleConfig
) -> dict[str, Any]:
    """What differs between a schedule (its plan and paused state) and the configured plan:
    field → ``(current, desired)``."""
    changes: dict[str, tuple[Any, Any]] = {}
    cur = current.model_dump() if current else {}
    for key, value in desired.model_dump().items():
        if cur.get(key) != value:
            changes[key] = (cur.get(key), value)
    if paused != plan.paused:
        changes["paused"] = (paused, plan.paused)
    return changes


def diff_schedule(desc: ScheduleDescription, wanted: Schedule) -> dict[str, Any]:
    """What differs, outside the plan's input, between a schedule and the one curaflow builds:
    field → ``(current, desired)``.

    The fields Temporal gives back as written: the spec's time zone and jitter, the
    policies (overlap, catch-up window, pause on failure), the action's workflow type,
    id, task queue and execution timeout (``execution_timeout``: a schedule synced before
    2026-12-06 has none, and the bound follows the configured deadline); and what stops
    a schedule without touching those (2026-12-06: an edit with Temporal's tools that
    emptied the spec or set a count of remaining actions
    read ``= id`` while the plan had stopped): the number of the spec's expressions
    (``spec_expressions``: Temporal rewrites each cron string into exactly one calendar or
    one interval, so a plan of *n* strings has *n*; an emptied spec has 0), its skip
    calendars, start and end times, and the state's remaining actions
    (``limited_actions``: the count left, None when unlimited). An operator's
    ``temporal schedule update`` (or the UI's edit) rewrites the whole schedule and
    resets what it does not name — the catch-up window to a year, the time zone to UTC —
    while the action's input, which :func:`diff_plan`
    compares, is passed again unchanged; ``sync`` used to print ``= id`` for it. The
    calendars the server rewrote the cron strings into are not compared (see DESIGN.md
    "Scheduled occurrences").
    """
    cur, want = desc.schedule, wanted
    pairs: dict[str, tuple[Any, Any]] = {
        "time_zone": (cur.spec.time_zone_name or "UTC", want.spec.time_zone_name or "UTC"),
        "jitter": (cur.spec.jitter or timedelta(0), want.spec.jitter or timedelta(0)),
        "overlap": (_name(cur.policy.overlap), _name(want.policy.overlap)),
        "catchup_window": (cur.policy.catchup_window, want.policy.catchup_window),
        "pause_on_failure": (cur.policy.pause_on_failure, want.policy.pause_on_failure),
        "spec_expressions": (_expressions(cur.spec), _expressions(want.spec)),
        "skip": (len(cur.spec.skip), len(want.spec.skip)),
        "start_at": (cur.spec.start_at, want.spec.start_at),
        "end_at": (cur.spec.end_at, want.spec.end_at),
        "limited_actions": (_remaining(cur.state), _remaining(want.state)),
    }
    action, wanted_action = cur.action, want.action
    assert isinstance(wanted_action, ScheduleActionStartWorkflow)
    if isinstance(action, ScheduleActionStartWorkflow):
        pairs["workflow"] = (action.workflow, wanted_action.workflow)
        pairs["workflow_id"] = (action.id, wanted_action.id)
        pairs["action_task_queue"] = (action.task_queue, wanted_action.task_queue)
        pairs["execution_timeout"] = (action.execution_timeout, wanted_action.execution_timeout)
    else:
        pairs["action"] = (type(action).__name__, "ScheduleActionStartWorkflow")
    return {key: pair for key, pair in pairs.items() if pair[0] != pair[1]}


def _expressions(spec: ScheduleSpec) -> int:
    """How many times-expressions a spec holds: its calendars, intervals and cron strings
    (the server turns each cron string into one calendar or one interval)."""
    return len(spec.calendars) + len(spec.intervals) + len(spec.cron_expressions)


def _remaining(state: ScheduleState) -> int | None:
    """The actions a schedule may still take, or None when they are not limited."""
    return state.remaining_actions if state.limited_actions else None


def _name(value: Any) -> Any:
    return getattr(value, "name", value)


async def _owned(desc: ScheduleDescription, task_queue: str) -> bool:
    """Whether curaflow created the schedule for ``task_queue`` (its memo), whatever its action now holds."""
    try:
        memo = await desc.memo()
    except (ValueError, TypeError, RuntimeError):  # a memo that does not decode is not ours
        return False
    return bool(memo.get(MEMO_TASK_QUEUE) == task_queue)


async def curaflows(desc: ScheduleDescription, plan: OccurrenceInput | None, task_queue: str) -> bool:
    """Whether a schedule is a plan curaflow manages on ``task_queue`` — the one rule of
    which schedules curaflow acts on (``sync``, ``trigger``, ``pause``, ``unpause``): its
    action is a curaflow plan (``plan``, :func:`current_input`) of that task queue, or
    curaflow created it for that task queue (its memo :data:`MEMO_TASK_QUEUE`, whatever its
    action now holds: an edit by hand is still curaflow's to restore or pause). Another
    application's schedule in the namespace, or a plan of another stack (another task
    queue), is not."""
    return (plan is not None and plan.task_queue == task_queue) or await _owned(desc, task_queue)


def not_curaflows(schedule_id: str, task_queue: str) -> str:
    """What is said of a schedule :func:`curaflows` refuses (the start of the message)."""
    return (
        f"schedule {schedule_id!r} is not a curaflow plan on task queue {task_queue!r} "
        "(another application's schedule, or another stack's plan)"
    )


async def managed_schedule(
    client: Client, schedule_id: str, task_queue: str
) -> tuple[ScheduleDescription, OccurrenceInput | None]:
    """The schedule of a plan curaflow manages on ``task_queue`` (:func:`curaflows`), described,
    and the plan its action holds (None: edited by hand into no plan) — what every acting
    verb asks first (2026-12-07: ``pause`` and ``unpause`` acted on any schedule of the
    namespace, and ``trigger`` started another stack's plan).

    Raises:
        ScheduleError: no such schedule, or one that is not curaflow's: nothing is done.
        temporalio.service.RPCError: Temporal refused the describe.
    """
    desc = await describe_schedule(client, schedule_id)
    if desc is None:
        raise ScheduleError(f"no schedule {schedule_id!r} (run `curaflow schedules sync` first)")
    plan = await current_input(client, desc)
    if not await curaflows(desc, plan, task_queue):
        raise ScheduleError(f"{not_curaflows(schedule_id, task_queue)}: curaflow does not act on it; nothing done")
    return desc, plan


async def owned_schedule_ids(client: Client, task_queue: str) -> list[str]:
    """Ids of the schedules curaflow created for ``task_queue`` (from the visibility store)."""
    ids: list[str] = []
    async for entry in await client.list_schedules():
        with contextlib.suppress(Exception):
            memo = await entry.memo()
            if memo.get(MEMO_TASK_QUEUE) == task_queue:
                ids.append(entry.id)
    return sorted(ids)


async def describe_schedule(client: Client, schedule_id: str) -> ScheduleDescription | None:
    """The schedule's description, or None when it does not exist: Temporal's own "not
    found" of it (:func:`curaflow.temporal.answers.execution_not_found` — a schedule is its
    scheduler's execution to Temporal, and answered the same); a namespace's ``NOT_FOUND``
    says nothing of the schedule (2026-12-07: the watch reported every plan ``not_found``,
    "run `curaflow schedules sync`", for a namespace that was not there).

    Raises:
        temporalio.service.RPCError: any other answer.
    """
    try:
        return await client.get_schedule_handle(schedule_id).describe()
    except RPCError as err:
        if execution_not_found(err):
            return None
        raise


async def _say_never_runs(client: Client, change: Change) -> None:
    """Mark (and log) a change whose schedule, as written now, will never start an occurrence."""
    desc = await describe_schedule(client, change.schedule_id)
    if desc is not None and never_runs(desc):
        change.never_runs = True
        log.warning("schedule.never_runs", schedule_id=change.schedule_id, detail=NEVER_RUNS)


async def sync_schedules(client: Client, settings: Settings, *, dry_run: bool = False) -> list[Change]:
    """Make Temporal's schedules match ``settings.schedules`` (idempotent).

    Args:
        client: Temporal client of the configured namespace.
        settings: the configuration.
        dry_run: compute the diff only.

    Returns:
        One :class:`Change` per configured plan (in config order), then one ``delete``
        per owned schedule no longer configured.

    Raises:
        ScheduleError: a schedule belongs to another task queue or application, or the
            server refused a change. A create that finds the schedule created meanwhile
            (two syncs at once) is no error: the schedule is compared as it stands.
    """
    tq = settings.temporal.task_queue
    out: list[Change] = []
    configured = {p.id for p in settings.schedules}
    for plan in settings.schedules:
        desired = occurrence_input(settings, plan)
        desc = await describe_schedule(client, plan.id)
        if desc is None:
            if dry_run:
                out.append(Change(plan.id, "create"))
                continue
            try:
                await client.create_schedule(
                    plan.id,
                    build_schedule(settings, plan),
                    memo={MEMO_TASK_QUEUE: tq},
                    search_attributes=TypedSearchAttributes([SearchAttributePair(SCHEDULE_ID, plan.id)]),
                )
            except ScheduleAlreadyRunningError:
                # another sync (a second deploy) created it since the describe above: what
                # stands now is compared like any existing schedule — `= id` when it is the plan's
                desc = await describe_schedule(client, plan.id)
                if desc is None:
                    raise ScheduleError(f"cannot create schedule {plan.id!r}: created and deleted meanwhile") from None
            except Exception as err:
                raise ScheduleError(f"cannot create schedule {plan.id!r}: {err}") from err
            else:
                out.append(Change(plan.id, "create"))
                log.info("schedule.created", schedule_id=plan.id, cron=plan.cron, timezone=plan.timezone)
                await _say_never_runs(client, out[-1])
                continue
        current = await current_input(client, desc)
        if not await curaflows(desc, current, tq):
            raise ScheduleError(f"{not_curaflows(plan.id, tq)}: rename the plan or delete that schedule")
        changes = diff_plan(current, desc.schedule.state.paused, desired, plan)
        changes.update(diff_schedule(desc, build_schedule(settings, plan)))
        if not changes:
            out.append(Change(plan.id, "unchanged", never_runs=never_runs(desc)))
            if out[-1].never_runs:
                log.warning("schedule.never_runs", schedule_id=plan.id, cron=plan.cron, detail=NEVER_RUNS)
            continue
        out.append(Change(plan.id, "update", changes))
        if not dry_run:
            wanted = build_schedule(settings, plan)

            def updater(_: ScheduleUpdateInput, wanted: Schedule = wanted) -> ScheduleUpdate:
                return ScheduleUpdate(schedule=wanted)

            await client.get_schedule_handle(plan.id).update(updater)
            log.info("schedule.updated", schedule_id=plan.id, changes=sorted(changes))
            await _say_never_runs(client, out[-1])
    for sid in await owned_schedule_ids(client, tq):
        if sid in configured:
            continue
        out.append(Change(sid, "delete"))
        if not dry_run:
            with contextlib.suppress(RPCError):
                await client.get_schedule_handle(sid).delete()
            log.info("schedule.deleted", schedule_id=sid)
    return out

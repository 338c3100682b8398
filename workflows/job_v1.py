"""The job orchestration of executions started before core v2 (``workflow.patched("core-v2")``).

Frozen copy of ``JobWorkflow`` as it ran until core v2: an execution whose history has
no ``core-v2`` patch marker replays this code, command for command
(``tests/histories/job_*.json`` recorded before core v2 prove it). Never change what it
schedules; fix it only through the activities it calls (the one exception: a bug —
any exception a cell's task dies of that is no ``ActivityError`` — is raised and fails the
workflow task, as in ``JobWorkflow``; no command changes where no bug happened). Remove it with
``workflow.deprecate_patch("core-v2")`` once no execution started before core v2 is
open or queryable (the namespace's retention after the upgrade): ``curaflow
upgrade-check`` (:mod:`curaflow.temporal.upgrades`) lists the executions that still replay it.

Frozen through and through: every rule it decides with (reasons, status, stage, details,
push options) is the copy in :mod:`workflows.job_v1_rules`, never the live one; it imports
only the activities' wire messages (``tests/unit/test_job_v1_frozen.py``).

Deterministic and sandbox-clean: it imports only pure modules.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    RetryState,
    TimeoutType,
)
from temporalio.exceptions import (
    TimeoutError as ActivityTimeoutError,
)

from workflows.job_v1_rules import (
    AUTH_FAILED,
    CONFIGURATION_ERROR,
    DELIVERY_ABANDONED,
    DELIVERY_REJECTED,
    DELIVERY_UNKNOWN,
    INTERNAL_ERROR,
    QUEUED_TOO_LONG,
    STALLED_NO_HEARTBEAT,
    is_terminal,
    job_stage,
    job_status,
    parse_reason,
    push_options,
    render_details,
)

with workflow.unsafe.imports_passed_through():
    from curaflow.domain.messages import (
        CancelRequest,
        CellUpdate,
        DeliverInput,
        FetchInput,
        FinishInput,
        JobInput,
        JobState,
        PushInput,
        SearchInput,
        TargetSpec,
    )
    from curaflow.domain.models import CellSnapshot

#: How far an activity attempt may run past the job deadline (see ``_options``); less than
#: the execution's own grace (``curaflow.domain.execution.EXECUTION_GRACE``, 10 min).
ATTEMPT_GRACE = timedelta(minutes=5)
JOB_STATUS = SearchAttributeKey.for_keyword("JobStatus")
BUSINESS_STATUS = SearchAttributeKey.for_keyword("BusinessStatus")

NON_RETRYABLE_TYPES = (
    AUTH_FAILED,
    CONFIGURATION_ERROR,
    INTERNAL_ERROR,
    DELIVERY_REJECTED,
    DELIVERY_UNKNOWN,
    DELIVERY_ABANDONED,
)


def frozen_job_status(cells: list[CellSnapshot]) -> str:
    """The ``JobStatus`` search attribute value as core v1 computed it (frozen: it feeds
    ``upsert_search_attributes`` commands of the executions this module replays)."""
    if not cells:
        return "queued"
    if not all(is_terminal(c.state) for c in cells):
        return "queued" if all(c.state == "pending" for c in cells) else "running"
    if any(c.state == "submitted" for c in cells):
        return "succeeded"
    system = [c for c in cells if c.state == "failed" and c.reason != "cancelled_by_consumer"]
    if not system:
        return "cancelled" if any(c.state == "failed" for c in cells) else "failed"
    expiry = {"queued_too_long", "stalled_no_heartbeat", "execution_timeout"}
    return "expired" if all(c.reason in expiry for c in system) else "failed"


def cancel_reason(arg: Any) -> str:
    """The reason carried by a ``cancel`` signal's argument (see ``JobWorkflow.cancel``)."""
    if isinstance(arg, CancelRequest):
        return arg.reason
    if isinstance(arg, dict) and isinstance(arg.get("reason"), str) and arg["reason"].strip():
        return str(arg["reason"])
    if isinstance(arg, str) and arg.strip():
        return arg
    return "cancelled_by_consumer"


def reason_for(err: BaseException, step: str) -> str | None:
    """Translate an activity failure into the cell's terminal reason code.

    Args:
        err: what ``execute_activity`` raised.
        step: ``search`` | ``fetch`` | ``deliver``.

    Returns:
        The reason code, or None for a cancellation: the workflow cancelled the
        activity itself (consumer cancel or deadline), and ``finish`` decides the reason
        from the cause.
    """
    if not isinstance(err, ActivityError):
        return INTERNAL_ERROR
    cause = err.cause
    if isinstance(cause, CancelledError):
        return None
    if isinstance(cause, ApplicationError):
        reason = parse_reason(cause.type)
        if step == "deliver" and err.retry_state == RetryState.MAXIMUM_ATTEMPTS_REACHED and not cause.non_retryable:
            return DELIVERY_ABANDONED
        return reason
    if isinstance(cause, ActivityTimeoutError):
        if cause.type == TimeoutType.SCHEDULE_TO_START:
            if step == "search":
                return QUEUED_TOO_LONG
            if step == "deliver":
                return DELIVERY_ABANDONED
            return STALLED_NO_HEARTBEAT
        if step == "deliver":
            return DELIVERY_ABANDONED
        return STALLED_NO_HEARTBEAT
    return INTERNAL_ERROR


class JobV1:
    """One job as orchestrated before core v2 (module doc); driven by ``JobWorkflow``."""

    def __init__(self, inp: JobInput) -> None:
        self._inp = inp
        self._cells: dict[str, CellSnapshot] = {t.target_id: CellSnapshot(target_id=t.target_id) for t in inp.targets}
        self._verdict_map: dict[str, str] = {}
        self._final: JobState | None = None
        self._cancel_signalled = False
        self._cancelling = False
        self._finishing = False
        self._self_cancel: asyncio.Task[Any] | None = None
        self._details = ""
        self._published: tuple[str, str] = ("queued", "")  # set at start (curaflow.temporal.connection)
        self._push_wanted = 0
        self._push_done = 0
        self._pusher: asyncio.Task[None] | None = None

    # ---- queries and signals ----------------------------------------------------

    def status(self) -> JobState:
        """The live job state: status and stage from the same projection as ``GET /jobs/{id}``."""
        if self._final is not None:
            return self._final
        cells = self._cell_list()
        status = job_status(cells)
        return JobState(
            job_id=self._inp.job_id,
            job_type=self._inp.job_type,
            status=status,  # type: ignore[arg-type]  # the frozen rule's word; the message validates it
            stage="cancelling" if self._cancelling else job_stage(cells, status),
            cancel_requested=self._cancelling or self._cancel_signalled,
            created_at_ms=self._inp.created_at_ms,
            deadline_at_ms=self._inp.deadline_at_ms,
            cells=cells,
        )

    async def cancel(self, req: Any = None) -> None:
        """Cancel the job: becomes a Temporal cancel request, so the execution ends ``Canceled``.

        Accepts any argument: none (``temporal workflow signal --name cancel``), a
        :class:`CancelRequest` or ``{"reason": "..."}``, a reason string; anything else
        still cancels, with the reason ``cancelled_by_consumer``. Ignored once the job is
        finishing.
        """
        if self._cancel_signalled or self._finishing:
            return
        self._cancel_signalled = True
        req = CancelRequest(reason=cancel_reason(req))
        await workflow.execute_activity(
            "request_cancel",
            req,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=5)),
            summary="cancel requested by signal",
        )

    # ---- main -------------------------------------------------------------------

    async def run(self, inp: JobInput) -> JobState:
        """Run every cell, then finish; ends ``Canceled`` after a consumer cancel."""
        self._publish()
        self._push()
        tasks = [asyncio.create_task(self._run_cell(t)) for t in inp.targets]
        cause = "completed"
        remaining_s = max(0.0, (inp.deadline_at_ms - int(workflow.time() * 1000)) / 1000)
        try:
            await workflow.wait_condition(
                lambda: all(t.done() for t in tasks) or self._self_cancel is not None,
                timeout=timedelta(seconds=remaining_s),
            )
            if self._self_cancel is not None:
                # A consumer cancel found in the ledger: this execution asked Temporal to
                # cancel it; wait for that request to arrive (as CancelledError).
                await asyncio.shield(self._self_cancel)
                remaining_s = max(0.0, (inp.deadline_at_ms - int(workflow.time() * 1000)) / 1000)
                await workflow.wait_condition(lambda: False, timeout=timedelta(seconds=remaining_s))
        except TimeoutError:
            cause = "deadline"
        except asyncio.CancelledError:
            cause = "cancelled"
        if cause != "completed":
            self._cancelling = cause == "cancelled"
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):  # each cell's cancellation is expected
                    await task
        # A cell's task ends only by its steps or its cancellation: any exception it died
        # of is a bug, and fails the workflow task, never the job (2026-12-06; no command
        # changes where no bug happened).
        for task in tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
        self._finishing = True
        finish = asyncio.create_task(self._finish(cause))
        try:
            self._final = await asyncio.shield(finish)
        except asyncio.CancelledError:
            # A cancel that arrives while the job is finishing never interrupts it: the
            # ledger already decided, and the execution completes with that result.
            self._final = await finish
        self._publish()
        await self._pushed()
        await workflow.wait_condition(workflow.all_handlers_finished)
        if cause == "cancelled":
            raise CancelledError("cancelled_by_consumer")
        return self._final

    async def _finish(self, cause: str) -> JobState:
        return await workflow.execute_activity(
            "finish",
            FinishInput(job_id=self._inp.job_id, verdicts=self._verdicts(), cause=cause),  # type: ignore[arg-type]
            result_type=JobState,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=10)),
            summary=f"finish ({cause})",
        )

    # ---- per cell ---------------------------------------------------------------

    def _cell_list(self) -> list[CellSnapshot]:
        return [self._cells[t.target_id] for t in self._inp.targets]

    def _verdicts(self) -> dict[str, str]:
        return dict(self._verdict_map)

    def _set_verdict(self, target_id: str, reason: str | None) -> None:
        if reason is not None:
            self._verdict_map.setdefault(target_id, reason)

    def _apply(self, cell: CellSnapshot) -> None:
        current = self._cells.get(cell.target_id)
        if current is not None and is_terminal(current.state) and not is_terminal(cell.state):
            return
        if current is None or cell.updated_at >= current.updated_at or is_terminal(cell.state):
            self._cells[cell.target_id] = cell
        self._publish()

    def _publish(self) -> None:
        """Keep the ``JobStatus`` / ``BusinessStatus`` search attributes and the UI details current."""
        if self._final is not None:
            published = (str(self._final.status), self._final.business_status or "")
        else:
            published = (frozen_job_status(self._cell_list()), "")
        if published != self._published:
            pairs = [JOB_STATUS.value_set(published[0])]
            if published[1]:
                pairs.append(BUSINESS_STATUS.value_set(published[1]))
            self._published = published
            workflow.upsert_search_attributes(pairs)
        details = render_details(self._inp, self.status())
        if details != self._details:
            self._details = details
            workflow.set_current_details(details)

    def _options(self, step: str, first: bool) -> dict[str, Any]:
        b = self._inp.budgets
        queued = b.queued_timeout_ms if (step == "search" and first) else b.stall_timeout_ms
        remaining_ms = max(1000, self._inp.deadline_at_ms - int(workflow.time() * 1000))
        return {
            "schedule_to_start_timeout": timedelta(milliseconds=queued),
            # The deadline is the workflow's timer, which cancels running attempts and
            # waits for them; an attempt's own bound lies beyond it, so a request already
            # out at the deadline is finished and reported instead of being cut off.
            "start_to_close_timeout": timedelta(milliseconds=remaining_ms) + ATTEMPT_GRACE,
            "heartbeat_timeout": timedelta(milliseconds=b.heartbeat_timeout_ms),
            "cancellation_type": workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            "retry_policy": RetryPolicy(
                initial_interval=timedelta(milliseconds=b.retry_initial_interval_ms),
                backoff_coefficient=2.0,
                maximum_interval=timedelta(milliseconds=b.retry_max_interval_ms),
                maximum_attempts=b.delivery_max_attempts if step == "deliver" else b.source_max_attempts,
                non_retryable_error_types=NON_RETRYABLE_TYPES,
            ),
        }

    async def _step(
        self, name: str, arg: Any, *, first: bool = False, task_queue: str | None = None, summary: str
    ) -> CellUpdate:
        options = self._options(name, first)
        if task_queue:
            options["task_queue"] = task_queue
        update: CellUpdate = await workflow.execute_activity(
            name, arg, result_type=CellUpdate, summary=summary, **options
        )
        self._apply(update.cell)
        self._push()
        if update.cancel_requested and workflow.patched("cancel-found-in-ledger"):
            self._cancel_from_ledger()
        return update

    def _cancel_from_ledger(self) -> None:
        """Turn a consumer cancel the ledger holds into this execution's own cancel request.

        ``POST /jobs/{id}/cancel`` records the cancel in the ledger before asking Temporal;
        when that request cannot reach the execution (it was not started yet, or the RPC
        failed), the next activity finds the record and reports it. The execution then
        asks Temporal to cancel it, so the job ends the one cancellation way (DESIGN.md
        decision 7): ``cancelled`` and the execution ``Canceled``.
        """
        if self._cancel_signalled or self._cancelling or self._finishing or self._self_cancel is not None:
            return
        self._cancel_signalled = True
        self._self_cancel = asyncio.create_task(
            workflow.execute_activity(
                "request_cancel",
                CancelRequest(reason="cancelled_by_consumer"),
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=5)),
                summary="cancel found in the ledger",
            )
        )

    # ---- callbacks --------------------------------------------------------------

    def _push(self) -> None:
        """Push the job's new events to its ``callback_url`` (no-op without one).

        Pushes run one at a time in the background; a request made while one runs is
        served by one more run after it.
        """
        if not self._inp.callback:
            return
        self._push_wanted += 1
        if self._pusher is None or self._pusher.done():
            self._pusher = asyncio.create_task(self._push_loop())

    async def _push_loop(self) -> None:
        while self._push_done < self._push_wanted:
            wanted = self._push_wanted
            # A failure leaves the events pending in the ledger for the sweeper.
            with contextlib.suppress(ActivityError):
                await workflow.execute_activity(
                    "push_events",
                    PushInput(job_id=self._inp.job_id, policy=self._inp.callback_policy),
                    **push_options(self._inp.callback_policy, summary="push events"),
                )
            self._push_done = wanted

    async def _pushed(self) -> None:
        """After ``finish``: push the terminal event and wait until every push settled."""
        self._push()
        if self._pusher is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._pusher

    async def _run_cell(self, target: TargetSpec) -> None:
        inp = self._inp
        tid = target.target_id
        interval = inp.budgets.heartbeat_interval_ms
        queue = inp.source_task_queues.get(target.account) or f"{workflow.info().task_queue}-source-{target.account}"
        step = "search"
        stages = max(1, inp.max_fallback_stages)
        try:
            stage = 0
            while True:
                # Fallback stages (scheduled jobs): a stage that binds nothing, or whose
                # candidates all turn out unavailable, hands over to a wider next stage.
                step = "search"
                update = await self._step(
                    "search",
                    SearchInput(
                        job_id=inp.job_id,
                        target=target,
                        fallback_stage=stage,
                        max_fallback_stages=stages,
                        heartbeat_interval_ms=interval,
                    ),
                    first=stage == 0,
                    task_queue=queue,
                    summary=f"search {tid}" + (f" (stage {stage + 1})" if stage else ""),
                )
                if update.cancel_requested:
                    return
                if update.retry_stage:
                    stage += 1
                    continue
                if is_terminal(update.cell.state):
                    return
                step = "fetch"
                update = await self._step(
                    "fetch",
                    FetchInput(
                        job_id=inp.job_id,
                        target=target,
                        heartbeat_interval_ms=interval,
                        fallback_stage=stage,
                        max_fallback_stages=stages,
                    ),
                    task_queue=queue,
                    summary=f"fetch {tid} work {update.cell.work_id}",
                )
                if update.cancel_requested:
                    return
                if update.retry_stage:
                    stage += 1
                    continue
                if is_terminal(update.cell.state):
                    return
                break
            step = "deliver"
            results = await asyncio.gather(
                *[
                    self._step(
                        "deliver",
                        DeliverInput(
                            job_id=inp.job_id,
                            target=target,
                            route=route,
                            heartbeat_interval_ms=interval,
                            max_attempts=inp.budgets.delivery_max_attempts,
                        ),
                        task_queue=route.task_queue,
                        summary=f"deliver {tid} work {update.cell.work_id} to {route.name}",
                    )
                    for route in target.routes
                ],
                return_exceptions=True,
            )
            for result in results:
                if isinstance(result, BaseException):
                    if not isinstance(result, ActivityError):
                        raise result  # a cancellation, or a bug (fails the workflow task)
                    self._set_verdict(tid, reason_for(result, "deliver"))
        except ActivityError as err:
            self._set_verdict(tid, reason_for(err, step))

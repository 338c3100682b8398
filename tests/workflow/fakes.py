"""Fake activities registered under the real names, for fast ``JobWorkflow`` tests.

As in Temporal's samples: the real workflow runs on the session's real Temporal dev
server with activities that follow a per-test script instead of doing I/O. Each step
(``search``, ``fetch``, ``deliver``) is scripted per target (and route) as a list of
:class:`Act` s consumed one per attempt; every call is recorded.

``finish`` decides like the ledger would, with the real decider
(:func:`curaflow.domain.verdicts.cell_verdict`) over the cells the fakes last reported,
and returns the resulting :class:`~curaflow.domain.messages.JobState`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from temporalio import activity
from temporalio.exceptions import ApplicationError

from curaflow.domain.cells import CellState, is_terminal
from curaflow.domain.messages import (
    AcquireInput,
    Budgets,
    CancelRequest,
    CellUpdate,
    DeliverInput,
    FetchInput,
    FinishInput,
    JobInput,
    JobState,
    PushInput,
    PushReport,
    RouteRef,
    SearchInput,
    TargetSpec,
)
from curaflow.domain.models import CellSnapshot, DeliveryReport, RouteDelivery, Work
from curaflow.domain.outcome import business_status, is_alertable, job_deliveries
from curaflow.domain.projection import job_stage, job_status
from curaflow.domain.verdicts import cell_verdict


@dataclass
class Act:
    """What one attempt of a step does.

    Attributes:
        kind: ``ok`` (return the next state), ``fail`` (raise ``ApplicationError`` of
            ``error_type``), ``hang`` (heartbeat until cancelled), ``silent`` (sleep
            ``seconds`` without heartbeating), ``slow`` (heartbeat for ``seconds`` and
            return ``ok`` — even when cancelled meanwhile, like a send already out),
            ``cancel_found`` (the ledger holds a cancel: did no work).
    """

    kind: Literal["ok", "fail", "hang", "silent", "slow", "cancel_found"] = "ok"
    error_type: str = "network_error"
    non_retryable: bool = False
    seconds: float = 0.0


@dataclass
class Call:
    step: str
    target_id: str
    route: str | None
    attempt: int
    at: float


@dataclass
class Fakes:
    """The script and the record of one test's fake activities."""

    script: dict[str, list[Act]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    finishes: list[FinishInput] = field(default_factory=list)
    cancels: list[float] = field(default_factory=list)
    cells: dict[str, CellSnapshot] = field(default_factory=dict)
    deliveries: dict[tuple[str, str], RouteDelivery] = field(default_factory=dict)
    finish_error: str | None = None
    #: One :class:`Act` per ``request_cancel`` attempt (``silent``: a worker that died
    #: with the attempt); then ``ok``.
    cancel_acts: list[Act] = field(default_factory=list)

    def on(self, step: str, target_id: str, *acts: Act, route: str | None = None) -> Fakes:
        """Script ``step`` of ``target_id`` (and ``route`` for ``deliver``)."""
        self.script[self._key(step, target_id, route)] = list(acts)
        return self

    def steps(self, target_id: str | None = None) -> list[str]:
        return [c.step for c in self.calls if target_id is None or c.target_id == target_id]

    @staticmethod
    def _key(step: str, target_id: str, route: str | None) -> str:
        return f"{step}:{target_id}:{route or ''}"

    def _cell(self, target_id: str) -> CellSnapshot:
        return self.cells.setdefault(target_id, CellSnapshot(target_id=target_id))

    async def _act(self, step: str, target_id: str, route: str | None) -> Act:
        info = activity.info()
        self._cell(target_id)
        self.calls.append(Call(step, target_id, route, info.attempt, time.monotonic()))
        acts = self.script.get(self._key(step, target_id, route), [])
        act = acts.pop(0) if len(acts) > 1 else (acts[0] if acts else Act())
        if act.kind == "fail":
            raise ApplicationError(f"scripted {act.error_type}", type=act.error_type, non_retryable=act.non_retryable)
        if act.kind == "hang":
            while True:
                activity.heartbeat()
                await asyncio.sleep(0.05)
        if act.kind == "silent":  # a worker that died: its attempt times out, its answer never counts
            await asyncio.sleep(act.seconds)
            raise ApplicationError("a dead worker's attempt", type="internal_error")
        if act.kind == "slow":
            end = time.monotonic() + act.seconds
            while time.monotonic() < end:
                activity.heartbeat()
                with contextlib.suppress(asyncio.CancelledError):  # the request is out: finish it
                    await asyncio.sleep(0.05)
        return act

    # ---- the activities, under the real names ------------------------------------

    def activities(self, client_of: Callable[[], Any]) -> list[Callable[..., Any]]:
        fakes = self

        @activity.defn(name="search")
        async def search(inp: SearchInput) -> CellUpdate:
            tid = inp.target.target_id
            act = await fakes._act("search", tid, None)
            if act.kind == "cancel_found":
                return CellUpdate(cell=fakes._cell(tid), cancel_requested=True)
            work = Work(work_id=f"w-{tid}", title="scripted")
            fakes.cells[tid] = fakes._cell(tid).model_copy(
                update={"state": CellState.SELECTED, "stage": "fetching", "work_id": work.work_id, "work": work}
            )
            return CellUpdate(cell=fakes.cells[tid])

        @activity.defn(name="fetch")
        async def fetch(inp: FetchInput) -> CellUpdate:
            tid = inp.target.target_id
            act = await fakes._act("fetch", tid, None)
            if act.kind == "cancel_found":
                return CellUpdate(cell=fakes._cell(tid), cancel_requested=True)
            fakes.cells[tid] = fakes._cell(tid).model_copy(
                update={"state": CellState.ARTIFACT_READY, "stage": "delivering"}
            )
            return CellUpdate(cell=fakes.cells[tid])

        @activity.defn(name="acquire")
        async def acquire(inp: AcquireInput) -> CellUpdate:
            """``search`` then ``fetch`` of the cell, each following its own script (as the real one)."""
            found = await search(SearchInput.model_validate(inp.model_dump()))
            if found.cancel_requested or is_terminal(found.cell.state) or found.cell.work_id is None:
                return found
            return await fetch(FetchInput(job_id=inp.job_id, target=inp.target))

        @activity.defn(name="deliver")
        async def deliver(inp: DeliverInput) -> CellUpdate:
            tid, route = inp.target.target_id, inp.route.name
            act = await fakes._act("deliver", tid, route)
            cell = fakes._cell(tid)
            if act.kind == "cancel_found":
                return CellUpdate(cell=cell, cancel_requested=True)
            fakes.deliveries[(tid, route)] = RouteDelivery(
                route=route, status="delivered", idempotency_key=f"k-{tid}-{route}", work_id=cell.work_id
            )
            routes = {r.name for r in inp.target.routes}
            done = {r for (t, r), d in fakes.deliveries.items() if t == tid and d.status == "delivered"}
            state = CellState.SUBMITTED if routes <= done else CellState.DELIVERY_PENDING
            fakes.cells[tid] = cell.model_copy(update={"state": state})
            report = DeliveryReport(target_id=tid, route=route, work_id=cell.work_id or "", status="delivered")
            return CellUpdate(cell=fakes.cells[tid], delivery=report)

        @activity.defn(name="finish")
        async def finish(inp: FinishInput) -> JobState:
            fakes.finishes.append(inp)
            if fakes.finish_error:
                raise ApplicationError(fakes.finish_error, type=fakes.finish_error, non_retryable=True)
            for tid in inp.failures:
                fakes._cell(tid)
            cells = []
            for tid, cell in sorted(fakes.cells.items()):
                deliveries = [d for (t, _), d in fakes.deliveries.items() if t == tid]
                cell = cell.model_copy(update={"deliveries": deliveries})
                if not is_terminal(cell.state):
                    reason = cell_verdict(
                        state=cell.state, stage=cell.stage, cause=inp.cause, failure=inp.failures.get(tid)
                    )
                    cell = cell.model_copy(update={"state": CellState.FAILED, "reason": str(reason)})
                cells.append(cell)
            verdict = business_status(cells)
            status = job_status(cells)
            return JobState(
                job_id=activity.info().workflow_id or "",
                status=status,
                stage=job_stage(cells, status),
                business_status=verdict.value,
                alertable=is_alertable(verdict),
                cells=cells,
                deliveries=job_deliveries(cells),
            )

        @activity.defn(name="request_cancel")
        async def request_cancel(inp: CancelRequest) -> None:
            fakes.cancels.append(time.monotonic())
            act = fakes.cancel_acts.pop(0) if fakes.cancel_acts else Act()
            if act.kind == "silent":  # the worker died with this attempt: it never answers
                await asyncio.sleep(act.seconds)
                raise ApplicationError("a dead worker's attempt", type="internal_error")
            job_id = activity.info().workflow_id
            assert job_id is not None
            await client_of().get_workflow_handle(job_id).cancel()

        @activity.defn(name="push_events")
        async def push_events(inp: PushInput) -> PushReport:
            return PushReport(job_id=inp.job_id)

        return [acquire, search, fetch, deliver, finish, request_cancel, push_events]


def job_input(
    job_id: str,
    targets: dict[str, list[str]],
    *,
    deadline_ms: int = 60_000,
    source_queue: str,
    budgets: Budgets | None = None,
    stages: int = 1,
) -> JobInput:
    """A ``JobInput`` with one target per ``targets`` key (its routes the values)."""
    now = int(time.time() * 1000)
    return JobInput(
        job_id=job_id,
        plan_id="plan",
        created_at_ms=now,
        deadline_at_ms=now + deadline_ms,
        targets=[
            TargetSpec(target_id=tid, routes=[RouteRef(name=r, kind="webhook") for r in routes])
            for tid, routes in targets.items()
        ],
        budgets=budgets
        or Budgets(
            heartbeat_interval_ms=500,
            queued_timeout_ms=2_000,
            stall_timeout_ms=2_000,
            retry_initial_interval_ms=100,
            retry_max_interval_ms=200,
            delivery_max_attempts=3,
            source_max_attempts=3,
        ),
        source_task_queues={"default": source_queue},
        max_fallback_stages=stages,
    )

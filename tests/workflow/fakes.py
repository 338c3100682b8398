"""Fake activities registered under the real names, for fast ``JobWorkflow`` tests.

As in Temporal's samples: the real workflow runs on the session's real Temporal dev
server with activities that follow a per-test script instead of doing I/O. Each step
(``search``, ``fetch``, ``deliver``) is scripted per target (and route) as a list of
:class:`Act` s consumed one per attempt; every call is recorded.

``acquire`` runs ``search`` then ``fetch`` and, when the fetch is still running after
:data:`PROGRESS_DELAY_S`, signals ``cell_progress`` to its execution with the bound cell,
as the real one does after its own delay. ``admit`` (the local
activity of a Task start and of the ``admission`` update) answers like the ledger's
admission would (:meth:`Fakes.admit_as`): a key's first Task creates the job, the same
Task again replays it, another Task under the key is refused ``idempotency_conflict``,
an invalid Task ``invalid_params`` — each refusal built by the real
:func:`activities.admit.refusal`. ``push_events`` records each attempt and follows
:attr:`Fakes.push_acts` (a receiver that answers, is down or hangs).

``finish`` decides like the ledger would, with the real decider
(:func:`curaflow.domain.verdicts.cell_verdict`) over the cells the fakes last reported
(or, for executions of the frozen v1 orchestration, the verdicts it sends), and returns
the resulting :class:`~curaflow.domain.messages.JobState` as the real one reads it from the
ledger (:func:`curaflow.domain.state.job_state`). ``search`` binds the work
:attr:`Fakes.works` scripts for the target; ``fetch`` stores one artifact file per page.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import asyncpg
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.admit import refusal
from activities.finish import paused_steps_of
from curaflow.domain.cells import CellState, is_terminal
from curaflow.domain.messages import (
    AcquireInput,
    Admitted,
    Budgets,
    CancelAnswer,
    CancelRequest,
    CellUpdate,
    DeliverInput,
    FetchInput,
    FinishedElsewhere,
    FinishInput,
    JobInput,
    JobState,
    PausedStep,
    PushInput,
    PushReport,
    RouteRef,
    SearchInput,
    SubmitInput,
    TargetSpec,
)
from curaflow.domain.models import (
    Artifact,
    ArtifactFile,
    CellSnapshot,
    DeliveryReport,
    JobRecord,
    RouteDelivery,
    Work,
)
from curaflow.domain.state import job_state
from curaflow.domain.verdicts import cell_verdict
from curaflow.domain.verdicts.failures import attempt_detail
from curaflow.protocol.errors import ProtocolError
from curaflow.protocol.task import validate_task
from curaflow.temporal.refusals import ledger_outage

#: Seconds a fetch runs before the fake ``acquire`` signals ``cell_progress`` (the real
#: one waits ``activities.acquire.PROGRESS_SIGNAL_DELAY_S``; shorter here, for speed).
PROGRESS_DELAY_S = 0.2


@dataclass
class Act:
    """What one attempt of a step does.

    Attributes:
        kind: ``ok`` (return the next state), ``fail`` (raise ``ApplicationError`` of
            ``error_type``), ``hang`` (heartbeat until cancelled), ``silent`` (sleep
            ``seconds`` without heartbeating), ``slow`` (heartbeat for ``seconds`` and
            return ``ok`` — even when cancelled meanwhile, like a send already out),
            ``cancel_found`` (the ledger holds a cancel: did no work),
            ``deadline_found`` (the ledger says the deadline passed: did no work),
            ``next_pass`` (``search`` only: nothing bindable in this pass, another
            fallback pass should run), ``no_candidate`` (``search`` only: the cell ends
            ``no_candidate``), ``ended_in_another_run`` (``search`` only: the job had
            ended ``no_candidate`` before the step opened, and another run of its id
            holds it), ``held`` (heartbeat until the test calls
            :meth:`Fakes.release` for the step, then ``ok``; a cancel stops it as ``hang``),
            ``held_fail`` (as ``held``, then ``fail``).

    A ``fail`` that is retryable carries the attempt's number in its details, as the
    real worker's failures do (:func:`curaflow.domain.verdicts.failures.attempt_detail`).
    """

    kind: Literal[
        "ok",
        "fail",
        "hang",
        "held",
        "held_fail",
        "silent",
        "slow",
        "cancel_found",
        "deadline_found",
        "next_pass",
        "no_candidate",
        "ended_in_another_run",
    ] = "ok"
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
    job_id: str = ""


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
    #: Set: ``paused_steps`` fails with it as the real one does when Temporal does not answer
    #: its describe (an ``RPCError``, which the SDK reports as an ``ApplicationError`` of
    #: that type).
    paused_steps_error: str | None = None
    #: One :class:`Act` per ``request_cancel`` attempt (``silent``: a worker that died
    #: with the attempt); then ``ok``.
    cancel_acts: list[Act] = field(default_factory=list)
    #: The ``AcquireInput`` / ``SearchInput`` of every search attempt (its fallback pass).
    searches: list[SearchInput] = field(default_factory=list)
    #: Every ``push_events`` attempt.
    pushes: list[PushInput] = field(default_factory=list)
    #: One :class:`Act` per ``push_events`` attempt, the last repeated (none: ``ok``):
    #: ``fail`` is a receiver that is down (a refused connection, a 503: the attempt fails
    #: ``callback_failed``, retried), after ``seconds`` of heartbeats when set (a receiver
    #: that hangs until the push's timeout cuts it); ``hang`` heartbeats until cancelled.
    push_acts: list[Act] = field(default_factory=list)
    #: The ``push_events`` attempts a cancel reached (the workflow handed the rest over).
    push_cancels: int = 0
    #: Every Task ``admit`` was asked to admit, in order.
    admits: list[dict[str, Any]] = field(default_factory=list)
    #: Held while set and not yet released: ``admit`` waits for it (a slow ledger).
    admit_hold: asyncio.Event | None = None
    #: While set, every ``admit`` attempt fails as the real one does when the ledger is away
    #: (:func:`curaflow.temporal.refusals.ledger_outage` of asyncpg's error).
    admit_outage: bool = False
    #: The job a Task admits (:meth:`admit_as`); None: ``admit`` refuses with ``unknown_target``.
    admit_job: JobInput | None = None
    #: Tasks admitted so far, by idempotency key (the ledger's idempotency).
    admitted: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The final state ``admit`` answers for a replay of a job that already ended.
    admit_final: JobState | None = None
    #: With ``admit_final``: the asking run is the job's own nevertheless (``Admitted.own_run``).
    admit_own_run: bool = False
    #: The jobs started or admitted, by job id: ``finish`` decides every target's cell.
    jobs: dict[str, JobInput] = field(default_factory=dict)
    #: What ``request_cancel`` answers (the real one: ``CancelAnswer`` when the job had
    #: ended and another run of its id holds it; else None).
    cancel_answer: CancelAnswer | None = None
    #: What ``ended_elsewhere`` answers (the real one: the job ended and another run of its
    #: id holds it).
    ended_elsewhere: bool = False
    #: Whether ``finish`` answers ``FinishedElsewhere`` (the real one: on a repeat, the job
    #: ended and another run of its id holds it).
    finish_elsewhere: bool = False
    #: ``held`` steps (and a held ``request_cancel``) wait for these (:meth:`release`).
    gates: dict[str, asyncio.Event] = field(default_factory=dict)
    #: The work ``search`` binds for a target (target id → work); absent: ``w-<target>``,
    #: titled ``scripted``, of one page. ``fetch`` stores one artifact file per page.
    works: dict[str, Work] = field(default_factory=dict)

    def release(self, step: str, target_id: str = "t", route: str | None = None) -> None:
        """Let a ``held`` attempt of ``step`` (``request_cancel``: no target) carry on."""
        self._gate(self._key(step, target_id, route)).set()

    def _gate(self, key: str) -> asyncio.Event:
        return self.gates.setdefault(key, asyncio.Event())

    def admit_as(self, job: JobInput, *, final: JobState | None = None, own_run: bool = False) -> Fakes:
        """A Task's first admission creates ``job`` (its job id must be the Task's);
        ``final``: the job already ended (a replay answers that state); ``own_run``: the
        asking run is the job's own nevertheless (a reset of its open run, a late admission)."""
        self.admit_job, self.admit_final, self.admit_own_run = job, final, own_run
        return self

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
        self.calls.append(Call(step, target_id, route, info.attempt, time.monotonic(), info.workflow_id or ""))
        acts = self.script.get(self._key(step, target_id, route), [])
        act = acts.pop(0) if len(acts) > 1 else (acts[0] if acts else Act())
        if act.kind == "hang":
            while True:
                activity.heartbeat()
                await asyncio.sleep(0.05)
        if act.kind in ("held", "held_fail"):
            gate = self._gate(self._key(step, target_id, route))
            while not gate.is_set():
                activity.heartbeat()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(gate.wait(), 0.05)
        if act.kind in ("fail", "held_fail"):
            details = () if act.non_retryable else (attempt_detail(info.attempt),)
            raise ApplicationError(
                f"scripted {act.error_type}", *details, type=act.error_type, non_retryable=act.non_retryable
            )
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
            fakes.searches.append(inp)
            act = await fakes._act("search", tid, None)
            if act.kind == "cancel_found":
                return CellUpdate(cell=fakes._cell(tid), cancel_requested=True)
            if act.kind == "deadline_found":
                return CellUpdate(cell=fakes._cell(tid), deadline_passed=True)
            if act.kind == "next_pass":
                return CellUpdate(cell=fakes._cell(tid), retry_stage=True)
            if act.kind in ("no_candidate", "ended_in_another_run"):
                fakes.cells[tid] = fakes._cell(tid).model_copy(
                    update={"state": CellState.NO_CANDIDATE, "stage": "done", "reason": "no_candidate"}
                )
                return CellUpdate(cell=fakes.cells[tid], ended_in_another_run=act.kind == "ended_in_another_run")
            work = fakes.works.get(tid) or Work(work_id=f"w-{tid}", title="scripted")
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
            if act.kind == "deadline_found":
                return CellUpdate(cell=fakes._cell(tid), deadline_passed=True)
            cell = fakes._cell(tid)
            artifact = Artifact(
                work_id=cell.work_id or "",
                files=[
                    ArtifactFile(
                        page=page.index,
                        path=f"artifacts/{cell.work_id}/{cell.work_id}_p{page.index}.png",
                        mime="image/png",
                        bytes=4_000_000,
                        sha256=f"{page.index:064x}",
                        width=page.width,
                        height=page.height,
                    )
                    for page in (cell.work.pages if cell.work is not None else [])
                ],
            )
            fakes.cells[tid] = cell.model_copy(
                update={"state": CellState.ARTIFACT_READY, "stage": "delivering", "artifact": artifact}
            )
            return CellUpdate(cell=fakes.cells[tid])

        @activity.defn(name="acquire")
        async def acquire(inp: AcquireInput) -> CellUpdate:
            """``search`` then ``fetch`` of the cell, each following its own script, with the
            ``cell_progress`` signal sent only when the fetch is still running after
            :data:`PROGRESS_DELAY_S` (as the real one, after its own delay)."""
            found = await search(SearchInput.model_validate(inp.model_dump()))
            if (
                found.cancel_requested
                or found.deadline_passed
                or found.retry_stage
                or is_terminal(found.cell.state)
                or found.cell.work_id is None
            ):
                return found
            info = activity.info()
            handle = client_of().get_workflow_handle(info.workflow_id or "", run_id=info.workflow_run_id)

            async def progress() -> None:
                await asyncio.sleep(PROGRESS_DELAY_S)
                await handle.signal("cell_progress", found.cell)

            signal = asyncio.create_task(progress())
            try:
                return await fetch(FetchInput(job_id=inp.job_id, target=inp.target))
            finally:
                signal.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await signal

        @activity.defn(name="deliver")
        async def deliver(inp: DeliverInput) -> CellUpdate:
            tid, route = inp.target.target_id, inp.route.name
            act = await fakes._act("deliver", tid, route)
            cell = fakes._cell(tid)
            if act.kind == "cancel_found":
                return CellUpdate(cell=cell, cancel_requested=True)
            if act.kind == "deadline_found":
                return CellUpdate(cell=cell, deadline_passed=True)
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
        async def finish(inp: FinishInput) -> JobState | FinishedElsewhere:
            fakes.finishes.append(inp)
            if fakes.finish_error:
                raise ApplicationError(fakes.finish_error, type=fakes.finish_error, non_retryable=True)
            for tid in inp.failures:
                fakes._cell(tid)
            job = fakes.jobs.get(inp.job_id)
            for target in job.targets if job is not None else []:
                fakes._cell(target.target_id)
            cells = []
            for tid, cell in sorted(fakes.cells.items()):
                deliveries = [d for (t, _), d in fakes.deliveries.items() if t == tid]
                cell = cell.model_copy(update={"deliveries": deliveries})
                if not is_terminal(cell.state):
                    reason = inp.verdicts.get(tid) or cell_verdict(  # v1 executions send verdicts
                        state=cell.state, stage=cell.stage, cause=inp.cause, failure=inp.failures.get(tid)
                    )
                    cell = cell.model_copy(update={"state": CellState.FAILED, "reason": str(reason)})
                cells.append(cell)
            now = int(time.time() * 1000)
            # the ledger's reader (curaflow.domain.state.job_state): what a final state carries
            record = JobRecord(
                job_id=activity.info().workflow_id or "",
                plan_id="plan",
                created_at=now,
                updated_at=now,
                completed_at=now,
                cells=cells,
            )
            if fakes.finish_elsewhere:
                return FinishedElsewhere(**dict(job_state(record)), ended_in_another_run=True)
            return job_state(record)

        @activity.defn(name="request_cancel")
        async def request_cancel(inp: CancelRequest) -> CancelAnswer | None:
            fakes.cancels.append(time.monotonic())
            act = fakes.cancel_acts.pop(0) if fakes.cancel_acts else Act()
            if act.kind == "held":  # a slow ledger: the cancel is being recorded
                await fakes._gate(fakes._key("request_cancel", "t", None)).wait()
            if act.kind == "silent":  # the worker died with this attempt: it never answers
                await asyncio.sleep(act.seconds)
                raise ApplicationError("a dead worker's attempt", type="internal_error")
            job_id = activity.info().workflow_id
            assert job_id is not None
            await client_of().get_workflow_handle(job_id).cancel()
            return fakes.cancel_answer

        @activity.defn(name="ended_elsewhere")
        async def ended_elsewhere() -> bool:
            return fakes.ended_elsewhere

        @activity.defn(name="paused_steps")
        async def paused_steps() -> list[PausedStep]:
            if fakes.paused_steps_error:
                raise ApplicationError(fakes.paused_steps_error, type="RPCError")
            info = activity.info()
            assert info.workflow_id is not None
            return await paused_steps_of(client_of(), info.workflow_id, info.workflow_run_id)

        @activity.defn(name="push_events")
        async def push_events(inp: PushInput) -> PushReport:
            fakes.pushes.append(inp)
            acts = fakes.push_acts
            act = acts.pop(0) if len(acts) > 1 else (acts[0] if acts else Act())
            try:
                end = time.monotonic() + (act.seconds if act.kind == "fail" else float("inf"))
                while act.kind in ("fail", "hang") and time.monotonic() < end:
                    activity.heartbeat()
                    await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                fakes.push_cancels += 1
                raise
            if act.kind == "fail":
                raise ApplicationError(f"scripted {act.error_type}", type=act.error_type)
            return PushReport(job_id=inp.job_id)

        @activity.defn(name="admit")
        async def admit(inp: SubmitInput) -> Admitted:
            fakes.admits.append(inp.task)
            if fakes.admit_hold is not None:
                await fakes.admit_hold.wait()
            if fakes.admit_outage:
                raise ledger_outage(asyncpg.exceptions.ConnectionFailureError("the ledger is away"))
            return fakes._admit(inp.task)

        return [
            acquire,
            search,
            fetch,
            deliver,
            finish,
            request_cancel,
            paused_steps,
            ended_elsewhere,
            push_events,
            admit,
        ]

    def _admit(self, task: dict[str, Any]) -> Admitted:
        """What the ledger's admission answers ``task`` (see the module doc)."""
        try:
            validated = validate_task(task)
        except ProtocolError as err:
            raise refusal(err) from None
        if self.admit_job is None:
            raise refusal(ProtocolError("unknown_target", 400, "no such target", {"field": "params.target_id"}))
        self.jobs[self.admit_job.job_id] = self.admit_job
        key = validated.idempotency_key
        first = self.admitted.setdefault(key, task)
        if first != task:
            raise refusal(
                ProtocolError(
                    "idempotency_conflict",
                    409,
                    "the idempotency key was first used with different params",
                    {"reason": "idempotency_conflict", "job_id": self.admit_job.job_id},
                )
            )
        return Admitted(
            job_input=self.admit_job,
            created=first is task,
            final=self.admit_final,
            own_run=self.admit_own_run and self.admit_final is not None,
        )


def job_input(
    job_id: str,
    targets: dict[str, list[str]],
    *,
    deadline_ms: int = 60_000,
    source_queue: str,
    budgets: Budgets | None = None,
    stages: int = 1,
    **extra: Any,
) -> JobInput:
    """A ``JobInput`` with one target per ``targets`` key (its routes the values);
    ``extra``: further ``JobInput`` fields (``callback``, ``trigger`` …)."""
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
        **extra,
    )

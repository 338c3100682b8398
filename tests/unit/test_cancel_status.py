"""A job's terminal status under a cancel, decided once (:func:`curaflow.domain.projection.job_status`).

A property test over cancel timings at every step of multi-target jobs: each cell is
somewhere when the cancel is recorded — not started, searching, fetching, delivering
with each route delivered / answering within the grace / cut / not sent, or already
ended (delivered, nothing found, a system failure) — and ends as the ledger's rules end
it (:func:`curaflow.domain.verdicts.cell_verdict` with the cancel's cause). Whatever the
timing, the job's answer is one: ``cancelled`` exactly when the cancel stopped a cell and
no system failure with nothing delivered outranks it; never ``succeeded`` with a cell
stopped by the cancel (the reported defect: a two-target job cancelled while one cell's
send was out and the other had delivered answered ``succeeded``, its events ended with
``job.succeeded`` and ``cancelled_by_consumer`` appeared nowhere).
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import example, given, settings
from hypothesis import strategies as st

from curaflow.domain.cells import CellState
from curaflow.domain.models import CellSnapshot, JobRecord, RouteDelivery
from curaflow.domain.outcome import BusinessStatus, business_status, is_alertable
from curaflow.domain.projection import JobStatus, job_stage, job_status
from curaflow.domain.reasons import EXPIRY_REASONS
from curaflow.domain.verdicts import FailureKind, FinishCause, StepFailure, cell_verdict, failure_reason
from curaflow.protocol.models import TERMINAL_EVENT_TYPES
from curaflow.protocol.projection import project_job

#: Where a route's delivery is when the cancel reaches the cell's send.
ROUTE_MOMENTS = ("delivered", "answers_in_grace", "cut", "not_sent")
#: Where a cell is when the cancel is recorded.
OPEN_STEPS = ("queued", "searching", "fetching", "delivering")
ENDED = ("submitted", "no_candidate", "duplicate", "failed_route", "failed_source", "stalled")


@dataclass(frozen=True)
class Moment:
    """One cell at the moment the cancel is recorded."""

    step: str
    routes: tuple[str, ...] = ()


def ended_cell(target: str, step: str) -> CellSnapshot:
    """A cell that ended before the cancel."""
    if step == "submitted":
        return CellSnapshot(
            target_id=target,
            state=CellState.SUBMITTED,
            stage="done",
            work_id="w-" + target,
            deliveries=[RouteDelivery(route="r1", status="delivered", idempotency_key="k", work_id="w-" + target)],
        )
    if step in ("no_candidate", "duplicate"):
        return CellSnapshot(target_id=target, state=CellState(step), stage=step, reason=step)
    reason = {"failed_route": "delivery_rejected", "failed_source": "auth_failed", "stalled": "stalled_no_heartbeat"}
    return CellSnapshot(target_id=target, state=CellState.FAILED, stage="failed", reason=reason[step])


def after_cancel(target: str, moment: Moment) -> CellSnapshot:
    """The cell once the cancel went through: a send answering within the grace is recorded
    delivered; a cell whose every route has the work is submitted; any other open cell
    gets its reason from the one decider, with the facts the workflow passes."""
    if moment.step in ENDED:
        return ended_cell(target, moment.step)
    state = {
        "queued": CellState.PENDING,
        "searching": CellState.PENDING,
        "fetching": CellState.SELECTED,
        "delivering": CellState.DELIVERY_PENDING,
    }[moment.step]
    deliveries = []
    for n, where in enumerate(moment.routes):
        status = {"delivered": "delivered", "answers_in_grace": "delivered", "cut": "unknown", "not_sent": "released"}
        deliveries.append(
            RouteDelivery(route=f"r{n}", status=status[where], idempotency_key=f"k{n}", work_id="w-" + target)
        )
    if deliveries and all(d.status == "delivered" for d in deliveries):
        return CellSnapshot(
            target_id=target, state=CellState.SUBMITTED, stage="done", work_id="w-" + target, deliveries=deliveries
        )
    step = "deliver" if moment.step == "delivering" else "acquire"
    failure = None if moment.step == "queued" else StepFailure(step=step, kind=FailureKind.CANCELLED)
    assert failure is None or failure_reason(failure) is None  # a cancelled step gives no reason of its own
    reason = cell_verdict(
        state=state,
        stage="queued" if moment.step == "queued" else moment.step,
        cause=FinishCause.CANCELLED,
        failure=failure,
        cancel_requested=True,
    )
    return CellSnapshot(
        target_id=target,
        state=CellState.FAILED,
        stage="failed",
        reason=str(reason),
        work_id="w-" + target if moment.step in ("fetching", "delivering") else None,
        deliveries=deliveries,
    )


def finished(cells: list[CellSnapshot]) -> JobRecord:
    """The job as the ledger holds it once its finish committed."""
    return JobRecord(
        job_id="demo@manual-k",
        plan_id="demo",
        created_at=1,
        updated_at=2,
        completed_at=3,
        business_status=business_status(cells).value,
        cells=cells,
    )


MOMENTS = st.one_of(
    st.sampled_from([Moment(step) for step in (*ENDED, "queued", "searching", "fetching")]),
    st.builds(
        lambda routes: Moment("delivering", tuple(routes)),
        st.lists(st.sampled_from(ROUTE_MOMENTS), min_size=1, max_size=3),
    ),
)

REPORTED = [Moment("submitted"), Moment("delivering", ("cut",))]  # one cell delivered, the other's send out


@settings(max_examples=500, deadline=None, derandomize=True, database=None)
@given(moments=st.lists(MOMENTS, min_size=1, max_size=4))
@example(moments=REPORTED)
@example(moments=[Moment("submitted"), Moment("delivering", ("answers_in_grace",))])
@example(moments=[Moment("submitted"), Moment("queued")])
@example(moments=[Moment("submitted"), Moment("failed_route"), Moment("searching")])
@example(moments=[Moment("stalled"), Moment("delivering", ("delivered", "cut"))])
def test_a_cancel_at_any_step_of_any_cell_gives_one_answer(moments: list[Moment]) -> None:
    cells = [after_cancel(f"t{n}", moment) for n, moment in enumerate(moments)]
    status = job_status(cells)
    verdict = business_status(cells)
    stopped = [c for c in cells if c.reason in ("cancelled_by_consumer", "execution_terminated")]
    # the cells the cancel stopped: every cell open at the cancel but one whose sends all landed
    open_undelivered = {
        c.target_id
        for c, m in zip(cells, moments, strict=True)
        if m.step not in ENDED and c.state != CellState.SUBMITTED
    }
    assert {c.target_id for c in stopped} == open_undelivered
    delivered_all = all(c.state == CellState.SUBMITTED for c in cells)

    # a cancel that stopped a cell is never answered as a success
    assert not (stopped and status == JobStatus.SUCCEEDED), (moments, status)
    # cancelled exactly when the cancel stopped something and no real failure with
    # nothing delivered outranks it
    assert (status == JobStatus.CANCELLED) == (bool(stopped) and verdict != BusinessStatus.FAILED), (moments, verdict)
    # a cancel that stopped nothing (every open cell's send landed in time) changes nothing
    if delivered_all:
        assert (status, verdict) == (JobStatus.SUCCEEDED, BusinessStatus.SUCCESS)
    if status == JobStatus.FAILED and stopped:
        assert verdict == BusinessStatus.FAILED and is_alertable(verdict)  # someone must fix the failure
    if status == JobStatus.EXPIRED:
        assert all(c.reason in EXPIRY_REASONS for c in cells if c.reason == "stalled_no_heartbeat")

    # every reader says the same: the Job, its error, its terminal event, the stage
    record = finished(cells)
    job = project_job(record)
    assert job["status"] == status.value
    assert TERMINAL_EVENT_TYPES[job["status"]] == f"job.{status.value}"
    assert job_stage(cells) == ("done" if status == JobStatus.SUCCEEDED else status.value)
    if status == JobStatus.CANCELLED:
        assert "result" not in job
        assert (job["error"]["code"], job["error"]["retryable"]) == ("cancelled_by_consumer", False)
        # what landed is reported, in the error's deliveries
        landed = {(c.target_id, d.route) for c in cells for d in c.deliveries if d.status == "delivered"}
        reported = {
            (d["target_id"], d["route"]) for d in job["error"]["detail"]["deliveries"] if d["status"] == "delivered"
        }
        assert reported == landed
        if landed:
            assert verdict == BusinessStatus.PARTIAL_SUCCESS
    # the order the cells are read in does not matter
    assert job_status(list(reversed(cells))) == status


def test_the_reported_case_is_cancelled_with_what_landed() -> None:
    cells = [after_cancel(f"t{n}", moment) for n, moment in enumerate(REPORTED)]
    record = finished(cells)
    job = project_job(record)
    assert job["status"] == "cancelled"
    assert job["error"]["code"] == "cancelled_by_consumer"
    assert job["error"]["detail"]["business_status"] == "partial_success"
    assert [(d["target_id"], d["status"]) for d in job["error"]["detail"]["deliveries"]] == [
        ("t0", "delivered"),
        ("t1", "unknown"),
    ]

"""Finishing a job: converge open cells, write the outcome record and the terminal event.

The one place a job becomes terminal in the ledger (DESIGN.md decision 13). Two callers
only: the workflow's ``finish`` activity (causes ``completed`` / ``cancelled`` /
``deadline``) and the reconciler (:mod:`curaflow.ledger.reconciler`, for jobs no
workflow can finish). Each open cell's reason is decided by
:func:`curaflow.domain.verdicts.cell_verdict` from the caller's facts and the ledger's;
this module applies the answer and never rewrites it.

Everything happens in one transaction under the job row lock; the outcome record and
the terminal event are written exactly once (guarded by ``jobs.completed_at``), so a
repeated finish writes nothing and returns the same job.

**Owner of "does the job's end wait for a send still out"** (2026-12-05): a workflow's
finish (``by_workflow``; cause ``completed`` or ``cancelled``, a consumer cancel recorded
or not: :func:`curaflow.domain.verdicts.waits_for_sends`) of a job one of whose intents is
``sending`` from an attempt whose send lease is live (``delivery_intents.send_until``,
kept by that attempt's ledger beats) writes nothing and raises :class:`SendStillOut`: the
workflow stopped waiting for that attempt (an operator timed it out, or completed or
failed it by hand) while its send is out, which nothing cuts, and its answer is the job's
truth — ended now, the job said ``delivery_unknown`` and the late 200 then made the intent
``delivered``. The caller finishes again once the answer is recorded or the lease lapses
(the ``finish`` activity retries, :mod:`activities.finish`); the deadline bounds the wait.

**Whose finish it is** (2026-12-07; the rule is :func:`activities.caller.foreign_run_input`'s):
the workflow's finish names the ``JobInput`` its run holds (``run_input``); the job's read
compares it with the job's input stored at admission (``jobs.workflow_input``, ``jsonb``
equality, in the same statement: none added) and, when they differ at a glance, writes
nothing and raises :class:`RunInputDiffers` with the stored input, for the caller to judge
(a stored input that predates a field differs at a glance and is the run's once its
defaults are filled: the caller finishes again without ``run_input``, only such jobs pay
the second read).

**Owner of "a value the ledger refuses never keeps a job from ending"** (2026-12-06): a
finish whose values the ledger refuses (:func:`curaflow.ledger.db.refused_value`: SQLSTATE
class 22 or 54, or an ``OverflowError`` / ``ValueError`` — ``UnicodeEncodeError`` among
them — raised while building or encoding them) is rolled back and done once more,
degraded: each cell it ends says :data:`NOT_STORABLE_MESSAGE`, as does the outcome's
``user_message``; no hold is named (``held_by`` null: no derived date); the states,
reasons, counts and deliveries are the job's as ever. It logs ``finish.degraded`` (error)
and counts ``curaflow_finish_degraded_total``. A degraded finish refused too raises
:class:`FinishNotStorable` (nothing written). An outage is never degraded: it is raised as
it is, for its caller to retry. Until then such a value (a 427-character reason message, a
hold's date past any calendar) failed the finish on every attempt, the workflow's and the
reconciler's alike, and the job never ended.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import asyncpg

from curaflow.domain.cells import CellState, is_terminal
from curaflow.domain.holds import (
    SOURCE_STATES,
    AccountWait,
    Hold,
    HoldCaps,
    HoldScope,
    RouteWait,
    busy_until,
    held_by,
    hold_scope,
    least_requests,
    spacing_until,
)
from curaflow.domain.messages import JobInput
from curaflow.domain.models import JobRecord, Work
from curaflow.domain.outcome import build_outcome_record, business_status, is_alertable
from curaflow.domain.projection import JobStatus, job_stage, job_status
from curaflow.domain.ratelimit import cooldown_left_ms
from curaflow.domain.tally import cell_message
from curaflow.domain.text import clipped_within
from curaflow.domain.verdicts import (
    FinishCause,
    StepFailure,
    cancel_stopped,
    cell_verdict,
    failure_reason,
    waits_for_sends,
)
from curaflow.ledger.cells import finish_cell
from curaflow.ledger.db import DB_NOW_MS, jsonable, refused_parameter, refused_value
from curaflow.ledger.events import NOTIFY_CHANNEL, event_body, push_appended
from curaflow.ledger.records import load_job, load_job_with
from curaflow.observability import metrics
from curaflow.observability.logs import get_logger
from curaflow.protocol.models import TERMINAL_EVENT_TYPES
from curaflow.protocol.projection import project_job

if TYPE_CHECKING:
    from curaflow.config import Settings


log = get_logger("curaflow.outcome")

#: The text a degraded finish stores in place of each free text it would have written: the
#: message of each cell it ends and the outcome's ``user_message`` (every language).
NOT_STORABLE_MESSAGE = "message not storable"

#: What a finish builds and writes, in order — the ``value`` a refusal names
#: (:data:`curaflow.observability.metrics.FINISH_VALUES`): the job's read, the holds it names,
#: a cell's end (its message and hold), the outcome record, the terminal event.
FINISH_VALUES = metrics.FINISH_VALUES


class FinishNotStorable(Exception):
    """:func:`finish_job` could not store the job's end even degraded: the ledger refused a
    value of the degraded finish too (nothing written; the job stays open). Not retryable:
    the same values come again. Logged ``finish.not_stored`` and counted.

    Attributes:
        job_id: the job.
        value: what the degraded finish was building or writing (one of :data:`FINISH_VALUES`).
        sqlstate: PostgreSQL's SQLSTATE, or the Python error's class name
            (:func:`~curaflow.ledger.db.refused_value`).
    """

    def __init__(self, job_id: str, value: str, sqlstate: str) -> None:
        super().__init__(
            f"job {job_id}: its end cannot be stored, even degraded: the ledger refused the {value} ({sqlstate})"
        )
        self.job_id = job_id
        self.value = value
        self.sqlstate = sqlstate


class _At:
    """Which of :data:`FINISH_VALUES` a finish is building or writing (set as it goes)."""

    def __init__(self) -> None:
        self.value = "read"
        self.target_id: str | None = None


class SendStillOut(Exception):
    """:func:`finish_job` found a send of the job still out from a live attempt (see the
    module's doc): nothing was written (its transaction rolled back, the job row unlocked
    for that attempt's recording). Finish again later.

    Attributes:
        job_id: the job.
        wait_ms: how long, at most, until the last such send's lease lapses or the job's
            deadline passes, whichever comes first (ms, the database's clock; > 0). Its
            answer may be recorded sooner: the lease is kept while the attempt lives.
    """

    def __init__(self, job_id: str, wait_ms: int) -> None:
        super().__init__(f"job {job_id}: a send is still out from a live attempt (at most {wait_ms} ms more)")
        self.job_id = job_id
        self.wait_ms = wait_ms


#: The job's sends still out from a live attempt, read in the finish's job-row statement
#: (no statement added; the ``delivery_intents_cell`` index): ms on the database's clock
#: until the last lease of the job's intents ``sending`` lapses or the job's deadline
#: passes, whichever first (NULL: none is live; <= 0: the deadline has passed).
_SENDS_OUT = f"""(SELECT max(LEAST(d.send_until, COALESCE(j.deadline_at, d.send_until))) - {DB_NOW_MS}
                  FROM delivery_intents d
                  WHERE d.job_id = j.job_id AND d.status = 'sending' AND d.send_until > {DB_NOW_MS}) AS send_left_ms"""


class RunInputDiffers(Exception):
    """:func:`finish_job` was given the finishing run's input (``run_input``) and the job's
    stored input (``jobs.workflow_input``) is not the same ``jsonb`` value: nothing was
    written (read in the job's statement, before any write; its transaction rolled back).
    The caller judges whether the run's input is the job's all the same (a stored input that
    predates a field: :func:`activities.caller.foreign_run_input`) and, if it is, finishes
    again without ``run_input``.

    Attributes:
        job_id: the job.
        stored_input: the job's stored input, as read (a ``jsonb`` value).
    """

    def __init__(self, job_id: str, stored_input: Any) -> None:
        super().__init__(f"job {job_id}: the finishing run's input is not the job's stored input at a glance")
        self.job_id = job_id
        self.stored_input = stored_input


#: The job's stored input when it is not the finishing run's (``$2``, ``jsonb``), read in
#: the finish's job-row statement; NULL when it is, or when the job stores none (nothing to
#: judge against, as a step's claim: :func:`curaflow.ledger.cells.claim_matches_sql`).
_STORED_INPUT = """CASE WHEN j.workflow_input IS NULL OR j.workflow_input = $2::jsonb THEN NULL
                        ELSE j.workflow_input END AS stored_input"""


@dataclass
class FinishedJob:
    """Result of :func:`finish_job`.

    Attributes:
        record: the job after the call.
        outcome: the outcome record if this call wrote it (None on a repeat).
    """

    record: JobRecord
    outcome: dict[str, Any] | None


async def finish_job(
    conn: asyncpg.Connection,
    job_id: str,
    *,
    cause: FinishCause | str = FinishCause.COMPLETED,
    failures: dict[str, StepFailure] | None = None,
    verdicts: dict[str, str] | None = None,
    caps: HoldCaps | None = None,
    closed_at_ms: int | None = None,
    by_workflow: bool = False,
    run_input: JobInput | None = None,
) -> FinishedJob | None:
    """Make ``job_id`` terminal (own transaction).

    Args:
        cause: why the job finishes (:class:`~curaflow.domain.verdicts.FinishCause`).
        failures: target id → the failed step's facts, for cells that ended without a
            ledger transition.
        verdicts: target id → a reason decided by an execution started before facts
            existed (applied as given).
        caps: the instance's cooldown caps (:func:`hold_caps`), so a cooldown stored
            beyond its cap is named as the gate holds it; None: as stored.
        closed_at_ms: when Temporal closed the execution (epoch ms UTC) when ``cause``
            was read from that close (the reconciler); a consumer cancel recorded after
            it stopped nothing and leaves the close's reasons
            (:func:`curaflow.domain.verdicts.cancel_stopped`). None: no close.
        by_workflow: the workflow's finish (the ``finish`` activity), which waits for a
            send still out (:class:`SendStillOut`); False: the reconciler's (or any other
            caller's), which never does.
        run_input: the ``JobInput`` the finishing run holds, compared with the job's stored
            input in the job's read (:class:`RunInputDiffers`); None: not compared.

    Returns:
        The finished job, or None when the job is unknown.

    A value the ledger refuses (:func:`~curaflow.ledger.db.refused_value`) makes the finish
    roll back and run once more, degraded (the module's doc): the job ends, logged
    ``finish.degraded`` and counted. A normal finish costs nothing more (no statement).

    Raises:
        RunInputDiffers: ``run_input`` is not the job's stored input at a glance: nothing
            written.
        SendStillOut: the workflow's ``cause`` waits for sends
            (:func:`~curaflow.domain.verdicts.waits_for_sends`) and an intent of the open
            job is ``sending`` from a live attempt, before the job's deadline: nothing
            written.
        FinishNotStorable: the degraded finish was refused too: nothing written, not
            retryable.
        asyncpg / OS errors: an outage (or a bug), as raised: nothing written; never degraded.
    """
    cause = FinishCause(cause)
    at = _At()
    args = (failures or {}, verdicts or {}, caps or HoldCaps(), closed_at_ms, by_workflow, run_input)
    try:
        return await _finish(conn, job_id, cause, *args, at=at, degraded=False)
    except Exception as err:
        sqlstate = refused_value(err)
        if sqlstate is None:
            raise
        refused, target_id, first = at.value, at.target_id, err
    at = _At()
    try:
        finished = await _finish(conn, job_id, cause, *args, at=at, degraded=True)
    except Exception as again:
        still = refused_value(again)
        if still is None:
            raise  # an outage (or a bug) on the second try: as it is, retried as such
        metrics.record_finish_degraded(at.value, "not_stored")
        log.error(
            "finish.not_stored",
            job_id=job_id,
            sqlstate=still,
            value=at.value,
            target_id=at.target_id,
            refused=refused,
            refused_sqlstate=sqlstate,
            error=clipped_within(str(again), 300),
        )
        raise FinishNotStorable(job_id, at.value, still) from again
    metrics.record_finish_degraded(refused, "degraded")
    log.error(
        "finish.degraded",
        job_id=job_id,
        sqlstate=sqlstate,
        value=refused,
        target_id=target_id,
        error=clipped_within(str(first), 300),
        cause=str(cause),
    )
    return finished


async def _finish(
    conn: asyncpg.Connection,
    job_id: str,
    cause: FinishCause,
    failures: dict[str, StepFailure],
    verdicts: dict[str, str],
    caps: HoldCaps,
    closed_at_ms: int | None,
    by_workflow: bool,
    run_input: JobInput | None,
    *,
    at: _At,
    degraded: bool,
) -> FinishedJob | None:
    """One try of :func:`finish_job` (its own transaction), naming in ``at`` what it builds
    or writes as it goes; ``degraded``: the free text :data:`NOT_STORABLE_MESSAGE`, no hold."""
    waits = waits_for_sends(cause, by_workflow=by_workflow)  # its sends are read with the job
    async with conn.transaction():
        # The job's end is the database's clock, read with the job (docs/DESIGN.md "Ledger
        # times are the database's clock"): its start is, so the outcome's duration is the
        # job's own whatever the finishing host's clock says.
        extra = f"{DB_NOW_MS} AS db_now" + (f", {_SENDS_OUT}" if waits else "")
        judged = () if run_input is None else (jsonable(run_input),)
        if judged:  # whose finish it is, judged in the same read (the module's doc)
            extra += f", {_STORED_INPUT}"
        loaded = await load_job_with(conn, job_id, extra, *judged, for_update=True)
        if loaded is None:
            return None
        record, row = loaded
        if judged and row["stored_input"] is not None:
            raise RunInputDiffers(job_id, row["stored_input"])
        send_left_ms = row["send_left_ms"] if waits else None
        if send_left_ms is not None and send_left_ms > 0 and record.completed_at is None:
            raise SendStillOut(job_id, int(send_left_ms))
        cancel_recorded = cancel_stopped(cause, record.cancel_requested_at, closed_at_ms)
        open_cells = [c for c in record.cells if not is_terminal(c.state)]
        reasons = {
            cell.target_id: cell_verdict(
                state=cell.state,
                stage=cell.stage,
                cause=cause,
                failure=failures.get(cell.target_id),
                reported_reason=verdicts.get(cell.target_id),
                cancel_requested=cancel_recorded,
            )
            for cell in open_cells
        }
        scopes = {
            cell.target_id: scope
            for cell in open_cells
            if (scope := _scope(cell.state, reasons[cell.target_id], failures.get(cell.target_id))) is not None
        }
        works = {cell.target_id: cell.work for cell in open_cells}
        at.value = "hold"
        named = scopes and not degraded  # degraded: no hold, no derived date
        holds = await _holds(conn, job_id, record.deadline_at, scopes, caps, works) if named else {}
        for cell in open_cells:
            at.value, at.target_id = "cell", cell.target_id
            reason = reasons[cell.target_id]
            held = holds.get(cell.target_id)
            message = cell_message(cell.state, reason, cell.candidate_report, held=held) if held else None
            await finish_cell(
                conn,
                job_id,
                cell.target_id,
                CellState.FAILED,
                reason,
                NOT_STORABLE_MESSAGE if degraded else message,
                locked=True,
                held_by=held,
            )
        at.value, at.target_id = "read", None
        if open_cells:
            reloaded = await load_job(conn, job_id)
            assert reloaded is not None
            record = reloaded
        if record.completed_at is not None:
            return FinishedJob(record=record, outcome=None)
        now = int(row["db_now"])
        at.value = "outcome"
        status = job_status(record.cells)
        verdict = business_status(record.cells)
        outcome = build_outcome_record(
            job_id=job_id,
            job_type=record.job_type,
            schedule_id=record.schedule_id or record.plan_id,
            occurrence_at_ms=record.occurrence_at if record.occurrence_at is not None else record.created_at,
            occurrence_date=record.occurrence_date,
            started_at_ms=record.started_at,
            completed_at_ms=now,
            cells=record.cells,
        )
        if degraded:
            outcome["user_message"] = dict.fromkeys(outcome["user_message"], NOT_STORABLE_MESSAGE)
        at.value = "event"
        # What the statement below changes, without reading the job a third time.
        record = record.model_copy(
            update={
                "business_status": verdict.value,
                "completed_at": now,
                "updated_at": now,
                "lease_until": None,
            }
        )
        job_body = project_job(record)
        payload: dict[str, Any] = {"job": job_body}
        if status == JobStatus.SUCCEEDED:
            payload["result"] = job_body.get("result")
        else:
            payload["error"] = job_body.get("error")
        type_ = TERMINAL_EVENT_TYPES[str(status)]
        body = event_body(type_, payload)
        at.value = "outcome"
        # One statement (curaflow_finish_job, migration 0055): the job row, the cells'
        # leases, the artifacts' chunks and the outcome record, then the terminal event.
        try:
            written = await conn.fetchrow(
                _FINISH_SQL,
                job_id,
                verdict.value,
                now,
                job_stage(record.cells, status),  # the terminal job's progress.stage, as project_job shows it
                is_alertable(verdict),
                outcome,
                type_,
                body,
                NOTIFY_CHANNEL,
            )
        except Exception as err:
            if refused_parameter(err) == _EVENT_PARAMETER:
                at.value = "event"  # the ledger refused the event's body (its parameter), not the outcome
            raise
        assert written is not None
        if written["seq"] is None:
            raise LookupError(job_id)
        await push_appended(
            conn,
            job_id,
            type_,
            int(written["seq"]),
            written["at"],
            body,
            written["callback_url"],
            written["correlation_id"],
        )
        return FinishedJob(record=record, outcome=outcome if written["inserted"] else None)


#: :func:`_finish`'s write: ``curaflow_finish_job`` (migration 0055).
_FINISH_SQL = """SELECT o_inserted AS inserted, o_seq AS seq, o_at AS at, o_callback_url AS callback_url,
                        o_correlation_id AS correlation_id
                 FROM curaflow_finish_job($1, $2, $3, $4, $5, $6, $7, $8, $9)"""

#: The event's body among :data:`_FINISH_SQL`'s parameters (``$8``).
_EVENT_PARAMETER = 8


def hold_caps(settings: Settings) -> HoldCaps:
    """The instance's cooldown caps, as its gates read a stored cooldown: the routes'
    ``delivery.route_rate_limit_cap_ms`` and each source account's ladder cap
    (``rate_limit_cap_ms``, through its policy); and each account's request spacing
    (``min_interval_ms``, as its gate keeps it: the replay's in replay mode) and
    concurrency (``max_concurrency``: the source steps its queue's worker runs at once)."""
    sources = settings.source_configs()
    return HoldCaps(
        route_cooldown_ms=settings.delivery.route_rate_limit_cap_ms,
        account_cooldown_ms={
            account: int(config.policy().rate_limit_cap_s * 1000) for account, config in sources.items()
        },
        account_spacing_ms={account: config.min_interval_ms for account, config in sources.items()},
        account_concurrency={account: config.max_concurrency for account, config in sources.items()},
    )


def _scope(state: str, reason: str, failure: StepFailure | None) -> HoldScope | None:
    """Which hold may be named for a cell (:func:`curaflow.domain.holds.hold_scope`, given
    its failed step's facts)."""
    own = failure_reason(failure) if failure is not None else None
    return hold_scope(
        state,
        reason,
        failure_step=failure.step if failure is not None else None,
        failure_route=failure.route if failure is not None else None,
        failure_reason=str(own) if own is not None else None,
    )


#: The facts :func:`_holds` reads, in one statement: the undelivered intents of the job's
#: cells a route may hold (``$2``) with their routes' gates, and the source gates of the
#: accounts of the cells an account may hold (``$3``) — the account's gate keyed by the
#: job's stored ``source_task_queues`` (account → its queue: the gate's key), as its
#: admission stored them and its workflow used them — with, for a cell bound and
#: fetching (``selected``), when it bound its work (``bound_at``: its intents of that
#: work were reserved by the binding's transaction); and, for a cell that never had a step
#: opened (``started`` false: no ``heartbeat_at``), how many other open jobs' steps hold
#: the same source queue (``others``: their cells still searching or fetching, leased at
#: the read, their step opened — the cell's last move — by the deadline), found from the
#: open jobs (the ``jobs_open`` index) and their stored ``source_task_queues``.
_HOLD_FACTS = f"""
WITH clock AS (SELECT {DB_NOW_MS} AS now)
SELECT 'route' AS owner, d.target_id, d.route AS name, COALESCE(d.held_until, 0) AS held_until,
       COALESCE(d.held_kind, 'rate_limited') AS held_kind,
       COALESCE(g.cooldown_until, 0) AS cooldown_until, COALESCE(g.paused_until, 0) AS paused_until,
       0::bigint AS rate_limited_at, 0::bigint AS bound_at, true AS started, 0::bigint AS others, clock.now
FROM clock, delivery_intents d LEFT JOIN route_gates g ON g.route = d.route
WHERE d.job_id = $1 AND d.target_id = ANY($2::text[]) AND d.status IN ('reserved', 'sending')
UNION ALL
SELECT 'account', t.target ->> 'target_id', t.target ->> 'account', 0, NULL, g.cooldown_until, g.paused_until,
       COALESCE(g.last_rate_limit_at, 0),
       COALESCE((SELECT min(d.created_at) FROM cells c
                 JOIN delivery_intents d ON d.job_id = c.job_id AND d.target_id = c.target_id AND d.work_id = c.work_id
                 WHERE c.job_id = $1 AND c.target_id = t.target ->> 'target_id' AND c.state = 'selected'), 0),
       own.heartbeat_at IS NOT NULL,
       CASE WHEN own.heartbeat_at IS NULL THEN
           (SELECT count(*) FROM jobs o
                CROSS JOIN LATERAL jsonb_array_elements(COALESCE(o.workflow_input -> 'targets', '[]'::jsonb))
                    AS ot(target)
                JOIN cells oc ON oc.job_id = o.job_id AND oc.target_id = ot.target ->> 'target_id'
            WHERE o.completed_at IS NULL AND o.job_id <> $1
              AND o.workflow_input -> 'source_task_queues' ->> (ot.target ->> 'account') = g.gate
              AND oc.state = ANY($4::text[]) AND oc.lease_until > clock.now
              AND oc.updated_at <= LEAST(clock.now, COALESCE(j.deadline_at, clock.now)))
       ELSE 0 END,
       clock.now
FROM clock, jobs j
     CROSS JOIN LATERAL jsonb_array_elements(COALESCE(j.workflow_input -> 'targets', '[]'::jsonb)) AS t(target)
     JOIN source_gates g ON g.gate = j.workflow_input -> 'source_task_queues' ->> (t.target ->> 'account')
     JOIN cells own ON own.job_id = j.job_id AND own.target_id = t.target ->> 'target_id'
WHERE j.job_id = $1 AND t.target ->> 'target_id' = ANY($3::text[])"""


#: The states of a cell whose step holds its account's source queue while it is leased
#: (:data:`curaflow.domain.holds.SOURCE_STATES`: searching, or bound and fetching).
_SOURCE_STATE_NAMES = sorted(str(s) for s in SOURCE_STATES)


async def _holds(
    conn: asyncpg.Connection,
    job_id: str,
    deadline_at: int | None,
    scopes: dict[str, HoldScope],
    caps: HoldCaps,
    works: dict[str, Work | None] | None = None,
) -> dict[str, Hold]:
    """What held each cell of ``job_id`` in ``scopes`` when the job ended
    (:func:`curaflow.domain.holds.held_by`): for a cell a route may hold, its undelivered
    intents' ``held_until`` and ``held_kind`` (a send its receiver rate-limited, or
    answered it is unavailable with a ``Retry-After``) and their routes' gates (a
    route-wide cooldown, a pause); for one its account may hold, the account's gate (its
    cooldown, its pause), its spacing of the bound work's requests, and its source queue
    busy with other jobs' steps while the cell's never started (:func:`busy_until`) — at
    the deadline, or now when the job ends before it (Temporal
    refuses a retry due after the execution's end). A cooldown is read as its gate reads
    it, at most its cap from now (``caps``, :func:`~curaflow.domain.ratelimit.cooldown_left_ms`).
    One statement, read only when a cell ends failing at the finish: never on a job whose
    cells all ended on their own."""
    routed = [t for t, s in scopes.items() if s.owner == "route"]
    sourced = [t for t, s in scopes.items() if s.owner == "account"]
    rows = await conn.fetch(_HOLD_FACTS, job_id, routed, sourced, _SOURCE_STATE_NAMES)
    waits: dict[str, list[RouteWait | AccountWait]] = {}
    now = 0
    for r in rows:
        now = r["now"]
        if r["owner"] == "route":
            cooling = _cooling(r["cooldown_until"], now, caps.route_cooldown_ms)
            wait: RouteWait | AccountWait = RouteWait(
                route=r["name"],
                held_until=r["held_until"],
                held_kind=r["held_kind"] if r["held_kind"] in ("unavailable", "configuration") else "rate_limited",
                cooldown_until=cooling,
                paused_until=r["paused_until"],
            )
        else:
            work = (works or {}).get(r["target_id"])
            spaced = (
                spacing_until(
                    r["bound_at"],
                    least_requests(work.kind, len(work.pages) or work.page_count),
                    caps.account_spacing_ms.get(r["name"], 0),
                )
                if work is not None
                else 0
            )
            wait = AccountWait(
                account=r["name"],
                cooldown_until=_cooling(r["cooldown_until"], now, caps.account_cooldown_ms.get(r["name"])),
                rate_limited_at=r["rate_limited_at"],
                paused_until=r["paused_until"],
                spacing_until=spaced,
                busy_until=busy_until(
                    started=r["started"],
                    others=r["others"],
                    concurrency=caps.account_concurrency.get(r["name"], 0),
                    seen_at=now,
                ),
            )
        waits.setdefault(r["target_id"], []).append(wait)
    at = min(now, deadline_at) if deadline_at is not None else now
    found = {target: held_by(w, at=at, scope=scopes[target]) for target, w in waits.items()}
    return {target: hold for target, hold in found.items() if hold is not None}


def _cooling(until: int, now: int, cap_ms: int | None) -> int:
    """A stored cooldown's end as its gate reads it: at most ``cap_ms`` from ``now`` (None: as stored)."""
    if cap_ms is None or until <= now:
        return until
    return now + cooldown_left_ms(until, now, cap_ms)

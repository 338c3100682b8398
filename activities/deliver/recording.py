"""What a deliver attempt records of its send: the receipt, a send cut by the job's stop, a
failed send as its verdict decides (with what it means for the route).

See :mod:`activities.deliver` (step 3).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import asyncpg
from temporalio import activity

from activities.deps import ActivityDeps
from activities.heartbeat import CANCEL_PROBE_S, Heartbeater
from curaflow.domain.cells import CellState
from curaflow.domain.messages import DeliverInput
from curaflow.domain.models import CellSnapshot, DeliveryReport
from curaflow.domain.ratelimit import stated_wait_ms
from curaflow.domain.reasons import Owner
from curaflow.domain.verdicts import DeliveryVerdict, delivery_verdict
from curaflow.ledger import deliveries as ledger
from curaflow.ledger import holdings, route_gates
from curaflow.ledger import remembered as memory
from curaflow.ledger.db import LEDGER_ERRORS
from curaflow.ledger.deliveries import AlreadyRecorded, Answered
from curaflow.ledger.records import load_cell
from curaflow.observability import metrics
from curaflow.observability.logs import get_logger
from curaflow.routes.base import DeliveryReceipt, DeliveryRequest, RouteError

log = get_logger("curaflow.deliver")

T = TypeVar("T")

#: Waits between the tries of recording what a send's route answered while the ledger
#: fails (a PostgreSQL restart, a statement timeout, a pool with no connection to give),
#: seconds: 6.3 s in all before the attempt gives up (:class:`NotRecorded`).
RECORD_RETRY_S = (0.1, 0.2, 0.4, 0.8, 1.6, 3.2)

#: How long the recording of a send's answer may still hold its send out once the route
#: answered, ms, when every write of the attempt fails fast (a PostgreSQL restart, a backend
#: ended): the last ledger beat that got through may be one Temporal beat late
#: (:data:`~activities.heartbeat.CANCEL_PROBE_S`, 1 s), the recording waits
#: :data:`RECORD_RETRY_S` between its tries (6.3 s) and its seven tries take their round
#: trips (1 s for them all): 8.3 s.
RECORDING_HOLD_MS = round((CANCEL_PROBE_S + sum(RECORD_RETRY_S) + 1.0) * 1000)


def send_lease_ms(interval_ms: int) -> int:
    """How long a claimed send stays live without a beat of its attempt, ms (``send_until``:
    :func:`curaflow.ledger.deliveries.claim_send`, :func:`curaflow.ledger.cells.heartbeat`),
    for a heartbeat interval of ``interval_ms``: the step's lease (two intervals, the
    heartbeat timeout) — never shorter than one interval (the next beat is due then) plus
    :data:`RECORDING_HOLD_MS`.

    Rule (2026-12-06): the send lease lives as long as its send's answer may still be
    recorded by its attempt. The attempt's beats go on while it records
    (:meth:`activities.deliver.activity.DeliverActivity._sent`), so a ledger that refuses
    only the record (a lock, a statement timeout) never lapses it; a ledger that refuses
    every write of the attempt extends nothing, and then the lease itself must outlast the
    recording's retries — two intervals did not with an interval of a few seconds (the
    configuration accepts 100 ms): another run's deliver took the send whose answer was
    still being recorded and sent it again, the job's finish stopped waiting for it. The
    default interval (30 s) keeps its 60 s lease; 1 s makes it 9.3 s.
    """
    return max(2 * interval_ms, interval_ms + RECORDING_HOLD_MS)


class NotRecorded(Exception):
    """The ledger failed to record what a send's route answered, at every try
    (:data:`RECORD_RETRY_S`). Curaflow's failure, never the route's: the deliver activity
    lets the ledger's last error (``__cause__``) out as it is — Temporal retries it, and
    its last attempt is ``internal_error`` (:func:`curaflow.domain.verdicts.failure_reason`).

    Attributes:
        answered: what the attempt knew of its send, kept in its last heartbeat for the
            next attempt to record (:func:`curaflow.ledger.deliveries.claim_send`), or
            None when the send may have landed unanswered (nothing to keep: the next
            attempt's ``ambiguous`` is the truth).
    """

    def __init__(self, answered: Answered | None) -> None:
        super().__init__("the ledger failed to record the route's answer")
        self.answered = answered


async def until_recorded(
    record: Callable[[], Awaitable[T]],
    answered: Answered | None,
    *,
    hb: Heartbeater | None = None,
    live: bool = False,
) -> T:
    """``record()`` (one ledger transaction recording a send's answer), tried again after
    each of :data:`RECORD_RETRY_S` while it fails on the ledger (:data:`LEDGER_ERRORS`).

    The answer is a fact the route gave once: a ledger that fails between the answer and
    its record (until 2026-12-05) left the intent ``sending``, and the next attempt took
    it for a send that may have landed — an at-most-once route's work ``delivery_unknown``,
    "check the route's receiver", though the route had answered. While it is retried
    (and after), ``answered`` is the attempt's heartbeat details (through ``hb`` while a
    :class:`Heartbeater` runs, else sent here every :data:`CANCEL_PROBE_S`), so an attempt
    that dies meanwhile, or gives up, leaves it to the next. A success costs nothing more.

    ``live``: the send is still going — a part of it confirmed, its next part waiting for
    this record. Its answer is then *not* published while retried: a next attempt trusts a
    published :class:`Answered` as a send that has ended and sends the rest, while this
    attempt (frozen past its heartbeat timeout, cut off from Temporal, reset) would post
    the rest too once the record succeeds — an at-most-once route's parts posted twice.
    It is carried out by :class:`NotRecorded` only, once the send stopped; the caller
    keeps the confirmed parts for any cut or failure it records meanwhile.

    Raises:
        NotRecorded: still failing after the last wait (its ``__cause__``: the last error).
    """
    waits = iter(RECORD_RETRY_S)
    while True:
        try:
            result = await record()
        except LEDGER_ERRORS as err:
            wait = next(waits, None)
            details = answered.details() if answered is not None and not live else {}
            if hb is not None and answered is not None and not live:
                hb.update(**details)
            if wait is None:
                raise NotRecorded(answered) from err
            info = activity.info()
            log.warning(
                "deliver.record_retried",
                job_id=info.workflow_id,
                attempt=info.attempt,
                error=type(err).__name__,
                retry_in_s=wait,
                hint="the ledger failed to record the route's answer; tried again (curaflow's database, not the route)",
            )
            await _beating(wait, details if hb is None else None)
            continue
        if hb is not None:
            hb.drop("answered")
        return result


async def _beating(wait_s: float, details: dict[str, object] | None) -> None:
    """Sleep ``wait_s`` seconds; with ``details``, heartbeat them at its start and every
    :data:`CANCEL_PROBE_S` (None: a :class:`Heartbeater` beats meanwhile)."""
    left = wait_s
    while left > 0:
        if details is not None:
            activity.heartbeat(details)
        step = min(left, CANCEL_PROBE_S / 2)
        await asyncio.sleep(step)
        left -= step


class DeliveryRecords:
    """The recording half of :class:`~activities.deliver.activity.DeliverActivity` (its base):
    each record is one ledger transaction, with the metrics and the log line it owes."""

    deps: ActivityDeps

    @staticmethod
    def _report(inp: DeliverInput, work_id: str, status: str, remote_id: str | None) -> DeliveryReport:
        return DeliveryReport(
            target_id=inp.target.target_id, route=inp.route.name, work_id=work_id, status=status, remote_id=remote_id
        )

    async def _record_receipt(
        self, inp: DeliverInput, request: DeliveryRequest, receipt: DeliveryReceipt, *, hb: Heartbeater | None = None
    ) -> CellSnapshot:
        """Record the receipt of a send (tried again while the ledger fails, :func:`until_recorded`;
        ``hb``: the send's heartbeater, which beats meanwhile) and what a delivery owes
        the disk (:meth:`_confirmed`); returns the cell afterwards.

        Raises:
            NotRecorded: the ledger failed every try.
        """
        deps = self.deps
        metrics.record_delivery_result(
            inp.route.name, inp.route.kind, "duplicate" if receipt.duplicate else "delivered"
        )

        async def record() -> object:
            async with deps.pool.acquire() as conn, conn.transaction():
                return await ledger.record_delivered(
                    conn,
                    inp.job_id,
                    inp.target.target_id,
                    request.idempotency_key,
                    duplicate=receipt.duplicate,
                    remote_id=receipt.remote_id,
                    remote_ids=receipt.remote_ids or None,
                    remote_status=receipt.remote_status,
                )

        answered = Answered(
            attempt=request.attempt,
            key=request.idempotency_key,
            parts=receipt.remote_ids or None,
            receipt={
                "remote_id": receipt.remote_id,
                "remote_ids": receipt.remote_ids or None,
                "remote_status": receipt.remote_status,
                "duplicate": receipt.duplicate,
            },
        )
        cell = await until_recorded(record, answered, hb=hb)
        assert isinstance(cell, CellSnapshot)
        await self._confirmed(inp, cell)
        return cell

    async def _confirmed(self, inp: DeliverInput, cell: CellSnapshot) -> None:
        """What a recorded delivery owes this process's disk, whichever path recorded it:
        this attempt's receipt (:meth:`_record_receipt`), or the previous attempt's, from
        its heartbeat (:class:`Answered`, recorded by the claim:
        :func:`~curaflow.ledger.deliveries.claim_send`'s ``done``) — the one owner.

        Rule: ``storage_mode = "cache"`` removes the cell's artifact folder
        (:func:`curaflow.ledger.holdings.remove_folders`, retention's own removal) once the
        cell is ``submitted`` (every route confirmed) — this process's at once, and every
        other store's at its worker's next retention pass (:func:`curaflow.ledger.holdings.done`:
        the host that fetched may not be this one, workers share no disk); ``persistent``
        keeps it. The ledger's copy goes with the job's finish either way. Until 2026-12-05
        only this attempt's receipt removed it: a receipt recorded by the next attempt left
        the files on the disk for good; and until the same day only this process's folder
        went: a cell another host fetched kept its files on that host's disk for good.

        Nothing here fails the step: the delivery is recorded. A folder this process cannot
        remove — a file the disk refuses, a job folder an operator moved out of the
        artifacts directory behind a symbolic link (never followed: nothing outside the
        root is touched) — is left and said (``artifact.cache_folder_refused``); marked
        done all the same, it stays recorded and this store's next retention pass tries it
        again and says it as any folder it could not free (``PruneReport.errors``,
        ``retention.folders_refused``). Until 2026-12-07 such a folder raised ``LinkEscape``
        here and failed the attempt after its delivery was recorded. A ledger error in the
        mark is logged, not raised (the folder then goes with the job's retention).
        Idempotent (a folder already gone is no error); blocking work runs in a thread."""
        if cell.state == CellState.SUBMITTED and inp.target.storage_mode == "cache":
            refused = await asyncio.to_thread(
                holdings.remove_folders, self.deps.store, [(inp.job_id, inp.target.target_id)]
            )
            for why in refused.values():
                log.warning(
                    "artifact.cache_folder_refused",
                    job_id=inp.job_id,
                    target_id=inp.target.target_id,
                    error=why,
                )
            try:
                await holdings.done(self.deps.pool, inp.job_id, inp.target.target_id)
            except LEDGER_ERRORS as err:
                log.warning(
                    "artifact.cache_release_unrecorded",
                    job_id=inp.job_id,
                    target_id=inp.target.target_id,
                    error=f"{type(err).__name__}: {err}"[:300],
                )

    @staticmethod
    def _answered(request: DeliveryRequest, err: RouteError, parts: list[object] | None) -> Answered | None:
        """What a send that failed with ``err`` leaves to the next attempt should the ledger
        fail to record it: its confirmed ``parts``, when nothing of it may have landed
        unanswered (``err`` not ambiguous); else None."""
        if err.ambiguous:
            return None
        return Answered(attempt=request.attempt, key=request.idempotency_key, parts=list(parts or []))

    async def _record_cut(
        self,
        inp: DeliverInput,
        request: DeliveryRequest,
        err: RouteError,
        *,
        posted: bool = False,
        parts: list[object] | None = None,
        hb: Heartbeater | None = None,
    ) -> CellSnapshot:
        """Record a send cut by a cancel (the job's stop, the deadline; or one that is not
        the job's — a reset, the worker's shutdown — after which Temporal runs another
        attempt): the intent back to ``reserved``, the cell left open.

        Only a request that had left (``err.ambiguous``) is remembered as possibly
        delivered (``maybe_delivered``, which :func:`~curaflow.ledger.deliveries.claim_send`
        never sends again on an at-most-once route). Parts already posted (``posted``) are
        no such request: they are confirmed (``remote_ids``), and a next attempt resumes
        after them; if the job ends instead, its finish keeps the intent ``unknown`` for
        them (:func:`~curaflow.ledger.cells.finish_cell`), never ``released``. Nothing
        left and nothing posted (a connect or a TLS handshake that never completed): the
        finish releases the work.

        ``parts``: the parts the route confirmed so far — written on the intent in the
        cut's transaction (a cancel may have cut a part's own record: the part is at the
        route, and an intent with no parts and nothing out would be released, the work
        offered and posted again), and what a next attempt resumes after, should the ledger
        fail to record the cut (:func:`until_recorded`); ``hb``: the send's heartbeater,
        when it still runs."""
        ambiguous = err.ambiguous
        metrics.record_delivery_result(inp.route.name, inp.route.kind, "unknown" if ambiguous or posted else "failed")

        async def record() -> object:
            async with self.deps.pool.acquire() as conn, conn.transaction():
                if parts:  # confirmed by the route, perhaps not recorded yet (a part's record cut)
                    await ledger.record_part(conn, request.idempotency_key, list(parts))
                try:
                    return await ledger.record_failed(
                        conn,
                        inp.job_id,
                        inp.target.target_id,
                        request.idempotency_key,
                        reason=err.reason,
                        error=str(err),
                        permanent=False,
                        ambiguous=ambiguous,
                        send=request.attempt,
                    )
                except AlreadyRecorded:  # a try whose commit was not acknowledged: recorded
                    return await load_cell(conn, inp.job_id, inp.target.target_id)

        cell = await until_recorded(record, self._answered(request, err, parts), hb=hb)
        assert isinstance(cell, CellSnapshot)
        return cell

    async def _record_error(
        self,
        inp: DeliverInput,
        request: DeliveryRequest,
        err: RouteError,
        *,
        max_attempts: int | None,
        posted: bool = False,
        parts: list[object] | None = None,
        hb: Heartbeater | None = None,
    ) -> Recorded:
        """Record a failed send as :func:`~curaflow.domain.verdicts.delivery_verdict` decides,
        with what it means for the route (:mod:`curaflow.ledger.route_gates`), in one
        transaction: a refusal of the work remembered, or the work held back from the route
        after the route refused the request; a receiver's refusal counted in the route's
        streak (which may pause the route and lift the streak's refusals); a rate limit
        counted for its backoff.

        Args:
            max_attempts: the attempt budget, or None when the send was stopped by a cancel
                (the budget does not end the cell then; the job's finish does).
            posted: part of the work is already at the route (parts recorded by this or
                an earlier attempt): a final failure is then partial, never a refusal.
            parts / hb: as in :meth:`_record_cut` (the recording is tried again while the
                ledger fails, :func:`until_recorded`).
        """
        deps = self.deps
        route = deps.route(inp.route.name)
        attempt = activity.info().attempt
        verdict = delivery_verdict(
            reason=err.reason,
            permanent=err.permanent,
            ambiguous=err.ambiguous,
            resend_safe=route.resend_safe,
            attempt=attempt,
            max_attempts=max_attempts if max_attempts is not None else attempt + 1,
            posted=posted,
        )
        metrics.record_delivery_result(inp.route.name, inp.route.kind, verdict.outcome)

        async def record() -> _Failure:
            async with deps.pool.acquire() as conn, conn.transaction():
                if parts:  # confirmed by the route, perhaps not recorded yet (a part's record cut)
                    await ledger.record_part(conn, request.idempotency_key, list(parts))
                return await self._record_failure(conn, inp, request, err, verdict)

        done = await until_recorded(record, self._answered(request, err, parts), hb=hb)
        self._log_failure(inp, request, err, verdict, done)
        return Recorded(verdict, done.delay_ms)

    async def _record_failure(
        self,
        conn: asyncpg.Connection,
        inp: DeliverInput,
        request: DeliveryRequest,
        err: RouteError,
        verdict: DeliveryVerdict,
    ) -> _Failure:
        """The transaction of :meth:`_record_error` (on ``conn``): the intent, the refusal or
        hold, the rate limit and the refusal streak — once per send: the intent's record is
        a compare-and-set on the send (:func:`~curaflow.ledger.deliveries.record_failed`'s
        ``send``), and a try that finds it recorded already (the commit of an earlier try
        whose acknowledgement was lost) counts nothing again; it answers the wait the
        count made (:func:`~curaflow.ledger.route_gates.counted_delay`)."""
        policy = self.deps.settings.delivery
        work = request.work
        refused = verdict.remember_refusal
        held_until = 0
        delay_ms: int | None = None
        pause: route_gates.Pause | None = None
        rate_limited = err.rate_limited and not verdict.final
        stated = err.retry_after_s * 1000 if err.retry_after_s else None
        # A receiver that is unavailable (a 5xx) and stated when to come back is waited as
        # it asked (route_failure's next_retry_delay), like a rate limit — at most the
        # route's cap, as a route-wide limit (until 2026-12-07 up to a week): remembered on
        # the intent in the recording's own statement, so a job ending in the wait names it.
        unavailable = (
            stated_wait_ms(stated, policy.route_rate_limit_cap_ms)
            if not err.rate_limited and not verdict.final
            else None
        )
        try:
            await ledger.record_failed(
                conn,
                inp.job_id,
                inp.target.target_id,
                request.idempotency_key,
                reason=verdict.reason,
                error=str(err),
                permanent=verdict.final and not verdict.unknown,
                unknown=verdict.unknown,
                ambiguous=err.ambiguous,
                send=request.attempt,
                unavailable_ms=unavailable,
            )
        except AlreadyRecorded:
            if rate_limited:
                delay_ms = await route_gates.counted_delay(
                    conn,
                    route=inp.route.name,
                    stated_ms=stated,
                    route_wide=err.route_wide,
                    cap_ms=policy.route_rate_limit_cap_ms,
                )
            return _Failure(delay_ms=delay_ms)
        remembered = {
            "route": inp.route.name,
            "work_type": work.work_type,
            "work_id": work.work_id,
            "reason": str(err.reason),
            "error": str(err),
            "job_id": inp.job_id,
            "target_id": inp.target.target_id,
        }
        if refused:
            await memory.remember_refusal(conn, **remembered)
        elif verdict.hold:
            held_until = await memory.hold_work(conn, **remembered, hold_ms=policy.route_hold_ms)
        if rate_limited:
            delay_ms = await route_gates.rate_limited(
                conn,
                route=inp.route.name,
                stated_ms=stated,
                route_wide=err.route_wide,
                cap_ms=policy.route_rate_limit_cap_ms,
            )
            # What held this send alone, should the job end before its next attempt.
            # A route-wide limit is the route's cooldown (written above, at least as
            # long): an intent's own time, read a moment later on the database's
            # clock, ended a millisecond after it and named the wait "this send".
            if not err.route_wide:
                await ledger.hold_intent(conn, request.idempotency_key, delay_ms)
        # A refusal for good, and an answer that may follow a post ending the work held on
        # the route for good: `unknown` on an at-most-once route, or the last attempt of a
        # route that may send again (`abandoned`, its intent `unknown`: another job's key
        # is one the receiver cannot deduplicate). Until 2026-12-07 a receiver answering
        # every request so blocked one more work with every job, never paused: first
        # on any route (a proxy's page under a 200), then still on one that may send
        # again (a webhook's gateway answering 502 while its application is down: only an
        # at-most-once route's `unknown` was counted). No answer (a timeout, a connection
        # cut before the answer's head) is never counted.
        if err.answer and (verdict.outcome in ("rejected", "unknown") or (verdict.final and err.ambiguous)):
            pause = await route_gates.count_refusal(
                conn,
                route=inp.route.name,
                work_type=work.work_type,
                work_id=work.work_id,
                answer=err.answer,
                threshold=policy.refusal_streak,
                pause_ms=policy.route_pause_ms,
                at_once=err.pauses_route,
            )
        return _Failure(held_until, delay_ms, pause)

    def _log_failure(
        self, inp: DeliverInput, request: DeliveryRequest, err: RouteError, verdict: DeliveryVerdict, done: _Failure
    ) -> None:
        """The metrics and the log line a recorded failure owes (:meth:`_record_error`)."""
        policy = self.deps.settings.delivery
        work = request.work
        refused = verdict.remember_refusal
        held_until, pause = done.held_until, done.pause
        fields = {
            "job_id": inp.job_id,
            "target_id": inp.target.target_id,
            "route": inp.route.name,
            "work_id": work.work_id,
            "error": str(err),
        }
        if pause is not None:
            metrics.record_route_paused(inp.route.name, inp.route.kind)
            log.error(
                "route.paused",
                **fields,
                works=[w[1] for w in pause.works],
                restored=pause.restored,
                paused_for_s=round(policy.route_pause_ms / 1000),
                hint=(
                    "the receiver says its endpoint is gone for good (whatever the work; the work's hold was lifted)"
                    if err.pauses_route
                    else f"the route refused {len(pause.works)} different works in a row with the same answer: it "
                    "is broken, not the works (their refusals were lifted)"
                )
                + f". Fix the route, then `curaflow routes resume {inp.route.name}`",
            )
        elif refused:
            metrics.record_refusal(inp.route.name, inp.route.kind)
            log.warning(
                "route.work_refused",
                **fields,
                hint="the work is not offered to this route again; after fixing the receiver, clear it with "
                f"`curaflow refusals clear {inp.route.name} {work.work_id}`",
            )
        elif verdict.final and (verdict.owner == Owner.ROUTE or verdict.outcome == "partial"):
            log.error(
                "route.failed",
                **fields,
                reason=str(verdict.reason),
                outcome=verdict.outcome,
                held_until=held_until or None,
                hint="the route's receiver failed or refused the request (the work is not refused for good"
                + ("; it is held back from this route for a while" if held_until else "")
                + "); fix the route"
                + ("; what it already posted is kept and never posted again" if verdict.outcome == "partial" else ""),
            )


@dataclass
class _Failure:
    """What the transaction of a failed send wrote (:meth:`DeliveryRecords._record_failure`)."""

    held_until: int = 0
    delay_ms: int | None = None
    pause: route_gates.Pause | None = None


@dataclass
class Recorded:
    """What :meth:`DeliverActivity._record_error` recorded.

    Attributes:
        verdict: the delivery verdict.
        delay_ms: the wait before the next attempt for a rate limit (None: not one).
    """

    verdict: DeliveryVerdict
    delay_ms: int | None = None

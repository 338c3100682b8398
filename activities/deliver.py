"""The ``deliver`` activity: deliver the cell's artifact on one route, exactly once.

One activity per route, each with its own retry budget (the activity's retry policy).
An attempt:

0. finds the artifact: on this process's disk when it fetched it (or shares its
   volume), else the ledger's copy is written into a folder of this attempt
   (:mod:`curaflow.ledger.artifacts`; removed when the attempt ends), so a deliver
   attempt runs on any worker process — no disk is shared;
1. claims the send in the ledger under the job row lock (intent ``sending``,
   committed before anything leaves). A confirmed intent returns at once; a consumer
   cancel recorded before the claim means the request is never sent; an intent left
   ``sending`` by a dead attempt is ambiguous — re-sent only on routes where that is
   safe (stable idempotency key, or ``on_ambiguous = "retry"``), otherwise the cell
   fails ``delivery_unknown`` and nothing is re-sent;
2. sends, through the route's outbound client: every request ends by the route's total
   time limit and by the job's deadline. A cancel (the consumer's, or the deadline's)
   that reaches the attempt while a request is out gives it :data:`CANCEL_GRACE_S` to
   answer, and what the route answered is recorded: a delivery that landed before the
   cancel reached it leaves the cell ``submitted`` (no phantom deliveries, no lies); a
   send still out then is cut and recorded as possibly delivered (``unknown``). When the
   execution itself is gone (an operator's terminate, a timeout, a reset: the heartbeat
   answers "not found"), the send is not cut: it ends by its own limits and records
   what the route answered, before the reconciler closes the job;
3. records the answer: confirmed → intent ``delivered`` / ``duplicate``, the cell
   ``submitted`` once every route confirmed; permanent failure → cell ``failed``;
   retryable failure → intent back to ``reserved`` and an ``ApplicationError`` for
   Temporal to retry; on the last allowed attempt the cell ends ``delivery_abandoned``.

The verdict is judged from the failure's owner (:mod:`curaflow.domain.verdicts`): only a
failure owned by the work (``delivery_rejected``, ``over_route_limit``) has the refusal
remembered per (route, work) in the same transaction (:mod:`curaflow.ledger.remembered`),
so later jobs pick another work for that route; a route-owned one
(``route_refused``, a rate limit, no answer) leaves the work free for a later job — a
route's refusal of the request holds the work back from that route for a while, so the
next job tries another first. A
final failure after part of the work was posted (albums or messages confirmed) ends the
intent ``unknown`` — reported ``partial`` — so nothing of it is ever posted again.

The route's gate (:mod:`curaflow.ledger.route_gates`, the one owner of "is this route
broken") sees every refusal the receiver answered: several different works refused in a
row with the same answer pause the route and lift those refusals; a paused route sends
nothing (the cell ends ``route_paused`` at once); a rate limit waits the delay the
receiver stated or the backoff of one that stated none, and a global or IP-level limit
makes every send of the route wait (``cooling``).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.deps import ActivityDeps
from activities.errors import barrier_update, permanent, route_failure
from activities.heartbeat import Heartbeater
from curaflow.domain.cells import CellStage, CellState, is_terminal
from curaflow.domain.messages import CellUpdate, DeliverInput
from curaflow.domain.models import Artifact, CellSnapshot, DeliveryReport
from curaflow.domain.reasons import Owner, TerminalReason
from curaflow.domain.verdicts import DeliveryVerdict, delivery_verdict
from curaflow.ledger import cells as ledger_cells
from curaflow.ledger import deliveries as ledger
from curaflow.ledger import remembered as memory
from curaflow.ledger import route_gates
from curaflow.ledger.artifacts import ArtifactNotInLedger, restore_artifact
from curaflow.ledger.cells import Barrier
from curaflow.ledger.deliveries import SendClaim
from curaflow.ledger.records import load_cell
from curaflow.observability import metrics
from curaflow.observability.logs import get_logger
from curaflow.outbound import InFlight, TimeLimitExceeded, attempt_deadline, in_flight
from curaflow.routes import UnsupportedRoute
from curaflow.routes.base import DeliveryReceipt, DeliveryRequest, Route, RouteError

log = get_logger("curaflow.deliver")
#: How long a send that is out when the attempt is cancelled (a consumer cancel, the
#: job's deadline) may still take to answer, seconds: an answer that lands in time is
#: recorded as it is; after it the send is cut and its outcome is unknown.
CANCEL_GRACE_S = 1.0


class SendCut(RouteError):
    """A send still out :data:`CANCEL_GRACE_S` after a cancel or the deadline reached the
    attempt, cut by it. Not a route failure: nothing is judged from it (no verdict, no
    refusal); the intent is remembered as possibly delivered and the job's finish ends
    the cell with the barrier's reason (``cancelled_by_consumer``, ``execution_timeout``)."""


async def _finish_or_cut(
    send: asyncio.Future[DeliveryReceipt], route: str, flight: InFlight | None = None
) -> DeliveryReceipt:
    """``send``'s receipt if it ends within :data:`CANCEL_GRACE_S`, else cut it.

    Args:
        flight: the send's requests that are out (:func:`curaflow.outbound.in_flight`);
            None: assume one is.

    Raises:
        RouteError: the send failed within the grace.
        SendCut: it was still going and was cut: *ambiguous* when a request of it had
            started to leave (it may have landed; the ledger reports the intent
            ``unknown`` when the job ends, never ``delivered`` or ``released``), not when
            it was cut before sending (connecting, a TLS handshake that never completes).
    """
    done, _ = await asyncio.wait({send}, timeout=CANCEL_GRACE_S)
    if not done:
        send.cancel()
        with contextlib.suppress(asyncio.CancelledError, RouteError):
            await send
        out = flight is None or flight.out > 0
        raise SendCut(
            TerminalReason.DELIVERY_FAILED,
            f"route {route}: the send was cut {CANCEL_GRACE_S:.0f} s after the job was stopped; "
            + ("outcome unknown" if out else "nothing had left"),
            ambiguous=out,
        )
    return send.result()


def _execution_gone() -> bool:
    """Whether this attempt was cancelled because its workflow execution no longer exists
    (Temporal answered its heartbeat "not found": terminated, timed out, reset)."""
    details = activity.cancellation_details()
    return details is not None and details.not_found


async def _outlive(send: asyncio.Future[DeliveryReceipt]) -> DeliveryReceipt:
    """``send``'s receipt, however long it takes within its own bounds; a cancellation of
    this attempt meanwhile is not passed on to the send."""
    while True:
        try:
            return await asyncio.shield(send)
        except asyncio.CancelledError:
            if send.done():
                return send.result()


def _cut_by_deadline(err: RouteError) -> bool:
    """Whether ``err`` is a request the job's deadline cut (the outbound layer's
    :class:`~curaflow.outbound.TimeLimitExceeded` with ``by_deadline``)."""
    cause = err.__cause__
    return isinstance(cause, TimeLimitExceeded) and cause.by_deadline


async def _guarded(route: Route, request: DeliveryRequest) -> DeliveryReceipt:
    """``route.deliver``, with any unexpected failure made a :class:`RouteError`.

    A failure the route did not classify may have happened after the request left, so it
    is ambiguous (the work stays blocked on the route) and permanent (retrying a bug does
    not help). Only the exception's type is kept: its text may carry a secret URL.
    """
    try:
        return await route.deliver(request)
    except RouteError:
        raise
    except Exception as err:
        raise RouteError(
            TerminalReason.INTERNAL_ERROR,
            f"route {route.name} failed unexpectedly: {type(err).__name__}",
            permanent=True,
            ambiguous=True,
        ) from err


class DeliverActivity:
    """Holds the worker's :class:`~activities.deps.ActivityDeps` for the ``deliver`` activity."""

    def __init__(self, deps: ActivityDeps) -> None:
        self.deps = deps

    @activity.defn(name="deliver")
    async def deliver(self, inp: DeliverInput) -> CellUpdate:
        """Deliver the cell's work on ``inp.route``.

        Returns:
            The cell afterwards (``submitted`` once every route confirmed).

        Raises:
            ApplicationError: typed by reason code; ``delivery_rejected`` /
                ``delivery_unknown`` / ``configuration_error`` are non-retryable;
                ``delivery_failed`` is retried (``next_retry_delay`` from ``retry_after``).
        """
        deps = self.deps
        target = inp.target
        info = activity.info()
        lease_ms = inp.heartbeat_interval_ms * 2
        try:
            route = deps.route(inp.route.name)
        except UnsupportedRoute as err:
            async with deps.pool.acquire() as conn, conn.transaction():
                await ledger_cells.finish_cell(
                    conn, inp.job_id, target.target_id, CellState.FAILED, TerminalReason.CONFIGURATION_ERROR
                )
            raise permanent(TerminalReason.CONFIGURATION_ERROR, str(err)) from err

        async with deps.pool.acquire() as conn, conn.transaction():
            cell, barrier, deadline_ms, _ = await ledger_cells.start_step(
                conn,
                inp.job_id,
                target.target_id,
                stage=CellStage.DELIVERING,
                attempt=info.attempt,
                lease_ms=lease_ms,
                owner=deps.identity,
            )
            if cell is None:
                raise permanent(TerminalReason.INTERNAL_ERROR, f"job {inp.job_id} not in the ledger")
            if barrier is not None:
                return barrier_update(cell, barrier)
            held = cell.artifact is None or await asyncio.to_thread(deps.store.holds, cell.artifact)
            if held:
                claim = await self._claim(conn, inp, route, opened=cell)
        transfer: Path | None = None
        artifact = cell.artifact
        try:
            if not held:
                # Fetched by another process (host): deliver the ledger's copy. Copied
                # before the claim, so a failed copy never leaves the intent ``sending``.
                assert artifact is not None
                transfer = await asyncio.to_thread(deps.store.transfer_folder)
                artifact = await self._restore(inp, artifact, transfer, lease_ms)
                async with deps.pool.acquire() as conn, conn.transaction():
                    claim = await self._claim(conn, inp, route, opened=None)
            return await self._send(inp, route, cell, claim, artifact, lease_ms, deadline_ms)
        finally:
            if transfer is not None:
                await asyncio.to_thread(deps.store.discard_transfer, transfer)

    async def _restore(self, inp: DeliverInput, artifact: Artifact, folder: Path, lease_ms: int) -> Artifact:
        """The ledger's copy of ``artifact`` written into ``folder`` (heartbeating meanwhile).

        Raises:
            ApplicationError: ``delivery_failed`` (retried) when the ledger has no whole
                copy — an artifact fetched by an older worker that did not copy it: a
                retry may land on the process that holds the files.
        """
        deps = self.deps
        target = inp.target
        async with Heartbeater(deps.pool, inp.job_id, target.target_id, inp.heartbeat_interval_ms / 1000, lease_ms):
            try:
                restored = await restore_artifact(deps.pool, inp.job_id, target.target_id, artifact, folder)
            except ArtifactNotInLedger as err:
                async with deps.pool.acquire() as conn:
                    await ledger_cells.end_lease(conn, inp.job_id, target.target_id)
                raise ApplicationError(
                    f"artifact not held by this worker and not in the ledger: {err}",
                    type=str(TerminalReason.DELIVERY_FAILED),
                ) from err
        log.info(
            "artifact.restored_from_ledger",
            job_id=inp.job_id,
            target_id=target.target_id,
            route=inp.route.name,
            work_id=artifact.work_id,
            files=len(artifact.files),
            bytes=sum(f.bytes for f in artifact.files),
        )
        return restored

    async def _claim(
        self, conn: asyncpg.Connection, inp: DeliverInput, route: Route, *, opened: CellSnapshot | None
    ) -> SendClaim:
        """Claim the send in the caller's transaction (:func:`curaflow.ledger.deliveries.claim_send`);
        an attempt with nothing to send releases the lease its step took, an ambiguous
        intent is recorded ``delivery_unknown``."""
        target = inp.target
        claim = await ledger.claim_send(
            conn, inp.job_id, target.target_id, route.name, ambiguous_ok=route.resend_safe, opened=opened
        )
        if claim.decision not in ("send", "ambiguous"):
            # Nothing to send: the attempt ends here (its step took the cell's lease).
            await ledger_cells.end_lease(conn, inp.job_id, target.target_id)
        if claim.decision == "ambiguous":
            await ledger.record_failed(
                conn,
                inp.job_id,
                target.target_id,
                claim.idempotency_key or "",
                reason=TerminalReason.DELIVERY_UNKNOWN,
                error="a previous attempt's request may have landed; not re-sent (on_ambiguous=fail)",
                permanent=True,
                unknown=True,
            )
        if claim.decision == "paused":
            # Nothing is sent on a route paused as broken; the work is not used up.
            await ledger.record_failed(
                conn,
                inp.job_id,
                target.target_id,
                claim.idempotency_key or "",
                reason=TerminalReason.ROUTE_PAUSED,
                error=f"not sent: the route is paused ({claim.pause_reason})",
                permanent=True,
                ambiguous=claim.was_sending,
            )
        return claim

    async def _send(
        self,
        inp: DeliverInput,
        route: Route,
        cell: CellSnapshot,
        claim: SendClaim,
        artifact: Artifact | None,
        lease_ms: int,
        deadline_ms: int | None,
    ) -> CellUpdate:
        """Act on the claim: send ``artifact`` when it says ``send`` (module doc, 2–3);
        ``deadline_ms``: the job's deadline (epoch ms) the step read when it opened."""
        deps = self.deps
        target = inp.target
        if claim.decision == "ambiguous":
            raise permanent(TerminalReason.DELIVERY_UNKNOWN, "delivery outcome unknown; not re-sent")
        if claim.decision == "paused":
            metrics.record_delivery_result(route.name, inp.route.kind, "paused")
            log.error(
                "route.paused_not_sent",
                job_id=inp.job_id,
                target_id=target.target_id,
                route=route.name,
                pause_reason=claim.pause_reason,
                paused_for_s=round(claim.wait_ms / 1000),
                hint=f"the route is paused as broken; fix it, then `curaflow routes resume {route.name}`",
            )
            raise permanent(
                TerminalReason.ROUTE_PAUSED,
                f"route {route.name} is paused for another {claim.wait_ms / 1000:.0f} s ({claim.pause_reason}); "
                "nothing was sent",
            )
        if claim.decision == "cooling":
            raise ApplicationError(
                f"route {route.name} waits out a global or IP-level rate limit for another "
                f"{claim.wait_ms / 1000:.1f} s; nothing was sent",
                type=str(TerminalReason.DELIVERY_FAILED),
                next_retry_delay=timedelta(milliseconds=max(1, claim.wait_ms)),
            )
        if claim.decision != "send":
            async with deps.pool.acquire() as conn:
                current = await load_cell(conn, inp.job_id, target.target_id)
            assert current is not None
            delivery = None
            if claim.decision == "done" and current.work_id:
                delivery = self._report(inp, current.work_id, "delivered", claim.remote_id)
            return CellUpdate(
                cell=current,
                cancel_requested=claim.decision == "cancelled",
                deadline_passed=claim.decision == "deadline",
                delivery=delivery,
            )
        if cell.work is None or artifact is None:
            raise permanent(TerminalReason.INTERNAL_ERROR, "cell has no fetched artifact to deliver")

        key = claim.idempotency_key or ""
        parts_posted: list[Any] = list(claim.remote_ids or [])

        async def record_part(parts: list[Any]) -> None:
            await ledger.record_part(deps.pool, key, parts)
            parts_posted[:] = parts

        request = DeliveryRequest(
            job_id=inp.job_id,
            target_id=target.target_id,
            route=route.name,
            idempotency_key=key,
            work=cell.work,
            artifact=artifact,
            attempt=claim.attempts + 1,
            parts_done=list(claim.remote_ids or []),
            on_part=record_part,
        )
        async with Heartbeater(
            deps.pool, inp.job_id, target.target_id, inp.heartbeat_interval_ms / 1000, lease_ms
        ) as hb:
            hb.update(stage="delivering", route=route.name, work_id=cell.work.work_id)
            metrics.record_delivery_attempt(route.name, inp.route.kind)
            with attempt_deadline(deadline_ms), in_flight() as flight:
                # The task copies the context: every exchange of the send ends by the
                # deadline, and tells `flight` whether a request of it is out.
                send = asyncio.ensure_future(_guarded(route, request))
            cancelled = False
            try:
                receipt = await asyncio.shield(send)
            except asyncio.CancelledError:
                # The request is out: give its answer CANCEL_GRACE_S to arrive and record
                # the truth; a send still hanging then is cut, its outcome unknown. When
                # the job's execution is gone (terminated, timed out, reset) nothing waits
                # for this attempt but the reconciler, which waits for its lease: the send
                # ends by its own limits (the route's timeout, the job's deadline).
                cancelled = True
                try:
                    receipt = await (_outlive(send) if _execution_gone() else _finish_or_cut(send, route.name, flight))
                except SendCut as err:
                    await self._record_cut(inp, request, err, posted=bool(parts_posted))
                    raise asyncio.CancelledError() from err
                except RouteError as err:
                    # Stopped by the cancel, not by the budget: the job's finish ends the cell.
                    await self._record_error(inp, request, err, max_attempts=None, posted=bool(parts_posted))
                    raise asyncio.CancelledError() from err
            except RouteError as err:
                if _cut_by_deadline(err):
                    # The job is over, not the route at fault: the barrier's path, as at
                    # the opening of a step (the finish gives the cell its reason).
                    cut = await self._record_cut(inp, request, err, posted=bool(parts_posted))
                    return barrier_update(cut, Barrier.DEADLINE)
                recorded = await self._record_error(
                    inp, request, err, max_attempts=inp.max_attempts, posted=bool(parts_posted)
                )
                verdict = recorded.verdict
                if verdict.outcome == "unknown":
                    raise ApplicationError(
                        str(err), type=str(TerminalReason.DELIVERY_UNKNOWN), non_retryable=True
                    ) from err
                if verdict.final and verdict.outcome == "partial":
                    raise permanent(verdict.reason, f"part of the work was posted, then: {err}") from err
                if verdict.final and not err.permanent:
                    raise permanent(verdict.reason, f"no delivery attempt left: {err}") from err
                raise route_failure(err, recorded.delay_ms) from err
        if receipt.duplicate and claim.attempts > 0:
            # "Already had it" after an earlier send of this very key: that send landed.
            receipt.duplicate = False
            receipt.remote_status = receipt.remote_status or "replayed"
        updated = await self._record_receipt(inp, request, receipt)
        if cancelled and not (is_terminal(updated.state) and updated.state == CellState.SUBMITTED):
            raise asyncio.CancelledError()
        status = "duplicate" if receipt.duplicate else "delivered"
        return CellUpdate(cell=updated, delivery=self._report(inp, request.work.work_id, status, receipt.remote_id))

    @staticmethod
    def _report(inp: DeliverInput, work_id: str, status: str, remote_id: str | None) -> DeliveryReport:
        return DeliveryReport(
            target_id=inp.target.target_id, route=inp.route.name, work_id=work_id, status=status, remote_id=remote_id
        )

    async def _record_receipt(
        self, inp: DeliverInput, request: DeliveryRequest, receipt: DeliveryReceipt
    ) -> CellSnapshot:
        deps = self.deps
        metrics.record_delivery_result(
            inp.route.name, inp.route.kind, "duplicate" if receipt.duplicate else "delivered"
        )
        async with deps.pool.acquire() as conn, conn.transaction():
            cell = await ledger.record_delivered(
                conn,
                inp.job_id,
                inp.target.target_id,
                request.idempotency_key,
                duplicate=receipt.duplicate,
                remote_id=receipt.remote_id,
                remote_ids=receipt.remote_ids or None,
                remote_status=receipt.remote_status,
            )
        assert isinstance(cell, CellSnapshot)
        if cell.state == CellState.SUBMITTED and inp.target.storage_mode == "cache":
            deps.store.delete(inp.job_id, inp.target.target_id)
        return cell

    async def _record_cut(
        self, inp: DeliverInput, request: DeliveryRequest, err: RouteError, *, posted: bool = False
    ) -> CellSnapshot:
        """Record a send cut by the job's stop (a cancel, the deadline): the intent back to
        ``reserved``, the cell left open for the job's finish — possibly delivered when a
        request had left (``err.ambiguous``) or part of the work is at the route
        (``posted``), so the finish reports it ``unknown``; else it is released (nothing
        left: a connect or a TLS handshake that never completed)."""
        ambiguous = err.ambiguous or posted
        metrics.record_delivery_result(inp.route.name, inp.route.kind, "unknown" if ambiguous else "failed")
        async with self.deps.pool.acquire() as conn, conn.transaction():
            cell = await ledger.record_failed(
                conn,
                inp.job_id,
                inp.target.target_id,
                request.idempotency_key,
                reason=err.reason,
                error=str(err),
                permanent=False,
                ambiguous=ambiguous,
            )
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
        policy = deps.settings.delivery
        work = request.work
        refused = verdict.remember_refusal
        held_until = 0
        delay_ms: int | None = None
        pause: route_gates.Pause | None = None
        async with deps.pool.acquire() as conn, conn.transaction():
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
            )
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
            if err.rate_limited and not verdict.final:
                stated = err.retry_after_s * 1000 if err.retry_after_s else None
                delay_ms = await route_gates.rate_limited(
                    conn, route=inp.route.name, stated_ms=stated, route_wide=err.route_wide
                )
            if verdict.outcome == "rejected" and err.answer:
                pause = await route_gates.count_refusal(
                    conn,
                    route=inp.route.name,
                    work_type=work.work_type,
                    work_id=work.work_id,
                    answer=err.answer,
                    threshold=policy.refusal_streak,
                    pause_ms=policy.route_pause_ms,
                )
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
                hint=f"the route refused {len(pause.works)} different works in a row with the same answer: it is "
                "broken, not the works (their refusals were lifted). Fix the route, then "
                f"`curaflow routes resume {inp.route.name}`",
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
        return Recorded(verdict, delay_ms)


@dataclass
class Recorded:
    """What :meth:`DeliverActivity._record_error` recorded.

    Attributes:
        verdict: the delivery verdict.
        delay_ms: the wait before the next attempt for a rate limit (None: not one).
    """

    verdict: DeliveryVerdict
    delay_ms: int | None = None

"""The ``deliver`` activity itself: open the step, find the artifact, claim the send, send,
and record the answer.

See :mod:`activities.deliver` (steps 0–3).
"""

from __future__ import annotations

import asyncio
import secrets
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.caller import claim_of, open_own_step, require_own_input, require_own_job
from activities.deliver.recording import DeliveryRecords, NotRecorded, Recorded, send_lease_ms, until_recorded
from activities.deliver.sending import (
    SendCut,
    _cut_by_deadline,
    _execution_gone,
    _finish_or_cut,
    _guarded,
    _outlive,
    _recorded,
    _unless_stopped,
)
from activities.deps import ActivityDeps
from activities.errors import (
    attempts_granted,
    barrier_update,
    config_mismatch,
    next_attempt,
    permanent,
    route_failure,
    storage_failure,
)
from activities.heartbeat import Heartbeater
from curaflow.domain.cells import CellStage, CellState, is_terminal
from curaflow.domain.messages import CellUpdate, DeliverInput
from curaflow.domain.models import Artifact, CellSnapshot
from curaflow.domain.reasons import TerminalReason
from curaflow.ledger import cells as ledger_cells
from curaflow.ledger import deliveries as ledger
from curaflow.ledger.artifacts import ArtifactNotInLedger, restore_artifact
from curaflow.ledger.cells import Barrier, StepClaim
from curaflow.ledger.db import LEDGER_ERRORS
from curaflow.ledger.deliveries import Answered, SendClaim
from curaflow.ledger.records import load_cell
from curaflow.observability import metrics
from curaflow.observability.logs import get_logger
from curaflow.outbound import attempt_deadline, in_flight
from curaflow.routes import UnsupportedRoute
from curaflow.routes.base import DeliveryRequest, Route, RouteError

log = get_logger("curaflow.deliver")

#: Longest wait between two claims while another attempt's send of the intent is out
#: (``awaiting``), in seconds: its answer is read within this of being recorded.
AWAIT_POLL_S = 0.5


def attempt_owner() -> str:
    """The running attempt as a send's owner in the ledger:
    ``<run id>:<activity id>:<attempt>:<nonce>`` (Temporal's ids, for an operator to read; a
    new run of the job and every retry is another owner). The random nonce keeps two
    attempts apart whose ids are equal: ``temporal activity reset`` sets the attempt number
    back to 1, so an attempt still sending after a heartbeat timeout and the first attempt
    after a later reset would otherwise share an owner — and the second would take the
    first's send for its own. Each claim draws one (:class:`~curaflow.ledger.deliveries.SendClaim`
    carries the one that claimed to the send's heartbeater)."""
    info = activity.info()
    return f"{info.workflow_run_id}:{info.activity_id}:{info.attempt}:{secrets.token_hex(4)}"


def never_sent(claim: SendClaim | None) -> None:
    """Say, in the attempt's last heartbeat, that its claimed send never left: the
    transaction that claimed it (``claim.decision == "send"``) failed at its end — a
    ``COMMIT`` whose acknowledgement the connection lost, so the claim's fate is unknown to
    this attempt (PostgreSQL restarted or failed over, a proxy cut the connection) — and
    nothing was sent, since a send leaves only once its claim committed.

    The next attempt's claim resolves it by reading the intent, never by assuming
    (:func:`curaflow.ledger.deliveries.claim_send`'s ``answered``): ``sending`` from that
    very send (``attempts`` equal to ``claim.attempts + 1``) is a send that ended with
    nothing posted beyond ``claim.remote_ids`` — sent, not ``ambiguous`` and not waited for;
    anything else (the commit did not land, another claim came since) ignores it. Until
    2026-12-06 the next attempt waited for this attempt's send lease and then took the
    intent for a send that may have landed: on an at-most-once route the cell ended
    ``delivery_unknown``, owner the route, for a work never sent.

    Any other claim (``None``: none returned; or a decision that sends nothing) writes no
    detail. Shape: :meth:`curaflow.ledger.deliveries.Answered.details`, parts the claim's
    ``remote_ids`` (``[]`` for none); no receipt.
    """
    if claim is None or claim.decision != "send" or not claim.idempotency_key:
        return
    unsent = Answered(attempt=claim.attempts + 1, key=claim.idempotency_key, parts=list(claim.remote_ids or []))
    activity.heartbeat(unsent.details())


class DeliverActivity(DeliveryRecords):
    """Holds the worker's :class:`~activities.deps.ActivityDeps` for the ``deliver`` activity."""

    def __init__(self, deps: ActivityDeps) -> None:
        self.deps = deps

    @activity.defn(name="deliver")
    async def deliver(self, inp: DeliverInput) -> CellUpdate:
        """Deliver the cell's work on ``inp.route``.

        Returns:
            The cell afterwards (``submitted`` once every route confirmed).

        Raises:
            ApplicationError: ``foreign_caller`` (non-retryable, nothing done) when the calling
                execution is not the job's own (:func:`activities.caller.require_own_job`).
            ApplicationError: typed by reason code; ``delivery_rejected`` /
                ``delivery_unknown`` are non-retryable; ``delivery_failed`` is retried
                (``next_retry_delay`` from ``retry_after``), and so is
                ``configuration_mismatch`` (this worker does not know the route: one
                attempt, never the cell — :meth:`_unknown_route`).
            ApplicationError: ``step_ended_by_hand`` (non-retryable, nothing claimed) when the
                ledger holds the cell of a job still open with no fetched work: the workflow
                was told otherwise by a step result an operator gave by hand (``temporal
                activity complete``; ``internal_error`` until 2026-12-06). A job that had
                already ended (a reset run) is no one's hand: its terminal cell is returned
                as the ledger holds it, nothing sent, whatever became of its artifact.
        """
        require_own_job(inp.job_id)
        step_claim = claim_of(inp)  # the step's input is the job's, judged in its opening (foreign_caller)
        deps = self.deps
        target = inp.target
        info = activity.info()
        lease_ms = inp.heartbeat_interval_ms * 2
        try:
            route = deps.route(inp.route.name, inp.route.kind)
        except UnsupportedRoute as err:
            raise await self._unknown_route(inp, step_claim, err) from None

        claim: SendClaim | None = None
        try:
            async with deps.pool.acquire() as conn, conn.transaction():
                opened = await open_own_step(
                    conn,
                    inp.job_id,
                    step_claim,
                    stage=CellStage.DELIVERING,
                    attempt=info.attempt,
                    lease_ms=lease_ms,
                    owner=deps.identity,
                )
                cell, barrier, deadline_ms = opened.cell, opened.barrier, opened.deadline_at_ms
                if cell is None:
                    raise permanent(TerminalReason.INTERNAL_ERROR, f"job {inp.job_id} not in the ledger")
                if barrier is not None:
                    return barrier_update(cell, barrier)
                nothing = not opened.ended and (cell.work is None or cell.artifact is None)
                if opened.ended:
                    # The job ended before this step (a reset run, a run added under its id):
                    # its cells are terminal, so the claim only reads the intent (``closed``
                    # or ``done``) — whatever became of the artifact since (the job's end
                    # removed the ledger's copy, retention its description): nothing is sent.
                    claim = await self._claim(conn, inp, route, opened=cell)
                elif cell.work is None or cell.artifact is None:
                    # Nothing fetched to send (a step ended from outside with a result that is
                    # not the ledger's): no intent is claimed, so none reads as possibly sent.
                    await ledger_cells.end_lease(conn, inp.job_id, target.target_id)
                else:
                    held = await asyncio.to_thread(deps.store.holds, cell.artifact)
                    if held:
                        claim = await self._claim(conn, inp, route, opened=cell)
        except BaseException:
            never_sent(claim)
            raise
        if nothing:
            # curaflow's steps return a cell ready to deliver only from the ledger's own move
            # to it (``ledger.cells.artifact_ready``, with the artifact stored): the workflow
            # that scheduled this was told so by a result no worker of curaflow returned.
            raise permanent(
                TerminalReason.STEP_ENDED_BY_HAND,
                f"the job was told the cell's work was fetched, but the ledger holds it {cell.state} with no "
                "fetched work: a step's result came from outside curaflow (temporal activity complete)",
            )
        if opened.ended:  # the claim owns what follows (a terminal cell's is ``closed`` or ``done``)
            assert claim is not None
            return await self._send(inp, route, cell, claim, cell.artifact, lease_ms, deadline_ms)
        transfer: Path | None = None
        artifact = cell.artifact
        try:
            if not held:
                # Fetched by another process (host): deliver the ledger's copy. Copied
                # before the claim, so a failed copy never leaves the intent ``sending``.
                assert artifact is not None
                try:
                    transfer = await asyncio.to_thread(deps.store.transfer_folder)
                    artifact = await self._restore(inp, artifact, transfer, lease_ms)
                except OSError as err:  # this store's disk (the ledger's are not full disks)
                    if (failed := storage_failure(err)) is None:
                        raise
                    raise failed from err
                try:
                    async with deps.pool.acquire() as conn, conn.transaction():
                        claim = await self._claim(conn, inp, route, opened=None)
                except BaseException:
                    never_sent(claim)
                    raise
            assert claim is not None
            if claim.decision == "awaiting":
                claim = await self._await_other_send(inp, route, claim, lease_ms)
            return await self._send(inp, route, cell, claim, artifact, lease_ms, deadline_ms)
        finally:
            if transfer is not None:
                await asyncio.to_thread(deps.store.discard_transfer, transfer)

    async def _unknown_route(self, inp: DeliverInput, claim: StepClaim, err: UnsupportedRoute) -> ApplicationError:
        """The failure of an attempt on a worker that does not know ``inp.route`` (not
        configured here, configured here as another kind than the job names, or its kind
        not registered in this process): one attempt, never
        the cell (:func:`activities.errors.config_mismatch`). Nothing is claimed and the
        cell's lease is not taken; the reserved intent remembers when the next attempt is
        due (:func:`curaflow.ledger.deliveries.hold_unknown_route`, not on the last
        attempt), so a job whose deadline passes meanwhile says what held it. A ledger
        that fails that write costs nothing more: the attempt fails as it would. An input
        that is not the job's writes nothing: the attempt is refused
        (:func:`activities.caller.require_own_input`, one read, on this path only)."""
        await require_own_input(self.deps.pool, inp.job_id, claim)
        failure = config_mismatch("route", inp.route.name, str(err))
        nxt = next_attempt()
        if nxt.delay_ms is not None and not nxt.last:
            try:
                await ledger.hold_unknown_route(
                    self.deps.pool, inp.job_id, inp.target.target_id, inp.route.name, nxt.delay_ms
                )
            except LEDGER_ERRORS as write:
                log.warning(
                    "deliver.hold_not_recorded", job_id=inp.job_id, route=inp.route.name, error=type(write).__name__
                )
        return failure

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

    async def _await_other_send(self, inp: DeliverInput, route: Route, claim: SendClaim, lease_ms: int) -> SendClaim:
        """Wait while another attempt's send of the intent is out, claiming again every
        :data:`AWAIT_POLL_S` (heartbeating meanwhile: a cancel reaches this attempt), and
        return the first claim that is not ``awaiting`` — ``done`` once that send's answer
        is recorded, ``send`` / ``ambiguous`` once its attempt's lease lapsed unanswered,
        ``cancelled`` / ``deadline`` at the job's barrier. A new run of the job meets it
        while the run before still has its send out (a terminating start with the same
        Task, a reset): that send's answer decides, the work is not sent twice."""
        deps = self.deps
        target = inp.target
        log.info(
            "deliver.awaiting_other_send",
            job_id=inp.job_id,
            target_id=target.target_id,
            route=route.name,
            lease_left_ms=claim.wait_ms,
        )
        try:
            async with Heartbeater(
                deps.pool, inp.job_id, target.target_id, inp.heartbeat_interval_ms / 1000, lease_ms
            ) as hb:
                hb.update(stage="delivering", route=route.name, awaiting="another attempt's send of this work")
                while claim.decision == "awaiting":
                    await asyncio.sleep(min(AWAIT_POLL_S, max(claim.wait_ms, 1) / 1000))
                    async with deps.pool.acquire() as conn, conn.transaction():
                        claim = await self._claim(conn, inp, route, opened=None)
        except BaseException:
            never_sent(claim)  # after the heartbeater stopped: its beats carry no such detail
            raise
        return claim

    async def _claim(
        self, conn: asyncpg.Connection, inp: DeliverInput, route: Route, *, opened: CellSnapshot | None
    ) -> SendClaim:
        """Claim the send in the caller's transaction (:func:`curaflow.ledger.deliveries.claim_send`);
        an attempt with nothing to send releases the lease its step took, an ambiguous
        intent is recorded ``delivery_unknown``; ``awaiting`` keeps the lease (the attempt
        waits, :meth:`_await_other_send`)."""
        target = inp.target
        beats = activity.info().heartbeat_details
        claim = await ledger.claim_send(
            conn,
            inp.job_id,
            target.target_id,
            route.name,
            rate_limit_cap_ms=self.deps.settings.delivery.route_rate_limit_cap_ms,
            ambiguous_ok=route.resend_safe,
            opened=opened,
            # What the previous attempt's route answered and the ledger failed to record.
            answered=Answered.parse(beats[0]) if beats else None,
            owner=attempt_owner(),
            lease_ms=send_lease_ms(inp.heartbeat_interval_ms),
        )
        if claim.decision not in ("send", "ambiguous", "awaiting"):
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
            if claim.decision == "done":
                # Confirmed: perhaps only now, from the previous attempt's answer (claim_send).
                await self._confirmed(inp, current)
                if current.work_id:
                    delivery = self._report(inp, current.work_id, "delivered", claim.remote_id)
            return CellUpdate(
                cell=current,
                cancel_requested=claim.decision == "cancelled",
                deadline_passed=claim.decision == "deadline",
                delivery=delivery,
            )
        assert cell.work is not None and artifact is not None  # checked before the claim
        key = claim.idempotency_key or ""
        parts_posted: list[Any] = list(claim.remote_ids or [])
        beating: list[Heartbeater] = []

        async def record_part(parts: list[Any]) -> None:
            # Confirmed by the route: known to this attempt at once (a cancel may cut the
            # record below; the cut or failure recorded then writes them), recorded before
            # the next part leaves, tried again while the ledger fails (NotRecorded stops
            # the send: curaflow's failure). Not published while the send goes on (live).
            parts_posted[:] = parts
            answered = Answered(attempt=claim.attempts + 1, key=key, parts=list(parts))
            await until_recorded(
                lambda: ledger.record_part(deps.pool, key, parts),
                answered,
                hb=beating[0] if beating else None,
                live=True,
            )

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
        try:
            return await self._sent(inp, route, request, claim, lease_ms, deadline_ms, parts_posted, beating)
        except NotRecorded as err:
            # The route answered; the ledger failed to record it (every try): curaflow's
            # failure. What the route answered is this attempt's last heartbeat, for the
            # next attempt to record (claim_send); the ledger's error goes out as it is.
            if err.answered is not None:
                activity.heartbeat(err.answered.details())
            log.error(
                "deliver.answer_not_recorded",
                job_id=inp.job_id,
                target_id=target.target_id,
                route=route.name,
                error=type(err.__cause__).__name__,
                kept=err.answered is not None,
                hint="the route answered but curaflow's database failed to record it; the next attempt records it "
                "(check the database)",
            )
            assert err.__cause__ is not None
            raise err.__cause__ from None

    async def _sent(
        self,
        inp: DeliverInput,
        route: Route,
        request: DeliveryRequest,
        claim: SendClaim,
        lease_ms: int,
        deadline_ms: int | None,
        parts_posted: list[Any],
        beating: list[Heartbeater],
    ) -> CellUpdate:
        """Send ``request`` and record what the route answered (module doc, 2–3)."""
        deps = self.deps
        target = inp.target
        assert request.work is not None
        async with Heartbeater(
            deps.pool,
            inp.job_id,
            target.target_id,
            inp.heartbeat_interval_ms / 1000,
            lease_ms,
            send=(request.idempotency_key, claim.owner) if claim.owner else None,
            send_lease_ms=send_lease_ms(inp.heartbeat_interval_ms),
        ) as hb:
            beating.append(hb)
            hb.update(stage="delivering", route=route.name, work_id=request.work.work_id)
            metrics.record_delivery_attempt(route.name, inp.route.kind)
            with attempt_deadline(deadline_ms), in_flight() as flight:
                # The task copies the context: every exchange of the send ends by the
                # deadline, and tells `flight` whether a request of it is out.
                send = asyncio.ensure_future(_guarded(route, request))
            cancelled = False
            try:
                receipt = await _unless_stopped(send)
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
                    await self._record_cut(inp, request, err, posted=bool(parts_posted), parts=parts_posted, hb=hb)
                    raise asyncio.CancelledError() from err
                except RouteError as err:
                    # Stopped by the cancel, not by the budget: the job's finish ends the cell.
                    await self._record_error(
                        inp, request, err, max_attempts=None, posted=bool(parts_posted), parts=parts_posted, hb=hb
                    )
                    raise asyncio.CancelledError() from err
            except RouteError as err:
                if _cut_by_deadline(err):
                    # The job is over, not the route at fault: the barrier's path, as at
                    # the opening of a step (the finish gives the cell its reason).
                    cut = await self._record_cut(
                        inp, request, err, posted=bool(parts_posted), parts=parts_posted, hb=hb
                    )
                    return barrier_update(cut, Barrier.DEADLINE)
                failed = err

                async def judged() -> Recorded:
                    # The budget as Temporal holds it now (an operator's raise while this
                    # attempt ran), asked inside the recording: a cancel meanwhile does not
                    # leave the answer unrecorded.
                    granted = await attempts_granted(inp.max_attempts, deps.client)
                    return await self._record_error(
                        inp, request, failed, max_attempts=granted, posted=bool(parts_posted), parts=parts_posted, hb=hb
                    )

                recorded, stopped = await _recorded(judged())
                if stopped:
                    raise asyncio.CancelledError() from err
                verdict = recorded.verdict
                if verdict.outcome == "unknown":
                    raise ApplicationError(
                        str(err), type=str(TerminalReason.DELIVERY_UNKNOWN), non_retryable=True
                    ) from err
                if verdict.final and verdict.outcome == "partial":
                    raise permanent(verdict.reason, f"part of the work was posted, then: {err}") from err
                if verdict.final and not err.permanent:
                    raise permanent(verdict.reason, f"no delivery attempt left: {err}") from err
                raise route_failure(
                    err, recorded.delay_ms, cap_ms=deps.settings.delivery.route_rate_limit_cap_ms
                ) from err
            if receipt.duplicate and claim.attempts > 0:
                # "Already had it" after an earlier send of this very key: that send landed.
                receipt.duplicate = False
                receipt.remote_status = receipt.remote_status or "replayed"
            # Recorded while the send's heartbeater beats: its send stays out until its
            # answer is recorded (send_lease_ms); a record that gives up (NotRecorded)
            # releases it as the attempt ends, as a failure's does.
            updated, stopped = await _recorded(self._record_receipt(inp, request, receipt, hb=hb))
        cancelled = cancelled or stopped
        if cancelled and not (is_terminal(updated.state) and updated.state == CellState.SUBMITTED):
            raise asyncio.CancelledError()
        status = "duplicate" if receipt.duplicate else "delivered"
        if is_terminal(updated.state) and updated.state != CellState.SUBMITTED:
            # Confirmed after its cell ended (another route failed for good, another attempt
            # found the intent `sending` after an operator's reset): what landed is recorded
            # (record_delivered); the cell's verdict, written once, stands.
            log.warning(
                "deliver.answered_late",
                job_id=inp.job_id,
                target_id=target.target_id,
                route=route.name,
                work_id=request.work.work_id,
                remote_id=receipt.remote_id,
                cell_reason=updated.reason,
                hint="the route confirmed the work after its cell had ended: the delivery is recorded delivered; "
                "the cell's verdict and the job's outcome record, written at its end, stand",
            )
        return CellUpdate(cell=updated, delivery=self._report(inp, request.work.work_id, status, receipt.remote_id))

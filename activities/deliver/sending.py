"""A send as the deliver activity runs it: how long one that is out may still answer after a
cancel or the deadline (:data:`CANCEL_GRACE_S`), when it is cut (:class:`SendCut`), when
it is outlived (the execution is gone), when a cancel is not passed on at all (an
operator's pause: :func:`_unless_stopped`), and any unexpected failure of a route made a
:class:`~curaflow.routes.base.RouteError`.

See :mod:`activities.deliver` (step 2).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

from temporalio import activity

from activities.deliver.recording import NotRecorded
from curaflow.domain.reasons import TerminalReason
from curaflow.observability.logs import get_logger
from curaflow.outbound import InFlight, TimeLimitExceeded
from curaflow.routes.base import DeliveryReceipt, DeliveryRequest, Route, RouteError

log = get_logger("curaflow.deliver")

T = TypeVar("T")

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


def _paused() -> bool:
    """Whether this attempt's cancel is an operator's pause (``temporal activity pause``,
    the UI's "Pause"), not the job being stopped.

    Temporal's rule for a pause: a running attempt "will run until the next time it
    fails, completes, or times out, at which point the pause will kick in" (the CLI's
    ``activity pause`` help); the SDK still delivers it to the attempt as a cancel, with
    ``activity.cancellation_details().paused``. A cancel of the job reads
    ``cancel_requested``, which wins if both are set.
    """
    details = activity.cancellation_details()
    return details is not None and details.paused and not details.cancel_requested


async def _unless_stopped(send: asyncio.Future[DeliveryReceipt]) -> DeliveryReceipt:
    """``send``'s receipt (or its :class:`RouteError`), as awaiting it shielded would; a
    cancel of this attempt that is an operator's pause (:func:`_paused`) is not passed
    on: the send goes on within its own bounds (the route's timeout, the job's deadline)
    and this attempt ends as it would have without the pause — cutting it would leave a
    request that may have landed, which an at-most-once route never sends again (the work
    ``unknown`` there for good).

    Raises:
        asyncio.CancelledError: any other cancel (the job's cancel or deadline, a reset,
            a heartbeat timeout, the worker's shutdown): the caller finishes or cuts the send.
    """
    while True:
        try:
            return await asyncio.shield(send)
        except asyncio.CancelledError:
            if send.done() and not send.cancelled():
                return send.result()
            if not _paused():
                raise
            info = activity.info()
            log.info("deliver.paused_while_out", job_id=info.workflow_id, attempt=info.attempt)


async def _recorded(recording: Awaitable[T]) -> tuple[T, bool]:
    """Run ``recording`` (what the ledger records of a send's answer) to its end, whatever
    cancel reaches this attempt meanwhile; returns its result and whether a cancel that is
    not an operator's pause (:func:`_paused`) came meanwhile (the caller then ends the
    attempt as cancelled, after the answer is recorded).

    The send's answer is a fact: a cancel passed on to its recording (a pause delivered as
    the answer arrives — a worker thawed after a freeze gets both at once — or the job's
    cancel) left the intent ``sending`` though the answer had come, and a later attempt
    found it ambiguous (an at-most-once route's work ``unknown`` though it was delivered).
    """
    task = asyncio.ensure_future(recording)
    stopped = False
    while True:
        try:
            return await asyncio.shield(task), stopped
        except asyncio.CancelledError:
            if task.done() and not task.cancelled():
                return task.result(), stopped
            stopped = stopped or not _paused()


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
    not help). Its words name only the exception's type: its text may carry a secret URL.
    It is raised from the exception (the deadline's cut is read from it, a traceback shows
    where it failed): Temporal's history and the log lines hold that chain with every
    secret the process holds masked (:mod:`curaflow.observability.secrets`; until
    2026-12-07 whole). A
    part the route confirmed and the ledger failed to record (``on_part`` raising
    :class:`~activities.deliver.recording.NotRecorded`) is no failure of the route: it
    passes as it is.
    """
    try:
        return await route.deliver(request)
    except (RouteError, NotRecorded):
        raise  # NotRecorded: a part the route confirmed that the ledger failed to record: curaflow's
    except Exception as err:
        raise RouteError(
            TerminalReason.INTERNAL_ERROR,
            f"route {route.name} failed unexpectedly: {type(err).__name__}",
            permanent=True,
            ambiguous=True,
        ) from err

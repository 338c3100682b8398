"""What a failed send means for its delivery intent and its cell, judged from the
failure's owner."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from curaflow.domain.reasons import REASONS, Origin, Owner, TerminalReason, parse_reason
from curaflow.domain.verdicts.failures import owner_of

R = TerminalReason


class DeliveryVerdict(BaseModel):
    """What a failed send means (:func:`delivery_verdict`).

    Attributes:
        reason: the cell's reason if the failure is final.
        final: the cell ends now (no further attempt).
        unknown: the request may have landed, or part of the work already did, and the
            route may not re-send it: the intent ends ``unknown`` (it keeps the work
            blocked on that route, so neither a later job nor ``curaflow refusals
            clear`` posts it again).
        outcome: the metric label: ``unknown`` | ``partial`` | ``rejected`` |
            ``abandoned`` | ``failed``.
        owner: who caused the failure (:class:`~curaflow.domain.reasons.Owner`).
        remember_refusal: the work itself can never be sent to this route (owner
            ``work``): the refusal is remembered per (route, work) so later jobs pick
            another work (docs/routes.md "Refusals are remembered"). A route-owned failure never is: the work is
            not used up.
        hold: the route refused the request for good and the refusal is the route's
            (owner ``route``: its destination, rights or limits, or an answer no route
            recognises as the work's): the work is not used up, but it is *held back*
            from that route for a while (:func:`curaflow.ledger.remembered.hold_work`),
            so the next job tries another work instead of sending the same one first for
            ever; the hold ends by itself (a later job sends the work again) or with
            ``curaflow routes resume``.
    """

    reason: TerminalReason
    final: bool
    unknown: bool
    outcome: Literal["unknown", "partial", "rejected", "abandoned", "failed"]
    owner: Owner | None = None
    remember_refusal: bool = False
    hold: bool = False


#: Reasons of a route refusing the work itself (remembered per (route, work)): the
#: delivery reasons whose owner is the work.
REFUSAL_REASONS: frozenset[TerminalReason] = frozenset(
    r for r, info in REASONS.items() if info.owner == Owner.WORK and info.origin == Origin.DELIVERY
)


def delivery_verdict(
    *,
    reason: str,
    permanent: bool,
    ambiguous: bool,
    resend_safe: bool,
    attempt: int,
    max_attempts: int,
    posted: bool = False,
) -> DeliveryVerdict:
    """Decide what a failed delivery attempt means (reference §6; DESIGN.md decision 6),
    judged from the failure's owner (:func:`owner_of`).

    Args:
        reason: the route's reason code for the failure (it names the owner).
        permanent: another attempt cannot succeed (a refusal, a limit).
        ambiguous: the request may have reached the route (a timeout after sending).
        resend_safe: the route tolerates a re-send (stable idempotency key, or
            ``on_ambiguous = "retry"``).
        attempt / max_attempts: this attempt's number (1-based) and the budget
            (:func:`attempt_budget`).
        posted: part of the work is already at the route (a confirmed album or message
            of a multi-part send, or items of an album recorded partly posted before 2026-12-07).

    Rules: an ambiguous send on a route that may not re-send → ``delivery_unknown``; a
    final failure after part of the work was posted → ``delivery_partial`` (intent
    ``unknown``: the route keeps what it has, nothing is refused, nothing is posted
    again); a
    permanent failure → ``rejected``, remembered as a refusal only when its owner is the
    work, the work held back from the route for a while when its owner is the route
    (``hold``); the last attempt of a retryable failure → ``delivery_abandoned``.
    """
    owner = owner_of(reason)
    if ambiguous and not resend_safe:
        return DeliveryVerdict(
            reason=R.DELIVERY_UNKNOWN, final=True, unknown=True, outcome="unknown", owner=Owner.ROUTE
        )
    if permanent or attempt >= max_attempts:
        final_reason = parse_reason(reason) if permanent else R.DELIVERY_ABANDONED
        if posted:
            return DeliveryVerdict(
                reason=R.DELIVERY_PARTIAL, final=True, unknown=True, outcome="partial", owner=Owner.ROUTE
            )
        if permanent:
            return DeliveryVerdict(
                reason=final_reason,
                final=True,
                unknown=False,
                outcome="rejected",
                owner=owner,
                remember_refusal=final_reason in REFUSAL_REASONS,
                hold=owner == Owner.ROUTE,
            )
        return DeliveryVerdict(reason=final_reason, final=True, unknown=False, outcome="abandoned", owner=owner)
    return DeliveryVerdict(reason=parse_reason(reason), final=False, unknown=False, outcome="failed", owner=owner)

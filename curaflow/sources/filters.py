"""Candidate filters of a target, for every source (pure; reference ``pixiv-and-delivery-apis.md`` §1.2).

:func:`reject_reason` returns why a work is not eligible for a cell, or None. Reason
words are ``excluded``, ``unavailable`` (restricted placeholder) and
``filtered:<filter>``; :func:`protocol_reason` maps them onto the protocol's
``Result.filtered[].reason`` words.
"""

from __future__ import annotations

from collections.abc import Callable

from curaflow.domain.messages import TargetSpec
from curaflow.domain.models import Work


def hidden(work: Work) -> bool:
    """The source says the work is not visible (``Work.visible`` false)."""
    return not work.visible


def reject_reason(
    work: Work, target: TargetSpec, excluded: set[str], *, placeholder: Callable[[Work], bool] = hidden
) -> str | None:
    """Why ``work`` cannot be a candidate of ``target``, or None if it is eligible.

    Args:
        work: the work as listed by the source.
        target: the effective target (filters, work type).
        excluded: work ids excluded for this job (protocol ``exclude`` kind ``work``).
        placeholder: the source's rule for a restricted placeholder (``unavailable``);
            default :func:`hidden`.
    """
    f = target.filters
    if work.work_id in excluded:
        return "excluded"
    if placeholder(work):
        return "unavailable"
    if work.work_type != target.work_type:
        return "filtered:work_type"
    if f.min_bookmarks is not None and work.total_bookmarks < f.min_bookmarks:
        return "filtered:min_bookmarks"
    if f.exclude_ai and work.ai_type == 2:
        return "filtered:ai"
    if not f.r18 and work.x_restrict > 0:
        return "filtered:r18"
    if f.max_page_count is not None and work.page_count > f.max_page_count:
        return "filtered:page_count"
    day = (work.create_date or "")[:10]
    if f.start_date and day and day < f.start_date:
        return "filtered:date"
    if f.end_date and day and day > f.end_date:
        return "filtered:date"
    return None


def protocol_reason(reason: str) -> str:
    """Map a rejection word onto ``duplicate | excluded | invalid | unavailable | other``
    (``unusable``, what the source sent for a work that cannot be used, is ``invalid``;
    ``released``, ``unrecognised`` and ``hidden`` — a work that cannot be had for now, or
    that the source hides from the account it was asked with — ``unavailable``;
    ``in_flight``, a work another open job holds on a route, ``duplicate``)."""
    if reason in ("duplicate", "excluded", "unavailable", "invalid"):
        return reason
    if reason == "in_flight":
        return "duplicate"
    if reason == "unusable":
        return "invalid"
    if reason in ("released", "unrecognised", "hidden"):  # cannot be had now: released, held back, hidden
        return "unavailable"
    return "other"

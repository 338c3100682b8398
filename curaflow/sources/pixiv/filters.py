"""Pixiv's candidate filters: the generic ones (:mod:`curaflow.sources.filters`) with
Pixiv's restricted placeholder (``visible: false``, a ``limit_*`` image:
:func:`~curaflow.sources.pixiv.client.is_placeholder`) told by whose it is: ``unavailable``
when it says the work itself cannot be had (``limit_unknown``: deleted or made private),
else ``hidden`` — hidden from this account (its display settings, its relation to the
artist, or a placeholder never seen: :func:`~curaflow.sources.pixiv.client.hidden_from_account`),
a verdict that does not last (:data:`~curaflow.sources.pixiv.frontier.LASTING_REASONS`)."""

from __future__ import annotations

from typing import Any

from curaflow.domain.messages import TargetSpec
from curaflow.domain.models import Work
from curaflow.sources import filters
from curaflow.sources.filters import protocol_reason
from curaflow.sources.pixiv.client import hidden_from_account, is_placeholder


def stated_fields(target: TargetSpec) -> tuple[str, ...]:
    """The fields of an app-api ``illust`` that ``target``'s filters read where an absent
    one lets the work through or decides a verdict that lasts, which a listing must
    therefore state (2026-12-06), one for each filter that reads one
    (:func:`curaflow.sources.filters.reject_reason`):

    * ``total_bookmarks`` under ``min_bookmarks`` (absent: 0 — a ``filtered:min_bookmarks``
      that lasts once the work has settled, :func:`~curaflow.sources.pixiv.frontier.lasting`:
      the target's frontier passed it for good, whatever its bookmarks);
    * ``x_restrict`` unless the target takes R-18 (``r18`` false, the default; absent: 0,
      all ages — what may be R-18 / R-18G was delivered to a target refusing it);
    * ``illust_ai_type`` under ``exclude_ai`` (absent: 0, "not stated" — what may be AI was
      delivered);
    * ``page_count`` under ``max_page_count`` (absent with no page listed: one page;
      ``meta_pages`` listing the pages states it);
    * ``create_date`` under ``start_date`` / ``end_date``: absent or not read
      (:func:`~curaflow.sources.pixiv.client.iso_create_date` None), the work was in every
      window;
    * ``visible`` for every target: the placeholder rule
      (:func:`~curaflow.sources.pixiv.client.is_placeholder`) reads it and the listed
      images; absent, the work was read as visible (2026-12-07) — what the source may hide
      from the account was a candidate. A ``limit_*`` image states it without ``visible``
      (:func:`unstated`).

    The app-api lists every work with all of them. A listing without one (the field renamed
    or dropped, a proxy's copy) says nothing of it: such a work is examined ``invalid`` in
    that job instead (:func:`unstated`, applied by
    :func:`~curaflow.sources.pixiv.scan.pages._parse_page`), a verdict that does not last —
    never a candidate, and the next job reads it again. A filter that lets every value
    through (no ``min_bookmarks`` …, ``r18`` true) asks for no field: the work is read as
    before. ``filtered:work_type`` reads no field of the listing (a Pixiv work is an
    illustration)."""
    f = target.filters
    fields = (
        ("visible", True),
        ("total_bookmarks", f.min_bookmarks is not None),
        ("x_restrict", not f.r18),
        ("illust_ai_type", f.exclude_ai),
        ("page_count", f.max_page_count is not None),
        ("create_date", bool(f.start_date or f.end_date)),
    )
    return tuple(name for name, read in fields if read)


def unstated(illust: dict[str, Any], work: Work, stated: tuple[str, ...]) -> bool:
    """Whether the listing ``illust`` (an app-api ``illust`` object, read as ``work`` by
    :func:`~curaflow.sources.pixiv.client.parse_work`) leaves a field of ``stated``
    (:func:`stated_fields`) unsaid — owner of what states a field (2026-12-07):

    * ``create_date``: a date curaflow reads (``work.create_date`` not None:
      :func:`~curaflow.sources.pixiv.client.iso_create_date`), not the key alone;
    * ``visible``: the key, or a ``limit_*`` image the listing shows (a placeholder
      whatever ``visible`` would say: :func:`~curaflow.sources.pixiv.client.is_placeholder`
      of a work read as visible);
    * ``page_count``: the key, or ``meta_pages`` listing the pages (at least one: the
      count ``parse_work`` read, ``work.page_count``, is theirs; both stated and
      disagreeing never reach here — ``InvalidWork``). Until 2026-12-07 a work whose
      ``meta_pages`` listed its pages was examined ``invalid`` under ``max_page_count``
      without ``page_count``. An empty ``meta_pages`` (Pixiv's for one page, and what a
      listing that dropped the pages shows), absent or null, states no count;
    * any other: the key.

    A membership test per field (the page's own dict) on a listing that states them all."""
    for field in stated:
        if field == "create_date":
            if work.create_date is None:
                return True
        elif field in illust:
            continue
        elif field == "visible":
            if not is_placeholder(work):
                return True
        elif field == "page_count":
            if not illust.get("meta_pages"):
                return True
        else:
            return True
    return False


def reject_reason(work: Work, target: TargetSpec, excluded: set[str]) -> str | None:
    """Why ``work`` cannot be a candidate of ``target`` on Pixiv, or None
    (:func:`curaflow.sources.filters.reject_reason` with Pixiv's placeholder rule; a
    placeholder not positively the work's is ``hidden``, not ``unavailable``)."""
    reason = filters.reject_reason(work, target, excluded, placeholder=is_placeholder)
    if reason == "unavailable" and hidden_from_account(work):
        return "hidden"
    return reason


__all__ = ["protocol_reason", "reject_reason", "stated_fields", "unstated"]

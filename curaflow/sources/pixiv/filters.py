"""Pixiv's candidate filters: the generic ones (:mod:`curaflow.sources.filters`) with
Pixiv's restricted placeholder (``visible: false``, a ``limit_*`` image:
:func:`~curaflow.sources.pixiv.client.is_placeholder`) told by whose it is: ``unavailable``
when it says the work itself cannot be had (``limit_unknown``: deleted or made private),
else ``hidden`` — hidden from this account (its display settings, its relation to the
artist, or a placeholder never seen: :func:`~curaflow.sources.pixiv.client.hidden_from_account`),
a verdict that does not last (:data:`~curaflow.sources.pixiv.frontier.LASTING_REASONS`)."""

from __future__ import annotations

from curaflow.domain.messages import TargetSpec
from curaflow.domain.models import Work
from curaflow.sources import filters
from curaflow.sources.filters import protocol_reason
from curaflow.sources.pixiv.client import hidden_from_account, is_placeholder


def stated_fields(target: TargetSpec) -> tuple[str, ...]:
    """The fields of an app-api ``illust`` that a lasting verdict of ``target``'s filters
    reads, which a listing must therefore state (2026-12-06): ``total_bookmarks`` under
    ``min_bookmarks``.

    The app-api lists every work with its ``total_bookmarks``. A listing without it (the
    field renamed or dropped, a proxy's copy) says nothing of the work's bookmarks, and the
    0 a parse gives decided a ``filtered:min_bookmarks`` that lasts once the work has
    settled (:func:`~curaflow.sources.pixiv.frontier.lasting`: the target's frontier
    passed it for good, whatever its bookmarks). Such a work is examined ``invalid`` in
    that job instead (:func:`~curaflow.sources.pixiv.scan.pages._parse_page`), a verdict
    that does not last: the next job reads it again. A target without ``min_bookmarks`` is
    not concerned (the work is read as before)."""
    return ("total_bookmarks",) if target.filters.min_bookmarks is not None else ()


def reject_reason(work: Work, target: TargetSpec, excluded: set[str]) -> str | None:
    """Why ``work`` cannot be a candidate of ``target`` on Pixiv, or None
    (:func:`curaflow.sources.filters.reject_reason` with Pixiv's placeholder rule; a
    placeholder not positively the work's is ``hidden``, not ``unavailable``)."""
    reason = filters.reject_reason(work, target, excluded, placeholder=is_placeholder)
    if reason == "unavailable" and hidden_from_account(work):
        return "hidden"
    return reason


__all__ = ["protocol_reason", "reject_reason", "stated_fields"]

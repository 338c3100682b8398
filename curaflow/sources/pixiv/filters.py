"""Pixiv's candidate filters: the generic ones (:mod:`curaflow.sources.filters`) with
Pixiv's restricted placeholder (``visible: false``, a ``limit_*`` image:
:func:`~curaflow.sources.pixiv.client.is_placeholder`) as ``unavailable``."""

from __future__ import annotations

from curaflow.domain.messages import TargetSpec
from curaflow.domain.models import Work
from curaflow.sources import filters
from curaflow.sources.filters import protocol_reason
from curaflow.sources.pixiv.client import is_placeholder


def reject_reason(work: Work, target: TargetSpec, excluded: set[str]) -> str | None:
    """Why ``work`` cannot be a candidate of ``target`` on Pixiv, or None
    (:func:`curaflow.sources.filters.reject_reason` with Pixiv's placeholder rule)."""
    return filters.reject_reason(work, target, excluded, placeholder=is_placeholder)


__all__ = ["protocol_reason", "reject_reason"]

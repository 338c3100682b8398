"""Which verdicts on a work hold for later jobs of the same fingerprint (the known run's rule).

See :mod:`curaflow.sources.pixiv.frontier` ("What is remembered").
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from curaflow.domain.models import Work

#: A work below ``min_bookmarks`` counts as ruled out for good once it is this old (days):
#: a work gathers most of its bookmarks in its first days.
SETTLE_DAYS = 7


#: Rejections that hold whatever happens later (see the module doc). Not ``invalid``: an
#: item whose fields curaflow does not recognise says nothing of the work (a shape never
#: seen; until 2026-12-05 it lasted, and the known run passed the work for good). Not
#: ``in_flight``: a work another open job holds (reserved, being sent) and may still
#: release (until 2026-12-05 it was told ``duplicate``, and the known run passed it for good).
#: Not ``hidden``: a placeholder that hides the work from the *account* (its display settings,
#: its relation to the artist, a ``limit_*`` name never seen:
#: :func:`~curaflow.sources.pixiv.client.hidden_from_account`) says nothing lasting of the
#: work — the account's settings may change. Until 2026-12-06 it was ``unavailable`` and the
#: known run passed it for good. ``unavailable`` stays: ``limit_unknown`` (deleted or made
#: private), and works found gone when fetched.
LASTING_REASONS = frozenset(
    {
        "duplicate",
        "refused",
        "unavailable",
        "unusable",
        "filtered:work_type",
        "filtered:ai",
        "filtered:r18",
        "filtered:page_count",
        "filtered:date",
    }
)


def settled_before(now: datetime) -> str:
    """The day (``YYYY-MM-DD``, UTC) before which a work has settled its bookmarks at ``now``
    (:data:`SETTLE_DAYS` earlier; :func:`lasting`)."""
    return (now.astimezone(UTC) - timedelta(days=SETTLE_DAYS)).date().isoformat()


def lasting(reason: str | None, work: Work, settled_before: str | None) -> bool:
    """Whether a verdict on ``work`` holds for later jobs of the same fingerprint.

    Args:
        reason: the scan's rejection word, None for a candidate (never lasting).
        settled_before: works created before this day (``YYYY-MM-DD``, UTC) have settled
            bookmark counts: a ``min_bookmarks`` rejection of one is lasting. None: never.
    """
    if reason is None:
        return False
    if reason in LASTING_REASONS:
        return True
    if reason == "filtered:min_bookmarks" and settled_before:
        day = (work.create_date or "")[:10]
        return bool(day) and day < settled_before
    return False

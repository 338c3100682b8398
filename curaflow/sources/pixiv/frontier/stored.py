"""A target's frontier as the ledger keeps it: its key (the fingerprint) and its stored JSON.

See :mod:`curaflow.sources.pixiv.frontier` ("Stored format").
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from curaflow.domain.messages import TargetSpec
from curaflow.sources.pixiv.client.works import iso_create_date
from curaflow.sources.pixiv.frontier.models import DATE_SORTS, Frontier, Mark, counted_unavailable


def fingerprint(target: TargetSpec) -> str:
    """The identity of what a target's scan sees: change any part and the frontier starts afresh.

    Covers the account (what it may see, what is unavailable to it), the work type, every
    query field, every filter and the routes (what counts as delivered); not the
    candidate bound, nor a task's own exclusions.

    Returns:
        A hex SHA-256 of the canonical JSON of those fields.
    """
    view = {
        "account": target.account,
        "work_type": target.work_type,
        "query": target.query.model_dump(mode="json"),
        "filters": target.filters.model_dump(mode="json"),
        "routes": sorted(r.name for r in target.routes),
    }
    return hashlib.sha256(json.dumps(view, sort_keys=True, ensure_ascii=True).encode()).hexdigest()


def applies(target: TargetSpec) -> bool:
    """Whether ``target``'s scans keep a frontier: tag searches in a known sort."""
    return target.query.mode == "search" and target.query.sort in (*DATE_SORTS, "popular_desc")


def key(target: TargetSpec) -> str | None:
    """The key ``target``'s frontier is stored under: its :func:`fingerprint`, or None when
    its scans keep no frontier (:func:`applies`: rankings, unknown sorts)."""
    return fingerprint(target) if applies(target) else None


def read(stored: dict[str, Any] | None, sort: str) -> Frontier:
    """The frontier a scan in ``sort`` starts from, read from what the ledger stored.

    Args:
        stored: the stored JSON (:class:`Frontier`'s, as every version wrote it), or None
            / ``{}`` when nothing is stored yet.
        sort: the target's sort.

    Returns:
        The stored frontier; a fresh one (the walk's start) when nothing is stored, the
        stored one is of another sort, it is not a shape this version reads — a frontier
        is advisory: losing it costs pages, never a duplicate —, it may have passed a
        work hidden from the account for good (:func:`passed_hidden`), or it marks a work
        at a day no work has (:func:`marked_where_no_work_is`).
    """
    if stored:
        try:
            frontier = Frontier.model_validate(stored)
        except ValueError:
            frontier = None
        if (
            frontier is not None
            and frontier.sort == sort
            and not passed_hidden(stored, frontier)
            and not marked_where_no_work_is(frontier)
        ):
            return frontier
    return Frontier(sort=sort)


#: The marks of a stored frontier (:class:`Frontier`'s fields holding a :class:`Mark`).
MARKS = ("head", "known", "sweep", "head_sweep", "head_run", "head_sweep_top", "seen", "tail_sweep")


def marked_where_no_work_is(frontier: Frontier) -> bool:
    """Whether one of ``frontier``'s marks (:data:`MARKS`) carries a creation date
    :func:`~curaflow.sources.pixiv.client.iso_create_date` does not read (before Pixiv
    opened, days past the clock, not a date). Until 2026-12-07 a listing's lying date
    (``9999-12-31``) was read and a mark could be stored there: a ``date_asc`` job jumped
    to that day and failed on its empty answer every job, a ``date_desc`` head in the
    future passed every new work, and a ``duration`` took the mark for out of reach. Such
    a frontier is read as a fresh start (pages, never a duplicate); no mark written since
    carries such a date (an undated work is never a mark)."""
    for name in MARKS:
        mark = getattr(frontier, name)
        if isinstance(mark, Mark) and mark.create_date and iso_create_date(mark.create_date) is None:
            return True
    return False


def passed_hidden(stored: dict[str, Any], frontier: Frontier) -> bool:
    """Whether a stored frontier may have passed a work hidden from the account for good:
    written before 2026-12-06 (no ``hidden_apart`` in its JSON), when such a work was told
    ``unavailable`` — a lasting verdict —, and its runs (the known run, a capped head
    phase's or a crowded day's far end's run) counted an ``unavailable``
    (:func:`~curaflow.sources.pixiv.frontier.models.counted_unavailable`); or left by a walk
    that began from such a frontier, checkpointed by an earlier release and resumed by this
    one (``hidden_apart`` false: :class:`~curaflow.sources.pixiv.frontier.FrontierWalk`).
    Such a frontier is read as a fresh start once (the next one written is apart): the work
    is met again, at the cost of one walk from the start (pages, never a duplicate). One
    with no ``unavailable`` in its runs passed none and is read as stored."""
    if "hidden_apart" in stored:
        return not frontier.hidden_apart
    return counted_unavailable(frontier.model_dump())


def describe(stored: dict[str, Any]) -> str | None:
    """One line for operators (``curaflow frontiers list``): the sort, the head, the end of
    the known run, a capped scan's stop (and a capped head phase's, and where a crowded
    day's second walk stopped, when set); None when
    ``stored`` is not a frontier of this module's shape."""
    try:
        frontier = Frontier.model_validate(stored)
    except ValueError:
        return None

    def mark(m: Mark | None) -> str:
        return f"{m.work_id} ({m.day or m.index})" if m is not None else "-"

    line = (
        f"{frontier.sort}: head {mark(frontier.head)}, known up to {mark(frontier.known)}, "
        f"capped scan stopped at {mark(frontier.sweep)}"
    )
    if frontier.head_sweep is not None:
        line += f", capped head phase stopped at {mark(frontier.head_sweep)}"
    if frontier.tail_sweep is not None:
        line += f", crowded day's far end read to {mark(frontier.tail_sweep)}"
    return line

"""The retrieval view: the parameters of every request of a scan, from the target and the
scan's date window.

See :mod:`curaflow.sources.pixiv.scan` ("The retrieval view").
"""

from __future__ import annotations

from typing import Any

from curaflow.domain.messages import TargetSpec
from curaflow.sources.pixiv.client import PixivClient, offset_of
from curaflow.sources.pixiv.scan.checkpoint import ScanCheckpoint

REVERSED = {"date_desc": "date_asc", "date_asc": "date_desc"}


def search_word(target: TargetSpec) -> str:
    """The app-api ``word`` for a target's tags: AND by spaces, OR with `` OR ``."""
    joiner = " OR " if target.query.relation == "or" and len(target.query.tags) > 1 else " "
    return joiner.join(target.query.tags)


def retrieval_params(
    target: TargetSpec, window: dict[str, str] | None = None, *, sort: str | None = None
) -> dict[str, Any]:
    """The search parameters of every page of a scan of ``target`` (its retrieval view).

    Args:
        target: the effective target: every query field and date filter is sent.
        window: the scan's date window (``start_date`` / ``end_date``, ``YYYY-MM-DD``);
            it narrows the target's dates and never widens them (the later start and
            the earlier end win).
        sort: the walk's order when it differs from the target's (the second walk over a
            crowded day runs in reverse).

    Returns:
        Keyword arguments of :meth:`PixivClient.search_illust` (without ``offset``):
        ``word``, ``search_target``, ``sort``, and ``duration`` / ``start_date`` /
        ``end_date`` when set.
    """
    q = target.query
    window = window or {}
    starts = [d for d in (target.filters.start_date, window.get("start_date")) if d]
    ends = [d for d in (target.filters.end_date, window.get("end_date")) if d]
    params: dict[str, Any] = {"word": search_word(target), "search_target": q.search_target, "sort": sort or q.sort}
    if q.duration:
        params["duration"] = q.duration
    if starts:
        params["start_date"] = max(starts)
    if ends:
        params["end_date"] = min(ends)
    return params


async def _request(client: PixivClient, target: TargetSpec, cp: ScanCheckpoint) -> dict[str, Any]:
    """The next page: always the full retrieval view; ``next_url`` only gives the offset."""
    q = target.query
    offset = offset_of(cp.next_url) if cp.started else 0
    if q.mode == "ranking":
        return await client.ranking(q.ranking_mode, q.ranking_date, offset=offset)
    if cp.tail is not None:
        day = {"start_date": cp.tail.day, "end_date": cp.tail.day}
        params = retrieval_params(target, {**cp.window, **day}, sort=REVERSED[q.sort])
    else:
        params = retrieval_params(target, cp.window)
    return await client.search_illust(**params, offset=offset)


def _empty_window(target: TargetSpec, cp: ScanCheckpoint) -> bool:
    """True when the next pass's dates are an empty range (never asked: the API may refuse it)."""
    if target.query.mode != "search" or cp.tail is not None:
        return False
    params = retrieval_params(target, cp.window)
    return bool(params.get("start_date") and params.get("end_date") and params["start_date"] > params["end_date"])

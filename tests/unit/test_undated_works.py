"""A work a date-sorted search lists without a creation date curaflow reads costs that work
one examination, never the page or the target (DESIGN.md "The scan frontier of a target").

Until 2026-12-05 such an item (``create_date`` of another format, a number, null) failed
the whole page: the attempt was retried and asked the same page, so one such work on a
target's pages failed every date-sorted job of the target for as long as Pixiv listed it.
Now it is placed by its neighbours (the list is sorted by date: its date lies between the
dates of the items before and after it), examined ``invalid`` (a verdict that does not
last: the next job reads it again), and the walk goes on. A placed work is never a mark of
the frontier, never ends a head phase or a crowded day's second walk, and is passed over
at a mark only when a dated work after it is. A page on which no item is dated is still
the source's failure (retried).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
from curaflow.sources.errors import SourceError
from curaflow.sources.pixiv.frontier import Frontier
from curaflow.sources.pixiv.replay.data import DeepSet
from curaflow.sources.pixiv.scan import ScanCheckpoint
from tests.fakes.replay import Faults
from tests.frontier_support import scan_on_replay
from tests.unit.test_frontier_seams import COUNT, TAG, _deep, _id, _place

DATE_SORTS = ["date_desc", "date_asc"]

#: ``create_date`` values curaflow does not read as a date.
UNDATED: dict[str, Any] = {
    "a number": 1733400000,
    "another format": "05/12/2026 10:00",
    "null": None,
    "a word": "yesterday",
}


def _target(sort: str) -> TargetSpec:
    return TargetSpec(target_id="t", query=TargetQuery(tags=[TAG], sort=sort), filters=TargetFilters(), scan_limit=1)  # type: ignore[arg-type]


def _days(per_day: int) -> DeepSet:
    """The 100 works, ``per_day`` a day."""
    return DeepSet(tag=TAG, count=COUNT, per_day=per_day, last_day="2025-02-04")


def _jobs(
    sort: str, undated: dict[int, Any], jobs: int, *, until: int | None = None, cap: int = 1000, per_day: int = COUNT
) -> list[ScanCheckpoint]:
    """Jobs of one target over 100 works, every work delivered before but those
    ``undated`` (by place: the ``create_date`` they are listed with) and place 70. The
    works are listed undated by the first ``until`` jobs (default: all). Each job delivers
    its candidate and starts from the frontier the last left."""
    deep = _days(per_day)
    faults = Faults(deep=deep)
    faults.mutate = {_id(sort, deep, p): {"create_date": v} for p, v in undated.items()}
    delivered = {p for p in range(deep.count) if p not in undated and p != 70}
    frontier = Frontier(sort=sort)
    out = []
    for job in range(jobs):
        if until is not None and job >= until:
            faults.mutate = {}

        async def known(ids: list[str], delivered: set[int] = delivered) -> dict[str, str]:
            return {w: "duplicate" for w in ids if _place(sort, deep, w) in delivered}

        cp = asyncio.run(scan_on_replay(faults, _target(sort), known, frontier=frontier, max_examined=cap))
        delivered |= {_place(sort, deep, w.work_id) for w in cp.candidates}
        assert cp.frontier is not None
        frontier = Frontier.model_validate(cp.frontier)
        out.append(cp)
    return out


@pytest.mark.parametrize("sort", DATE_SORTS)
@pytest.mark.parametrize("shape", list(UNDATED))
@pytest.mark.parametrize("place", [0, 28, 29, 30, 40, 69], ids=lambda p: f"place{p}")
def test_an_undated_work_costs_that_work_alone_and_is_read_again_next_job(sort: str, shape: str, place: int) -> None:
    # Place ``place`` is listed undated by the first job: the page was the source's
    # failure, every attempt. Now the job finds place 70, the undated work examined
    # ``invalid``; the next job (the work now dated) finds it.
    deep = _deep()
    seen = _jobs(sort, {place: UNDATED[shape]}, 3, until=1)
    first = seen[0]
    assert [_place(sort, deep, w.work_id) for w in first.candidates] == [70]
    assert first.report.reasons.get("invalid") == 1, first.report.reasons
    later = [_place(sort, deep, w.work_id) for cp in seen[1:] for w in cp.candidates]
    assert place in later, later


@pytest.mark.parametrize("sort", DATE_SORTS)
@pytest.mark.parametrize("place", [0, 29, 40, 69, 71], ids=lambda p: f"place{p}")
@pytest.mark.parametrize("per_day", [COUNT, 7, 1])
def test_a_work_listed_undated_for_good_never_blocks_the_target(sort: str, place: int, per_day: int) -> None:
    # The work stays undated job after job: every job ends (no attempt fails), place 70
    # is found once, the undated work is examined by every job that reaches it and is
    # never passed for good (it is read again as long as it is listed so). Works one day
    # apart too: the work's day lies between its neighbours', not known.
    deep = _days(per_day)
    seen = _jobs(sort, {place: 12345}, 4, per_day=per_day)
    found = [_place(sort, deep, w.work_id) for cp in seen for w in cp.candidates]
    assert found == [70], found
    assert all(cp.report.reasons.get("invalid", 0) <= 1 for cp in seen)
    assert seen[-1].report.reasons.get("invalid") == 1, [cp.report.reasons for cp in seen]
    frontier = Frontier.model_validate(seen[-1].frontier)
    for mark in (frontier.head, frontier.known, frontier.sweep, frontier.head_sweep, frontier.seen):
        assert mark is None or mark.work_id != _id(sort, deep, place)


@pytest.mark.parametrize("sort", DATE_SORTS)
@pytest.mark.parametrize("cap", [5, 29, 31, 45])
@pytest.mark.parametrize("per_day", [COUNT, 7])
def test_capped_jobs_walk_past_an_undated_work(sort: str, cap: int, per_day: int) -> None:
    # Capped jobs: each goes on from where the last stopped; the undated work at place 30
    # never stops the walk, and place 70 is reached.
    deep = _days(per_day)
    seen = _jobs(sort, {30: "x"}, 40, cap=cap, per_day=per_day)
    found = [_place(sort, deep, w.work_id) for cp in seen for w in cp.candidates]
    assert 70 in found, found


@pytest.mark.parametrize("sort", DATE_SORTS)
def test_a_page_with_no_dated_work_is_the_sources_failure(sort: str) -> None:
    deep = _deep()
    faults = Faults(deep=deep)
    faults.mutate = {_id(sort, deep, p): {"create_date": None} for p in range(COUNT)}

    async def known(ids: list[str]) -> dict[str, str]:
        return {}

    with pytest.raises(SourceError) as err:
        asyncio.run(scan_on_replay(faults, _target(sort), known, frontier=Frontier(sort=sort)))
    assert err.value.reason.value == "remote_http_error" and err.value.retryable


@pytest.mark.parametrize("per_day", [COUNT, 7])
@pytest.mark.parametrize("undated_at", [0, 5, 9, 11, 29])
def test_an_undated_work_above_the_head_never_ends_the_head_phase(per_day: int, undated_at: int) -> None:
    # date_desc: the first job sees places 30–99 (0–29 not listed yet) and delivers 70;
    # the frontier's head is place 30. Then 0–29 are listed (new above the head), place
    # ``undated_at`` without a date, place 10 the one candidate: the head phase reads down
    # to place 30 whatever the placed date says, so place 10 is found; the head never
    # moves over the undated work.
    sort = "date_desc"
    deep = _days(per_day)
    faults = Faults(deep=deep)
    faults.deleted_works = {_id(sort, deep, p) for p in range(30)}
    delivered = {p for p in range(deep.count) if p not in (10, 70)}

    async def known(ids: list[str]) -> dict[str, str]:
        return {w: "duplicate" for w in ids if _place(sort, deep, w) in delivered}

    first = asyncio.run(scan_on_replay(faults, _target(sort), known, frontier=Frontier(sort=sort)))
    assert [_place(sort, deep, w.work_id) for w in first.candidates] == [70]
    delivered.add(70)
    frontier = Frontier.model_validate(first.frontier)
    assert frontier.head is not None and _place(sort, deep, frontier.head.work_id) == 30
    faults.deleted_works = set()
    faults.mutate = {_id(sort, deep, undated_at): {"create_date": "?"}}
    found: list[int] = []
    for _ in range(3):
        cp = asyncio.run(scan_on_replay(faults, _target(sort), known, frontier=frontier))
        found += [_place(sort, deep, w.work_id) for w in cp.candidates]
        delivered |= set(found)
        frontier = Frontier.model_validate(cp.frontier)
        assert frontier.head is not None and _place(sort, deep, frontier.head.work_id) > undated_at
    assert found[:1] == [10], found

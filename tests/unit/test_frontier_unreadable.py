"""An item of a search page with no id curaflow reads costs its place, never the target's
sweep (DESIGN.md "The scan frontier of a target": "A work listed in a shape never seen is
no verdict on it").

Until 2026-12-05 such an item (``frontier.unreadable``) made the walk record nothing as
examined from its page on (``seam_gap``): a scan capped at ``pixiv.max_examined`` on that
page left no sweep past it, so when more than the cap of works ruled out followed it, every
job of the target read the same page again to the same cap and ended without a candidate —
the target blocked for as long as Pixiv listed the item so. Scans run against the replay
app in process; every work is delivered before but the candidates named.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
from curaflow.sources.pixiv.frontier import Frontier
from curaflow.sources.pixiv.scan import ScanCheckpoint
from tests.fakes.replay import Faults
from tests.frontier_support import scan_on_replay
from tests.unit.test_frontier_seams import SORTS, TAG, _deep, _id, _place

#: Items of no id curaflow reads (``InvalidWork`` without a work id).
NO_ID: dict[str, dict[str, Any]] = {
    "an id not of pixiv's shape": {"id": -5},
    "an id of text": {"id": "abc"},
    "no id": {"id": None},
}


def _target(sort: str) -> TargetSpec:
    return TargetSpec(
        target_id="t",
        query=TargetQuery(tags=[TAG], sort=sort),  # type: ignore[arg-type]
        filters=TargetFilters(),
        scan_limit=1,
    )


def _jobs(
    sort: str,
    unread: int,
    fields: dict[str, Any],
    candidates: set[int],
    *,
    cap: int,
    jobs: int,
    readable_from: int | None = None,
) -> list[tuple[list[int], ScanCheckpoint]]:
    """Jobs of one target over 100 works on one day, each capped at ``cap`` works and
    starting from the frontier the last left: the work at place ``unread`` is listed with
    ``fields`` (no id curaflow reads) — from job ``readable_from`` on (0-based) as
    recorded; every work but ``candidates`` (and the unread one) was delivered before.
    Each job delivers its candidate. Returns each job's candidates (places) and checkpoint."""
    deep = _deep()
    faults = Faults(deep=deep)
    faults.mutate = {_id(sort, deep, unread): fields}
    delivered = {p for p in range(deep.count) if p not in candidates and p != unread}
    frontier = Frontier(sort=sort)
    out = []
    for job in range(jobs):
        if readable_from is not None and job >= readable_from:
            faults.mutate = {}

        async def known(ids: list[str], delivered: set[int] = delivered) -> dict[str, str]:
            return {w: "duplicate" for w in ids if _place(sort, deep, w) in delivered}

        cp = asyncio.run(scan_on_replay(faults, _target(sort), known, frontier=frontier, max_examined=cap))
        found = [_place(sort, deep, w.work_id) for w in cp.candidates]
        delivered |= set(found)
        assert cp.frontier is not None
        frontier = Frontier.model_validate(cp.frontier)
        out.append((found, cp))
    return out


@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize("shape", list(NO_ID))
@pytest.mark.parametrize("unread", [40, 29])
def test_a_capped_target_is_not_stopped_for_good_behind_an_item_with_no_id(sort: str, shape: str, unread: int) -> None:
    # The item at place 40 (or 29: the last of a page), the works after it delivered, the
    # one candidate at place 90: at a cap of 5 every job stopped on the item's page (no
    # sweep past it) before 2026-12-05, and the target never got its candidate.
    seen = _jobs(sort, unread, NO_ID[shape], {90}, cap=5, jobs=40)
    found = [p for places, _ in seen for p in places]
    assert 90 in found, [cp.frontier for _, cp in seen[-2:]]
    # Bounded: the jobs go on from each other's stop (about 100 / 5 of them), and the item
    # is counted once a job (asked again with the page's edge, never parsed twice).
    assert next(job for job, (places, _) in enumerate(seen) if 90 in places) < 25
    assert all(cp.report.reasons.get("invalid", 0) <= 1 for _, cp in seen)


@pytest.mark.parametrize("sort", SORTS)
def test_the_item_is_read_once_it_becomes_readable(sort: str) -> None:
    # The item is listed with no id to the first 12 jobs (they get past it), then as recorded:
    # it is not delivered, so a later job must find it.
    seen = _jobs(sort, 40, NO_ID["no id"], {90}, cap=5, jobs=40, readable_from=12)
    found = [p for places, _ in seen for p in places]
    assert 90 in found
    assert 40 in found, found
    assert found.count(40) == 1


@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize("unread", [3, 29, 30])
def test_an_uncapped_walk_reads_the_item_again_once_it_becomes_readable(sort: str, unread: int) -> None:
    # Uncapped, every job reads on to the end of results: the item, listed with no id to the
    # first three jobs, is found by the fourth. On date_desc it was found by none (60 jobs):
    # at place 29 — the last of its page — its break was taken before the page's first work
    # (the known run then went over it), and just above the head's mark (3, 30) no work after
    # it was examined in the head phase, so the head moved up over it.
    seen = _jobs(sort, unread, NO_ID["no id"], set(), cap=1000, jobs=5, readable_from=3)
    found = [job for job, (places, _) in enumerate(seen) if unread in places]
    assert found == [3], found


def test_an_item_with_no_id_is_never_a_pages_edge() -> None:
    # A page ending with an item of no id: the next page is asked early enough to list the
    # last item with an id again (the edge), the item of no id after it passed over with it
    # (counted once); another item of no id is never taken for the edge (before 2026-12-05
    # both were listed "None", and the next page's first "None" proved its seam).
    from curaflow.domain.models import Work
    from curaflow.sources.pixiv import frontier as fr

    walk, jump = fr.begin(fr.Frontier(sort="date_desc"), "date_desc", max_offset=5000)
    assert jump is None
    works = [Work(work_id=w, create_date=f"2025-02-04T10:0{i}:00+09:00") for i, w in enumerate(["12", "11"])]
    step = fr.on_page(
        walk, works, sort="date_desc", offset=0, window_day=None, max_offset=5000, listed=["12", "11", ""]
    )
    assert step.overlap == 2  # the next page starts at "11"
    assert fr.repeated_on(walk, ["11", "", "10"]) == 2
    assert fr.repeated_on(walk, ["11", "10", ""]) == 1  # an item of no id after a new work is new
    assert fr.repeated_on(walk, ["", "", "10"]) == 0  # no edge there: the seam check steps back


def _jobs_over(sort: str, unread: set[int], candidate: int, *, cap: int, jobs: int) -> int | None:
    """The 0-based job that finds ``candidate`` when every place of ``unread`` is listed
    with no id, each job capped at ``cap`` works (None: not found in ``jobs`` jobs)."""
    deep = _deep()
    faults = Faults(deep=deep)
    faults.mutate = {_id(sort, deep, p): {"id": None} for p in unread}
    delivered = {p for p in range(deep.count) if p != candidate and p not in unread}
    frontier = Frontier(sort=sort)
    for job in range(jobs):

        async def known(ids: list[str]) -> dict[str, str]:
            return {w: "duplicate" for w in ids if _place(sort, deep, w) in delivered}

        cp = asyncio.run(scan_on_replay(faults, _target(sort), known, frontier=frontier, max_examined=cap))
        if [_place(sort, deep, w.work_id) for w in cp.candidates] == [candidate]:
            return job
        assert cp.frontier is not None
        frontier = Frontier.model_validate(cp.frontier)
    return None


@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize(
    "unread",
    [{40, 41, 42, 43, 44}, set(range(3, 100, 7))],
    ids=["as-many-as-the-cap-together", "one-every-seven"],
)
def test_items_of_no_id_together_or_dense_do_not_stop_the_sweep(sort: str, unread: set[int]) -> None:
    # 100 works, cap 5, the candidate at place 90: with one such item the candidate is
    # found in about 20 jobs; with five side by side (or one every seven works) it was found
    # never in 40 — the items spent each job's cap and none can be a sweep mark, so the
    # frontier stopped moving after a few jobs, for every sort. Now a page of them a scan is
    # not counted against the cap (ScanCheckpoint.unread_free).
    assert _jobs_over(sort, unread, 90, cap=5, jobs=40) is not None


@pytest.mark.parametrize("sort", SORTS)
def test_items_of_no_id_once_readable_are_each_found_once(sort: str) -> None:
    # One item every seven works, listed with no id to the first four jobs of a target capped
    # at 5, then as recorded, none delivered before: every one is found, once — the cap
    # they no longer spend does not let the head or the known run pass one (the head held
    # below an item just above its mark: FrontierWalk.unread_at_head).
    unread = set(range(3, 100, 7))
    deep = _deep()
    faults = Faults(deep=deep)
    faults.mutate = {_id(sort, deep, p): {"id": None} for p in unread}
    delivered = {p for p in range(deep.count) if p not in unread}
    frontier = Frontier(sort=sort)
    found: list[int] = []
    for job in range(60):
        if job == 4:
            faults.mutate = {}

        async def known(ids: list[str], delivered: set[int] = delivered) -> dict[str, str]:
            return {w: "duplicate" for w in ids if _place(sort, deep, w) in delivered}

        cp = asyncio.run(scan_on_replay(faults, _target(sort), known, frontier=frontier, max_examined=5))
        places = [_place(sort, deep, w.work_id) for w in cp.candidates]
        found += places
        delivered |= set(places)
        assert cp.frontier is not None
        frontier = Frontier.model_validate(cp.frontier)
    assert sorted(found) == sorted(unread)


@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize("unread", [range(30, 60), range(35, 66)], ids=["a-whole-page", "31-side-by-side"])
def test_a_page_of_items_with_no_id_after_the_edge_is_not_asked_again_and_again(sort: str, unread: range) -> None:
    # The page asked one place early lists the last page's edge, then only items of no id:
    # the next page, asked at the least one place on, can never list that edge again, so
    # before 2026-12-05 (night) the seam check stepped back to the page before and on
    # again, MAX_SEAM_STEPS times each job — 21 search requests where 4 pages hold the
    # results, and each of those items counted ``invalid`` twice. Such a page has no edge
    # (as a page of them alone): the walk records nothing past it, at once.
    deep = _deep()
    faults = Faults(deep=deep)
    faults.mutate = {_id(sort, deep, p): {"id": None} for p in unread}

    async def known(ids: list[str]) -> dict[str, str]:
        return dict.fromkeys(ids, "duplicate")

    cp = asyncio.run(scan_on_replay(faults, _target(sort), known, frontier=Frontier(sort=sort), max_examined=1000))
    searches = sum(1 for e in faults.log if e.kind == "search")
    assert searches <= 6, [e.params.get("offset") for e in faults.log if e.kind == "search"]
    assert cp.report.reasons.get("invalid", 0) == len(unread)

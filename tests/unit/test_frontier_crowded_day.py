"""A crowded day's second walk never makes the frontier record works no page read.

A day holding more works than one walk pages (offsets stop at 5000) is read from its other
end once the walk reaches the offset cap: the same query restricted to the day, in the
reverse order, up to the work where the first walk stopped (:mod:`curaflow.sources.pixiv.scan`).
That second walk reads the day's far end first: the works between the first walk's stop and
the second walk's current place are not read yet. A mark the frontier takes there (the known
run's end, a fresh ``date_desc`` walk's run, the sweep) would record them as examined: before
2026-12-05e a fresh walk whose first candidate lay in the second walk set ``known`` past
them. Its pages are checked at their seams as the first walk's (a deletion between two of
them loses no work), and a job that stops inside it leaves where it stopped
(``Frontier.tail_sweep``): the next job goes on from there, not from the far end again.
Scans run against the replay app in process; the ``known`` hook records every work handed
to a scan for examination (what a page really read).
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
from curaflow.domain.models import Work
from curaflow.sources.pixiv.client import PixivClient
from curaflow.sources.pixiv.frontier import (
    Frontier,
    FrontierWalk,
    Mark,
    advance,
    begin,
    describe,
    observe,
    on_page,
    on_tail_page,
    read,
    repeated_on,
    tail_done,
    tail_pass,
)
from curaflow.sources.pixiv.frontier.models import MAX_SEAM_STEPS
from curaflow.sources.pixiv.replay.app import create_replay_app
from curaflow.sources.pixiv.replay.data import DeepSet
from curaflow.sources.pixiv.scan import ScanCheckpoint
from tests.fakes.replay import Faults
from tests.frontier_support import scan_for_one
from tests.unit.test_frontier_seams import Job, Seen, _id, _jobs, _place

TAG = "frontier-seams"
#: One day of 5 200 works: the first walk reads places 0–5 029 (offsets stop at 5000), the
#: second walk reads from place 5 199 back towards 5 030.
DAY = DeepSet(tag=TAG, count=5200, per_day=5200, last_day="2025-02-04")
DATE_SORTS = ["date_desc", "date_asc"]


def _recorded(sort: str, frontier: Frontier) -> set[int]:
    """The places the frontier records as examined (the walk's order, 0 first): from the
    walk's start (``date_desc``: its head) to the farthest of ``known`` and ``sweep``."""
    ends = [m for m in (frontier.known, frontier.sweep) if m is not None]
    if not ends:
        return set()
    at = lambda mark: _place(sort, DAY, mark.work_id)  # noqa: E731
    start = at(frontier.head) if sort == "date_desc" and frontier.head is not None else 0
    return set(range(start, max(at(m) for m in ends) + 1))


def _unread_recorded(sort: str, seen: list[Seen]) -> list[tuple[int, list[int]]]:
    """Per job: the places its frontier records as examined that no page of it or of an
    earlier job read (the first few)."""
    read: set[int] = set()
    out = []
    for i, s in enumerate(seen):
        read |= s.handed
        out.append((i, sorted(_recorded(sort, s.frontier) - read)[:5]))
    return [(i, unread) for i, unread in out if unread]


def _ruled_out_but(*candidates: int) -> dict[int, str]:
    return {p: "duplicate" for p in range(DAY.count) if p not in candidates}


@pytest.mark.slow  # pages through a day of 5 200 works, twice
@pytest.mark.parametrize("sort", DATE_SORTS)
def test_a_first_candidate_on_the_crowded_days_far_end_records_nothing_unread(sort: str) -> None:
    # Places 5150 and 5100 are new. The fresh walk reads places 0–5029, then the day from
    # its far end: 5199 … 5151 (delivered before), 5150 — its candidate. Places 5030–5149
    # were never read: the frontier it leaves must not record them (before: the run of the
    # fresh date_desc walk ended at 5151). The next job delivers 5100.
    seen = asyncio.run(_jobs(sort, _ruled_out_but(5150, 5100), [Job(cap=20_000)] * 2, deep=DAY))
    assert [s.candidates for s in seen] == [[5150], [5100]]
    assert not _unread_recorded(sort, seen), [(s.frontier.head, s.frontier.known, s.frontier.sweep) for s in seen]


@pytest.mark.slow  # pages through a day of 5 200 works
@pytest.mark.parametrize("sort", DATE_SORTS)
def test_a_scan_capped_on_the_crowded_days_far_end_records_nothing_unread(sort: str) -> None:
    # Everything delivered before but place 5100. The fresh walk examines places 0–5029,
    # then 30 works of the far end (5199 … 5170) and reaches its cap: places 5030–5169
    # were never read, and neither the known run nor the sweep may pass over them.
    seen = asyncio.run(_jobs(sort, _ruled_out_but(5100), [Job(cap=5060)], deep=DAY))
    assert seen[0].candidates == []
    assert not _unread_recorded(sort, seen), (seen[0].frontier.known, seen[0].frontier.sweep)


def test_the_recorded_region_reads_the_marks_by_their_place() -> None:
    # the helper itself: date_desc from its head, date_asc from the start
    mark = lambda p: Mark(work_id=DAY.work_id(p))  # noqa: E731
    assert _recorded("date_desc", Frontier(sort="date_desc", head=mark(3), known=mark(5))) == {3, 4, 5}
    assert _recorded("date_desc", Frontier(sort="date_desc", head=mark(3), known=mark(5), sweep=mark(7))) == set(
        range(3, 8)
    )
    asc = lambda p: Mark(work_id=DAY.work_id(DAY.count - 1 - p))  # noqa: E731
    assert _recorded("date_asc", Frontier(sort="date_asc", known=asc(2))) == {0, 1, 2}


@pytest.mark.slow  # pages through a day of 5 200 works
def test_a_crowded_day_read_whole_carries_the_run_over_it() -> None:
    # The crowded day (places 0–5199) is delivered before; the day before it holds places
    # 5200–5299, 5250 and 5280 new. The fresh walk reads the day from both ends, whole, then
    # the day before up to 5250: its run of lasting verdicts goes on over the whole day
    # (every place of it read), so the next job jumps past the day and delivers 5280 on
    # its head page, the landing page and one more — and the known run's tally counts the
    # whole day once.
    two_days = DeepSet(tag=TAG, count=5300, per_day=5200, last_day="2025-02-04")
    ruled = {p: "duplicate" for p in range(two_days.count) if p not in (5250, 5280)}
    seen = asyncio.run(_jobs("date_desc", ruled, [Job(cap=20_000)] * 2, deep=two_days))
    assert [s.candidates for s in seen] == [[5250], [5280]]
    first = seen[0].frontier
    assert first.known is not None and _place("date_desc", two_days, first.known.work_id) == 5249
    assert first.tally == {"duplicate": 5250}
    assert seen[1].pages == 3


@pytest.mark.slow  # pages through a day of 5 200 works, then a few pages a job
@pytest.mark.parametrize("sort", DATE_SORTS)
@pytest.mark.parametrize("cap", [6, 31])
def test_jobs_capped_on_the_crowded_days_far_end_get_further_each_time(sort: str, cap: int) -> None:
    # Everything delivered before but place 5100. The first job examines places 0–5017 and
    # the far end's first works; each job after is capped at ``cap`` on the far end and
    # goes on where the last one stopped there (Frontier.tail_sweep): 5100 lies 100 places
    # from the far end, at most 100 / cap + 1 jobs. Before 2026-12-05g each read the far
    # end again from 5199: the same ``cap`` works every time, 5100 never reached. Nothing
    # unread is recorded on the way.
    jobs = [Job(cap=5060)] + [Job(cap=cap)] * (100 // cap + 4)
    seen = asyncio.run(_jobs(sort, _ruled_out_but(5100), jobs, deep=DAY))
    assert [5100] in [s.candidates for s in seen], [(s.candidates, s.pages, len(s.handed)) for s in seen]
    assert not _unread_recorded(sort, seen)


#: The crowded day (places 0–5199 of a ``date_desc`` walk) and the day before (5200–5299).
TWO_DAYS = DeepSet(tag=TAG, count=5300, per_day=5200, last_day="2025-02-04")


def _recorded_past(sort: str, seen: list[Seen]) -> list[tuple[int, list[int]]]:
    """Per job over :data:`TWO_DAYS`: the places up to its frontier's ``known`` / ``sweep``
    that no page of it or of an earlier job read (the first few)."""
    return _recorded_past_in(TWO_DAYS, sort, seen)


def _recorded_past_in(deep: DeepSet, sort: str, seen: list[Seen]) -> list[tuple[int, list[int]]]:
    """:func:`_recorded_past` over ``deep``, from the frontier's head (``date_desc``: the
    works above it are read by every job)."""
    read: set[int] = set()
    out = []
    for i, s in enumerate(seen):
        read |= s.handed
        ends = [_place(sort, deep, m.work_id) for m in (s.frontier.known, s.frontier.sweep) if m is not None]
        head = s.frontier.head if sort == "date_desc" else None
        start = _place(sort, deep, head.work_id) if head is not None else 0
        unread = sorted(set(range(start, max(ends) + 1)) - read)[:5] if ends else []
        if unread:
            out.append((i, unread))
    return out


@pytest.mark.slow  # pages through a day of 5 200 works, then a few pages a job
def test_jobs_going_on_in_the_far_end_carry_the_run_over_the_day() -> None:
    # The day and the day before, everything delivered but 5250 and 5280. The first job is
    # capped on the far end, the next ones (cap 31) each go on where the last stopped, the
    # one that meets the first walk's stop reads on into the day before: the run of lasting
    # verdicts goes over the day, counted once (the far end's verdicts carried from job to
    # job), and nothing unread is recorded on the way. (date_desc: the day before comes after.)
    sort = "date_desc"
    ruled = {p: "duplicate" for p in range(TWO_DAYS.count) if p not in (5250, 5280)}
    seen = asyncio.run(_jobs(sort, ruled, [Job(cap=5060)] + [Job(cap=31)] * 12, deep=TWO_DAYS))
    found = [s.candidates for s in seen]
    assert [5250] in found and [5280] in found, found
    assert not _recorded_past(sort, seen)
    after = seen[found.index([5250])].frontier  # the job that found 5250 left known on 5249
    assert after.known is not None and _place(sort, TWO_DAYS, after.known.work_id) == 5249
    assert after.tally == {"duplicate": 5250} and after.tail_sweep is None


@pytest.mark.slow  # pages through a day of 5 200 works, then a few pages a job
def test_a_held_work_on_the_far_end_an_earlier_job_read_keeps_the_run_off_the_day() -> None:
    # As above, but the work at 5150 is held (a verdict that does not last). The first job
    # reads the far end down to 5158; the second goes on from there and reads 5150: the
    # jobs that go on after it must not let the known run go over the day, though none of
    # them reads 5150 again (the run they go on from is broken: Frontier.tail_run None).
    sort = "date_desc"
    ruled = {p: "duplicate" for p in range(TWO_DAYS.count) if p not in (5250, 5280)}
    ruled[5150] = "held"
    seen = asyncio.run(_jobs(sort, ruled, [Job(cap=5060)] + [Job(cap=31)] * 8, deep=TWO_DAYS))
    first = seen[0].frontier.tail_sweep  # the first job stopped before 5150
    assert first is not None and _place(sort, TWO_DAYS, first.work_id) > 5150
    assert [5250] in [s.candidates for s in seen], [s.candidates for s in seen]
    for s in seen:
        known = s.frontier.known
        assert known is None or _place(sort, TWO_DAYS, known.work_id) < 5150, (known, s.candidates)
    assert not _recorded_past(sort, seen)


@pytest.mark.slow  # pages through a day of 5 200 works, then a few pages a job
@pytest.mark.parametrize("sort", DATE_SORTS)
def test_works_deleted_on_the_far_end_between_jobs_move_the_landing_back(sort: str) -> None:
    # Everything delivered but 5100. After the first job (capped on the far end) ten works
    # it read there are deleted: the place the next job goes on from moved up by ten, its
    # landing page starts past the stop and is asked a page earlier. 5100 is still
    # reached, and nothing unread is recorded.
    jobs = [Job(cap=5060), Job(cap=6, deleted_before=set(range(5190, 5200)))] + [Job(cap=6)] * 20
    seen = asyncio.run(_jobs(sort, _ruled_out_but(5100), jobs, deep=DAY))
    assert [5100] in [s.candidates for s in seen], [(s.candidates, s.pages) for s in seen]
    assert not _unread_recorded(sort, seen)


async def _deleted_between_far_end_pages(candidate: int, gone: int) -> tuple[list[list[int]], set[int]]:
    """Fresh ``date_desc`` jobs over a crowded day (places 0–5199) and the day before it
    (5200–5299), everything delivered before but ``candidate`` and 5250; in the first job
    the work at place ``gone`` is deleted once the second walk read its first page. The
    jobs' candidates, and every place handed to a job."""
    days = DeepSet(tag=TAG, count=5300, per_day=5200, last_day="2025-02-04")
    faults = Faults(deep=days)
    app = create_replay_app(faults)
    target = TargetSpec(
        target_id="t", query=TargetQuery(tags=[TAG], sort="date_desc"), filters=TargetFilters(), scan_limit=1
    )
    delivered: set[int] = set()
    handed: set[int] = set()
    found: list[list[int]] = []
    frontier = Frontier(sort="date_desc")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://replay") as http:
        client = PixivClient(http, refresh_token="r", api_url="http://replay", auth_url="http://replay")
        for job in range(3):

            async def known(ids: list[str]) -> dict[str, str]:
                places = {wid: _place("date_desc", days, wid) for wid in ids}
                handed.update(places.values())
                return {w: "duplicate" for w, p in places.items() if p in delivered or p not in (candidate, 5250)}

            tail_pages: list[int] = []

            async def on_page(cp: ScanCheckpoint, first: bool = job == 0, tail_pages: list[int] = tail_pages) -> None:
                if first and cp.tail is not None:
                    tail_pages.append(1)  # the first call: the first walk's last page, the tail just begun
                    if len(tail_pages) == 2:
                        faults.deleted_works.add(_id("date_desc", days, gone))

            result = await scan_for_one(client, target, known, on_page=on_page, frontier=frontier, max_examined=20_000)
            assert result.frontier is not None
            frontier = Frontier.model_validate(result.frontier)
            places = [_place("date_desc", days, w.work_id) for w in result.candidates]
            delivered.update(places)
            found.append(places)
    return found, handed


@pytest.mark.slow  # pages through a day of 5 200 works
def test_a_deletion_between_the_far_end_pages_loses_no_work() -> None:
    # The second walk reads 5199 … 5170, then the work at 5199 (read, delivered before) is
    # deleted: the next page, at offset 30 of the day read from its far end, now starts at
    # 5168 — 5169 moved onto the page already read, and no page lists it. The walk meets
    # the first walk's stop, goes on to 5250 (its candidate) and the run of lasting
    # verdicts covers the day: known at 5249, over 5169, which no job then reads.
    found, handed = asyncio.run(_deleted_between_far_end_pages(5169, 5199))
    assert 5169 in handed and [5169] in found, found


def _day_work(i: int, sort: str) -> Work:
    """The ``i``-th work of a crowded day's second walk (``sort``: the target's; that walk
    lists the day in the reverse order, from its far end)."""
    t = i if sort == "date_desc" else 999 - i  # the second walk of date_desc: oldest first
    return Work(work_id=str(10_000 + t), create_date=f"2025-02-04T{t // 60:02d}:{t % 60:02d}:00+00:00")


@pytest.mark.parametrize("sort", DATE_SORTS)
def test_the_second_walks_pages_are_checked_at_their_seams(sort: str) -> None:
    # The second walk's pages after its first are asked one place early and must list the
    # page before's last item again: a work deleted above in between (its place 0) moves
    # place 30 onto the page read, and the page at 29 starts past it — asked again at 28.
    # Step backs share the scan's MAX_SEAM_STEPS; past it the walk goes on and records
    # nothing further (seam_gap).
    w = lambda i: _day_work(i, sort)  # noqa: E731
    walk = FrontierWalk(plan=Frontier(sort=sort))
    observe(walk, w(900), "duplicate")  # a work of the first walk: the run
    tail_pass(walk, w(500), max_offset=5000)  # the first walk's stop
    walk.pass_start = True  # a new pass (the scan's _new_pass)
    first = on_tail_page(walk, [w(i) for i in range(30)], sort=sort, offset=0)
    assert (len(first.works), first.overlap, first.refetch) == (30, 1, None)
    observe(walk, w(0), "duplicate")  # read before the gap below: its verdict waits
    moved = [w(i) for i in range(30, 60)]  # asked at 29 once place 0 was deleted: starts at 30
    assert repeated_on(walk, [x.work_id for x in moved], tail=True) == 0
    assert on_tail_page(walk, moved, sort=sort, offset=29).refetch == 28
    again = [w(i) for i in range(29, 59)]
    skip = repeated_on(walk, [x.work_id for x in again], tail=True)
    assert skip == 1
    step = on_tail_page(walk, again[skip:], sort=sort, offset=28 + skip, listed=[x.work_id for x in again])
    assert ([x.work_id for x in step.works], step.overlap) == ([w(i).work_id for i in range(30, 59)], 1)
    walk.seam_steps = MAX_SEAM_STEPS  # the scan's step backs spent
    past = [w(i) for i in range(70, 100)]
    step = on_tail_page(walk, past, sort=sort, offset=57)
    assert (step.refetch, walk.seam_gap, step.overlap) == (None, True, 0)
    # Nothing from the gap on is recorded: the far end's verdicts read before it do not
    # join the run once the walk goes on past the day.
    observe(walk, w(70), "duplicate")
    tail_done(walk, whole=True, left=[])
    other_day = "2025-02-03" if sort == "date_desc" else "2025-02-05"
    observe(walk, Work(work_id="1", create_date=f"{other_day}T12:00:00+00:00"), "duplicate")
    left = advance(walk, capped=True, exhausted=False)
    assert left.tally == {"duplicate": 1} and left.tail_sweep is None


def test_a_frontier_or_checkpoint_from_before_the_tail_mark_reads_as_before() -> None:
    # A stored frontier without tail_sweep / tail_run: the second walk starts at the far
    # end. A checkpoint written during a second walk by a version that did not check its
    # seams (no tail_gapless): its works leave no tail_sweep (its pages may hold a gap).
    w = lambda i: _day_work(i, "date_desc")  # noqa: E731
    plan = read(
        {"sort": "date_desc", "known": {"work_id": w(600).work_id, "create_date": w(600).create_date}}, "date_desc"
    )
    assert (plan.tail_sweep, plan.tail_run) == (None, None)
    walk = FrontierWalk(plan=plan, segment="known")
    assert tail_pass(walk, w(500), max_offset=5000) is None
    dumped = walk.model_dump(mode="json")
    dumped.pop("tail_gapless")
    old = FrontierWalk.model_validate(dumped)
    old.places = {w(0).work_id: 0}
    observe(old, w(0), "duplicate")
    assert old.tail_last is None and advance(old, capped=True, exhausted=False).tail_sweep is None
    walk.places = {w(0).work_id: 0}
    observe(walk, w(0), "duplicate")  # the same walk, its seams checked: goes on there next
    left = advance(walk, capped=True, exhausted=False)
    assert left.tail_sweep == Mark(work_id=w(0).work_id, create_date=w(0).create_date, index=0)
    assert left.tail_run == {"duplicate": 1}
    assert "far end read to" in (describe(left.model_dump(mode="json")) or "")


@pytest.mark.parametrize(("settled_before", "carried"), [("2025-03-01", True), ("2025-02-04", False), (None, False)])
def test_a_date_asc_far_end_carries_its_run_only_for_a_day_long_over(settled_before: str | None, carried: bool) -> None:
    # date_asc's far end is the day's newest works: a day not long over may gain works
    # there, above the stop the walk goes on from: its run over the day is not carried.
    w = lambda i: _day_work(i, "date_asc")  # noqa: E731
    stop = Mark(work_id=w(10).work_id, create_date=w(10).create_date, index=10)
    plan = Frontier(sort="date_asc", known=stop, tail_sweep=stop, tail_run={"duplicate": 11})
    walk = FrontierWalk(plan=plan, segment="known", settled_before=settled_before)
    assert tail_pass(walk, w(500), max_offset=5000) == 10
    assert (walk.clean, walk.tail_tally) == ((True, {"duplicate": 11}) if carried else (False, {}))


@pytest.mark.parametrize("sort", DATE_SORTS)
def test_a_candidate_on_the_far_end_leaves_the_run_read_before_it(sort: str) -> None:
    # A job whose candidate lies on the far end leaves its last work before it as
    # tail_sweep: tail_run is the verdicts of the works up to that mark, which all lasted —
    # the candidate comes after it (the next job reads it again, delivered by then). Left
    # None before, the next job's run could not go over the day and the job after read its
    # far end again from the start.
    w = lambda i: _day_work(i, sort)  # noqa: E731
    walk = FrontierWalk(plan=Frontier(sort=sort, known=Mark(work_id=w(900).work_id, create_date=w(900).create_date)))
    walk.segment = "known"
    assert tail_pass(walk, w(500), max_offset=5000) is None
    walk.places = {w(i).work_id: i for i in range(4)}
    observe(walk, w(0), "duplicate")
    observe(walk, w(1), "refused")
    observe(walk, w(2), None)  # the candidate
    observe(walk, w(3), "held")  # after it: the mark does not cover it
    left = advance(walk, capped=False, exhausted=False)
    assert left.tail_sweep == Mark(work_id=w(1).work_id, create_date=w(1).create_date, index=1)
    assert left.tail_run == {"duplicate": 1, "refused": 1}
    assert walk.clean is False  # this walk's own run still stops at its candidate


@pytest.mark.parametrize("sort", DATE_SORTS)
def test_a_far_end_mark_is_cleared_once_its_days_walk_ends_whatever_walks_follow(sort: str) -> None:
    # The stored tail_sweep is on one crowded day; this job's second walk over that day ends
    # (it met the first walk's stop), then a second walk over a later crowded day ends too.
    # The mark is spent: the next job must not go on from it with its stale run (a held
    # work's None kept the known run off the day for every job after, each reading the day
    # again, while a later crowded day's walk ended in each).
    w = lambda i: _day_work(i, sort)  # noqa: E731
    other = "2025-02-03" if sort == "date_desc" else "2025-02-05"
    later = lambda t: Work(work_id=str(20_000 + t), create_date=f"{other}T{t // 60:02d}:{t % 60:02d}:00+00:00")  # noqa: E731
    mark = Mark(work_id=w(10).work_id, create_date=w(10).create_date, index=10)
    plan = Frontier(sort=sort, known=Mark(work_id=w(900).work_id, create_date=w(900).create_date), tail_sweep=mark)
    walk = FrontierWalk(plan=plan, segment="known", settled_before="2100-01-01")
    assert tail_pass(walk, w(500), max_offset=5000) == 10  # goes on after the mark, its run broken
    walk.places = {w(11).work_id: 11}
    observe(walk, w(11), "duplicate")
    tail_done(walk, whole=True, left=[])  # the day read to the first walk's stop
    observe(walk, later(300), "duplicate")  # the next (crowded) day's first walk
    assert tail_pass(walk, later(500) if sort == "date_desc" else later(100), max_offset=5000) is None
    tail_done(walk, whole=True, left=[])  # its second walk ends too
    observe(walk, later(0) if sort == "date_desc" else later(900), None)  # a candidate: no sweep
    left = advance(walk, capped=False, exhausted=False)
    assert (left.tail_sweep, left.tail_run) == (None, None)


@pytest.mark.slow  # pages through a day of 5 200 works, twice
def test_jobs_after_a_candidate_on_the_far_end_carry_the_run_over_the_day() -> None:
    # The day and the day before, everything delivered but 5150 (on the far end), 5250 and
    # 5280. The first job finds 5150 and leaves the far end read to 5151; the second goes on
    # from there (5150 delivered by then) to 5250: its run goes over the day, counted once,
    # and the third jumps past the day (before: the second's run stopped before the day, and
    # the third read the day again, first walk and far end).
    sort = "date_desc"
    ruled = {p: "duplicate" for p in range(TWO_DAYS.count) if p not in (5150, 5250, 5280)}
    seen = asyncio.run(_jobs(sort, ruled, [Job(cap=20_000)] * 3, deep=TWO_DAYS))
    assert [s.candidates for s in seen] == [[5150], [5250], [5280]]
    first = seen[0].frontier.tail_sweep
    assert first is not None and _place(sort, TWO_DAYS, first.work_id) == 5151
    after = seen[1].frontier
    assert after.known is not None and _place(sort, TWO_DAYS, after.known.work_id) == 5249, after.known
    assert after.tally == {"duplicate": 5250} and after.tail_sweep is None
    assert seen[2].pages == 3, [s.pages for s in seen]
    assert not _recorded_past(sort, seen)


def test_the_second_walk_reading_back_over_the_known_run_counts_it_once() -> None:
    # date_desc, the known run ends at work 600 of the crowded day (places counted from the
    # day's oldest); works added at the day's newest end since put the first walk's last
    # listed work at 610 (newer than the mark: the landing page lists nothing after it). The
    # second walk reads the day from its oldest work; works 600–609 are the known run's,
    # already in its tally: handed to it (before 2026-12-05i the scan read up to 610), they
    # are not counted again (5 641 for 5 631 before), and it now ends at the mark
    # (tail_pass: test_the_second_walk_ends_at_the_landing_mark_past_the_first_walks_stop).
    sort = "date_desc"
    w = lambda i: _day_work(i, sort)  # noqa: E731
    known = Mark(work_id=w(600).work_id, create_date=w(600).create_date, index=5029)
    walk = FrontierWalk(plan=Frontier(sort=sort, known=known, tally={"duplicate": 5030}), segment="known")
    walk.skip, walk.skipped_known = known, True
    assert tail_pass(walk, w(610), max_offset=5000) is None
    for i in range(610):
        walk.places[w(i).work_id] = i
        observe(walk, w(i), "duplicate")
    tail_done(walk, whole=True, left=[])
    observe(walk, Work(work_id="1", create_date="2025-02-03T12:00:00+00:00"), "duplicate")
    left = advance(walk, capped=True, exhausted=False)
    assert left.tally == {"duplicate": 5030 + 600 + 1}


#: A crowded day of 5 220 works (places 0–5219 of a ``date_desc`` walk) and the day before
#: (5220–5319); the day's 20 newest (0–19) are listed only from the second job on (uploaded
#: between the jobs: the newest day still growing).
GROWING = DeepSet(tag=TAG, count=5320, per_day=5220, last_day="2025-02-04")


@pytest.mark.slow  # pages through a day of 5 200 works, twice
def test_jobs_on_the_newest_crowded_day_growing_between_them_count_the_known_run_once() -> None:
    # Everything delivered but 5170 (on the far end), 5270 and 5300. The first job reads
    # the day's 5 200 works listed then: its first walk 20–5037 (the known run ends at 5037,
    # the first walk's last: its mark's place 5017 in the day), then the far end down to
    # 5170, its candidate (tail_sweep at 5171). Works 0–19 are added before the second job:
    # its head reads them, its landing at the known mark (offset 5000) lists 5000–5029
    # only, above the mark — and its second walk, going on from 5171, must end at the mark:
    # 5030–5037 are the known run's, already counted (before 2026-12-05i it read them
    # again, up to 5029, and the tally counted them twice: 5 278 for the 5 270 works
    # 0–5269). The third job jumps past the day.
    sort = "date_desc"
    ruled = {p: "duplicate" for p in range(GROWING.count) if p not in (5170, 5270, 5300)}
    jobs = [Job(cap=20_000, deleted_before=set(range(20))), Job(cap=20_000, added_before=set(range(20)))]
    seen = asyncio.run(_jobs(sort, ruled, [*jobs, Job(cap=20_000)], deep=GROWING))
    assert [s.candidates for s in seen] == [[5170], [5270], [5300]]
    first = seen[0].frontier
    assert first.known is not None and _place(sort, GROWING, first.known.work_id) == 5037
    assert first.tally == {"duplicate": 5018}
    after = seen[1].frontier
    assert after.known is not None and _place(sort, GROWING, after.known.work_id) == 5269, after.known
    assert after.tally == {"duplicate": 5270}, after.tally
    assert after.tail_sweep is None
    assert not seen[1].handed & set(range(5030, 5038))  # the known run, not read again
    assert seen[2].pages == 3, [s.pages for s in seen]
    assert not _recorded_past_in(GROWING, sort, seen)


@pytest.mark.parametrize("sort", DATE_SORTS)
@pytest.mark.parametrize("written_before", [False, True])
def test_the_second_walk_ends_at_the_landing_mark_past_the_first_walks_stop(sort: str, written_before: bool) -> None:
    # The known run ends at work 600 of the crowded day (in the second walk's order), past
    # the first walk's last listed work, 610: date_desc's newest day grew at its near end;
    # date_asc's oldest side lists works again (hidden, then shown). The second walk ends at
    # the mark (the scan reads up to walk.tail_stop); a checkpoint written before, whose walk
    # reads on to 610, hands 600–609 again: their verdicts are not counted again either, and
    # a candidate among them still stops the run.
    w = lambda i: _day_work(i, sort)  # noqa: E731
    known = Mark(work_id=w(600).work_id, create_date=w(600).create_date, index=5029)
    walk = FrontierWalk(plan=Frontier(sort=sort, known=known, tally={"duplicate": 5030}), segment="known")
    walk.skip, walk.skipped_known = known, True
    assert tail_pass(walk, w(610), max_offset=5000) is None
    assert walk.tail_stop == Mark(work_id=w(600).work_id, create_date=w(600).create_date)
    if written_before:
        walk.tail_stop = Mark(work_id=w(610).work_id, create_date=w(610).create_date)
    for i in range(610 if written_before else 600):
        walk.places[w(i).work_id] = i
        observe(walk, w(i), "duplicate")
    tail_done(walk, whole=True, left=[])
    other_day = "2025-02-03" if sort == "date_desc" else "2025-02-05"
    after = Work(work_id="1" if sort == "date_desc" else "99999999", create_date=f"{other_day}T12:00:00+00:00")
    observe(walk, after, "duplicate")
    left = advance(walk, capped=True, exhausted=False)
    assert left.tally == {"duplicate": 5030 + 600 + 1}
    assert left.known is not None and left.known.work_id == after.work_id
    # A candidate among the works read again: nothing past it joins the known run.
    walk = FrontierWalk(plan=Frontier(sort=sort, known=known, tally={"duplicate": 5030}), segment="known")
    walk.skip, walk.skipped_known = known, True
    tail_pass(walk, w(610), max_offset=5000)
    walk.tail_stop = Mark(work_id=w(610).work_id, create_date=w(610).create_date)
    for i in range(610):
        walk.places[w(i).work_id] = i
        observe(walk, w(i), None if i == 605 else "duplicate")
    tail_done(walk, whole=True, left=[])
    observe(walk, after, "duplicate")
    left = advance(walk, capped=False, exhausted=False)
    assert left.known == known and left.tally == {"duplicate": 5030}


def test_a_head_phases_own_second_walk_keeps_the_far_end_mark() -> None:
    # date_desc: the head (work 700 of the crowded day, counted from its oldest), the known
    # run's end (650) and the far end read to work 10 by the jobs before (tail_sweep) lie on
    # one day; more than 5 000 works were added above the head since, so the head phase's
    # pass stays on the day to offset 5000 and reads it from its far end itself (recording
    # nothing: tail_pass). The segment then lands at the known mark and finds its candidate
    # (640) before its own second walk. The far-end mark is not spent: no walk that goes
    # on from it ended (before, the head phase's walk ending cleared it, and the next job
    # read the far end again from its start, its run not carried).
    sort = "date_desc"
    w = lambda i: _day_work(i, sort)  # noqa: E731
    mark = lambda i, index=0: Mark(work_id=w(i).work_id, create_date=w(i).create_date, index=index)  # noqa: E731
    plan = Frontier(
        sort=sort,
        head=mark(700),
        known=mark(650, 5),
        seen=mark(700),
        tail_sweep=mark(10, 10),
        tail_run={"duplicate": 11},
        tally={"duplicate": 6},
    )
    walk, jump = begin(plan, sort, max_offset=5000, settled_before="2100-01-01")
    assert walk.phase == "head" and jump is None
    assert tail_pass(walk, w(900), max_offset=5000) is None  # the head phase's own second walk
    for i in range(900):
        walk.places[w(i).work_id] = i
        observe(walk, w(i), "duplicate")
    tail_done(walk, whole=True, left=[])
    walk.pass_start = True  # the window moves to the day before
    before = Work(work_id="1", create_date="2025-02-03T12:00:00+00:00")
    step = on_page(walk, [before], sort=sort, offset=0, window_day="2025-02-03", max_offset=5000)
    assert step.jump is not None and walk.phase == "segment"  # the head reached: land at known
    landing = [w(i) for i in range(650, 620, -1)]
    step = on_page(
        walk, landing, sort=sort, offset=5, window_day=plan.known.day if plan.known else None, max_offset=5000
    )
    for work in step.works[:10]:
        observe(walk, work, None if work.work_id == w(640).work_id else "duplicate")
    left = advance(walk, capped=False, exhausted=False)
    assert left.known == Mark(work_id=w(641).work_id, create_date=w(641).create_date, index=14)
    assert (left.tail_sweep, left.tail_run) == (plan.tail_sweep, plan.tail_run)

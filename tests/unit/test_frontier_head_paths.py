"""A ``date_desc`` frontier's head phase on the paths that never ran before it read anything.

Until the head phase really read the works above the head (commit 70ab4b7), what it did when
capped, when it ran longer than ``pixiv.max_examined`` or when the listing shifted between
two of its pages was never exercised. A break-it review found:

* a scan capped partway through the head page moved the head up over works it never
  examined (they were then "known" for ever);
* a head phase longer than the cap never progressed: every later job read the same top works;
* a deletion between two head pages (live app-api offsets) skipped the work at the page
  boundary and the head then moved over it for good;
* ``date_desc`` reads more than 2 pages a job when works whose verdict does not last stand
  above the head (the docs said at most 2): the bound is now stated and checked here.
"""

from __future__ import annotations

import asyncio
import math

import httpx
import pytest

from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
from curaflow.domain.models import Work
from curaflow.domain.tally import Tally
from curaflow.sources.pixiv.client import PixivClient
from curaflow.sources.pixiv.frontier import PAGE, Frontier, FrontierWalk, Mark, advance, begin, observe, on_page
from curaflow.sources.pixiv.replay.app import create_replay_app
from curaflow.sources.pixiv.replay.data import DeepSet
from curaflow.sources.pixiv.scan import ScanCheckpoint, scan
from tests.fakes.replay import Faults

TAG = "frontier-head-paths"

Seen = tuple[list[str], Tally, Frontier, int]


def _target(filters: TargetFilters | None = None) -> TargetSpec:
    return TargetSpec(
        target_id="t", query=TargetQuery(tags=[TAG], sort="date_desc"), filters=filters or TargetFilters(), scan_limit=1
    )


async def _scans(
    steps: list[tuple[DeepSet, dict[str, str], int]],
    *,
    filters: TargetFilters | None = None,
    settled_before: str = "2100-01-01",
    deletions: dict[int, set[str]] | None = None,
    between_pages: dict[int, set[str]] | None = None,
) -> list[Seen]:
    """One scan per step (result set, verdicts by id, max_examined), each from the frontier the
    previous one left: its candidates, tally, frontier and search pages.

    ``deletions[i]``: works deleted before scan ``i``; ``between_pages[i]``: works deleted
    after scan ``i``'s first page (the app-api's offsets are live).
    """
    faults = Faults(deep=steps[0][0])
    app = create_replay_app(faults)
    target = _target(filters)
    out: list[Seen] = []
    frontier = Frontier(sort="date_desc")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://replay") as http:
        client = PixivClient(http, refresh_token="r", api_url="http://replay", auth_url="http://replay")
        for i, (deep, verdicts, cap) in enumerate(steps):
            faults.deep = deep
            faults.deleted_works |= (deletions or {}).get(i, set())
            gone = (between_pages or {}).get(i, set())

            async def known(ids: list[str], verdicts: dict[str, str] = verdicts) -> dict[str, str]:
                return {i: verdicts[i] for i in ids if i in verdicts}

            async def hook(cp: ScanCheckpoint, gone: set[str] = gone) -> None:
                faults.deleted_works |= gone

            before = sum(1 for e in faults.log if e.kind == "search")
            result = await scan(
                client,
                target,
                scan_limit=1,
                known=known,
                on_page=hook,
                max_examined=cap,
                frontier=frontier,
                settled_before=settled_before,
            )
            pages = sum(1 for e in faults.log if e.kind == "search") - before
            frontier = Frontier.model_validate(result.frontier)
            out.append(([w.work_id for w in result.candidates], Tally.of(result.report), frontier, pages))
    return out


def _all_delivered(deep: DeepSet, *, but: int) -> dict[str, str]:
    verdicts = dict.fromkeys((deep.work_id(r) for r in range(deep.count)), "duplicate")
    del verdicts[deep.work_id(but)]
    return verdicts


def test_a_scan_capped_inside_the_head_page_does_not_move_the_head_over_unread_works() -> None:
    # 80 old works, all delivered; then 10 new works on top: new rank 6 is a candidate.
    old = DeepSet(tag=TAG, count=80, per_day=10, last_day="2025-02-04")
    new = DeepSet(tag=TAG, count=90, per_day=10, last_day="2025-02-05")
    verdicts = _all_delivered(new, but=6)
    seen = asyncio.run(_scans([(old, verdicts, 1000), (new, verdicts, 3), (new, verdicts, 1000)]))
    candidates, tally, frontier, _ = seen[1]
    assert candidates == [] and tally.examined == 3
    # the capped scan read new ranks 0..2 only: the head stays where it was (new rank 10)
    assert frontier.head is not None and new.rank_of(frontier.head.work_id) == 10
    # and the next job goes on below the stop, not from the top again
    assert frontier.head_sweep is not None and new.rank_of(frontier.head_sweep.work_id) == 2
    assert seen[2][0] == [new.work_id(6)]
    assert seen[2][1].examined == 4  # new ranks 3..6


def test_a_capped_head_then_uncapped_jobs_find_the_work() -> None:
    old = DeepSet(tag=TAG, count=80, per_day=10, last_day="2025-02-04")
    new = DeepSet(tag=TAG, count=90, per_day=10, last_day="2025-02-05")
    verdicts = _all_delivered(new, but=6)
    seen = asyncio.run(_scans([(old, verdicts, 1000), (new, verdicts, 3)] + [(new, verdicts, 1000)] * 3))
    assert [new.work_id(6)] in [s[0] for s in seen[2:]], [(s[0], s[1].examined, s[1].known) for s in seen]


def test_a_head_phase_longer_than_max_examined_still_progresses() -> None:
    # 80 old works delivered; then 40 new works, all ruled out for good except new rank 35.
    # A job capped at 30 examined works reads new ranks 0..29; the next one goes on from
    # there (as a capped fresh walk does with its sweep), not from the top again.
    old = DeepSet(tag=TAG, count=80, per_day=40, last_day="2025-02-04")
    new = DeepSet(tag=TAG, count=120, per_day=40, last_day="2025-02-05")
    verdicts = _all_delivered(new, but=35)
    seen = asyncio.run(_scans([(old, verdicts, 1000)] + [(new, verdicts, 30)] * 2))
    assert seen[1][0] == [] and seen[1][2].head_sweep is not None
    assert seen[2][0] == [new.work_id(35)]


def test_a_capped_fresh_walk_progresses_too() -> None:
    new = DeepSet(tag=TAG, count=120, per_day=40, last_day="2025-02-05")
    verdicts = _all_delivered(new, but=35)
    seen = asyncio.run(_scans([(new, verdicts, 30)] * 3))
    assert [new.work_id(35)] in [ids for ids, *_ in seen]


def test_a_long_head_region_is_covered_by_capped_jobs_and_the_head_moves_up() -> None:
    # 100 new works, all delivered, cap 30: the jobs go on from where the last stopped
    # until one reaches the head; the head then moves up to the first work that job read,
    # and the jobs after it read from the top down to the new head.
    old = DeepSet(tag=TAG, count=80, per_day=100, last_day="2025-02-04")
    new = DeepSet(tag=TAG, count=180, per_day=100, last_day="2025-02-05")
    verdicts = dict.fromkeys((new.work_id(r) for r in range(new.count)), "duplicate")
    seen = asyncio.run(_scans([(old, verdicts, 1000)] + [(new, verdicts, 30)] * 8))
    heads = [new.rank_of(s[2].head.work_id) for s in seen[1:] if s[2].head is not None]
    assert heads == sorted(heads, reverse=True) and heads[-1] == 0, heads
    last = seen[-1]
    assert last[1].examined <= 1 and last[2].head_sweep is None


def test_a_resumed_head_phase_leaves_a_held_work_above_the_head() -> None:
    # new rank 0 is held back (not lasting); the head phase is longer than the cap. The job
    # that resumes below the stop may move the head up to the first work it read, never
    # over rank 0: a later job reads it again from the top.
    old = DeepSet(tag=TAG, count=80, per_day=40, last_day="2025-02-04")
    new = DeepSet(tag=TAG, count=120, per_day=40, last_day="2025-02-05")
    verdicts = dict.fromkeys((new.work_id(r) for r in range(new.count)), "duplicate")
    verdicts[new.work_id(0)] = "held"
    seen = asyncio.run(_scans([(old, verdicts, 1000)] + [(new, verdicts, 30)] * 4))
    heads = [new.rank_of(s[2].head.work_id) for s in seen[1:] if s[2].head is not None]
    assert min(heads) == 1, heads
    assert all(s[1].held == 1 for s in seen[3:]), [s[1] for s in seen]


def test_a_resumed_head_phase_whose_stop_was_deleted_lands_before_it() -> None:
    old = DeepSet(tag=TAG, count=80, per_day=10, last_day="2025-02-04")
    new = DeepSet(tag=TAG, count=90, per_day=10, last_day="2025-02-05")
    verdicts = _all_delivered(new, but=6)
    stop = new.work_id(2)
    seen = asyncio.run(
        _scans([(old, verdicts, 1000), (new, verdicts, 3), (new, verdicts, 1000)], deletions={2: {stop}})
    )
    assert seen[1][2].head_sweep is not None and seen[1][2].head_sweep.work_id == stop
    assert seen[2][0] == [new.work_id(6)]


def test_a_head_sweep_at_or_below_the_head_is_ignored() -> None:
    head = Mark(work_id="100", create_date="2025-02-05T00:00:00+00:00")
    below = Mark(work_id="90", create_date="2025-02-04T00:00:00+00:00")
    plan = Frontier(sort="date_desc", head=head, known=below, head_sweep=below)
    walk, jump = begin(plan, "date_desc", max_offset=5000)
    assert walk.phase == "head" and jump is None and walk.skip is None


def test_a_deletion_between_two_head_pages_does_not_lose_a_work_for_good() -> None:
    # The head phase pages through 40 new works. After its first page a delivered work at
    # the top is deleted: everything moves up one place. The next head page is asked one
    # place early (its first work must be the last of the page before), so new rank 30 is
    # still read.
    old = DeepSet(tag=TAG, count=80, per_day=40, last_day="2025-02-04")
    new = DeepSet(tag=TAG, count=120, per_day=40, last_day="2025-02-05")
    verdicts = _all_delivered(new, but=30)
    steps = [(old, verdicts, 1000)] + [(new, verdicts, 1000)] * 3
    seen = asyncio.run(_scans(steps, between_pages={1: {new.work_id(0)}}))
    assert [new.work_id(30)] in [s[0] for s in seen], [(s[0], s[1].examined) for s in seen]


def test_a_gap_between_two_head_pages_keeps_the_head_where_it_was() -> None:
    # Two works deleted after the first head page: the next page (asked one place early)
    # starts past new rank 30, which this job never reads. The head must not move over it:
    # the next job reads the head region again and finds it.
    old = DeepSet(tag=TAG, count=80, per_day=40, last_day="2025-02-04")
    new = DeepSet(tag=TAG, count=120, per_day=40, last_day="2025-02-05")
    verdicts = _all_delivered(new, but=30)
    steps = [(old, verdicts, 1000)] + [(new, verdicts, 1000)] * 2
    seen = asyncio.run(_scans(steps, between_pages={1: {new.work_id(0), new.work_id(1)}}))
    gapped = seen[1]
    assert gapped[0] == [] and gapped[2].head is not None
    assert new.rank_of(gapped[2].head.work_id) == 40  # the old head: not moved
    assert seen[2][0] == [new.work_id(30)]


def test_a_deleted_head_costs_at_most_two_pages() -> None:
    old = DeepSet(tag=TAG, count=80, per_day=10, last_day="2025-02-04")
    new = DeepSet(tag=TAG, count=90, per_day=10, last_day="2025-02-05")
    verdicts = _all_delivered(new, but=5)
    gone = {old.work_id(r) for r in range(3)}  # the head and two works below it
    seen = asyncio.run(_scans([(old, verdicts, 1000), (new, verdicts, 1000)], deletions={1: gone}))
    assert seen[1][0] == [new.work_id(5)] and seen[1][3] <= 2, [(s[0], s[3]) for s in seen]


@pytest.mark.parametrize("settled", [100, 1100])
def test_young_works_below_min_bookmarks_cost_their_pages_not_the_history(settled: int) -> None:
    # min_bookmarks: works younger than SETTLE_DAYS are not ruled out for good, so the head
    # stays below them and every job reads them again (docs/pixiv.md "Cost per job": the
    # head phase's ⌈above / 29⌉ pages, and the landing page) — whatever the history.
    young = 200  # the newest 5 days, 40 a day, none of them reaching min_bookmarks
    deep = DeepSet(tag=TAG, count=young + settled, per_day=40, last_day="2025-02-04")
    verdicts = {deep.work_id(r): "duplicate" for r in range(young, deep.count)}
    steps = [(deep, verdicts, 100_000)] * 3
    seen = asyncio.run(_scans(steps, filters=TargetFilters(min_bookmarks=100), settled_before="2025-01-31"))
    pages = [s[3] for s in seen]
    assert pages[1] == pages[2] == math.ceil(young / (PAGE - 1)) + 1, pages


def _work(rank: int) -> Work:
    return Work(work_id=str(1000 - rank), create_date="2025-02-05T00:00:00+00:00", title="", user_id="1")


def test_a_walk_from_a_checkpoint_without_the_gap_fields_does_not_move_the_head() -> None:
    # A scan checkpoint written before head_whole existed loads; its walk cannot tell
    # whether its head pages were read without a gap, so it leaves the head where it was.
    head = Mark(work_id=str(1000 - 3), create_date="2025-02-05T00:00:00+00:00")
    known = Mark(work_id="1", create_date="2025-01-01T00:00:00+00:00")
    plan = Frontier(sort="date_desc", head=head, known=known)
    walk, _ = begin(plan, "date_desc", max_offset=5000)
    assert walk.head_whole
    old = walk.model_dump(mode="json")
    for field in ("head_whole", "head_edge", "head_stop"):
        old.pop(field)
    restored = FrontierWalk.model_validate(old)
    for w in (walk, restored):
        on_page(w, [_work(r) for r in range(5)], sort="date_desc", offset=0, window_day=None, max_offset=5000)
        for r in range(3):
            observe(w, _work(r), "duplicate")
    assert advance(walk, capped=False, exhausted=False).head == Mark(
        work_id="1000", create_date="2025-02-05T00:00:00+00:00", index=0
    )
    assert advance(restored, capped=False, exhausted=False).head == head

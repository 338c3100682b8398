"""``popular_desc``'s revisit covers the whole known run, and a small cap still progresses.

A popularity sort has no creation-time key to land by: a job lands at the known mark's
place ``k`` in the list, and works deleted above it since the last job move the works
after the mark up into the known part, over the landing. Each job reads one known page
again, in turn (the revisit cycle), so such a work is found again. Until 2026-12-05 the
cycle visited only the full pages below ``k`` (offsets 0, 30 … while ``offset + 30 ≤ k``):
places from the last multiple of 30 up to ``k`` were never read again, nor any place
below ``k`` when ``k < 30`` (no revisit at all) — a work moved there was lost to the
target. And the revisit page's works counted against ``pixiv.max_examined``: below 30 no
job got past it, so such a target never progressed.
"""

from __future__ import annotations

import asyncio

import pytest

from curaflow.sources.pixiv.frontier import PAGE, Frontier, Mark, advance, begin, revisit_offset
from tests.unit.test_frontier_seams import COUNT, Job, _jobs, _story

SORT = "popular_desc"


def _ruled(candidates: set[int], held: set[int]) -> dict[int, str]:
    return {p: ("held" if p in held else "duplicate") for p in range(COUNT) if p not in candidates}


def test_a_work_moved_into_the_tail_of_the_known_run_is_read_again() -> None:
    # The first job delivers place 40 (the known run ends at 39). Three delivered works
    # above are deleted before the second job: places 40 and 41 move to 37 and 38, and
    # the landing at offset 39 starts at place 42. Place 43 is held back (not lasting),
    # so the known run stays short of 60 (its mark at 42, now place 39): only the page at
    # offset 0 was ever read again, never place 38 — the work first at 41 was lost.
    jobs = [Job(), Job(deleted_before={0, 1, 2})] + [Job()] * 6
    seen = asyncio.run(_jobs(SORT, _ruled({40, 41}, {43}), jobs))
    assert seen[0].candidates == [40], _story(seen)
    assert [41] in [s.candidates for s in seen], _story(seen)


def test_a_work_moved_over_a_known_mark_below_one_page_is_read_again() -> None:
    # The first job delivers place 10 (the known run ends at 9). Three delivered works
    # above are deleted before the second job: the landing at offset 9 started at place
    # 12, past place 11 (now 8), and with a known run shorter than a page no job read
    # it again.
    jobs = [Job(), Job(deleted_before={0, 1, 2})] + [Job()] * 3
    seen = asyncio.run(_jobs(SORT, _ruled({10, 11}, {13}), jobs))
    assert seen[0].candidates == [10], _story(seen)
    assert seen[1].candidates == [11], _story(seen)


def test_the_revisit_cycle_ends_one_page_before_the_mark() -> None:
    # A known run ending at place 100: the cycle reads the pages at 0, 30, 60 and 70 (the
    # last one ends at the mark), then starts again; every job lands at the mark after it.
    frontier = Frontier(sort=SORT, known=Mark(work_id="1", index=100))
    offsets = []
    for _ in range(6):
        walk, jump = begin(frontier, SORT, max_offset=5000)
        assert jump is not None and walk.phase == "revisit"
        offsets.append(jump.offset)
        frontier = advance(walk, capped=False, exhausted=False)
    assert offsets == [0, 30, 60, 70, 0, 30]
    assert all(offset + PAGE <= 100 for offset in offsets)


def test_a_stored_revisit_past_the_tail_reads_the_tail() -> None:
    # A frontier stored by an earlier version whose known run since moved back (works
    # deleted): its revisit offset is past the last full page; the job reads the page
    # ending at the mark.
    frontier = Frontier(sort=SORT, known=Mark(work_id="1", index=50), revisit=30)
    _, jump = begin(frontier, SORT, max_offset=5000)
    assert jump is not None and jump.offset == 20


def test_a_known_run_shorter_than_a_page_is_read_again_on_the_landing_page() -> None:
    # Its end is on the first page: every job reads the run again there and goes on after
    # it on the same page (1 page, as the landing at the run's end read before).
    assert revisit_offset(Frontier(sort=SORT, known=Mark(work_id="1", index=12), revisit=30)) == 0
    assert revisit_offset(Frontier(sort=SORT, known=Mark(work_id="1", index=0))) is None
    assert revisit_offset(Frontier(sort=SORT, sweep=Mark(work_id="1", index=40))) is None
    seen = asyncio.run(_jobs(SORT, _ruled({10, 11, 12}, set()), [Job()] * 4))
    assert [(s.candidates, s.pages) for s in seen] == [([10], 1), ([11], 1), ([12], 1), ([], 4)], _story(seen)
    assert [s.frontier.known.index for s in seen if s.frontier.known] == [9, 10, 11, 99]


@pytest.mark.parametrize("cap", [1, 2, 10, 29, 45])
def test_a_cap_below_two_pages_still_progresses(cap: int) -> None:
    # The first job (uncapped) delivers place 40: the known run ends at 39, and every job
    # after reads a known page again. Places 41-99 are new. Capped at fewer works than
    # that page holds, each job still examines ``cap`` works after the mark (the page read
    # again is not counted) and delivers the next place: 2 pages a job. (Capped at one
    # work, a job examines only the work its predecessor delivered, right after the mark,
    # and the next one the new work: every other job delivers, as for date sorts.)
    jobs = [Job()] + [Job(cap=cap)] * 6
    seen = asyncio.run(_jobs(SORT, _ruled(set(range(40, COUNT)), set()), jobs))
    delivered = [[], [41], [], [42], [], [43]] if cap == 1 else [[41], [42], [43], [44], [45], [46]]
    assert [s.candidates for s in seen] == [[40], *delivered], _story(seen)
    assert [s.pages for s in seen[1:]] == [2] * 6, _story(seen)


def test_a_capped_job_examines_the_cap_after_the_page_read_again() -> None:
    # Everything up to place 99 delivered but place 95; known run ends at 39 (the first
    # job delivered 40). Capped at 20, a job reads its revisit page (30 works) and 20 works
    # after the mark, then ends capped: the next goes on from where it stopped (the last
    # reads to the end of the results).
    jobs = [Job()] + [Job(cap=20)] * 4
    seen = asyncio.run(_jobs(SORT, _ruled({40, 95}, set()), jobs))
    assert [s.candidates for s in seen] == [[40], [], [], [95], []], _story(seen)
    assert [s.frontier.known.index for s in seen if s.frontier.known] == [39, 59, 79, 94, 99], _story(seen)


async def test_the_page_read_again_does_not_end_the_fallback_passes() -> None:
    """The fallback decision and the cap's verdict count the works a pass examined anew,
    not the ``popular_desc`` revisit page's (which do not count against the cap either):
    before, a pass that read its revisit page (30 works) and two works after the mark —
    its candidate among them — reported fetched 32, so at a cap of 10 a candidate found
    unavailable at fetch time got no wider pass, and the cell ended ``scan_capped`` ("examined
    the account's max_examined works without finding a new one") though it examined 2."""
    from curaflow.domain.fallback import another_pass
    from curaflow.domain.reasons import TerminalReason
    from curaflow.domain.verdicts import no_candidate_verdict

    seen = await _jobs(SORT, _ruled({40, 41}, set()), [Job(), Job(cap=10)])
    assert [s.candidates for s in seen] == [[40], [41]], _story(seen)
    report = seen[1].report
    assert report.fetched == 32 and report.read_again == 30, report
    args = {"fallback_pass": 0, "max_passes": 3, "scan_limit": 1, "max_examined": 10}
    assert another_pass(report=report, **args)  # type: ignore[arg-type]
    assert no_candidate_verdict(report, max_examined=10) != TerminalReason.SCAN_CAPPED
    # a pass capped after its revisit page still ends the passes (and says so)
    capped = report.model_copy(update={"fetched": 40})
    assert not another_pass(report=capped, **args)  # type: ignore[arg-type]
    assert no_candidate_verdict(capped, max_examined=10) == TerminalReason.SCAN_CAPPED


@pytest.mark.parametrize("cap", [1, 2])
def test_a_capped_stop_is_kept_after_works_above_a_known_mark_were_deleted(cap: int) -> None:
    # The example the seams property drew at caps below 5 (its range then began at 5):
    # places 6, 7 and 9 new, 8 held back after them, works above deleted between jobs (0
    # and 1, then 5, 2, 3 and 4). The known mark stays where an earlier job left it, at
    # index 2 of a list that has since lost six works above: 6 and 7, delivered, are now
    # at 0 and 1, the held work 8 at 2 — the mark's own index. A job capped on 8 stopped
    # there (its sweep), but a sweep was kept only when its index came after the known
    # mark's, a comparison of places taken at different times: dropped, every later job
    # read 8 again to its cap of 1 and 9 never came. The walk examines only works after
    # the known mark, so where it stopped comes after it.
    ruled = {p: v for p in range(COUNT) if (v := {6: None, 7: None, 8: "held", 9: None}.get(p, "duplicate"))}
    gone = [{0, 1}, {0, 1}, {0, 1, 5}, {0, 1, 2}, {0, 1, 2, 3, 4}]
    seen = asyncio.run(_jobs(SORT, ruled, [Job(cap=cap, deleted_before=g) for g in gone] + [Job(cap=cap)] * 6))
    assert sorted(c for s in seen for c in s.candidates) == [6, 7, 9], _story(seen)

"""Differential property of the scan frontier under deletions between the pages of a scan.

Capped jobs of one target, each from the frontier the last one left, deliver every work
plain scans deliver — every work that is a candidate, since a plain scan reads from the
top each job and delivers the first one not yet delivered — while, in any job, works ruled
out for good are deleted after its first page (the app-api's offsets are live: what was
first on the next page moves onto the page already read). Every sort; no work lost for good
to a known run or sweep recorded over a place no page read (before 2026-12-05b the fresh
walk, the segment after the jump and the sweep continuation were not checked: a few
hundred examples found a lost work). ``popular_desc`` recovers a work moved up into its
known part with its revisit page, so its jobs run a whole revisit cycle more.
"""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from curaflow.sources.pixiv.frontier import PAGE
from tests.unit.test_frontier_seams import SORTS, Job, _jobs

COUNT = 100  # tests.unit.test_frontier_seams' result set: 100 works, one day
#: Verdicts of the few works not delivered before (None: a candidate).
VERDICTS = [None, None, None, "refused", "held", "unrecognised"]


@st.composite
def _deletions_case(draw: st.DrawFn) -> tuple[int, dict[int, str | None], list[set[int]]]:
    """A cap, the verdicts of the works not delivered before (None: a candidate), and the
    works deleted after each job's first page."""
    # popular_desc: the revisit page's works do not count against the cap (before
    # 2026-12-05c they did: a cap below a page left every job capped inside it, one below
    # two pages every other job; this test drew its caps from 61 for popular_desc)
    cap = draw(st.integers(5, 120), label="cap")
    # most works delivered before (long known runs, crossing page boundaries), a few not
    # (often at a page boundary of a walk from the top: what a deletion moves up unread)
    places = st.one_of(st.integers(0, COUNT - 1), st.sampled_from([29, 30, 31, 58, 59, 60, 61, 88, 89, 90]))
    verdicts = draw(st.dictionaries(places, st.sampled_from(VERDICTS), min_size=1, max_size=8))
    # works ruled out for good, deleted after some job's first page (the plain scan's
    # deliveries are unchanged by them: they were never candidates)
    # (mostly above the first boundaries: what moves the works after them up)
    lasting = sorted(p for p in range(60) if verdicts.get(p, "duplicate") in ("duplicate", "refused"))
    deletions = draw(
        st.lists(st.sets(st.sampled_from(lasting), max_size=3) if lasting else st.just(set()), min_size=1, max_size=12)
    )
    return cap, verdicts, deletions


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sort=st.sampled_from(SORTS), case=_deletions_case())
# Drawn at about 1 500 examples (2026-12-05f): the third job's page after its first was
# empty (the deletions left 98 works), taken for the source's failure and retried until
# the job's deadline (tests/unit/test_frontier_seams_shrunk.py)
@example(sort="date_desc", case=(36, {70: None}, [set(), set(), {0, 1}]))
@example(sort="date_asc", case=(36, {70: None}, [set(), set(), {0, 1}]))
def test_capped_jobs_deliver_every_candidate_while_works_are_deleted_between_pages(
    sort: str, case: tuple[int, dict[int, str | None], list[set[int]]]
) -> None:
    cap, verdicts, deletions = case
    ruled = {p: v for p in range(COUNT) if (v := verdicts.get(p, "duplicate")) is not None}
    candidates = {p for p in range(COUNT) if p not in ruled}
    jobs = [Job(cap=cap, deleted_after_first_page=gone) for gone in deletions]
    # ``cap`` new places a job. A date_desc job reads every work above its head again (a
    # verdict there does not last: the head stays below the last held or unrecognised
    # work); up to a page of them is not counted against the cap (2026-12-05e: counted, cap
    # 6 and a held work at place 4 left one place a job — a clean CI found that 22 jobs did
    # not reach place 28). A head region over a page counts beyond it: at least one place
    # a job. The jobs stop once one reads to the end and finds nothing.
    above = max((p + 1 for p, v in ruled.items() if v in ("held", "unrecognised")), default=0)
    slow = sort == "date_desc" and above > PAGE
    jobs += [Job(cap=cap)] * (2 * len(candidates) + (COUNT if slow else COUNT // cap) + 4)
    # date sorts: until a job reads to the end and finds nothing. popular_desc finds a
    # work moved up into its known part (a deletion between the revisit page and the
    # landing page, or between jobs) when its revisit page reaches it: a whole cycle more
    if sort == "popular_desc":
        jobs += [Job(cap=cap)] * (COUNT // 30 + 2)
    seen = asyncio.run(_jobs(sort, ruled, jobs, until_idle=sort != "popular_desc"))
    delivered = {p for s in seen for p in s.candidates}
    assert delivered == candidates, [(s.candidates, s.pages) for s in seen]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_popular_desc_jobs_deliver_every_candidate_while_works_are_deleted_between_jobs(data) -> None:
    # popular_desc lands at the known mark's place k: works deleted above it since the
    # last job move the works after it up into the known part, over the landing page; its
    # revisit cycle reads the known part again whole ([0, k)), so each is found within a
    # cycle. Before 2026-12-05c the places from the last multiple of 30 up to k (all of
    # them when k < 30: no revisit) were never read again: a work moved there behind a
    # known run that stays put (a work held back after it) was lost — about one example
    # in eight of these. A few works not delivered before follow each other from a place
    # ``near``, a work held back after them, some others anywhere; delivered works above
    # ``near`` are deleted between jobs. Caps from 1: a job capped on the held work keeps
    # its stop though its place fell to the stale known mark's (before 2026-12-05f it was
    # dropped and no later job got past the held work: cap 1, the example kept in
    # tests/unit/test_frontier_revisit.py).
    cap = data.draw(st.integers(1, 120), label="cap")
    near = data.draw(st.integers(1, 75), label="near")
    run = data.draw(st.integers(2, 4), label="run")
    after = near + run + data.draw(st.integers(0, 2), label="gap")
    verdicts = data.draw(st.dictionaries(st.integers(0, COUNT - 1), st.sampled_from(VERDICTS), max_size=4))
    verdicts |= {p: None for p in range(near, near + run)}
    verdicts[after] = data.draw(st.sampled_from(["held", "unrecognised"]), label="after")
    ruled = {p: v for p in range(COUNT) if (v := verdicts.get(p, "duplicate")) is not None}
    candidates = {p for p in range(COUNT) if p not in ruled}
    lasting = sorted(p for p, v in ruled.items() if v in ("duplicate", "refused") and p < near)
    deletions = data.draw(
        st.lists(
            st.sets(st.sampled_from(lasting), min_size=min(2, len(lasting)), max_size=5) if lasting else st.just(set()),
            min_size=2,
            max_size=8,
        )
    )
    jobs = [Job(cap=cap, deleted_before=gone) for gone in deletions]
    jobs += [Job(cap=cap)] * (2 * len(candidates) + COUNT // cap + 4 + COUNT // 30 + 2)
    seen = asyncio.run(_jobs("popular_desc", ruled, jobs))
    delivered = {p for s in seen for p in s.candidates}
    assert delivered == candidates, [(s.candidates, s.pages) for s in seen]

"""A work moved over a page boundary between two page requests is never recorded as examined.

Pixiv's offsets are live: a work above the current place deleted (or hidden) between two
page requests of one scan moves every later work up one place, so the work that was first
on the next page is now last on the page already read and the scan never reads it. The
head phase of a ``date_desc`` frontier checks its pages' overlap since 2026-12-05; the fresh
walk, the segment read after the jump to the known run's end and a capped scan's sweep
continuation did not: the skipped work ended up inside the stretch the frontier then
recorded as examined (the ``known`` run, the ``sweep``), so no later job read it again.
Every sort is run: they must agree. Scans run against the replay app in process; the
``known`` hook records every work handed to a scan for examination.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
from curaflow.domain.models import CandidateReport
from curaflow.domain.reasons import TerminalReason
from curaflow.sources.errors import SourceError
from curaflow.sources.pixiv.client import PixivClient
from curaflow.sources.pixiv.frontier import Frontier
from curaflow.sources.pixiv.replay.app import create_replay_app
from curaflow.sources.pixiv.replay.data import DeepSet
from curaflow.sources.pixiv.scan import ScanCheckpoint, scan
from tests.fakes.replay import Faults

TAG = "frontier-seams"
SORTS = ["date_desc", "date_asc", "popular_desc"]
COUNT = 100


@dataclass
class Job:
    """One job of the target: its cap, the works (by place in the walk's order, ``0``
    first) deleted before it starts (since the last job) and after its first page (the
    app-api's offsets are live), those listed again before it starts (``added_before``:
    works deleted for the jobs before, as if uploaded since), and the checkpoint after
    which its attempt fails, to be resumed from that checkpoint with ``strip`` left out of
    its walk (as a checkpoint of an older version)."""

    cap: int = 1000
    deleted_after_first_page: set[int] = field(default_factory=set)
    deleted_before: set[int] = field(default_factory=set)
    added_before: set[int] = field(default_factory=set)
    interrupted_after: int | None = None
    strip: tuple[str, ...] = ()


@dataclass
class Seen:
    """What one job did: its candidate, the works handed to it, its pages, the frontier it
    left, its candidate report."""

    candidates: list[int]
    handed: set[int]
    pages: int
    frontier: Frontier
    exhausted: bool = False
    report: CandidateReport = field(default_factory=CandidateReport)


class Interrupted(Exception):
    """The attempt fails after a checkpoint (the activity is retried from it)."""


async def _nothing(cp: ScanCheckpoint) -> None:
    return None


def _deep() -> DeepSet:
    return DeepSet(tag=TAG, count=COUNT, per_day=COUNT, last_day="2025-02-04")


def _place(sort: str, deep: DeepSet, work_id: str) -> int:
    """A work's place in the walk's order (popular_desc: every work has 0 bookmarks, so
    the order is by id, newest first, as date_desc)."""
    rank = deep.rank_of(work_id)
    assert rank is not None
    return deep.count - 1 - rank if sort == "date_asc" else rank


def _id(sort: str, deep: DeepSet, place: int) -> str:
    return deep.work_id(deep.count - 1 - place if sort == "date_asc" else place)


async def _jobs(
    sort: str,
    verdicts: dict[int, str],
    jobs: list[Job],
    *,
    keep: bool = True,
    until_idle: bool = False,
    deep: DeepSet | None = None,
) -> list[Seen]:
    """Run ``jobs`` of one target, each from the frontier the last one left (``keep``) or
    from none; a work not in ``verdicts`` is a candidate until a job delivers it.
    ``until_idle``: stop after a job that read to the end of the results and found none.
    ``deep``: the result set (default: :data:`COUNT` works on one day)."""
    deep = deep or _deep()
    faults = Faults(deep=deep)
    app = create_replay_app(faults)
    target = TargetSpec(target_id="t", query=TargetQuery(tags=[TAG], sort=sort), filters=TargetFilters(), scan_limit=1)  # type: ignore[arg-type]
    delivered: set[int] = set()
    out: list[Seen] = []
    frontier: Frontier | None = Frontier(sort=sort) if keep else None
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://replay") as http:
        client = PixivClient(http, refresh_token="r", api_url="http://replay", auth_url="http://replay")
        for job in jobs:
            handed: set[int] = set()
            faults.deleted_works |= {_id(sort, deep, p) for p in job.deleted_before}
            faults.deleted_works -= {_id(sort, deep, p) for p in job.added_before}

            async def known(ids: list[str], handed: set[int] = handed) -> dict[str, str]:
                found = {}
                for wid in ids:
                    place = _place(sort, deep, wid)
                    handed.add(place)
                    verdict = "duplicate" if place in delivered else verdicts.get(place)
                    if verdict is not None:
                        found[wid] = verdict
                return found

            saved: list[dict[str, Any]] = []  # the checkpoint the attempt failed after, as stored
            pages_done = itertools.count(1)

            async def on_page(
                cp: ScanCheckpoint, job: Job = job, saved: list[dict[str, Any]] = saved, done: Any = pages_done
            ) -> None:
                faults.deleted_works |= {_id(sort, deep, p) for p in job.deleted_after_first_page}
                if next(done) == job.interrupted_after:
                    saved.append(cp.model_dump(mode="json"))
                    raise Interrupted

            before = sum(1 for e in faults.log if e.kind == "search")
            kw: dict[str, Any] = dict(
                scan_limit=1, known=known, max_examined=job.cap, frontier=frontier, settled_before="2100-01-01"
            )
            try:
                result = await scan(client, target, on_page=on_page, **kw)
            except Interrupted:
                dumped = saved[-1]
                for name in job.strip:
                    dumped["walk"].pop(name, None)
                resumed = ScanCheckpoint.model_validate(dumped)
                result = await scan(client, target, on_page=_nothing, checkpoint=resumed, **kw)
            pages = sum(1 for e in faults.log if e.kind == "search") - before
            found = [_place(sort, deep, w.work_id) for w in result.candidates]
            delivered.update(found)
            if keep:
                assert result.frontier is not None
                frontier = Frontier.model_validate(result.frontier)
            out.append(Seen(found, handed, pages, frontier or Frontier(sort=sort), result.exhausted, result.report))
            if until_idle and not found and result.exhausted:
                break
    return out


def _ruled_out_but(*candidates: int) -> dict[int, str]:
    return {p: "duplicate" for p in range(COUNT) if p not in candidates}


def _story(seen: list[Seen]) -> list[tuple[list[int], int, str | None]]:
    return [(s.candidates, s.pages, s.frontier.known and s.frontier.known.work_id) for s in seen]


@pytest.mark.parametrize("sort", SORTS)
def test_a_fresh_walk_never_records_a_work_a_deletion_between_its_pages_skipped(sort: str) -> None:
    # No frontier yet. Places 30 and 45 are new, the rest delivered before. After the
    # first page the work at place 0 is deleted: place 30 moves to 29, read by no page of
    # the walk as it was; its known run then ended at 44, over place 30.
    jobs = [Job(deleted_after_first_page={0})] + [Job()] * 3
    seen = asyncio.run(_jobs(sort, _ruled_out_but(30, 45), jobs))
    assert any(30 in s.handed for s in seen), _story(seen)
    assert [30] in [s.candidates for s in seen], _story(seen)


@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize(
    "gone",
    [{0, 1}, set(range(5)), set(range(29)), {29}, {0, 29}, {28, 29}],
    ids=["two", "five", "twenty-nine", "the-last-read", "one-and-the-last-read", "the-last-two-read"],
)
def test_the_first_job_itself_reads_the_work_whatever_moved_up(sort: str, gone: set[int]) -> None:
    # The walk asks each page one place early and steps back while the page starts past
    # the previous page's last work: the first job examines place 30 itself, its first
    # candidate (the plain scan's too), whatever was deleted above it after page one —
    # that last work included (date sorts find their place by creation time).
    seen = asyncio.run(_jobs(sort, _ruled_out_but(30, 45), [Job(deleted_after_first_page=gone)]))
    assert seen[0].candidates == [30], _story(seen)


@pytest.mark.parametrize("sort", SORTS)
def test_a_deletion_between_two_pages_costs_one_page(sort: str) -> None:
    # Places 60 and 80 are new. Without a deletion the fresh walk reads pages at offsets
    # 0, 29 and 58 (each page after the first asked one place early: 29 new works a page).
    # With one work deleted after the first page, the second page starts one place late
    # and is asked again one place earlier: a page more, and nothing lost.
    quiet = asyncio.run(_jobs(sort, _ruled_out_but(60, 80), [Job()]))
    moved = asyncio.run(_jobs(sort, _ruled_out_but(60, 80), [Job(deleted_after_first_page={0})]))
    assert quiet[0].candidates == moved[0].candidates == [60]
    assert (quiet[0].pages, moved[0].pages) == (3, 4)


@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize("strip", [(), ("seam_id", "seam", "seam_back")], ids=["this-version", "older-version"])
@pytest.mark.parametrize("after", [1, 2])
def test_a_walk_resumed_from_its_checkpoint_keeps_its_seams(sort: str, strip: tuple[str, ...], after: int) -> None:
    # The first job's attempt fails after its first (or second) page and is resumed from
    # its checkpoint: it reads on where it stopped and delivers place 70; the known run
    # it leaves ends at 69 and the next job delivers place 75. A checkpoint of a version
    # without the seam fields resumes too (its next page is not checked, as before).
    jobs = [Job(interrupted_after=after, strip=strip), Job()]
    seen = asyncio.run(_jobs(sort, _ruled_out_but(70, 75), jobs))
    assert [s.candidates for s in seen] == [[70], [75]], _story(seen)


@pytest.mark.parametrize("sort", SORTS)
def test_the_segment_after_the_jump_never_records_a_work_a_deletion_between_its_pages_skipped(sort: str) -> None:
    # The first job delivers place 10: the known run ends at 9. The next job goes on after
    # it — date_desc on its head page (offset 0, so the boundary is after place 29), the
    # others on a landing page at place 9 (the boundary after place 38). After that page a
    # delivered work at place 0 is deleted: the work after the boundary moves onto the
    # page already read.
    boundary = 30 if sort == "date_desc" else 39
    jobs = [Job(), Job(deleted_after_first_page={0})] + [Job()] * 4
    seen = asyncio.run(_jobs(sort, _ruled_out_but(10, boundary, 50), jobs))
    assert seen[0].candidates == [10]
    assert any(boundary in s.handed for s in seen[1:]), _story(seen)
    assert [boundary] in [s.candidates for s in seen], _story(seen)


@pytest.mark.parametrize("sort", SORTS)
def test_the_sweep_continuation_does_not_pass_over_a_work_a_deletion_skipped(sort: str) -> None:
    # The first job is capped at 20 works; place 19 is held back (its verdict does not
    # last), so it leaves a sweep at 19. The next job goes on from there; after its first
    # page a delivered work at place 5 is deleted. The work after the boundary must be
    # delivered before the sweep moves past it (a plain scan reading from the top would
    # find it first), not only once a later sweep reaches the end of the results.
    boundary = 30 if sort == "date_desc" else 49
    verdicts = _ruled_out_but(boundary, 60) | {19: "held"}
    jobs = [Job(cap=20), Job(deleted_after_first_page={5}), Job()]
    seen = asyncio.run(_jobs(sort, verdicts, jobs))
    assert seen[0].frontier.sweep is not None, _story(seen)
    assert [boundary] in [s.candidates for s in seen[1:]], _story(seen)


class _OffsetBlindClient:
    """A source whose pages never meet: page 0 lists works A, every later offset lists the
    same works B (it ignores the offset asked), none of them A's last, each newer than it."""

    def __init__(self) -> None:
        self.offsets: list[int] = []
        base = {"type": "illust", "page_count": 1, "width": 10, "height": 10, "tags": [], "total_bookmarks": 0}
        base |= {"x_restrict": 0, "illust_ai_type": 1, "visible": True}  # as the app-api lists every work
        url = {"meta_single_page": {"original_image_url": "https://i.pximg.net/img-original/img/x_p0.png"}}
        self.a = [{**base, **url, "id": 5000 - i, "create_date": f"2025-01-{20 - i // 2:02d}T00:00:00+09:00"}
                  for i in range(30)]  # fmt: skip
        self.b = [{**base, **url, "id": 9000 - i, "create_date": "2025-02-01T00:00:00+09:00"} for i in range(30)]

    async def search_illust(self, word: str, *, offset: int = 0, **kw: Any) -> dict[str, Any]:
        self.offsets.append(offset)
        if len(self.offsets) > 60:
            raise AssertionError(f"the scan asked {len(self.offsets)} pages: {self.offsets}")
        await asyncio.sleep(0)
        if offset == 0:
            return {"illusts": self.a, "next_url": "https://app-api.pixiv.net/v1/search/illust?word=w&offset=30"}
        more = offset < 150
        next_url = f"https://app-api.pixiv.net/v1/search/illust?word=w&offset={offset + 30}" if more else None
        return {"illusts": self.b, "next_url": next_url}


@pytest.mark.parametrize("sort", SORTS)
async def test_a_source_whose_pages_never_meet_costs_a_few_pages_and_the_attempt(sort: str) -> None:
    """The hostile source of the chaos suite answers the same page whatever offset is asked:
    each step back landed on a page the seam passes, and the next page failed it again —
    the scan asked the same pages until the job's deadline. Since 74d5661 a scan takes at
    most MAX_SEAM_STEPS step backs and goes on past the seam it could not check; since
    2026-12-07 a later page listing the very works of the page before is the source's
    failure (``scan.pages.moves_nowhere``: one retried attempt, no frontier left) — until
    then the scan followed such pages to the source's last one and took its results for
    ended (exhausted, the frontier settled past works it never read)."""
    from curaflow.sources.pixiv.frontier.models import MAX_SEAM_STEPS

    client = _OffsetBlindClient()

    async def known(ids: list[str]) -> dict[str, str]:
        return dict.fromkeys(ids, "duplicate")

    spec = TargetSpec(target_id="t", query=TargetQuery(tags=["w"], sort=sort), filters=TargetFilters(), scan_limit=1)
    with pytest.raises(SourceError) as raised:
        await asyncio.wait_for(
            scan(client, spec, known=known, on_page=_nothing, scan_limit=1, frontier=Frontier(sort=sort)),  # type: ignore[arg-type]
            10,
        )
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, True)
    assert len(client.offsets) <= 2 * MAX_SEAM_STEPS + 8, client.offsets


async def test_a_date_desc_head_read_again_within_a_page_leaves_the_cap_to_new_places() -> None:
    """Cap 6, a held work at place 4: each job reads places 0–4 again (above its head: that
    verdict does not last), which an earlier job examined. Counted against the cap, they
    left one place a job for the rest: place 28 came in the 24th job (the example a clean
    CI's property run drew). Up to a page of them is not counted (as popular_desc's page
    read again): each job examines 6 new places, and place 28 comes in the 5th."""
    ruled = {p: v for p in range(COUNT) if (v := {4: "held", 28: None}.get(p, "duplicate")) is not None}
    seen = await _jobs("date_desc", ruled, [Job(cap=6)] * 6)
    assert [s.candidates for s in seen] == [[], [], [], [], [28], []], _story(seen)
    assert [(s.report.fetched, s.report.read_again) for s in seen[:4]] == [(6, 0)] + [(11, 5)] * 3
    assert [s.pages for s in seen[:4]] == [1] * 4, _story(seen)  # the known mark on the head page: as before

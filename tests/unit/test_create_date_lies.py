"""A creation date no work of Pixiv's has is no date: it costs the job it is read in, never
the work, the target or its frontier (DESIGN.md "The scan frontier of a target",
decision 2026-12-07).

Pixiv opened in September 2007 and no work is created after the clock: a ``create_date``
before the one or far past the other is the listing's lie (a proxy's copy, a field
filled with a sentinel, a broken backend), not the work's date. Until 2026-12-07 it was
read as one: under a date filter a lasting ``filtered:date``
(``test_unknown_work_shapes``), under ``min_bookmarks`` a settled count (a lasting
``filtered:min_bookmarks`` of a work created days ago), and in a date-sorted walk a mark
of the target's frontier dated there.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
from curaflow.sources.pixiv.frontier import Frontier, lasting, settled_before
from curaflow.sources.pixiv.scan import ScanCheckpoint
from tests.fakes.replay import Faults
from tests.frontier_support import scan_on_replay
from tests.unit.test_frontier_seams import TAG, _deep, _id, _place
from tests.unit.test_unknown_work_shapes import illust

#: Creation dates no work of Pixiv's has.
LIES = {
    "year 9999": "9999-12-31T23:59:59+09:00",
    "year 1": "0001-01-01T00:00:00+09:00",
    "before pixiv opened": "2006-05-01T00:00:00+09:00",
    "a month ahead": f"{(datetime.now(UTC) + timedelta(days=30)).date().isoformat()}T00:00:00+09:00",
}


@pytest.mark.parametrize("lie", list(LIES))
def test_a_lying_date_is_no_date(lie: str) -> None:
    from curaflow.sources.pixiv.client import iso_create_date, parse_work

    assert iso_create_date(LIES[lie]) is None
    assert parse_work(illust(create_date=LIES[lie])).create_date is None


@pytest.mark.parametrize(
    "stamp",
    [
        "2007-09-10T00:00:00+09:00",  # the day Pixiv opened
        "2025-02-04T00:00:00+09:00",
        f"{(datetime.now(UTC) + timedelta(days=1)).date().isoformat()}T08:59:59+09:00",  # JST's today, a day's skew
    ],
)
def test_a_date_a_work_may_have_is_read(stamp: str) -> None:
    from curaflow.sources.pixiv.client import iso_create_date

    assert iso_create_date(stamp) == stamp


@pytest.mark.parametrize("lie", ["year 1", "before pixiv opened"])
def test_a_young_work_listed_as_old_is_no_settled_bookmark_count(lie: str) -> None:
    # A work below min_bookmarks counts as ruled out for good once its count settled (its
    # creation SETTLE_DAYS ago): a date before Pixiv opened settled nothing.
    from curaflow.sources.pixiv.client import parse_work

    work = parse_work(illust(create_date=LIES[lie], total_bookmarks=0))
    assert not lasting("filtered:min_bookmarks", work, settled_before(datetime.now(UTC)))


def _target(sort: str) -> TargetSpec:
    return TargetSpec(
        target_id="t",
        query=TargetQuery(tags=[TAG], sort=sort),  # type: ignore[arg-type]
        filters=TargetFilters(),
        scan_limit=1,
    )


@pytest.mark.parametrize("sort", ["date_desc", "date_asc"])
@pytest.mark.parametrize("lie", list(LIES))
def test_a_work_listed_with_a_lying_date_hides_no_work_from_later_jobs(sort: str, lie: str) -> None:
    # Job 1: every work was delivered before but the one at place 70; the newest work is
    # not listed yet, and the works at the known run's ends (the first listed and the
    # last before 70) are listed with a lying date. The jobs after: the newest work is
    # listed (uploaded since), every date true. It is found, and no job fails.
    deep = _deep()
    newest = 0 if sort == "date_desc" else deep.count - 1
    faults = Faults(deep=deep)
    faults.deleted_works = {_id(sort, deep, newest)}
    first = 1 if sort == "date_desc" else 0
    faults.mutate = {_id(sort, deep, p): {"create_date": LIES[lie]} for p in (first, 69)}
    delivered = {p for p in range(deep.count) if p not in (newest, 70)}
    frontier = Frontier(sort=sort)
    seen: list[ScanCheckpoint] = []
    for _ in range(4):

        async def known(ids: list[str], delivered: set[int] = delivered) -> dict[str, Any]:
            return {w: "duplicate" for w in ids if _place(sort, deep, w) in delivered}

        cp = asyncio.run(scan_on_replay(faults, _target(sort), known, frontier=frontier))
        delivered |= {_place(sort, deep, w.work_id) for w in cp.candidates}
        assert cp.frontier is not None
        frontier = Frontier.model_validate(cp.frontier)
        seen.append(cp)
        faults.mutate, faults.deleted_works = {}, set()
    assert [_place(sort, deep, w.work_id) for w in seen[0].candidates] == [70]
    found = [_place(sort, deep, w.work_id) for cp in seen[1:] for w in cp.candidates]
    assert newest in found, found


@pytest.mark.parametrize("sort", ["date_desc", "date_asc", "popular_desc"])
@pytest.mark.parametrize("lie", list(LIES))
def test_a_stored_frontier_marked_at_a_day_no_work_has_is_a_fresh_start(sort: str, lie: str) -> None:
    # Written before 2026-12-07, a frontier could carry a mark dated where the listing
    # lied: read as stored, a date_asc job jumped there and failed on the empty answer
    # every job; a date_desc head in the future passed every new work.
    from curaflow.sources.pixiv.frontier import Mark, read

    honest = Mark(work_id="900000030", create_date="2025-02-04T12:00:00+09:00", index=30)
    lying = Mark(work_id="900000031", create_date=LIES[lie], index=31)
    for field in ("head", "known", "sweep", "head_sweep", "seen", "tail_sweep"):
        marks: dict[str, Any] = {"known": honest, field: lying}
        stored = Frontier(sort=sort, **marks).model_dump(mode="json")
        assert read(stored, sort) == Frontier(sort=sort), field
    kept = Frontier(sort=sort, head=honest, known=honest, tally={"duplicate": 30}).model_dump(mode="json")
    assert read(kept, sort) == Frontier.model_validate(kept)


@pytest.mark.parametrize("sort", ["date_desc", "date_asc"])
def test_a_job_from_a_frontier_marked_in_year_9999_finds_its_candidate(sort: str) -> None:
    # As the source reads the stored frontier (PixivSource.scan: frontier.read).
    from curaflow.sources.pixiv.frontier import Mark, read

    deep = _deep()
    mark = Mark(work_id=_id(sort, deep, 69), create_date=LIES["year 9999"], index=0)
    stored = Frontier(sort=sort, head=mark if sort == "date_desc" else None, known=mark, tally={"duplicate": 70})

    async def known(ids: list[str]) -> dict[str, Any]:
        return {w: "duplicate" for w in ids if _place(sort, deep, w) != 70}

    frontier = read(stored.model_dump(mode="json"), sort)
    cp = asyncio.run(scan_on_replay(Faults(deep=deep), _target(sort), known, frontier=frontier))
    assert [_place(sort, deep, w.work_id) for w in cp.candidates] == [70]


def _in_utc(stamp: str) -> str:
    """``stamp`` (Pixiv's, +09:00) as the same instant written in UTC."""
    return datetime.fromisoformat(stamp).astimezone(UTC).isoformat()


@pytest.mark.parametrize("sort", ["date_desc", "date_asc", "popular_desc"])
@pytest.mark.parametrize("written", ["utc", "z", "minus-five"])
def test_a_date_written_in_another_offset_is_judged_on_pixivs_day(sort: str, written: str) -> None:
    # Pixiv's calendar is Japan's (+09:00): its day filters, windows and orders the walk.
    # The work of rank 70 was created on 2025-02-04 at 07:11:59 in Japan; a listing that
    # writes the instant in another offset (a proxy converting to UTC) put it on
    # 2025-02-03 by its text, and until 2026-12-07 a target starting on 2025-02-04
    # filtered it for good (filtered:date). The instant is stated: it is read on Japan's day.
    from curaflow.sources.pixiv.replay.data import deep_works

    deep = _deep()
    wid = deep.work_id(70)
    stamp = next(w["create_date"] for w in deep_works(deep) if str(w["id"]) == wid)
    assert stamp == "2025-02-04T07:11:59+09:00"
    moment = datetime.fromisoformat(stamp)
    other = {
        "utc": _in_utc(stamp),
        "z": _in_utc(stamp).replace("+00:00", "Z"),
        "minus-five": moment.astimezone(timezone(timedelta(hours=-5))).isoformat(),
    }[written]
    faults = Faults(deep=deep)
    faults.mutate = {wid: {"create_date": other}}
    target = TargetSpec(
        target_id="t",
        query=TargetQuery(tags=[TAG], sort=sort),  # type: ignore[arg-type]
        filters=TargetFilters(start_date="2025-02-04"),
        scan_limit=1,
    )

    async def known(ids: list[str]) -> dict[str, Any]:
        return {w: "duplicate" for w in ids if w != wid}

    cp = asyncio.run(scan_on_replay(faults, target, known, frontier=Frontier(sort=sort)))
    assert [w.work_id for w in cp.candidates] == [wid], cp.report.reasons
    assert cp.candidates[0].create_date == stamp  # Pixiv's own writing of it


@pytest.mark.parametrize(
    "stamp",
    ["2025-02-04Tnoon", "2025-02-04T25:00:00+09:00", "2025-02-04T07:11:59+99:00"],
)
def test_a_date_whose_time_is_no_time_is_no_date(stamp: str) -> None:
    # Its day cannot be told in Japan's calendar (the time decides it): not read.
    from curaflow.sources.pixiv.client import iso_create_date

    assert iso_create_date(stamp) is None

"""A ``date_desc`` frontier's head: every work above it is read by every later scan.

New works appear at the top of a ``date_desc`` walk, and works whose verdict does not last
(``held``, ``unrecognised``, ``released``) stay above the head: the head phase reads the
query from its top down to the head. It once stopped at the first work *newer* than the
head (the comparison of the landing check, which asks the converse), so a later scan read
nothing above the head: new works were never found and works held back vanished from the
tally. The other sorts are run alongside: they must agree.
"""

from __future__ import annotations

import asyncio
from datetime import date, timedelta

import httpx
import pytest

from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
from curaflow.domain.tally import Tally
from curaflow.sources.pixiv.client import PixivClient
from curaflow.sources.pixiv.frontier import Frontier
from curaflow.sources.pixiv.replay.app import create_replay_app
from curaflow.sources.pixiv.replay.data import DeepSet
from curaflow.sources.pixiv.scan import ScanCheckpoint
from tests.fakes.replay import Faults
from tests.frontier_support import scan_for_one

TAG = "frontier-head"
SORTS = ["date_desc", "date_asc", "popular_desc"]


async def _scans(
    sort: str, sets: list[DeepSet], verdicts: dict[str, str], released: set[str] | None = None
) -> list[tuple[list[str], Tally, Frontier]]:
    """One scan per result set, each from the frontier the previous one left."""
    faults = Faults(deep=sets[0])
    app = create_replay_app(faults)
    query = TargetQuery(tags=[TAG], sort=sort)  # type: ignore[arg-type]
    target = TargetSpec(target_id="t", query=query, filters=TargetFilters(), scan_limit=1)

    async def known(ids: list[str]) -> dict[str, str]:
        return {i: verdicts[i] for i in ids if i in verdicts}

    async def on_page(cp: ScanCheckpoint) -> None:
        return None

    seen: list[tuple[list[str], Tally, Frontier]] = []
    frontier = Frontier(sort=sort)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://replay") as http:
        client = PixivClient(http, refresh_token="r", api_url="http://replay", auth_url="http://replay")
        for deep in sets:
            faults.deep = deep
            result = await scan_for_one(client, target, known, unavailable=released, frontier=frontier)
            assert result.frontier is not None
            frontier = Frontier.model_validate(result.frontier)
            seen.append(([w.work_id for w in result.candidates], Tally.of(result.report), frontier))
    return seen


@pytest.mark.parametrize("sort", SORTS)
def test_works_new_since_the_last_scan_are_found(sort: str) -> None:
    # 80 works, all delivered; then a new day of 40 works (ids and dates of the 80 unchanged).
    old = DeepSet(tag=TAG, count=80, per_day=40, last_day="2025-02-04")
    new = DeepSet(tag=TAG, count=120, per_day=40, last_day="2025-02-05")
    delivered = dict.fromkeys((old.work_id(r) for r in range(old.count)), "duplicate")
    (first, _, frontier), (second, _, _) = asyncio.run(_scans(sort, [old, old, new], delivered))[1:]
    assert first == []
    added = [new.work_id(r) for r in range(new.count - old.count)]  # newest first
    if sort == "date_desc":
        assert frontier.head is not None and frontier.head.work_id == old.work_id(0)
        assert second == [added[0]]  # read from the top of the query, down to the head
    elif sort == "date_asc":
        assert second == [added[-1]]  # the first work after the known run
    else:
        assert len(second) == 1 and second[0] in added  # found by the revisit of the known part


def test_the_head_moves_up_over_new_works_ruled_out_for_good() -> None:
    old = DeepSet(tag=TAG, count=80, per_day=40, last_day="2025-02-04")
    new = DeepSet(tag=TAG, count=120, per_day=40, last_day="2025-02-05")
    delivered = dict.fromkeys((new.work_id(r) for r in range(new.count)), "duplicate")
    seen = asyncio.run(_scans("date_desc", [old, new, new], delivered))
    assert [s[0] for s in seen] == [[], [], []]
    assert [s[1].found for s in seen] == [80, 120, 120]
    assert [s[1].delivered for s in seen] == [80, 120, 120]
    head = seen[1][2].head
    assert head is not None and head.work_id == new.work_id(0)
    assert seen[2][1].examined < 30  # the third scan passes over the known run


@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize("verdict", ["held", "unrecognised", "released"])
@pytest.mark.parametrize("rank", [0, 1, 3])
def test_a_verdict_that_does_not_last_is_read_again_by_every_scan(sort: str, verdict: str, rank: int) -> None:
    deep = DeepSet(tag=TAG, count=5, per_day=40)
    verdicts = dict.fromkeys((deep.work_id(r) for r in range(deep.count)), "duplicate")
    released = None
    if verdict == "released":
        del verdicts[deep.work_id(rank)]
        released = {deep.work_id(rank)}
    else:
        verdicts[deep.work_id(rank)] = verdict
    seen = asyncio.run(_scans(sort, [deep] * 3, verdicts, released))
    first = seen[0][1]
    assert first.examined == 5 and first.delivered == 4
    for ids, tally, _ in seen:
        assert ids == []
        assert tally.found == 5
        assert tally.model_copy(update={"examined": 0, "known": 0}) == first.model_copy(
            update={"examined": 0, "known": 0}
        )
    assert seen[1][1].examined >= 1  # the work that may change is read again


async def test_works_new_above_the_head_count_against_the_cap() -> None:
    """The head phase's works read again (an earlier job examined them) do not count against
    ``pixiv.max_examined``, up to a page a job; works new since the last job do: a job
    capped among them examined ``max_examined`` new places, none read again."""
    old = DeepSet(tag=TAG, count=80, per_day=10, last_day="2025-02-04")
    new = DeepSet(tag=TAG, count=90, per_day=10, last_day="2025-02-05")  # 10 works more, on top
    verdicts = dict.fromkeys((new.work_id(r) for r in range(new.count)), "duplicate") | {old.work_id(2): "held"}
    faults = Faults(deep=old)
    app = create_replay_app(faults)
    target = TargetSpec(target_id="t", query=TargetQuery(tags=[TAG], sort="date_desc"), filters=TargetFilters())

    async def known(ids: list[str]) -> dict[str, str]:
        return {i: verdicts[i] for i in ids if i in verdicts}

    reports = []
    frontier = Frontier(sort="date_desc")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://replay") as http:
        client = PixivClient(http, refresh_token="r", api_url="http://replay", auth_url="http://replay")
        for deep, cap in [(old, 1000), (new, 6), (new, 6)]:
            faults.deep = deep
            result = await scan_for_one(client, target, known, frontier=frontier, max_examined=cap)
            assert result.frontier is not None
            frontier = Frontier.model_validate(result.frontier)
            reports.append(result.report)
    # the first job reads all 80 (the head below the held work); the second meets the 10
    # new works on top and is capped after 6 of them; the third reads the other 4 and the
    # 3 old ones above the head again (not counted: before, the cap stopped it at the
    # second of them), and reaches the end of the results after the known run
    assert [(r.fetched, r.read_again, r.exhausted) for r in reports] == [(80, 0, True), (6, 0, False), (7, 3, True)]


async def _held_on_top(cap: int, held: int, jobs: int, arrived: int = 10) -> list[tuple[list[int], int, int]]:
    """A target learns 80 works (all delivered but three, the first found then), then
    ``arrived`` new works (whole days of 10) arrive on top, the newest ``held`` of them held
    back (their verdict does not last: read by every job), the rest delivered before;
    ``jobs`` jobs capped at ``cap`` follow. Per job: its candidates (places in the new
    set, newest first: the three at ``arrived`` + 40, 45 and 50), ``fetched``, ``read_again``."""
    old = DeepSet(tag=TAG, count=80, per_day=10, last_day="2025-02-04")
    last = (date(2025, 2, 4) + timedelta(days=arrived // 10)).isoformat()
    new = DeepSet(tag=TAG, count=80 + arrived, per_day=10, last_day=last)
    verdicts = {new.work_id(r): "duplicate" for r in range(new.count)}
    verdicts |= {new.work_id(r): "held" for r in range(held)}
    for rank in (arrived + 40, arrived + 45, arrived + 50):  # old places 40, 45, 50: after the known run
        verdicts.pop(new.work_id(rank))
    faults = Faults(deep=old)
    app = create_replay_app(faults)
    target = TargetSpec(target_id="t", query=TargetQuery(tags=[TAG], sort="date_desc"), filters=TargetFilters())
    delivered: set[str] = set()

    async def known(ids: list[str]) -> dict[str, str]:
        return {i: "duplicate" if i in delivered else verdicts[i] for i in ids if i in delivered or i in verdicts}

    out = []
    frontier = Frontier(sort="date_desc")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://replay") as http:
        client = PixivClient(http, refresh_token="r", api_url="http://replay", auth_url="http://replay")
        for deep, job_cap in [(old, 1000)] + [(new, cap)] * jobs:
            faults.deep = deep
            result = await scan_for_one(client, target, known, frontier=frontier, max_examined=job_cap)
            assert result.frontier is not None
            frontier = Frontier.model_validate(result.frontier)
            delivered.update(w.work_id for w in result.candidates)
            found = [r for w in result.candidates if (r := new.rank_of(w.work_id)) is not None]
            out.append((found, result.report.fetched, result.report.read_again))
    return out


@pytest.mark.parametrize(("cap", "held"), [(1, 2), (3, 6)])
async def test_a_head_region_above_seen_longer_than_the_cap_is_read_again_once_some_jobs_read_it(
    cap: int, held: int
) -> None:
    """Works held back on top of a ``date_desc`` head, at least as many as the cap (a whole
    multiple of it): a job from the top is capped among them (the next goes on from its
    stop, ``head_sweep``), and the job that goes on reaches the head capped too. Every place
    from the top down to the head was then examined by those jobs, yet ``Frontier.seen``
    only moved for a single head phase that read from the top to the head, which none
    could within the cap: the held works stayed new places for ever, every job
    ``scan_capped`` and the candidates after the known run never came (before: none of the
    30 jobs delivered 55 or 60). Now the phases that went on from a stop carry the top of
    the first: the held works are read again, and every job examines ``cap`` new places."""
    seen = await _held_on_top(cap, held, 30)
    delivered = [r for found, _, _ in seen for r in found]
    assert delivered == [50, 55, 60], seen
    # once every held work was examined, they are read again, uncounted, by every job
    assert all(again == held for _, fetched, again in seen[-3:]), seen


async def test_a_head_phase_the_cap_ends_at_the_head_leaves_the_next_job_past_it() -> None:
    """A head region of a page and the cap (31 works held back on top, cap 1): a job from
    the top reads its page of them again uncounted and the last one new — the cap runs out
    as the head phase ends, before any work past the head. The phase being done, its stop
    was dropped: the next job read the same region to the same cap again, for ever (before:
    none of 80 jobs delivered 85 or 90; the seams property's claim of a place a job). Now
    the next job goes on from that stop (the region above it read again by the one after):
    a place every other job."""
    seen = await _held_on_top(1, 31, 80, arrived=40)
    assert [r for found, _, _ in seen for r in found] == [80, 85, 90], seen
    # the steady state: a job from the top reads the head again (30 uncounted, 1 counted),
    # the next goes on past the head (one new place)
    tail = [(fetched, again) for _, fetched, again in seen[-4:]]
    assert sorted(tail) == [(1, 0), (1, 0), (31, 30), (31, 30)], seen

"""Differential properties of a ``date_desc`` frontier's head phase.

* A scan with the frontier finds what a scan without it finds, while new works arrive
  between jobs and delivered candidates become duplicates.
* Capped: jobs capped at a few works, each from the frontier the last one left, end up
  delivering every work a scan without frontier or cap would (none lost for good to a head
  moved over unread works, and a head phase longer than the cap progresses).
"""

from __future__ import annotations

import asyncio
from datetime import date, timedelta

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
from curaflow.domain.tally import Tally
from curaflow.sources.pixiv.client import PixivClient
from curaflow.sources.pixiv.frontier import Frontier
from curaflow.sources.pixiv.replay.app import create_replay_app
from curaflow.sources.pixiv.replay.data import DeepSet
from tests.fakes.replay import Faults
from tests.frontier_support import scan_for_one

TAG = "frontier-head-property"
PER_DAY = 5
VERDICTS = [None, "duplicate", "duplicate", "refused", "held", "unrecognised", "filtered"]


async def _run(base: int, arrivals: list[int], by_rank_from_bottom: dict[int, str | None], cap: int):
    total = base + sum(arrivals)
    faults = Faults(deep=None)
    app = create_replay_app(faults)
    target = TargetSpec(
        target_id="t", query=TargetQuery(tags=[TAG], sort="date_desc"), filters=TargetFilters(), scan_limit=1
    )
    delivered: set[str] = set()
    log = []
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://replay") as http:
        client = PixivClient(http, refresh_token="r", api_url="http://replay", auth_url="http://replay")
        frontier = Frontier(sort="date_desc")
        count = base
        for k in [0, *arrivals]:
            count += k
            days_missing = (total - count) // PER_DAY
            last = (date(2025, 3, 1) - timedelta(days=days_missing)).isoformat()
            deep = DeepSet(tag=TAG, count=count, per_day=PER_DAY, last_day=last, id_base=900_000_000 - 0)
            # ids: id_base + count - rank ; keep ids stable: id of the bottom work = id_base + 1
            faults.deep = deep

            def verdict(wid: str):
                if wid in delivered:
                    return "duplicate"
                v = by_rank_from_bottom.get(int(wid) - 900_000_001)
                return None if v == "filtered" else v

            async def known(ids):
                return {i: v for i in ids if (v := verdict(i)) is not None}

            async def on_page(cp):
                return None

            res = []
            for fr_in in (frontier, None):
                r = await scan_for_one(client, target, known, max_examined=cap, frontier=fr_in)
                res.append(r)
            with_fr, without = res
            frontier = Frontier.model_validate(with_fr.frontier)
            a = [w.work_id for w in with_fr.candidates]
            b = [w.work_id for w in without.candidates]
            ta, tb = Tally.of(with_fr.report), Tally.of(without.report)
            log.append((count, a, b, ta.found, tb.found))
            delivered.update(a)
            if a != b or (not a and ta.found != tb.found):
                return log, False
    return log, True


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.integers(1, 12).map(lambda n: n * PER_DAY),
    arrivals=st.lists(st.integers(0, 14).map(lambda n: n * PER_DAY), min_size=1, max_size=4),
    data=st.data(),
)
def test_frontier_scan_finds_what_a_plain_scan_finds(base, arrivals, data) -> None:
    total = base + sum(arrivals)
    verdicts = data.draw(st.dictionaries(st.integers(0, total - 1), st.sampled_from(VERDICTS)))
    ruled = {r: verdicts.get(r, "duplicate") for r in range(total)}
    log, ok = asyncio.run(_run(base, arrivals, ruled, cap=1000))
    assert ok, log


async def _capped(old: int, total: int, ruled: dict[int, str | None], cap: int, jobs: int) -> tuple[set[str], set[str]]:
    """With the frontier: one job over the ``old`` oldest works (it learns a head, and
    delivers the first of them not delivered before, if any), then the newer works arrive
    and capped jobs run until one reads to the end. Without: uncapped jobs until none finds
    a candidate. The works each delivered."""
    full = DeepSet(tag=TAG, count=total, per_day=PER_DAY, last_day="2025-03-01", id_base=900_000_000)
    last = (date(2025, 3, 1) - timedelta(days=(total - old) // PER_DAY)).isoformat()
    before = DeepSet(tag=TAG, count=old, per_day=PER_DAY, last_day=last, id_base=900_000_000)
    faults = Faults(deep=full)
    app = create_replay_app(faults)
    target = TargetSpec(
        target_id="t", query=TargetQuery(tags=[TAG], sort="date_desc"), filters=TargetFilters(), scan_limit=1
    )
    out: list[set[str]] = []
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://replay") as http:
        client = PixivClient(http, refresh_token="r", api_url="http://replay", auth_url="http://replay")
        for keep in (True, False):
            delivered: set[str] = set()

            async def known(ids, delivered=delivered):
                out_ = {}
                for i in ids:
                    v = "duplicate" if i in delivered else ruled.get(int(i) - 900_000_001)
                    if v is not None and v != "filtered":
                        out_[i] = v
                return out_

            async def on_page(cp):
                return None

            frontier: Frontier | None = Frontier(sort="date_desc") if keep else None
            if keep:
                faults.deep = before
                r = await scan_for_one(client, target, known, frontier=frontier)
                delivered.update(w.work_id for w in r.candidates)
                frontier = Frontier.model_validate(r.frontier)
            faults.deep = full
            for _ in range(jobs):
                r = await scan_for_one(client, target, known, max_examined=cap if keep else 100_000, frontier=frontier)
                if keep:
                    frontier = Frontier.model_validate(r.frontier)
                delivered.update(w.work_id for w in r.candidates)
                if not r.candidates and (r.exhausted or not keep):
                    break
            out.append(delivered)
    return out[0], out[1]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    old=st.integers(1, 8).map(lambda n: n * PER_DAY),
    new=st.integers(1, 16).map(lambda n: n * PER_DAY),
    cap=st.integers(1, 40),
    data=st.data(),
)
def test_capped_jobs_deliver_what_a_plain_scan_delivers(old, new, cap, data) -> None:
    total = old + new
    # the oldest works delivered but a few (after the known run the first job learns: the
    # capped jobs must get past the head to them — before 2026-12-05f works held back on
    # top, as many as a whole multiple of the cap, kept every job there), the newer ones drawn
    verdicts = data.draw(st.dictionaries(st.integers(old, total - 1), st.sampled_from(VERDICTS)))
    not_yet = data.draw(st.sets(st.integers(0, old - 1), max_size=3), label="old not delivered")
    ruled = {r: None if r in not_yet else "duplicate" for r in range(old)}
    ruled |= {r: verdicts.get(r, "duplicate") for r in range(old, total)}
    with_frontier, plain = asyncio.run(_capped(old, total, ruled, cap, jobs=200))
    assert with_frontier == plain


@pytest.mark.parametrize(("new", "cap"), [(5, 1), (10, 2), (10, 5)])
def test_capped_jobs_get_past_a_held_head_region_a_whole_multiple_of_the_cap(new: int, cap: int) -> None:
    # The property's example (st.data() takes no @example): 5 old works, the two oldest
    # not delivered before; the new works arrive, the oldest of them held back, so the head
    # stays below all of them — a region of ``new`` works, a whole multiple of the cap.
    # Before 2026-12-05f every capped job stopped in that region or at its end: the second
    # old work was never delivered.
    old = 5
    ruled: dict[int, str | None] = {0: None, 1: None} | {r: "duplicate" for r in range(2, old + new)}
    ruled[old] = "held"
    with_frontier, plain = asyncio.run(_capped(old, old + new, ruled, cap, jobs=200))
    assert with_frontier == plain

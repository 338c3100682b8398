"""Identical state gives the identical reason: consecutive scans of one target, its frontier kept.

The replay app answers in process (httpx's ASGI transport); the ledger's verdicts on the
works (the scan's ``known`` hook) and the filters are drawn at random and kept identical
from one scan to the next, as the state of consecutive jobs of a target whose scans find
nothing new. The frontier one scan leaves lets the next skip works it already ruled out;
the reason the cell would end with (and what its tally counts) must not change for that.
"""

from __future__ import annotations

import asyncio

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
from curaflow.domain.tally import Tally
from curaflow.domain.verdicts import no_candidate_verdict
from curaflow.sources.pixiv.client import PixivClient
from curaflow.sources.pixiv.frontier import Frontier
from curaflow.sources.pixiv.replay.app import create_replay_app
from curaflow.sources.pixiv.replay.data import DeepSet
from curaflow.sources.pixiv.scan import ScanCheckpoint, scan
from tests.fakes.replay import Faults

TAG = "tally-property"
#: Verdicts the ledger may hold on a work (None: nothing, the filters decide).
VERDICTS = [None, "duplicate", "refused", "unavailable", "unusable", "held", "unrecognised"]


async def scans(
    *, count: int, sort: str, verdicts: dict[int, str | None], popular: frozenset[int], min_bookmarks: int, cap: int
) -> list[tuple[list[str], str | None, Tally]]:
    deep = DeepSet(tag=TAG, count=count, per_day=40, popular_ranks=popular)
    app = create_replay_app(Faults(deep=deep))
    by_id = {deep.work_id(rank): v for rank, v in verdicts.items()}
    target = TargetSpec(
        target_id="t",
        query=TargetQuery(tags=[TAG], sort=sort),  # type: ignore[arg-type]
        filters=TargetFilters(min_bookmarks=min_bookmarks),
        scan_limit=1,
    )

    async def known(ids: list[str]) -> dict[str, str]:
        return {i: v for i in ids if (v := by_id.get(i)) is not None}

    async def on_page(cp: ScanCheckpoint) -> None:
        return None

    seen: list[tuple[list[str], str | None, Tally]] = []
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://replay") as http:
        client = PixivClient(http, refresh_token="r", api_url="http://replay", auth_url="http://replay")
        frontier = Frontier(sort=sort)
        for _ in range(3):
            result = await scan(
                client,
                target,
                scan_limit=1,
                known=known,
                on_page=on_page,
                max_examined=cap,
                frontier=frontier,
                settled_before="2100-01-01",  # every bookmark count has settled
            )
            assert result.frontier is not None
            frontier = Frontier.model_validate(result.frontier)
            ids = [w.work_id for w in result.candidates]
            reason = None if ids else str(no_candidate_verdict(result.report, max_examined=cap))
            seen.append((ids, reason, Tally.of(result.report)))
    return seen


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    count=st.integers(min_value=1, max_value=130),
    sort=st.sampled_from(["date_desc", "date_asc", "popular_desc"]),
    data=st.data(),
    min_bookmarks=st.sampled_from([0, 100]),
)
def test_identical_state_gives_the_identical_reason_and_tally(
    count: int, sort: str, data: st.DataObject, min_bookmarks: int
) -> None:
    verdicts = data.draw(st.dictionaries(st.integers(0, count - 1), st.sampled_from(VERDICTS)), label="verdicts")
    # Without a ledger verdict a work is a candidate unless the filter rejects it: keep
    # most works ruled out so that most examples end without a candidate.
    ruled = {r: verdicts.get(r) or "duplicate" for r in range(count)}
    for rank in data.draw(st.sets(st.integers(0, count - 1), max_size=2), label="open"):
        ruled[rank] = None  # nothing in the ledger: the filter (or nothing) decides
    popular = frozenset(data.draw(st.sets(st.integers(0, count - 1), max_size=3), label="popular"))
    # Scans that read the whole query (a capped scan hands its progress to the next job,
    # which may then conclude: scan_capped is "not finished", not a verdict on the state).
    cap = 1000
    first, *later = asyncio.run(
        scans(count=count, sort=sort, verdicts=ruled, popular=popular, min_bookmarks=min_bookmarks, cap=cap)
    )
    for ids, reason, tally in later:
        assert (ids, reason) == first[:2]
        if reason is not None:
            # Every work the first scan found is found again, by the same verdicts.
            assert tally.model_copy(update={"examined": 0, "known": 0}) == first[2].model_copy(
                update={"examined": 0, "known": 0}
            )
            assert tally.found == first[2].found


def test_a_frontier_that_skips_every_work_keeps_the_reason() -> None:
    # The case seen from outside: two consecutive jobs on identical state got
    # duplicate_exhausted, then no_candidate (the second examined nothing: its frontier
    # skipped every work, and "nothing examined" was taken for "nothing found").
    for sort in ("date_desc", "date_asc", "popular_desc"):
        seen = asyncio.run(
            scans(
                count=96,
                sort=sort,
                verdicts=dict.fromkeys(range(96), "duplicate"),
                popular=frozenset(),
                min_bookmarks=0,
                cap=1000,
            )
        )
        assert [reason for _, reason, _ in seen] == ["duplicate_exhausted"] * 3, sort
        assert [tally.found for _, _, tally in seen] == [96, 96, 96], sort

"""A work the app-api lists twice in one scan is one candidate.

Pixiv's search may list a work again further on — in the same page (a replica's or a
proxy's answer) or pages apart (a ``popular_desc`` order moving while the scan pages, new
works pushing the list down between a checkpoint and its resumed attempt) — and only the
previous page's items were left out (``scan.pages._fetch_page``: the page seam). Until
2026-12-07 such a work was a candidate once for each listing: the cell's stored
candidates held it twice, and when its fetch released it (unavailable, held back) the next
binding took its released intents back (migration 0031) and fetched it again — a second
image request and detail through the account's gate, the work counted twice in the
report (``unavailable``, ``unrecognised``: what the tally's verdict reads) and twice in the
unrecognised-answers count an alert watches. The generic scan
(:func:`curaflow.sources.paging.scan_pages`) already kept a listed work a candidate once.

The client runs against ``httpx.MockTransport``, the app-api answering in its wire format.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
from curaflow.sources.pixiv.frontier import Frontier
from curaflow.sources.pixiv.replay.data import recorded_works
from curaflow.sources.pixiv.scan import ScanCheckpoint, scan
from tests.support import pixiv_answering

WORKS = sorted(recorded_works(), key=lambda w: (w["create_date"], w["id"]), reverse=True)


def _answering(listing: list[dict[str, Any]], size: int) -> Any:
    """The app-api paging ``listing`` ``size`` items a page, at any offset asked."""

    def api(request: httpx.Request) -> httpx.Response:
        offset = int(request.url.params.get("offset") or 0)
        more = offset + size < len(listing)
        next_url = f"https://app-api.pixiv.net/v1/search/illust?offset={offset + size}" if more else None
        return httpx.Response(200, json={"illusts": listing[offset : offset + size], "next_url": next_url})

    return api


async def _candidates(
    listing: list[dict[str, Any]], size: int, candidates: set[str], sort: str, frontier: bool
) -> list[str]:
    """The candidates of one scan (scan_limit 10) of ``listing`` paged ``size`` items a
    page, every work but ``candidates`` delivered before."""
    target = TargetSpec(target_id="t", query=TargetQuery(tags=["x"], sort=sort), filters=TargetFilters(), scan_limit=10)  # type: ignore[arg-type]

    async def known(ids: list[str]) -> dict[str, str]:
        return {w: "duplicate" for w in ids if w not in candidates}

    extra: dict[str, Any] = {"frontier": Frontier(sort=sort)} if frontier else {}

    async def on_page(cp: ScanCheckpoint) -> None:
        return None

    client = pixiv_answering(_answering(listing, size))
    cp = await scan(client, target, scan_limit=10, known=known, on_page=on_page, settled_before="2100-01-01", **extra)
    return [w.work_id for w in cp.candidates]


@pytest.mark.parametrize("frontier", [False, True], ids=["no-frontier", "frontier"])
async def test_a_work_listed_twice_in_a_page_is_one_candidate(frontier: bool) -> None:
    a, b = WORKS[3], WORKS[10]
    listing = [*WORKS[:5], a, *WORKS[5:12]]  # a listed again two places after itself
    ids = await _candidates(listing, 30, {str(a["id"]), str(b["id"])}, "date_desc", frontier)
    assert ids == [str(a["id"]), str(b["id"])]


@pytest.mark.parametrize("frontier", [False, True], ids=["no-frontier", "frontier"])
async def test_a_work_listed_again_pages_later_is_one_candidate(frontier: bool) -> None:
    a, b = WORKS[1], WORKS[25]
    listing = [*WORKS[:20], a, *WORKS[20:30]]  # popularity moved a work down two pages
    ids = await _candidates(listing, 10, {str(a["id"]), str(b["id"])}, "popular_desc", frontier)
    assert ids == [str(a["id"]), str(b["id"])]


async def test_a_work_listed_twice_keeps_its_first_place_in_the_frontier_left() -> None:
    # The results' first work listed again ten places down its page, every work delivered
    # before but the one after it: the frontier's head is the first work at its first place
    # (index 0). It was its second listing's place (index 10): the scan examined the work
    # where it first stood, and the next job reads the target's results from that mark.
    top, candidate = WORKS[0], WORKS[10]
    listing = [*WORKS[:10], top, *WORKS[10:40]]
    target = TargetSpec(
        target_id="t", query=TargetQuery(tags=["x"], sort="date_desc"), filters=TargetFilters(), scan_limit=1
    )

    async def known(ids: list[str]) -> dict[str, str]:
        return {w: "duplicate" for w in ids if w != str(candidate["id"])}

    async def on_page(cp: ScanCheckpoint) -> None:
        return None

    client = pixiv_answering(_answering(listing, 30))
    cp = await scan(
        client,
        target,
        scan_limit=1,
        known=known,
        on_page=on_page,
        settled_before="2100-01-01",
        frontier=Frontier(sort="date_desc"),
    )
    assert [w.work_id for w in cp.candidates] == [str(candidate["id"])]
    assert cp.frontier is not None
    assert (cp.frontier["head"]["work_id"], cp.frontier["head"]["index"]) == (str(top["id"]), 0)
    assert cp.frontier["seen"]["index"] == 0

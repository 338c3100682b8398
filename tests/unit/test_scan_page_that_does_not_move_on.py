"""A page of results asked past the page before that lists the very works of the page before
is the source's failure, one retried attempt.

A cache or a proxy keyed without ``offset`` (or a replica stuck on one page) answers every
offset with the same page, each with a ``next_url`` one page further on. Pixiv's pages are
30 places apart: a page listing the page before's works again, in their order, moved
nowhere. Until 2026-12-07 the scan took it for a page whose works had all shifted down by
new uploads (the seam, ``seen_ids``), examined nothing of it and asked the next — 167 pages
to the app-api's last offset through the account's gate, then: a ``popular_desc`` or
ranking scan ended its results there (``exhausted``: "no new works", its frontier settled,
after reading 30 works), a date-sorted one moved its date window and read the same page
again from offset 0, pass after pass, until ``pixiv.max_examined`` — ~7 700 requests
(~11 000 with a frontier) at the account's spacing, every other job of the account waiting
behind them.

The client runs against ``httpx.MockTransport``, the app-api answering in its wire format.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from curaflow.domain.reasons import TerminalReason
from curaflow.sources.errors import SourceError
from curaflow.sources.pixiv.replay.data import recorded_works
from curaflow.sources.pixiv.scan import ScanCheckpoint
from tests.frontier_support import scan_all_delivered

WORKS = sorted(recorded_works(), key=lambda w: (w["create_date"], w["id"]), reverse=True)


def _next(request: httpx.Request, size: int) -> str:
    offset = int(request.url.params.get("offset") or 0)
    return f"https://app-api.pixiv.net/v1/search/illust?offset={offset + size}"


async def _scan(api: Any, sort: str, frontier: bool) -> tuple[ScanCheckpoint, list[int], set[str]]:
    """One scan of a target every listed work of which was delivered before
    (:func:`tests.frontier_support.scan_all_delivered`), failing past 400 pages asked (well past
    the first window's last offset: no end in sight)."""
    return await scan_all_delivered(api, sort, frontier, max_asked=400)


SORTS = ["date_desc", "date_asc", "popular_desc"]


@pytest.mark.parametrize("frontier", [False, True], ids=["no-frontier", "frontier"])
@pytest.mark.parametrize("sort", SORTS)
async def test_a_page_listing_the_page_befores_works_again_is_the_sources_failure(sort: str, frontier: bool) -> None:
    def same_page(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"illusts": WORKS[:30], "next_url": _next(request, 30)})

    with pytest.raises(SourceError) as raised:
        await _scan(same_page, sort, frontier)
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, True)
    assert "listed at offset 0" in str(raised.value)


@pytest.mark.parametrize("frontier", [False, True], ids=["no-frontier", "frontier"])
@pytest.mark.parametrize("sort", SORTS)
async def test_a_page_shifted_by_new_works_is_still_read(sort: str, frontier: bool) -> None:
    """Guard: a page repeating some of the page before's works (new uploads pushed them
    down) is read on, its new works examined, to the end of the results."""
    listing = WORKS[:50] if sort != "date_asc" else WORKS[:50][::-1]  # in the order asked

    def shifting(request: httpx.Request) -> httpx.Response:
        offset = int(request.url.params.get("offset") or 0)
        start = max(0, offset - 5) if offset else 0  # five works pushed down between two pages
        page = listing[start : start + 30]
        more = start + 30 < len(listing)
        return httpx.Response(200, json={"illusts": page, "next_url": _next(request, 30) if more else None})

    cp, asked, examined = await _scan(shifting, sort, frontier)
    assert cp.exhausted
    assert examined == {str(w["id"]) for w in listing}, asked


@pytest.mark.parametrize("frontier", [False, True], ids=["no-frontier", "frontier"])
async def test_a_page_pushed_down_by_exactly_one_page_of_new_works_is_still_read(frontier: bool) -> None:
    """A page pushed down by exactly 30 new uploads between two requests lists the page
    before's works again, in their order, as a source stuck on one page does; the page the
    scan took, asked again, tells them apart (it lists the new works): the scan reads on
    to the end of the results (it failed every attempt while no more works came)."""
    uploaded = [{**WORKS[0], "id": 900_000_000 + i} for i in range(30)]  # after the first request
    listing = uploaded + WORKS  # newest first
    asked: list[int] = []

    def pushed_down(request: httpx.Request) -> httpx.Response:
        offset = int(request.url.params.get("offset") or 0)
        asked.append(offset)
        visible = listing[30:] if len(asked) == 1 else listing
        page = visible[offset : offset + 30]
        more = offset + 30 < len(visible)
        return httpx.Response(200, json={"illusts": page, "next_url": _next(request, 30) if more else None})

    cp, _, examined = await _scan(pushed_down, "date_desc", frontier)
    assert cp.exhausted
    assert examined >= {str(w["id"]) for w in WORKS}, asked


async def test_a_page_stuck_on_one_listing_costs_one_request_more() -> None:
    """The page the scan took is asked once again before a page that moved nowhere fails
    the attempt: a source stuck on one page lists it again."""
    asked: list[int] = []

    def same_page(request: httpx.Request) -> httpx.Response:
        asked.append(int(request.url.params.get("offset") or 0))
        return httpx.Response(200, json={"illusts": WORKS[:30], "next_url": _next(request, 30)})

    with pytest.raises(SourceError):
        await _scan(same_page, "date_desc", False)
    assert asked == [0, 30, 0]

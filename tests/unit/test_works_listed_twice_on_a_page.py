"""A work a page lists twice in two listings that disagree is known by neither.

The app-api lists a work once a page (reference ``pixiv-and-delivery-apis.md`` §2.2). A
page that lists one id twice with different fields — one copy R-18 and the other all ages,
one a placeholder and the other whole, one of a shape curaflow reads and the other not (a
cache or a proxy that merged two answers, a replica's stale copy beside the fresh one) —
says two things of the work, and which is the work is not known. Until 2026-12-07 the scan
examined each copy as if it were the only one: the copy that passed was a candidate and
was delivered whatever the other said — a work listed R-18 went to a target refusing R-18
(the filter's verdict on the other copy recorded beside it). Now every copy of such a work
is examined ``invalid``: its fields not recognised in this job, a verdict that does not
last (the next job reads the work again). A work listed twice alike is read as before.

Two copies that differ only in ``total_bookmarks`` say one work read at two moments (a
count that moves between two readings: a replica lagging by seconds): they agree on which
work it is, and the work is examined by the lesser count, one Pixiv gave — it passes
``min_bookmarks`` only when both readings do. Until 2026-12-07 (this file's first version)
such a work was ``invalid`` too: a lagging replica that listed every work twice made every
job of the target find nothing for as long as it lagged, with no filter reading the count.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
from curaflow.sources.pixiv.client import PixivClient
from curaflow.sources.pixiv.scan import ScanCheckpoint, scan
from tests.fakes.replay import Faults
from tests.frontier_support import _replay_app
from tests.unit.test_frontier_seams import TAG, _deep, _id

#: Where the target's one candidate stands (page 3 of the date_desc search, its 11th item).
CANDIDATE = 70


class _SecondCopy(httpx.AsyncBaseTransport):
    """The replay, with the search page listing the candidate also listing, in place of
    the work before it, a copy of the candidate's listing with ``fields`` over it."""

    def __init__(
        self,
        inner: httpx.AsyncBaseTransport,
        candidate: str,
        fields: dict[str, Any],
        first: bool,
        own: dict[str, Any] | None = None,
    ) -> None:
        self.inner, self.candidate, self.fields, self.first = inner, candidate, fields, first
        self.own = own or {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.url.path != "/v1/search/illust":
            return response
        await response.aread()
        page = json.loads(response.content)
        items = page["illusts"]
        at = next((i for i, item in enumerate(items) if str(item["id"]) == self.candidate), None)
        if at is not None and at > 0:
            items[at] = {**items[at], **self.own}
            copy = {**items[at], **self.fields}
            # The copy before the candidate (in the place of the work listed there), or after it.
            items[at - 1], items[at] = (copy, items[at]) if self.first else (items[at], copy)
        return httpx.Response(200, json=page)


async def _scan(
    fields: dict[str, Any],
    *,
    first: bool,
    own: dict[str, Any] | None = None,
    filters: TargetFilters | None = None,
) -> tuple[ScanCheckpoint, str]:
    """One job of a target refusing R-18 (and ``filters``) whose only candidate stands at
    place 70 (every other work delivered before), its page listing it with ``own`` over its
    listing and a second time with ``fields`` over that."""
    deep = _deep()
    candidate = _id("date_desc", deep, CANDIDATE)
    target = TargetSpec(
        target_id="t",
        query=TargetQuery(tags=[TAG], sort="date_desc"),
        filters=filters or TargetFilters(),
        scan_limit=1,
    )

    async def known(ids: list[str]) -> dict[str, str]:
        return {w: "duplicate" for w in ids if w != candidate}

    async def on_page(cp: ScanCheckpoint) -> None:
        return None

    transport = _SecondCopy(httpx.ASGITransport(app=_replay_app(Faults(deep=deep))), candidate, fields, first, own)
    async with httpx.AsyncClient(transport=transport, base_url="http://replay") as http:
        client = PixivClient(http, refresh_token="r", api_url="http://replay", auth_url="http://replay")
        cp = await scan(client, target, scan_limit=1, known=known, on_page=on_page, settled_before="2100-01-01")
    return cp, candidate


DISAGREEING = {
    "r18": {"x_restrict": 1},
    "placeholder": {"visible": False},
    "shape-never-seen": {"x_restrict": "R-18"},
    "another-title": {"title": "another work's title"},
}


@pytest.mark.parametrize("first", [True, False], ids=["copy-first", "copy-after"])
@pytest.mark.parametrize("fields", list(DISAGREEING.values()), ids=list(DISAGREEING))
async def test_a_work_listed_twice_on_a_page_in_listings_that_disagree_is_no_candidate(
    fields: dict[str, Any], first: bool
) -> None:
    cp, candidate = await _scan(fields, first=first)
    assert candidate not in [w.work_id for w in cp.candidates]
    assert cp.report.reasons.get("invalid") == 2, cp.report.reasons
    assert "filtered:r18" not in cp.report.reasons and "hidden" not in cp.report.reasons


@pytest.mark.parametrize("first", [True, False], ids=["copy-first", "copy-after"])
async def test_a_work_listed_twice_alike_is_still_the_candidate(first: bool) -> None:
    cp, candidate = await _scan({}, first=first)
    assert [w.work_id for w in cp.candidates] == [candidate]
    assert "invalid" not in cp.report.reasons


@pytest.mark.parametrize("first", [True, False], ids=["copy-first", "copy-after"])
async def test_two_readings_of_a_works_bookmarks_are_one_work_and_no_filter_reads_them(first: bool) -> None:
    cp, candidate = await _scan({"total_bookmarks": 10_000}, first=first, own={"total_bookmarks": 9_990})
    assert [w.work_id for w in cp.candidates] == [candidate]
    assert "invalid" not in cp.report.reasons, cp.report.reasons


@pytest.mark.parametrize("first", [True, False], ids=["copy-first", "copy-after"])
@pytest.mark.parametrize(
    ("least", "candidate_expected"), [(999, False), (1_000, True)], ids=["one-reading-under", "both-readings-over"]
)
async def test_a_work_read_twice_passes_min_bookmarks_only_by_its_lesser_reading(
    first: bool, least: int, candidate_expected: bool
) -> None:
    filters = TargetFilters(min_bookmarks=1_000)
    cp, candidate = await _scan(
        {"total_bookmarks": 1_005}, first=first, own={"total_bookmarks": least}, filters=filters
    )
    assert (candidate in [w.work_id for w in cp.candidates]) is candidate_expected
    assert "invalid" not in cp.report.reasons, cp.report.reasons
    if not candidate_expected:
        assert cp.report.reasons.get("filtered:min_bookmarks", 0) >= 1, cp.report.reasons

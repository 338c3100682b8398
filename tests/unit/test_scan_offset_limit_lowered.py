"""The app-api refusing an offset below :data:`~curaflow.sources.pixiv.client.MAX_OFFSET`
is the last offset of the walk, not the end of the job.

The app-api's validator answers an offset past its limit with HTTP 400 naming ``offset``
alone (``{"offset":["offset must be no more than 5000"]}``, reference
``pixiv-and-delivery-apis.md`` §2.2). Should Pixiv lower that limit (``… no more than
3000``), the scan paged on to an offset now refused and read the refusal as the request's
own: ``remote_http_error``, not retried, the job ended — and every later job of a deep
target reached the same page and ended the same way (until 2026-12-07). Now such a refusal,
answered to a page the walk paged to, is the walk's last offset: a date-sorted search moves
its date window (a crowded day is read from its other end), any other sort ends its pages
there, as at offset 5000. A refusal past offset 0 naming other parameters the search sent
still ends the job; one naming a parameter never sent (``offset`` to the first page) is
another request's answer, one retried attempt.

The client runs against ``httpx.MockTransport``, the app-api answering in its wire format.
"""

from __future__ import annotations

import copy
import json
from datetime import date, timedelta
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
from curaflow.domain.reasons import TerminalReason
from curaflow.sources.errors import SourceError
from curaflow.sources.pixiv.client import OffsetRefused
from curaflow.sources.pixiv.frontier import Frontier
from curaflow.sources.pixiv.replay.data import recorded_works
from curaflow.sources.pixiv.scan import ScanCheckpoint, scan
from tests.frontier_support import scan_all_delivered
from tests.support import pixiv_answering

TEMPLATE = recorded_works()[0]


def _works(per_day: list[int]) -> list[dict[str, Any]]:
    """Works on consecutive days (``per_day[i]`` works on day i), distinct ids and times."""
    works = []
    wid = 1000
    for day, count in enumerate(per_day):
        for i in range(count):
            work = copy.deepcopy(TEMPLATE)
            wid += 1
            work["id"] = wid
            on = (date(2024, 1, 1) + timedelta(days=day)).isoformat()
            work["create_date"] = f"{on}T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}+00:00"
            works.append(work)
    return works


def _refusal(message: str) -> httpx.Response:
    error = {"user_message": "", "message": message, "reason": "", "user_message_details": {}}
    return httpx.Response(400, json={"error": error})


def _app_api(works: list[dict[str, Any]], limit: int, asked: list[int]) -> Any:
    """A search over ``works`` honouring ``sort``, ``start_date`` / ``end_date`` and
    ``offset``, whose validator refuses any offset past ``limit``."""

    def answer(request: httpx.Request) -> httpx.Response:
        params = request.url.params
        offset = int(params.get("offset") or 0)
        asked.append(offset)
        if len(asked) > 2000:
            raise AssertionError("the scan never ends")
        if offset > limit:
            return _refusal(json.dumps({"offset": [f"offset must be no more than {limit}"]}))
        start, end = params.get("start_date"), params.get("end_date")
        items = [
            w
            for w in works
            if (not start or w["create_date"][:10] >= start) and (not end or w["create_date"][:10] <= end)
        ]
        items.sort(key=lambda w: (w["create_date"], w["id"]), reverse=params.get("sort") != "date_asc")
        page = items[offset : offset + 30]
        more = offset + 30 < len(items)
        next_url = f"https://app-api.pixiv.net/v1/search/illust?offset={offset + 30}" if more else None
        return httpx.Response(200, json={"illusts": page, "next_url": next_url})

    return answer


async def _scan(api: Any, sort: str, frontier: bool, *, max_examined: int = 100_000) -> tuple[ScanCheckpoint, set[str]]:
    """One scan of a target every listed work of which was delivered before
    (:func:`tests.frontier_support.scan_all_delivered`); the works it examined."""
    cp, _, examined = await scan_all_delivered(api, sort, frontier, max_examined=max_examined)
    return cp, examined


@pytest.mark.parametrize("frontier", [False, True], ids=["no-frontier", "frontier"])
@pytest.mark.parametrize("sort", ["date_desc", "date_asc"])
async def test_a_date_sorted_search_moves_its_window_at_the_lowered_last_offset(sort: str, frontier: bool) -> None:
    """Offsets past 60 refused: every pass reads three pages, then moves its window; a day
    of 150 works (more than a pass pages) is read from its other end. Every work is read."""
    works = _works([40, 40, 150, 40, 40])
    asked: list[int] = []
    with capture_logs() as logs:
        cp, examined = await _scan(_app_api(works, 60, asked), sort, frontier)
    assert cp.exhausted
    assert examined == {str(w["id"]) for w in works}
    assert cp.report.skipped_days == []
    # The refusal is told once (the offset named), and no page past the limit is asked
    # again once known (the refused one twice: once more behind a refreshed token).
    told = [e["offset"] for e in logs if e["event"] == "pixiv.offset_refused"]
    assert len(told) == 1
    assert [o for o in asked if o > 60] == told * 2


@pytest.mark.parametrize("frontier", [False, True], ids=["no-frontier", "frontier"])
async def test_a_day_past_both_walks_is_skipped_and_said_so(frontier: bool) -> None:
    works = _works([40, 250, 40])
    asked: list[int] = []
    cp, examined = await _scan(_app_api(works, 60, asked), "date_desc", frontier)
    assert cp.exhausted
    assert [d.day for d in cp.report.skipped_days] == ["2024-01-02"]
    assert {str(w["id"]) for w in works if w["create_date"][:10] != "2024-01-02"} <= examined


@pytest.mark.parametrize("sort", ["date_desc", "date_asc", "popular_desc"])
async def test_the_next_job_lands_within_the_lowered_limit(sort: str) -> None:
    """A job under the old limit left its frontier's mark deep in a crowded day (place 100
    of 150); Pixiv lowered its limit to 60 before the next job, whose jump to the mark is
    refused: it lands earlier and reads on — never the end of the job, nor of the next."""
    works = _works([40, 150, 40])
    first, examined = await _scan(_app_api(works, 5000, []), sort, True, max_examined=140)
    assert first.capped(140)
    target = TargetSpec(target_id="t", query=TargetQuery(tags=["x"], sort=sort), filters=TargetFilters(), scan_limit=10)  # type: ignore[arg-type]
    asked: list[int] = []

    async def known(ids: list[str]) -> dict[str, str]:
        examined.update(ids)
        return dict.fromkeys(ids, "duplicate")

    async def on_page(cp: ScanCheckpoint) -> None:
        return None

    cp = await scan(
        pixiv_answering(_app_api(works, 60, asked)), target, scan_limit=10, known=known, on_page=on_page,
        frontier=Frontier.model_validate(first.frontier), settled_before="2100-01-01",
    )  # fmt: skip
    assert cp.exhausted
    if sort != "popular_desc":  # a popularity search reaches its first 90 places alone now
        assert examined == {str(w["id"]) for w in works}
    assert any(o > 60 for o in asked)  # the jump to the mark was refused


@pytest.mark.parametrize("frontier", [False, True], ids=["no-frontier", "frontier"])
async def test_another_sort_ends_its_pages_at_the_lowered_last_offset(frontier: bool) -> None:
    works = _works([200])
    asked: list[int] = []
    cp, examined = await _scan(_app_api(works, 60, asked), "popular_desc", frontier)
    assert cp.exhausted
    # Every work up to the last page answered (offset 60, or a place or so earlier with a
    # frontier, each page asked one place early); the refused page not counted.
    last = max(o for o in asked if o <= 60)
    assert examined == {str(w["id"]) for w in works[::-1][: last + 30]}
    assert cp.report.fetched == len(examined)
    assert cp.pages == 3


@pytest.mark.parametrize("frontier", [False, True], ids=["no-frontier", "frontier"])
@pytest.mark.parametrize("per_day", [[1] * 400, [200] * 3, [31] * 20], ids=["sparse", "crowded", "one-over"])
async def test_a_lowest_cap_still_ends(per_day: list[int], frontier: bool) -> None:
    """Offsets past 0 refused (every page but the first of a pass): the scan still ends, by
    the end of results or by ``max_examined``, in a bounded number of requests."""
    works = _works(per_day)
    asked: list[int] = []
    cp, _ = await _scan(_app_api(works, 0, asked), "date_desc", frontier, max_examined=150)
    assert cp.exhausted or cp.capped(150)
    assert len(asked) <= 2 * (150 + len(per_day)) + 10


@pytest.mark.parametrize(
    "message",
    [
        '{"offset":["offset must be no more than 3000"],"word":["word is invalid"]}',
        '{"sort":["sort is invalid"]}',
    ],
)
async def test_a_refusal_naming_other_parameters_still_ends_the_job(message: str) -> None:
    # Parameters the search sent (a parameter it never sent is another request's answer:
    # one retried attempt, tests/unit/test_refused_request_in_pixivs_shape.py).
    works = _works([100])
    base = _app_api(works, 10_000, [])

    def answer(request: httpx.Request) -> httpx.Response:
        if int(request.url.params.get("offset") or 0) >= 60:
            return _refusal(message)
        return base(request)  # type: ignore[no-any-return]

    with pytest.raises(SourceError) as raised:
        await _scan(answer, "date_desc", False)
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, False)


async def test_an_offset_refused_to_the_first_page_is_one_retried_attempt() -> None:
    """The first page is asked with no ``offset``: a refusal naming it answers another
    request (a cache or a proxy keyed wrongly) — the source's, retried, never the query's
    end (until 2026-12-07 the job ended unretried)."""

    def answer(request: httpx.Request) -> httpx.Response:
        return _refusal('{"offset":["offset must be no more than 0"]}')

    with pytest.raises(SourceError) as raised:
        await _scan(answer, "date_desc", False)
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, True)


@pytest.mark.parametrize(
    ("offset", "message", "told", "retried"),
    [
        (3030, '{"offset":["offset must be no more than 3000"]}', True, False),
        # No offset asked (offset 0 is not sent): another request's answer, retried.
        (0, '{"offset":["offset must be no more than 3000"]}', False, True),
        (3030, '{"offset":["offset must be no more than 3000"],"word":["word is required"]}', False, False),
    ],
)
async def test_the_client_tells_an_offset_refused_alone_past_offset_0(
    offset: int, message: str, told: bool, retried: bool
) -> None:
    """``OffsetRefused`` (carrying the offset asked) only for ``offset`` refused alone past
    offset 0; a refusal of parameters sent stays final (``remote_http_error``, not
    retried), one naming a parameter never sent is retried (2026-12-07)."""
    pixiv = pixiv_answering(lambda request: _refusal(message))
    with pytest.raises(SourceError) as raised:
        await pixiv.search_illust("x", offset=offset)
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, retried)
    assert isinstance(raised.value, OffsetRefused) is told
    if told:
        assert isinstance(raised.value, OffsetRefused) and raised.value.offset == offset


class _Died(Exception):
    pass


async def test_a_resumed_attempt_keeps_the_limit_learned() -> None:
    """The limit learned and the last page's works survive the checkpoint: an attempt
    resumed from its stored JSON asks no page past the limit again."""
    works = _works([40, 40, 40, 40])
    asked: list[int] = []
    target = TargetSpec(target_id="t", query=TargetQuery(tags=["x"]), filters=TargetFilters(), scan_limit=10)
    examined: set[str] = set()
    stored: list[str] = []

    async def known(ids: list[str]) -> dict[str, str]:
        examined.update(ids)
        return dict.fromkeys(ids, "duplicate")

    async def dies_once_limited(cp: ScanCheckpoint) -> None:
        stored.append(cp.model_dump_json())
        if cp.refused_offset is not None and len(stored) < 100:
            raise _Died

    pixiv = pixiv_answering(_app_api(works, 60, asked))
    with pytest.raises(_Died):
        await scan(pixiv, target, scan_limit=10, known=known, on_page=dies_once_limited)
    resumed = ScanCheckpoint.model_validate_json(stored[-1])
    assert resumed.refused_offset == 90
    before = len(asked)

    async def on_page(cp: ScanCheckpoint) -> None:
        return None

    cp = await scan(pixiv, target, scan_limit=10, known=known, on_page=on_page, checkpoint=resumed)
    assert cp.exhausted
    assert examined == {str(w["id"]) for w in works}
    assert all(o <= 60 for o in asked[before:])

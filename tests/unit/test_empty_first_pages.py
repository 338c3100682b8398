"""An empty page is the end of results only where the source positively says so.

Pixiv ranks a published day's works: its ranking (``GET /v1/illust/ranking``) is never
empty (pixivpy's recorded ``illust_ranking.json`` lists 30 works and a ``next_url``).
Until 2026-12-08 an empty first page of a ranking (a backend in an outage, a cache, a
proxy answering ``illusts: []``) was taken for the end of results: the scan ended
``exhausted``, no candidate, and the job reported that the day's ranking held nothing
new. Now it is the source's failure: the attempt fails (``remote_http_error``,
retryable, as an empty page a ``next_url`` promised), and the retry reads the ranking.

A page that lists no work and yet names a next page (``next_url`` set) says two things
that cannot both hold — the app-api sends a ``next_url`` only when more works follow.
Until 2026-12-08 a first page so (the first page of a tag search, any sort, or of a
ranking) was followed: the scan read on from the page after, and the 30 places of the
first were never read. Now it is the source's failure too.

An empty first page of a tag search with no ``next_url``, where nothing curaflow knows of
stands (a tag nobody used), stays the end of results, in every sort.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
from curaflow.domain.reasons import MAX_REASON_MESSAGE, TerminalReason
from curaflow.sources.errors import SourceError
from curaflow.sources.pixiv.replay.data import recorded_works
from curaflow.sources.pixiv.scan import ScanCheckpoint, scan
from curaflow.sources.pixiv.scan.pages import check_page, promised_by_the_query
from tests.fakes.replay import Faults
from tests.frontier_support import scan_on_replay
from tests.support import pixiv_answering

#: The replay's recorded works, in the order its ranking without a date lists them: two
#: pages (30 and 30), the second naming no page after it.
RANKED = [str(w["id"]) for w in recorded_works()]


def _ranking(date: str | None = None) -> TargetSpec:
    query = TargetQuery(mode="ranking", ranking_date=date)  # type: ignore[arg-type]
    return TargetSpec(target_id="t", query=query, filters=TargetFilters(), scan_limit=1)


def _search(tag: str, sort: str = "date_desc") -> TargetSpec:
    query = TargetQuery(tags=[tag], sort=sort)  # type: ignore[arg-type]
    return TargetSpec(target_id="t", query=query, filters=TargetFilters(), scan_limit=1)


def _known_but(*free: str):  # type: ignore[no-untyped-def]
    """A ledger that rules out every work but ``free`` (none given: rules out none)."""

    async def known(ids: list[str]) -> dict[str, str]:
        return {w: "duplicate" for w in ids if free and w not in free}

    return known


def _scan(faults: Faults, target: TargetSpec, *free: str) -> ScanCheckpoint:
    return asyncio.run(scan_on_replay(faults, target, _known_but(*free)))


def _fails_as_the_sources(faults: Faults, target: TargetSpec, *free: str) -> SourceError:
    with pytest.raises(SourceError) as err:
        _scan(faults, target, *free)
    assert err.value.reason == TerminalReason.REMOTE_HTTP_ERROR and err.value.retryable
    return err.value


def _offsets(faults: Faults, kind: str) -> list[int]:
    return [int(e.params.get("offset") or 0) for e in faults.of(kind)]


@pytest.mark.parametrize("date", [None, "2025-02-04"], ids=["latest", "a-day"])
def test_an_empty_first_page_of_a_ranking_is_the_sources_failure_and_the_retry_reads_it(date: str | None) -> None:
    # Before: exhausted, no candidate — the day's ranking "had no new work".
    faults = Faults(search=["empty"])
    _fails_as_the_sources(faults, _ranking(date))
    assert _offsets(faults, "ranking") == [0]
    result = _scan(faults, _ranking(date))
    assert len(result.candidates) == 1 and not result.exhausted
    assert result.report.fetched >= 1


def test_an_outage_answering_every_ranking_page_empty_fails_every_attempt() -> None:
    faults = Faults(search=["empty"] * 3)
    for _ in range(3):
        _fails_as_the_sources(faults, _ranking())
    assert _offsets(faults, "ranking") == [0, 0, 0]


@pytest.mark.parametrize(
    "target",
    [_ranking(), _search("オリジナル"), _search("オリジナル", "date_asc"), _search("オリジナル", "popular_desc")],
    ids=["ranking", "date_desc", "date_asc", "popular_desc"],
)
def test_an_empty_first_page_naming_a_next_page_is_the_sources_failure(target: TargetSpec) -> None:
    # The first page lists nothing and names the page 30 places on. Before: the scan
    # followed it, and the first 30 places were never read (here the candidate was the
    # work at place 30; a work of places 0–29 was never examined).
    faults = Faults(search=["empty_going_on"])
    _fails_as_the_sources(faults, target)
    kind = "ranking" if target.query.mode == "ranking" else "search"
    assert _offsets(faults, kind) == [0]
    result = _scan(faults, target)
    assert len(result.candidates) == 1
    assert _offsets(faults, kind) == [0, 0]


def test_an_empty_ranking_page_past_the_first_naming_a_next_page_is_the_sources_failure() -> None:
    # The second page of the ranking (the only work not ruled out stands there) lists
    # nothing and names a third. It is asked a page earlier (results that shrank look
    # alike at first); answering so again there, the attempt fails; the retry reads it.
    free = RANKED[40]
    faults = Faults(search=[None, "empty_going_on", "empty_going_on"])
    _fails_as_the_sources(faults, _ranking(), free)
    result = _scan(faults, _ranking(), free)
    assert [w.work_id for w in result.candidates] == [free]


def test_an_empty_ranking_page_the_page_before_promised_is_the_sources_failure() -> None:
    free = RANKED[40]
    faults = Faults(search=[None, "empty", "empty"])
    _fails_as_the_sources(faults, _ranking(), free)
    assert _offsets(faults, "ranking") == [0, 30, 0]
    result = _scan(faults, _ranking(), free)
    assert [w.work_id for w in result.candidates] == [free]


def test_a_ranking_whose_last_page_lists_works_and_no_next_page_ends() -> None:
    # The true end of a ranking: a page of works naming no page after it.
    result = _scan(Faults(), _ranking(), "none-of-them")
    assert result.candidates == [] and result.exhausted
    assert result.report.fetched == len(RANKED)


@pytest.mark.parametrize("sort", ["date_desc", "date_asc", "popular_desc"])
def test_an_empty_first_page_of_a_tag_nobody_used_is_still_the_end(sort: str) -> None:
    # No next_url, no work the target's frontier knows of there (none kept here): the
    # source's own word for no results.
    faults = Faults()
    result = _scan(faults, _search("a-tag-nobody-uses", sort))
    assert result.candidates == [] and result.exhausted and result.report.fetched == 0
    assert _offsets(faults, "search") == [0]


@pytest.mark.parametrize("promised", [False, True])
@pytest.mark.parametrize("next_url", ["https://app-api.pixiv.net/v1/illust/ranking?mode=day&offset=30", "x"])
def test_check_page_refuses_an_empty_page_naming_a_next_one(promised: bool, next_url: str) -> None:
    with pytest.raises(SourceError) as err:
        check_page({"illusts": [], "next_url": next_url}, promised=promised)
    assert err.value.reason == TerminalReason.REMOTE_HTTP_ERROR and err.value.retryable


def test_check_page_takes_an_empty_page_naming_none_for_the_end_only_where_nothing_promised_works() -> None:
    check_page({"illusts": [], "next_url": None}, promised=False)
    with pytest.raises(SourceError):
        check_page({"illusts": [], "next_url": None}, promised=True)


def test_only_a_ranking_is_promised_by_its_query() -> None:
    assert promised_by_the_query(_ranking())
    assert not any(promised_by_the_query(_search("x", sort)) for sort in ("date_desc", "date_asc", "popular_desc"))


#: Items that are no work curaflow reads: no object, or an object without a Pixiv id.
UNREADABLE: list[object] = [None, 0, "x", [], {}, {"id": None}, {"id": "abc"}, {"id": -1}]


@pytest.mark.parametrize("items", [[None] * 30, [{}] * 30, UNREADABLE], ids=["nulls", "empty-objects", "mixed"])
def test_a_page_listing_no_work_curaflow_reads_is_as_empty_where_works_were_promised(items: list[object]) -> None:
    # A page whose every item has no id curaflow reads lists no work: where works were
    # promised (a ranking, a next_url), it is the source's failure as an empty page is.
    # Before: each item was counted invalid and the page taken — a ranking answering
    # 30 nulls and no next_url ended exhausted, no candidate, "nothing new".
    with pytest.raises(SourceError) as err:
        check_page({"illusts": items, "next_url": None}, promised=True)
    assert err.value.reason == TerminalReason.REMOTE_HTTP_ERROR and err.value.retryable
    with pytest.raises(SourceError):  # naming a next page, nothing promised it: followed, its places unread
        check_page(
            {"illusts": items, "next_url": "https://app-api.pixiv.net/v1/search/illust?offset=30"}, promised=False
        )
    check_page({"illusts": items, "next_url": None}, promised=False)  # the end where nothing promised works
    check_page({"illusts": [*items, {"id": 1}], "next_url": None}, promised=True)  # one work read: a page


def test_a_ranking_answering_a_page_of_nulls_fails_the_attempt_and_the_retry_reads_it() -> None:
    answers: list[dict[str, object]] = [{"illusts": [None] * 30, "next_url": None}]

    def api(request: httpx.Request) -> httpx.Response:
        if answers:
            return httpx.Response(200, json=answers.pop(0))
        offset = int(request.url.params.get("offset") or 0)
        return httpx.Response(200, json={"illusts": recorded_works()[offset : offset + 30], "next_url": None})

    async def nothing(cp: ScanCheckpoint) -> None:
        return None

    async def run() -> ScanCheckpoint:
        client = pixiv_answering(api)
        return await scan(
            client, _ranking(), scan_limit=1, known=_known_but(), on_page=nothing, settled_before="2100-01-01"
        )

    with pytest.raises(SourceError) as err:
        asyncio.run(run())
    assert err.value.reason == TerminalReason.REMOTE_HTTP_ERROR and err.value.retryable
    result = asyncio.run(run())
    assert len(result.candidates) == 1 and result.report.reasons.get("invalid", 0) == 0


def _empty_ranking_failure(target: TargetSpec) -> str:
    def api(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"illusts": [], "next_url": None})

    async def nothing(cp: ScanCheckpoint) -> None:
        return None

    async def run() -> ScanCheckpoint:
        return await scan(
            pixiv_answering(api), target, scan_limit=1, known=_known_but(), on_page=nothing, settled_before="2100-01-01"
        )

    with pytest.raises(SourceError) as err:
        asyncio.run(run())
    assert err.value.reason == TerminalReason.REMOTE_HTTP_ERROR and err.value.retryable
    return str(err.value)


@pytest.mark.parametrize("mode", ["day_r18", "week_r18g", "day_male_r18"])
def test_an_empty_r18_ranking_is_told_it_may_be_the_accounts_setting(mode: str) -> None:
    # Pixiv answers an R-18 ranking empty ({"illusts": [], "next_url": null}) to an account
    # whose R-18 setting is off (pixivpy's issues #107, #186): every job of such a target
    # fails, and the report must point there. Before: "a ranking, which Pixiv never
    # publishes empty" — the operator looked for an outage.
    target = _ranking().model_copy(update={"query": TargetQuery(mode="ranking", ranking_mode=mode)})  # type: ignore[arg-type]
    message = _empty_ranking_failure(target)
    assert "R-18" in message and "setting" in message
    assert "never publishes" not in message


def test_an_empty_ranking_of_a_day_is_told_the_day_may_have_none_yet() -> None:
    # A day's ranking is published the next day around noon JST; asked before, Pixiv
    # answers it empty (HibiAPI issue #322).
    message = _empty_ranking_failure(_ranking("2025-02-04"))
    assert "no ranking of 2025-02-04 in this mode (yet" in message
    assert "R-18" not in message and "never publishes" not in message


def test_an_empty_rankings_causes_fit_the_cells_terminal_message() -> None:
    # The cell's terminal reason message keeps MAX_REASON_MESSAGE characters (the rest is
    # cut): each cause must be within them, after the activity's own words before it
    # (room for 100 characters).
    query = TargetQuery(mode="ranking", ranking_mode="day_female_r18", ranking_date="2025-02-04")  # type: ignore[arg-type]
    message = _empty_ranking_failure(_ranking().model_copy(update={"query": query}))
    kept = message[: MAX_REASON_MESSAGE - 100]
    assert "R-18 setting" in kept and "2025-02-04" in kept and "outage" in kept, message

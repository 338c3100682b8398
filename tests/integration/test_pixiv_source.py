"""The Pixiv client, the candidate scan and the artifact store against the replay server.

Real HTTP on 127.0.0.1: the replay server in scripted fault mode plays Pixiv; the client,
scan and store are the production code. No Temporal here — the job-level behaviour of
the same rules is in ``test_source_jobs.py``.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from curaflow import artifacts
from curaflow.artifacts import ArtifactStore
from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
from curaflow.domain.models import Work
from curaflow.domain.reasons import TerminalReason
from curaflow.process.httpserver import BackgroundServer
from curaflow.sources.errors import SourceError, WorkUnavailable
from curaflow.sources.gate import MemoryGate
from curaflow.sources.pixiv.client import HASH_SECRET, PixivClient, parse_work
from curaflow.sources.pixiv.replay.app import create_replay_app
from curaflow.sources.pixiv.replay.data import DeepSet, recorded_works
from curaflow.sources.pixiv.scan import ScanCheckpoint, scan
from tests.fakes.replay import Faults
from tests.support import FakeClock


class Replay:
    def __init__(self, server: BackgroundServer, faults: Faults) -> None:
        self.server = server
        self.faults = faults
        self.http = httpx.AsyncClient(timeout=10)
        self.gate = MemoryGate(0, base_ms=1000)

    def client(self, **kwargs: Any) -> PixivClient:
        kwargs.setdefault("gate", self.gate)
        return PixivClient(
            self.http,
            refresh_token="replay",
            api_url=self.server.url,
            auth_url=self.server.url,
            image_host=self.server.url + "/i",
            **kwargs,
        )


@pytest.fixture
async def replay() -> AsyncIterator[Replay]:
    faults = Faults()
    server = await BackgroundServer(create_replay_app(faults)).start()
    r = Replay(server, faults)
    try:
        yield r
    finally:
        await r.http.aclose()
        await server.stop()


def target(**kw: Any) -> TargetSpec:
    query = kw.pop("query", {})
    filters = kw.pop("filters", {})
    return TargetSpec(target_id="t", query=TargetQuery(**query), filters=TargetFilters(**filters), **kw)


async def run_scan(client: PixivClient, spec: TargetSpec, **kw: Any) -> tuple[ScanCheckpoint, list[str]]:
    offered: list[str] = []
    duplicates = set(kw.pop("duplicates", ()))  # the helper's own argument, not scan()'s

    async def known(ids: list[str]) -> dict[str, str]:
        offered.extend(ids)
        return {work_id: "duplicate" for work_id in duplicates & set(ids)}

    async def on_page(cp: ScanCheckpoint) -> None:
        return None

    kw.setdefault("scan_limit", spec.scan_limit)
    result = await scan(client, spec, known=known, on_page=on_page, **kw)
    return result, offered


class _NextUrlClient:
    """A client whose every search page holds the same 30 recorded works and a ``next_url``
    of the given shape (a cursor where Pixiv sends an offset, or no URL at all)."""

    def __init__(self, next_url: object) -> None:
        self.next_url = next_url
        self.offsets: list[int] = []

    async def search_illust(self, word: str, *, offset: int = 0, **kw: Any) -> dict[str, Any]:
        self.offsets.append(offset)
        if len(self.offsets) > 20:
            raise AssertionError(f"the scan asked {len(self.offsets)} pages at offsets {sorted(set(self.offsets))}")
        await asyncio.sleep(0)
        return {"illusts": list(recorded_works()[:30]), "next_url": self.next_url}


@pytest.mark.parametrize(
    "next_url",
    [
        "https://app-api.pixiv.net/v1/search/illust?word=a&cursor=c2",
        "https://app-api.pixiv.net/v1/search/illust?word=a&offset=0",
        "https://app-api.pixiv.net/v1/search/illust?word=a&offset=x",
        "http://[::1/v1?offset=30",
        5,
        True,
        {"offset": 30},
        "https://app-api.pixiv.net/v1/search/illust?word=a&offset=60",
        "https://app-api.pixiv.net/v1/search/illust?word=a&offset=999999999",
    ],
    ids=["cursor", "offset-0", "offset-text", "broken-url", "number", "boolean", "object", "skips-a-page", "far"],
)
@pytest.mark.parametrize("sort", ["date_desc", "popular_desc"])
async def test_a_next_url_that_does_not_move_past_its_page_is_the_sources_failure_not_a_loop(
    next_url: object, sort: str
) -> None:
    # Followed, a next_url without a usable offset asked page 0 again and again (its works
    # all seen, the scan never advanced): the account's rate budget spent until the
    # attempt's timeout. One that leaps past the page's works skipped them unread (a page
    # further) or, past the app-api's last offset, ended the scan as if the results had
    # ended: `exhausted`, "no new works" (until 2026-12-05). An answer not understood
    # costs one attempt.
    client = _NextUrlClient(next_url)

    async def known(ids: list[str]) -> dict[str, str]:
        return dict.fromkeys(ids, "duplicate")  # every work delivered already: the scan reads on

    async def on_page(cp: ScanCheckpoint) -> None:
        return None

    spec = target(query={"tags": ["a"], "sort": sort}, scan_limit=100)
    with pytest.raises(SourceError) as caught:
        await asyncio.wait_for(scan(client, spec, known=known, on_page=on_page, scan_limit=100), 10)  # type: ignore[arg-type]
    assert caught.value.retryable and caught.value.reason == TerminalReason.REMOTE_HTTP_ERROR
    assert client.offsets == [0]


class _DatedClient:
    """A client whose one search page holds 30 recorded works, their ``create_date`` set
    to ``create_date``, and no next page."""

    def __init__(self, create_date: object) -> None:
        self.create_date = create_date

    async def search_illust(self, word: str, *, offset: int = 0, **kw: Any) -> dict[str, Any]:
        works = [{**w, "create_date": self.create_date} for w in recorded_works()[:30]]
        return {"illusts": works, "next_url": None}


@pytest.mark.parametrize("create_date", ["1736470800", 1736470800, "2025/02/04 00:00", None])
async def test_a_date_sorted_page_without_dates_curaflow_reads_keeps_nothing_and_is_retried(
    create_date: object,
) -> None:
    # The frontier stored such a date as a day and every later job asked Pixiv for
    # start_date=1736470800: HTTP 400, remote_http_error for good. A popularity search
    # does not order by the date: its works are read, their date unknown.
    pages: list[ScanCheckpoint] = []

    async def known(ids: list[str]) -> dict[str, str]:
        return {}

    async def on_page(cp: ScanCheckpoint) -> None:
        pages.append(cp)

    for sort in ("date_desc", "date_asc"):
        dated = target(query={"tags": ["a"], "sort": sort}, scan_limit=5)
        with pytest.raises(SourceError) as caught:
            await scan(_DatedClient(create_date), dated, known=known, on_page=on_page, scan_limit=5)  # type: ignore[arg-type]
        assert caught.value.retryable and "creation date" in str(caught.value)
        assert pages == []
    popular = target(query={"tags": ["a"], "sort": "popular_desc"}, scan_limit=5)
    result = await scan(_DatedClient(create_date), popular, known=known, on_page=on_page, scan_limit=5)  # type: ignore[arg-type]
    assert result.report.fetched >= 5 and all(w.create_date is None for w in result.candidates)


# ---- auth ----------------------------------------------------------------------------


async def test_refresh_token_grant_sends_the_app_headers(replay: Replay) -> None:
    client = replay.client()
    await client.search_illust("風景")
    auth = replay.faults.of("auth")
    assert len(auth) == 1
    p = auth[0].params
    assert p["grant_type"] == "refresh_token"
    assert p["x_client_hash"] == hashlib.md5((p["x_client_time"] + HASH_SECRET).encode()).hexdigest()


async def test_token_near_expiry_is_refreshed_before_use(replay: Replay) -> None:
    replay.faults.token_ttl_s = 3600  # Pixiv's lifetime: refreshed 5 min before it runs out
    clock = FakeClock()
    client = replay.client(clock=clock)
    await client.search_illust("風景")
    clock.advance(3600 - 300 - 1)
    await client.search_illust("風景")
    assert replay.faults.requests.count("auth") == 1  # still outside the margin
    clock.advance(2)
    await client.search_illust("風景")
    assert replay.faults.requests.count("auth") == 2
    assert not [e for e in replay.faults.log if e.error and "OAuth" in e.error]


async def test_a_short_lived_token_is_refreshed_a_tenth_of_its_lifetime_early(replay: Replay) -> None:
    replay.faults.token_ttl_s = 100
    clock = FakeClock()
    client = replay.client(clock=clock)
    await client.search_illust("風景")
    clock.advance(89)
    await client.search_illust("風景")
    assert replay.faults.requests.count("auth") == 1
    clock.advance(2)
    await client.search_illust("風景")
    assert replay.faults.requests.count("auth") == 2


@pytest.mark.parametrize("advertised", ["soon", None, -5, 0.5, [3600], {"s": 3600}, True, "1e999"])
async def test_a_token_lifetime_curaflow_cannot_use_costs_no_refresh_storm(replay: Replay, advertised: Any) -> None:
    """An ``expires_in`` that is not a usable lifetime (text, missing, negative, a second,
    a list, a boolean, endless) is read as Pixiv's 3600 s, kept within 60 s .. 1 day: the
    token is neither refreshed before every request (an auth call each, on the account's
    gate) nor a crash of the call; a token the answer outlived is refreshed by the OAuth
    error as before."""
    replay.faults.token_ttl_s = advertised  # what the answer says
    replay.faults.token_lifetime_s = 3600  # how long the token is really good for
    clock = FakeClock()
    client = replay.client(clock=clock)
    for _ in range(3):
        page = await client.search_illust("風景")
        assert page["illusts"]
        clock.advance(10)
    assert replay.faults.requests.count("auth") == 1


async def test_token_rejected_early_is_refreshed_once_and_the_call_retried(replay: Replay) -> None:
    replay.faults.search = ["oauth"]
    client = replay.client()
    page = await client.search_illust("風景")
    assert page["illusts"]
    assert replay.faults.requests == ["auth", "search", "auth", "search"]


async def test_a_fresh_token_rejected_again_is_the_sources_and_retried(replay: Replay) -> None:
    """The token endpoint has just accepted the refresh token: a second OAuth error is the
    app-api's, retried — until 2026-12-05 ``auth_failed``, the account's token blamed."""
    replay.faults.search = ["oauth", "oauth"]
    with pytest.raises(SourceError) as caught:
        await replay.client().search_illust("風景")
    assert caught.value.reason == TerminalReason.REMOTE_HTTP_ERROR and caught.value.retryable
    assert replay.faults.requests == ["auth", "search", "auth", "search"]


async def test_invalid_grant_is_auth_failed_after_one_token_request(replay: Replay) -> None:
    replay.faults.auth = ["invalid_grant"]
    with pytest.raises(SourceError) as caught:
        await replay.client().search_illust("風景")
    assert caught.value.reason == TerminalReason.AUTH_FAILED
    assert caught.value.retryable is False
    assert replay.faults.requests == ["auth"]


# ---- errors in bodies and the gate ------------------------------------------------


@pytest.mark.parametrize("fault,status", [("rate_limit", 403), ("rate_limit_429", 429)])
async def test_rate_limit_body_climbs_the_gate_ladder(replay: Replay, fault: str, status: int) -> None:
    replay.faults.search = [fault, fault]
    replay.faults.retry_after_s = None
    clock = FakeClock()
    gate = MemoryGate(0, clock=clock)  # the default ladder: 60 s, doubling, up to 15 min
    client = replay.client(gate=gate)
    with pytest.raises(SourceError) as first:
        await client.search_illust("風景")
    assert first.value.reason == TerminalReason.RATE_LIMITED and first.value.status == status
    assert first.value.cooldown_s == 60
    # While cooling down nothing leaves: the next call fails without a request.
    sent = len(replay.faults.log)
    clock.advance(59)
    with pytest.raises(SourceError) as cooling:
        await client.search_illust("風景")
    assert cooling.value.reason == TerminalReason.RATE_LIMITED and "cooling down" in str(cooling.value)
    assert len(replay.faults.log) == sent
    clock.advance(1)
    with pytest.raises(SourceError) as second:
        await client.search_illust("風景")
    assert second.value.cooldown_s == 120  # doubled
    assert len(replay.faults.log) == sent + 1
    clock.advance(120)
    assert (await client.search_illust("風景"))["illusts"]


async def test_the_ladder_stops_at_its_cap(replay: Replay) -> None:
    replay.faults.search = ["rate_limit_429"] * 6
    replay.faults.retry_after_s = None
    clock = FakeClock()
    client = replay.client(gate=MemoryGate(0, clock=clock))
    cooldowns: list[float] = []
    for _ in range(6):
        with pytest.raises(SourceError) as caught:
            await client.search_illust("風景")
        assert caught.value.cooldown_s is not None
        cooldowns.append(caught.value.cooldown_s)
        clock.advance(caught.value.cooldown_s)
    assert cooldowns == [60, 120, 240, 480, 900, 900]


async def test_retry_after_is_the_floor_of_the_cooldown(replay: Replay) -> None:
    replay.faults.search = ["rate_limit_429"]
    replay.faults.retry_after_s = 3
    client = replay.client(gate=MemoryGate(0, base_ms=100))
    with pytest.raises(SourceError) as caught:
        await client.search_illust("風景")
    assert caught.value.cooldown_s == pytest.approx(3.0, abs=0.05)


async def test_gate_spaces_requests(replay: Replay) -> None:
    departures: list[float] = []

    class Recording(MemoryGate):
        async def acquire(self) -> None:
            await super().acquire()
            departures.append(time.monotonic())

    gate = Recording(150)
    client = replay.client(gate=gate)
    for _ in range(3):
        await client.search_illust("風景")
    assert len(departures) == len(replay.faults.log) == 4  # auth + 3 searches, all gated
    assert all(b - a >= 0.145 for a, b in itertools.pairwise(departures))


async def test_restricted_and_missing_works_are_unavailable(replay: Replay) -> None:
    wid = str(recorded_works()[0]["id"])
    replay.faults.restricted_works = {wid}
    with pytest.raises(WorkUnavailable) as restricted:
        await replay.client().illust_detail(wid)
    # The "restricted" words are what a restricted account gets for any request: for a
    # work listed whole they do not name the work (held briefly, not the week); the
    # app-api's own 404 does.
    assert restricted.value.recognised is False
    with pytest.raises(WorkUnavailable) as missing:
        await replay.client().illust_detail("1")
    assert missing.value.recognised is True
    replay.faults.search = ["restricted"]
    with pytest.raises(SourceError) as caught:
        await replay.client().search_illust("風景")
    assert "restricted" in str(caught.value)


async def test_an_image_404_is_the_works_only_as_its_detail_says_every_request_gated(replay: Replay) -> None:
    """An image's 404 alone is never the work's (any mirror, CDN or moved path answers it
    for every work): the detail asked for it decides, through the account's gate like
    every request (auth, image, detail — each departure recorded)."""
    from curaflow.sources.base import SourcePolicy
    from curaflow.sources.corroboration import corroborated
    from curaflow.sources.pixiv.source import PixivSource

    departures: list[str] = []

    class Recording(MemoryGate):
        async def acquire(self) -> None:
            await super().acquire()
            departures.append("gate")

    alive, gone = (parse_work(w) for w in recorded_works()[:2])
    replay.faults.absent_images = {alive.work_id}
    replay.faults.missing_works = {gone.work_id}
    source = PixivSource("default", replay.client(gate=Recording(0)), SourcePolicy())
    verdicts = {}
    for work in (alive, gone):
        with pytest.raises(WorkUnavailable) as raised:
            async with source.download(work.pages[0].url):
                pass
        assert (raised.value.corroborate, raised.value.recognised) == (True, False)
        verdicts[work.work_id] = (await corroborated(source, work.work_id, raised.value)).recognised
    assert verdicts == {alive.work_id: False, gone.work_id: True}
    assert [(e.kind, e.status) for e in replay.faults.log] == [
        ("image", 404),
        ("auth", 200),
        ("detail", 200),
        ("image", 404),
        ("detail", 404),
    ]
    assert len(departures) == len(replay.faults.log)  # every request passed the gate


# ---- search modes ----------------------------------------------------------------------


async def test_search_parameters_reach_the_api(replay: Replay) -> None:
    spec = target(
        query={
            "tags": ["風景", "星空"],
            "search_target": "exact_match_for_tags",
            "sort": "date_asc",
            "duration": "within_last_month",
        },
        scan_limit=5,
    )
    await run_scan(replay.client(), spec)
    params = replay.faults.of("search")[0].params
    assert params["word"] == "風景 星空"
    assert params["search_target"] == "exact_match_for_tags"
    assert params["sort"] == "date_asc"
    assert params["duration"] == "within_last_month"


async def test_and_relation_needs_every_tag_or_relation_any(replay: Replay) -> None:
    and_result, _ = await run_scan(
        replay.client(), target(query={"tags": ["風景", "マウス描き"]}, scan_limit=100), want=100
    )
    or_result, _ = await run_scan(
        replay.client(), target(query={"tags": ["風景", "マウス描き"], "relation": "or"}, scan_limit=100), want=100
    )
    assert replay.faults.of("search")[1].params["word"] == "風景 OR マウス描き"
    both = {w.work_id for w in and_result.candidates}
    either = {w.work_id for w in or_result.candidates}
    assert both and both < either
    for w in and_result.candidates:
        assert {"風景", "マウス描き"} <= set(w.tags)


async def test_sort_and_date_window(replay: Replay) -> None:
    spec = target(
        query={"tags": ["風景"], "sort": "date_asc"},
        filters={"start_date": "2020-01-01", "end_date": "2020-12-31"},
        scan_limit=100,
    )
    result, _ = await run_scan(replay.client(), spec, want=100)
    days = [w.create_date[:10] for w in result.candidates if w.create_date]
    assert days == sorted(days) and days[0] >= "2020-01-01" and days[-1] <= "2020-12-31"
    params = replay.faults.of("search")[0].params
    assert params["start_date"] == "2020-01-01" and params["end_date"] == "2020-12-31"


async def test_ranking_mode_and_date(replay: Replay) -> None:
    spec = target(query={"mode": "ranking", "ranking_mode": "week", "ranking_date": "2025-02-04"}, scan_limit=100)
    result, _ = await run_scan(replay.client(), spec, want=100)
    params = replay.faults.of("ranking")[0].params
    assert params["mode"] == "week" and params["date"] == "2025-02-04"
    assert result.candidates
    assert all("2025-01-29" <= (w.create_date or "")[:10] <= "2025-02-04" for w in result.candidates)
    bookmarks = [w.total_bookmarks for w in result.candidates]
    assert bookmarks == sorted(bookmarks, reverse=True)


# ---- filters ---------------------------------------------------------------------------


async def test_every_filter_rejects_with_its_reason(replay: Replay) -> None:
    works = [
        str(w["id"])
        for w in recorded_works()
        if "風景" in [t["name"] for t in w["tags"]]
        and w["total_bookmarks"] >= 3000
        and w["page_count"] == 1
        and w["create_date"] >= "2019-06-01"
    ]
    ai, r18, restricted, excluded = works[0], works[1], works[2], works[3]
    replay.faults.mutate = {ai: {"illust_ai_type": 2}, r18: {"x_restrict": 1}}
    replay.faults.restricted_works = {restricted}
    spec = target(
        query={"tags": ["風景"]},
        filters={"min_bookmarks": 3000, "exclude_ai": True, "max_page_count": 1, "start_date": "2019-06-01"},
        exclude_work_ids=[excluded],
        scan_limit=100,
    )
    result, _ = await run_scan(replay.client(), spec, want=100)
    by_id = {f["work_id"]: f["reason"] for f in result.report.filtered}
    reasons = result.report.reasons
    assert reasons["filtered:ai"] >= 1 and by_id[ai] == "other"
    assert reasons["filtered:r18"] >= 1 and by_id[r18] == "other"
    assert by_id[restricted] == "unavailable"  # visible:false placeholder, limit_sanity_level image
    assert by_id[excluded] == "excluded"
    assert reasons["filtered:min_bookmarks"] >= 1
    assert reasons["filtered:page_count"] >= 1  # 82536135 has 14 pages
    assert replay.faults.of("search")[0].params["start_date"] == "2019-06-01"  # the API filters dates too
    assert result.report.fetched == result.report.rejected + len(result.candidates)
    for w in result.candidates:
        assert w.total_bookmarks >= 3000 and w.page_count == 1 and w.ai_type != 2 and w.x_restrict == 0
        assert (w.create_date or "") >= "2019-06-01"
    # a ranking has no date parameters: the date range is enforced locally
    ranked, _ = await run_scan(
        replay.client(), target(query={"mode": "ranking"}, filters={"end_date": "2025-02-03"}, scan_limit=100), want=100
    )
    assert ranked.report.reasons["filtered:date"] >= 1
    assert all((w.create_date or "")[:10] <= "2025-02-03" for w in ranked.candidates)
    # with r18 allowed the R-18 work is a candidate
    spec.filters.r18 = True
    allowed, _ = await run_scan(replay.client(), spec, want=100)
    assert r18 in {w.work_id for w in allowed.candidates}


# ---- the 5000-offset boundary -----------------------------------------------------


@pytest.mark.slow  # pages through thousands of recorded results
@pytest.mark.parametrize("sort", ["date_desc", "date_asc"])
async def test_deep_scan_crosses_the_5000_offset_cap_without_skipping_or_repeating(replay: Replay, sort: str) -> None:
    # the only eligible work lies 5150 works deep in the walk's order
    want_rank = 5150 if sort == "date_desc" else 250
    deep = DeepSet(tag="deep-tag", count=5400, per_day=97, popular_ranks=frozenset({want_rank}))
    replay.faults.deep = deep
    spec = target(query={"tags": ["deep-tag"], "sort": sort}, filters={"min_bookmarks": 500}, scan_limit=1)

    result, offered = await run_scan(replay.client(), spec, max_examined=10_000)

    # ranks in the order the sort walks them, up to the one eligible work
    order = list(range(deep.count)) if sort == "date_desc" else list(range(deep.count - 1, -1, -1))
    expected = [deep.work_id(r) for r in order[: order.index(want_rank) + 1]]
    assert [w.work_id for w in result.candidates] == [deep.work_id(want_rank)]
    assert result.report.fetched == len(expected)  # none skipped, none counted twice
    assert result.report.rejected == len(expected) - 1
    assert len(offered) == len(set(offered))  # no work offered twice
    assert set(expected) <= set(offered)
    assert result.window_moves >= 1
    searches = replay.faults.of("search")
    assert all(int(e.params.get("offset", 0)) <= 5000 for e in searches)
    assert all(e.status == 200 for e in searches)  # never an HTTP 400
    assert any(("end_date" if sort == "date_desc" else "start_date") in e.params for e in searches)


@pytest.mark.slow  # pages through thousands of recorded results
async def test_a_day_deeper_than_the_cap_is_stepped_over_not_looped(replay: Replay) -> None:
    # more works on one day than a walk from each end reaches: the middle is out of reach;
    # the day is reported and the scan goes on with the day before
    deep = DeepSet(tag="one-day", count=10_200, per_day=10_150, popular_ranks=frozenset({10_160}))
    replay.faults.deep = deep
    spec = target(query={"tags": ["one-day"]}, filters={"min_bookmarks": 500}, scan_limit=1)
    result, offered = await run_scan(replay.client(), spec, max_examined=40_000)
    assert result.skipped_days == ["2025-02-04"]
    assert [d.model_dump() for d in result.report.skipped_days] == [{"day": "2025-02-04", "reached": 10_020}]
    assert [w.work_id for w in result.candidates] == [deep.work_id(10_160)]
    assert len(offered) == len(set(offered))
    assert all(e.status == 200 for e in replay.faults.of("search"))


# ---- artifacts -------------------------------------------------------------------------


async def fetched_work(replay: Replay, work_id: str) -> Work:
    page = await replay.client().search_illust(next(t["name"] for t in recorded_works_by_id()[work_id]["tags"]))
    return next(parse_work(i) for i in page["illusts"] if str(i["id"]) == work_id)


def recorded_works_by_id() -> dict[str, dict[str, Any]]:
    return {str(w["id"]): w for w in recorded_works()}


async def test_multi_page_work_fetches_every_page_with_the_referer(replay: Replay, tmp_path: Path) -> None:
    work = await fetched_work(replay, "126879163")  # 3 pages
    store = ArtifactStore(tmp_path)
    artifact = await store.fetch(replay.client(), work, "job", "t")
    assert [f.page for f in artifact.files] == [0, 1, 2]
    assert all(Path(f.path).stat().st_size == f.bytes > 0 and f.width and f.height for f in artifact.files)
    for f in artifact.files:  # the size the decode check read is the file's
        with Image.open(f.path) as image:
            assert (f.width, f.height) == image.size
    images = replay.faults.of("image")
    assert len(images) == 3 and all(e.referer == "https://app-api.pixiv.net/" for e in images)


async def test_truncated_body_is_never_recorded_complete(replay: Replay, tmp_path: Path) -> None:
    work = await fetched_work(replay, "126879163")
    replay.faults.images = [None, "truncate"]
    store = ArtifactStore(tmp_path)
    with pytest.raises(SourceError) as caught:
        await store.fetch(replay.client(), work, "job", "t")
    assert caught.value.reason == TerminalReason.DOWNLOAD_FAILED
    folder = store.folder("job", "t")
    assert sorted(p.name for p in folder.iterdir()) == ["126879163_p0.jpg"]  # page 1 left no file
    # the retry keeps the complete page and fetches the rest
    artifact = await store.fetch(replay.client(), work, "job", "t")
    assert len(artifact.files) == 3
    assert len(replay.faults.of("image")) == 4


async def test_unknown_content_length_is_accepted_once_the_body_ended(replay: Replay, tmp_path: Path) -> None:
    work = await fetched_work(replay, "126839103")
    replay.faults.images = ["chunked"]
    artifact = await ArtifactStore(tmp_path).fetch(replay.client(), work, "job", "t")
    assert artifact.files[0].bytes > 0 and artifact.files[0].width


async def test_slow_body_is_a_download_timeout(replay: Replay, tmp_path: Path) -> None:
    work = await fetched_work(replay, "126839103")
    replay.faults.images = ["slow"]
    replay.faults.slow_images_s = 1.5
    http = httpx.AsyncClient(timeout=httpx.Timeout(0.5))
    try:
        client = PixivClient(
            http,
            refresh_token="replay",
            api_url=replay.server.url,
            auth_url=replay.server.url,
            image_host=replay.server.url + "/i",
        )
        with pytest.raises(SourceError) as caught:
            await ArtifactStore(tmp_path).fetch(client, work, "job", "t")
    finally:
        await http.aclose()
    assert caught.value.reason == TerminalReason.DOWNLOAD_TIMEOUT
    assert not list(ArtifactStore(tmp_path).folder("job", "t").iterdir())


async def test_forbidden_image_is_a_work_unavailable(replay: Replay, tmp_path: Path) -> None:
    work = await fetched_work(replay, "126839103")
    replay.faults.forbidden_works = {"126839103"}
    with pytest.raises(WorkUnavailable) as caught:
        await ArtifactStore(tmp_path).fetch(replay.client(), work, "job", "t")
    assert caught.value.work_id == "126839103"


async def test_a_slow_disk_never_holds_up_the_event_loop(
    replay: Replay, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes, fsync, the decode check and the hash run in threads: with every
    fsync taking 300 ms, the loop (heartbeats, workflow tasks) still turns every few ms."""
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        time.sleep(0.3)
        real_fsync(fd)

    work = await fetched_work(replay, "126879163")  # 3 pages
    monkeypatch.setattr(os, "fsync", slow_fsync)
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.monotonic()
        while not done.is_set():
            await asyncio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    ticks = asyncio.create_task(ticker())
    try:
        artifact = await ArtifactStore(tmp_path).fetch(replay.client(), work, "job", "t")
    finally:
        done.set()
        await ticks
    assert len(artifact.files) == 3
    assert max(gaps) < 0.2, f"the event loop stalled {max(gaps):.3f} s"


async def test_a_page_costs_one_thread_hop_and_is_hashed_as_written(
    replay: Replay, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each hop to a thread waits for the event loop twice: a page that fits in
    one write batch is created, written, fsynced, decode-checked, renamed and hashed in a
    single hop, and its digest is taken from the bytes written, not by reading it again."""
    work = await fetched_work(replay, "126879163")  # 3 pages, each under WRITE_BATCH
    store = ArtifactStore(tmp_path)
    hops: list[str] = []
    real_to_thread = asyncio.to_thread

    async def counting_to_thread(func: Any, /, *args: Any, **kwargs: Any) -> Any:
        if not getattr(func, "__module__", "").startswith("curaflow.sources.pixiv.replay"):  # the fake Pixiv's own
            hops.append(getattr(func, "__name__", repr(func)))
        return await real_to_thread(func, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counting_to_thread)
    artifact = await store.fetch(replay.client(), work, "job", "t")
    assert len(artifact.files) == 3
    assert len(hops) == 1 + 3, hops  # the folder, then one per page
    for file in artifact.files:
        data = Path(file.path).read_bytes()
        assert file.sha256 == hashlib.sha256(data).hexdigest() and file.bytes == len(data)
    assert not list(Path(artifact.files[0].path).parent.glob("*.part"))


async def test_a_page_that_fails_its_check_leaves_no_file_of_it_or_of_the_next(
    replay: Replay, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = await fetched_work(replay, "126879163")  # 3 pages
    real_check = artifacts.check_image

    def check(path: Path, **kw: Any) -> object:
        return "broken: page 1" if path.name.startswith(f".{work.work_id}_p1") else real_check(path, **kw)

    monkeypatch.setattr(artifacts.files, "check_image", check)
    store = ArtifactStore(tmp_path)
    with pytest.raises(SourceError) as caught:
        await store.fetch(replay.client(), work, "job", "t")
    assert caught.value.reason == TerminalReason.DOWNLOAD_FAILED and "broken: page 1" in str(caught.value)
    left = sorted(p.name for p in store.folder("job", "t").iterdir())
    assert left == [f"{work.work_id}_p0{Path(work.pages[0].url).suffix}"], left  # page 0 whole; nothing of 1 or 2

    monkeypatch.setattr(artifacts.files, "check_image", real_check)
    artifact = await store.fetch(replay.client(), work, "job", "t")  # the retry keeps page 0
    assert len(artifact.files) == 3


def test_a_discard_waits_for_a_write_under_way_and_nothing_is_left(tmp_path: Path) -> None:
    """A download cancelled while a batch is written in a thread discards the file from
    another thread: it waits for the write, removes the file, and a write that comes
    after it creates nothing."""
    part = artifacts._PartFile(tmp_path / "w_p0.png")
    entered, release = threading.Event(), threading.Event()

    class SlowBatch:
        def __iter__(self) -> Any:
            entered.set()
            release.wait(5)
            yield b"x" * 1024

    writer = threading.Thread(target=part.write, args=(SlowBatch(),))
    writer.start()
    assert entered.wait(5)
    discarder = threading.Thread(target=part.discard)
    discarder.start()
    discarder.join(0.2)
    assert discarder.is_alive()  # waits for the write under way
    assert list(tmp_path.glob("*.part"))
    release.set()
    writer.join(5)
    discarder.join(5)
    assert not list(tmp_path.iterdir())
    with pytest.raises(OSError):
        part.write([b"late"])
    assert not list(tmp_path.iterdir())


async def test_a_download_cancelled_before_its_completion_ran_leaves_no_file(
    replay: Replay, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A busy executor may still hold the completion when the activity is cancelled: the
    job never runs, so the download itself must remove what earlier batches wrote."""
    work = await fetched_work(replay, "126879163")
    monkeypatch.setattr(artifacts.store, "WRITE_BATCH", 1024)  # the file exists before the last hop
    real_to_thread = asyncio.to_thread

    async def to_thread(func: Any, /, *args: Any, **kwargs: Any) -> Any:
        if getattr(func, "__name__", "") == "finish":
            raise asyncio.CancelledError  # cancelled while queued: ``finish`` never ran
        return await real_to_thread(func, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", to_thread)
    store = ArtifactStore(tmp_path)
    with pytest.raises(asyncio.CancelledError):
        await store.fetch(replay.client(), work, "job", "t")
    assert not list(store.folder("job", "t").iterdir())


def test_a_discard_on_a_full_disk_still_removes_the_file(tmp_path: Path) -> None:
    part = artifacts._PartFile(tmp_path / "w_p0.png")
    part.write([b"x" * 10])
    real = part._fh
    assert real is not None

    class FullDisk:
        def close(self) -> None:
            real.close()
            raise OSError(28, "No space left on device")

    part._fh = FullDisk()  # type: ignore[assignment]
    part.discard()
    assert not list(tmp_path.iterdir())

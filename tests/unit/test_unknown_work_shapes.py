"""A work the source lists in a shape curaflow does not recognise costs one attempt, never
the work, the target or a week (DESIGN.md "Work-owned failures and the decode budget",
"The scan frontier of a target").

Before 2026-12-05 an item of a search page whose fields did not parse (its ``tags`` as
strings, an ``x_restrict`` of text …) was counted ``invalid`` — a verdict that lasted: the
target's frontier took it into its known run, so once the shape was read again no later job
of the target read the work; and values never seen were read as ones known (an
``x_restrict`` of -1 as all ages, a ``total_bookmarks`` of null as 0 bookmarks — a lasting
``filtered:min_bookmarks``, a ``page_count`` of 10**6 beside three listed pages — a lasting
``filtered:page_count``, a multi-page work listed without its ``meta_pages`` as its first
page alone — delivered so, and a duplicate for ever).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
from curaflow.sources.pixiv.frontier import Frontier
from curaflow.sources.pixiv.scan import ScanCheckpoint
from tests.fakes.replay import ABSENT, Faults
from tests.frontier_support import scan_on_replay
from tests.unit.test_frontier_seams import SORTS, TAG, _deep, _id, _place
from tests.unit.test_untrusted import illust as listed

#: Shapes of one item never seen: each made the work ``invalid``, a lasting verdict.
UNREAD_SHAPES: dict[str, dict[str, Any]] = {
    "tags as strings": {"tags": ["a", "b"]},
    "user as text": {"user": "someone"},
    "x_restrict as a word": {"x_restrict": "R-18"},
    "width as a word": {"width": "wide"},
    "x_restrict never seen": {"x_restrict": -1},
    "type never seen": {"type": "novel"},
    "page_count beside fewer pages": {"page_count": 10**6},
    "page_count disagreeing with meta_pages": {
        "page_count": 2,
        "meta_single_page": {},
        "meta_pages": [
            {"image_urls": {"original": f"https://i.pximg.net/img-original/img/x_p{i}.png"}} for i in range(3)
        ],
    },
    "an id not of pixiv's shape": {"id": -5},
}


def _target(sort: str, **filters: Any) -> TargetSpec:
    return TargetSpec(
        target_id="t",
        query=TargetQuery(tags=[TAG], sort=sort),  # type: ignore[arg-type]
        filters=TargetFilters(**filters),
        scan_limit=1,
    )


def _jobs_over(sort: str, shaped: int, fields: dict[str, Any], jobs: int, **filters: Any) -> list[ScanCheckpoint]:
    """Jobs of one target over 100 works, every work delivered before but ``shaped`` and
    place 70: the first job sees ``shaped`` in ``fields``' shape, the later ones as
    recorded. Each job delivers its candidate and starts from the frontier the last left."""
    deep = _deep()
    faults = Faults(deep=deep)
    faults.mutate = {_id(sort, deep, shaped): fields}
    delivered = {p for p in range(deep.count) if p not in (shaped, 70)}
    frontier = Frontier(sort=sort)
    out = []
    for _ in range(jobs):

        async def known(ids: list[str], delivered: set[int] = delivered) -> dict[str, str]:
            return {w: "duplicate" for w in ids if _place(sort, deep, w) in delivered}

        cp = asyncio.run(scan_on_replay(faults, _target(sort, **filters), known, frontier=frontier))
        delivered |= {_place(sort, deep, w.work_id) for w in cp.candidates}
        assert cp.frontier is not None
        frontier = Frontier.model_validate(cp.frontier)
        out.append(cp)
        faults.mutate = {}
    return out


@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize("shape", list(UNREAD_SHAPES))
def test_a_work_listed_in_a_shape_never_seen_is_read_again_by_the_next_job(sort: str, shape: str) -> None:
    deep = _deep()
    seen = _jobs_over(sort, 40, UNREAD_SHAPES[shape], 3)
    first = seen[0]
    assert [_place(sort, deep, w.work_id) for w in first.candidates] == [70]
    assert first.report.reasons.get("invalid") == 1
    found = [_place(sort, deep, w.work_id) for cp in seen[1:] for w in cp.candidates]
    assert 40 in found, found


def illust(**fields: Any) -> dict[str, Any]:
    """The listing test_untrusted builds, with every field a lasting verdict reads given."""
    base = {"x_restrict": 0, "illust_ai_type": 1, "total_bookmarks": 5, "visible": True, "meta_pages": []}
    return listed(**{**base, **fields})


PAGES = [{"image_urls": {"original": f"https://i.pximg.net/img-original/img/x/126872003_p{i}.png"}} for i in range(3)]


@pytest.mark.parametrize(
    "fields",
    [
        {"x_restrict": -1},  # read as 0: delivered to a target that refuses R-18
        {"x_restrict": 3},
        {"illust_ai_type": 3},  # read as not AI by exclude_ai
        {"total_bookmarks": None},  # read as 0: a lasting filtered:min_bookmarks
        {"total_bookmarks": -4},
        {"page_count": 0},
        {"page_count": -1},  # read as -1: under any max_page_count
        {"page_count": 10**6, "meta_pages": PAGES},  # a lasting filtered:page_count beside 3 pages
        {"page_count": 3},  # no meta_pages: its first page (or a sample) delivered as the work
        {"page_count": 3, "meta_pages": None},
        {"type": "novel"},  # its cover delivered as an illustration
        {"type": ""},
        {"type": None},
        {"visible": "false"},  # read as visible
        {"visible": None},
    ],
    ids=repr,
)
def test_a_value_never_seen_where_it_decides_a_delivery_or_a_lasting_verdict_is_not_read(
    fields: dict[str, Any],
) -> None:
    from curaflow.sources.pixiv.client import InvalidWork, parse_work

    with pytest.raises(InvalidWork) as raised:
        parse_work(illust(**fields))
    assert raised.value.work_id == "126872003"  # the scan still knows which work it passed


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"x_restrict": 2, "illust_ai_type": 2},
        {"page_count": "3", "meta_pages": PAGES},  # a count written as text
        {"page_count": 3, "meta_pages": PAGES},
        {"total_bookmarks": "12"},
        {"sanity_level": -1, "restrict": 2},  # fields curaflow does not read
        {"type": "manga"},
        {"type": "ugoira"},
    ],
    ids=repr,
)
def test_the_app_apis_own_values_are_read(fields: dict[str, Any]) -> None:
    from curaflow.sources.pixiv.client import parse_work

    work = parse_work(illust(**fields))
    assert len(work.pages) == work.page_count


SAMPLE = "https://i.pximg.net/c/600x1200_90/img-master/img/2025/02/04/00/00/00/126872003_p0_master1200.jpg"
LIMIT = "https://s.pximg.net/common/images/limit_sanity_level_360.png"


@pytest.mark.parametrize(
    "fields",
    [
        {"meta_single_page": {}, "image_urls": {"large": SAMPLE}},
        {"meta_single_page": {"original": "https://i.pximg.net/x_p0.png"}, "image_urls": {"large": SAMPLE}},
        {"meta_single_page": None, "image_urls": {"large": SAMPLE}},
        {"type": "manga", "meta_single_page": {}, "image_urls": {"large": SAMPLE}},
        {
            "page_count": 2,
            "meta_single_page": {},
            "meta_pages": [
                {"image_urls": {"original": "https://i.pximg.net/x_p0.png", "large": SAMPLE}},
                {"image_urls": {"large": SAMPLE.replace("_p0", "_p1")}},
            ],
        },
    ],
    ids=["single-no-original", "single-original-renamed", "single-null", "manga", "multi-page-one-without-original"],
)
def test_a_page_listed_without_its_originals_url_is_never_its_sample(fields: dict[str, Any]) -> None:
    # The app-api lists a page's original (meta_single_page.original_image_url,
    # meta_pages[].image_urls.original) beside samples of it (image_urls.large: 600×1200).
    # Until 2026-12-06 a page listed without its original was delivered as its sample —
    # the work sent so, and a duplicate for ever, its original never sent. Now such a page
    # has no URL curaflow fetches: the work is unusable as the source sent it
    # (``unusable_url`` at its fetch, held back briefly, never the work's).
    from curaflow.sources.pixiv.client import parse_work

    work = parse_work(illust(**fields))
    assert SAMPLE not in [p.url for p in work.pages] and "" in [p.url for p in work.pages]
    assert all("master1200" not in p.url for p in work.pages)


#: Pixiv's samples of a page (its resized copies), each never the page itself.
SAMPLES = [
    SAMPLE,
    "https://i.pximg.net/c/540x540_70/img-master/img/2025/02/04/00/00/00/126872003_p0_master1200.jpg",
    "https://i.pximg.net/c/360x360_10_webp/img-master/img/2025/02/04/00/00/00/126872003_p0_square1200.jpg",
    "https://i.pximg.net/img-master/img/2025/02/04/00/00/00/126872003_p0_master1200.jpg",
    "https://i.pximg.net/c/250x250_80_a2/custom-thumb/img/2025/02/04/00/00/00/126872003_p0_custom1200.jpg",
]


@pytest.mark.parametrize("sample", SAMPLES)
@pytest.mark.parametrize("slot", ["meta_single_page", "meta_pages"])
def test_a_sample_listed_as_a_pages_original_is_never_that_page(sample: str, slot: str) -> None:
    # A listing whose original's place holds one of Pixiv's samples (a proxy saving
    # bandwidth, a renamed field filled from another): until 2026-12-07 the sample was the
    # page — the work delivered as its resized copy, then a duplicate for ever. Now the page
    # has no URL curaflow fetches (``unusable_url`` at its fetch, held back briefly).
    from curaflow.sources.pixiv.client import parse_work

    if slot == "meta_single_page":
        fields: dict[str, Any] = {"meta_single_page": {"original_image_url": sample}}
    else:
        pages = [{"image_urls": {"original": sample}}, *PAGES[1:]]
        fields = {"page_count": 3, "meta_single_page": {}, "meta_pages": pages}
    work = parse_work(illust(**fields))
    assert sample not in [p.url for p in work.pages] and work.pages[0].url == ""


def test_an_ugoiras_cover_listed_as_its_original_keeps_its_listing() -> None:
    # An ugoira is delivered from its frames zip: its listed image, whatever it is, is its cover.
    from curaflow.sources.pixiv.client import parse_work

    work = parse_work(illust(type="ugoira", meta_single_page={"original_image_url": SAMPLE}))
    assert [p.url for p in work.pages] == [SAMPLE]


@pytest.mark.parametrize(
    "fields",
    [
        {"visible": False, "meta_single_page": {}, "image_urls": {"large": LIMIT}},
        {"meta_single_page": {}, "image_urls": {"large": LIMIT}},  # a limit_* image alone says so too
    ],
)
def test_a_restricted_placeholder_is_still_recognised(fields: dict[str, Any]) -> None:
    from curaflow.sources.pixiv.client import is_placeholder, parse_work

    assert is_placeholder(parse_work(illust(**fields)))


@pytest.mark.parametrize(("limit", "word"), [("limit_sanity_level", "hidden"), ("limit_unknown", "unavailable")])
def test_a_placeholder_of_a_work_of_several_pages_is_told_as_a_placeholder(limit: str, word: str) -> None:
    # Pixiv lists a placeholder with the work's ``page_count`` and no page (its images the
    # ``limit_*`` one): until 2026-12-07 a work of several pages so listed was refused as
    # "a work of N pages that lists none" — ``invalid`` every job (counted as an answer not
    # recognised, paging), never ``hidden`` or ``unavailable``, what it positively is.
    from curaflow.sources.pixiv.replay.data import recorded_works

    ranked = [str(w["id"]) for w in recorded_works()[:30]]
    several = next(str(w["id"]) for w in recorded_works()[:30] if w["page_count"] > 1)
    faults = Faults(hidden_works={several: limit})
    target = TargetSpec(target_id="t", query=TargetQuery(mode="ranking"), filters=TargetFilters(r18=True))

    async def known(ids: list[str]) -> dict[str, str]:
        return {w: "duplicate" for w in ids if w != several}

    cp = asyncio.run(scan_on_replay(faults, target, known))
    assert several in ranked and cp.candidates == []
    assert cp.report.reasons.get(word) == 1 and "invalid" not in cp.report.reasons, cp.report.reasons


def test_an_ugoiras_cover_is_no_page_delivered_and_keeps_its_listing() -> None:
    # An ugoira is delivered from its frames zip, never its listed image: unchanged.
    from curaflow.sources.pixiv.client import parse_work

    work = parse_work(illust(type="ugoira", meta_single_page={}, image_urls={"large": SAMPLE}))
    assert [p.url for p in work.pages] == [SAMPLE]


async def test_a_work_listed_without_its_originals_url_costs_a_brief_hold_and_no_request(tmp_path: Any) -> None:
    import httpx

    from curaflow.artifacts.store import ArtifactStore
    from curaflow.sources.base import SourcePolicy
    from curaflow.sources.errors import UnavailableKind, WorkUnavailable
    from curaflow.sources.guard import guarded
    from curaflow.sources.pixiv.client import PixivClient, parse_work
    from curaflow.sources.pixiv.source import PixivSource

    asked: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url))
        return httpx.Response(200, content=b"sample bytes")

    http = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    client = PixivClient(http, refresh_token="r", api_url="http://api.test", auth_url="http://api.test")
    source = guarded(PixivSource("a", client, SourcePolicy()), download_max_bytes=1 << 20, download_timeout_s=10)
    work = parse_work(illust(meta_single_page={}, image_urls={"large": SAMPLE}))
    with pytest.raises(WorkUnavailable) as caught:
        await ArtifactStore(tmp_path).fetch(source, work, "j", "t")
    assert (caught.value.kind, caught.value.recognised) == (UnavailableKind.UNUSABLE_URL, False)
    assert asked == []


@pytest.mark.parametrize("sort", SORTS)
def test_a_work_listed_without_its_bookmark_count_is_read_again_by_the_next_job(sort: str) -> None:
    # The app-api lists every work with its ``total_bookmarks``. A listing without it (a
    # field renamed or dropped, a proxy's copy) says nothing of the work's bookmarks; it
    # was read as 0, so a target with ``min_bookmarks`` filtered the work — for good once
    # the work was older than SETTLE_DAYS: the frontier's known run passed it and no later
    # job of the target read it again, whatever its bookmarks.
    from tests.fakes.replay import ABSENT

    deep = _deep()
    faults = Faults(deep=deep)
    shaped, other = _id(sort, deep, 40), _id(sort, deep, 70)
    faults.mutate = {shaped: {"total_bookmarks": ABSENT}, other: {"total_bookmarks": 5}}
    delivered = {p for p in range(deep.count) if p not in (40, 70)}
    frontier = Frontier(sort=sort)
    target = _target(sort, min_bookmarks=1)
    found: list[list[int]] = []
    for _ in range(3):

        async def known(ids: list[str], delivered: set[int] = delivered) -> dict[str, str]:
            return {w: "duplicate" for w in ids if _place(sort, deep, w) in delivered}

        cp = asyncio.run(scan_on_replay(faults, target, known, frontier=frontier))  # every count settled
        places = [_place(sort, deep, w.work_id) for w in cp.candidates]
        delivered |= set(places)
        found.append(places)
        assert cp.frontier is not None
        frontier = Frontier.model_validate(cp.frontier)
        faults.mutate = {shaped: {"total_bookmarks": 5}}  # listed whole from now on
    assert found[0] == [70]
    assert [40] in found[1:], found


#: A creation date a month past the clock (no work has one).
AHEAD = f"{(datetime.now(UTC) + timedelta(days=30)).date().isoformat()}T00:00:00+09:00"

#: Fields that decide what a target is delivered, each left out of a listing (a field
#: renamed or dropped, a proxy's copy) beside the filters that read it. Each was read so
#: that the work passed those filters: no ``x_restrict`` as all ages (a target refusing
#: R-18 — the default — was sent what may be R-18 / R-18G), no ``illust_ai_type`` as "not
#: stated" (``exclude_ai`` sent what may be AI), no ``page_count`` (and no pages listed) as
#: one page, no ``create_date`` curaflow reads as inside every date window.
UNSTATED: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "x_restrict, r18 refused": ({"x_restrict": ABSENT}, {}),
    "illust_ai_type, exclude_ai": ({"illust_ai_type": ABSENT}, {"exclude_ai": True}),
    "page_count, max_page_count": ({"page_count": ABSENT}, {"max_page_count": 1}),
    "create_date, start_date": ({"create_date": ABSENT}, {"start_date": "2000-01-01"}),
    "create_date not read, end_date": ({"create_date": "yesterday"}, {"end_date": "2100-01-01"}),
    # A date no work of Pixiv's has — before Pixiv opened, or past the clock — is a lie of
    # the listing, not the work's date: until 2026-12-07 it was read, a lasting
    # filtered:date, the work passed for good.
    "create_date in year 9999, end_date": ({"create_date": "9999-12-31T23:59:59+09:00"}, {"end_date": "2100-01-01"}),
    "create_date before pixiv, start_date": (
        {"create_date": "0001-01-01T00:00:00+09:00"},
        {"start_date": "2000-01-01"},
    ),
    "create_date a month ahead, end_date": ({"create_date": AHEAD}, {"end_date": "2100-01-01"}),
    # The placeholder rule reads ``visible`` for every target: absent, it was read as
    # visible (2026-12-07) — what the source may hide was a candidate.
    "visible, every target": ({"visible": ABSENT}, {}),
}


@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize("case", list(UNSTATED))
def test_a_work_listed_without_a_field_its_targets_filters_read_is_never_delivered_so(sort: str, case: str) -> None:
    # The work at place 40 is listed without the field in the first job: it is examined
    # ``invalid`` there (never a candidate, never a lasting verdict) and, listed whole,
    # found by a later job. Until 2026-12-06 it was the first job's candidate.
    deep = _deep()
    fields, filters = UNSTATED[case]
    seen = _jobs_over(sort, 40, fields, 3, **filters)
    first = seen[0]
    assert [_place(sort, deep, w.work_id) for w in first.candidates] == [70]
    assert first.report.reasons.get("invalid") == 1
    found = [_place(sort, deep, w.work_id) for cp in seen[1:] for w in cp.candidates]
    assert 40 in found, found


@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize(
    ("max_page_count", "reason"), [(3, None), (2, "filtered:page_count")], ids=["within", "beyond"]
)
def test_a_work_whose_meta_pages_list_its_pages_is_judged_by_them_without_page_count(
    sort: str, max_page_count: int, reason: str | None
) -> None:
    # ``meta_pages`` lists every page of a multi-page work: it states the pages as
    # ``page_count`` does (both stated and disagreeing is not read: parse_work). Until
    # 2026-12-07 a listing without ``page_count`` was examined ``invalid`` under
    # ``max_page_count`` whatever its ``meta_pages`` said.
    deep = _deep()
    fields = {"page_count": ABSENT, "meta_single_page": {}, "meta_pages": PAGES}
    first = _jobs_over(sort, 40, fields, 1, max_page_count=max_page_count)[0]
    assert "invalid" not in first.report.reasons, first.report.reasons
    places = [_place(sort, deep, w.work_id) for w in first.candidates]
    if reason is None:
        assert places == [40] and first.candidates[0].page_count == 3
    else:
        assert places == [70] and first.report.reasons.get(reason) == 1


@pytest.mark.parametrize("pages", [[], ABSENT, None], ids=["empty", "absent", "null"])
def test_a_work_listing_no_page_states_no_page_count(pages: Any) -> None:
    # No page listed (``meta_pages`` empty — Pixiv's for one page, but also what a listing
    # that dropped the pages shows —, absent or null) says nothing of how many pages the
    # work has: under ``max_page_count`` it is examined ``invalid`` as before.
    first = _jobs_over("popular_desc", 40, {"page_count": ABSENT, "meta_pages": pages}, 1, max_page_count=5)[0]
    assert first.report.reasons.get("invalid") == 1, first.report.reasons


@pytest.mark.parametrize(
    ("image", "word"),
    [(LIMIT, "hidden"), ("https://s.pximg.net/common/images/limit_unknown_360.png", "unavailable")],
    ids=["limit_sanity_level", "limit_unknown"],
)
def test_a_placeholder_listed_without_visible_is_told_by_its_limit_image(image: str, word: str) -> None:
    # A ``limit_*`` image says the work is a placeholder whatever ``visible`` would say: a
    # listing without ``visible`` states it so (the word by the image's name, as before).
    first = _jobs_over(
        "popular_desc", 40, {"visible": ABSENT, "meta_single_page": {}, "image_urls": {"large": image}}, 1
    )[0]
    assert first.report.reasons.get(word) == 1, first.report.reasons
    assert "invalid" not in first.report.reasons


@pytest.mark.parametrize(
    ("fields", "filters"),
    [
        ({"x_restrict": ABSENT}, {"r18": True}),
        ({"illust_ai_type": ABSENT}, {}),
        ({"page_count": ABSENT}, {}),
        ({"total_bookmarks": ABSENT}, {}),
    ],
    ids=["x_restrict", "illust_ai_type", "page_count", "total_bookmarks"],
)
def test_a_field_no_filter_of_the_target_reads_may_be_left_out(fields: dict[str, Any], filters: dict[str, Any]) -> None:
    # Only the target's own filters ask for a field: one that lets every value through
    # reads the work as before.
    deep = _deep()
    first = _jobs_over("popular_desc", 40, fields, 1, **filters)[0]
    assert [_place("popular_desc", deep, w.work_id) for w in first.candidates] == [40]


@pytest.mark.parametrize("case", list(UNSTATED))
def test_a_ranked_work_listed_without_a_field_its_targets_filters_read_is_never_delivered_so(case: str) -> None:
    # A ranking is paged as a search is (no frontier): the same rule, each job.
    from curaflow.sources.pixiv.replay.data import recorded_works

    fields, filters = UNSTATED[case]
    ranked = [str(w["id"]) for w in recorded_works()]
    shaped, other = ranked[0], ranked[1]  # both single pages of all ages, not AI, dated 2025-02-03
    faults = Faults(mutate={shaped: fields})
    target = TargetSpec(target_id="t", query=TargetQuery(mode="ranking"), filters=TargetFilters(**filters))

    async def known(ids: list[str]) -> dict[str, str]:
        return {w: "duplicate" for w in ids if w not in (shaped, other)}

    first = asyncio.run(scan_on_replay(faults, target, known))
    assert [w.work_id for w in first.candidates] == [other]
    assert first.report.reasons.get("invalid") == 1
    faults.mutate = {}
    assert [w.work_id for w in asyncio.run(scan_on_replay(faults, target, known)).candidates] == [shaped]


def test_a_work_listed_without_its_type_is_not_read_as_an_illustration() -> None:
    # Read as `illust`: an ugoira (or a novel's cover) listed without its type was delivered
    # as its first frame, and then was a duplicate of the route for ever.
    from curaflow.sources.pixiv.client import InvalidWork, parse_work

    body = illust()
    del body["type"]
    with pytest.raises(InvalidWork) as raised:
        parse_work(body)
    assert raised.value.work_id == "126872003"


def _split_reading(url: str) -> bool:
    # What is_sample answered before it looked for the words first: urlsplit's path, always.
    from urllib.parse import urlsplit

    from curaflow.sources.pixiv.client.works import SAMPLE_SEGMENTS

    try:
        segments = urlsplit(url).path.split("/")
    except ValueError:
        return False
    return (len(segments) > 1 and segments[1] == "c") or not SAMPLE_SEGMENTS.isdisjoint(segments)


@pytest.mark.parametrize(
    "url",
    [
        *SAMPLES,
        "https://i.pximg.net/img-original/img/2025/02/04/00/00/00/126872003_p0.png",
        "https://i.pximg.net/img-\tmaster/img/2025/02/04/00/00/00/126872003_p0_master1200.jpg",
        "https://i.pximg.net/custom-\rthumb/img/126872003_p0_custom1200.jpg",
        "https://i.pximg.net/\nc/600x1200_90/img/126872003_p0.jpg",
        "  https://i.pximg.net/c/600x1200_90/img/126872003_p0.jpg",
        "https://i.pximg.net/c",
        "https://c.pximg.net/img-original/img/126872003_p0.png",
        "https://i.pximg.net/img-original/img/126872003_p0.png?/img-master/",
        "https://i.pximg.net/img-original/img/126872003_p0.png#/c/",
        "/c/600x1200_90/img-master/x.jpg",
        "http://[::1/img-master/x.jpg",
        "",
    ],
)
def test_a_sample_is_told_as_its_split_path_tells_it(url: str) -> None:
    # is_sample splits a URL only when it holds a word a sample's path needs (2026-12-07:
    # splitting every page URL of a search page cost ~1.3 ms a job); a character urlsplit
    # drops could join such a word across it, and a word outside the path proves nothing.
    from curaflow.sources.pixiv.client.works import is_sample

    assert is_sample(url) == _split_reading(url)

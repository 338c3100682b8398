"""An empty answer where the frontier knows works stand is the end only once corroborated.

A scan given its target's frontier asks pages that must hold works: the first page of a
``date_desc`` query whose head it knows, and the landing page at the known run's end or at
a capped scan's stop, stepped back down to offset 0 of its window while it starts past the
mark. Before 2026-12-05j an empty answer there (a search backend in an outage answering
``illusts: []``) was taken for the end of the results when it came at a landing's offset 0:
the scan ended ``exhausted``, ``advance`` cleared the target's sweep (the next sweep read
every work past the known run again) and the job reported no candidate. And the first
page of a ``date_desc`` query was the source's failure whatever happened: a target whose
results really emptied failed every job for ever.

Now such an empty answer is the end only when something positive says so: the work the
frontier expects there (its mark) is gone — the app-api's own 404 for its detail, or a
placeholder — or lies outside the target's ``duration``. Otherwise it is the source's
failure (``remote_http_error``, retried; the frontier, written only with a scan's report,
is kept). A page with works, the steady state, asks nothing more.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
from curaflow.sources.errors import SourceError
from curaflow.sources.pixiv.frontier import Frontier, Mark
from curaflow.sources.pixiv.scan import ScanCheckpoint
from curaflow.sources.pixiv.scan.pages import outside_duration
from tests.fakes.replay import Faults
from tests.frontier_support import scan_on_replay
from tests.unit.test_frontier_seams import COUNT, SORTS, TAG, Job, _deep, _id, _jobs, _place, _ruled_out_but


def _target(sort: str) -> TargetSpec:
    return TargetSpec(target_id="t", query=TargetQuery(tags=[TAG], sort=sort), filters=TargetFilters(), scan_limit=1)  # type: ignore[arg-type]


def _capped_frontier(sort: str) -> Frontier:
    """The frontier after a job capped at 40 works, place 19 held back (not lasting), place
    70 the only candidate: the known run ends at 18 and the sweep is at 39 (``date_desc``:
    the run below the held work, head at 20 and known at 39)."""
    verdicts = _ruled_out_but(70) | {19: "held"}
    seen = asyncio.run(_jobs(sort, verdicts, [Job(cap=40)]))
    frontier = seen[0].frontier
    assert seen[0].candidates == [] and _mark(frontier) is not None
    return frontier


def _mark(frontier: Frontier) -> Mark | None:
    """Where the next job lands."""
    return frontier.sweep or frontier.known


def _known(sort: str):  # type: ignore[no-untyped-def]
    async def known(ids: list[str]) -> dict[str, str]:
        return {
            w: ("held" if _place(sort, _deep(), w) == 19 else "duplicate")
            for w in ids
            if _place(sort, _deep(), w) != 70
        }

    return known


def _asked_once_each_end_went(sort: str, frontier: Frontier, faults: Faults) -> None:
    """The details an empty answer asked: ``date_desc``'s first page both ends of the run
    it examined, the head and the known run's end, each once the one before went; a
    landing's page its mark alone."""
    asked = [e.params.get("illust_id") for e in faults.of("detail")]
    if sort == "date_desc":
        assert frontier.head is not None and frontier.known is not None
        assert asked == [frontier.head.work_id, frontier.known.work_id]
    else:
        assert len(asked) == 1


def _scan(sort: str, frontier: Frontier, faults: Faults) -> ScanCheckpoint:
    return asyncio.run(scan_on_replay(faults, _target(sort), _known(sort), frontier=frontier))


def _first_search_of_the_landing(sort: str) -> int:
    """How many searches a job asks before its landing: the head page (``date_desc``) and
    the revisit page (``popular_desc``) come first."""
    return 0 if sort == "date_asc" else 1


@pytest.mark.parametrize("sort", SORTS)
def test_an_outage_answering_empty_landing_pages_is_the_sources_failure_and_keeps_the_sweep(sort: str) -> None:
    # From the landing on, every search answers an empty page (the backend in an
    # outage). The landing steps back to offset 0, empty again: taken for the end of the
    # results, the scan ended exhausted and left no sweep — the next sweep reread places
    # 19 to 39. Now the sweep's work, asked by its detail, is still there: the source's
    # failure, retried, and the retry (the outage over) goes on from there to place 70.
    frontier = _capped_frontier(sort)
    faults = Faults(deep=_deep())
    faults.search = [None] * _first_search_of_the_landing(sort) + ["empty"] * 10
    with pytest.raises(SourceError) as err:
        _scan(sort, frontier, faults)
    assert err.value.reason.value == "remote_http_error" and err.value.retryable
    mark = _mark(frontier)
    assert mark is not None and mark.work_id in str(err.value)
    assert [e.params.get("illust_id") for e in faults.of("detail")] == [mark.work_id]
    faults.search = []
    result = _scan(sort, frontier, Faults(deep=_deep()))
    assert [_place(sort, _deep(), w.work_id) for w in result.candidates] == [70]


@pytest.mark.parametrize("sort", SORTS)
def test_results_that_really_emptied_end_the_scan_once_the_expected_work_is_gone(sort: str) -> None:
    # Every work of the query is deleted (searches list none, details answer the app-api's
    # 404): the empty answer is the end of the results — no candidate, exhausted — for
    # every sort. Before, a date_desc target's first page was the source's failure at
    # every job for ever.
    frontier = _capped_frontier(sort)
    deep = _deep()
    faults = Faults(deep=deep)
    every = {_id(sort, deep, p) for p in range(COUNT)}
    faults.deleted_works |= every
    faults.missing_works |= every
    result = _scan(sort, frontier, faults)
    assert result.candidates == [] and result.exhausted
    _asked_once_each_end_went(sort, frontier, faults)


@pytest.mark.parametrize("sort", SORTS)
def test_an_empty_answer_where_the_expected_work_is_a_placeholder_is_the_end(sort: str) -> None:
    # The expected work is listed by its detail as a placeholder (hidden): search lists
    # no such work, so the empty answer is the end of the results.
    frontier = _capped_frontier(sort)
    deep = _deep()
    faults = Faults(deep=deep)
    every = {_id(sort, deep, p) for p in range(COUNT)}
    faults.deleted_works |= every
    faults.mutate = {w: {"visible": False} for w in every}
    result = _scan(sort, frontier, faults)
    assert result.candidates == [] and result.exhausted


@pytest.mark.parametrize("sort", SORTS)
def test_pages_with_works_ask_no_detail(sort: str) -> None:
    # The steady state: nothing more is asked.
    frontier = _capped_frontier(sort)
    faults = Faults(deep=_deep())
    result = _scan(sort, frontier, faults)
    assert [_place(sort, _deep(), w.work_id) for w in result.candidates] == [70]
    assert faults.of("detail") == []


def test_a_mark_outside_the_duration_is_recognised_with_a_days_slack() -> None:
    now = datetime(2026, 12, 5, 12, tzinfo=UTC)
    old = Mark(work_id="1", create_date="2026-11-27T10:00:00+09:00")
    edge = Mark(work_id="1", create_date="2026-11-28T10:00:00+09:00")
    assert outside_duration(old, "within_last_week", now)
    assert not outside_duration(edge, "within_last_week", now)  # within the day's slack: not sure
    assert not outside_duration(old, "within_last_month", now)
    assert not outside_duration(old, None, now)
    assert not outside_duration(Mark(work_id="1"), "within_last_day", now)  # no date: nothing known
    assert not outside_duration(old, "within_last_fortnight", now)  # a word not known: nothing known


@pytest.mark.parametrize("sort", ["date_desc", "date_asc"])
def test_an_invalid_item_of_a_landing_page_asked_again_is_counted_once(sort: str) -> None:
    # Places 0–4 are deleted before the next job: its landing page starts past the mark
    # and is asked again a page earlier. Place 50, listed with an id not of Pixiv's
    # shape, is on the landing page first asked and on the pages the walk reads after the
    # step back: counted once, as the one item of the source's that was examined. (A work
    # of Pixiv's id whose fields are not of its shape is examined at its place, as a work:
    # the ledger's verdict on it first — here a duplicate.)
    frontier = _capped_frontier(sort)
    deep = _deep()
    faults = Faults(deep=deep)
    faults.deleted_works |= {_id(sort, deep, p) for p in range(5)}
    faults.mutate = {_id(sort, deep, 50): {"id": "p50"}}
    result = _scan(sort, frontier, faults)
    assert [_place(sort, deep, w.work_id) for w in result.candidates] == [70]
    assert result.report.reasons.get("invalid") == 1, result.report.reasons


@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize("answered", ["placeholder", "alive"])
def test_a_detail_of_another_work_says_nothing_of_the_expected_one(sort: str, answered: str) -> None:
    # The outage again, and the expected work's detail answers *another* work (a cache or
    # a proxy keyed wrongly): a hidden placeholder of another work was taken for the
    # expected work hidden — the end of the results: the scan ended exhausted, the sweep
    # cleared. An answer about another work says nothing of this one: the source's
    # failure, retried, the sweep kept.
    frontier = _capped_frontier(sort)
    mark = _mark(frontier)
    assert mark is not None
    deep = _deep()
    other = next(w for w in (_id(sort, deep, p) for p in range(COUNT)) if w != mark.work_id)
    faults = Faults(deep=deep)
    faults.search = [None] * _first_search_of_the_landing(sort) + ["empty"] * 10
    faults.detail_faults = {mark.work_id: f"other:{'~' if answered == 'placeholder' else ''}{other}"}
    with pytest.raises(SourceError) as err:
        _scan(sort, frontier, faults)
    assert err.value.reason.value == "remote_http_error" and err.value.retryable
    assert [e.params.get("illust_id") for e in faults.of("detail")] == [mark.work_id]


def _edited(sort: str, tags: list[dict[str, object]], **fields: object) -> Faults:
    """Every work of the query edited so that search lists none of them (the replay's
    search reads the recorded tags: they are taken out of its listing), their details
    alive with ``tags`` and ``fields``."""
    deep = _deep()
    faults = Faults(deep=deep)
    every = {_id(sort, deep, p) for p in range(COUNT)}
    faults.deleted_works |= every
    faults.mutate = {w: {"tags": tags, **fields} for w in every}
    return faults


@pytest.mark.parametrize("sort", SORTS)
def test_an_expected_work_whose_tags_no_longer_match_the_query_is_the_end(sort: str) -> None:
    # The works' tags were edited: the query lists none of them, and the expected work's
    # detail lists it alive. Before, the empty answer was the source's failure at every
    # job of the target until an operator reset its frontier. Its detail shows no tag,
    # translation, title or caption holding the query's word: it no longer matches — the
    # end of the results.
    frontier = _capped_frontier(sort)
    faults = _edited(sort, [{"name": "風景", "translated_name": "landscape"}])
    result = _scan(sort, frontier, faults)
    assert result.candidates == [] and result.exhausted
    _asked_once_each_end_went(sort, frontier, faults)


@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize(
    "still",
    [
        {"tags": [{"name": f"{TAG}-fanart", "translated_name": None}]},
        {"tags": [{"name": "x", "translated_name": TAG.upper()}]},
        {"tags": [{"name": "x", "translated_name": None}], "title": f"my {TAG}"},
        {"tags": [{"name": "x", "translated_name": None}], "caption": f"<b>{TAG}</b>"},
        {"tags": [{"name": "x", "translated_name": None}], "title": "ｆｒｏｎｔｉｅｒ－ｓｅａｍｓ"},
        {"tags": "not a list"},
        # Texts of a shape never seen say nothing of what the work matches by: a tag
        # object of another key, tags or a title or caption null (or absent: below), a tag without its
        # name or translation field, a work alive with no text at all. Until 2026-12-06
        # each read as no text — the work "no longer matched", the outage's empty answer
        # was the end of results (exhausted, the sweep cleared, no candidate).
        {"tags": [{"tag": TAG}], "title": "untitled"},
        {"tags": None, "title": "untitled"},
        {"tags": [{"name": None, "translated_name": None}], "title": "untitled"},
        {"tags": [{"name": "x"}], "title": "untitled"},
        {"tags": [{"name": "x", "translated_name": None}], "title": None},
        {"tags": [{"name": "x", "translated_name": None}], "caption": None},
        {"tags": [], "title": ""},
    ],
    ids=[
        "partial-tag",
        "translation",
        "title",
        "caption",
        "full-width",
        "tags-unread",
        "tag-of-another-key",
        "tags-null",
        "tag-without-name",
        "tag-without-translation-field",
        "title-null",
        "caption-null",
        "no-text-at-all",
    ],
)
def test_an_expected_work_that_could_still_match_leaves_the_empty_answer_the_sources(
    sort: str, still: dict[str, object]
) -> None:
    # Anything that could still match the query's word (a tag holding it, its translation,
    # the title or caption, in another width or case) or tags curaflow does not read: not
    # certain — the empty answer stays the source's failure, retried.
    frontier = _capped_frontier(sort)
    fields = dict(still)
    tags = fields.pop("tags")
    faults = _edited(sort, tags, **fields)  # type: ignore[arg-type]
    with pytest.raises(SourceError) as err:
        _scan(sort, frontier, faults)
    assert err.value.reason.value == "remote_http_error" and err.value.retryable


@pytest.mark.parametrize(
    ("query", "texts", "gone"),
    [
        ({"tags": ["猫", "犬"]}, ["風景", "landscape"], True),
        ({"tags": ["猫", "犬"]}, ["子犬"], False),  # one word of an AND query still there: not known
        ({"tags": ["猫", "犬"], "relation": "or"}, ["風景"], True),
        ({"tags": ["猫 -犬"]}, ["風景"], False),  # an excluded word: not known
        ({"tags": ["(猫 OR 犬)"]}, ["風景"], True),
        ({"tags": ["Cat"], "search_target": "exact_match_for_tags"}, ["cats"], False),
        ({"tags": ["cat"], "search_target": "title_and_caption"}, ["風景"], True),
        ({"tags": []}, ["風景"], False),
        ({"tags": ["猫"]}, None, False),  # texts not read
        ({"tags": ["猫"], "mode": "ranking"}, ["風景"], False),
        # The query's syntax in full width, quoted or marked, and texts as the detail gives
        # them (a caption is HTML): a word still there leaves it unknown, never the end.
        ({"tags": ["（東方 OR 艦これ）"]}, ["東方"], False),
        ({"tags": ["東方 ＯＲ 艦これ"]}, ["艦これ"], False),
        ({"tags": ["－艦これ"]}, ["東方"], False),  # an excluded word, in full width
        ({"tags": ["−艦これ"]}, ["東方"], False),  # ... with a minus sign
        ({"tags": ['"東方"']}, ["東方"], False),
        ({"tags": ["#東方"]}, ["東方"], False),
        ({"tags": ["【東方】"]}, ["東方"], False),
        ({"tags": ["a&b"]}, ["a&amp;b"], False),  # a caption's entity
        ({"tags": ["東方"]}, ["&#26481;&#26041;"], False),
        ({"tags": ["東方"]}, ["東\u200b方"], False),  # a zero-width space in a text
        ({"tags": ["〜"]}, ["～"], False),  # no word left once its marks are read off
        ({"tags": ["（東方 OR 艦これ）"]}, ["風景"], True),
        ({"tags": ["#東方"]}, ["風景"], True),
        ({"tags": ["a&b"]}, ["a&amp;c"], True),
    ],
)
def test_no_longer_matching_is_recognised_only_when_certain(
    query: dict[str, object], texts: list[str] | None, gone: bool
) -> None:
    from curaflow.sources.pixiv.scan.pages import no_longer_matches

    target = TargetSpec(target_id="t", query=TargetQuery.model_validate(query), filters=TargetFilters())
    assert no_longer_matches(target, texts) is gone


_READ = {"title": "deep 1", "caption": "", "tags": [{"name": "風景", "translated_name": "landscape"}]}


@pytest.mark.parametrize(
    ("illust", "texts"),
    [
        (_READ, ["風景", "landscape", "deep 1"]),
        ({**_READ, "tags": []}, ["deep 1"]),  # a work alive with no tag: judged by its title
        ({**_READ, "caption": "<b>x</b>"}, ["風景", "landscape", "deep 1", "<b>x</b>"]),
        # Not the app-api's shape: what the work matches by is not known.
        ({k: v for k, v in _READ.items() if k != "tags"}, None),
        ({k: v for k, v in _READ.items() if k != "title"}, None),
        ({k: v for k, v in _READ.items() if k != "caption"}, None),
        ({**_READ, "tags": [{"tag": "風景"}]}, None),
        ({**_READ, "tags": [{"name": "風景"}]}, None),
        ({**_READ, "tags": [{"name": "", "translated_name": None}]}, None),
        ({**_READ, "tags": [{"name": 7, "translated_name": None}]}, None),
        ({**_READ, "tags": [{"name": "風景", "translated_name": ["x"]}]}, None),
        ({**_READ, "tags": ["風景"]}, None),
        ({**_READ, "tags": {"name": "風景"}}, None),
        ({**_READ, "title": None}, None),
        ({**_READ, "tags": [], "title": ""}, None),  # no text at all: nothing to judge by
    ],
)
def test_a_details_texts_are_read_only_in_the_app_apis_shape(
    illust: dict[str, object], texts: list[str] | None
) -> None:
    # What a search may match a work by is read only from the app-api's shape: every tag
    # an object with its name (text) and its translated_name (text or null), the title and
    # the caption text. Anything else — a field absent or renamed, a tag of another shape —
    # is not known (None), never "no text", which took a work still matching for one that
    # no longer matches (until 2026-12-06).
    from curaflow.sources.pixiv.client import search_texts

    assert search_texts(illust) == texts


@pytest.mark.parametrize(
    "image",
    [
        "https://i.pximg.net/img-original/img/2026/12/01/00/00/00/{w}_p0.png?/limit_unknown_360.png",  # in a query
        "https://i.pximg.net/img-original/img/2026/12/01/00/00/00/{w}_p0.png#/limit_mypixiv_s.png",  # in a fragment
        "https://cdn.example/common/images/limit_sanity_level_360.png",  # on another host
        "https://s.pximg.net/common/images/limit_never_seen.png",  # a name never seen
    ],
)
def test_a_detail_whose_image_merely_names_a_limit_is_no_placeholder_ending_the_results(image: str) -> None:
    # The sweep's work is asked by its detail when the landing answers empty: a placeholder
    # of Pixiv's (visible false, or its own limit_* image on its static host) ends the
    # results — no search lists a hidden work. "limit_" in the file part of any other URL
    # (a query, a fragment, another host, a name Pixiv never lists) is no placeholder of
    # Pixiv's: until 2026-12-07 it was, the empty answer taken for the end of the target's
    # results (the scan exhausted, its sweep cleared). Now the source's failure, retried.
    sort = "date_desc"
    frontier = _capped_frontier(sort)
    deep = _deep()
    faults = Faults(deep=deep)
    every = {_id(sort, deep, p) for p in range(COUNT)}
    faults.deleted_works |= every
    faults.mutate = {w: {"meta_single_page": {"original_image_url": image.format(w=w)}} for w in every}
    with pytest.raises(SourceError) as err:
        _scan(sort, frontier, faults)
    assert err.value.reason.value == "remote_http_error" and err.value.retryable


@pytest.mark.parametrize(
    "went",
    [
        {"missing_works": True},  # the app-api's own 404 in Pixiv's words
        {"mutate": {"visible": False}},  # a placeholder by Pixiv's word
    ],
    ids=["deleted", "hidden"],
)
def test_an_outage_is_not_the_end_because_the_newest_work_it_knew_went(went: dict[str, Any]) -> None:
    # A date_desc frontier knows a run of works from its head (place 20) down to its
    # known mark (place 39). The head alone went (its artist deleted it, or hid it) and
    # the search backend is in an outage, answering every page empty. The head's going
    # explains no empty page: every older work of the run is still listed — the first
    # page of results lists them unless they all went. Until 2026-12-07 the head's detail
    # alone was asked, and its 404 ended the scan as the end of results: no candidate,
    # the sweep dropped. Now the run's other end is asked too: alive and still matching,
    # the empty answer is the source's failure, retried; the retry finds the candidate.
    sort = "date_desc"
    frontier = _capped_frontier(sort)
    assert frontier.head is not None and frontier.known is not None and frontier.head != frontier.known
    deep = _deep()
    head = frontier.head.work_id
    faults = Faults(deep=deep)
    faults.deleted_works |= {head}
    if went.get("missing_works"):
        faults.missing_works |= {head}
    else:
        faults.mutate = {head: went["mutate"]}
    faults.search = ["empty"] * 10
    with pytest.raises(SourceError) as err:
        _scan(sort, frontier, faults)
    assert err.value.reason.value == "remote_http_error" and err.value.retryable
    assert [e.params.get("illust_id") for e in faults.of("detail")] == [head, frontier.known.work_id]
    faults.search = []
    result = _scan(sort, frontier, faults)
    assert [_place(sort, deep, w.work_id) for w in result.candidates] == [70]

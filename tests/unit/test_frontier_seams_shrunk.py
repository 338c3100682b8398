"""A page the results shrank away from is stepped back over, not taken for an outage.

Offsets are live: works deleted above the scan's place between two page requests move the
later works up. When the results then end before the place the next page is asked at —
31 works, page one read places 0–29 and promised more, two works above place 30 deleted:
29 remain — that page comes back empty although the page before promised it (its
``next_url``; the frontier's walk asks it one place early, at 29, a plain scan at 30).
Before 2026-12-05f the scan took that empty answer for the source's failure
(``check_page``): the attempt was retried, every retry got the same empty page, and the
job retried until its deadline (the seams property met it at about 1 500 examples: cap 36,
a candidate at place 70, places 0 and 1 deleted after the third job's first page, date
sorts). Now the scan asks the page before again, once: it holds the works that moved up,
and its own ``next_url`` says whether more follow; its empty answer, or the same empty
page promised again, is the source's failure (retried, never the end of results).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
from curaflow.sources.errors import SourceError
from curaflow.sources.pixiv.frontier import Frontier
from curaflow.sources.pixiv.replay.data import DeepSet
from curaflow.sources.pixiv.scan import ScanCheckpoint, scan
from tests.fakes.replay import Faults
from tests.frontier_support import scan_on_replay
from tests.unit.test_frontier_seams import SORTS, TAG, Job, _id, _jobs, _nothing, _place, _ruled_out_but


def _short() -> DeepSet:
    """31 works on one day: a page and one work."""
    return DeepSet(tag=TAG, count=31, per_day=31, last_day="2025-02-04")


async def _scan(
    sort: str,
    *,
    keep: bool,
    search: list[str | None] = [],  # noqa: B006 - read only
    checkpoint: ScanCheckpoint | None = None,
    faults: Faults | None = None,
    saved: list[ScanCheckpoint] | None = None,
) -> tuple[ScanCheckpoint, Faults]:
    """One scan of ``_short()``, every work delivered before but place 30; places 0 and 1
    deleted after the first page. ``keep``: with a (fresh) frontier, else a plain scan."""
    deep = _short()
    faults = faults or Faults(deep=deep)
    faults.search = list(search)
    target = TargetSpec(target_id="t", query=TargetQuery(tags=[TAG], sort=sort), filters=TargetFilters(), scan_limit=1)  # type: ignore[arg-type]
    saved = [] if saved is None else saved

    async def known(ids: list[str]) -> dict[str, str]:
        return {w: "duplicate" for w in ids if _place(sort, deep, w) != 30}

    async def on_page(cp: ScanCheckpoint) -> None:
        faults.deleted_works |= {_id(sort, deep, p) for p in (0, 1)}
        saved.append(cp.model_copy(deep=True))

    if checkpoint is not None:
        result = await scan_on_replay(faults, target, known, on_page=on_page, checkpoint=checkpoint)
    else:
        result = await scan_on_replay(
            faults, target, known, on_page=on_page, frontier=Frontier(sort=sort) if keep else None
        )
    return result, faults


def _offsets(faults: Faults) -> list[int]:
    return [int(e.params.get("offset") or 0) for e in faults.of("search")]


@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize("keep", [True, False], ids=["frontier", "plain"])
def test_a_page_the_results_shrank_away_from_is_stepped_back_over(sort: str, keep: bool) -> None:
    # The page after the first is empty (29 works left): the page before is asked again —
    # a page back — and lists place 30, moved up to 28; its next_url ends the results.
    result, faults = asyncio.run(_scan(sort, keep=keep))
    assert [_place(sort, _short(), w.work_id) for w in result.candidates] == [30]
    asked = 29 if keep else 30
    assert _offsets(faults) == [0, asked, 0], _offsets(faults)
    assert result.exhausted
    # nothing listed twice was examined twice: places 2–30, and 0 and 1 on the first page
    assert result.examined == 31, result.examined


@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize("keep", [True, False], ids=["frontier", "plain"])
def test_an_empty_answer_to_the_page_before_is_the_sources_failure(sort: str, keep: bool) -> None:
    # The page before, asked again, is empty too (a struggling backend): that is the
    # source's failure, retried — never the end of the results. The retry resumes from the
    # checkpoint after the first page and finds place 30.
    faults = Faults(deep=_short())
    saved: list[ScanCheckpoint] = []
    with pytest.raises(SourceError) as err:
        asyncio.run(_scan(sort, keep=keep, search=[None, None, "empty"], faults=faults, saved=saved))
    assert err.value.reason.value == "remote_http_error"
    assert len(saved) == 1
    result, _ = asyncio.run(_scan(sort, keep=keep, checkpoint=saved[0], faults=faults))
    assert [_place(sort, _short(), w.work_id) for w in result.candidates] == [30]


class _EmptyAfterFirstClient:
    """A source that lists a page of works at offset 0, always promising more, and answers
    every other offset with an empty page (an outage past the first page, or a hostile
    party): a step back always finds the first page again."""

    def __init__(self) -> None:
        self.offsets: list[int] = []
        base = {"type": "illust", "page_count": 1, "width": 10, "height": 10, "tags": [], "total_bookmarks": 0}
        base |= {"x_restrict": 0, "illust_ai_type": 1, "visible": True}  # as the app-api lists every work
        url = {"meta_single_page": {"original_image_url": "https://i.pximg.net/img-original/img/x_p0.png"}}
        self.a = [{**base, **url, "id": 5000 - i, "create_date": "2025-01-20T00:00:00+09:00"} for i in range(30)]

    async def search_illust(self, word: str, *, offset: int = 0, **kw: Any) -> dict[str, Any]:
        self.offsets.append(offset)
        if len(self.offsets) > 30:
            raise AssertionError(f"the scan asked {len(self.offsets)} pages: {self.offsets}")
        await asyncio.sleep(0)
        if offset == 0:
            return {"illusts": self.a, "next_url": "https://app-api.pixiv.net/v1/search/illust?word=w&offset=30"}
        return {"illusts": [], "next_url": None}


@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize("keep", [True, False], ids=["frontier", "plain"])
async def test_a_source_whose_later_pages_are_empty_fails_the_attempt_after_one_step_back(
    sort: str, keep: bool
) -> None:
    # The page before, asked again, lists the same works and promises the same page, which
    # is empty again: nothing shrank — the source failed (retried), after one step back,
    # not a loop of step backs, and never the end of the results.
    client = _EmptyAfterFirstClient()

    async def known(ids: list[str]) -> dict[str, str]:
        return dict.fromkeys(ids, "duplicate")

    spec = TargetSpec(target_id="t", query=TargetQuery(tags=["w"], sort=sort), filters=TargetFilters(), scan_limit=1)  # type: ignore[arg-type]
    frontier = Frontier(sort=sort) if keep else None
    with pytest.raises(SourceError) as err:
        await asyncio.wait_for(
            scan(client, spec, known=known, on_page=_nothing, scan_limit=1, frontier=frontier),  # type: ignore[arg-type]
            10,
        )
    assert err.value.reason.value == "remote_http_error"
    asked = 29 if keep else 30
    assert client.offsets == [0, asked, 0, asked], client.offsets


@pytest.mark.parametrize("sort", ["date_desc", "date_asc"])
def test_the_seams_propertys_example_ends(sort: str) -> None:
    # The seams property's example: cap 36, place 70 the only candidate, places 0 and 1
    # deleted after the third job's first page. The second job delivers place 70; the
    # third lands at the known run's end and reads places 70–99 on its first page, and
    # the deletions leave 98 works: its next page, asked at 98, is empty. Each retry of the
    # attempt got that page again, until the job's deadline; stepped back over (asked at
    # 68), the page lists place 99 last and no next_url: the results end there.
    jobs = [Job(cap=36), Job(cap=36), Job(cap=36, deleted_after_first_page={0, 1})] + [Job(cap=36)] * 8
    seen = asyncio.run(_jobs(sort, _ruled_out_but(70), jobs, until_idle=True))
    assert [p for s in seen for p in s.candidates] == [70], [(s.candidates, s.pages) for s in seen]

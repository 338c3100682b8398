"""A page of results is bounded in items, not only in bytes.

An app-api answer is read within ``outbound.page_max_bytes`` (4 MiB), but 4 MiB hold
~1.4 million empty ``{}`` items, or ~71 000 items of an id and a date. Until 2026-12-05
every one of them went through ``parse_work`` (counted ``invalid``): ~1.5 s of the
worker's CPU for the empty ones, ~0.7 s for the others, and a date-sorted page of
undated objects before one dated item was placed item by item in quadratic time (40 000
of them ~4.6 s) — all of it on the event loop every other job of the worker shares.
Pixiv lists 30 works a page (search and ranking alike: reference
``pixiv-and-delivery-apis.md`` §2.3). A page listing more than
:data:`~curaflow.sources.pixiv.scan.pages.MAX_PAGE_ITEMS` is refused whole before any
item is read: the source's answer (``remote_http_error``, retried with backoff), never a
work's.
"""

from __future__ import annotations

from typing import Any

import pytest

from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
from curaflow.domain.reasons import TerminalReason
from curaflow.sources.errors import SourceError
from curaflow.sources.pixiv.client import PAGE_SIZE
from curaflow.sources.pixiv.scan import ScanCheckpoint
from curaflow.sources.pixiv.scan import pages as scan_pages
from curaflow.sources.pixiv.scan.pages import MAX_PAGE_ITEMS, _fetch_page

DATE = "2026-12-01T00:00:00+09:00"


class Pages:
    """A client whose search and ranking answer one scripted page."""

    def __init__(self, illusts: list[Any]) -> None:
        self.page = {"illusts": illusts, "next_url": None}

    async def search_illust(self, **_: Any) -> dict[str, Any]:
        return self.page

    async def ranking(self, *_: Any, **__: Any) -> dict[str, Any]:
        return self.page


def _target(mode: str, sort: str = "date_desc") -> TargetSpec:
    return TargetSpec(target_id="t", query=TargetQuery(tags=["a"], mode=mode, sort=sort), filters=TargetFilters())  # type: ignore[arg-type]


def _work(i: int) -> dict[str, Any]:
    return {"id": 100 + i, "type": "illust", "create_date": DATE, "x_restrict": 0, "illust_ai_type": 1, "visible": True}


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every item handed to ``parse_work`` by the scan."""
    seen: list[Any] = []
    real = scan_pages.parse_work

    def counting(illust: Any, **kw: Any) -> Any:
        seen.append(illust)
        return real(illust, **kw)

    monkeypatch.setattr(scan_pages, "parse_work", counting)
    return seen


@pytest.mark.parametrize("mode", ["search", "ranking"])
@pytest.mark.parametrize("item", [lambda i: {}, _work, lambda i: {"create_date": DATE}])
async def test_a_page_listing_more_items_than_any_page_holds_is_the_sources_answer(
    mode: str, item: Any, parsed: list[Any]
) -> None:
    client = Pages([item(i) for i in range(MAX_PAGE_ITEMS + 1)])
    cp = ScanCheckpoint()
    with pytest.raises(SourceError) as raised:
        await _fetch_page(client, _target(mode), cp)  # type: ignore[arg-type]
    err = raised.value
    assert err.reason is TerminalReason.REMOTE_HTTP_ERROR and err.retryable  # one attempt, retried
    assert f"{MAX_PAGE_ITEMS + 1} items" in str(err) and "30" in str(err)
    assert parsed == []  # refused before any item is read: nothing is any work's
    assert cp.pages == 0 and cp.examined == 0 and cp.pending == [] and not cp.started


async def test_a_page_at_the_bound_is_read_item_by_item(parsed: list[Any]) -> None:
    client = Pages([_work(i) for i in range(MAX_PAGE_ITEMS)])
    cp = ScanCheckpoint()
    await _fetch_page(client, _target("search"), cp)  # type: ignore[arg-type]
    assert len(parsed) == MAX_PAGE_ITEMS and len(cp.pending) == MAX_PAGE_ITEMS


def test_the_bound_leaves_room_above_pixivs_page() -> None:
    # Pixiv's 30 (search, ranking); its recommended feed's 90 and any page size it may
    # adopt still pass — the bound only stops what no page of results is.
    assert MAX_PAGE_ITEMS >= 10 * PAGE_SIZE >= 3 * 90


class Unread(list):  # type: ignore[type-arg]
    """A ``meta_pages`` list that fails the test when any of its pages is read."""

    def __iter__(self) -> Any:
        raise AssertionError("a page of a work listing more than any work holds was read")

    def __getitem__(self, at: Any) -> Any:
        raise AssertionError("a page of a work listing more than any work holds was read")


def _listing(pages: int, meta: list[Any] | None = None) -> dict[str, Any]:
    page = {"image_urls": {"original": "https://i.pximg.net/img-original/img/x/126872003_p0.png"}}
    return {
        "id": 126872003,
        "type": "manga",
        "create_date": DATE,
        "page_count": pages,
        "meta_pages": meta if meta is not None else [page] * pages,
    }


@pytest.mark.parametrize("item", [{}, {"image_urls": {"original": "https://i.pximg.net/a_p0.png"}}], ids=repr)
def test_a_work_listing_more_pages_than_any_work_holds_is_not_read(item: dict[str, Any]) -> None:
    """4 MiB of ``meta_pages`` hold ~1.4 million ``{}``: until 2026-12-05 each became a page
    of a *valid* work (~3.4 s of CPU in ``parse_work``; with real URLs ~55 000 pages a work,
    every one carried in the scan's checkpoint and fetched). A work listing more than
    :data:`~curaflow.sources.pixiv.client.works.MAX_WORK_PAGES` is a shape never seen:
    ``InvalidWork`` with its id (``invalid`` for this job on a page, never lasting; a
    detail's ``remote_http_error``, retried), decided before any page is read."""
    from curaflow.sources.pixiv.client import InvalidWork, parse_work
    from curaflow.sources.pixiv.client.works import MAX_WORK_PAGES

    many = MAX_WORK_PAGES + 1
    with pytest.raises(InvalidWork) as raised:
        parse_work(_listing(many, Unread([item] * many)), cleaned=True)
    assert raised.value.work_id == "126872003" and f"{many} meta_pages" in str(raised.value)
    assert len(parse_work(_listing(MAX_WORK_PAGES), cleaned=True).pages) == MAX_WORK_PAGES


def test_the_bound_of_a_works_pages_leaves_room_above_pixivs() -> None:
    from curaflow.sources.pixiv.client.works import MAX_WORK_PAGES

    assert MAX_WORK_PAGES >= 5 * 200  # Pixiv takes at most 200 images a work

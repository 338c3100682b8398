"""The end of a search's results is only Pixiv's own word for it: ``next_url: null``.

The app-api lists 30 works a page and says where the next page is in ``next_url`` — a URL,
or ``null`` at the end of the results (reference ``pixiv-and-delivery-apis.md`` §2.2,
pixivpy's ``illust_ranking.json``; every page of the app-api carries the field). Until
2026-12-06 any ``next_url`` that was not truthy ended the scan as the end of the results:
a page with the field absent (renamed, dropped by a proxy or a trimmed answer), empty or
``false`` ended the scan ``exhausted`` after its first page — the job reported no
candidate where one stood deeper, and the target's frontier took its results for read
to the end. Such an answer is a shape never seen: the source's failure, one attempt
(``remote_http_error``, retried); the frontier, stored only with a scan's report, is kept.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
from curaflow.sources.errors import SourceError
from curaflow.sources.pixiv.client import PixivClient
from curaflow.sources.pixiv.scan import ScanCheckpoint, check_page, scan
from tests.fakes.replay import Faults
from tests.frontier_support import _replay_app
from tests.unit.test_frontier_seams import SORTS, TAG, _deep, _id

Edit = Callable[[dict[str, Any]], dict[str, Any]]


class _Searches(httpx.AsyncBaseTransport):
    """The replay, every search answer passed through ``edit``."""

    def __init__(self, inner: httpx.AsyncBaseTransport, edit: Edit) -> None:
        self.inner, self.edit = inner, edit

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.url.path != "/v1/search/illust":
            return response
        await response.aread()
        return httpx.Response(200, json=self.edit(json.loads(response.content)))


async def _scan(sort: str, edit: Edit) -> tuple[ScanCheckpoint, str]:
    """One job of a target whose only candidate stands at place 70 (every other work is
    a duplicate): its scan reads three pages."""
    deep = _deep()
    candidate = _id(sort, deep, 70)
    target = TargetSpec(target_id="t", query=TargetQuery(tags=[TAG], sort=sort), filters=TargetFilters(), scan_limit=1)  # type: ignore[arg-type]

    async def known(ids: list[str]) -> dict[str, str]:
        return {w: "duplicate" for w in ids if w != candidate}

    async def on_page(cp: ScanCheckpoint) -> None:
        return None

    transport = _Searches(httpx.ASGITransport(app=_replay_app(Faults(deep=deep))), edit)
    async with httpx.AsyncClient(transport=transport, base_url="http://replay") as http:
        client = PixivClient(http, refresh_token="r", api_url="http://replay", auth_url="http://replay")
        cp = await scan(client, target, scan_limit=1, known=known, on_page=on_page, settled_before="2100-01-01")
    return cp, candidate


def _without(field: str) -> Edit:
    return lambda page: {k: v for k, v in page.items() if k != field}


def _with(value: object) -> Edit:
    return lambda page: {**page, "next_url": value}


@pytest.mark.parametrize("sort", SORTS)
async def test_pages_that_say_where_the_next_is_are_read_to_the_candidate(sort: str) -> None:
    cp, candidate = await _scan(sort, lambda page: page)
    assert [w.work_id for w in cp.candidates] == [candidate] and not cp.exhausted


@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize(
    "edit",
    [_without("next_url"), _with(""), _with(False), _with(0), _with({}), _with([])],
    ids=["absent", "empty-text", "false", "zero", "object", "list"],
)
async def test_a_next_url_not_of_the_app_apis_shape_is_the_sources_failure_not_the_end(sort: str, edit: Edit) -> None:
    with pytest.raises(SourceError) as caught:
        await _scan(sort, edit)
    assert caught.value.reason.value == "remote_http_error" and caught.value.retryable


@pytest.mark.parametrize(
    "page",
    [
        {"illusts": [], "next_url": None},
        {"illusts": [{"id": 1}], "next_url": None},
        {"illusts": [{"id": 1}], "next_url": "https://app-api.pixiv.net/v1/search/illust?word=x&offset=30"},
    ],
)
def test_the_app_apis_own_pages_pass(page: dict[str, Any]) -> None:
    check_page(page, promised=False)


@pytest.mark.parametrize("page", [{"illusts": []}, {"illusts": [{"id": 1}], "next_url": ""}])
def test_check_page_refuses_a_page_that_does_not_say_where_the_next_is(page: dict[str, Any]) -> None:
    with pytest.raises(SourceError) as caught:
        check_page(page, promised=False)
    assert caught.value.reason.value == "remote_http_error" and caught.value.retryable

"""The generic paged scan (:func:`curaflow.sources.paging.scan_pages`) against a source
that lies: ids repeated across pages, ids that cannot name a file, pages without end."""

from __future__ import annotations

from typing import Any

import pytest

from curaflow.domain.messages import RouteRef, TargetSpec
from curaflow.domain.models import Work
from curaflow.sources.base import ScanRequest, ScanState
from curaflow.sources.errors import SourceError
from curaflow.sources.paging import SourcePage, scan_pages

TARGET = TargetSpec(target_id="t", account="s", routes=[RouteRef(name="out", kind="directory")])


def works(*ids: str) -> list[Work]:
    return [Work(work_id=i, create_date="2026-11-30T00:00:00+00:00") for i in ids]


def pages_of(*pages: list[str], endless: bool = False) -> Any:
    calls: list[str | None] = []

    async def fetch(target: TargetSpec, cursor: str | None) -> SourcePage:
        calls.append(cursor)
        n = int(cursor or 0)
        if endless:
            return SourcePage(works=works(*pages[n % len(pages)]), next_url=str(n + 1))
        return SourcePage(works=works(*pages[n]), next_url=str(n + 1) if n + 1 < len(pages) else None)

    fetch.calls = calls  # type: ignore[attr-defined]
    return fetch


async def nothing_known(ids: list[str]) -> dict[str, str]:
    return {}


async def no_page(state: ScanState) -> None:
    return None


def request(**kw: Any) -> ScanRequest:
    return ScanRequest(scan_limit=kw.pop("scan_limit", 5), known=nothing_known, on_page=no_page, **kw)


async def test_a_work_repeated_on_a_later_page_is_one_candidate() -> None:
    fetch = pages_of(["a", "b"], ["b", "c"], ["a", "d"])
    state = await scan_pages(fetch, TARGET, request(want=4))
    ids = [w.work_id for w in state.candidates]
    assert ids == ["a", "b", "c", "d"]
    assert state.report.reasons.get("invalid") == 2  # the repeats are the source's lie, counted


async def test_a_source_repeating_its_page_for_ever_is_bounded() -> None:
    fetch = pages_of(["a", "b"], endless=True)
    state = await scan_pages(fetch, TARGET, request(want=5, max_examined=50))
    assert [w.work_id for w in state.candidates] == ["a", "b"]
    assert state.examined == 50 and not state.exhausted
    assert len(fetch.calls) == 25


@pytest.mark.parametrize("bad", ["..", ".", "../x", "a/b", "", "a\\b", "x" * 200, ".hidden"])
async def test_an_id_that_cannot_name_a_file_is_invalid(bad: str) -> None:
    fetch = pages_of([bad, "ok-1"])
    state = await scan_pages(fetch, TARGET, request(want=2))
    assert [w.work_id for w in state.candidates] == ["ok-1"]
    assert state.report.reasons == {"invalid": 1}


async def test_an_empty_page_that_promises_more_is_the_sources_failure() -> None:
    async def fetch(target: TargetSpec, cursor: str | None) -> SourcePage:
        return SourcePage(works=[], next_url=str(int(cursor or 0) + 1))

    with pytest.raises(SourceError):
        await scan_pages(fetch, TARGET, request())

"""A seam's page asked again is read as the page it replaces: its empty answer is the
source's failure, and the items it lists are counted once.

A segment page after the first (before the walk's first candidate) is asked one place
early and, when works deleted above moved the previous page's last item off it, asked
again earlier (``frontier.walk._seam_check``). Before 2026-12-05d that page counted as
one curaflow chose, not one the source promised: an empty answer (a struggling backend's)
to it, then to the next step back, was accepted at offset 0 (or past the step backs'
bound) as the end of the results — the scan ended ``exhausted`` after one page, the cell
"no new works", with works unread below. And the items the source should never have sent
(``invalid``) on a page asked again were counted for each answer: ``examined``, the
report's ``fetched``, ``rejected`` and ``reasons`` — and the cap — twice.
"""

from __future__ import annotations

import asyncio

import pytest

from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
from curaflow.sources.errors import SourceError
from curaflow.sources.pixiv.frontier import Frontier
from curaflow.sources.pixiv.scan import ScanCheckpoint
from tests.fakes.replay import Faults
from tests.frontier_support import scan_on_replay
from tests.unit.test_frontier_seams import SORTS, TAG, _deep, _id, _place


async def _scan(
    sort: str,
    *,
    search: list[str | None],
    deleted_after_first_page: set[int],
    invalid: set[int] = frozenset(),  # type: ignore[assignment]
    candidate: int = 60,
    checkpoint: ScanCheckpoint | None = None,
    faults: Faults | None = None,
    saved: list[ScanCheckpoint] | None = None,
) -> tuple[ScanCheckpoint, list[ScanCheckpoint], Faults]:
    """One scan of a fresh target over 100 works, every one delivered before but
    ``candidate``; ``invalid`` places are listed with an id not of Pixiv's shape."""
    deep = _deep()
    faults = faults or Faults(deep=deep)
    faults.search = list(search)
    faults.mutate = {_id(sort, deep, p): {"id": f"p{p}"} for p in invalid}
    target = TargetSpec(target_id="t", query=TargetQuery(tags=[TAG], sort=sort), filters=TargetFilters(), scan_limit=1)  # type: ignore[arg-type]
    saved = [] if saved is None else saved

    async def known(ids: list[str]) -> dict[str, str]:
        return {w: "duplicate" for w in ids if _place(sort, deep, w) != candidate}

    async def on_page(cp: ScanCheckpoint) -> None:
        if not saved:
            faults.deleted_works |= {_id(sort, deep, p) for p in deleted_after_first_page}
        saved.append(cp.model_copy(deep=True))

    if checkpoint is not None:
        result = await scan_on_replay(faults, target, known, on_page=on_page, checkpoint=checkpoint)
    else:
        result = await scan_on_replay(faults, target, known, on_page=on_page, frontier=Frontier(sort=sort))
    return result, saved, faults


@pytest.mark.parametrize("sort", SORTS)
def test_an_empty_answer_to_a_seams_page_asked_again_is_the_sources_failure(sort: str) -> None:
    # Place 0 is deleted after the first page: the second page (asked at 29) starts past
    # place 29, read at 28, is asked again — empty (a struggling backend), and the step
    # back to offset 0 empty again. It was taken for the end of the results: exhausted
    # after one page, place 60 never read. Now the attempt fails (retried), and the retry
    # from its checkpoint (after the first page) reads on and finds place 60.
    faults = Faults(deep=_deep())
    saved: list[ScanCheckpoint] = []
    with pytest.raises(SourceError) as err:
        asyncio.run(
            _scan(sort, search=[None, None, "empty", "empty"], deleted_after_first_page={0}, faults=faults, saved=saved)
        )
    assert err.value.reason.value == "remote_http_error"
    assert len(saved) == 1
    result, _, _ = asyncio.run(
        _scan(sort, search=[], deleted_after_first_page=set(), checkpoint=saved[0], faults=faults)
    )
    assert [_place(sort, _deep(), w.work_id) for w in result.candidates] == [60]
    assert not result.exhausted


@pytest.mark.parametrize("sort", SORTS)
def test_an_invalid_item_of_a_page_asked_again_is_counted_once(sort: str) -> None:
    # Place 40 is listed with a field not of Pixiv's shape. Place 0 is deleted after the
    # first page: the page at 29 is asked again at 28 (both list place 40). One invalid
    # item: examined (and fetched) 61 works — places 0 to 60 — not 62.
    result, _, _ = asyncio.run(_scan(sort, search=[], deleted_after_first_page={0}, invalid={40}))
    assert [_place(sort, _deep(), w.work_id) for w in result.candidates] == [60]
    assert result.report.reasons.get("invalid") == 1, result.report.reasons
    assert (result.examined, result.report.fetched, result.report.rejected) == (61, 61, 60)

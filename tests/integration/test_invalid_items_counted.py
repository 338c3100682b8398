"""Items of a search page curaflow does not read are counted for
``CuraflowSourceAnswersUnrecognised`` (``curaflow_source_unrecognised_answers_total``,
kind ``invalid``), once each.

Until 2026-12-05 they fed the cell's tally only: a renamed field on every item showed as
jobs ending ``source_unusable`` and nothing else — no alert named the source's answers.
The ``search`` activity runs in the test process (``ActivityEnvironment``) with a worker's
real dependencies (PostgreSQL, the replay source over HTTP).
"""

from __future__ import annotations

from typing import Any

import pytest

from activities.search import SearchActivity
from curaflow.domain.messages import SearchInput, TargetQuery, TargetSpec
from curaflow.ledger import cells
from tests.deps_support import deps, unrecognised_count
from tests.fakes.replay import ReplayServer, ordered
from tests.support import Stack, ledger_job, run_as_job

pytestmark = pytest.mark.integration
__all__ = ["deps"]  # the module's fixture (tests.deps_support)


async def test_items_a_search_page_lists_in_a_shape_never_seen_are_counted_once(
    deps: tuple[Stack, Any], replay: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack, opened = deps
    settings = stack.settings
    target = TargetSpec(
        target_id="demo", query=TargetQuery(tags=["x"]), routes=settings.route_refs(settings.targets[0])
    )
    first, second, third = ordered("x")[:3]
    # Two items the scan examines before its candidate: a work whose tags are text, an item
    # whose id is not Pixiv's.
    replay.faults.mutate = {first: {"tags": ["a", "b"]}, second: {"id": "p-2"}}
    # The first attempt's binding transaction fails (a lost connection): retried, the
    # attempt reads the same items again; they are counted once, with what was committed.
    bind_search = cells.bind_search
    failures = [RuntimeError("the connection was lost mid-transaction")]

    async def fails_once(*args: Any, **kw: Any) -> Any:
        if failures:
            raise failures.pop()
        return await bind_search(*args, **kw)

    monkeypatch.setattr(cells, "bind_search", fails_once)
    before = unrecognised_count("invalid")
    job_id = await ledger_job(opened.pool, target, label="invalid-items")
    inp = SearchInput(job_id=job_id, target=target, heartbeat_interval_ms=10_000)
    with pytest.raises(RuntimeError):
        await run_as_job(SearchActivity(opened).search, inp)
    assert unrecognised_count("invalid") == before
    update = await run_as_job(SearchActivity(opened).search, inp)
    assert update.cell.work_id == third
    report = await opened.pool.fetchval(
        "SELECT candidate_report FROM cells WHERE job_id = $1 AND target_id = $2", job_id, target.target_id
    )
    assert report["reasons"].get("invalid") == 2, report
    assert unrecognised_count("invalid") == before + 2

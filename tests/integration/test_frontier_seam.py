"""The scan frontier behind the source seam: the ledger stores a source's memory, the source reads it.

The ``search`` activity runs in the test process (``ActivityEnvironment``) with a worker's
real dependencies (PostgreSQL, the source over HTTP):

* a source of another kind keeping a frontier in its own format (the test-only
  ``catalog`` kind with ``keeps_frontier``) gets back, job after job, exactly the JSON
  its last scan left, under the key it names (:meth:`~curaflow.sources.base.Source.frontier_key`);
* stored data survives the upgrade: a ``scan_frontiers`` row written in the format of the
  version before the frontier moved behind the seam (``tests/saved``-style literal, under
  the fingerprint that version computed) is read by the Pixiv source, and a search
  checkpoint that version saved (``tests/saved/pixiv_search_checkpoint.json``: written
  by its ``search`` after the first page) resumes with the next page.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from activities.deps import ActivityDeps, close_deps, open_deps
from activities.search import SearchActivity
from curaflow.domain.cells import CellState
from curaflow.domain.messages import RouteRef, SearchInput, TargetQuery, TargetSpec
from curaflow.ledger import frontiers
from tests.conftest import StackFactory
from tests.fakes.catalog import CatalogServer
from tests.fakes.replay import ReplayServer, ordered
from tests.support import ledger_job, run_as_job, short_id

pytestmark = pytest.mark.integration

SAVED = Path(__file__).resolve().parents[1] / "saved"
#: The target of the rows below, as the previous version saw it (its fingerprint depends on it).
COMPAT_TARGET = TargetSpec(
    target_id="compat",
    query=TargetQuery(tags=["オリジナル"]),
    routes=[RouteRef(name="compat-out", kind="directory")],
)
#: The fingerprint the previous version (``curaflow.sources.frontier.fingerprint``) gave it.
COMPAT_FINGERPRINT = "924c10863b18398a62594aa302a937dc3622299a20edd325eec53833f387e4c2"


async def _search(deps: ActivityDeps, target: TargetSpec, *, checkpoint: dict[str, Any] | None = None) -> Any:
    job_id = await ledger_job(deps.pool, target, label="seam")
    if checkpoint is not None:
        await deps.pool.execute("UPDATE cells SET search_checkpoint = $2 WHERE job_id = $1", job_id, checkpoint)
    inp = SearchInput(job_id=job_id, target=target, heartbeat_interval_ms=10_000)
    return await run_as_job(SearchActivity(deps).search, inp)


async def _report(deps: ActivityDeps, update: Any) -> dict[str, Any]:
    """The candidate report the search stored on the cell."""
    report = await deps.pool.fetchval(
        "SELECT candidate_report FROM cells WHERE target_id = $1 AND work_id = $2",
        update.cell.target_id,
        update.cell.work_id,
    )
    assert isinstance(report, dict)
    return report


@pytest.fixture
async def catalog() -> AsyncIterator[CatalogServer]:
    async with CatalogServer() as server:
        yield server


async def test_a_source_keeping_its_own_frontier_gets_back_what_it_left(
    make_stack: StackFactory, tmp_path: Path, catalog: CatalogServer
) -> None:
    out = f"out-{short_id()}"
    stack = make_stack(
        {
            "source_modules": ["tests.fakes.catalog_source"],
            "sources": {
                "shelf": {"kind": "catalog", "url": catalog.url, "keeps_frontier": True},
                "plain": {"kind": "catalog", "url": catalog.url},
            },
            "routes": {out: {"kind": "directory", "path": str(tmp_path / "delivered")}},
            "targets": [{"id": "pictures", "account": "shelf", "query": {"tags": ["sky"]}, "routes": [out]}],
        }
    )
    deps = await open_deps(stack.settings, None)
    try:
        routes = stack.settings.route_refs(stack.settings.targets[0])
        target = TargetSpec(
            target_id=f"t-{short_id()}", account="shelf", query=TargetQuery(tags=["sky"]), routes=routes
        )
        key = f"catalog:sky|{out}"

        first = await _search(deps, target)
        assert first.cell.state == CellState.SELECTED and first.cell.work_id == "c100"
        assert await frontiers.load_frontier(deps.pool, target.target_id, key) == {
            "format": "catalog/1",
            "key": key,
            "scans": 1,
            "first_ref": "c100",
        }
        # The next job's scan is handed the JSON the first left (it counts on from it).
        second = await _search(deps, target)
        assert second.cell.work_id == "c101"  # c100 is held by the first job
        assert await frontiers.load_frontier(deps.pool, target.target_id, key) == {
            "format": "catalog/1",
            "key": key,
            "scans": 2,
            "first_ref": "c101",
        }
        # Another query is another key: the target starts afresh, its old memory is gone.
        wider = target.model_copy(update={"query": TargetQuery(tags=["sky", "sea"])})
        await _search(deps, wider)
        rows = await deps.pool.fetch(
            "SELECT fingerprint, frontier FROM scan_frontiers WHERE target_id = $1", target.target_id
        )
        assert [(r["fingerprint"], r["frontier"]["scans"]) for r in rows] == [(f"catalog:sea,sky|{out}", 1)]

        # A source that keeps no frontier: nothing is stored for its targets.
        plain = target.model_copy(update={"target_id": f"t-{short_id()}", "account": "plain"})
        assert (await _search(deps, plain)).cell.state == CellState.SELECTED
        assert (
            await deps.pool.fetchval("SELECT count(*) FROM scan_frontiers WHERE target_id = $1", plain.target_id) == 0
        )
    finally:
        await close_deps(deps)


@pytest.fixture
async def pixiv(make_stack: StackFactory, tmp_path: Path, replay: ReplayServer) -> AsyncIterator[ActivityDeps]:
    stack = make_stack(
        {
            "pixiv": replay.config(),
            "routes": {
                name: {"kind": "directory", "path": str(tmp_path / name)} for name in ("compat-out", "resume-out")
            },
            "targets": [{"id": "compat", "query": {"tags": ["オリジナル"]}, "routes": ["compat-out"]}],
        }
    )
    deps = await open_deps(stack.settings, None, replay_url=replay.url)
    try:
        yield deps
    finally:
        await close_deps(deps)


async def test_a_frontier_stored_before_the_upgrade_is_read_by_the_pixiv_source(
    pixiv: ActivityDeps, replay: ReplayServer
) -> None:
    deps = pixiv
    newest, second = ordered("オリジナル")[:2]
    # Same key as before: the fingerprint is unchanged.
    assert deps.source("default").frontier_key(COMPAT_TARGET) == COMPAT_FINGERPRINT
    # A row as the previous version wrote it (no field of a later version): the newest
    # work is the head and the whole known run.
    mark = {"work_id": newest, "create_date": "2025-02-04T20:30:05+09:00", "index": 0}
    stored = {"sort": "date_desc", "head": mark, "known": mark, "sweep": None, "revisit": 0}
    async with deps.pool.acquire() as conn:
        await frontiers.clear_frontiers(conn, COMPAT_TARGET.target_id)
        await conn.execute(
            """INSERT INTO scan_frontiers (target_id, fingerprint, frontier, job_id, updated_at)
               VALUES ($1, $2, $3, NULL, 0)""",
            COMPAT_TARGET.target_id,
            COMPAT_FINGERPRINT,
            stored,
        )

    update = await _search(deps, COMPAT_TARGET)

    # The scan started from the stored frontier: the known work was passed over, not
    # examined again (without the row, the newest work is bound: the last test below).
    assert update.cell.work_id == second, update.cell
    report = await _report(deps, update)
    assert newest not in [f["work_id"] for f in report["filtered"]] and report["fetched"] < 30
    left = await frontiers.load_frontier(deps.pool, COMPAT_TARGET.target_id, COMPAT_FINGERPRINT)
    assert left is not None and left["sort"] == "date_desc"


async def test_a_search_checkpoint_saved_before_the_upgrade_resumes_with_the_next_page(
    pixiv: ActivityDeps, replay: ReplayServer
) -> None:
    # The previous version's search saved this after the first page of オリジナル (every
    # work of it a duplicate); the cell resumes from it: only the second page is asked.
    saved = json.loads((SAVED / "pixiv_search_checkpoint.json").read_text())
    assert saved["scan"]["pages"] == 1 and saved["scan"]["walk"] is not None
    target = TargetSpec(
        target_id=f"resumed-{short_id()}",
        query=TargetQuery(tags=["オリジナル"]),
        routes=[RouteRef(name="resume-out", kind="directory")],
        scan_limit=1,
    )
    update = await _search(pixiv, target, checkpoint=saved)
    assert [line.rsplit("offset=", 1)[-1] for line in replay.searches()] == ["30"], replay.searches()
    assert update.cell.state == CellState.SELECTED
    assert update.cell.work_id == ordered("オリジナル")[30], update.cell
    assert (await _report(pixiv, update))["pages"] == 2


async def test_without_a_stored_frontier_the_newest_work_is_bound(pixiv: ActivityDeps) -> None:
    target = COMPAT_TARGET.model_copy(update={"target_id": f"fresh-{short_id()}"})
    update = await _search(pixiv, target)
    assert update.cell.work_id == ordered("オリジナル")[0]

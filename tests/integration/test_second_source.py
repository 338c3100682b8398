"""A second source, registered from the tests, runs jobs end to end (the source seam).

The ``catalog`` kind (``tests/fakes/catalog_source.py``) speaks the fake catalog's own
JSON (``tests/fakes/catalog.py``: items with a ``ref``, numbered pages with
``has_more``), nothing of Pixiv's. The stack names the module in ``source_modules``
and configures one instance as ``[sources.shelf]``; the target uses it with
``account = "shelf"``. Real Temporal dev server, real PostgreSQL, real worker
processes: the worker process registers the kind when it loads the settings, serves
the instance's own source task queue, and the job searches, fetches and delivers through
the :class:`~curaflow.sources.base.Source` protocol alone.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from curaflow.domain.reasons import REASONS, Owner, TerminalReason
from curaflow.ledger.gates import read_gate
from curaflow.protocol.projection import project_job
from tests.conftest import StackFactory
from tests.fakes.catalog import CatalogServer
from tests.jobs_support import curaflow
from tests.support import Stack, short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
async def catalog() -> AsyncIterator[CatalogServer]:
    async with CatalogServer() as server:
        yield server


def catalog_stack(
    make_stack: StackFactory, tmp_path: Path, catalog: CatalogServer, extra: dict[str, Any] | None = None, **target: Any
) -> tuple[Stack, Path]:
    out = f"out-{short_id()}"
    delivered = tmp_path / "delivered"
    config: dict[str, Any] = {
        "source_modules": ["tests.fakes.catalog_source"],
        "sources": {"shelf": {"kind": "catalog", "url": catalog.url, "min_interval_ms": 50}},
        "routes": {out: {"kind": "directory", "path": str(delivered)}},
        "targets": [{"id": "pictures", "account": "shelf", "query": {"tags": ["sky"]}, "routes": [out], **target}],
        **(extra or {}),
    }
    return make_stack(config), delivered


async def test_a_job_on_the_second_source_is_searched_fetched_and_delivered(
    make_stack: StackFactory, tmp_path: Path, catalog: CatalogServer
) -> None:
    stack, delivered = catalog_stack(make_stack, tmp_path, catalog)
    assert stack.settings.source_task_queues()["shelf"] == f"{stack.task_queue}-source-shelf"
    await stack.start_worker()

    record = await stack.wait_terminal(await stack.admit(stack.task(query={"tags": ["sky"]})))

    cell = record.cells[0]
    assert cell.state == "submitted", record
    assert record.business_status == "success"
    assert cell.work_id == "c100"  # the catalog's newest item
    manifest = json.loads((delivered / "c100" / "manifest.json").read_text())
    assert manifest["work"]["work_id"] == "c100"
    assert manifest["work"]["title"] == "catalog picture 0"
    files = manifest["files"]
    assert [f["name"] for f in files] == ["c100_p0.png"]
    assert (delivered / "c100" / "c100_p0.png").stat().st_size == files[0]["bytes"] > 0
    # Only the catalog was asked, in its own shapes: two pages of 4 (the scan keeps 5
    # candidates), then the bound item's one picture.
    assert catalog.catalog.kinds() == ["search", "search", "media"]
    assert [s.query for s in catalog.catalog.log[:2]] == [
        {"label": ["sky"], "page": ["1"]},
        {"label": ["sky"], "page": ["2"]},
    ]
    assert catalog.catalog.log[2].path == "/media/c100-0.png"
    # The instance's rate gate is its own row, keyed by its source task queue.
    pool = await stack.ledger()
    assert await read_gate(pool, stack.settings.source_task_queue("shelf")) is not None


async def test_the_second_source_never_delivers_a_work_twice_and_pages_on(
    make_stack: StackFactory, tmp_path: Path, catalog: CatalogServer
) -> None:
    # Works already delivered on the route are duplicates for the next job; a gone item
    # is unavailable and the cell moves on to the next candidate; the next page is read
    # when the first holds nothing new.
    stack, delivered = catalog_stack(make_stack, tmp_path, catalog)
    await stack.start_worker()
    catalog.catalog.gone.add("c102")

    work_ids = []
    for _ in range(5):
        record = await stack.wait_terminal(await stack.admit(stack.task(query={"tags": ["sky"]})))
        assert record.cells[0].state == "submitted", record
        work_ids.append(record.cells[0].work_id)

    assert work_ids == ["c100", "c101", "c103", "c104", "c105"]
    assert sorted(p.name for p in (delivered / "c101").iterdir()) == ["c101_p0.png", "c101_p1.png", "manifest.json"]
    pages = [s.query.get("page") for s in catalog.catalog.log if s.kind == "search"]
    assert ["2"] in pages  # c104 and c105 are on the second page
    pool = await stack.ledger()
    gone = await pool.fetchval(
        "SELECT count(*) FROM unavailable_works WHERE gate = $1 AND work_id = 'c102'",
        stack.settings.source_task_queue("shelf"),
    )
    assert gone == 1


async def test_the_operator_commands_know_the_second_source(
    make_stack: StackFactory, tmp_path: Path, catalog: CatalogServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `curaflow accounts list` shows the instance's gate; `accounts resume` lifts its pause
    # (any kind's gate may pause: SourceContext.gate(pause_ms=…)) instead of calling it
    # an unknown account.
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))  # tests.fakes for the command
    stack, _ = catalog_stack(make_stack, tmp_path, catalog)
    await stack.start_worker()
    record = await stack.wait_terminal(await stack.admit(stack.task(query={"tags": ["sky"]})))
    assert record.cells[0].state == "submitted", record
    pool = await stack.ledger()
    await pool.execute(
        "UPDATE source_gates SET paused_until = (extract(epoch FROM now()) * 1000)::bigint + 600000, "
        "pause_reason = 'restricted' WHERE gate = $1",
        stack.settings.source_task_queue("shelf"),
    )

    listed = await curaflow("accounts", "list", "--json", stack=stack)
    assert listed.returncode == 0, listed.stderr
    shelf = next(a for a in json.loads(listed.stdout) if a["account"] == "shelf")
    assert shelf["pause_reason"] == "restricted"
    resumed = await curaflow("accounts", "resume", "shelf", stack=stack)
    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
    assert "account shelf resumed" in resumed.stdout
    gate = await read_gate(pool, stack.settings.source_task_queue("shelf"))
    assert gate is not None and gate.paused_until <= gate.now


async def test_a_source_failing_on_a_shape_it_did_not_expect_is_the_sources_failure(
    make_stack: StackFactory, tmp_path: Path, catalog: CatalogServer
) -> None:
    # The catalog answers its newest item with an artist that is not an object: the
    # source's parsing raises AttributeError, a type the protocol does not allow. The
    # job fails as the source's error (retried, then remote_http_error, owner source),
    # never curaflow's internal_error nor "no candidate".
    catalog.catalog.odd["c100"] = {"artist": "someone"}
    extra = {"delivery": {"source_max_attempts": 2, "retry_initial_interval_ms": 100}}
    stack, _ = catalog_stack(make_stack, tmp_path, catalog, extra)
    await stack.start_worker()

    record = await stack.wait_terminal(await stack.admit(stack.task(query={"tags": ["sky"]})))

    cell = record.cells[0]
    assert (cell.state, cell.reason) == ("failed", "remote_http_error"), record
    assert REASONS[TerminalReason(cell.reason or "")].owner == Owner.SOURCE
    error = project_job(record)["error"]
    assert error["code"] == "source_error" and error["retryable"] is True
    assert [s.query.get("page") for s in catalog.catalog.log if s.kind == "search"] == [["1"], ["1"]]


async def test_an_empty_page_the_cursor_promised_costs_attempts_and_ends_as_the_sources_failure(
    make_stack: StackFactory, tmp_path: Path, catalog: CatalogServer
) -> None:
    # The target keeps items with 40 hearts or more: page 1 (c100–c103) holds none, page 2
    # starts with c104. The first job delivers c104 and stores the target's frontier. For
    # the second, the catalog answers page 2 with no results though page 1 promised more
    # (has_more): every attempt fails as the source's (retried from the checkpoint after
    # page 1, never reading page 1 again, never a loop), the job ends failed with the
    # source's reason once its attempts are spent, and the stored frontier is the first
    # job's — never taken for the end of results ("no candidate").
    extra = {
        "delivery": {"source_max_attempts": 3, "retry_initial_interval_ms": 100},
        "sources": {"shelf": {"kind": "catalog", "url": catalog.url, "min_interval_ms": 50, "keeps_frontier": True}},
    }
    stack, _ = catalog_stack(make_stack, tmp_path, catalog, extra, filters={"min_bookmarks": 40})
    await stack.start_worker()
    first = await stack.wait_terminal(await stack.admit(stack.task(query={"tags": ["sky"]})))
    assert (first.cells[0].state, first.cells[0].work_id) == ("submitted", "c104"), first
    pool = await stack.ledger()
    # this target's row (the ledger is shared with the other tests of the session)
    mine = (
        "SELECT target_id, frontier, job_id FROM scan_frontiers WHERE frontier->>'format' = 'catalog/1' AND job_id = $1"
    )
    stored = await pool.fetch(mine, first.job_id)
    assert len(stored) == 1 and stored[0]["frontier"]["scans"] == 1, stored

    catalog.catalog.empty_pages.add(2)
    before = len(catalog.catalog.log)
    record = await stack.wait_terminal(await stack.admit(stack.task(query={"tags": ["sky"]})))

    cell = record.cells[0]
    assert (cell.state, cell.reason) == ("failed", "remote_http_error"), record
    assert REASONS[TerminalReason(cell.reason or "")].owner == Owner.SOURCE
    error = project_job(record)["error"]
    assert error["code"] == "source_error" and error["retryable"] is True
    pages = [s.query.get("page") for s in catalog.catalog.log[before:] if s.kind == "search"]
    assert pages == [["1"], ["2"], ["2"], ["2"]], pages
    assert await pool.fetch(mine, first.job_id) == stored

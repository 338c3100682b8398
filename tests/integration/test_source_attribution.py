"""A source's failure is the source's, never the end of results.

Scan-level cases run the production client and scan over real HTTP against the replay
in fault mode, retrying the way Temporal retries the ``acquire`` step (from the last
checkpoint the step persisted); job-level cases run real Temporal, real PostgreSQL and
real worker processes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from curaflow.domain.reasons import REASONS, Owner, TerminalReason
from curaflow.process.httpserver import BackgroundServer
from curaflow.sources.errors import SourceError
from curaflow.sources.pixiv.replay.app import create_replay_app
from curaflow.sources.pixiv.replay.data import DeepSet, recorded_works
from curaflow.sources.pixiv.scan import ScanCheckpoint, scan
from tests.conftest import StackFactory
from tests.fakes.replay import Faults
from tests.integration.test_source_failures import Replay, spec
from tests.integration.test_source_jobs import source_stack
from tests.jobs_support import ReplayServer, start_scheduled

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: Six pages of 30: the first two pages hold no popular work, pages 3–6 hold 120.
SIX_PAGES = DeepSet(tag="six-pages", count=180, per_day=100, popular_ranks=frozenset(range(60, 180)))
TARGET = {"query": {"tags": ["six-pages"]}, "filters": {"min_bookmarks": 500}, "scan_limit": 1}


@pytest.fixture
async def source() -> AsyncIterator[Replay]:
    faults = Faults()
    server = await BackgroundServer(create_replay_app(faults)).start()
    replay = Replay(server, faults)
    try:
        yield replay
    finally:
        await replay.http.aclose()
        await server.stop()


async def scan_with_retries(replay: Replay, attempts: int = 6) -> tuple[ScanCheckpoint, list[SourceError]]:
    """Scan like the ``acquire`` step: a failed attempt resumes from the last saved checkpoint."""
    saved: list[ScanCheckpoint | None] = [None]
    errors: list[SourceError] = []

    async def known(ids: list[str]) -> dict[str, str]:
        return {}

    async def on_page(cp: ScanCheckpoint) -> None:
        saved[0] = cp.model_copy(deep=True)

    target = spec(**TARGET)
    client = replay.client()
    for _ in range(attempts):
        checkpoint = saved[0].model_copy(deep=True) if saved[0] is not None else None
        try:
            result = await scan(client, target, scan_limit=1, known=known, on_page=on_page, checkpoint=checkpoint)
        except SourceError as err:
            errors.append(err)
            continue
        return result, errors
    raise AssertionError(f"the scan never ended: {errors}")


@pytest.mark.parametrize(
    "faults",
    [
        [None, None, "500", "500", "empty", "empty"],
        [None, "503", "empty", "empty"],
        [None, None, "empty", "empty"],
        [None, None, "no_illusts"],
    ],
    ids=["500-500-empty", "503-empty", "empty", "no-illusts"],
)
async def test_an_empty_page_where_more_were_promised_is_a_source_failure(
    source: Replay,
    faults: list[str | None],
) -> None:
    # An empty page after the first is asked a page earlier first (the results may have
    # shrunk past its place: works deleted above moved the rest up, since 2026-12-05f):
    # the page before, asked again, answers empty too — the source failed.
    source.faults.deep = SIX_PAGES
    source.faults.search = list(faults)

    result, errors = await scan_with_retries(source)

    assert [w.work_id for w in result.candidates] == [SIX_PAGES.work_id(60)]
    assert not result.exhausted
    assert errors and all(e.retryable for e in errors)
    assert errors[-1].reason == TerminalReason.REMOTE_HTTP_ERROR
    assert "next_url" in str(errors[-1]) or "illusts" in str(errors[-1])


async def test_a_lone_empty_page_where_more_were_promised_costs_a_page_not_an_attempt(source: Replay) -> None:
    # The page at 60 answers empty once. Results that shrank past its place look the same,
    # so the page before is asked again (2026-12-05f): it lists the same works and promises
    # the same page, which the source now answers. No attempt failed, nothing was lost.
    source.faults.deep = SIX_PAGES
    source.faults.search = [None, None, "empty"]

    result, errors = await scan_with_retries(source)

    assert [w.work_id for w in result.candidates] == [SIX_PAGES.work_id(60)]
    assert errors == []
    assert [int(e.params.get("offset") or 0) for e in source.faults.of("search")] == [0, 30, 60, 30, 60]


async def test_an_empty_first_page_is_still_an_empty_result(source: Replay) -> None:
    source.faults.deep = SIX_PAGES
    target = spec(query={"tags": ["a-tag-nobody-uses"]})

    async def known(ids: list[str]) -> dict[str, str]:
        return {}

    async def on_page(cp: ScanCheckpoint) -> None:
        return None

    result = await scan(source.client(), target, scan_limit=1, known=known, on_page=on_page)
    assert result.exhausted and result.candidates == [] and result.report.fetched == 0


async def test_source_json_nested_too_deep_is_a_source_failure(source: Replay) -> None:
    source.faults.search = ["deep_json"]
    with pytest.raises(SourceError) as caught:
        await source.client().search_illust("オリジナル")
    assert caught.value.reason == TerminalReason.REMOTE_HTTP_ERROR and caught.value.retryable


# ---- job level ----------------------------------------------------------------------------


async def test_a_source_error_mid_scan_never_ends_a_job_as_filter_exhausted(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    replay.faults.deep = SIX_PAGES
    replay.faults.search = [None, None, "500", "500", "empty"]
    stack, _ = source_stack(make_stack, tmp_path, replay, target=TARGET)
    await stack.start_worker()
    record = await stack.wait_terminal(await stack.admit(stack.task(query={"tags": ["six-pages"]})), timeout_s=120)

    cell = record.cells[0]
    assert (cell.state, cell.work_id) == ("submitted", SIX_PAGES.work_id(60)), (cell.state, cell.reason)

    # A scheduled job (fallback passes) the same way: a 503 on page 2, then an empty 200.
    replay.faults.search = [None, "503", "empty"]
    scheduled = await stack.wait_terminal(await start_scheduled(stack, stages=3), timeout_s=120)
    cell = scheduled.cells[0]
    assert (cell.state, cell.work_id) == ("submitted", SIX_PAGES.work_id(61)), (cell.state, cell.reason)
    assert cell.fallback_pass == 0


async def test_an_empty_first_ranking_page_never_ends_a_job_as_nothing_new(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    # The ranking's first page answers empty once (an outage, a cache). Until 2026-12-08
    # the job ended there: no candidate, "no new works" — as if the day's ranking held
    # none. A published ranking is never empty: the attempt fails as the source's
    # (retried, backed off) and the retry delivers the ranking's first work.
    replay.faults.search = ["empty"]
    stack, _ = source_stack(make_stack, tmp_path, replay, target={"query": {"mode": "ranking"}, "scan_limit": 1})
    await stack.start_worker()
    record = await stack.wait_terminal(await start_scheduled(stack, stages=1), timeout_s=120)

    cell = record.cells[0]
    assert (cell.state, cell.work_id) == ("submitted", str(recorded_works()[0]["id"])), (cell.state, cell.reason)
    assert [int(e.params.get("offset") or 0) for e in replay.faults.of("ranking")][:2] == [0, 0]


async def test_a_ranking_outage_ends_the_job_as_the_sources_failure_not_nothing_new(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    # Every ranking page answers empty for the job's attempts: the job ends failed as the
    # source's (remote_http_error, owner source, retryable), its attempts spent — never
    # "no candidate", which says the ranking held nothing new.
    replay.faults.search = ["empty"] * 2
    stack, _ = source_stack(
        make_stack,
        tmp_path,
        replay,
        target={"query": {"mode": "ranking"}, "scan_limit": 1},
        delivery={"source_max_attempts": 2, "retry_initial_interval_ms": 100},
    )
    await stack.start_worker()
    record = await stack.wait_terminal(await start_scheduled(stack, stages=1), timeout_s=120)

    cell = record.cells[0]
    assert (cell.state, cell.reason) == ("failed", "remote_http_error"), (cell.state, cell.reason)
    assert REASONS[TerminalReason(cell.reason or "")].owner == Owner.SOURCE
    assert [int(e.params.get("offset") or 0) for e in replay.faults.of("ranking")] == [0, 0]

"""A long-lived target's scan frontier (a long history; a scan capped before it found a work).

Real Temporal, PostgreSQL, workers.

The replay serves a synthetic result set (:class:`DeepSet`: rank 0 is the newest work,
and with no bookmarks the popularity order is the same); the target's history is seeded
straight into the ledger (``bench.history.seed_deliveries``), as thousands of earlier
jobs would have left it. Each test counts the search requests the replay answered per job.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from bench.history import seed_deliveries
from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
from curaflow.domain.models import Work
from curaflow.ledger import frontiers
from curaflow.ledger import remembered as memory
from curaflow.ledger.jobs import JobRecord
from curaflow.process.httpserver import BackgroundServer
from curaflow.protocol.projection import project_job
from curaflow.sources.pixiv.client import PixivClient
from curaflow.sources.pixiv.frontier import Frontier, Mark, read
from curaflow.sources.pixiv.frontier import lasting as fr_lasting
from curaflow.sources.pixiv.replay.app import create_replay_app
from curaflow.sources.pixiv.replay.data import DeepSet
from curaflow.sources.pixiv.scan import ScanCheckpoint, scan
from tests.conftest import StackFactory
from tests.fakes.replay import Faults
from tests.jobs_support import ReplayServer, curaflow
from tests.support import Stack, short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TAG = "long-lived"


def history_stack(
    make_stack: StackFactory,
    tmp_path: Path,
    replay: ReplayServer,
    *,
    sort: str,
    count: int = 3000,
    max_examined: int = 5000,
    routes: list[str] | None = None,
    target_routes: list[str] | None = None,
) -> tuple[Stack, DeepSet, dict[str, Any]]:
    deep = DeepSet(tag=TAG, count=count, per_day=100)
    replay.faults.deep = deep
    query = {"tags": [TAG], "sort": sort}
    names = routes or [f"out-{short_id()}"]
    config: dict[str, Any] = {
        "pixiv": replay.config(max_examined=max_examined),
        "routes": {name: {"kind": "directory", "path": str(tmp_path / name)} for name in names},
        "targets": [{"id": "demo", "query": query, "routes": target_routes or names[:1], "scan_limit": 5}],
    }
    return make_stack(config), deep, query


async def seed(stack: Stack, deep: DeepSet, ranks: Sequence[int], route: str | None = None) -> None:
    routes = stack.settings.route_refs(stack.settings.target("demo"))  # type: ignore[arg-type]
    await seed_deliveries(
        await stack.ledger(),
        target_id="demo",
        routes={r.name: r.kind for r in routes if route is None or r.name == route},
        work_ids=[deep.work_id(r) for r in ranks],
    )


async def run_job(stack: Stack, replay: ReplayServer, query: dict[str, Any]) -> tuple[JobRecord, int]:
    """One job of the target; returns its record and the search requests it made."""
    before = len(replay.faults.of("search"))
    record = await stack.wait_terminal(await stack.admit(stack.task(query=query)), timeout_s=120)
    return record, len(replay.faults.of("search")) - before


@pytest.mark.parametrize("sort", ["date_desc", "popular_desc", "date_asc"])
async def test_a_long_history_costs_at_most_two_search_pages_per_job(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer, sort: str
) -> None:
    stack, deep, query = history_stack(make_stack, tmp_path, replay, sort=sort)

    def nth(n: int) -> int:  # the rank of the target's n-th work in its own order
        return deep.count - 1 - n if sort == "date_asc" else n

    await seed(stack, deep, [nth(n) for n in range(1500)])  # 50 pages of works already delivered
    await stack.start_worker()

    first, _ = await run_job(stack, replay, query)  # reads the history once: the frontier is built
    assert (first.cells[0].state, first.cells[0].work_id) == ("submitted", deep.work_id(nth(1500)))

    for n in range(1501, 1505):
        record, pages = await run_job(stack, replay, query)
        cell = record.cells[0]
        assert (cell.state, cell.work_id) == ("submitted", deep.work_id(nth(n))), cell
        assert pages <= 2, f"job {n} read {pages} search pages"
        assert cell.candidate_report is not None and cell.candidate_report.fetched <= 60


async def test_a_date_desc_target_finds_the_works_new_since_its_last_job(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    """Every work of a ``date_desc`` query delivered, the target's frontier built; a day of
    new works appears: the next job delivers the newest of them. Until 2026-12-05 the head
    phase stopped at the first work newer than the frontier's head, so every later
    ``date_desc`` job of a target read nothing above it and ended ``duplicate_exhausted``
    with 100 new works waiting."""
    stack, old, query = history_stack(make_stack, tmp_path, replay, sort="date_desc", count=300)
    await seed(stack, old, range(old.count))
    await stack.start_worker()
    first, _ = await run_job(stack, replay, query)
    assert (first.cells[0].state, first.cells[0].reason) == ("no_candidate", "duplicate_exhausted")
    new = DeepSet(tag=TAG, count=400, per_day=100, last_day="2025-02-05")  # the same 300 works, and a day more
    assert [new.work_id(r) for r in range(100, 400)] == [old.work_id(r) for r in range(300)]
    replay.faults.deep = new
    for n in range(3):
        record, pages = await run_job(stack, replay, query)
        cell = record.cells[0]
        assert (cell.state, cell.work_id) == ("submitted", new.work_id(n)), (cell.state, cell.reason, pages)
        assert pages <= 2, f"job {n} read {pages} search pages"


async def test_deleted_and_restricted_works_are_neither_skipped_nor_repeated(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    stack, deep, query = history_stack(make_stack, tmp_path, replay, sort="date_desc")
    await seed(stack, deep, range(1500))
    await stack.start_worker()
    first, _ = await run_job(stack, replay, query)
    assert first.cells[0].work_id == deep.work_id(1500)

    # 40 works of the frontier's day, above its mark, are deleted: the mark's place moves
    # up by 40 and a landing at its old offset would start past unexamined works. The next
    # work in line is restricted (listed as a placeholder).
    replay.faults.deleted_works = {deep.work_id(r) for r in range(1440, 1480)}
    replay.faults.restricted_works = {deep.work_id(1501)}
    record, pages = await run_job(stack, replay, query)
    assert (record.cells[0].state, record.cells[0].work_id) == ("submitted", deep.work_id(1502))
    assert pages <= 4  # the head, and the landing stepping back to the mark

    delivered = [deep.work_id(1502)]
    for n in (1503, 1504):
        record, pages = await run_job(stack, replay, query)
        delivered.append(record.cells[0].work_id or "")
        assert record.cells[0].work_id == deep.work_id(n)
        assert pages <= 2
    assert len(set(delivered)) == len(delivered)


async def test_a_work_that_climbs_a_popularity_ranking_is_found(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    stack, deep, query = history_stack(make_stack, tmp_path, replay, sort="popular_desc")
    await seed(stack, deep, range(300))
    await stack.start_worker()
    first, _ = await run_job(stack, replay, query)
    assert first.cells[0].work_id == deep.work_id(300)

    # a work far beyond the frontier gains bookmarks and climbs to the top: every known
    # place shifts down by one
    climber = deep.work_id(2000)
    replay.faults.mutate = {climber: {"total_bookmarks": 5000}}
    record, pages = await run_job(stack, replay, query)
    assert (record.cells[0].state, record.cells[0].work_id) == ("submitted", climber)
    assert pages <= 2
    for n in (301, 302):
        record, pages = await run_job(stack, replay, query)
        assert record.cells[0].work_id == deep.work_id(n)
        assert pages <= 2


async def test_a_changed_target_starts_afresh(make_stack: StackFactory, tmp_path: Path, replay: ReplayServer) -> None:
    stack, deep, query = history_stack(make_stack, tmp_path, replay, sort="date_desc", routes=["old", "new"])
    await seed(stack, deep, range(900))
    await stack.start_worker()
    await run_job(stack, replay, query)
    record, pages = await run_job(stack, replay, query)
    assert record.cells[0].work_id == deep.work_id(901) and pages <= 2
    pool = await stack.ledger()
    assert await pool.fetchval("SELECT count(*) FROM scan_frontiers WHERE target_id = 'demo'") == 1
    listed = await curaflow("frontiers", "list", "--json", stack=stack)
    assert listed.returncode == 0, listed.stderr
    # the suite's ledger is shared by the tests of a process: other targets' frontiers may be listed
    [row] = [each for each in json.loads(listed.stdout) if each["target_id"] == "demo"]
    assert row["frontier"]["known"]["work_id"] == deep.work_id(900)

    # The target now delivers to a route that received nothing: its frontier does not
    # apply (it passed over works delivered to the other route), so the scan starts at
    # the top and the newest work is new again.
    await stack.stop()
    changed, _, _ = history_stack(
        make_stack, tmp_path, replay, sort="date_desc", routes=["old", "new"], target_routes=["new"]
    )
    await changed.start_worker()
    record, pages = await run_job(changed, replay, query)
    assert (record.cells[0].state, record.cells[0].work_id) == ("submitted", deep.work_id(0))
    assert pages == 1
    pool = await changed.ledger()
    assert await pool.fetchval("SELECT count(*) FROM scan_frontiers WHERE target_id = 'demo'") == 1

    # an operator can make a target read from the top again
    reset = await curaflow("frontiers", "reset", "demo", stack=changed)
    assert reset.returncode == 0 and "reset 1 frontier" in reset.stdout, reset.stderr
    assert (await curaflow("frontiers", "reset", "demo", stack=changed)).returncode == 1


async def test_a_scan_cap_is_its_own_reason_and_the_next_job_goes_on(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    # A popularity target that has received more works than one scan may examine.
    stack, deep, query = history_stack(make_stack, tmp_path, replay, sort="popular_desc", max_examined=600)
    await seed(stack, deep, range(1000))
    await stack.start_worker()

    record, _ = await run_job(stack, replay, query)
    cell = record.cells[0]
    assert (cell.state, cell.reason) == ("no_candidate", "scan_capped")
    assert cell.candidate_report is not None and cell.candidate_report.exhausted is False
    assert record.business_status == "no_candidate"  # not "duplicate_only": nothing says the query is spent
    error = project_job(record)["error"]
    assert error["code"] == "no_candidate" and error["retryable"] is True
    assert "the account's max_examined" in error["message"] and "add tags" not in error["message"]

    # the next job goes on from where the capped one stopped
    record, pages = await run_job(stack, replay, query)
    cell = record.cells[0]
    assert (cell.state, cell.work_id) == ("submitted", deep.work_id(1000)), cell
    assert cell.candidate_report is not None and cell.candidate_report.fetched < 600
    record, pages = await run_job(stack, replay, query)
    assert record.cells[0].work_id == deep.work_id(1001) and pages <= 2


async def test_a_capped_scan_over_works_that_may_change_is_continued_by_the_next() -> None:
    # Every work is below min_bookmarks and young (not settled: it may still gain
    # bookmarks), so nothing is known for good; the capped scans still hand over.
    faults = Faults(deep=DeepSet(tag=TAG, count=3000, per_day=100, popular_ranks=frozenset({900})))
    assert faults.deep is not None
    server = await BackgroundServer(create_replay_app(faults)).start()
    spec = TargetSpec(
        target_id="t", query=TargetQuery(tags=[TAG]), filters=TargetFilters(min_bookmarks=500), scan_limit=1
    )

    async def known(ids: list[str]) -> dict[str, str]:
        return {}

    async def on_page(cp: ScanCheckpoint) -> None:
        return None

    async with httpx.AsyncClient(timeout=10) as http:
        client = PixivClient(http, refresh_token="r", api_url=server.url, auth_url=server.url)
        frontier = Frontier(sort="date_desc")
        seen: list[int] = []
        for _ in range(3):
            before = len(faults.of("search"))
            result = await scan(
                client, spec, scan_limit=1, known=known, on_page=on_page, max_examined=400, frontier=frontier
            )
            seen.append(len(faults.of("search")) - before)
            assert result.frontier is not None
            frontier = Frontier.model_validate(result.frontier)
            if result.candidates:
                break
            assert result.report.exhausted is False and result.report.fetched == 400
    await server.stop()
    assert [w.work_id for w in result.candidates] == [faults.deep.work_id(900)]
    assert result.report.fetched <= 130  # the third scan went on from the second's stop
    assert seen[1] <= 16 and seen[2] <= 6  # the head page, then the pages after the stop


async def test_lifting_a_refusal_or_an_unavailable_work_resets_the_frontiers(ledger_pool: asyncpg.Pool) -> None:
    # A frontier passes over works it saw refused or unavailable; once an operator clears
    # one, the targets must read their results from the top again to be offered it.
    target = f"t-{short_id()}"
    route = f"r-{short_id()}"
    saved = Frontier(sort="date_desc", known=Mark(work_id="5", create_date="2025-01-01T00:00:00+09:00")).model_dump(
        mode="json"
    )
    async with ledger_pool.acquire() as conn:
        await frontiers.save_frontier(conn, target, "fp", saved, job_id=None)
        assert await memory.clear_refusals(conn, route=route) == 0  # nothing cleared: kept
        assert await frontiers.load_frontier(conn, target, "fp") == saved
        await memory.remember_refusal(
            conn,
            route=route,
            work_type="illustration",
            work_id="5",
            reason="delivery_rejected",
            error="no",
            job_id="j",
            target_id=target,
        )
        assert await memory.clear_refusals(conn, route=route, work_id="5") == 1
        assert await frontiers.load_frontier(conn, target, "fp") is None

        await frontiers.save_frontier(conn, target, "fp", saved, job_id=None)
        await memory.remember_unavailable(
            conn, gate=f"g-{short_id()}", work_type="illustration", work_id="6", why="404", job_id="j", ttl_ms=60_000
        )
        assert await memory.clear_unavailable(conn, work_id="6") == 1
        assert await frontiers.load_frontier(conn, target, "fp") is None


@pytest.mark.parametrize(
    ("status", "verdict", "lasts"),
    [
        ("reserved", "in_flight", False),
        ("sending", "in_flight", False),
        ("delivered", "duplicate", True),
        ("duplicate", "duplicate", True),
        ("unknown", "duplicate", True),
    ],
)
async def test_a_work_another_open_job_holds_is_in_flight_a_verdict_that_does_not_last(
    ledger_pool: asyncpg.Pool, status: str, verdict: str, lasts: bool
) -> None:
    # Until 2026-12-05 a work only reserved (or being sent) by another open job was told
    # ``duplicate``, a lasting verdict: the frontier moved past it for good, and when that
    # job released it (its send failed, its deadline passed, it was cancelled) no later
    # job of the target read it again.
    route = f"r-{short_id()}"
    await seed_deliveries(
        ledger_pool, target_id="other", routes={route: "directory"}, work_ids=["7"], job_id=f"j-{short_id()}"
    )
    async with ledger_pool.acquire() as conn:
        await conn.execute("UPDATE delivery_intents SET status = $2 WHERE route = $1", route, status)
        known = await memory.known_works(conn, routes=[route], gate="g", work_type="illustration", work_ids=["7"])
        assert known == {"7": verdict}
        assert fr_lasting(known["7"], Work(work_id="7", create_date="2020-01-01T00:00:00+09:00"), "2025-01-01") is lasts


async def test_a_work_another_job_held_and_released_is_delivered_by_a_later_job(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    """Two jobs of one ``date_desc`` target at once: the first holds a work (reserved),
    the second finds every other work delivered. The first releases it (its send failed):
    a later job delivers it. Until 2026-12-05 the second job judged the held work
    ``duplicate`` (lasting), its frontier passed over it, and no later job read it again."""
    stack, deep, query = history_stack(make_stack, tmp_path, replay, sort="date_desc", count=60)
    held = deep.work_id(40)
    await seed(stack, deep, [r for r in range(deep.count) if r != 40])
    other = f"other-{short_id()}"
    (route,) = [r.name for r in stack.settings.route_refs(stack.settings.target("demo"))]  # type: ignore[arg-type]
    pool = await stack.ledger()
    await seed_deliveries(pool, target_id="demo", routes={route: "directory"}, work_ids=[held], job_id=other)
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE delivery_intents SET status = 'reserved', delivered_at = NULL WHERE job_id = $1", other
        )
    await stack.start_worker()

    second, _ = await run_job(stack, replay, query)
    cell = second.cells[0]
    assert (cell.state, cell.reason) == ("no_candidate", "duplicate_exhausted"), cell
    assert (
        cell.reason_message is not None
        and "59 already delivered, 1 being delivered by another job" in cell.reason_message
    )

    async with pool.acquire() as conn:  # the first job releases it
        await conn.execute("UPDATE delivery_intents SET status = 'released' WHERE job_id = $1", other)
    later, _ = await run_job(stack, replay, query)
    assert (later.cells[0].state, later.cells[0].work_id) == ("submitted", held), later.cells[0]


#: ``limit_*`` placeholders that hide a work from the *account* (its display settings, its
#: relation to the artist), and one never seen: none is the work's fault.
HIDDEN_FROM_THE_ACCOUNT = ["limit_sanity_level", "limit_unviewable", "limit_mypixiv", "limit_never_seen_before"]


@pytest.mark.parametrize("sort", ["date_desc", "popular_desc", "date_asc"])
@pytest.mark.parametrize("limit", HIDDEN_FROM_THE_ACCOUNT)
async def test_a_work_hidden_from_the_account_is_read_again_once_it_is_shown(sort: str, limit: str) -> None:
    """A scan meets a work as a placeholder the account's settings decide
    (``limit_sanity_level``: its "sensitive content" setting off), every other work
    delivered; the account's settings change and the app-api lists the work whole: the
    next scan of the target must find it. Until 2026-12-06 it was ``unavailable``, a
    lasting verdict: the frontier's known run passed it and no later scan read it again."""
    faults = Faults(deep=DeepSet(tag=TAG, count=90, per_day=100))
    assert faults.deep is not None
    hidden = faults.deep.work_id(40)
    faults.hidden_works = {hidden: limit}
    delivered = {faults.deep.work_id(r) for r in range(faults.deep.count)} - {hidden}
    server = await BackgroundServer(create_replay_app(faults)).start()
    spec = TargetSpec(target_id="t", query=TargetQuery(tags=[TAG], sort=sort), scan_limit=1)

    async def known(ids: list[str]) -> dict[str, str]:
        return {i: "duplicate" for i in ids if i in delivered}

    async def on_page(cp: ScanCheckpoint) -> None:
        return None

    try:
        async with httpx.AsyncClient(timeout=10) as http:
            client = PixivClient(http, refresh_token="r", api_url=server.url, auth_url=server.url)
            first = await scan(client, spec, scan_limit=1, known=known, on_page=on_page, frontier=Frontier(sort=sort))
            assert first.candidates == [] and first.frontier is not None

            del faults.hidden_works[hidden]  # the account's settings changed: listed whole
            second = await scan(
                client,
                spec,
                scan_limit=1,
                known=known,
                on_page=on_page,
                frontier=Frontier.model_validate(first.frontier),
            )
    finally:
        await server.stop()
    assert [w.work_id for w in second.candidates] == [hidden], second.report
    assert first.report.reasons.get("hidden") == 1, first.report.reasons  # told as such, not `unavailable`
    assert {"work_id": hidden, "reason": "unavailable"} in first.report.filtered  # the protocol's word


async def test_a_work_hidden_by_the_accounts_settings_is_delivered_by_a_job_after_they_change(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    """Two jobs of one ``date_desc`` target: the first meets a work as
    ``limit_sanity_level`` (the account's "sensitive content" setting off) and every other
    work delivered; the operator turns the setting on — the app-api shows the work whole —
    and the next job delivers it, nothing reset by hand. Until 2026-12-06 the first job's
    frontier passed the work for good (``unavailable``, lasting) and every later job ended
    ``duplicate_exhausted``."""
    stack, deep, query = history_stack(make_stack, tmp_path, replay, sort="date_desc", count=60)
    hidden = deep.work_id(40)
    replay.faults.hidden_works = {hidden: "limit_sanity_level"}
    await seed(stack, deep, [r for r in range(deep.count) if r != 40])
    await stack.start_worker()

    first, _ = await run_job(stack, replay, query)
    cell = first.cells[0]
    assert cell.state == "no_candidate", cell

    replay.faults.hidden_works.clear()  # the account's setting turned on
    later, _ = await run_job(stack, replay, query)
    assert (later.cells[0].state, later.cells[0].work_id) == ("submitted", hidden), later.cells[0]
    assert cell.reason_message is not None and "59 already delivered, 1 hidden from the source account" in (
        cell.reason_message
    ), cell.reason_message


class _Stopped(Exception):
    """The attempt of a scan ends after its first page (the worker stopped)."""


async def _resumed_then_shown(
    client: PixivClient,
    spec: TargetSpec,
    known: Any,
    checkpoint: dict[str, Any],
    frontier: Frontier,
    faults: Faults,
    hidden: str,
) -> list[str]:
    """Resume the walk ``checkpoint`` holds on this release (as ``PixivSource.restore``
    does, ``frontier`` the one the step read), then let the account see ``hidden`` (listed
    whole) and scan once more from the frontier the resumed walk left: the ids that scan
    offers as candidates."""

    async def on_page(cp: ScanCheckpoint) -> None:
        return None

    sort = spec.query.sort
    resumed = await scan(
        client,
        spec,
        scan_limit=1,
        known=known,
        on_page=on_page,
        checkpoint=ScanCheckpoint.model_validate(checkpoint),
        frontier=frontier,
    )
    assert resumed.frontier is not None
    del faults.hidden_works[hidden]  # the account may see it now: listed whole
    later = await scan(client, spec, scan_limit=1, known=known, on_page=on_page, frontier=read(resumed.frontier, sort))
    return [w.work_id for w in later.candidates]


@pytest.mark.parametrize("sort", ["date_desc", "popular_desc", "date_asc"])
async def test_a_scan_an_earlier_release_checkpointed_leaves_no_frontier_that_passes_a_hidden_work(sort: str) -> None:
    """A release before 2026-12-06 told a work hidden from the account ``unavailable``, a
    lasting verdict, and its frontier's known run passed it. A search attempt of that
    release read such a frontier, checkpointed its walk after a page and stopped (a rolling
    upgrade); the next attempt, on this release, resumes the walk from the checkpoint —
    its plan the old frontier, never read by :func:`~curaflow.sources.pixiv.frontier.read`.
    The frontier it leaves must not pass the work for good: once the account may see it,
    a later scan finds it. Until then the resumed walk's frontier carried ``hidden_apart``
    and was read as stored, and no later scan met the work again."""
    faults = Faults(deep=DeepSet(tag=TAG, count=150, per_day=100))
    assert faults.deep is not None
    hidden = faults.deep.work_id(140 if sort == "date_asc" else 40)  # among the first 90 the scan reads
    # Listed as limit_sanity_level; the earlier release told it `unavailable` (lasting), as
    # this one tells limit_unknown: the first scan plays that release's.
    faults.hidden_works = {hidden: "limit_unknown"}
    delivered = {faults.deep.work_id(r) for r in range(faults.deep.count)} - {hidden}
    server = await BackgroundServer(create_replay_app(faults)).start()
    spec = TargetSpec(target_id="t", query=TargetQuery(tags=[TAG], sort=sort), scan_limit=1)
    saved: list[dict[str, Any]] = []

    async def known(ids: list[str]) -> dict[str, str]:
        return {i: "duplicate" for i in ids if i in delivered}

    async def on_page(cp: ScanCheckpoint) -> None:
        return None

    async def stop_after_a_page(cp: ScanCheckpoint) -> None:
        saved.append(cp.model_dump(mode="json"))
        raise _Stopped

    def as_stored_before(frontier: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in frontier.items() if k != "hidden_apart"}

    try:
        async with httpx.AsyncClient(timeout=10) as http:
            client = PixivClient(http, refresh_token="r", api_url=server.url, auth_url=server.url)
            first = await scan(  # capped: the next scan goes on over more than one page
                client, spec, scan_limit=1, known=known, on_page=on_page, frontier=Frontier(sort=sort), max_examined=90
            )
            assert first.candidates == [] and first.frontier is not None
            assert first.frontier["tally"].get("unavailable") == 1, first.frontier  # its known run passed it
            old = as_stored_before(first.frontier)  # the earlier release's frontier, read as it read it
            faults.hidden_works[hidden] = "limit_sanity_level"  # what the listing said all along
            with pytest.raises(_Stopped):
                await scan(
                    client,
                    spec,
                    scan_limit=1,
                    known=known,
                    on_page=stop_after_a_page,
                    frontier=Frontier.model_validate(old),
                )
            checkpoint = saved[0]
            assert checkpoint["walk"] is not None
            checkpoint["walk"]["plan"] = as_stored_before(checkpoint["walk"]["plan"])  # its JSON then
            found = await _resumed_then_shown(client, spec, known, checkpoint, read(old, sort), faults, hidden)
    finally:
        await server.stop()
    assert found == [hidden]


@pytest.mark.parametrize("sort", ["date_desc", "popular_desc", "date_asc"])
async def test_a_fresh_walk_an_earlier_release_checkpointed_after_meeting_a_hidden_work_does_not_pass_it(
    sort: str,
) -> None:
    """An attempt of a release before 2026-12-06 began a fresh walk (no frontier stored),
    met a work hidden from the account on its first page — told ``unavailable``, lasting,
    and counted in the walk's run — checkpointed and stopped; this release resumes the walk.
    The frontier it leaves is built from the walk's own run, not its plan: it must not pass
    the work for good either, so a scan after the account may see it finds it."""
    faults = Faults(deep=DeepSet(tag=TAG, count=150, per_day=100))
    assert faults.deep is not None
    hidden = faults.deep.work_id(139 if sort == "date_asc" else 10)  # on the walk's first page
    faults.hidden_works = {hidden: "limit_unknown"}  # the earlier release's verdict: `unavailable`, lasting
    delivered = {faults.deep.work_id(r) for r in range(faults.deep.count)} - {hidden}
    server = await BackgroundServer(create_replay_app(faults)).start()
    spec = TargetSpec(target_id="t", query=TargetQuery(tags=[TAG], sort=sort), scan_limit=1)
    saved: list[dict[str, Any]] = []

    async def known(ids: list[str]) -> dict[str, str]:
        return {i: "duplicate" for i in ids if i in delivered}

    async def stop_after_a_page(cp: ScanCheckpoint) -> None:
        saved.append(cp.model_dump(mode="json"))
        raise _Stopped

    try:
        async with httpx.AsyncClient(timeout=10) as http:
            client = PixivClient(http, refresh_token="r", api_url=server.url, auth_url=server.url)
            with pytest.raises(_Stopped):
                await scan(
                    client, spec, scan_limit=1, known=known, on_page=stop_after_a_page, frontier=Frontier(sort=sort)
                )
            checkpoint = saved[0]
            assert checkpoint["walk"] is not None
            checkpoint["walk"]["plan"].pop("hidden_apart")  # its JSON then
            faults.hidden_works[hidden] = "limit_sanity_level"  # what the listing said all along
            found = await _resumed_then_shown(client, spec, known, checkpoint, read(None, sort), faults, hidden)
    finally:
        await server.stop()
    assert found == [hidden]

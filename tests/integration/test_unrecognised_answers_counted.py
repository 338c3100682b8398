"""``curaflow_source_unrecognised_answers_total`` counts each remembered hold once.

The ``fetch`` activity runs in the test process (``ActivityEnvironment``) with a worker's
real dependencies (the PostgreSQL ledger, the replay source over real HTTP, the artifact
store on disk); the replay's image host answers the bound work's image a bare ``403``
(not recognised as the work's: the work is held back for ``pixiv.unrecognised_hold_ms``).
The counter feeds ``CuraflowSourceAnswersUnrecognised``: an attempt whose transaction
failed, retried by Temporal, must not count the same hold twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from activities.fetch import FetchActivity
from curaflow.domain.messages import FetchInput, TargetSpec
from curaflow.domain.models import CandidateReport
from curaflow.ledger import cells
from curaflow.ledger import remembered as memory
from curaflow.sources.pixiv.client import parse_work
from curaflow.sources.pixiv.replay.data import recorded_works
from tests.conftest import StackFactory
from tests.deps_support import deps, opened_deps, unrecognised_count
from tests.fakes.replay import ReplayServer
from tests.support import Stack, ledger_job, run_as_job

pytestmark = pytest.mark.integration
__all__ = ["deps"]  # the module's fixture (tests.deps_support)


async def bound_work_refused(stack: Stack, opened: Any, replay: ReplayServer) -> tuple[str, TargetSpec, str]:
    """A job whose cell is bound to a work whose image answers ``403``: (job, target, work)."""
    settings = stack.settings
    target = TargetSpec(target_id="demo", routes=settings.route_refs(settings.targets[0]))
    job_id = await ledger_job(opened.pool, target, label="counted")
    work = parse_work(recorded_works()[0])
    replay.faults.forbidden_works = {work.work_id}
    async with opened.pool.acquire() as conn, conn.transaction():
        await cells.bind_work(conn, job_id, target, [work], CandidateReport())
    return job_id, target, work.work_id


async def test_a_retried_attempt_counts_the_hold_once(
    deps: tuple[Stack, Any], replay: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The transaction that remembers the hold fails (a lost connection, a deadlock); the
    activity is retried and meets the same answer again. The counter went up before the
    transaction: twice for one hold (2026-12-05); it counts only what was committed."""
    stack, opened = deps
    job_id, target, work_id = await bound_work_refused(stack, opened, replay)
    rebind_next = cells.rebind_next
    failures = [RuntimeError("the connection was lost mid-transaction")]

    async def fails_once(*args: Any, **kw: Any) -> Any:
        if failures:
            raise failures.pop()
        return await rebind_next(*args, **kw)

    monkeypatch.setattr(cells, "rebind_next", fails_once)
    before = unrecognised_count("gone")
    inp = FetchInput(job_id=job_id, target=target, heartbeat_interval_ms=1000)
    with pytest.raises(RuntimeError):
        await run_as_job(FetchActivity(opened).fetch, inp)
    assert unrecognised_count("gone") == before  # rolled back: nothing remembered, nothing counted
    update = await run_as_job(FetchActivity(opened).fetch, inp)  # Temporal's retry
    assert update.cell.work_id is None  # released: no candidate left
    assert unrecognised_count("gone") == before + 1
    [row] = [r for r in await memory.list_unavailable(opened.pool) if r.work_id == work_id and r.job_id == job_id]
    assert row.held


async def test_an_answer_a_live_verdict_outlasts_is_not_counted_as_a_hold(
    deps: tuple[Stack, Any], replay: ReplayServer
) -> None:
    """The work is already remembered unavailable for the account on an answer about the
    work itself (another job met its 404 meanwhile): the hold is dropped
    (:func:`~curaflow.ledger.remembered.remember_unavailable`), so it is not counted."""
    stack, opened = deps
    job_id, target, work_id = await bound_work_refused(stack, opened, replay)
    async with opened.pool.acquire() as conn:
        await memory.remember_unavailable(
            conn,
            gate=stack.settings.source_task_queue("default"),
            work_type="illustration",
            work_id=work_id,
            why="image HTTP 404",
            job_id="another",
            ttl_ms=600_000,
        )
    before = unrecognised_count("gone")
    update = await run_as_job(
        FetchActivity(opened).fetch, FetchInput(job_id=job_id, target=target, heartbeat_interval_ms=1000)
    )
    assert update.cell.work_id is None
    assert unrecognised_count("gone") == before
    rows = [r for r in await memory.list_unavailable(opened.pool) if r.work_id == work_id]
    assert [(r.job_id, r.held) for r in rows if r.gate == stack.settings.source_task_queue("default")] == [
        ("another", False)
    ]


async def test_with_holds_off_each_committed_answer_is_counted(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    """``pixiv.unrecognised_hold_ms = 0`` remembers nothing, yet the answers still say the
    source refuses curaflow: each is counted once its transaction committed, so the alert
    does not go blind when holds are off."""
    async with opened_deps(make_stack, tmp_path, replay, unrecognised_hold_ms=0) as (stack, opened):
        job_id, target, _ = await bound_work_refused(stack, opened, replay)
        before = unrecognised_count("gone")
        update = await run_as_job(
            FetchActivity(opened).fetch, FetchInput(job_id=job_id, target=target, heartbeat_interval_ms=1000)
        )
        assert update.cell.work_id is None
        assert unrecognised_count("gone") == before + 1
        assert not [r for r in await memory.list_unavailable(opened.pool) if r.job_id == job_id]

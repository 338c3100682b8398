"""An attempt ends what its step opened, whatever it finds to do.

The ``deliver`` and ``fetch`` activities run here in the test process
(``ActivityEnvironment``) with a worker's real dependencies (the PostgreSQL ledger, the
replay source, a directory route on disk). A step takes the cell's lease
(``lease_active`` on ``GET /jobs``: an attempt runs); an attempt that finds nothing to
do — the route already confirmed the work, the artifact is already fetched (a retried
attempt whose result was lost), or the cell ended — must release it, or the job reports
a live attempt until the lease lapses.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from activities.deliver import DeliverActivity
from activities.deps import ActivityDeps
from activities.fetch import FetchActivity
from curaflow.config.delivery import ROUTE_RATE_LIMIT_CAP_MS
from curaflow.domain.cells import CellStage, CellState
from curaflow.domain.messages import DeliverInput, FetchInput, TargetSpec
from curaflow.domain.models import CandidateReport, Work
from curaflow.ledger import cells, deliveries
from tests.conftest import StackFactory
from tests.deps_support import opened_deps
from tests.fakes.replay import ReplayServer
from tests.support import Stack, ledger_job, run_as_job, short_id

pytestmark = pytest.mark.integration


@pytest.fixture
async def deps(make_stack: StackFactory, tmp_path: Path, replay: ReplayServer) -> AsyncIterator[tuple[Stack, Any]]:
    async with opened_deps(make_stack, tmp_path, replay) as opened:
        yield opened


async def _delivered_cell(stack: Stack, deps: ActivityDeps, tmp_path: Path) -> DeliverInput:
    """A job whose one cell's work the route has already confirmed (cell ``submitted``)."""
    settings = stack.settings
    target = TargetSpec(target_id="demo", routes=settings.route_refs(settings.targets[0]))
    job_id = await ledger_job(deps.pool, target, label="deliver")
    work = Work(work_id=f"w{short_id()}")
    async with deps.pool.acquire() as conn, conn.transaction():
        await cells.bind_work(conn, job_id, target, [work], CandidateReport())
        await cells.artifact_ready(conn, job_id, "demo", work.work_id, {"work_id": work.work_id, "files": []})
        cell, *_ = await cells.start_step(
            conn, job_id, "demo", stage=CellStage.DELIVERING, attempt=1, lease_ms=60_000, owner="w1"
        )
        claim = await deliveries.claim_send(
            conn, job_id, "demo", target.routes[0].name, rate_limit_cap_ms=ROUTE_RATE_LIMIT_CAP_MS, opened=cell
        )
    async with deps.pool.acquire() as conn, conn.transaction():
        await deliveries.record_delivered(conn, job_id, "demo", claim.idempotency_key or "")
    return DeliverInput(job_id=job_id, target=target, route=target.routes[0], heartbeat_interval_ms=1000)


async def test_an_attempt_with_nothing_to_send_releases_the_cell(
    deps: tuple[Stack, ActivityDeps], tmp_path: Path
) -> None:
    stack, opened = deps
    inp = await _delivered_cell(stack, opened, tmp_path)
    # A retried attempt (the first one's result never reached the workflow).
    update = await run_as_job(DeliverActivity(opened).deliver, inp)
    assert update.cell.state == CellState.SUBMITTED
    assert update.delivery is not None and update.delivery.status == "delivered"
    lease = await opened.pool.fetchrow("SELECT lease_until, lease_owner FROM cells WHERE job_id = $1", inp.job_id)
    assert lease["lease_until"] is None and lease["lease_owner"] is None, dict(lease)


async def test_a_fetch_with_nothing_to_fetch_releases_the_cell(
    deps: tuple[Stack, ActivityDeps], tmp_path: Path
) -> None:
    stack, opened = deps
    inp = await _delivered_cell(stack, opened, tmp_path)
    # A fetch attempt retried after the work was fetched and delivered: nothing to do.
    update = await run_as_job(
        FetchActivity(opened).fetch, FetchInput(job_id=inp.job_id, target=inp.target, heartbeat_interval_ms=1000)
    )
    assert update.cell.state == CellState.SUBMITTED
    lease = await opened.pool.fetchrow("SELECT lease_until, lease_owner FROM cells WHERE job_id = $1", inp.job_id)
    assert lease["lease_until"] is None and lease["lease_owner"] is None, dict(lease)

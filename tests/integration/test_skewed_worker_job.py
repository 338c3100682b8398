"""A whole job run by a worker whose clock is five minutes off ends as on a true one.

``tests/integration/test_ledger_clock.py`` proves each ledger time's writer and judge on
a skewed host; here one-cell jobs run end to end — admitted by the API's admission, run
by the real activities and ``JobWorkflow`` on an in-process worker over the Pixiv
replay, delivered into a directory — with every wall-clock read of the worker's code
five minutes ahead or behind (:func:`~tests.integration.test_ledger_clock.host_clock`),
the admission unskewed, and reconciler ticks run on a host skewed the other way while
the job's send is held (a slow receiver). The job succeeds; its events come in order,
their times ordered where docs/DESIGN.md "Ledger times are the database's clock" puts
them on one clock (``job.accepted`` and ``job.started`` the database's, the worker's
later records its own); its read shows the lease while the send is out and none once it
ended; the reconciler leaves it alone while it runs.
Real Temporal, real PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from curaflow.api.jobs import read_job
from curaflow.domain.messages import RouteRef, TargetSpec
from curaflow.ledger import db, reconciler
from curaflow.routes.directory import DirectoryRoute
from curaflow.temporal.connection import connect_configured
from tests.conftest import StackFactory
from tests.fakes.replay import ReplayServer
from tests.integration.test_ledger_clock import SKEW_MS, host_clock
from tests.support import InProcessWorker, eventually, ledger_job, short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: The job's events from its admission to its end, in order (``job.progress`` and the
#: delivery's own events may come between them).
SPINE = ["job.accepted", "job.started", "job.succeeded"]


def _config(tmp_path: Path, replay: ReplayServer, route: str) -> dict[str, Any]:
    return {
        "pixiv": {"api_url": replay.url},
        "routes": {route: {"kind": "directory", "path": str(tmp_path / "out")}},
        "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [route]}],
    }


@pytest.mark.parametrize("worker_skew_ms", [SKEW_MS, -SKEW_MS], ids=["worker_ahead", "worker_behind"])
async def test_a_job_on_a_skewed_worker_succeeds_and_reads_right(
    make_stack: StackFactory,
    tmp_path: Path,
    replay: ReplayServer,
    monkeypatch: pytest.MonkeyPatch,
    worker_skew_ms: int,
) -> None:
    route = f"out-{short_id()}"
    stack = make_stack(_config(tmp_path, replay, route))
    pool = await stack.ledger()
    client = await connect_configured(stack.settings.temporal)

    # The receiver is slow: the send waits until the test lets it go.
    sending, release = asyncio.Event(), asyncio.Event()
    deliver = DirectoryRoute.deliver

    async def held(self: DirectoryRoute, request: Any) -> Any:
        sending.set()
        await release.wait()
        return await deliver(self, request)

    monkeypatch.setattr(DirectoryRoute, "deliver", held)

    # A job admitted with no workflow, past the start grace: rule 1 starts it, so a tick
    # that names it is a tick that held the reconciler's lock.
    witness = await ledger_job(
        pool, TargetSpec(target_id="demo", routes=[RouteRef(name=route, kind="directory")]), label="witness"
    )
    await pool.execute(
        "UPDATE jobs SET created_at = created_at - $2::bigint WHERE job_id = $1",
        witness,
        reconciler.START_GRACE_MS * 2,
    )

    before = await pool.fetchval(f"SELECT {db.DB_NOW_MS}")
    with host_clock(0):  # this test's calls: the API's host, on the true clock
        async with contextlib.AsyncExitStack() as worker:
            with host_clock(worker_skew_ms):  # the worker's tasks keep its clock
                await worker.enter_async_context(InProcessWorker(stack))
            job_id = await stack.admit(stack.task(query={"tags": ["オリジナル"]}))
            await asyncio.wait_for(sending.wait(), 60)

            with host_clock(-worker_skew_ms):  # the reconciler's host, skewed the other way
                running = await read_job(pool, job_id)  # type: ignore[arg-type]
                assert (running["status"], running["lease_active"]) == ("running", True), running
                started: list[str] = []

                async def start(each: str) -> None:
                    started.append(each)

                reports: list[reconciler.TickReport] = []

                async def led() -> bool:
                    reports.append(await reconciler.tick(pool, start, client))
                    return witness in started

                await eventually(led, timeout_s=30, interval_s=0.25, what="a reconciler tick that led")
                for report in reports:
                    touched = {field: ids for field, ids in vars(report).items() if job_id in ids}
                    assert touched == {}, (report, job_id)
                still = await read_job(pool, job_id)  # type: ignore[arg-type]
                assert (still["status"], still["lease_active"]) == ("running", True), still

            release.set()
            record = await stack.wait_terminal(job_id, 60)
    after = await pool.fetchval(f"SELECT {db.DB_NOW_MS}")

    assert record.cells[0].state == "submitted", record
    job = await read_job(pool, job_id)  # type: ignore[arg-type]
    assert job["status"] == "succeeded", job
    assert (job["lease_active"], job["lease_expires_at"]) == (False, None), job
    # On the database's clock: the job's creation (the admission's insert), its step's
    # start and heartbeats. ``updated_at`` is the last move's writer's (the worker's) clock.
    assert before <= job["created_at"] <= job["started_at"] <= after, (before, job, after)
    assert job["heartbeat_at"] is None or job["started_at"] <= job["heartbeat_at"] <= after, job

    events = [
        dict(r) for r in await pool.fetch("SELECT seq, type, at FROM job_events WHERE job_id = $1 ORDER BY seq", job_id)
    ]
    types = [e["type"] for e in events]
    assert [t for t in types if t in SPINE] == SPINE, types
    assert types[0] == "job.accepted" and types[-1] == "job.succeeded", types
    # job.accepted and job.started carry the creation's and the step's start's times (the
    # database's clock); the events after them are the worker's records, on its one clock:
    # in sequence, their times never go back.
    at = {e["type"]: e["at"] for e in events if e["type"] in SPINE}
    assert (at["job.accepted"], at["job.started"]) == (job["created_at"], job["started_at"]), (events, job)
    worker_times = [e["at"] for e in events[types.index("job.started") + 1 :]]
    assert worker_times and worker_times == sorted(worker_times), events
    # The outcome record's duration is the job's own (both its ends on the database's
    # clock): until 2026-12-06 its end was the worker's clock — 300 110 ms for a job of
    # 0.3 s on a worker five minutes ahead, 0 (a negative duration floored) behind.
    outcome = await pool.fetchval("SELECT record FROM outcomes WHERE job_id = $1", job_id)
    completed_at = await pool.fetchval("SELECT completed_at FROM jobs WHERE job_id = $1", job_id)
    assert job["started_at"] <= completed_at <= after, (job, completed_at, after)
    assert 0 < outcome["duration_ms"] <= after - before, (outcome["duration_ms"], before, after)

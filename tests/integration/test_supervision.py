"""Background loops are supervised: they survive any exception, or the process exits non-zero.

Faults are real: a PostgreSQL of the test's own (:class:`curaflow.devstack.postgres.RestartablePostgres`)
stopped with ``pg_ctl -m fast stop`` and started again, a LISTEN connection killed with
``pg_terminate_backend``, real worker processes. One fault is injected in code: a tick
of the reconciler raising an exception type nothing expects (a bug), because no real
fault produces one on demand.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from prometheus_client import REGISTRY

from curaflow.devstack.postgres import RestartablePostgres
from curaflow.domain.messages import JobInput, TargetSpec
from curaflow.ledger import reconciler
from curaflow.ledger.db import now_ms
from curaflow.ledger.events import append_event
from curaflow.ledger.jobs import NewJob, insert_job
from curaflow.ledger.reconciler import ticks as reconciler_ticks
from tests.conftest import StackFactory
from tests.fakes.replay import ReplayServer
from tests.services import free_port, start_api_process
from tests.support import Stack, eventually, short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def own_pg(tmp_path: Path) -> Iterator[RestartablePostgres]:
    """A PostgreSQL server only this test uses (so it may stop it)."""
    pg = RestartablePostgres(tmp_path / "pg" / "data", cleanup_mode="delete")
    pg.start()
    try:
        yield pg
    finally:
        pg.close()


def config(tmp_path: Path, replay: ReplayServer, **extra: Any) -> dict[str, Any]:
    out = f"out-{short_id()}"
    base: dict[str, Any] = {
        "pixiv": {"api_url": replay.url},
        "routes": {out: {"kind": "directory", "path": str(tmp_path / "out")}},
        "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [out]}],
    }
    base.update(extra)
    return base


async def fresh_ledger(stack: Stack) -> asyncpg.Pool:
    """The test's own pool, reopened (its connections died with the server)."""
    if stack.pool is not None:
        stack.pool.terminate()
        stack.pool = None
    return await stack.ledger()


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of one sample in a Prometheus text exposition."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return None


async def test_a_worker_serves_new_jobs_after_a_postgresql_restart(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer, own_pg: RestartablePostgres
) -> None:
    # The repro: one worker on a PostgreSQL that restarts (fast stop, 5 s, start);
    # a job submitted afterwards must succeed (it used to stay queued: the source queue's
    # owner had died on asyncpg's InterfaceError and nobody noticed).
    metrics_port = free_port()
    stack = make_stack(
        config(
            tmp_path,
            replay,
            database={"url": own_pg.url, "pool_max_size": 4},
            budgets={"heartbeat_interval_ms": 1000, "test_only_floor_ms": 1000, "queued_timeout_ms": 45_000},
            observability={"log_level": "INFO", "metrics_port": metrics_port},
        )
    )
    worker = await stack.start_worker()
    first = await stack.admit(stack.task(query={"tags": ["オリジナル"]}))
    assert (await stack.wait_terminal(first, 60)).cells[0].state == "submitted"
    ready_url = f"http://127.0.0.1:{metrics_port}/ready"
    async with httpx.AsyncClient(timeout=10) as http:
        ready = await http.get(ready_url)
        assert ready.status_code == 200, ready.text
        checks = ready.json()["checks"]
        assert checks["loop:source_queue:default"]["ok"] is True
        assert checks["loop:source_queue:default"]["detail"].startswith("owning (lease ")
        assert checks[f"loop:temporal_worker:{stack.task_queue}"]["ok"] is True
        assert {"ledger", "temporal", "loop:reconciler", "loop:push_sweeper", "loop:temporal"} <= set(checks)

        await asyncio.to_thread(own_pg.stop, "fast")

        async def noticed() -> httpx.Response | None:
            """/ready once it says 503 and the source queue's loop has failed on the outage
            (PostgreSQL stays down until then: the loss must be seen, not slept through)."""
            answer = await http.get(ready_url)
            text = (await http.get(f"http://127.0.0.1:{metrics_port}/metrics")).text
            failed = sample(text, "curaflow_background_errors_total", loop="source_queue:default")
            return answer if answer.status_code == 503 and failed else None

        down = await eventually(noticed, timeout_s=60, what="/ready 503, the loss counted")  # alive, says what is wrong
        assert (await http.get(f"http://127.0.0.1:{metrics_port}/health")).status_code == 200
        await asyncio.to_thread(own_pg.start)
        await fresh_ledger(stack)
        assert down.status_code == 503, down.text
        assert down.json()["checks"]["ledger"]["ok"] is False
        assert down.json()["checks"]["temporal"]["ok"] is True

        async def ready_again() -> bool:
            return (await http.get(ready_url)).status_code == 200

        await eventually(ready_again, timeout_s=30, what="/ready 200 after the restart")

    second = await stack.admit(stack.task(query={"tags": ["オリジナル"]}))
    record = await stack.wait_terminal(second, 90)

    assert (record.cells[0].state, record.cells[0].reason) == ("submitted", None), stack.worker_log()[-3000:]
    assert worker.alive()
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"http://127.0.0.1:{metrics_port}/metrics")).text
    errors = sample(text, "curaflow_background_errors_total", loop="source_queue:default")
    assert errors is not None and errors >= 1  # the loss was seen and counted, not silent
    assert "background.loop_failed" in stack.worker_log()


async def test_a_worker_whose_loop_cannot_recover_exits_non_zero(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer, own_pg: RestartablePostgres
) -> None:
    stack = make_stack(
        config(
            tmp_path,
            replay,
            database={"url": own_pg.url, "pool_max_size": 4},
            supervision={"fatal_after_ms": 3000, "max_backoff_ms": 500},
        )
    )
    worker = await stack.start_worker()
    await asyncio.to_thread(own_pg.stop, "fast")  # and it stays down

    assert worker.process is not None
    code = await asyncio.to_thread(worker.process.wait, 60)

    assert code == 3, stack.worker_log()[-3000:]
    assert "background.loop_unrecoverable" in stack.worker_log()


async def test_an_api_whose_loop_cannot_recover_exits_non_zero(
    tmp_path: Path, temporal_address: str, own_pg: RestartablePostgres
) -> None:
    api = await start_api_process(
        tmp_path,
        temporal_address=temporal_address,
        database_url=own_pg.url,
        token="t",
        config={"supervision": {"fatal_after_ms": 3000, "max_backoff_ms": 500}, "reconcile_interval_ms": 200},
    )
    try:
        await asyncio.to_thread(own_pg.stop, "fast")  # and it stays down
        code = await asyncio.to_thread(api.process.wait, 60)
        text = api.log.read_text(errors="replace")
    finally:
        api.stop()

    assert code == 3, text[-3000:]
    assert "background.loop_unrecoverable" in text


async def test_the_reconciler_loop_survives_an_exception_of_any_type(
    ledger_pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bug (KeyError) and an asyncpg InterfaceError escape two ticks; the loop logs and
    # counts them and goes on: the third tick starts the unstarted job.
    real_tick = reconciler.tick
    calls = 0

    async def flaky_tick(pool: asyncpg.Pool, start: Any, *args: Any, **kw: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise KeyError("a bug in a tick")
        if calls == 2:
            raise asyncpg.InterfaceError("cannot perform operation: connection is closed")
        return await real_tick(pool, start, *args, **kw)

    monkeypatch.setattr(reconciler_ticks, "tick", flaky_tick)  # the module whose run_forever calls it
    job_id = f"sup-{short_id()}@manual-x"
    created = now_ms() - 60_000  # admitted a minute ago, its workflow never started
    inp = JobInput(
        job_id=job_id, plan_id="demo", created_at_ms=created, deadline_at_ms=created + 3_600_000,
        targets=[TargetSpec(target_id="demo")],
    )  # fmt: skip
    async with ledger_pool.acquire() as conn:
        await insert_job(conn, NewJob(job_input=inp))
    started: list[str] = []

    async def start(jid: str) -> None:
        started.append(jid)

    def errors() -> float:
        return REGISTRY.get_sample_value("curaflow_background_errors_total", {"loop": "reconciler"}) or 0.0

    before = errors()
    stop = asyncio.Event()
    loop = asyncio.create_task(reconciler.run_forever(ledger_pool, start, 0.2, stop))
    try:
        await eventually(
            lambda: job_id in started or loop.done(), timeout_s=20, what="the job started by the reconciler"
        )
        assert job_id in started, loop
        assert errors() - before == 2
    finally:
        stop.set()
        await asyncio.wait_for(loop, 10)


async def test_a_killed_listen_connection_is_replaced_and_long_polls_still_wake(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    stack = make_stack(config(tmp_path, replay))
    http = await stack.start_api()
    job = (await http.post("/jobs", json=stack.task(query={"tags": ["オリジナル"]}))).json()["job"]
    events = (await http.get(f"/jobs/{job['job_id']}/events")).json()["events"]
    pool = await stack.ledger()
    listeners = "SELECT pid FROM pg_stat_activity WHERE query ILIKE 'LISTEN %' AND pid <> pg_backend_pid()"

    def errors() -> float:
        return REGISTRY.get_sample_value("curaflow_background_errors_total", {"loop": "listen"}) or 0.0

    before = errors()
    for _ in range(2):  # twice: a replacement connection is supervised too
        old = {r["pid"] for r in await pool.fetch(listeners)}
        assert old
        await pool.execute(f"SELECT pg_terminate_backend(pid) FROM ({listeners}) l")

        async def replaced(old: set[int] = old) -> bool:
            now = {r["pid"] for r in await pool.fetch(listeners)}
            return bool(now - old)

        await eventually(replaced, timeout_s=20, what="a new LISTEN connection")
    assert errors() - before >= 2

    poll = asyncio.create_task(
        http.get(f"/jobs/{job['job_id']}/events", params={"after": events[-1]["event_id"], "wait_ms": 20000})
    )
    await asyncio.sleep(1.0)
    assert not poll.done()
    async with pool.acquire() as conn, conn.transaction():
        await append_event(conn, job["job_id"], "job.progress", {"stage": "searching"})
    woke = time.monotonic()
    page = (await asyncio.wait_for(poll, 20)).json()

    assert [e["type"] for e in page["events"]] == ["job.progress"]
    assert time.monotonic() - woke < 3  # woken by NOTIFY, not by the 20 s timeout


async def test_a_temporal_worker_that_stops_polling_fails_the_worker_process(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The SDK retries polls through a Temporal outage; Worker.run ends only on a fatal
    # error (a namespace that went away, a poller that crashed). No real fault produces
    # one on demand, so the main queue's Worker.run is made to end that way.
    from curaflow.observability.supervision import LoopFailed
    from curaflow.process import worker as worker_module

    stack = make_stack(config(tmp_path, replay))
    build = worker_module.build_workers

    def failing_build(*args: Any) -> Any:
        workers = build(*args)

        async def run() -> None:
            await asyncio.sleep(1.0)
            raise RuntimeError("Worker failed: fatal poll error")

        monkeypatch.setattr(workers[0], "run", run)
        return workers

    monkeypatch.setattr(worker_module, "build_workers", failing_build)
    stop = asyncio.Event()
    started = time.monotonic()

    with pytest.raises(LoopFailed) as failed:
        await asyncio.wait_for(worker_module.run_worker(stack.settings, stop), 60)

    assert f"temporal_worker:{stack.task_queue}" in str(failed.value)
    assert "fatal poll error" in str(failed.value)
    assert time.monotonic() - started < 30


async def test_a_worker_rides_out_a_temporal_outage_and_says_so(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    # A Temporal of the test's own (persistent, restarted on the same port): while it is
    # down the worker stays up, /ready says which check fails, and it serves jobs again
    # once Temporal is back.
    from curaflow.devstack.temporal import TemporalDevServer

    db, log = tmp_path / "temporal" / "t.db", tmp_path / "temporal.log"
    server = await TemporalDevServer(db_file=db, log_file=log).start()
    metrics_port = free_port()
    try:
        stack = make_stack(
            config(tmp_path, replay, temporal={"address": server.address}, observability={"metrics_port": metrics_port})
        )
        worker = await stack.start_worker()
        first = await stack.admit(stack.task(query={"tags": ["オリジナル"]}))
        assert (await stack.wait_terminal(first, 60)).cells[0].state == "submitted"
        ready_url = f"http://127.0.0.1:{metrics_port}/ready"
        async with httpx.AsyncClient(timeout=10) as http:
            assert (await http.get(ready_url)).status_code == 200

            await asyncio.to_thread(server.stop)

            async def temporal_down() -> dict[str, Any] | None:
                answer = await http.get(ready_url)
                body: dict[str, Any] = answer.json()
                checks = body["checks"]
                if answer.status_code == 503 and not checks["temporal"]["ok"] and not checks["loop:temporal"]["ok"]:
                    return body
                return None

            body = await eventually(temporal_down, timeout_s=30, what="/ready names Temporal")
            assert body["checks"]["ledger"]["ok"] is True
            assert worker.alive()

            server = await TemporalDevServer(db_file=db, log_file=log, port=server.port).start()

            async def ready_again() -> bool:
                return (await http.get(ready_url)).status_code == 200

            await eventually(ready_again, timeout_s=60, what="/ready 200 once Temporal is back")
        second = await stack.admit(stack.task(query={"tags": ["オリジナル"]}))
        assert (await stack.wait_terminal(second, 90)).cells[0].state == "submitted"
        assert worker.alive()
    finally:
        await asyncio.to_thread(server.stop)


async def test_a_worker_process_settles_its_heap_once_started_and_serves_jobs(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As the process (its own SIGINT/SIGTERM), the worker freezes its start-up heap and makes
    # young collections rarer (curaflow.process.heap) before it serves; on a caller's loop
    # (a stop event given: a test, an embedding program) it leaves the caller's collector alone.
    import gc
    import os
    import signal

    from curaflow.process import worker as worker_module
    from curaflow.process.heap import THRESHOLDS, TUNED

    stack = make_stack(config(tmp_path, replay))
    # As the process, a fatal failure would end it with os._exit: here that would end pytest.
    monkeypatch.setattr(worker_module, "arm_hard_exit", lambda: None)
    run_worker = worker_module.run_worker
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    threshold, frozen = gc.get_threshold(), gc.get_freeze_count()

    def up() -> bool:
        return REGISTRY.get_sample_value("curaflow_worker_up") == 1.0

    stop = asyncio.Event()
    embedded = asyncio.create_task(run_worker(stack.settings, stop))
    try:
        await eventually(up, timeout_s=30, what="the embedded worker up")
        assert (gc.get_threshold(), gc.get_freeze_count()) == (threshold, frozen)
    finally:
        stop.set()
        await embedded

    process = asyncio.create_task(run_worker(stack.settings))
    try:
        await eventually(up, timeout_s=30, what="the worker up")
        assert gc.get_freeze_count() > frozen
        assert gc.get_threshold() == (THRESHOLDS if TUNED else threshold)
        http = await stack.start_api()
        resp = await http.post("/jobs", json=stack.task(target_id="demo"))
        assert resp.status_code == 202, resp.text
        record = await stack.wait_terminal(resp.json()["job"]["job_id"])
        assert record.business_status == "success"
    finally:
        if not process.done():  # its handler is installed: a graceful stop (else: its own error below)
            os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(process, 60)
        gc.unfreeze()
        gc.set_threshold(*threshold)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)

"""Alertable gauges from the ledger: real PostgreSQL, real processes.

The value test runs on a database of its own (the session's ledger is shared by every
test), so each gauge's exact value is known. The process tests check what the API, a
worker and ``curaflow dev``'s workers export on their ``/metrics``.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from curaflow.config import load_settings
from curaflow.devstack.ports import free_port
from curaflow.domain.messages import Budgets, JobInput, TargetSpec
from curaflow.ledger.db import create_pool, migrate, now_ms
from curaflow.ledger.events import append_event
from curaflow.ledger.gauges import LedgerGauges, refresh
from curaflow.ledger.jobs import NewJob, insert_job
from tests.conftest import StackFactory
from tests.fakes.replay import ReplayServer
from tests.fakes.webhook import Reply, WebhookReceiver
from tests.support import eventually, short_id, whsec
from tests.zygote import curaflow_process

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MIN = 60_000
HOUR = 60 * MIN


@pytest.fixture
async def own_ledger(database_url: str, ledger_pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Pool]:
    """A fresh, migrated database on the session's PostgreSQL, dropped afterwards."""
    name = f"gauges_{short_id()}"
    await ledger_pool.execute(f"CREATE DATABASE {name}")
    parts = urlsplit(database_url)
    pool = await create_pool(urlunsplit(parts._replace(path=f"/{name}")), min_size=1, max_size=2)
    await migrate(pool)
    try:
        yield pool
    finally:
        await pool.close()
        await ledger_pool.execute(f"DROP DATABASE {name} WITH (FORCE)")


async def add_job(
    pool: asyncpg.Pool,
    key: str,
    *,
    age_ms: int,
    deadline_in_ms: int = 7 * 24 * HOUR,
    queues: dict[str, str] | None = None,
    **columns: Any,
) -> str:
    now = now_ms()
    inp = JobInput(
        job_id=f"demo@manual-{key}",
        plan_id="demo",
        created_at_ms=now - age_ms,
        deadline_at_ms=now + deadline_in_ms,
        targets=[TargetSpec(target_id="demo")],
        budgets=Budgets(queued_timeout_ms=30 * MIN, stall_timeout_ms=15 * MIN),
        source_task_queues=queues or {},
    )
    async with pool.acquire() as conn:
        await insert_job(conn, NewJob(job_input=inp, idempotency_key=key))
        cell = {k: v for k, v in columns.items() if k in ("state", "heartbeat_at")}
        job = {k: v for k, v in columns.items() if k in ("started_at", "completed_at")}
        if cell:
            sets = ", ".join(f"{k} = ${i + 2}" for i, k in enumerate(cell))
            await conn.execute(
                f"UPDATE cells SET {sets}, updated_at = $1 WHERE job_id = '{inp.job_id}'", now - age_ms, *cell.values()
            )
        if job:
            sets = ", ".join(f"{k} = ${i + 2}" for i, k in enumerate(job))
            await conn.execute(f"UPDATE jobs SET {sets} WHERE job_id = $1", inp.job_id, *job.values())
    return inp.job_id


async def test_gauges_report_open_stuck_dead_letters_cooldowns_and_deliveries(own_ledger: asyncpg.Pool) -> None:
    pool = own_ledger
    now = now_ms()
    await add_job(pool, "fresh", age_ms=1_000)  # queued, fine
    await add_job(pool, "never-started", age_ms=2 * HOUR)  # queued past its 30 min budget
    await add_job(
        pool,
        "silent",
        age_ms=HOUR,
        queues={"default": "q-unserved"},  # no live worker serves it
        state="selected",
        started_at=now - HOUR,
        heartbeat_at=now - 40 * MIN,
    )
    await add_job(pool, "busy", age_ms=HOUR, state="selected", started_at=now - HOUR, heartbeat_at=now - 5_000)
    # Silent as long, but its account's source queue has a live owner: its step is queued
    # behind other jobs there (a stall budget counts only time a step was held).
    await add_job(
        pool,
        "queued-behind",
        age_ms=HOUR,
        queues={"default": "q-served"},
        state="pending",
        started_at=now - HOUR,
        heartbeat_at=now - 40 * MIN,
    )
    owner = await pool.acquire()  # the owner's connection: its backend is its sign of life
    await owner.execute(
        """INSERT INTO source_queue_leases (task_queue, owner, token, expires_at, renewed_at, backend_pid)
           VALUES ('q-served', 'w', 1, $1, $2, pg_backend_pid())""",
        now + HOUR,
        now,
    )
    await add_job(pool, "overdue", age_ms=40 * MIN, deadline_in_ms=-10 * MIN, state="selected", started_at=now)
    done = await add_job(pool, "done", age_ms=3 * HOUR, state="submitted", started_at=now - HOUR, completed_at=now)
    async with pool.acquire() as conn, conn.transaction():
        for n, status in enumerate(("dead", "dead", "pending", "delivered")):
            seq = await append_event(conn, done, "job.progress", {})
            await conn.execute(
                """INSERT INTO event_pushes (job_id, seq, event_id, url, body, status, created_at, updated_at)
                   VALUES ($1, $2, $3, 'http://cb', '{}', $4, $5, $5)""",
                done,
                seq,
                f"evt-{n}",
                status,
                now,
            )
        await conn.execute(
            "INSERT INTO source_gates (gate, cooldown_until, paused_until) VALUES ('curaflow-source-default', $1, $2)",
            now + 90_000,
            now + HOUR,
        )
        for n, (status, age) in enumerate(
            [
                ("delivered", 0),
                ("delivered", 0),
                ("failed", 0),
                ("unknown", 0),
                ("delivered", 2 * 24 * HOUR),
                ("reserved", 0),
            ]
        ):
            await conn.execute(
                """INSERT INTO delivery_intents (idempotency_key, route, route_kind, work_type, work_id, job_id,
                       target_id, status, created_at, updated_at)
                   VALUES ($1, 'out', 'directory', 'illustration', $2, $3, 'demo', $4, $5, $5)""",
                f"k-{n}",
                str(1000 + n),
                done,
                status,
                now - age,
            )

    # the failure alerts' facts (curaflow.ledger.gauges: what any process reports of them)
    failed = await add_job(pool, "failed", age_ms=HOUR, state="failed", started_at=now - HOUR)
    async with pool.acquire() as conn:
        await conn.execute(
            """UPDATE jobs SET business_status = 'failed', completed_at = $2 WHERE job_id = $1""", failed, now - MIN
        )
        await conn.execute(
            """UPDATE cells SET terminal_reason_code = 'auth_failed', completed_at = $2 WHERE job_id = $1""",
            failed,
            now - 2 * MIN,
        )
        await conn.execute(
            "INSERT INTO route_gates (route, paused_until, pauses) VALUES ('out', $1, 1), ('resumed', 0, 2)", now + HOUR
        )
        for n, (plan, why, age) in enumerate(
            [
                ("nightly", "skipped_overlap", MIN),
                ("nightly", "skipped_overlap", 3 * MIN),
                ("stray", "configuration_error", 2 * MIN),  # no plan of the configuration's
                ("nightly", "skipped_outage", 3 * 24 * HOUR),  # before the lookback
            ]
        ):
            await conn.execute(
                "INSERT INTO schedule_misses (schedule_id, nominal_at, why, recorded_at) VALUES ($1, $2, $3, $4)",
                plan,
                n,
                why,
                now - age,
            )

    gauges = LedgerGauges()
    settings = load_settings(
        schedules=[{"id": "nightly", "cron": ["0 3 * * *"], "target_ids": []}]
    )  # one account (default), one route (out), one plan
    try:
        snap = await refresh(gauges, pool, settings)
    finally:
        await pool.release(owner)

    assert snap.open_jobs == {"queued": 3, "running": 3}
    assert 2 * 3600 - 5 <= snap.oldest_open_age_s <= 2 * 3600 + 60
    assert snap.stuck == {"past_deadline": 1, "queued_too_long": 1, "no_heartbeat": 1}
    assert (snap.dead_letters, snap.pushes_pending) == (2, 1)
    assert 80 <= snap.cooldown_s["default"] <= 90
    assert snap.deliveries == {
        ("out", "delivered"): 2,
        ("out", "duplicate"): 0,
        ("out", "failed"): 1,
        ("out", "unknown"): 1,
    }
    assert snap.jobs_failed_last_s == (now - MIN) / 1000
    assert snap.cells_failed_last_s == {"auth_failed": (now - 2 * MIN) / 1000}
    assert snap.deliveries_last_s == {(route, status): now / 1000 for route, status in snap.deliveries_last_s}
    assert set(snap.deliveries_last_s) == {("out", s) for s in ("delivered", "failed", "unknown")}
    assert snap.routes_paused_until_s == {"out": (now + HOUR) / 1000}  # a resumed route: none
    assert snap.accounts_paused_until_s == {"default": (now + HOUR) / 1000}  # restricted, paused for the hour
    assert snap.schedule_missed_last_s == {
        ("nightly", "skipped_overlap"): (now - MIN) / 1000,
        ("(unconfigured)", "configuration_error"): (now - 2 * MIN) / 1000,
    }

    registry = CollectorRegistry()
    registry.register(gauges)
    text = generate_latest(registry).decode()
    assert 'curaflow_jobs_open{status="running"} 3.0' in text
    assert 'curaflow_jobs_stuck{why="no_heartbeat"} 1.0' in text
    assert "curaflow_callback_dead_letters 2.0" in text
    assert re.search(r'curaflow_source_cooldown_seconds\{account="default"\} (8\d|90)\.', text)
    assert 'curaflow_deliveries{route="out",status="failed"} 1.0' in text
    assert re.search(r"curaflow_ledger_gauges_age_seconds \d", text)
    assert re.search(r"curaflow_jobs_failed_last_seconds \d\.\d+e\+09", text)
    assert re.search(r'curaflow_route_paused_until_seconds\{route="out"\} \d', text)
    assert re.search(r'curaflow_source_paused_until_seconds\{account="default"\} \d', text)


async def scrape(url: str, needle: str, timeout_s: float = 30.0) -> str:
    """The exposition at ``url`` once one of its samples starts with ``needle`` (never a
    ``# HELP`` / ``# TYPE`` line: a family is described before it has a sample — the ledger
    gauges' before their first reading)."""
    async with httpx.AsyncClient(timeout=5) as http:
        seen = [""]

        async def scraped() -> str | None:
            seen[0] = (await http.get(url)).text
            return seen[0] if any(line.startswith(needle) for line in seen[0].splitlines()) else None

        return await eventually(
            scraped,
            timeout_s=timeout_s,
            interval_s=0.2,
            what=lambda: f"{needle!r} in {url}:\n{seen[0][-3000:]}",
            ignore=(httpx.HTTPError,),
        )


async def test_the_api_exports_the_gauges_and_no_worker_up_and_a_worker_exports_both(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    port = free_port()
    out = f"out-{short_id()}"
    stack = make_stack(
        {
            "observability": {"metrics_port": port, "metrics_host": "127.0.0.1", "ledger_gauges_interval_ms": 500},
            "routes": {out: {"kind": "directory", "path": str(tmp_path / "delivered")}},
            "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [out]}],
        }
    )
    # The API in its own process: this test process's registry may hold a worker's gauges
    # from earlier in-process workers.
    api_port = free_port()
    env = {**stack.worker_env(), "CURAFLOW_API_TOKEN": "t"}
    api = curaflow_process(["api", "--port", str(api_port)], env=env, cwd=tmp_path, log=tmp_path / "api.log")
    try:
        api_text = await scrape(f"http://127.0.0.1:{api_port}/metrics", "curaflow_jobs_open{", timeout_s=60)
    finally:
        api.terminate()
        api.wait(10)
    assert "curaflow_worker_up" not in api_text  # the API is no worker: it never says 0
    assert "curaflow_oldest_open_job_age_seconds" in api_text

    await stack.start_worker()
    worker_text = await scrape(f"http://127.0.0.1:{port}/metrics", "curaflow_jobs_stuck{")
    assert "curaflow_worker_up 1.0" in worker_text
    assert f'curaflow_deliveries{{route="{out}",status="delivered"}}' in worker_text


def sample(text: str, series: str) -> float | None:
    """The value of one exposition line (``name{labels}`` exactly as written), or None."""
    found = re.search(rf"^{re.escape(series)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else None


async def test_a_failure_counted_by_a_worker_killed_before_its_scrape_is_reported_by_the_ledger(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer, webhook: WebhookReceiver
) -> None:
    """A worker ends a job failed and is killed (SIGKILL) before anything scraped it: its
    count of the failure dies with it — the restarted worker's counter starts at 0, which is
    all ``CuraflowJobsFailed`` used to read — while the ledger gauges of the restarted worker
    report the failure (deploy/prometheus/alerts.yml reads them)."""
    port = free_port()
    hook = f"hook-{short_id()}"
    stack = make_stack(
        {
            "pixiv": {"api_url": replay.url},
            "observability": {"metrics_port": port, "metrics_host": "127.0.0.1", "ledger_gauges_interval_ms": 500},
            "routes": {hook: {"kind": "webhook", "url": webhook.url + "/refuse", "secret": whsec()}},
            "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [hook]}],
        }
    )
    webhook.script["/refuse"] = [Reply(400, {"error": "bad"})]  # the route refuses: the cell fails
    worker = await stack.start_worker()
    job_id = await stack.admit(stack.task(query={"tags": ["オリジナル"]}))
    record = await stack.wait_terminal(job_id, 60)
    worker.kill()  # nothing scraped it: its counters are gone
    assert record.business_status == "failed"
    pool = await stack.ledger()
    completed_at = await pool.fetchval("SELECT completed_at FROM jobs WHERE job_id = $1", job_id)

    await stack.start_worker()  # the same metrics port
    text = await scrape(f"http://127.0.0.1:{port}/metrics", "curaflow_jobs_failed_last_seconds ")
    failed = sample(text, "curaflow_jobs_failed_last_seconds")
    assert failed is not None and failed >= completed_at / 1000  # this failure, or a later one
    # what the counter alert read: the restarted process never counted it
    counted = [
        sample(text, f'curaflow_jobs_terminal_total{{business_status="failed",status="{s}",trigger="{t}"}}')
        for s in ("failed", "expired")
        for t in ("protocol", "temporal", "cli", "schedule")
    ]
    assert counted == [0.0] * 8, counted


async def test_dev_stack_workers_expose_their_metrics(tmp_path: Path) -> None:
    from curaflow.devstack.stack import EmbeddedStack, read_stack_info

    settings = load_settings(state_dir=str(tmp_path / "state"))
    async with EmbeddedStack(settings, workers=2, persist=False, publish=True, worker_metrics=True) as stack:
        urls = stack.worker_metrics_urls
        assert len(urls) == 2 and len(set(urls)) == 2
        for url in urls:
            await scrape(url, "curaflow_worker_up 1.0", timeout_s=60)
        info = read_stack_info(settings.state_dir)
        assert info is not None and info.worker_metrics_urls == urls

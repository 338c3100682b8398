"""Retention frees every host: a hundred simulated days of hourly jobs on three hosts with no shared disk.

Each host (worker) has an artifacts directory of its own; the source-queue owner — the
host that fetches — changes every 10 days. Every simulated day each host runs its
``retention`` pass (:func:`curaflow.ledger.retention.prune_tick`, 10 days) with the
simulation's clock; on day 55 a ``curaflow prune`` also runs from a fourth machine. Ten
windows and ten changes of owner (each host fetches three or four terms, idle between
them): what a year of 30-day windows shows, at a quarter of the jobs. The
disk of every host stays flat at the window's size, a host that stopped fetching ends
with nothing, and the prune run elsewhere reports what is pending where. Real PostgreSQL
(a database of its own), real files.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from curaflow.artifacts import ArtifactStore
from curaflow.ledger import holdings
from curaflow.ledger.db import create_pool, migrate
from curaflow.ledger.retention import DAY_MS, prune, prune_tick
from tests.support import short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HOUR_MS = 3_600_000
DAYS = 100
RETENTION_DAYS = 10
OWNER_TERM_DAYS = 10
FILE_BYTES = 10_000
#: The simulation's epoch: 2024-01-01 00:00 UTC (ms).
START_MS = 1_704_067_200_000


@pytest.fixture
async def own_db(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    """A database of its own on the session's server (the prune is global to a ledger)."""
    name = f"sim_{short_id()}"
    admin = await asyncpg.connect(database_url)
    await admin.execute(f"CREATE DATABASE {name}")
    url = database_url.replace("/postgres?", f"/{name}?", 1) if "/postgres?" in database_url else None
    if url is None:
        base, _, query = database_url.partition("?")
        url = base.rsplit("/", 1)[0] + f"/{name}" + (f"?{query}" if query else "")
    pool = await create_pool(url, min_size=1, max_size=2)
    try:
        await migrate(pool)
        yield pool
    finally:
        await pool.close()
        await admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
        await admin.close()


def held(store: ArtifactStore) -> tuple[int, int]:
    """(cell folders, bytes) under a store's root (the store's own id file excluded)."""
    folders = total = 0
    if not store.root.is_dir():
        return 0, 0
    for job in os.scandir(store.root):
        if not job.is_dir() or job.name.startswith("."):
            continue
        for cell in os.scandir(job.path):
            folders += 1
            total += sum(f.stat().st_size for f in os.scandir(cell.path))
    return folders, total


async def finished_jobs(pool: asyncpg.Pool, store: ArtifactStore, job_ids: list[str], at_ms: list[int]) -> None:
    """One-cell jobs fetched by ``store`` (files written, holdings recorded), each finished at its ``at_ms``."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            """INSERT INTO jobs (job_id, job_type, plan_id, trigger, target_ids, workflow_input, created_at,
                                 updated_at, completed_at, business_status)
               SELECT id, 'candidate_search', 'sim', 'schedule', ARRAY['sim'], '{}', at, at, at, 'success'
               FROM unnest($1::text[], $2::bigint[]) AS u(id, at)""",
            job_ids,
            at_ms,
        )
        await conn.execute(
            """INSERT INTO cells (job_id, target_id, state, created_at, updated_at, artifact)
               SELECT id, 'sim', 'submitted', at, at, '{"files": []}'
               FROM unnest($1::text[], $2::bigint[]) AS u(id, at)""",
            job_ids,
            at_ms,
        )
        # what the fetch records before its first byte (holdings.hold), for the day's jobs at once
        await conn.execute(
            """INSERT INTO artifact_holdings (job_id, target_id, store_id, held_at)
               SELECT id, 'sim', $2, 0 FROM unnest($1::text[]) AS u(id)""",
            job_ids,
            store.identity()[0],
        )
    for job_id in job_ids:
        folder = store.folder(job_id, "sim")
        folder.mkdir(parents=True)
        (folder / "p0.jpg").write_bytes(b"\0" * FILE_BYTES)


def owner_of(day: int) -> int:
    """The host that fetches on ``day`` (the source-queue owner changes every ``OWNER_TERM_DAYS``)."""
    return (day // OWNER_TERM_DAYS) % 3


async def test_a_hundred_days_of_hourly_jobs_on_three_hosts_keep_every_disk_flat(
    own_db: asyncpg.Pool, tmp_path: Path
) -> None:
    hosts = [ArtifactStore(tmp_path / f"host{i}" / "artifacts") for i in range(3)]
    elsewhere = ArtifactStore(tmp_path / "admin-box" / "artifacts")
    peak = [(0, 0)] * 3
    for day in range(DAYS):
        await finished_jobs(
            own_db,
            hosts[owner_of(day)],
            [f"sim@{day:03d}-{hour:02d}" for hour in range(24)],
            [START_MS + (day * 24 + hour) * HOUR_MS for hour in range(24)],
        )
        now = START_MS + (day + 1) * DAY_MS
        if day == 55:
            report = await prune(own_db, now - RETENTION_DAYS * DAY_MS, store=elsewhere)
            assert report.jobs > 0 and report.files_removed == {}  # none of them is on this machine
            assert sum(int(str(p["folders"])) for p in report.files_pending) == report.artifacts
        for store in hosts:
            await prune_tick(own_db, store, RETENTION_DAYS, now=now)
        sizes = [held(store) for store in hosts]
        peak = [max(p, s) for p, s in zip(peak, sizes, strict=True)]
        # never more than the window and one day of jobs on any host
        assert all(folders <= (RETENTION_DAYS + 1) * 24 for folders, _ in sizes), (day, sizes)
    final = [held(store) for store in hosts]
    # each host holds exactly what it fetched within the window: a host that stopped
    # fetching more than the window ago holds nothing
    window = range(DAYS - RETENTION_DAYS, DAYS)
    assert [folders for folders, _ in final] == [24 * sum(owner_of(d) == i for d in window) for i in range(3)]
    assert await holdings.pending(own_db) == []
    assert await own_db.fetchval("SELECT count(*) FROM artifact_holdings") == RETENTION_DAYS * 24
    print(
        f"{DAYS} days of hourly jobs, 3 hosts, retention {RETENTION_DAYS} days, owner every {OWNER_TERM_DAYS} days, "
        "10 kB per job: "
        + "; ".join(
            f"host{i} peak {p[0]} folders / {p[1] / 1e6:.1f} MB, end {f[0]} / {f[1] / 1e6:.1f} MB"
            for i, (p, f) in enumerate(zip(peak, final, strict=True))
        )
    )

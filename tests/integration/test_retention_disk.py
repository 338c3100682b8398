"""Retention against a disk an operator touched by hand, and against the ledger's copy of
artifacts a late attempt left: what a prune deletes stays under its root, a folder it
could not delete stays recorded (and is said), and nothing of a pruned job's bytes stays
in the ledger. Real PostgreSQL (a database of its own), real files."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from curaflow.artifacts import ArtifactStore
from curaflow.ledger.cells.transitions import artifact_ready
from curaflow.ledger.db import now_ms
from curaflow.ledger.event_pushes import enqueue_push
from curaflow.ledger.events import append_event
from curaflow.ledger.retention import DAY_MS, prune, prune_tick
from tests.conftest import StackFactory
from tests.integration.test_retention_hosts import finished_jobs, own_db  # noqa: F401  (fixture)
from tests.support import short_id
from tests.zygote import curaflow_command

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NOW_MS = 1_800_000_000_000


async def old_jobs(pool: asyncpg.Pool, store: ArtifactStore, n: int) -> list[str]:
    """``n`` one-cell jobs fetched by ``store`` that finished 40 days before ``NOW_MS``."""
    ids = [f"sim@disk-{short_id()}-{i}" for i in range(n)]
    await finished_jobs(pool, store, ids, [NOW_MS - 40 * DAY_MS] * n)
    return ids


@contextlib.contextmanager
def undeletable(path: Path) -> Iterator[None]:
    """``path`` (a file) cannot be removed while the block runs: immutable for root
    (``chattr +i``), its folder read-only for anyone else."""
    if os.geteuid() == 0:
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)]).returncode:
            pytest.skip("no immutable files here")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True)
    else:
        os.chmod(path.parent, 0o500)
        try:
            yield
        finally:
            os.chmod(path.parent, 0o700)


async def test_a_job_folder_replaced_by_a_link_out_of_the_root_is_left_and_said_and_the_others_go(
    own_db: asyncpg.Pool,  # noqa: F811
    tmp_path: Path,
) -> None:
    store = ArtifactStore(tmp_path / "artifacts")
    ids = await old_jobs(own_db, store, 3)
    elsewhere = tmp_path / "elsewhere"
    shutil.move(store.root / ids[1], elsewhere)  # an operator moved it to another disk
    os.symlink(elsewhere, store.root / ids[1])
    report = await prune(own_db, NOW_MS - 30 * DAY_MS, store=store)
    assert (elsewhere / "sim" / "p0.jpg").is_file()  # nothing outside the root is touched
    assert not (store.root / ids[0]).exists() and not (store.root / ids[2]).exists()
    assert sum(report.files_removed.values()) == 2
    assert len(report.errors) == 1 and ids[1] in report.errors[0]
    held = await own_db.fetch("SELECT job_id FROM artifact_holdings")
    assert [r["job_id"] for r in held] == [ids[1]]  # still recorded: still pending here
    assert [p["folders"] for p in report.files_pending] == [1]


async def test_a_folder_that_cannot_be_deleted_stays_recorded_and_is_said(
    own_db: asyncpg.Pool,  # noqa: F811
    tmp_path: Path,
) -> None:
    store = ArtifactStore(tmp_path / "artifacts")
    ids = await old_jobs(own_db, store, 2)
    stuck = store.folder(ids[0], "sim") / "p0.jpg"
    with undeletable(stuck):
        report = await prune_tick(own_db, store, 30, now=NOW_MS)
        assert stuck.is_file()
    assert not (store.root / ids[1]).exists()
    assert sum(report.files_removed.values()) == 1  # what was deleted, not what was tried
    assert len(report.errors) == 1 and ids[0] in report.errors[0]
    held = await own_db.fetch("SELECT job_id FROM artifact_holdings")
    assert [r["job_id"] for r in held] == [ids[0]]
    again = await prune_tick(own_db, store, 30, now=NOW_MS)  # the next pass deletes it
    assert sum(again.files_removed.values()) == 1 and not again.errors
    assert not (store.root / ids[0]).exists()
    assert await own_db.fetchval("SELECT count(*) FROM artifact_holdings") == 0


async def test_curaflow_prune_says_a_folder_it_could_not_delete_and_exits_1(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    stack = make_stack({})
    pool = await stack.ledger()
    assert stack.settings.artifacts_dir is not None
    store = ArtifactStore(stack.settings.artifacts_dir)
    job_id = f"sim@disk-{short_id()}"
    await finished_jobs(pool, store, [job_id], [now_ms() - 40 * DAY_MS])
    elsewhere = tmp_path / "elsewhere"
    shutil.move(store.root / job_id, elsewhere)
    os.symlink(elsewhere, store.root / job_id)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CURAFLOW_", "TEMPORAL_"))}
    env["CURAFLOW_CONFIG"] = str(stack.config_path)
    done = await asyncio.to_thread(curaflow_command, ["prune", "--older-than-days", "30"], env=env, timeout=120)
    assert done.returncode == 1, done.stderr
    assert f"not removed: {job_id}/sim: LinkEscape" in done.stderr.replace("\n", "")
    assert (elsewhere / "sim" / "p0.jpg").is_file()
    assert await pool.fetchval("SELECT pruned_at IS NOT NULL FROM jobs WHERE job_id = $1", job_id)
    os.unlink(store.root / job_id)  # the operator's fix: the next prune forgets it
    again = await asyncio.to_thread(curaflow_command, ["prune", "--older-than-days", "30"], env=env, timeout=120)
    assert again.returncode == 0, again.stderr
    assert await pool.fetchval("SELECT count(*) FROM artifact_holdings WHERE job_id = $1", job_id) == 0


async def test_the_ledger_copy_a_late_fetch_left_after_the_finish_goes_with_the_prune(
    own_db: asyncpg.Pool,  # noqa: F811
    tmp_path: Path,
) -> None:
    store = ArtifactStore(tmp_path / "artifacts")
    [job_id] = await old_jobs(own_db, store, 1)
    await own_db.execute("UPDATE cells SET state = 'selected', work_id = '42' WHERE job_id = $1", job_id)
    await own_db.execute("UPDATE cells SET state = 'failed', artifact = NULL WHERE job_id = $1", job_id)
    # a fetch attempt that outlived its job's finish (which deleted the ledger's copy)
    # copies its pages in the statement that would make the cell ready: the cell has ended
    async with own_db.acquire() as conn, conn.transaction():
        await artifact_ready(conn, job_id, "sim", "42", {"work_id": "42", "files": []}, pages=([0], [b"x" * 1000]))
    assert await own_db.fetchval("SELECT state FROM cells WHERE job_id = $1", job_id) == "failed"
    await prune(own_db, NOW_MS - 30 * DAY_MS, store=store)
    assert await own_db.fetchval("SELECT count(*) FROM artifact_chunks WHERE job_id = $1", job_id) == 0


async def old_job_with_pushes(pool: asyncpg.Pool, store: ArtifactStore) -> str:
    """An old job (past the retention) with its four events each owed a callback push, the
    first two sent (``delivered``), the last two ``pending``: its id."""
    [job_id] = await old_jobs(pool, store, 1)
    async with pool.acquire() as conn, conn.transaction():
        for kind in ("job.accepted", "job.started", "job.progress", "job.succeeded"):
            seq = await append_event(conn, job_id, kind)
            await enqueue_push(conn, job_id, seq, f"ev-{seq}", "https://consumer.example/hook", {"type": kind})
    await pool.execute("UPDATE event_pushes SET status = 'delivered' WHERE job_id = $1 AND seq <= 2", job_id)
    return job_id


async def test_a_push_still_pending_is_not_pruned_and_a_settled_one_is(
    own_db: asyncpg.Pool,  # noqa: F811
    tmp_path: Path,
) -> None:
    # every worker was down longer than the retention (the sweeper pushes pending events
    # whenever one runs again); a `curaflow prune` from an admin box ran meanwhile
    store = ArtifactStore(tmp_path / "artifacts")
    job_id = await old_job_with_pushes(own_db, store)
    counted = await prune(own_db, NOW_MS - 30 * DAY_MS, store=store, dry_run=True)
    assert counted.jobs == 1 and counted.pushes == 2 and counted.events == 2
    report = await prune(own_db, NOW_MS - 30 * DAY_MS, store=store)
    assert report.jobs == 1 and report.pushes == 2 and report.events == 2
    left = await own_db.fetch("SELECT seq, status FROM event_pushes WHERE job_id = $1 ORDER BY seq", job_id)
    # what the consumer has not been sent yet still reaches it, in order, the job's end last
    assert [(r["seq"], r["status"]) for r in left] == [(3, "pending"), (4, "pending")]
    events = await own_db.fetch("SELECT seq, type FROM job_events WHERE job_id = $1 ORDER BY seq", job_id)
    assert [(r["seq"], r["type"]) for r in events] == [(3, "job.progress"), (4, "job.succeeded")]


async def test_a_push_the_prune_kept_pending_goes_once_it_is_settled(
    own_db: asyncpg.Pool,  # noqa: F811
    tmp_path: Path,
) -> None:
    # A prune kept the job's pending pushes and their events (they were owed); the sweeper
    # sent them afterwards. Until 2026-12-07 nothing deleted them then: the job was marked
    # pruned_at, no later prune took it again, and the sent pushes, their frozen bodies and
    # their events stayed for good. Each pass (a worker's, with or without retention.days,
    # and `curaflow prune`) now deletes what was settled since; a push still pending stays.
    store = ArtifactStore(tmp_path / "artifacts")
    job_id = await old_job_with_pushes(own_db, store)
    await prune(own_db, NOW_MS - 30 * DAY_MS, store=store)  # keeps 3 and 4, owed

    async def left() -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
        pushes = await own_db.fetch("SELECT seq, status FROM event_pushes WHERE job_id = $1 ORDER BY seq", job_id)
        events = await own_db.fetch("SELECT seq, type FROM job_events WHERE job_id = $1 ORDER BY seq", job_id)
        return [(r["seq"], r["status"]) for r in pushes], [(r["seq"], r["type"]) for r in events]

    # the sweeper sends the progress event; the job's end is still owed
    await own_db.execute("UPDATE event_pushes SET status = 'delivered' WHERE job_id = $1 AND seq = 3", job_id)
    report = await prune_tick(own_db, store, None, now=NOW_MS)  # a worker without retention.days
    assert (report.pushes, report.events) == (1, 1)
    assert await left() == ([(4, "pending")], [(4, "job.succeeded")])

    # the job's end is dead-lettered (settled too): its push goes, the terminal event stays
    await own_db.execute("UPDATE event_pushes SET status = 'dead' WHERE job_id = $1 AND seq = 4", job_id)
    counted = await prune(own_db, NOW_MS - 30 * DAY_MS, store=store, dry_run=True)
    assert (counted.jobs, counted.pushes, counted.events) == (0, 1, 0)
    report = await prune(own_db, NOW_MS - 30 * DAY_MS, store=store)
    assert (report.jobs, report.pushes, report.events) == (0, 1, 0)
    assert await left() == ([], [(4, "job.succeeded")])

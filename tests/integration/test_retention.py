"""Retention: ``curaflow prune`` over a real ledger and artifact store, real jobs run by a real worker.

What a finished job no longer needs goes (events but the terminal one, candidate report,
artifact files and metadata); what deduplication needs stays (delivery intents), and an open job is never
touched, however old.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from curaflow.artifacts import ArtifactStore
from curaflow.ledger.db import now_ms
from curaflow.ledger.jobs import NewJob, insert_job
from curaflow.ledger.retention import DAY_MS
from tests.conftest import StackFactory
from tests.support import Stack, eventually, short_id
from tests.zygote import curaflow_command

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def prune_cli(stack: Stack, *args: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CURAFLOW_", "TEMPORAL_"))}
    env["CURAFLOW_CONFIG"] = str(stack.config_path)
    done = await asyncio.to_thread(curaflow_command, ["prune", *args, "--json"], env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


async def counts(stack: Stack, job_id: str) -> dict[str, Any]:
    pool = await stack.ledger()
    row = await pool.fetchrow(
        """SELECT (SELECT count(*) FROM job_events WHERE job_id = $1) AS events,
                  (SELECT count(*) FROM cells WHERE job_id = $1 AND candidate_report IS NOT NULL) AS reports,
                  (SELECT count(*) FROM cells WHERE job_id = $1 AND artifact IS NOT NULL) AS artifacts,
                  (SELECT count(*) FROM delivery_intents WHERE job_id = $1 AND status = 'delivered') AS delivered,
                  (SELECT count(*) FROM outcomes WHERE job_id = $1) AS outcomes""",
        job_id,
    )
    assert row is not None
    return dict(row)


async def test_prune_drops_what_a_finished_job_no_longer_needs_and_keeps_what_routes_received(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    route = f"out-{short_id()}"
    stack = make_stack(
        {
            "routes": {route: {"kind": "directory", "path": str(tmp_path / "delivered")}},
            "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [route]}],
            "retention": {"days": 30},
        }
    )
    await stack.start_worker()
    pool = await stack.ledger()
    old = (await stack.wait_terminal(await stack.admit(stack.task(query={"tags": ["オリジナル"]})))).job_id
    recent = (await stack.wait_terminal(await stack.admit(stack.task(query={"tags": ["オリジナル"]})))).job_id
    before_old, before_recent = await counts(stack, old), await counts(stack, recent)
    assert before_old["events"] > 0 and before_old["reports"] == 1 and before_old["artifacts"] == 1
    assert stack.settings.artifacts_dir is not None
    store = ArtifactStore(stack.settings.artifacts_dir)
    assert any(store.folder(old, "demo").iterdir()) and any(store.folder(recent, "demo").iterdir())
    # the first job finished 40 days ago; an open job admitted 40 days ago has not finished
    await pool.execute("UPDATE jobs SET completed_at = completed_at - $2::bigint WHERE job_id = $1", old, 40 * DAY_MS)
    template = (await stack.job(recent)).model_dump()
    from curaflow.ledger.jobs import workflow_input

    async with pool.acquire() as conn:
        stored = await workflow_input(conn, recent)
        assert stored is not None
        opened = stored.model_copy(
            update={"job_id": f"open-{short_id()}", "created_at_ms": now_ms() - 40 * DAY_MS, "deadline_at_ms": None}
        )
        await insert_job(conn, NewJob(job_input=opened))
    assert template["completed_at"] is not None

    dry = await prune_cli(stack, "--dry-run")  # retention.days from the configuration
    assert (dry["days"], dry["dry_run"], dry["jobs"], dry["candidate_reports"], dry["artifacts"]) == (30, True, 1, 1, 1)
    assert await counts(stack, old) == before_old  # a dry run changes nothing

    done = await prune_cli(stack, "--older-than-days", "30")
    assert (done["jobs"], done["events"], done["candidate_reports"], done["artifacts"]) == (
        1,
        before_old["events"] - 1,  # its terminal event stays
        1,
        1,
    )
    # run on the worker's host: its folder is removed here, nothing is pending elsewhere
    assert (list(done["files_removed"].values()), done["files_pending"]) == ([1], []), done
    after_old = await counts(stack, old)
    # what deduplication needs and the job's own record stay; the bulky parts go
    assert after_old == {**before_old, "events": 1, "reports": 1, "artifacts": 0}
    assert after_old["delivered"] == 1 and after_old["outcomes"] == 1
    assert not store.folder(old, "demo").exists()
    assert await counts(stack, recent) == before_recent and any(store.folder(recent, "demo").iterdir())
    # the open job keeps its events (the reconciler may meanwhile have ended it: then it
    # finished now, not 30 days ago)
    accepted = await pool.fetchval("SELECT count(*) FROM job_events WHERE job_id = $1 AND seq = 1", opened.job_id)
    assert accepted == 1
    http = await stack.start_api()
    got = await http.get(f"/jobs/{old}")
    assert got.status_code == 200 and got.json()["status"] == "succeeded"
    # its stream ends as the job did: only the terminal event is left
    assert [e["type"] for e in (await http.get(f"/jobs/{old}/events")).json()["events"]] == ["job.succeeded"]

    # a second run finds nothing; a new job never gets the pruned job's work again
    again = await prune_cli(stack, "--older-than-days", "30")
    assert again["jobs"] == 0
    delivered = await pool.fetch(
        "SELECT work_id FROM delivery_intents WHERE job_id = ANY($1::text[]) AND status = 'delivered'", [old, recent]
    )
    new = await stack.wait_terminal(await stack.admit(stack.task(query={"tags": ["オリジナル"]})))
    new_work = await pool.fetchval(
        "SELECT work_id FROM delivery_intents WHERE job_id = $1 AND status = 'delivered'", new.job_id
    )
    assert new_work is not None and new_work not in {r["work_id"] for r in delivered}


async def test_prune_without_an_age_is_a_usage_error(make_stack: StackFactory, tmp_path: Path) -> None:
    stack = make_stack({})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CURAFLOW_", "TEMPORAL_"))}
    env["CURAFLOW_CONFIG"] = str(stack.config_path)
    done = await asyncio.to_thread(curaflow_command, ["prune"], env=env, timeout=60)
    assert done.returncode == 2 and "--older-than-days" in done.stderr


async def test_a_worker_prunes_on_its_own_when_retention_days_is_set(make_stack: StackFactory, tmp_path: Path) -> None:
    route = f"out-{short_id()}"
    stack = make_stack(
        {
            "routes": {route: {"kind": "directory", "path": str(tmp_path / "delivered")}},
            "targets": [{"id": "demo", "query": {"tags": ["風景"]}, "routes": [route]}],
            "retention": {"days": 30, "interval_ms": 1000},
        }
    )
    await stack.start_worker()
    pool = await stack.ledger()
    job = (await stack.wait_terminal(await stack.admit(stack.task(query={"tags": ["風景"]})))).job_id
    before = await counts(stack, job)
    assert before["events"] > 0 and before["artifacts"] == 1
    await pool.execute("UPDATE jobs SET completed_at = completed_at - $2::bigint WHERE job_id = $1", job, 31 * DAY_MS)

    async def pruned() -> bool:
        return bool(await pool.fetchval("SELECT pruned_at IS NOT NULL FROM jobs WHERE job_id = $1", job))

    await eventually(pruned, timeout_s=30, interval_s=0.5, what="the worker's retention pass")
    assert await counts(stack, job) == {**before, "events": 1, "reports": 1, "artifacts": 0}  # the terminal one
    assert stack.settings.artifacts_dir is not None
    # the pass marks the jobs pruned in its transaction and deletes this host's folders after
    # the commit (the files follow the ledger: curaflow.ledger.holdings.release), so the
    # folder goes a moment after ``pruned_at`` is seen
    folder = ArtifactStore(stack.settings.artifacts_dir).folder(job, "demo")
    await eventually(lambda: not folder.exists(), timeout_s=30, what="the pruned job's artifact folder deleted")
    # the pass logs once it is over: after the rows and the files the test has just seen go
    await eventually(lambda: "retention.pruned" in stack.worker_log(), timeout_s=10, what="retention.pruned logged")

"""A consumer across retention: its identifiers, taken while a job lived, used after the
job was pruned (``curaflow.ledger.retention.prune``, run directly with a short age).

Real worker, real API, real PostgreSQL, the Temporal dev server. What a prune removes is
the bulk of a finished job; what the consumer holds — the job id, the idempotency key,
an event cursor — must still read the job's own truth.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from curaflow.ledger.db import now_ms
from curaflow.ledger.retention import prune
from tests.conftest import StackFactory
from tests.support import Stack, short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TERMINAL = {"job.succeeded", "job.failed", "job.expired", "job.cancelled"}


async def finished_and_pruned(stack: Stack, task: dict[str, Any]) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    """Run ``task`` to its end through the API, read its stream and its job, then prune it
    (it finished a moment "too long" ago). Returns the job id, its events and its Job."""
    http = stack.http
    assert http is not None
    admitted = await http.post("/jobs", json=task)
    assert admitted.status_code == 202, admitted.text
    job_id = str(admitted.json()["job"]["job_id"])
    await stack.wait_terminal(job_id)
    events = (await http.get(f"/jobs/{job_id}/events")).json()["events"]
    job = (await http.get(f"/jobs/{job_id}")).json()
    pool = await stack.ledger()
    await pool.execute("UPDATE jobs SET completed_at = completed_at - 2000 WHERE job_id = $1", job_id)
    report = await prune(pool, now_ms() - 1000)
    assert report.jobs >= 1
    assert await pool.fetchval("SELECT pruned_at IS NOT NULL FROM jobs WHERE job_id = $1", job_id)
    return job_id, events, job


@pytest.fixture
async def stack(make_stack: StackFactory, tmp_path: Path) -> Stack:
    route = f"out-{short_id()}"
    stack = make_stack(
        {
            "routes": {route: {"kind": "directory", "path": str(tmp_path / "delivered")}},
            "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [route]}],
        }
    )
    await stack.start_worker()
    await stack.start_api()
    return stack


async def test_a_cursor_taken_before_the_prune_still_reads_the_jobs_end(stack: Stack) -> None:
    http = stack.http
    assert http is not None
    job_id, events, job = await finished_and_pruned(stack, stack.task(query={"tags": ["オリジナル"]}))
    assert events[-1]["type"] in TERMINAL and job["status"] == "succeeded"
    terminal = events[-1]
    # a consumer that saw the job start, then was away longer than the retention
    seen_start = events[1]["event_id"]
    page = (await http.get(f"/jobs/{job_id}/events", params={"after": seen_start})).json()
    assert [e["event_id"] for e in page["events"]] == [terminal["event_id"]], page
    assert page["events"][0]["type"] == terminal["type"]
    assert page["events"][0]["payload"]["job"]["status"] == "succeeded"
    # its long poll answers the end at once; unacked counts what it never acked
    waited = (await http.get(f"/jobs/{job_id}/events", params={"after": seen_start, "wait_ms": 20000})).json()
    assert [e["event_id"] for e in waited["events"]] == [terminal["event_id"]]
    assert waited["unacked"] == 1
    # from the start, and with a cursor of another job (read from the start): the end
    for params in ({}, {"after": f"evt-1-{'0' * 8}"}, {"unacked": "1"}):
        page = (await http.get(f"/jobs/{job_id}/events", params=params)).json()
        assert [e["event_id"] for e in page["events"]] == [terminal["event_id"]], (params, page)
    # a cursor at the end reads nothing after it; the ack of the end empties unacked
    assert (await http.get(f"/jobs/{job_id}/events", params={"after": terminal["event_id"]})).json()["events"] == []
    acked = (await http.post(f"/jobs/{job_id}/events/ack", json={"ack_through": terminal["event_id"]})).json()
    assert (acked["acked"], acked["unacked"]) == (1, 0)


async def test_a_pruned_jobs_result_still_says_what_its_search_scanned_and_filtered(stack: Stack) -> None:
    http = stack.http
    assert http is not None
    # a first job delivers a work; the second's search passes over it (filtered: duplicate)
    first = await http.post("/jobs", json=stack.task(query={"tags": ["オリジナル"]}))
    await stack.wait_terminal(str(first.json()["job"]["job_id"]))
    job_id, _, before = await finished_and_pruned(stack, stack.task(query={"tags": ["オリジナル"]}))
    assert before["status"] == "succeeded" and before["result"]["scanned"] > len(before["result"]["candidates"])
    assert before["result"]["filtered"], before["result"]
    after = (await http.get(f"/jobs/{job_id}")).json()
    # what the search saw is the job's history, not its bulk: the same after the prune
    assert after["result"]["scanned"] == before["result"]["scanned"], after["result"]
    assert after["result"]["filtered"] == before["result"]["filtered"]
    # the files are gone: the candidates name no assets, and nothing else changed
    assert all(c["assets"] == [] for c in after["result"]["candidates"])
    strip = [{**c, "assets": []} for c in before["result"]["candidates"]]
    assert after["result"]["candidates"] == strip
    assert after["result"]["deliveries"] == before["result"]["deliveries"]

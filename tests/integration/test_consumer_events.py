"""The event stream as real consumers page it.

TelePost's client pages a job's stream with ``unacked=1&after=<next_after>`` and acks
only once it has read everything; the deploy repository's contract check validates every
page against the published schema (its fixture carries ``next_after: ""``). Real API,
real PostgreSQL; the jobs' workflows run on a task queue no worker serves, so the
streams hold exactly the events the tests write.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from curaflow.ledger.events import append_event
from curaflow.protocol.models import EventPage
from tests.schema import validate
from tests.support import Stack, short_id, whsec

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
async def stack(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str, ledger_pool: Any
) -> AsyncIterator[Stack]:
    """An API (no worker): jobs stay queued, their streams hold what the tests append."""
    tmp = tmp_path_factory.mktemp("consumer-events")
    config: dict[str, Any] = {
        "routes": {f"out-{short_id()}": {"kind": "directory", "path": str(tmp / "out")}},
        "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}}],
        "api": {"callback_allowed_hosts": ["consumer.example.org"], "callback_secret": whsec()},
    }
    config["targets"][0]["routes"] = list(config["routes"])
    stack = Stack(tmp, temporal_address, database_url, config)
    await stack.start_api()
    yield stack
    await stack.stop()


async def job_with_events(stack: Stack, progress_events: int, **task: Any) -> str:
    """A queued job whose stream is ``job.accepted`` plus ``progress_events`` progress events."""
    http = stack.http
    assert http is not None
    response = await http.post("/jobs", json={**stack.task(query={"tags": ["オリジナル"]}), **task})
    assert response.status_code == 202, response.text
    job_id = str(response.json()["job"]["job_id"])
    pool = await stack.ledger()
    async with pool.acquire() as conn, conn.transaction():
        for n in range(progress_events):
            await append_event(conn, job_id, "job.progress", {"progress": {"stage": "searching", "n": n}})
    return job_id


async def telepost_read_all(http: httpx.AsyncClient, job_id: str, *, limit: int, max_pages: int = 50) -> list[str]:
    """TelePost's paging loop: ``unacked=1`` plus ``after=next_after`` until no ``next_after``."""
    seen: list[str] = []
    after: str | None = None
    for _ in range(max_pages):
        params: dict[str, Any] = {"unacked": "1", "limit": limit}
        if after:
            params["after"] = after
        page = (await http.get(f"/jobs/{job_id}/events", params=params)).json()
        seen += [e["event_id"] for e in page["events"]]
        after = page.get("next_after")
        if not after:
            return seen
    raise AssertionError(f"paging did not terminate after {max_pages} pages: {len(seen)} events read, {seen[:8]}…")


async def test_unacked_paging_with_after_terminates_and_reads_each_event_once(stack: Stack) -> None:
    http = stack.http
    assert http is not None
    job_id = await job_with_events(stack, progress_events=6)  # 7 events: 4 pages of 2

    seen = await telepost_read_all(http, job_id, limit=2)

    everything = (await http.get(f"/jobs/{job_id}/events")).json()["events"]
    assert len(everything) == 7
    assert seen == [e["event_id"] for e in everything]  # each event once, in order

    # acked through the third event: the loop starts after the later of `after` and the cursor
    ack = await http.post(f"/jobs/{job_id}/events/ack", json={"ack_through": everything[2]["event_id"]})
    assert ack.json()["acked"] == 3
    assert await telepost_read_all(http, job_id, limit=2) == [e["event_id"] for e in everything[3:]]
    # an `after` behind the cursor does not rewind it
    behind = (
        await http.get(f"/jobs/{job_id}/events", params={"unacked": "1", "after": everything[0]["event_id"]})
    ).json()
    assert [e["event_id"] for e in behind["events"]] == [e["event_id"] for e in everything[3:]]
    # an `after` ahead of the cursor is honoured
    ahead = (
        await http.get(f"/jobs/{job_id}/events", params={"unacked": "1", "after": everything[5]["event_id"]})
    ).json()
    assert [e["event_id"] for e in ahead["events"]] == [everything[6]["event_id"]]
    assert ahead["unacked"] == 4  # still counted from the durable cursor
    # an unknown `after` falls back to the cursor
    unknown = (await http.get(f"/jobs/{job_id}/events", params={"unacked": "1", "after": "evt-1-00000000"})).json()
    assert [e["event_id"] for e in unknown["events"]] == [e["event_id"] for e in everything[3:]]


async def test_event_types_outside_the_protocol_are_never_served_nor_counted(stack: Stack) -> None:
    http = stack.http
    assert http is not None
    job_id = await job_with_events(stack, progress_events=1, callback_url="https://consumer.example.org/hook")
    pool = await stack.ledger()
    async with pool.acquire() as conn, conn.transaction():
        await append_event(conn, job_id, "outbox.claimed", {})  # an internal-only kind (reference §4.2)
        await append_event(conn, job_id, "job.progress", {"progress": {"stage": "fetching"}})
        await append_event(conn, job_id, "job.debug_note", {})  # not in the protocol's enum

    page = (await http.get(f"/jobs/{job_id}/events")).json()  # the response hook validates the schema
    types = [e["type"] for e in page["events"]]
    assert types == ["job.accepted", "job.progress", "job.progress"]
    assert page["unacked"] == 3

    # paging by 1 never stops on, nor counts, a hidden row
    seen = await telepost_read_all(http, job_id, limit=1)
    assert seen == [e["event_id"] for e in page["events"]]
    # ack through the last served event: nothing is left unacked
    done = (await http.post(f"/jobs/{job_id}/events/ack", json={"ack_through": page["events"][-1]["event_id"]})).json()
    assert (done["acked"], done["unacked"]) == (3, 0)
    assert (await http.get(f"/jobs/{job_id}/events", params={"unacked": "1"})).json()["events"] == []
    # nor pushed to the job's callback_url
    pushed = await pool.fetch("SELECT body FROM event_pushes WHERE job_id = $1 ORDER BY seq", job_id)
    assert [p["body"]["type"] for p in pushed] == ["job.accepted", "job.progress", "job.progress"]


def test_the_published_event_page_accepts_the_upstream_fixtures_empty_next_after() -> None:
    fixture = {"job_id": "demo@manual-k", "events": [], "unacked": 0, "server_time": 1, "next_after": ""}
    validate(fixture, "EventPage")
    assert EventPage.model_validate(fixture).next_after == ""

"""The event stream over HTTP: cursors, paging, ack, long poll (reference §4.5–4.6).

Real worker process, real Temporal dev server, real PostgreSQL; every answer is checked
against the published schema by the client's response hook (tests/schema.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from curaflow.ledger.events import append_event
from tests.conftest import StackFactory
from tests.support import Stack, eventually, short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def directory_config(tmp_path: Path) -> dict[str, Any]:
    out = f"out-{short_id()}"
    return {
        "routes": {out: {"kind": "directory", "path": str(tmp_path / "delivered")}},
        "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [out]}],
    }


@pytest.fixture(scope="module")
async def stack(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str, ledger_pool: Any
) -> AsyncIterator[Stack]:
    """One stack (worker + API) shared by the tests of this module; tests use their own keys."""
    tmp = tmp_path_factory.mktemp("events")
    stack = Stack(tmp, temporal_address, database_url, directory_config(tmp))
    await stack.start_worker()
    await stack.start_api()
    yield stack
    await stack.stop()


async def submit(http: httpx.AsyncClient, stack: Stack, **task: Any) -> str:
    body = stack.task(query={"tags": ["オリジナル"]})
    body.update(task)
    response = await http.post("/jobs", json=body)
    assert response.status_code == 202, response.text
    return str(response.json()["job"]["job_id"])


async def follow(http: httpx.AsyncClient, job_id: str, *, limit: int = 200) -> list[dict[str, Any]]:
    """Long-poll the stream from the start to the terminal event."""
    events: list[dict[str, Any]] = []
    after: str | None = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        params: dict[str, Any] = {"wait_ms": 10_000, "limit": limit}
        if after:
            params["after"] = after
        page = (await http.get(f"/jobs/{job_id}/events", params=params)).json()
        events += page["events"]
        if page["events"]:
            after = page["events"][-1]["event_id"]
        if events and events[-1]["type"] in ("job.succeeded", "job.failed", "job.expired", "job.cancelled"):
            return events
    raise AssertionError(f"no terminal event: {[e['type'] for e in events]}")


async def test_follow_to_the_terminal_event_then_ack(stack: Stack) -> None:
    http = stack.http
    assert http is not None
    job_id = await submit(http, stack, correlation_id="corr-7")

    events = await follow(http, job_id)

    types = [e["type"] for e in events]
    assert types[0] == "job.accepted" and types[1] == "job.started"
    assert types[-1] == "job.succeeded"
    assert [e["payload"]["progress"]["stage"] for e in events if e["type"] == "job.progress"] == [
        "searching",
        "fetching",
        "delivering",
    ]
    assert len({e["event_id"] for e in events}) == len(events)
    assert [e["at"] for e in events] == sorted(e["at"] for e in events)
    assert all(e["correlation_id"] == "corr-7" and e["job_id"] == job_id for e in events)
    assert all(e["payload"]["detail"]["internal_kind"] for e in events)
    terminal = events[-1]["payload"]
    assert terminal["job"]["status"] == "succeeded"
    assert terminal["result"]["candidates"][0]["work_id"] == terminal["job"]["result"]["candidates"][0]["work_id"]
    assert "job" not in events[0]["payload"]  # non-terminal events carry no job

    job_before = (await http.get(f"/jobs/{job_id}")).json()
    page = (await http.get(f"/jobs/{job_id}/events")).json()
    assert page["unacked"] == len(events) and "next_after" not in page

    # ack through the third event: the cursor moves, unacked counts the rest
    ack = (await http.post(f"/jobs/{job_id}/events/ack", json={"ack_through": events[2]["event_id"]})).json()
    assert (ack["job_id"], ack["acked"], ack["unacked"]) == (job_id, 3, len(events) - 3)
    # an older cursor never rewinds it; an unknown or foreign id is a no-op answered 200
    for stale in (events[0]["event_id"], "evt-1-deadbeef", "nonsense", "evt-99999-00000000"):
        again = await http.post(f"/jobs/{job_id}/events/ack", json={"ack_through": stale})
        assert again.status_code == 200
        assert (again.json()["acked"], again.json()["unacked"]) == (3, len(events) - 3)
    # unacked=1 reads after the durable cursor (and ignores after)
    rest = (await http.get(f"/jobs/{job_id}/events", params={"unacked": "1", "after": events[0]["event_id"]})).json()
    assert [e["event_id"] for e in rest["events"]] == [e["event_id"] for e in events[3:]]
    # unacked counts are independent of after; history is never deleted
    full = (await http.get(f"/jobs/{job_id}/events", params={"after": events[-2]["event_id"]})).json()
    assert [e["event_id"] for e in full["events"]] == [events[-1]["event_id"]]
    assert full["unacked"] == len(events) - 3
    everything = (await http.get(f"/jobs/{job_id}/events", params={"unacked": "false"})).json()
    assert len(everything["events"]) == len(events)
    # ack through the last event: nothing unacked; the job never changed
    done = (await http.post(f"/jobs/{job_id}/events/ack", json={"ack_through": events[-1]["event_id"]})).json()
    assert (done["acked"], done["unacked"]) == (len(events), 0)
    assert (await http.get(f"/jobs/{job_id}/events", params={"unacked": "true"})).json()["events"] == []
    assert (await http.get(f"/jobs/{job_id}")).json() == job_before


async def test_paging_cursors_and_parameter_errors(stack: Stack) -> None:
    http = stack.http
    assert http is not None
    job_id = await submit(http, stack)
    other_id = await submit(http, stack)
    events = await follow(http, job_id)
    other = await follow(http, other_id)

    # pages of 2: next_after only while more remain
    seen: list[str] = []
    after = None
    while True:
        params: dict[str, Any] = {"limit": 2}
        if after:
            params["after"] = after
        page = (await http.get(f"/jobs/{job_id}/events", params=params)).json()
        seen += [e["event_id"] for e in page["events"]]
        if "next_after" not in page:
            break
        assert page["next_after"] == page["events"][-1]["event_id"]
        after = page["next_after"]
    assert seen == [e["event_id"] for e in events]
    last_page_size = len(events) % 2 or 2
    assert len(page["events"]) == last_page_size

    # unknown or foreign cursors read from the start (at-least-once)
    for cursor in (other[1]["event_id"], "garbage", "evt-4096-" + events[0]["event_id"].split("-")[2]):
        page = (await http.get(f"/jobs/{job_id}/events", params={"after": cursor})).json()
        assert [e["event_id"] for e in page["events"]] == [e["event_id"] for e in events], cursor

    # bad parameters: 400 invalid_params naming the field
    for params, field in (
        ({"after": ""}, "after"),
        ({"unacked": "yes"}, "unacked"),
        ({"unacked": "TRUE"}, "unacked"),
        ({"limit": "0"}, "limit"),
        ({"limit": "501"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"wait_ms": "30001"}, "wait_ms"),
        ({"wait_ms": "-1"}, "wait_ms"),
    ):
        answer = await http.get(f"/jobs/{job_id}/events", params=params)
        assert answer.status_code == 400, params
        assert answer.json()["error"]["code"] == "invalid_params"
        assert answer.json()["error"]["detail"]["field"] == field
    assert (await http.get(f"/jobs/{job_id}/events", params={"limit": "500"})).status_code == 200

    # unknown job → 404 invalid_params
    missing = await http.get("/jobs/demo@manual-no-such-job/events")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "invalid_params"

    # ack body validated before the job lookup; each refusal names what was wrong: the body's
    # reason as POST /jobs names it, detail.field for a bad or missing value (reference §4.6).
    # Until 2026-12-07 a body that was no object claimed ack_through was wrong, an empty one
    # named nothing, and a missing ack_through was told the rule of a value.
    for content, headers, detail, message in (
        (b"{not json", {"content-type": "application/json"}, {"reason": "invalid_json"}, None),
        (b"[1]", {"content-type": "application/json"}, {"reason": "not_an_object", "received": "array"},
         "request body must be a JSON object"),
        (b"{}", {"content-type": "application/json"}, {"field": "ack_through"}, "ack_through is required"),
        (b'{"ack_through": null}', {"content-type": "application/json"}, {"field": "ack_through"},
         "ack_through is required"),
        (b'{"ack_through": 5}', {"content-type": "application/json"}, {"field": "ack_through"},
         "ack_through must be a non-empty event_id"),
        (b'{"ack_through": ""}', {"content-type": "application/json"}, {"field": "ack_through"},
         "ack_through must be a non-empty event_id"),
        (b"", {}, {"reason": "empty_body"}, None),
    ):  # fmt: skip
        for target in (job_id, "demo@manual-no-such-job"):
            answer = await http.post(f"/jobs/{target}/events/ack", content=content, headers=headers)
            assert answer.status_code == 400, (content, answer.text)
            error = answer.json()["error"]
            assert error["code"] == "invalid_params"
            if message is None:
                assert error["detail"]["reason"] == detail["reason"], (content, error)
            else:
                assert (error["message"], error["detail"]) == (message, detail), (content, error)
    unknown = await http.post("/jobs/demo@manual-no-such-job/events/ack", json={"ack_through": "evt-1-00000000"})
    assert unknown.status_code == 404
    too_big = await http.post(f"/jobs/{job_id}/events/ack", content=b'{"ack_through": "' + b"x" * 70_000 + b'"}')
    assert too_big.status_code == 413


async def test_a_cursor_is_known_only_as_the_server_spelled_it(stack: Stack) -> None:
    """``after`` and ``ack_through`` name an event only in the exact spelling the server
    issued: ``evt-1-<hash>`` with Arabic-Indic digits, a leading zero or a trailing line
    break is a forged cursor — the page reads from the start and the ack is a no-op —
    never an id that skips or acknowledges events the consumer did not name."""
    http = stack.http
    assert http is not None
    job_id = await submit(http, stack)
    first = (await http.get(f"/jobs/{job_id}/events")).json()["events"][0]["event_id"]
    _, seq, job_hash = first.split("-")
    assert seq == "1"
    issued = await http.get(f"/jobs/{job_id}/events", params={"after": first})
    assert first not in [e["event_id"] for e in issued.json()["events"]]  # the real cursor skips it

    for forged in (f"evt-\u0661-{job_hash}", f"evt-01-{job_hash}", f"{first}\n", f"evt-\uff11-{job_hash}"):
        page = await http.get(f"/jobs/{job_id}/events", params={"after": forged})
        assert page.status_code == 200, page.text
        assert page.json()["events"][0]["event_id"] == first, forged  # from the start
        ack = await http.post(f"/jobs/{job_id}/events/ack", json={"ack_through": forged})
        assert ack.status_code == 200, ack.text
        assert ack.json()["acked"] == 0, forged  # acknowledged nothing


async def test_long_poll_wakes_on_commit_and_times_out_with_an_empty_page(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    # No worker: the job stays queued, events are appended by hand.
    stack = make_stack(directory_config(tmp_path))
    http = await stack.start_api()
    assert stack.api is not None
    notifier = stack.api.app.state.notifier
    job_id = await submit(http, stack)
    first = (await http.get(f"/jobs/{job_id}/events")).json()["events"]
    assert [e["type"] for e in first] == ["job.accepted"]
    pool = await stack.ledger()

    async def append_later(delay_s: float) -> float:
        await asyncio.sleep(delay_s)
        async with pool.acquire() as conn, conn.transaction():
            await append_event(conn, job_id, "job.progress", {"progress": {"stage": "searching"}})
        return time.monotonic()

    # woken by the commit: answers right after it, long before wait_ms
    started = time.monotonic()
    poll = asyncio.create_task(
        http.get(f"/jobs/{job_id}/events", params={"after": first[0]["event_id"], "wait_ms": 20_000})
    )
    committed_at = await append_later(0.5)
    answer = (await poll).json()
    answered_at = time.monotonic()
    assert [e["type"] for e in answer["events"]] == ["job.progress"]
    assert answered_at - committed_at < 1.0
    assert answered_at - started < 5.0

    # nothing new: an empty page at the timeout
    started = time.monotonic()
    empty = (
        await http.get(f"/jobs/{job_id}/events", params={"after": answer["events"][0]["event_id"], "wait_ms": 1200})
    ).json()
    elapsed = time.monotonic() - started
    assert empty["events"] == [] and "next_after" not in empty
    assert 1.1 <= elapsed < 4.0
    assert notifier.waiting == 0  # waiters unregister

    # the listener connection dies: it reconnects and long polls still wake on commit
    pid = notifier._conn.get_server_pid()
    await pool.execute("SELECT pg_terminate_backend($1)", pid)
    await eventually(
        lambda: notifier._conn is not None and notifier._conn.get_server_pid() != pid,
        timeout_s=10,
        interval_s=0.05,
        what="the listener reconnected",
    )
    await asyncio.wait_for(notifier.listening.wait(), 10)
    last = answer["events"][0]["event_id"]
    poll = asyncio.create_task(http.get(f"/jobs/{job_id}/events", params={"after": last, "wait_ms": 20_000}))
    committed_at = await append_later(0.5)
    again = (await poll).json()
    assert [e["type"] for e in again["events"]] == ["job.progress"]
    assert time.monotonic() - committed_at < 1.0


async def test_many_long_polls_woken_by_one_commit_all_answer_it(make_stack: StackFactory, tmp_path: Path) -> None:
    """Every consumer long-polling a job is woken by the same commit at the same moment.
    Each used to read the page through a pooled connection of its own: the herd queued for
    the API's pool past its bound and most polls were answered ``503 ledger_unavailable``
    (logged as errors) by a ledger that was answering all along. Identical reads that
    start together share one read, so every poll answers the event."""
    polls_count = 120
    config = directory_config(tmp_path)
    # a small pool and a short bound, so a herd reading one connection each exceeds it
    config.update({"database": {"pool_max_size": 1}, "api": {"ledger_timeout_ms": 1000}})
    stack = make_stack(config)
    http = await stack.start_api()
    assert stack.api is not None
    notifier = stack.api.app.state.notifier
    job_id = await submit(http, stack)
    last = (await http.get(f"/jobs/{job_id}/events")).json()["events"][-1]["event_id"]
    limits = httpx.Limits(max_connections=polls_count, max_keepalive_connections=polls_count)
    async with httpx.AsyncClient(base_url=http.base_url, headers=http.headers, timeout=60, limits=limits) as many:
        polls = []
        for n in range(1, polls_count + 1):  # one by one: only the wake-up is simultaneous
            polls.append(
                asyncio.create_task(many.get(f"/jobs/{job_id}/events", params={"after": last, "wait_ms": 25_000}))
            )
            await eventually(lambda n=n: notifier.waiting >= n, timeout_s=10, interval_s=0.01, what=f"{n} waiting")
        pool = await stack.ledger()
        async with pool.acquire() as conn, conn.transaction():
            await append_event(conn, job_id, "job.progress", {"progress": {"stage": "searching"}})
        answers = await asyncio.gather(*polls)

    statuses = sorted({a.status_code for a in answers})
    assert statuses == [200], [a.text for a in answers if a.status_code != 200][:3]
    assert all([e["type"] for e in a.json()["events"]] == ["job.progress"] for a in answers)
    assert notifier.waiting == 0


async def test_long_polls_of_many_jobs_released_at_shutdown_answer_their_page(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    """When the API begins to stop every waiting long poll is woken at once (of every
    job): each read its page again through a connection of its own, and the herd was
    answered ``503 ledger_unavailable`` (logged as errors) at every deploy. A poll released
    by the stop answers the page it has — empty, as at its timeout — without a read."""
    from curaflow.api.app import begin_shutdown

    polls_count = 80
    config = directory_config(tmp_path)
    config.update({"database": {"pool_max_size": 1}, "api": {"ledger_timeout_ms": 200}})
    stack = make_stack(config)
    http = await stack.start_api()
    assert stack.api is not None
    notifier = stack.api.app.state.notifier
    limits = httpx.Limits(max_connections=polls_count, max_keepalive_connections=polls_count)
    async with httpx.AsyncClient(base_url=http.base_url, headers=http.headers, timeout=60, limits=limits) as many:
        polls = []
        for n in range(1, polls_count + 1):  # a job each: no read can be shared
            job_id = await submit(http, stack)
            last = (await http.get(f"/jobs/{job_id}/events")).json()["events"][-1]["event_id"]
            polls.append(
                asyncio.create_task(many.get(f"/jobs/{job_id}/events", params={"after": last, "wait_ms": 25_000}))
            )
            await eventually(lambda n=n: notifier.waiting >= n, timeout_s=10, interval_s=0.01, what=f"{n} waiting")
        begin_shutdown(stack.api.app)
        answers = await asyncio.gather(*polls)

    assert sorted({a.status_code for a in answers}) == [200], [a.text for a in answers if a.status_code != 200][:3]
    assert all(a.json()["events"] == [] and "next_after" not in a.json() for a in answers)


async def test_long_poll_on_a_terminal_job_answers_at_once(stack: Stack) -> None:
    http = stack.http
    assert http is not None
    job_id = await submit(http, stack)
    events = await follow(http, job_id)
    started = time.monotonic()
    page = (
        await http.get(f"/jobs/{job_id}/events", params={"after": events[-1]["event_id"], "wait_ms": 20_000})
    ).json()
    assert page["events"] == []
    assert time.monotonic() - started < 2.0

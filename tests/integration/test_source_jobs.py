"""Pixiv source rules at job level: real Temporal, real PostgreSQL, real worker processes.

The Pixiv replay runs in the test process in scripted fault mode; every worker of the
stack talks to it, so the test sees every request (time, parameters, answer).

One worker process serves most tests (:func:`tests.support.shared_stack`): each on a
target, a route and a Pixiv account of its own (:data:`SLOTS`) — so its token, rate gate
and memory of unavailable works are its own — with the replay reset before it. A test
that needs other ``[pixiv]`` settings or kills a worker has a stack of its own.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from curaflow.ledger.gates import read_gate
from curaflow.protocol.projection import project_job
from curaflow.sources.pixiv.replay.data import DeepSet
from tests.conftest import StackFactory
from tests.fakes.replay import Logged
from tests.jobs_support import (
    GrantedSlot,
    ReplayServer,
    SharedEnv,
    db_clock_lead,
    gaps,
    granted_slots,
    ordered,
    start_scheduled,
)
from tests.support import Stack, eventually, short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def source_stack(
    make_stack: StackFactory,
    tmp_path: Path,
    replay: ReplayServer,
    *,
    pixiv: dict[str, Any] | None = None,
    target: dict[str, Any] | None = None,
    **extra: Any,
) -> tuple[Stack, str]:
    out = f"out-{short_id()}"
    config: dict[str, Any] = {
        "pixiv": replay.config(**(pixiv or {})),
        "routes": {out: {"kind": "directory", "path": str(tmp_path / "delivered")}},
        "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [out], **(target or {})}],
        **extra,
    }
    return make_stack(config), out


def task(stack: Stack, tags: list[str] | None = None, **params: Any) -> dict[str, Any]:
    return stack.task(query={"tags": tags or ["オリジナル"]}, **params)


def protocol_error(record: Any) -> dict[str, Any]:
    return project_job(record)["error"]


#: Each shared test's slot (its target, account and route) → its target's fields.
SLOTS: dict[str, dict[str, Any]] = {
    "grant": {},
    "deep": {"query": {"tags": ["deep-tag"]}, "filters": {"min_bookmarks": 500}, "scan_limit": 1},
    "unavailable": {},
    "report": {"query": {"tags": ["風景"]}, "filters": {"exclude_ai": True}, "scan_limit": 1},
    "pages": {"query": {"tags": ["描き方"]}},
    "fallback": {"scan_limit": 1},
    "no-fallback": {"scan_limit": 1},
    "fallback-max": {"scan_limit": 1},
    "exhausted": {"query": {"tags": ["ゆずソフト"]}, "filters": {"min_bookmarks": 10**6}},
    "duplicates": {"query": {"tags": ["ゆずソフト"]}},
}


def shared_config(env: SharedEnv) -> dict[str, Any]:
    """The module's worker: per slot a target, a Pixiv account and a directory route
    (delivering to ``env.out(slot)``)."""
    targets = [
        {"id": slot, "account": slot, "query": {"tags": ["オリジナル"]}, "routes": [env.route(slot)], **target}
        for slot, target in SLOTS.items()
    ]
    return {
        "pixiv": env.replay.config(max_examined=10_000, accounts={slot: {} for slot in SLOTS}),  # deep scans page on
        "routes": {env.route(slot): {"kind": "directory", "path": str(env.out(slot))} for slot in SLOTS},
        "targets": targets,
    }


async def test_access_token_expires_mid_job_and_is_refreshed(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    # Pixiv says the token lives an hour; it dies after 1.5 s. With 1 s between
    # requests the first page comes 1 s after the token (0.5 s to spare) and the second
    # 2 s after it (0.5 s past its death): the second page meets the OAuth error; the
    # client refreshes once and repeats the call.
    replay.faults.token_lifetime_s = 1.5
    stack, _ = source_stack(
        make_stack,
        tmp_path,
        replay,
        pixiv={"replay_min_interval_ms": 1000},
        target={"filters": {"min_bookmarks": 100000}},  # only old works qualify: page 2
    )
    await stack.start_worker()
    record = await stack.wait_terminal(await stack.admit(task(stack)))

    assert record.cells[0].state == "submitted", record.cells[0]
    log = replay.faults.log
    assert [e.kind for e in log if e.kind != "image"] == ["auth", "search", "search", "auth", "search"]
    oauth = [e for e in log if e.error and "OAuth" in e.error]
    assert len(oauth) == 1 and oauth[0].params.get("offset") == "29"  # page 2, asked one place early
    assert log[-1].status == 200


async def test_rate_limit_then_success_honours_the_cooldown(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    replay.faults.search = ["rate_limit"]  # HTTP 403 {"error": {"message": "Rate Limit"}}
    stack, _ = source_stack(make_stack, tmp_path, replay, pixiv={"rate_limit_base_ms": 1500})
    await stack.start_worker()
    job_id = await stack.admit(task(stack))
    record = await stack.wait_terminal(job_id)

    assert record.cells[0].state == "submitted"
    first, second = replay.faults.of("search")[:2]
    assert first.status == 403 and first.error == "Rate Limit"
    assert second.status == 200
    assert second.at - first.at >= 1.5  # next_retry_delay = the gate's cooldown
    gate = await read_gate(await stack.ledger(), stack.settings.source_task_queue("default"))
    assert gate is not None and gate.rate_limits == 1 and gate.penalty == 1


async def test_rate_limit_that_never_ends_is_quota_exceeded(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    replay.faults.search = ["rate_limit_429"] * 20
    stack, _ = source_stack(
        make_stack, tmp_path, replay, pixiv={"rate_limit_base_ms": 100}, delivery={"source_max_attempts": 3}
    )
    await stack.start_worker()
    record = await stack.wait_terminal(await stack.admit(task(stack)))

    cell = record.cells[0]
    assert (cell.state, cell.reason) == ("failed", "rate_limited")
    error = protocol_error(record)
    assert error["code"] == "quota_exceeded" and error["retryable"] is True
    searches = replay.faults.of("search")
    assert len(searches) == 3
    # the ladder doubled: at least 0.1 s, then 0.2 s between attempts
    first_gap, second_gap = gaps([e.at for e in searches])
    assert first_gap >= 0.09 and second_gap >= 0.19


async def test_invalid_grant_is_auth_error_after_exactly_one_token_request(env: SharedEnv) -> None:
    env.replay.faults.auth = ["invalid_grant"] * 10
    stack = env.stack
    record = await env.run("grant")

    assert (record.cells[0].state, record.cells[0].reason) == ("failed", "auth_failed")
    assert (await stack.attempts(record.job_id))["acquire"] == 1  # not retried
    error = protocol_error(record)
    assert error["code"] == "auth_error" and error["retryable"] is False
    assert env.replay.faults.requests == ["auth"]  # no retry storm


async def test_deep_search_crosses_the_5000_offset_boundary(env: SharedEnv) -> None:
    deep = DeepSet(tag="deep-tag", count=5400, per_day=97, popular_ranks=frozenset({5150}))
    env.replay.faults.deep = deep
    record = await env.run("deep", ["deep-tag"])

    cell = record.cells[0]
    assert cell.state == "submitted" and cell.work_id == deep.work_id(5150)
    report = cell.candidate_report
    assert report is not None
    assert report.fetched == 5151 and report.rejected == 5150  # none skipped, none counted twice
    assert report.reasons == {"filtered:min_bookmarks": 5150}
    searches = env.replay.faults.of("search")
    assert all(e.status == 200 and int(e.params.get("offset", 0)) <= 5000 for e in searches)
    assert any("end_date" in e.params for e in searches)


async def test_unavailable_works_are_skipped_with_a_reason_and_the_scan_moves_on(env: SharedEnv) -> None:
    first, second, third, fourth = ordered("オリジナル")[:4]
    # the first work is listed as a restricted placeholder (visible:false, limit_* image),
    # the second answers 403 for its image, the third 404: the fourth is delivered.
    faults = env.replay.faults
    faults.restricted_works = {first}
    faults.forbidden_works = {second}
    faults.missing_works = {third}
    record = await env.run("unavailable")

    cell = record.cells[0]
    assert cell.state == "submitted" and cell.work_id == fourth
    report = cell.candidate_report
    assert report is not None and report.selected == fourth
    # the placeholder (limit_sanity_level) hides it from the account, not the work's fault
    assert (report.reasons["unavailable"], report.reasons["hidden"]) == (2, 1)
    reasons = {f["work_id"]: f["reason"] for f in report.filtered}
    assert reasons[first] == reasons[second] == reasons[third] == "unavailable"
    pool = await env.stack.ledger()
    rows = await pool.fetch("SELECT work_id, status FROM delivery_intents WHERE job_id = $1", record.job_id)
    assert {r["work_id"]: r["status"] for r in rows} == {second: "released", third: "released", fourth: "delivered"}


async def test_candidate_report_is_stored_on_the_cell(env: SharedEnv) -> None:
    works = ordered("風景")
    env.replay.faults.mutate = {works[0]: {"illust_ai_type": 2}, works[1]: {"x_restrict": 1}}
    record = await env.run("report", ["風景"], constraints={"scan_limit": 1})

    cell = record.cells[0]
    report = cell.candidate_report
    assert report is not None
    assert report.selected == cell.work_id == works[2]
    assert (report.fetched, report.rejected) == (3, 2)
    assert report.reasons == {"filtered:ai": 1, "filtered:r18": 1}
    job = project_job(record)
    assert job["result"]["scanned"] == 3
    assert job["result"]["filtered"] == [
        {"work_id": works[0], "reason": "other"},
        {"work_id": works[1], "reason": "other"},
    ]


async def test_multi_page_work_is_fetched_whole_with_the_referer(env: SharedEnv) -> None:
    env.replay.faults.images = [None, "truncate"]  # page 2 arrives cut short once
    record = await env.run("pages", ["描き方"])

    cell = record.cells[0]
    assert cell.state == "submitted" and cell.work_id == "126879163"
    assert cell.artifact is not None and [f.page for f in cell.artifact.files] == [0, 1, 2]
    images = env.replay.faults.of("image")
    assert len(images) == 4  # p0, p1 (cut), p1 again, p2: a complete page is never fetched twice
    assert all(e.referer == "https://app-api.pixiv.net/" for e in images)
    delivered = sorted(p.name for p in (env.out("pages") / "126879163").iterdir())
    assert delivered == ["126879163_p0.jpg", "126879163_p1.jpg", "126879163_p2.jpg", "manifest.json"]


# ---- fallback stages -------------------------------------------------------------------


async def test_scheduled_job_widens_the_scan_in_a_fallback_pass(env: SharedEnv) -> None:
    w1, w2 = ordered("オリジナル")[:2]
    env.replay.faults.missing_works = {w1}  # its image answers 404: the work's (a 403 only holds it back)
    stack = env.stack
    record = await stack.wait_terminal(await start_scheduled(stack, stages=3, target_id="fallback"))

    cell = record.cells[0]
    assert cell.state == "submitted" and cell.work_id == w2
    assert cell.fallback_pass == 1
    assert cell.candidate_report is not None and cell.candidate_report.reasons.get("unavailable") == 1
    pool = await stack.ledger()
    statuses = {
        r["work_id"]: r["status"]
        for r in await pool.fetch("SELECT work_id, status FROM delivery_intents WHERE job_id = $1", record.job_id)
    }
    assert statuses == {w1: "released", w2: "delivered"}


async def test_protocol_job_has_no_fallback_pass(env: SharedEnv) -> None:
    env.replay.faults.missing_works = {ordered("オリジナル")[0]}  # 404: the work's (a 403 is the source's)
    record = await env.run("no-fallback", constraints={"scan_limit": 1})

    assert record.cells[0].state == "no_candidate" and record.cells[0].fallback_pass == 0
    assert len(env.replay.faults.of("search")) == 1


async def test_fallback_passes_stop_at_the_maximum(env: SharedEnv) -> None:
    # The six newest works answer 404 for their images: each pass binds candidates that
    # all turn out unavailable, and the next, wider pass goes deeper (1, then 2, then 3
    # candidates) until the third and last pass.
    env.replay.faults.missing_works = set(ordered("オリジナル")[:6])
    stack = env.stack
    record = await stack.wait_terminal(await start_scheduled(stack, stages=3, target_id="fallback-max"))

    cell = record.cells[0]
    assert (cell.state, cell.reason, cell.fallback_pass) == ("no_candidate", "no_candidate", 2)
    assert len(env.replay.faults.of("search")) == 3
    assert len(env.replay.faults.of("image")) == 6  # every forbidden work requested once, none twice


async def test_a_scheduled_cell_released_on_unrecognised_answers_fails_as_the_sources_with_no_hold(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    """The six newest works' images answer a bare ``403`` (not recognised as the works':
    what the image host answers any request it refuses) and nothing holds them back
    (``pixiv.unrecognised_hold_ms = 0``, as when a hold ends between two passes of one
    job). Each later pass met the works its cell released only as ``released`` —
    counted unavailable, the works' — and the cell ended ``no_candidate`` with "widen the
    query"; the release now remembers the answer was not recognised, so the last pass
    counts those works as the source's too and the cell fails ``source_unusable``."""
    replay.faults.forbidden_works = set(ordered("オリジナル")[:6])
    stack, _ = source_stack(make_stack, tmp_path, replay, pixiv={"unrecognised_hold_ms": 0}, target={"scan_limit": 1})
    await stack.start_worker()
    record = await stack.wait_terminal(await start_scheduled(stack, stages=3), timeout_s=120)

    cell = record.cells[0]
    assert (cell.state, cell.reason, cell.fallback_pass) == ("failed", "source_unusable", 2), cell
    report = cell.candidate_report
    assert report is not None and report.reasons.get("unrecognised") == 3, report  # released by passes 0 and 1
    assert len(replay.faults.of("image")) == 6  # every work requested once, none twice


async def test_a_pass_that_exhausted_the_source_is_not_repeated(env: SharedEnv) -> None:
    # ゆずソフト has one work; it is filtered out, and the source has no next page: no
    # wider pass can find anything, so the cell ends at once.
    stack = env.stack
    record = await stack.wait_terminal(await start_scheduled(stack, stages=3, target_id="exhausted"))

    cell = record.cells[0]
    assert (cell.state, cell.reason, cell.fallback_pass) == ("no_candidate", "filter_exhausted", 0)
    assert len(env.replay.faults.of("search")) == 1


async def test_all_duplicates_end_at_once_as_duplicate_exhausted(env: SharedEnv) -> None:
    stack = env.stack
    first = await env.run("duplicates", ["ゆずソフト"])
    assert first.cells[0].state == "submitted"

    record = await stack.wait_terminal(await start_scheduled(stack, stages=3, target_id="duplicates"))

    cell = record.cells[0]
    assert (cell.state, cell.reason, cell.fallback_pass) == ("no_candidate", "duplicate_exhausted", 0)
    assert record.business_status == "duplicate_only"
    assert len(env.replay.faults.of("search")) == 2  # one per job: no stage burnt


# ---- one gate per account across processes -------------------------------------


def assert_one_gate(slots: list[GrantedSlot], requests: list[Logged], *, interval_ms: int, lead_s: float) -> None:
    """Every request the replay answered (token, API call, image; from any process) took
    its slot in the account's one gate, the slots ``interval_ms`` apart at least, and none
    arrived before its slot (``lead_s``: :func:`db_clock_lead`).

    Measured by the gate's own grants (:func:`granted_slots`), which a busy host does not
    skew: a request's arrival is late by its transit, so the gap between two arrivals is
    not the gate's (0.37 s seen under a load of 13 for an interval of 0.3 s: the first
    late, the second not). Load only delays an arrival, so "not before its slot" holds
    however busy the host is. Two processes gating apart (each its own gate row, or one
    leaving with no slot) grant fewer slots here than requests arrived; a request that
    left before its slot arrives before it.
    """
    assert [s.request for s in slots] == list(range(1, len(requests) + 1)), (len(slots), len(requests))
    spacing = [b.at_ms - a.at_ms for a, b in itertools.pairwise(slots)]  # in the order granted
    assert min(spacing) >= interval_ms, spacing
    arrivals = sorted(e.at for e in requests)  # the k-th arrival left at or after the k-th slot
    early = [(a, s.at_ms / 1000 - lead_s) for a, s in zip(arrivals, slots, strict=True) if a < s.at_ms / 1000 - lead_s]
    assert not early, early


async def test_one_gate_per_account_across_worker_processes(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    stack, _ = source_stack(
        make_stack,
        tmp_path,
        replay,
        pixiv={"replay_min_interval_ms": 300, "replay_max_concurrency": 1, "source_standby_poll_ms": 200},
    )
    pool = await stack.ledger()
    lead_s = await db_clock_lead(pool)
    async with granted_slots(pool, stack.settings.source_task_queue("default")) as slots:
        await stack.start_worker()
        # the first process owns the account's queue before the second one starts
        await eventually(lambda: "source_queue.owned" in stack.worker_log(1), what="the first worker owns the queue")
        await stack.start_worker()
        jobs = [await stack.admit(task(stack)) for _ in range(3)]
        records = [await stack.wait_terminal(j, timeout_s=90) for j in jobs]
        assert all(r.cells[0].state == "submitted" for r in records)
        assert len({r.cells[0].work_id for r in records}) == 3

        # every request of the account, from any process, let through by the account's one
        # gate at least 300 ms after the previous one (its slots), and none sent before its slot
        assert_one_gate(await slots(), replay.faults.log, interval_ms=300, lead_s=lead_s)
        owners = [i for i in (1, 2) if "source_queue.owned" in stack.worker_log(i)]
        assert owners == [1], owners  # one process serves the account's queue

        # the owner dies: the standby takes the queue over and keeps the spacing (the same
        # gate: its slots follow the dead owner's, 300 ms apart at least)
        before = len(replay.faults.log)
        stack.workers[0].kill()
        record = await stack.wait_terminal(await stack.admit(task(stack)), timeout_s=90)
        assert record.cells[0].state == "submitted"
        assert "source_queue.owned" in stack.worker_log(2)
        assert len(replay.faults.log) > before
        assert_one_gate(await slots(), replay.faults.log, interval_ms=300, lead_s=lead_s)


async def test_cooldown_survives_a_worker_restart(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    replay.faults.search = ["rate_limit"]
    stack, _ = source_stack(make_stack, tmp_path, replay, pixiv={"rate_limit_base_ms": 3000})
    worker = await stack.start_worker()
    job_a = await stack.admit(task(stack))
    pool = await stack.ledger()
    gate_key = stack.settings.source_task_queue("default")

    async def rate_limit_recorded() -> bool:
        state = await read_gate(pool, gate_key)
        return state is not None and state.rate_limits > 0

    await eventually(rate_limit_recorded, interval_s=0.02, what="the gate recorded the rate limit")
    limited_at = replay.faults.of("search")[0].at
    worker.kill()  # the process that saw (and recorded) the rate limit is gone

    await stack.start_worker()
    job_b = await stack.admit(task(stack))  # another job of the same account
    records = [await stack.wait_terminal(j, timeout_s=90) for j in (job_a, job_b)]

    assert all(r.cells[0].state == "submitted" for r in records)
    later = [e for e in replay.faults.log if e.at > limited_at]
    assert later and min(e.at for e in later) - limited_at >= 2.9  # nobody called Pixiv during the cooldown

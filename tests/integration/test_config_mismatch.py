"""A worker that does not know a route or a source account a job names costs one attempt,
never the cell (the unknown is cheap).

Scenario: an operator adds a route (or a target's account) and rolls the new configuration
out worker by worker. For a while the processes' configurations differ: the API, or a new
worker, admits a job naming the new route, and its ``deliver`` lands on a worker still
running the configuration before. Until 2026-12-05 that worker ended the cell ``failed`` /
``configuration_error`` for good, although the next worker would have delivered it. Now the
attempt fails retryable (``configuration_mismatch``, the step's own backoff), touches
nothing of the cell, is counted and logged for the operator, and a job whose deadline passes
while only such attempts happened names it (``held_by`` owner ``curaflow``, kind
``configuration``).

The activities run in the test process (``ActivityEnvironment``) with a worker's real
dependencies on the session's PostgreSQL; the last test runs two real worker processes
with different configurations against the real Temporal dev server.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.deliver import DeliverActivity
from activities.deps import ActivityDeps
from activities.fetch import FetchActivity
from activities.search import SearchActivity
from curaflow.domain.cells import CellState
from curaflow.domain.holds import Hold
from curaflow.domain.messages import DeliverInput, FetchInput, RouteRef, SearchInput, TargetSpec
from curaflow.domain.models import CandidateReport, Work
from curaflow.domain.verdicts import FinishCause
from curaflow.ledger import cells
from curaflow.ledger.finish import finish_job
from curaflow.observability import metrics
from curaflow.protocol.projection import project_job
from curaflow.routes import UnsupportedRoute
from tests.conftest import StackFactory
from tests.deps_support import opened_deps
from tests.fakes.replay import ReplayServer
from tests.fakes.webhook import WebhookReceiver
from tests.support import Stack, eventually, job_env, ledger_job, short_id, whsec

pytestmark = pytest.mark.integration

#: The step's retry policy as the workflow schedules ``deliver`` (long waits, so the hold
#: the attempt leaves outlasts the test).
POLICY = RetryPolicy(initial_interval=timedelta(minutes=10), backoff_coefficient=2.0, maximum_attempts=12)


@pytest.fixture
async def deps(make_stack: StackFactory, tmp_path: Path, replay: ReplayServer) -> AsyncIterator[tuple[Stack, Any]]:
    async with opened_deps(make_stack, tmp_path, replay) as opened:
        yield opened


def attempt(job_id: str, n: int, policy: RetryPolicy | None = POLICY) -> ActivityEnvironment:
    """An environment running attempt ``n`` of job ``job_id``'s step scheduled with
    ``policy``, as the job's own execution runs it (:func:`tests.support.job_env`)."""
    env = job_env(job_id)
    env.info = dataclasses.replace(env.info, attempt=n, retry_policy=policy)
    return env


@pytest.fixture(autouse=True)
def names_of_this_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """This test's names get series of their own whatever names the process met before:
    a process gives series to the first few names of a kind only
    (:class:`curaflow.observability.metrics.MismatchNames`)."""
    monkeypatch.setattr(metrics, "_MISMATCH_NAMES", metrics.MismatchNames())


def mismatches(kind: str, name: str) -> float:
    return REGISTRY.get_sample_value("curaflow_config_mismatch_total", {"kind": kind, "name": name}) or 0.0


async def _waiting_cell(pool: Any, route: RouteRef) -> DeliverInput:
    """A job whose one cell's work is stored and waits for ``route`` (its intent reserved)."""
    target = TargetSpec(target_id="demo", routes=[route])
    job_id = await ledger_job(pool, target, label="mismatch")
    work = Work(work_id=f"w{short_id()}")
    async with pool.acquire() as conn, conn.transaction():
        await cells.bind_work(conn, job_id, target, [work], CandidateReport())
        await cells.artifact_ready(conn, job_id, "demo", work.work_id, {"work_id": work.work_id, "files": []})
    return DeliverInput(job_id=job_id, target=target, route=route, heartbeat_interval_ms=1000)


async def _untouched(pool: Any, job_id: str) -> None:
    """The cell is as the binding left it: its state, no step opened, no lease, no attempt."""
    row = await pool.fetchrow(
        "SELECT state, stage, terminal_reason_code AS reason_code, lease_owner, attempt_count AS attempt "
        "FROM cells WHERE job_id = $1",
        job_id,
    )
    assert (row["state"], row["reason_code"], row["lease_owner"]) == (CellState.ARTIFACT_READY, None, None), dict(row)
    statuses = await pool.fetch("SELECT status, attempts FROM delivery_intents WHERE job_id = $1", job_id)
    assert [(r["status"], r["attempts"]) for r in statuses] == [("reserved", 0)]


@pytest.mark.parametrize("why", ["not_configured", "kind_not_registered", "configured_as_another_kind"])
async def test_a_route_this_worker_does_not_know_costs_one_attempt_not_the_cell(
    deps: tuple[Stack, ActivityDeps], why: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    stack, opened = deps
    route = RouteRef(name=f"hook-{short_id()}", kind="webhook")  # the new route: not in this worker's configuration
    if why == "configured_as_another_kind":
        # The route's name is this worker's, but the job names it as a webhook: the
        # operator changed the route's kind, and this worker runs the configuration before
        # (its directory). Delivering here would put the work where the job does not send it.
        [configured] = stack.settings.route_refs(stack.settings.targets[0])
        assert configured.kind == "directory"
        route = RouteRef(name=configured.name, kind="webhook", task_queue=configured.task_queue)
    if why == "kind_not_registered":
        route = RouteRef(name=f"chat-{short_id()}", kind="chat")

        def unregistered(name: str, kind: str | None = None) -> Any:
            raise UnsupportedRoute("route kind 'chat' is not registered (known: ['directory', …])")

        monkeypatch.setattr(opened, "route", unregistered)
    inp = await _waiting_cell(opened.pool, route)
    before = mismatches("route", route.name)

    with pytest.raises(ApplicationError) as failed:
        await attempt(inp.job_id, 2).run(DeliverActivity(opened).deliver, inp)

    # Retryable, typed by the reason the catalogue owns, after the step's own backoff
    # (attempt 2 of 10 min doubling: 20 min) — not the cell's end.
    err = failed.value
    assert (err.type, err.non_retryable) == ("configuration_mismatch", False), err
    assert err.next_retry_delay == timedelta(minutes=20)
    await _untouched(opened.pool, inp.job_id)
    assert not (tmp_path / "delivered").exists() or not any((tmp_path / "delivered").iterdir())
    assert mismatches("route", route.name) == before + 1
    # The reserved intent remembers when the next attempt is due, for the finish to name.
    held = await opened.pool.fetchrow(
        "SELECT held_until, held_kind, (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now "
        "FROM delivery_intents WHERE job_id = $1",
        inp.job_id,
    )
    assert held["held_kind"] == "configuration"
    assert held["now"] + 19 * 60_000 < held["held_until"] <= held["now"] + 20 * 60_000

    # The deadline passes while only such attempts happened: the job's report names it.
    async with opened.pool.acquire() as conn:
        finished = await finish_job(conn, inp.job_id, cause=FinishCause.DEADLINE)
    assert finished is not None
    [cell] = finished.record.cells
    assert (cell.state, cell.reason) == ("failed", "execution_timeout")
    assert cell.held_by == Hold(owner="curaflow", name=route.name, kind="configuration", until=held["held_until"])
    detail = project_job(finished.record)["error"]["detail"]["held_by"]
    assert (detail["owner"], detail["kind"], detail["name"]) == ("curaflow", "configuration", route.name)
    assert "does not know route" in (cell.reason_message or "") and "same configuration" in (cell.reason_message or "")


async def test_the_last_attempt_leaves_no_hold(deps: tuple[Stack, ActivityDeps]) -> None:
    _, opened = deps
    route = RouteRef(name=f"hook-{short_id()}", kind="webhook")
    inp = await _waiting_cell(opened.pool, route)
    with pytest.raises(ApplicationError) as failed:
        await attempt(inp.job_id, 12).run(DeliverActivity(opened).deliver, inp)
    assert (failed.value.type, failed.value.non_retryable) == ("configuration_mismatch", False)
    await _untouched(opened.pool, inp.job_id)
    kind = await opened.pool.fetchval("SELECT held_kind FROM delivery_intents WHERE job_id = $1", inp.job_id)
    assert kind is None


@pytest.mark.parametrize("step", ["search", "fetch"])
async def test_a_source_account_this_worker_does_not_know_costs_one_attempt(
    deps: tuple[Stack, ActivityDeps], step: str
) -> None:
    stack, opened = deps
    settings = stack.settings
    account = f"acct-{short_id()}"  # the target's new account: not in this worker's configuration
    target = TargetSpec(target_id="demo", account=account, routes=settings.route_refs(settings.targets[0]))
    job_id = await ledger_job(opened.pool, target, label="mismatch")
    if step == "fetch":
        async with opened.pool.acquire() as conn, conn.transaction():
            await cells.bind_work(conn, job_id, target, [Work(work_id=f"w{short_id()}")], CandidateReport())
    before = mismatches("source", account)
    cell = "SELECT state, stage, lease_owner, lease_until, attempt_count, updated_at FROM cells WHERE job_id = $1"
    bound = dict(await opened.pool.fetchrow(cell, job_id))
    with pytest.raises(ApplicationError) as failed:
        if step == "search":
            await attempt(job_id, 1).run(SearchActivity(opened).search, SearchInput(job_id=job_id, target=target))
        else:
            await attempt(job_id, 1).run(FetchActivity(opened).fetch, FetchInput(job_id=job_id, target=target))
    assert (failed.value.type, failed.value.non_retryable) == ("configuration_mismatch", False), failed.value
    assert mismatches("source", account) == before + 1
    # Before the step opened: the cell as it was (no lease, no stage, no attempt counted).
    assert dict(await opened.pool.fetchrow(cell, job_id)) == bound
    assert bound["lease_owner"] is None and bound["state"] == ("selected" if step == "fetch" else "pending")


@pytest.mark.slow
async def test_a_rolling_change_delivers_once_through_the_worker_that_knows_the_route(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer, webhook: WebhookReceiver
) -> None:
    """Two real worker processes: the first runs the configuration before the route was
    added, the second the one after. The job is admitted with the new route; its deliver
    lands on the old worker first (the only one running), which fails that attempt alone;
    once the new worker runs, a retry lands there and delivers — once."""
    hook_name = f"hook-{short_id()}"
    old = f"out-{short_id()}"
    target = {"id": "demo", "query": {"tags": ["x"]}, "routes": [old]}
    stack = make_stack(
        {
            "pixiv": replay.config(),
            "routes": {old: {"kind": "directory", "path": str(tmp_path / "delivered")}},
            "targets": [target],
            # Room for the attempts the old worker takes while the new one starts.
            "delivery": {"max_attempts": 1000, "retry_initial_interval_ms": 200, "retry_max_interval_ms": 500},
        }
    )
    await stack.start_worker()  # the configuration before
    stack.reconfigure(
        {
            "routes": {hook_name: {"kind": "webhook", "url": webhook.url + "/h", "secret": whsec()}},
            "targets": [{**target, "routes": [hook_name]}],
        }
    )
    job_id = await stack.admit(stack.task(query={"tags": ["x"]}))  # admitted with the new route
    pool = await stack.ledger()

    async def met() -> bool:
        row = await pool.fetchrow(
            "SELECT state, terminal_reason_code AS reason_code FROM cells WHERE job_id = $1", job_id
        )
        assert row["state"] != "failed", dict(row)  # never the cell's end (it was, until 2026-12-05)
        return "config.mismatch" in stack.worker_log(1) and hook_name in stack.worker_log(1)

    await eventually(met, timeout_s=60, what="the old worker met the route it does not know")
    # The cell is untouched meanwhile: not failed, nothing claimed on the route.
    row = await pool.fetchrow(
        "SELECT state, terminal_reason_code AS reason_code, lease_owner FROM cells WHERE job_id = $1", job_id
    )
    assert (row["state"], row["reason_code"]) == ("artifact_ready", None), dict(row)
    intent = await pool.fetchrow("SELECT status, attempts FROM delivery_intents WHERE job_id = $1", job_id)
    assert (intent["status"], intent["attempts"]) == ("reserved", 0), dict(intent)

    await stack.start_worker()  # the configuration after: the rollout reaches the next worker
    job = await stack.wait_terminal(job_id, timeout_s=120)

    [cell] = job.cells
    assert (cell.state, job.business_status) == ("submitted", "success"), job
    assert webhook.works() == [cell.work_id]  # delivered once
    assert "config.mismatch" not in stack.worker_log(2)

"""A run started under an admitted job's id with an edited ``JobInput`` gets nothing done.

A Temporal client (or an operator using the UI's "start workflow like this one" and editing
the input) can start ``JobWorkflow`` under an admitted job's id with the job's stored input
edited. That run is ``JobWorkflow`` under the job id, so its caller passes
(``activities.caller``). The job's input stored at admission (``jobs.workflow_input``) is the
only truth of what the job does; each edit (``forged``):

* ``route``: the target ``demo``'s routes name route B, another configured route, where the
  job was admitted with route A. Before 2026-12-07 its steps trusted every field of the
  input: the work was delivered to B and the ledger said ``route=B delivered``. Now each
  step whose input asks for something the stored input does not hold is refused before any
  write (``foreign_caller``);
* ``deadline``: an earlier ``deadline_at_ms`` (one already behind: the job's creation).
  No step reads it, the workflow does: the forged run stopped at once and its ``finish``
  ended the job ``expired`` (``execution_timeout``) before 2026-12-07;
* ``targets``: the target left out of the input (none left): its cell was never stepped and
  the forged run's ``finish`` judged it open — ``failed`` / ``internal_error``;
* ``source_task_queues`` (:func:`test_a_forged_source_queue_ends_nothing`): the account's
  source step scheduled on a queue no worker polls; it waited there its queued budget and
  the forged run's ``finish`` ended the job ``queued_too_long``, blaming curaflow.

The forged run's ``finish`` compares the whole input the run holds with the stored one and
is refused the same way (``foreign_caller``, nothing written); the job is left as its real
run left it.

Two ways the forged run takes the id, on a real worker (the dev server, PostgreSQL, the
Pixiv replay, two directory routes):

* ``terminate_existing``: the job's real run (started with the admitted input, its start
  deferred) is terminated by the forged start (``--id-conflict-policy TerminateExisting``).
  The job then ends as a job whose run was terminated does: ``cancelled`` /
  ``execution_terminated`` — the forged run's search attributes (it publishes ``JobType``
  and ``JobStatus``, as the job's own run would) do not make the reconciler read its
  refusal as the job's failure.
* ``deferred``: the forged run starts while the job's start is deferred (no run yet). It
  never held the job, so the reconciler starts the job's own run with the admitted input,
  which delivers to route A — also when the forged run ran steps of the job first
  (:func:`test_a_forged_run_that_ran_the_jobs_steps_is_no_verdict_and_the_job_runs_again`:
  the steps it ran were the job's own; a step of it, or its ``finish``, refused).

The reconciler of the stack's processes does not tick here (a long interval): the test
ticks it once the forged run closed, so the ledger rows the forged run left are read
before anything else writes.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError

from activities.caller import FOREIGN_CALLER
from curaflow.domain.messages import JobInput, RouteRef
from curaflow.domain.presentation import job_search_attributes
from curaflow.jobs.admission import Admitter
from curaflow.ledger.db import now_ms
from curaflow.ledger.jobs import NewJob, insert_job, mark_workflow_started
from curaflow.ledger.reconciler import tick
from curaflow.temporal.connection import start_job_workflow
from tests.integration.test_foreign_caller import ledger_rows, task
from tests.jobs_support import spec_for
from tests.support import DemoStack, demo_stack, recorded_history, short_id, temporal_workflow, terminal_job

pytestmark = pytest.mark.integration

#: The route the job's targets deliver to.
ROUTE_A = "route-a"
#: The route the forged input names instead of the job's.
ROUTE_B = "route-b"
#: The histories of forged runs kept for replay (``CURAFLOW_RECORD_HISTORIES=1``): the edit
#: → the file's name (``tests/histories``; recorded before the refusal too, ``…_before_refusal_…``).
RECORDED = {"deadline": "job_forged_deadline_core_v3", "targets": "job_forged_target_left_out_core_v3"}


@dataclass
class Env:
    demo: DemoStack
    out_a: Path
    out_b: Path


@pytest.fixture(scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str) -> AsyncIterator[Env]:
    tmp = tmp_path_factory.mktemp("forged")
    out_a, out_b = tmp / "out-a", tmp / "out-b"
    config = {
        "routes": {
            ROUTE_A: {"kind": "directory", "path": str(out_a)},
            ROUTE_B: {"kind": "directory", "path": str(out_b)},
        },
        "targets": [
            {"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [ROUTE_A]},
            {"id": "other", "query": {"tags": ["風景"]}, "routes": [ROUTE_A]},
        ],
        # The test ticks the reconciler itself, once the forged run closed.
        "reconcile_interval_ms": 3_600_000,
    }
    async with demo_stack(tmp, temporal_address, database_url, config) as demo:
        yield Env(demo, out_a, out_b)


def delivered(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file()] if folder.exists() else []


def forged(job: JobInput, how: str) -> JobInput:
    """The job's input with one thing edited (``how``, the module doc's list)."""
    if how == "route":
        target = job.targets[0]
        other = target.model_copy(update={"routes": [RouteRef(name=ROUTE_B, kind="directory")]})
        return job.model_copy(update={"targets": [other, *job.targets[1:]]})
    if how == "deadline":
        return job.model_copy(update={"deadline_at_ms": job.created_at_ms})
    if how == "targets":
        return job.model_copy(update={"targets": job.targets[:-1]})
    raise AssertionError(how)


async def ended_at(pool: asyncpg.Pool, job_id: str) -> int | None:
    return await pool.fetchval("SELECT completed_at FROM jobs WHERE job_id = $1", job_id)  # type: ignore[no-any-return]


async def admitted_job(env: Env, pool: asyncpg.Pool) -> JobInput:
    """A Task's job on ``demo`` (route A), admitted and marked started: no run of its own yet."""
    admitted = await Admitter(env.demo.stack.settings, pool, None).admit(task(f"forged-{short_id()}"), start=False)
    job = admitted.job_input
    assert job is not None and [r.name for r in job.targets[0].routes] == [ROUTE_A]
    async with pool.acquire() as conn:
        await mark_workflow_started(conn, job.job_id)
    return job


async def inserted_job(env: Env, pool: asyncpg.Pool, targets: list[str], **budgets: int) -> JobInput:
    """A job of ``targets`` inserted as a plan's occurrence is (its budgets edited by
    ``budgets``), marked started: no run of its own yet."""
    stack = env.demo.stack
    created = now_ms()
    job = JobInput(
        job_id=f"forged@2026-01-01T{short_id()}",
        plan_id="forged",
        schedule_id="forged",
        trigger="schedule",
        created_at_ms=created,
        deadline_at_ms=created + stack.settings.budgets.default_deadline_ms,
        targets=[spec_for(stack, t) for t in targets],
        budgets=stack.settings.budgets_model().model_copy(update=budgets),
        source_task_queues=stack.settings.source_task_queues(),
    )
    async with pool.acquire() as conn:
        await insert_job(conn, NewJob(job_input=job))
        await mark_workflow_started(conn, job.job_id)
    return job


def record_history(env: Env, workflow_id: str, name: str) -> None:
    """Write the id's latest run's history to tests/histories (``CURAFLOW_RECORD_HISTORIES=1``)."""
    if os.environ.get("CURAFLOW_RECORD_HISTORIES") != "1":
        return
    done = temporal_workflow(env.demo.address, "show", "-w", workflow_id, "-o", "json")
    assert done.returncode == 0, done.stderr
    (Path(__file__).resolve().parents[1] / "histories" / f"{name}.json").write_text(recorded_history(done.stdout))


async def real_run(env: Env, job: JobInput) -> WorkflowHandle[Any, Any]:
    """The job's own run, with the admitted input, its start deferred."""
    return await env.demo.client.start_workflow(
        "JobWorkflow", job, id=job.job_id, task_queue=env.demo.stack.task_queue, start_delay=timedelta(minutes=10),
        search_attributes=job_search_attributes(job), execution_timeout=timedelta(minutes=30),
    )  # fmt: skip


async def run_forged(env: Env, forged_input: JobInput) -> Any:
    """Start ``forged_input`` under its job's id (terminating any run there) and wait for
    its end: its result, or the ``WorkflowFailureError`` it failed with."""
    handle = await env.demo.client.start_workflow(
        "JobWorkflow", forged_input, id=forged_input.job_id, task_queue=env.demo.stack.task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.TERMINATE_EXISTING, execution_timeout=timedelta(minutes=5),
    )  # fmt: skip
    try:
        return await asyncio.wait_for(handle.result(), 120)
    except WorkflowFailureError as failed:
        return failed


def assert_refused(outcome: Any) -> None:
    """The forged run failed with a ``foreign_caller`` refusal, non-retryable."""
    assert isinstance(outcome, WorkflowFailureError), outcome
    refusal: BaseException | None = outcome.cause
    while refusal is not None and not isinstance(refusal, ApplicationError):
        refusal = refusal.__cause__
    assert isinstance(refusal, ApplicationError) and refusal.type == FOREIGN_CALLER, outcome.cause
    assert refusal.non_retryable


async def reconciled(env: Env, pool: asyncpg.Pool, job: JobInput) -> dict[str, Any]:
    """Tick the reconciler (it starts the job's own run with ``job``) until the job ended;
    the job as ``GET /jobs/{id}`` answers it."""
    main = env.demo.stack.task_queue

    async def start(job_id: str) -> None:
        assert job_id == job.job_id
        await start_job_workflow(env.demo.client, job, main)

    for _ in range(240):
        await tick(pool, start, env.demo.client, task_queue=main)
        if await ended_at(pool, job.job_id) is not None:
            break
        await asyncio.sleep(0.5)
    return await terminal_job(env.demo.http, job.job_id, timeout_s=5)


async def assert_terminated(env: Env, pool: asyncpg.Pool, job: JobInput, real: WorkflowHandle[Any, Any]) -> None:
    """The job's own run was terminated by the forged start, before it ran a step: the job
    ends as a job whose run was terminated, nothing delivered."""
    ended = await reconciled(env, pool, job)
    real_run = env.demo.client.get_workflow_handle(job.job_id, run_id=real.result_run_id)
    assert (await real_run.describe()).status == WorkflowExecutionStatus.TERMINATED
    assert ended["status"] == "cancelled", ended
    assert ended["error"]["detail"]["internal_code"] == "execution_terminated", ended
    intents = await pool.fetch("SELECT route FROM delivery_intents WHERE job_id = $1", job.job_id)
    assert not intents


@pytest.mark.parametrize("how", ["route", "deadline", "targets"])
@pytest.mark.parametrize("taken", ["terminate_existing", "deferred"])
async def test_a_forged_job_input_under_the_jobs_id_gets_nothing_done(
    env: Env, ledger_pool: asyncpg.Pool, taken: str, how: str
) -> None:
    job = await admitted_job(env, ledger_pool)
    real = await real_run(env, job) if taken == "terminate_existing" else None
    before = await ledger_rows(ledger_pool, job.job_id)

    outcome = await run_forged(env, forged(job, how))
    if taken == "deferred" and how in RECORDED:
        record_history(env, job.job_id, RECORDED[how])

    assert not delivered(env.out_b), "the forged run delivered to route B"
    assert await ledger_rows(ledger_pool, job.job_id) == before, "the forged run changed the job's rows"
    assert_refused(outcome)
    if real is not None:
        await assert_terminated(env, ledger_pool, job, real)
    else:
        # The truth: the job never ran; its own run, started by the reconciler, delivers to A.
        ended = await reconciled(env, ledger_pool, job)
        assert ended["status"] == "succeeded", ended
        intents = await ledger_pool.fetch("SELECT route, status FROM delivery_intents WHERE job_id = $1", job.job_id)
        assert [(r["route"], r["status"]) for r in intents] == [(ROUTE_A, "delivered")]
        assert delivered(env.out_a)
    assert not delivered(env.out_b)


async def test_a_forged_source_queue_ends_nothing(env: Env, ledger_pool: asyncpg.Pool) -> None:
    """The account's source step scheduled on a queue no worker polls waits there its queued
    budget (3 s here) and fails ``SCHEDULE_TO_START``: the forged run's ``finish`` is refused."""
    job = await inserted_job(env, ledger_pool, ["demo"], queued_timeout_ms=3_000)
    account = job.targets[0].account
    real = await real_run(env, job)
    before = await ledger_rows(ledger_pool, job.job_id)
    nowhere = {**job.source_task_queues, account: f"{env.demo.stack.task_queue}-nobody-polls-{short_id()}"}

    outcome = await run_forged(env, job.model_copy(update={"source_task_queues": nowhere}))

    assert await ledger_rows(ledger_pool, job.job_id) == before, "the forged run changed the job's rows"
    assert_refused(outcome)
    await assert_terminated(env, ledger_pool, job, real)


@pytest.mark.parametrize("how", ["route", "targets"])
async def test_a_forged_run_that_ran_the_jobs_steps_is_no_verdict_and_the_job_runs_again(
    env: Env, ledger_pool: asyncpg.Pool, how: str
) -> None:
    """A two-target job's input with one target edited (``route``: ``demo`` names route B)
    or left out (``targets``: ``other``), its start deferred: the forged run runs the other
    target's steps — the job's own, as its stored input holds them: bound, fetched,
    delivered to A — and is refused (the edited target's step, or its ``finish``), so the
    edited target's cell is left as it was. The reconciler reads the refused run as no
    verdict though it started the job, and starts the job's own run, which runs that target
    too: both delivered to A. Before 2026-12-07 the reconciler ended the job for the refused
    run's failure (``workflow_failed``: the left cell ``internal_error``)."""
    job = await inserted_job(env, ledger_pool, ["demo", "other"])
    left = "demo" if how == "route" else "other"

    outcome = await run_forged(env, forged(job, how))

    assert_refused(outcome)
    assert await ended_at(ledger_pool, job.job_id) is None, "the forged run ended the job"
    cells = await ledger_pool.fetch("SELECT target_id, state FROM cells WHERE job_id = $1", job.job_id)
    states = {r["target_id"]: r["state"] for r in cells}
    assert states[left] == "pending" and states[({"demo", "other"} - {left}).pop()] == "submitted", states
    ended = await reconciled(env, ledger_pool, job)
    assert ended["status"] == "succeeded", ended
    intents = await ledger_pool.fetch(
        "SELECT target_id, route, status FROM delivery_intents WHERE job_id = $1 ORDER BY target_id", job.job_id
    )
    assert [(r["target_id"], r["route"], r["status"]) for r in intents] == [
        ("demo", ROUTE_A, "delivered"),
        ("other", ROUTE_A, "delivered"),
    ]
    assert not delivered(env.out_b)

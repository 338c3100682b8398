"""A run started under an admitted job's id with an edited ``JobInput`` gets nothing done.

A Temporal client (or an operator using the UI's "start workflow like this one" and editing
the input) can start ``JobWorkflow`` under an admitted job's id with the job's stored input
edited — here the target ``demo``'s routes name route B, another configured route, where
the job was admitted with route A. That run is ``JobWorkflow`` under the job id, so its
caller passes (``activities.caller``); before, its steps trusted every field of its input:
the work was delivered to B and the ledger said ``route=B delivered``. The job's input
stored at admission (``jobs.workflow_input``) is the only truth of what the job does: each
step whose input asks for something that input does not hold is refused before any write
(``foreign_caller``), the forged run's ``finish`` is refused the same way, and the job is
left as its real run left it.

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
  which delivers to route A.

The reconciler of the stack's processes does not tick here (a long interval): the test
ticks it once the forged run closed, so the ledger rows the forged run left are read
before anything else writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError

from activities.caller import FOREIGN_CALLER
from curaflow.domain.messages import JobInput, RouteRef
from curaflow.domain.presentation import job_search_attributes
from curaflow.jobs.admission import Admitter
from curaflow.ledger.jobs import mark_workflow_started
from curaflow.ledger.reconciler import tick
from curaflow.temporal.connection import start_job_workflow
from tests.integration.test_foreign_caller import ledger_rows, task
from tests.support import DemoStack, demo_stack, short_id, terminal_job

pytestmark = pytest.mark.integration

#: The route the forged input names instead of the job's.
ROUTE_B = "route-b"

Env = tuple[DemoStack, Path]


@pytest.fixture(scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str) -> AsyncIterator[Env]:
    tmp = tmp_path_factory.mktemp("forged")
    out_b = tmp / "out-b"
    config = {
        "routes": {ROUTE_B: {"kind": "directory", "path": str(out_b)}},
        # The test ticks the reconciler itself, once the forged run closed.
        "reconcile_interval_ms": 3_600_000,
    }
    async with demo_stack(tmp, temporal_address, database_url, config) as demo:
        yield demo, out_b


def delivered(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file()] if folder.exists() else []


def forged(job: JobInput) -> JobInput:
    """The job's input with ``demo``'s routes edited to name route B only."""
    target = job.targets[0]
    other = target.model_copy(update={"routes": [RouteRef(name=ROUTE_B, kind="directory")]})
    return job.model_copy(update={"targets": [other]})


async def ended_at(pool: asyncpg.Pool, job_id: str) -> int | None:
    return await pool.fetchval("SELECT completed_at FROM jobs WHERE job_id = $1", job_id)  # type: ignore[no-any-return]


@pytest.mark.parametrize("taken", ["terminate_existing", "deferred"])
async def test_a_forged_job_input_under_the_jobs_id_gets_nothing_done(
    env: Env, ledger_pool: asyncpg.Pool, taken: str
) -> None:
    demo, out_b = env
    main = demo.stack.task_queue
    admitted = await Admitter(demo.stack.settings, ledger_pool, None).admit(task(f"forged-{short_id()}"), start=False)
    job = admitted.job_input
    assert job is not None and [r.name for r in job.targets[0].routes] != [ROUTE_B]
    async with ledger_pool.acquire() as conn:
        await mark_workflow_started(conn, job.job_id)
    if taken == "terminate_existing":
        # The job's own run, with the admitted input, its start deferred.
        real = await demo.client.start_workflow(
            "JobWorkflow", job, id=job.job_id, task_queue=main, start_delay=timedelta(minutes=10),
            search_attributes=job_search_attributes(job), execution_timeout=timedelta(minutes=30),
        )  # fmt: skip
    before = await ledger_rows(ledger_pool, job.job_id)

    handle = await demo.client.start_workflow(
        "JobWorkflow", forged(job), id=job.job_id, task_queue=main,
        id_conflict_policy=WorkflowIDConflictPolicy.TERMINATE_EXISTING, execution_timeout=timedelta(minutes=5),
    )  # fmt: skip
    try:
        outcome: Any = await asyncio.wait_for(handle.result(), 120)
    except WorkflowFailureError as failed:
        outcome = failed
    assert not delivered(out_b), "the forged run delivered to route B"
    assert await ledger_rows(ledger_pool, job.job_id) == before, "the forged run changed the job's rows"
    assert isinstance(outcome, WorkflowFailureError), outcome
    refusal: BaseException | None = outcome.cause
    while refusal is not None and not isinstance(refusal, ApplicationError):
        refusal = refusal.__cause__
    assert isinstance(refusal, ApplicationError) and refusal.type == FOREIGN_CALLER, outcome.cause
    assert refusal.non_retryable

    async def start(job_id: str) -> None:
        assert job_id == job.job_id
        await start_job_workflow(demo.client, job, main)

    for _ in range(240):
        await tick(ledger_pool, start, demo.client, task_queue=main)
        if await ended_at(ledger_pool, job.job_id) is not None:
            break
        await asyncio.sleep(0.5)
    ended = await terminal_job(demo.http, job.job_id, timeout_s=5)
    assert not delivered(out_b)
    intents = await ledger_pool.fetch("SELECT route, status FROM delivery_intents WHERE job_id = $1", job.job_id)
    if taken == "terminate_existing":
        # The truth: the job's own run was terminated, before it ran a step.
        real_run = demo.client.get_workflow_handle(job.job_id, run_id=real.result_run_id)
        assert (await real_run.describe()).status == WorkflowExecutionStatus.TERMINATED
        assert ended["status"] == "cancelled", ended
        assert ended["error"]["detail"]["internal_code"] == "execution_terminated", ended
        assert not intents and not delivered(demo.out)
    else:
        # The truth: the job never ran; its own run, started by the reconciler, delivers to A.
        assert ended["status"] == "succeeded", ended
        assert [(r["route"], r["status"]) for r in intents] == [(job.targets[0].routes[0].name, "delivered")]
        assert delivered(demo.out)

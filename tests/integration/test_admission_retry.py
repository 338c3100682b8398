"""``start_job`` after an ``admission`` update that failed without admission's answer.

Temporal answers an update id from the run's first outcome for as long as the run lives
(:func:`curaflow.jobs.submit.admission_update_id`: one id per Task text). An outcome that
is no protocol refusal — the ``admit`` step itself failed, the ledger away for the whole
of its budget — would then be the run's answer to that Task for ever; ``start_job`` asks
once more under an id of its own (DESIGN.md "The same Task, the same update id").

The session's dev server, the real ``JobWorkflow`` and the real ``admit`` activity on the
test's ledger, run by a worker in the test process: a job admitted from Task A runs (its
source queue has no worker: it stays running), then Task B — the same key and params,
another ``correlation_id``: the same job, but another text, so the run admits it with the
``admit`` step — arrives while PostgreSQL refuses the jobs table with ``connection_failure``
(SQLSTATE 08006, a trigger of the real server) for every attempt of the step's budget. The
budget is the test's scale of the deployment's (``workflows.steps.ADMIT_CONFIG``: 5 minutes
of retries): two attempts.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from activities import build_activities
from activities.deps import close_deps, open_deps
from curaflow.domain.execution import JOB_TYPE
from curaflow.jobs.submit import admission_update_id, job_id_for, start_job
from curaflow.temporal.connection import connect
from tests.conftest import StackFactory
from tests.support import Stack, short_id, waiting_for_a_lock
from workflows.job import JobWorkflow

pytestmark = pytest.mark.integration

#: How many ``admit`` attempts the ledger refuses: the whole budget of the test's step.
REFUSED_ATTEMPTS = 2

#: The test's ``admit`` budget: the deployment's retry policy, bounded by attempts instead
#: of 5 minutes, so that the ledger is away for all of it after two refusals.
TEST_ADMIT_CONFIG = workflow.LocalActivityConfig(
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_attempts=REFUSED_ATTEMPTS),
    summary="admit the task",
)


@contextlib.asynccontextmanager
async def job_worker(stack: Stack) -> AsyncIterator[Client]:
    """The stack's task queue served by a worker in this process (no source queue: a job
    stays in its search step); yields its client."""
    client = await connect(stack.settings.temporal.address or "")
    deps = await open_deps(stack.settings, client)
    main, _ = build_activities(deps)
    try:
        async with Worker(
            client,
            task_queue=stack.task_queue,
            workflows=[JobWorkflow],
            activities=main,
            workflow_runner=UnsandboxedWorkflowRunner(),  # a deployment's default runner
        ):
            yield client
    finally:
        await close_deps(deps)


async def refuse_jobs_table(pool: Any, key: str, attempts: int) -> str:
    """Make PostgreSQL refuse the next ``attempts`` writes of ``key``'s job row with
    SQLSTATE 08006 (connection_failure); returns the name of the trigger, its function and
    its counter (a sequence: the refused write's transaction does not undo it)."""
    name = f"away_{short_id()}".replace("-", "_").lower()
    await pool.execute(
        f"""CREATE SEQUENCE {name};
            CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN IF NEW.idempotency_key = '{key}' THEN
              IF nextval('{name}') <= {attempts} THEN
                RAISE EXCEPTION 'the ledger is away' USING ERRCODE = '08006';
              END IF;
            END IF; RETURN NEW; END $$;
            CREATE TRIGGER {name} BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION {name}();"""
    )
    return name


async def test_a_failed_admit_is_asked_again_under_an_update_id_of_its_own_and_answers_the_job(
    make_stack: StackFactory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr("workflows.job.ADMIT_CONFIG", TEST_ADMIT_CONFIG)
    stack = make_stack(
        {
            "routes": {"out": {"kind": "directory", "path": str(tmp_path / "out")}},
            "targets": [{"id": "demo", "routes": ["out"]}],
        }
    )
    pool = await stack.ledger()
    key = f"retry-{short_id()}"
    first = stack.task(key=key, target_id="demo")
    other_text = {**first, "correlation_id": "the same job, another text"}
    async with job_worker(stack) as client:
        handle = await start_job(client, first, task_queue=stack.task_queue)
        name = await refuse_jobs_table(pool, key, REFUSED_ATTEMPTS)
        try:
            again = await start_job(client, other_text, task_queue=stack.task_queue)
            writes = await pool.fetchval(f"SELECT last_value FROM {name}")
        finally:
            await pool.execute(f"DROP TRIGGER {name} ON jobs; DROP FUNCTION {name}(); DROP SEQUENCE {name};")
        try:
            assert handle.id == job_id_for(first)
            assert handle.result_run_id is not None
            assert (again.id, again.result_run_id) == (handle.id, handle.result_run_id)  # the job's own run
            assert writes == REFUSED_ATTEMPTS + 1  # the refused budget, then the retry's write
            outcomes = await update_outcomes(client, handle.id)
            # The first Task's update admitted it; the other text's own id failed with the
            # step's failure (no refusal); one id of its own then answered the job.
            assert list(outcomes)[:2] == [admission_update_id(first), admission_update_id(other_text)]
            assert outcomes[admission_update_id(first)] is None
            failed = outcomes[admission_update_id(other_text)]
            assert failed == (
                "ledger_unavailable",
                "the ledger was unavailable for the whole of admission; start again",
            ), outcomes
            retried = list(outcomes)[2:]
            assert len(retried) == 1 and retried[0].startswith("admission-"), outcomes
            assert outcomes[retried[0]] is None
            assert await pool.fetchval("SELECT count(*) FROM jobs WHERE idempotency_key = $1", key) == 1
            described = await handle.describe()
            assert described.status == WorkflowExecutionStatus.RUNNING
        finally:
            await client.get_workflow_handle(handle.id).terminate("test over")


async def test_a_new_jobs_admission_failed_whole_is_asked_again_and_the_job_runs_once(
    make_stack: StackFactory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The first ``start_job`` of a key while PostgreSQL refuses its row for the whole
    ``admit`` budget: the run's own admission fails, so the run holds no job and fails
    (the ``admission`` update with it: no refusal). The retry under an id of its own finds
    the run closed; a run that held no job does not own the id
    (:mod:`curaflow.temporal.job_runs`), so a new run starts, admits the Task — the ledger
    back — and is the job's: one job, its run the id's latest."""
    monkeypatch.setattr("workflows.job.ADMIT_CONFIG", TEST_ADMIT_CONFIG)
    stack = make_stack(
        {
            "routes": {"out": {"kind": "directory", "path": str(tmp_path / "out")}},
            "targets": [{"id": "demo", "routes": ["out"]}],
        }
    )
    pool = await stack.ledger()
    key = f"retry-new-{short_id()}"
    body = stack.task(key=key, target_id="demo")
    name = await refuse_jobs_table(pool, key, REFUSED_ATTEMPTS)
    async with job_worker(stack) as client:
        try:
            handle = await start_job(client, body, task_queue=stack.task_queue)
            writes = await pool.fetchval(f"SELECT last_value FROM {name}")
        finally:
            await pool.execute(f"DROP TRIGGER {name} ON jobs; DROP FUNCTION {name}(); DROP SEQUENCE {name};")
        try:
            assert writes == REFUSED_ATTEMPTS + 1
            latest = await client.get_workflow_handle(handle.id).describe()
            assert (latest.run_id, latest.status) == (handle.result_run_id, WorkflowExecutionStatus.RUNNING)
            runs = {w.run_id: w.status async for w in client.list_workflows(f"WorkflowId = '{handle.id}'")}
            assert len(runs) == 2 and runs.pop(latest.run_id) == WorkflowExecutionStatus.RUNNING
            [(refused_run, status)] = runs.items()
            assert status == WorkflowExecutionStatus.FAILED
            refused = await client.get_workflow_handle(handle.id, run_id=refused_run).describe()
            assert refused.typed_search_attributes.get(JOB_TYPE) is None  # it held no job
            # Its failure is curaflow's (the ledger away), never the Task's refusal: until
            # 2026-12-07 it was non-retryable, typed asyncpg's ConnectionFailureError.
            with pytest.raises(WorkflowFailureError) as failed:
                await client.get_workflow_handle(handle.id, run_id=refused_run).result(follow_runs=False)
            cause = failed.value.cause
            assert isinstance(cause, ApplicationError), cause
            assert (cause.type, cause.non_retryable) == ("ledger_unavailable", False), cause
            assert await pool.fetchval("SELECT count(*) FROM jobs WHERE idempotency_key = $1", key) == 1
        finally:
            await client.get_workflow_handle(handle.id).terminate("test over")


async def update_outcomes(client: Client, workflow_id: str) -> dict[str, tuple[str, str] | None]:
    """Each completed update of ``workflow_id``'s run, in the history's order: its id → its
    failure's type and message, or None when it succeeded."""
    outcomes: dict[str, tuple[str, str] | None] = {}
    async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
        if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
            continue
        attributes = event.workflow_execution_update_completed_event_attributes
        failure = attributes.outcome.failure if attributes.outcome.HasField("failure") else None
        outcomes[attributes.meta.update_id] = (
            None if failure is None else (failure.application_failure_info.type, failure.message)
        )
    return outcomes


async def test_an_admission_whose_worker_is_killed_mid_update_is_answered_by_the_next_worker(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    """A running job's Task in another text while its ``admit`` step waits on the ledger (a
    lock), and the worker process running it is killed (SIGKILL). Nothing failed: the next
    worker takes the run's workflow task, runs the step again and answers the same update —
    ``start_job`` gets the job's run under the Task's own update id (no retry needed), and
    the ledger holds one job."""
    stack = make_stack(
        {
            "routes": {"out": {"kind": "directory", "path": str(tmp_path / "out")}},
            "targets": [{"id": "demo", "routes": ["out"]}],
            "pixiv": {"api_url": "http://127.0.0.1:9"},  # the job's search waits, retried
        }
    )
    pool = await stack.ledger()
    client = await connect(stack.settings.temporal.address or "")
    worker = await stack.start_worker()
    key = f"retry-kill-{short_id()}"
    first = stack.task(key=key, target_id="demo")
    other_text = {**first, "correlation_id": "the same job, another text"}
    handle = await start_job(client, first, task_queue=stack.task_queue)
    again: asyncio.Future[Any] | None = None
    try:
        async with pool.acquire() as conn:
            locked = conn.transaction()
            await locked.start()
            await conn.execute("LOCK TABLE jobs IN EXCLUSIVE MODE")  # the step's write waits
            again = asyncio.ensure_future(start_job(client, other_text, task_queue=stack.task_queue))
            await waiting_for_a_lock(pool)
            worker.kill()
            await locked.rollback()
        await stack.start_worker()
        answered = await asyncio.wait_for(again, timeout=60)
        assert (answered.id, answered.result_run_id) == (handle.id, handle.result_run_id)
        outcomes = await update_outcomes(client, handle.id)
        assert outcomes == {admission_update_id(first): None, admission_update_id(other_text): None}
        assert await pool.fetchval("SELECT count(*) FROM jobs WHERE idempotency_key = $1", key) == 1
    finally:
        if again is not None:
            again.cancel()
        await client.get_workflow_handle(handle.id).terminate("test over")

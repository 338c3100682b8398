"""A job id always reads as the job: what arrives for a key after its job ended changes nothing.

A real worker process, the API in the test process, the Pixiv replay and a directory
route. A job ends each way a job can end (succeeded, failed, cancelled, terminated);
then the same Task, another Task and an invalid Task arrive again from every client the
docs name (``start_job``, the ``temporal`` CLI as documented, HTTP). Each gets its
documented answer, and the job's execution — its run, its history, its status, its
search attributes, its list entries — stays exactly as it was. The docs' list queries
(docs/temporal.md) return exactly the jobs they describe after such a sequence.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import re
import shlex
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.exceptions import CancelledError
from temporalio.service import RPCError, RPCStatusCode

from curaflow.devstack.temporal import temporal_binary
from curaflow.domain.execution import BUSINESS_STATUS, JOB_STATUS
from curaflow.domain.job_failure import state_of
from curaflow.domain.messages import JobState
from curaflow.domain.occurrence import OccurrenceInput
from curaflow.jobs.submit import job_id_for as job_id_of
from curaflow.jobs.submit import start_job
from curaflow.ledger.db import now_ms
from curaflow.ledger.reconciler.executions import _closed_executions
from curaflow.protocol.errors import ProtocolError
from tests.support import (
    DemoStack,
    closed_status,
    demo_stack,
    eventually,
    job_in_stage,
    recorded_history,
    short_id,
    temporal_workflow,
)
from workflows.job import JobWorkflow

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
NOTHING = ["no-such-tag-anywhere"]


Env = DemoStack


@pytest.fixture(scope="module")
async def env(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str, ledger_pool: Any
) -> AsyncIterator[Env]:
    async with demo_stack(tmp_path_factory.mktemp("identity"), temporal_address, database_url) as env:
        yield env


@pytest.fixture(autouse=True)
def no_faults(env: Env) -> None:
    env.replay.faults.slow_images_s = 0.0


def task(key: str, **params: Any) -> dict[str, Any]:
    return {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": key,
        "params": {"target_id": "demo", **params},
    }


@dataclass(frozen=True)
class Snapshot:
    """What Temporal shows of a job id: every run, and the latest run's details."""

    runs: tuple[tuple[str, str], ...]
    run_id: str
    status: str
    events: int
    job_status: str | None


async def snapshot(env: Env, job_id: str) -> Snapshot:
    handle = env.client.get_workflow_handle(job_id)
    described = await handle.describe()
    history = await handle.fetch_history()
    listed_runs = [
        (w.run_id, str(w.status.name if w.status else None))
        async for w in env.client.list_workflows(f'WorkflowId = "{job_id}"')
    ]
    runs = tuple(sorted(listed_runs))
    attributes = described.typed_search_attributes
    return Snapshot(
        runs=runs,
        run_id=described.run_id,
        status=str(described.status.name if described.status else None),
        events=len(history.events),
        job_status=attributes.get(JOB_STATUS),
    )


async def settled_snapshot(env: Env, job_id: str) -> Snapshot:
    """The snapshot once visibility lists exactly one run (it is eventually consistent)."""

    async def one_run() -> Snapshot | None:
        shot = await snapshot(env, job_id)
        return shot if len(shot.runs) == 1 and shot.runs[0][1] == shot.status else None

    return await eventually(one_run, timeout_s=15, what=f"{job_id}: one run listed")


async def fetching(env: Env, job_id: str) -> None:
    await job_in_stage(env.http, job_id, "fetching", timeout_s=30)


async def ended_job(env: Env, end: str) -> tuple[str, dict[str, Any], str]:
    """A job (started by ``start_job``) that ended ``end``; returns (key, its Task, job id)."""
    key = f"end-{end}-{short_id()}"
    body = task(key, query={"tags": NOTHING}) if end == "failed" else task(key)
    if end in ("cancelled", "terminated"):
        env.replay.faults.slow_images_s = 10.0
    handle = await start_job(env.client, body, task_queue=env.stack.task_queue)
    if end == "cancelled":
        await fetching(env, handle.id)
        await handle.cancel()
    elif end == "terminated":
        await fetching(env, handle.id)
        await handle.terminate(reason="operator: test")
    record = await env.stack.wait_terminal(handle.id, 60)
    env.replay.faults.slow_images_s = 0.0
    expected = {
        "succeeded": WorkflowExecutionStatus.COMPLETED,
        "failed": WorkflowExecutionStatus.FAILED,
        "cancelled": WorkflowExecutionStatus.CANCELED,
        "terminated": WorkflowExecutionStatus.TERMINATED,
    }[end]
    assert await closed_status(env.client, handle.id) == expected, record
    return key, body, handle.id


@dataclass(frozen=True)
class Held:
    """An ended job as the ledger and the HTTP report hold it: ``GET /jobs/{id}``'s answer,
    the job's events in the ledger and the names of every file under the directory route's
    folder (compared when ``files``). A run another client adds under the job's id must
    change none of them: nothing recorded, nothing written, nothing sent."""

    job_id: str
    report: dict[str, Any]
    events: list[Any]
    delivered: list[str]
    files: bool


async def held(env: Env, job_id: str, *, files: bool = False) -> Held:
    """What the ledger and the HTTP report hold of ``job_id`` now, and the route's files
    (``files``: :func:`assert_held_as` compares them too)."""
    pool = await env.stack.ledger()
    report = (await env.http.get(f"/jobs/{job_id}")).json()
    events = await pool.fetch("SELECT seq, type FROM job_events WHERE job_id = $1 ORDER BY seq", job_id)
    return Held(job_id, report, list(events), sorted(p.name for p in env.out.rglob("*")), files)


async def assert_held_as(env: Env, before: Held) -> None:
    """The job reads as ``before`` held it: the same report, the same events (and the same files)."""
    now = await held(env, before.job_id, files=before.files)
    assert now.report == before.report
    assert now.events == before.events
    if before.files:
        assert now.delivered == before.delivered


def cli(env: Env, *args: str) -> subprocess.CompletedProcess[str]:
    return temporal_workflow(env.address, *args)


ENDS = ["succeeded", "failed", "cancelled", "terminated"]


@pytest.mark.parametrize("end", ENDS)
async def test_start_job_after_the_job_ended_answers_from_the_job_and_adds_no_run(env: Env, end: str) -> None:
    key, body, job_id = await ended_job(env, end)
    before = await settled_snapshot(env, job_id)
    query_before = await env.client.get_workflow_handle(job_id).query(JobWorkflow.status)

    # The same Task: the handle of the job's own execution.
    same = await start_job(env.client, body, task_queue=env.stack.task_queue)
    assert same.id == job_id
    assert same.result_run_id == before.run_id
    # Another Task under the key: the protocol's conflict, as POST /jobs answers 409.
    with pytest.raises(ProtocolError) as other:
        await start_job(env.client, task(key, query={"tags": ["風景"]}), task_queue=env.stack.task_queue)
    assert (other.value.code, other.value.http_status) == ("idempotency_conflict", 409)
    # The key over HTTP: the same job, or 409.
    http_same = await env.http.post("/jobs", json=body)
    assert http_same.status_code == 200 and http_same.json()["job"]["job_id"] == job_id
    http_other = await env.http.post("/jobs", json=task(key, query={"tags": ["風景"]}))
    assert http_other.status_code == 409

    await asyncio.sleep(1)  # any run a start added would be listed by now
    after = await snapshot(env, job_id)
    assert after == before
    assert await env.client.get_workflow_handle(job_id).query(JobWorkflow.status) == query_before
    if end == "succeeded":
        assert (await same.result()).status == "succeeded"
    else:
        with pytest.raises(WorkflowFailureError) as ended:
            await same.result()
        if end == "failed":
            state = state_of(ended.value)
            assert state is not None and state.status == "failed"


async def test_start_job_on_an_ended_job_leaves_no_error_unretrieved(env: Env) -> None:
    """The refused start's own future held the refusal: asyncio logged "Future exception
    was never retrieved" with its traceback in the caller's process on every answer."""
    _, body, job_id = await ended_job(env, "succeeded")
    loop = asyncio.get_running_loop()
    seen: list[str] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: seen.append(str(context.get("message"))))
    try:
        handle = await start_job(env.client, body, task_queue=env.stack.task_queue)
        assert handle.id == job_id
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(previous)
    assert seen == []


async def test_the_reconciler_lists_only_closes_its_ledger_may_not_have_recorded(env: Env) -> None:
    """Each reconciler tick lists the job executions closed in the last hour that the ledger
    may not have recorded (terminated, timed out, failed without finishing its job). It listed
    every business-failed job as well — a job that found nothing new ends ``failed``, so a
    schedule's routine runs were read again on every tick, an hour's worth (their ledger
    rows are complete: nothing to converge). Listed: a terminated job, and a run that failed
    holding no job (a Temporal client's Task refused: no ``JobStatus``)."""
    _, _, failed = await ended_job(env, "failed")
    _, _, terminated = await ended_job(env, "terminated")
    refused_id = f"refused-{short_id()}"
    refused = await env.client.start_workflow(
        "JobWorkflow", {"protocol_version": "1"}, id=refused_id, task_queue=env.stack.task_queue
    )
    with pytest.raises(WorkflowFailureError):
        await refused.result()

    async def listed() -> dict[str, Any] | None:
        closed = await _closed_executions(env.client, now_ms())
        return closed if terminated in closed and refused_id in closed else None

    closed = await eventually(listed, timeout_s=15, what="the terminated and the refused runs listed")
    assert failed not in closed


def unretrieved_errors() -> tuple[list[str], Any]:
    """What asyncio's exception handler is told (its "never retrieved" messages), and the
    handler to put back."""
    loop = asyncio.get_running_loop()
    seen: list[str] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: seen.append(str(context.get("message"))))
    return seen, previous


async def test_a_start_refused_by_temporal_leaves_no_error_unretrieved(env: Env) -> None:
    """Any failed start, not only an already-started one, left its operation's future
    holding the error: a namespace Temporal does not know (an ``RPCError``)."""
    from temporalio.client import Client
    from temporalio.service import RPCError

    stranger = await Client.connect(env.address, namespace=f"nowhere-{short_id()}")
    seen, previous = unretrieved_errors()
    try:
        with pytest.raises(RPCError):
            await start_job(stranger, task(f"nowhere-{short_id()}"), task_queue=env.stack.task_queue)
        gc.collect()
        await asyncio.sleep(0)
    finally:
        asyncio.get_running_loop().set_exception_handler(previous)
    assert seen == []


async def test_a_cancelled_start_leaves_no_error_unretrieved(env: Env) -> None:
    """A caller cancelled while the start waits for a worker to admit the Task (a queue
    nobody polls): the operation's future held the ``CancelledError`` — what the chaos
    driver's process logged three times while the ledger hung."""
    body = task(f"unpolled-{short_id()}")
    raised: list[str] = []

    async def cancelled_start() -> None:
        starting = asyncio.create_task(start_job(env.client, body, task_queue=f"nobody-{short_id()}"))
        await asyncio.sleep(1.0)
        starting.cancel()
        try:
            await starting
        except (asyncio.CancelledError, WorkflowUpdateRPCTimeoutOrCancelledError) as err:
            raised.append(type(err).__name__)  # the SDK answers a cancelled RPC with its own error

    seen, previous = unretrieved_errors()
    try:
        await cancelled_start()  # its frames, and the error's traceback through them, are gone
        for _ in range(3):  # the finished task's callbacks still hold it for a turn of the loop
            await asyncio.sleep(0)
        gc.collect()
    finally:
        asyncio.get_running_loop().set_exception_handler(previous)
        with contextlib.suppress(Exception):
            await env.client.get_workflow_handle(job_id_of(body)).terminate(reason="test: nobody polls its queue")
    assert raised in (["CancelledError"], ["WorkflowUpdateRPCTimeoutOrCancelledError"])
    assert seen == []


@pytest.mark.parametrize("end", ["succeeded", "failed"])
async def test_the_documented_cli_start_after_the_job_ended_adds_no_run_and_the_query_answers(
    env: Env, end: str
) -> None:
    key, body, job_id = await ended_job(env, end)
    before = await settled_snapshot(env, job_id)
    [start, _result, _answer] = [
        c.replace("127.0.0.1:7233", env.address)
        .replace("--task-queue curaflow", f"--task-queue {env.stack.task_queue}")
        .replace("cli-1", key)
        for c in doc_commands(0)
    ]
    if end == "failed":
        start = start.replace(
            '"params":{"target_id":"demo"}', f'"params":{{"target_id":"demo","query":{{"tags":{json.dumps(NOTHING)}}}}}'
        )
    again = await asyncio.to_thread(run, start)
    assert again.returncode != 0  # Temporal refuses the start: the job's run is closed
    assert "already" in (again.stdout + again.stderr).lower()

    def answer(task_json: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        return cli(env, "query", "-w", job_id, "--type", "admission_answer", "--input", json.dumps(task_json))

    same = await asyncio.to_thread(answer, body)
    assert same.returncode == 0, same.stderr
    assert f'"status": "{end}"' in same.stdout or f'"status":"{end}"' in same.stdout, same.stdout
    other = await asyncio.to_thread(answer, task(key, query={"tags": ["風景"]}))
    assert other.returncode == 0 and "idempotency_conflict" in other.stdout, other.stdout + other.stderr
    invalid = {**body, "params": {"target_id": "demo", "constraints": {"limit": "many"}}}
    refused = await asyncio.to_thread(answer, invalid)
    assert refused.returncode == 0 and "invalid_params" in refused.stdout, refused.stdout + refused.stderr
    assert "params.constraints.limit" in refused.stdout

    await asyncio.sleep(1)
    assert await snapshot(env, job_id) == before


# ---- the docs' list queries ------------------------------------------------------------


def doc_commands(index: int) -> list[str]:
    """The commands of the ``index``-th bash block of docs/temporal.md."""
    page = (ROOT / "docs" / "temporal.md").read_text()
    block = re.findall(r"```bash\n(.*?)```", page, flags=re.S)[index]
    joined = block.replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


def run(command: str) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(command)
    assert argv[0] == "temporal", command
    return subprocess.run([temporal_binary(), *argv[1:]], capture_output=True, text=True, timeout=120)


def doc_list_queries() -> dict[str, str]:
    """The list queries of the docs' console block, by what they list (the comment above each)."""
    page = (ROOT / "docs" / "temporal.md").read_text()
    [block] = [b for b in re.findall(r"```bash\n(.*?)```", page, flags=re.S) if "workflow list" in b]
    found: dict[str, str] = {}
    comment = ""
    for line in block.splitlines():
        if line.startswith("#"):
            comment = line.lstrip("# ").strip()
        elif "workflow list" in line:
            found[comment] = shlex.split(line)[shlex.split(line).index("--query") + 1]
    return found


async def listed(env: Env, query: str, ids: list[str]) -> set[str]:
    scoped = f"({query}) AND WorkflowId IN ({', '.join(json.dumps(i) for i in ids)})"
    return {w.id async for w in env.client.list_workflows(scoped)}


async def test_the_docs_list_queries_return_exactly_the_jobs_they_describe(env: Env) -> None:
    queries = doc_list_queries()
    open_query = next(q for what, q in queries.items() if "open jobs" in what)
    failed_query = next(q for what, q in queries.items() if "failed jobs" in what)

    ended = {end: await ended_job(env, end) for end in ENDS}
    # Retries of every ended job, refusals under their keys, and a refused id that never was a job.
    for key, body, _ in ended.values():
        for _ in range(2):
            await start_job(env.client, body, task_queue=env.stack.task_queue)
        with pytest.raises(ProtocolError):
            await start_job(env.client, task(key, query={"tags": ["風景"]}), task_queue=env.stack.task_queue)
        await env.http.post("/jobs", json=body)
    refused_key = f"refused-{short_id()}"
    unknown = task(refused_key)
    unknown["params"]["target_id"] = "no-such-target"
    with pytest.raises(ProtocolError):
        await start_job(env.client, unknown, task_queue=env.stack.task_queue)
    refused_id = f"no-such-target@manual-{refused_key}"
    # A job still running.
    env.replay.faults.slow_images_s = 60.0
    running = await start_job(env.client, task(f"open-{short_id()}"), task_queue=env.stack.task_queue)
    await fetching(env, running.id)

    timed_out = await timed_out_job(env)

    ids = [job_id for _, _, job_id in ended.values()] + [refused_id, running.id, timed_out]
    expected_open = {running.id}
    expected_failed = {ended["failed"][2], timed_out}

    async def settled() -> bool:
        return (
            await listed(env, open_query, ids) == expected_open
            and await listed(env, failed_query, ids) == expected_failed
        )

    with contextlib.suppress(TimeoutError):
        await eventually(settled, timeout_s=10, what="the docs' lists")
    assert await listed(env, open_query, ids) == expected_open
    assert await listed(env, failed_query, ids) == expected_failed
    env.replay.faults.slow_images_s = 0.0
    await running.cancel()


async def timed_out_job(env: Env) -> str:
    """A job whose run Temporal timed out (no worker served it): the ledger ends it expired."""
    from datetime import timedelta

    from curaflow.domain.presentation import job_search_attributes
    from curaflow.jobs.admission import Admitter

    pool = await env.stack.ledger()
    admission = await Admitter(env.stack.settings, pool, None).admit(task(f"timeout-{short_id()}"))
    inp = admission.job_input
    assert inp is not None
    await env.client.start_workflow(
        "JobWorkflow",
        inp,
        id=inp.job_id,
        task_queue=f"unserved-{short_id()}",
        execution_timeout=timedelta(seconds=2),
        search_attributes=job_search_attributes(inp),
    )
    assert await closed_status(env.client, inp.job_id) == WorkflowExecutionStatus.TIMED_OUT
    record = await env.stack.wait_terminal(inp.job_id, 60)
    assert (record.cells[0].state, record.cells[0].reason) == ("failed", "execution_timeout"), record.cells[0]
    job = (await env.http.get(f"/jobs/{inp.job_id}")).json()
    assert job["status"] == "expired"
    return inp.job_id


async def test_a_refused_task_never_blocks_its_id(env: Env) -> None:
    """With starts that never reuse a job's id, a run that held no job still frees it."""
    key = f"freed-{short_id()}"
    bad = task(key)
    bad["params"]["constraints"] = {"limit": "many"}
    job_id = f"demo@manual-{key}"
    handle: WorkflowHandle[Any, Any] = await env.client.start_workflow(
        "JobWorkflow", bad, id=job_id, task_queue=env.stack.task_queue
    )
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    started = await start_job(env.client, task(key), task_queue=env.stack.task_queue)
    state: JobState = await started.result()
    assert state.status == "succeeded"
    assert started.result_run_id != handle.result_run_id


async def test_a_reset_job_goes_on_in_its_new_run_and_the_old_run_stays_terminated(env: Env) -> None:
    """A reset terminates the run and starts a new one from the chosen point: the job goes
    on there and ends as the ledger says; the old run keeps what it said when it closed."""
    env.replay.faults.slow_images_s = 5.0
    handle = await start_job(env.client, task(f"reset-{short_id()}"), task_queue=env.stack.task_queue)
    await fetching(env, handle.id)
    old_run = handle.result_run_id
    reset = await asyncio.to_thread(
        cli, env, "reset", "-w", handle.id, "--type", "FirstWorkflowTask", "--reason", "operator: test"
    )
    assert reset.returncode == 0, reset.stderr
    env.replay.faults.slow_images_s = 0.0

    record = await env.stack.wait_terminal(handle.id, 90)
    assert record.cells[0].state == "submitted", record.cells[0]
    latest = env.client.get_workflow_handle(handle.id)
    final = JobState.model_validate(await latest.result())
    assert final.status == "succeeded" and final.deliveries[0].status == "delivered"
    old = await env.client.get_workflow_handle(handle.id, run_id=old_run).describe()
    assert old.status == WorkflowExecutionStatus.TERMINATED
    # The open and failed lists: neither run (the job succeeded).
    for query in doc_list_queries().values():
        assert await listed(env, query, [handle.id]) == set()


@pytest.mark.parametrize("when", ["running", "ended"])
async def test_a_reset_occurrence_converges_on_its_own_job_and_ends_with_its_outcome(env: Env, when: str) -> None:
    """``temporal workflow reset --type FirstWorkflowTask`` of a scheduled occurrence's
    trampoline while its job runs (or once it ended): the new run admits the occurrence
    again (the same job) and Temporal refuses its child start (the job's run, started by
    the old run, goes on: ``ABANDON``). That job is the occurrence's own — its parent is
    this trampoline — not a duplicate trigger's: the occurrence waits for it as before the
    reset (the schedule's ``SKIP`` holds the next time behind it) and ends with its
    outcome. Until 2026-12-07 it ended at once ``duplicate=True``, no status, as a second
    trigger of the minute does."""
    env.replay.faults.slow_images_s = 5.0 if when == "running" else 0.0
    plan_id = f"plan-{short_id()}"
    nominal = datetime(2025, 1, 1, 18, 0, tzinfo=UTC)  # 03:00 in Tokyo
    occurrence = OccurrenceInput(
        schedule_id=plan_id,
        cron=["0 3 * * *"],
        timezone="Asia/Tokyo",
        target_ids=["demo"],
        task_queue=env.stack.task_queue,
        scheduled_at_ms=int(nominal.timestamp() * 1000),
    )
    trampoline = await env.client.start_workflow(
        "ScheduledJobWorkflow",
        occurrence,
        id=f"{plan_id}@occurrence-2025-01-01T18:00:00Z",
        task_queue=env.stack.task_queue,
    )
    job_id = f"{plan_id}@2025-01-02T0300+0900"

    async def admitted() -> bool:
        return (await env.http.get(f"/jobs/{job_id}")).status_code == 200

    await eventually(admitted, what=f"{job_id} admitted")
    if when == "running":
        await fetching(env, job_id)
    else:
        await trampoline.result()
    job_run = (await env.client.get_workflow_handle(job_id).describe()).run_id
    reset = await asyncio.to_thread(
        cli, env, "reset", "-w", trampoline.id, "--type", "FirstWorkflowTask", "--reason", "operator: test"
    )
    assert reset.returncode == 0, reset.stderr
    latest = env.client.get_workflow_handle(trampoline.id)
    assert (await latest.describe()).run_id != trampoline.result_run_id
    env.replay.faults.slow_images_s = 0.0
    result = await latest.result()
    if when == "running":
        record_history(env, trampoline.id, "scheduled_occurrence_reset_own_job")
    assert (result["job_id"], result["duplicate"]) == (job_id, False), result
    assert (result["status"], result["business_status"]) == ("succeeded", "success"), result
    described = await env.client.get_workflow_handle(job_id).describe()
    assert (described.run_id, described.parent_id) == (job_run, trampoline.id)  # one job, one run
    assert len([w async for w in env.client.list_workflows(f"WorkflowId = '{job_id}'")]) == 1
    record = await env.stack.wait_terminal(job_id, 30)
    assert (record.business_status, record.cells[0].state) == ("success", "submitted"), record.cells[0]


# ---- a run added under an ended HTTP job's id (its JobInput) ----------------------------


async def runs_listed(env: Env, query: str, job_id: str) -> list[str]:
    """The run ids ``query`` lists under ``job_id`` (every run, not only the latest)."""
    scoped = f"({query}) AND WorkflowId = {json.dumps(job_id)}"
    return sorted([w.run_id async for w in env.client.list_workflows(scoped)])


async def job_input_of(env: Env, job_id: str, run_id: str) -> dict[str, Any]:
    """The input ``run_id`` was started with (a job admitted over HTTP: its ``JobInput``)."""
    async for event in env.client.get_workflow_handle(job_id, run_id=run_id).fetch_history_events():
        [payload] = event.workflow_execution_started_event_attributes.input.payloads
        return dict(json.loads(payload.data))
    raise AssertionError(f"{job_id}: no history")


def record_history(env: Env, workflow_id: str, name: str) -> None:
    """Write the latest run's history to tests/histories (``CURAFLOW_RECORD_HISTORIES=1``)."""
    if os.environ.get("CURAFLOW_RECORD_HISTORIES") != "1":
        return
    done = cli(env, "show", "-w", workflow_id, "-o", "json")
    assert done.returncode == 0, done.stderr
    (ROOT / "tests" / "histories" / f"{name}.json").write_text(recorded_history(done.stdout))


@pytest.mark.parametrize(("how", "end"), [("reset", "failed"), ("start", "failed"), ("reset", "succeeded")])
async def test_a_run_added_under_an_ended_http_jobs_id_reports_it_and_the_failed_list_names_it_once(
    env: Env, how: str, end: str
) -> None:
    """``temporal workflow reset --type FirstWorkflowTask`` of a failed job admitted over
    HTTP, or a start under its id with its ``JobInput`` and Temporal's default reuse
    policy: the new run replayed the job from the ledger and published ``JobStatus =
    failed``, so the failed jobs' list named the job twice. It now only reports the job —
    its result is the job's, it carries no ``JobStatus`` — and the ledger is untouched (a
    delivered job is not delivered again)."""
    failed_query = next(q for what, q in doc_list_queries().items() if "failed jobs" in what)
    body = (
        task(f"added-{how}-{short_id()}", query={"tags": NOTHING}) if end == "failed" else task(f"added-{short_id()}")
    )
    answer = await env.http.post("/jobs", json=body)
    assert answer.status_code == 202, answer.text
    job_id = answer.json()["job"]["job_id"]
    await env.stack.wait_terminal(job_id, 60)
    closed = WorkflowExecutionStatus.FAILED if end == "failed" else WorkflowExecutionStatus.COMPLETED
    assert await closed_status(env.client, job_id) == closed
    own = (await env.client.get_workflow_handle(job_id).describe()).run_id
    before = await held(env, job_id, files=True)
    await eventually(
        lambda: runs_listed(env, f'JobStatus = "{end}"', job_id), timeout_s=15, what="the job's run listed"
    )

    if how == "reset":
        done = await asyncio.to_thread(
            cli, env, "reset", "-w", job_id, "--type", "FirstWorkflowTask", "--reason", "operator: test"
        )
        assert done.returncode == 0, done.stderr
    else:
        await env.client.start_workflow(
            "JobWorkflow", await job_input_of(env, job_id, own), id=job_id, task_queue=env.stack.task_queue
        )
    added = env.client.get_workflow_handle(job_id)
    if end == "failed":
        with pytest.raises(WorkflowFailureError) as ended:
            await added.result()
        state = state_of(ended.value)
    else:
        state = JobState.model_validate(await added.result())
    assert state is not None and (state.status, state.job_id) == (end, job_id)
    described = await added.describe()
    assert described.run_id != own and described.status == closed
    if (how, end) == ("reset", "failed"):
        record_history(env, job_id, "job_input_added_run_core_v3")

    async def both_closed() -> bool:
        runs = [w async for w in env.client.list_workflows(f"WorkflowId = {json.dumps(job_id)}")]
        return len(runs) == 2 and all(w.close_time is not None for w in runs)

    await eventually(both_closed, timeout_s=15, what="both runs closed in visibility")
    assert await runs_listed(env, failed_query, job_id) == ([own] if end == "failed" else [])
    assert await runs_listed(env, f'JobStatus = "{end}"', job_id) == [own]
    assert described.typed_search_attributes.get(JOB_STATUS) is None
    assert described.typed_search_attributes.get(BUSINESS_STATUS) is None
    # The ledger and the HTTP report: as they were (no new event, nothing written, nothing sent).
    await assert_held_as(env, before)


async def test_a_jobs_own_run_that_finds_it_ended_by_the_reconciler_still_publishes_its_end(env: Env) -> None:
    """The reconciler ends a job whose run waited for a worker (its queued budget); when a
    worker takes the run, its first step finds the job ended — but no other run holds it:
    this is the job's own run, and it publishes the job's end, so the failed jobs' list
    names the job (once, by this run)."""
    from curaflow.domain.verdicts import FinishCause
    from curaflow.jobs.admission import Admitter
    from curaflow.ledger.reconciler import converge
    from curaflow.temporal.connection import start_job_workflow

    failed_query = next(q for what, q in doc_list_queries().items() if "failed jobs" in what)
    pool = await env.stack.ledger()
    admission = await Admitter(env.stack.settings, pool, None).admit(task(f"late-{short_id()}"))
    inp = admission.job_input
    assert inp is not None
    finished = await converge(pool, inp.job_id, FinishCause.QUEUED_TOO_LONG)
    assert finished is not None and finished.outcome is not None
    events = await pool.fetch("SELECT seq, type FROM job_events WHERE job_id = $1 ORDER BY seq", inp.job_id)

    handle = await start_job_workflow(env.client, inp, env.stack.task_queue)
    with pytest.raises(WorkflowFailureError) as ended:
        await handle.result()
    state = state_of(ended.value)
    assert state is not None and state.status == "expired"  # queued_too_long
    attributes = (await handle.describe()).typed_search_attributes
    assert (attributes.get(JOB_STATUS), attributes.get(BUSINESS_STATUS)) == ("expired", state.business_status)
    own = (await handle.describe()).run_id

    async def listed_once() -> bool:
        return await runs_listed(env, failed_query, inp.job_id) == [own]

    await eventually(listed_once, timeout_s=15, what="the job's own run in the failed list")
    assert await pool.fetch("SELECT seq, type FROM job_events WHERE job_id = $1 ORDER BY seq", inp.job_id) == events


# ---- a run added under the id of a job that ended cancelled -----------------------------


async def http_job_ended(env: Env, end: str) -> str:
    """A job admitted over HTTP that ended ``cancelled`` by the consumer's cancel, or was
    terminated (the ledger's ``cancelled / execution_terminated``); its id."""
    env.replay.faults.slow_images_s = 10.0
    answer = await env.http.post("/jobs", json=task(f"http-{end}-{short_id()}"))
    assert answer.status_code == 202, answer.text
    job_id = str(answer.json()["job"]["job_id"])
    await fetching(env, job_id)
    if end == "cancelled":
        assert (await env.http.post(f"/jobs/{job_id}/cancel")).status_code in (200, 202)
    else:
        await env.client.get_workflow_handle(job_id).terminate(reason="operator: test")
    await env.stack.wait_terminal(job_id, 60)
    env.replay.faults.slow_images_s = 0.0
    assert (await env.http.get(f"/jobs/{job_id}")).json()["status"] == "cancelled"
    return job_id


@pytest.mark.parametrize(
    ("how", "end"),
    [
        ("cli start", "cancelled"),
        ("cli start", "terminated"),
        ("reset", "cancelled"),
        ("reset", "terminated"),
        ("reset to the last workflow task", "terminated"),
        ("start_job after delete", "cancelled"),
        ("job input start", "cancelled"),
        ("job input start", "terminated"),
    ],
)
async def test_a_run_added_under_the_id_of_a_cancelled_job_ends_canceled_as_the_job_did(
    env: Env, how: str, end: str
) -> None:
    """A run another client adds under the id of a job that ended ``cancelled`` (a consumer's
    cancel, or a terminate: the ledger's ``cancelled / execution_terminated``) — the
    documented ``temporal workflow start`` with the Task and Temporal's default reuse
    policy, a ``temporal workflow reset`` of the job's closed run, ``start_job`` once the
    job's execution was deleted, a start with the job's ``JobInput`` — only reports the job.
    It ended **Completed**, with the cancelled state as its result: the job id then read
    as a green Completed in the UI, ``describe`` and ``result()``, where the ledger, ``GET
    /jobs/{id}`` and the result contract (a cancelled job ends ``Canceled``) say cancelled.
    It now ends Canceled, publishes no job state and changes nothing in the ledger."""
    if how.startswith("job input"):
        job_id = await http_job_ended(env, end)
        body: dict[str, Any] = {}
    else:
        _key, body, job_id = await ended_job(env, end)
    own = (await settled_snapshot(env, job_id)).run_id
    before = await held(env, job_id)

    if how == "cli start":
        done = await asyncio.to_thread(
            cli, env, "start", "--type", "JobWorkflow", "-w", job_id, "--task-queue", env.stack.task_queue,
            "--input", json.dumps(body),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    elif how.startswith("reset"):
        point = "FirstWorkflowTask" if how == "reset" else "LastWorkflowTask"
        done = await asyncio.to_thread(cli, env, "reset", "-w", job_id, "--type", point, "--reason", "operator: test")
        assert done.returncode == 0, done.stderr
    elif how == "start_job after delete":
        deleted = await asyncio.to_thread(cli, env, "delete", "-w", job_id, "--yes")
        assert deleted.returncode == 0, deleted.stderr

        async def gone() -> bool:
            try:
                await env.client.get_workflow_handle(job_id).describe()
            except RPCError as err:
                return err.status == RPCStatusCode.NOT_FOUND
            return False

        await eventually(gone, timeout_s=90, what=f"{job_id} deleted")  # a closed run: ~30 s
        await start_job(env.client, body, task_queue=env.stack.task_queue)
    else:
        await env.client.start_workflow(
            "JobWorkflow", await job_input_of(env, job_id, own), id=job_id, task_queue=env.stack.task_queue
        )

    added = env.client.get_workflow_handle(job_id)
    with contextlib.suppress(WorkflowFailureError):
        await added.result()
    if end == "terminated" and how in ("cli start", "job input start"):
        name = "job_reporting_cancelled" if how == "cli start" else "job_input_reporting_cancelled"
        record_history(env, job_id, f"{name}_core_v3")
    described = await added.describe()
    assert described.run_id != own
    assert described.status == WorkflowExecutionStatus.CANCELED, (how, end, described.status)
    with pytest.raises(WorkflowFailureError) as ended:
        await added.result()
    assert isinstance(ended.value.cause, CancelledError)
    assert described.typed_search_attributes.get(JOB_STATUS) is None
    assert described.typed_search_attributes.get(BUSINESS_STATUS) is None
    state = JobState.model_validate(await added.query(JobWorkflow.status))
    assert (state.status, state.job_id) == ("cancelled", job_id)
    # The ledger and the HTTP report: as they were.
    await assert_held_as(env, before)


# ---- a run added under an ended job's id by a signal-with-start of ``cancel`` ----------


@pytest.mark.parametrize(
    ("started", "end"),
    [("task", "succeeded"), ("task", "cancelled"), ("job input", "succeeded"), ("job input", "cancelled")],
)
async def test_a_signal_with_start_cancel_under_an_ended_jobs_id_only_reports_the_job(
    env: Env, started: str, end: str
) -> None:
    """A signal-with-start of ``cancel`` under the id of a job that ended — an operator's
    "cancel this job" that finds it closed, with Temporal's default reuse policy; a
    ``temporal workflow reset`` of a run that got a ``cancel`` signal reapplies it the same
    way — adds a run that must only report the job: it ends as the job did, publishes no
    job state, and the ledger is as it was (nothing recorded as cancelled after the job's
    end, no event)."""
    if started == "task":
        if end == "succeeded":
            _key, body, job_id = await ended_job(env, end)
        else:
            _key, body, job_id = await ended_job(env, "cancelled")
        start_input: dict[str, Any] = body
    else:
        if end == "succeeded":
            answer = await env.http.post("/jobs", json=task(f"sws-{short_id()}"))
            assert answer.status_code == 202, answer.text
            job_id = str(answer.json()["job"]["job_id"])
            await env.stack.wait_terminal(job_id, 60)
        else:
            job_id = await http_job_ended(env, "cancelled")
    own = (await settled_snapshot(env, job_id)).run_id
    if started != "task":
        start_input = await job_input_of(env, job_id, own)
    before = await held(env, job_id)
    assert before.report["status"] == end
    pool = await env.stack.ledger()
    row = await pool.fetchrow("SELECT cancel_requested_at, cancel_reason FROM jobs WHERE job_id = $1", job_id)

    await env.client.start_workflow(
        "JobWorkflow", start_input, id=job_id, task_queue=env.stack.task_queue, start_signal="cancel"
    )

    closed = WorkflowExecutionStatus.COMPLETED if end == "succeeded" else WorkflowExecutionStatus.CANCELED
    assert await closed_status(env.client, job_id, 60) == closed
    if (started, end) == ("job input", "succeeded"):
        record_history(env, job_id, "job_input_cancel_signal_reporting_core_v3")
    described = await env.client.get_workflow_handle(job_id).describe()
    assert described.run_id != own
    assert described.typed_search_attributes.get(JOB_STATUS) is None
    assert described.typed_search_attributes.get(BUSINESS_STATUS) is None
    await assert_held_as(env, before)
    assert await pool.fetchrow("SELECT cancel_requested_at, cancel_reason FROM jobs WHERE job_id = $1", job_id) == row


@pytest.mark.parametrize("end", ["succeeded", "failed"])
async def test_a_run_added_with_the_job_input_after_the_jobs_deadline_only_reports_the_job(env: Env, end: str) -> None:
    """``temporal workflow reset --type FirstWorkflowTask`` of an HTTP job's closed run once
    its deadline has passed (30 min by default: any reset of a job ended an hour ago) starts
    the new run with the job's ``JobInput``, whose ``deadline_at_ms`` is behind it: the run
    stops at its deadline before its first step — the step that tells a run added under an
    ended job's id that it only reports the job. Here a start with the job's input, its
    deadline set back as the clock would have moved it (the dev server's clock cannot be
    moved) — in the stored input too: a run's input is the job's only when it is the stored
    one (``activities.caller.foreign_run_input``, 2026-12-07), as a reset's is. It must only
    report the job: no ``JobStatus``, the ledger as it was."""
    body = task(f"late-{short_id()}", query={"tags": NOTHING}) if end == "failed" else task(f"late-{short_id()}")
    answer = await env.http.post("/jobs", json=body)
    assert answer.status_code == 202, answer.text
    job_id = str(answer.json()["job"]["job_id"])
    await env.stack.wait_terminal(job_id, 60)
    own = (await settled_snapshot(env, job_id)).run_id
    before = await held(env, job_id)
    assert before.report["status"] == end
    pool = await env.stack.ledger()
    late = await job_input_of(env, job_id, own)
    late["deadline_at_ms"] = now_ms() - 1_000
    await pool.execute(
        "UPDATE jobs SET workflow_input = jsonb_set(workflow_input, '{deadline_at_ms}', to_jsonb($2::bigint)) "
        "WHERE job_id = $1",
        job_id,
        late["deadline_at_ms"],
    )

    await env.client.start_workflow("JobWorkflow", late, id=job_id, task_queue=env.stack.task_queue)

    closed = WorkflowExecutionStatus.COMPLETED if end == "succeeded" else WorkflowExecutionStatus.FAILED
    assert await closed_status(env.client, job_id, 60) == closed
    if end == "failed":
        record_history(env, job_id, "job_input_past_deadline_reporting_core_v3")
    described = await env.client.get_workflow_handle(job_id).describe()
    assert described.run_id != own
    assert described.typed_search_attributes.get(JOB_STATUS) is None
    assert described.typed_search_attributes.get(BUSINESS_STATUS) is None
    await assert_held_as(env, before)


@pytest.mark.parametrize("end", ["succeeded", "cancelled"])
async def test_start_job_after_a_plain_start_with_the_job_input_answers_the_job_and_adds_no_run(
    env: Env, end: str
) -> None:
    """A plain start with an ended HTTP job's ``JobInput`` under its id (Temporal's default
    reuse policy; a reset copies the start's search attributes, a plain start carries none)
    adds a run that only reports the job. ``start_job`` with the job's Task must then answer
    the job's state and add no run: the reporting run is the id's latest, and it held the
    job. Before, it carried no ``JobType``, was read as a run that held no job, and the
    start was tried again with ``ALLOW_DUPLICATE_FAILED_ONLY``: a bare ``RPCError`` after a
    completed run, one more run after a cancelled one."""
    if end == "succeeded":
        body = task(f"plain-{short_id()}")
        answer = await env.http.post("/jobs", json=body)
        assert answer.status_code == 202, answer.text
        job_id = str(answer.json()["job"]["job_id"])
        await env.stack.wait_terminal(job_id, 60)
    else:
        job_id = await http_job_ended(env, end)
        pool = await env.stack.ledger()
        key = await pool.fetchval("SELECT idempotency_key FROM jobs WHERE job_id = $1", job_id)
        body = task(key)
    own = (await settled_snapshot(env, job_id)).run_id
    report = (await env.http.get(f"/jobs/{job_id}")).json()
    await env.client.start_workflow(
        "JobWorkflow", await job_input_of(env, job_id, own), id=job_id, task_queue=env.stack.task_queue
    )
    closed = WorkflowExecutionStatus.COMPLETED if end == "succeeded" else WorkflowExecutionStatus.CANCELED
    assert await closed_status(env.client, job_id, 60) == closed
    if end == "succeeded":
        record_history(env, job_id, "job_input_reporting_attributes_core_v3")
    added = (await env.client.get_workflow_handle(job_id).describe()).run_id

    handle = await start_job(env.client, body, task_queue=env.stack.task_queue)

    assert handle.id == job_id
    if end == "succeeded":
        assert JobState.model_validate(await handle.result()).status == "succeeded"
    else:
        with pytest.raises(WorkflowFailureError):
            await handle.result()
    assert (await env.client.get_workflow_handle(job_id).describe()).run_id == added  # no run added
    assert (await env.http.get(f"/jobs/{job_id}")).json() == report


# ---- a reset of an ended job's closed run past its first step --------------------------


async def after_first_step(env: Env, job_id: str) -> int:
    """The id of the first ``WorkflowTaskCompleted`` event after the first ``acquire``
    closed (its result recorded): the point ``temporal workflow reset --event-id`` takes
    to go on from that step's result."""
    acquire: int | None = None
    closed = False
    async for event in env.client.get_workflow_handle(job_id).fetch_history_events():
        if acquire is None and event.activity_task_scheduled_event_attributes.activity_type.name == "acquire":
            acquire = event.event_id
        elif acquire is not None and not closed:
            closed = acquire in (
                event.activity_task_completed_event_attributes.scheduled_event_id,
                event.activity_task_failed_event_attributes.scheduled_event_id,
            )
        elif closed and event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            return event.event_id
    raise AssertionError(f"{job_id}: no workflow task completed after its first acquire closed")


@pytest.mark.parametrize("end", ["failed", "succeeded"])
async def test_a_reset_of_an_ended_jobs_run_past_its_first_step_only_reports_the_job(env: Env, end: str) -> None:
    """``temporal workflow reset --event-id`` of an ended job's closed run to the workflow
    task after its first ``acquire``'s result: the new run replays that result (it never
    asks the first step's question again) and goes on as the job's run — it published the
    job's end as its own ``JobStatus`` (``failed``: the failed jobs' list named the job
    twice, by two runs that each ended it). It must only report the job: its result is the
    job's, it carries no ``JobStatus`` / ``BusinessStatus``, the ledger and the HTTP report
    are as they were and nothing is delivered again."""
    failed_query = next(q for what, q in doc_list_queries().items() if "failed jobs" in what)
    _key, _body, job_id = await ended_job(env, end)
    own = (await settled_snapshot(env, job_id)).run_id
    before = await held(env, job_id, files=True)
    assert before.report["status"] == end
    await eventually(
        lambda: runs_listed(env, f'JobStatus = "{end}"', job_id), timeout_s=15, what="the job's run listed"
    )
    point = await after_first_step(env, job_id)

    done = await asyncio.to_thread(
        cli, env, "reset", "-w", job_id, "--event-id", str(point), "--reason", "operator: test"
    )
    assert done.returncode == 0, done.stderr

    closed = WorkflowExecutionStatus.FAILED if end == "failed" else WorkflowExecutionStatus.COMPLETED
    added = env.client.get_workflow_handle(job_id)
    assert await closed_status(env.client, job_id, 60) == closed
    if end == "failed":
        record_history(env, job_id, "job_reset_past_first_step_reporting_core_v3")
    described = await added.describe()
    assert described.run_id != own
    if end == "failed":
        with pytest.raises(WorkflowFailureError) as ended:
            await added.result()
        state = state_of(ended.value)
    else:
        state = JobState.model_validate(await added.result())
    assert state is not None and (state.status, state.job_id) == (end, job_id)

    async def both_closed() -> bool:
        runs = [w async for w in env.client.list_workflows(f"WorkflowId = {json.dumps(job_id)}")]
        return len(runs) == 2 and all(w.close_time is not None for w in runs)

    await eventually(both_closed, timeout_s=15, what="both runs closed in visibility")
    assert described.typed_search_attributes.get(JOB_STATUS) is None
    assert described.typed_search_attributes.get(BUSINESS_STATUS) is None
    assert await runs_listed(env, f'JobStatus = "{end}"', job_id) == [own]
    assert await runs_listed(env, failed_query, job_id) == ([own] if end == "failed" else [])
    # The ledger and the HTTP report: as they were (no new event, nothing written, nothing sent).
    await assert_held_as(env, before)


async def after_step(env: Env, job_id: str, step: str) -> int:
    """The id of the first ``WorkflowTaskCompleted`` event after the first ``step`` activity
    completed: the point ``temporal workflow reset --event-id`` takes to go on from it."""
    scheduled: int | None = None
    completed = False
    async for event in env.client.get_workflow_handle(job_id).fetch_history_events():
        if scheduled is None and event.activity_task_scheduled_event_attributes.activity_type.name == step:
            scheduled = event.event_id
        elif scheduled is not None and not completed:
            completed = event.activity_task_completed_event_attributes.scheduled_event_id == scheduled
        elif completed and event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            return event.event_id
    raise AssertionError(f"{job_id}: no workflow task completed after its first {step} completed")


@pytest.mark.parametrize(
    ("end", "point"),
    [
        ("succeeded", "LastWorkflowTask"),
        ("failed", "LastWorkflowTask"),
        ("cancelled", "LastWorkflowTask"),
        ("succeeded", "deliver"),
    ],
)
async def test_a_reset_of_an_ended_jobs_run_to_its_last_workflow_task_only_reports_the_job(
    env: Env, end: str, point: str
) -> None:
    """``temporal workflow reset --type LastWorkflowTask`` of an ended job's closed run (the
    UI's "Reset" with its default point): the new run replays the whole job but its last
    workflow task, so it runs that task's code again — the job's finish; or ``--event-id``
    of the workflow task after its ``deliver`` completed (the new run goes on from the
    delivery's result). It must end as the job did, only reporting it: the ledger, its
    events and the HTTP report as they were, nothing delivered again, and each documented
    list naming the job once, by its own run."""
    failed_query = next(q for what, q in doc_list_queries().items() if "failed jobs" in what)
    names_before = {p.name for p in env.out.rglob("*")}
    _key, _body, job_id = await ended_job(env, end)
    own = (await settled_snapshot(env, job_id)).run_id
    before = await held(env, job_id, files=True)
    assert before.report["status"] == end
    assert bool(set(before.delivered) - names_before) == (end == "succeeded"), (
        before.delivered
    )  # what the job delivered, if anything
    await eventually(
        lambda: runs_listed(env, f'JobStatus = "{end}"', job_id), timeout_s=15, what="the job's run listed"
    )

    where = (
        ["--type", point] if point == "LastWorkflowTask" else ["--event-id", str(await after_step(env, job_id, point))]
    )
    done = await asyncio.to_thread(cli, env, "reset", "-w", job_id, *where, "--reason", "operator: test")
    assert done.returncode == 0, done.stderr

    closed = {
        "succeeded": WorkflowExecutionStatus.COMPLETED,
        "failed": WorkflowExecutionStatus.FAILED,
        "cancelled": WorkflowExecutionStatus.CANCELED,
    }[end]
    added = env.client.get_workflow_handle(job_id)
    assert await closed_status(env.client, job_id, 60) == closed
    described = await added.describe()
    assert described.run_id != own
    state = JobState.model_validate(await added.query(JobWorkflow.status))
    assert (state.status, state.job_id) == (end, job_id)

    async def both_closed() -> bool:
        runs = [w async for w in env.client.list_workflows(f"WorkflowId = {json.dumps(job_id)}")]
        return len(runs) == 2 and all(w.close_time is not None for w in runs)

    await eventually(both_closed, timeout_s=15, what="both runs closed in visibility")
    listed = await runs_listed(env, f'JobStatus = "{end}"', job_id)
    assert len(listed) == 1, (listed, own, described.run_id)
    assert len(await runs_listed(env, failed_query, job_id)) == (1 if end == "failed" else 0)
    # The ledger and the HTTP report: as they were (no new event, nothing written, nothing sent).
    await assert_held_as(env, before)


# ---- a reset of a job's open run after the ledger ended the job ----------------------------


@pytest.mark.parametrize(
    ("started", "point"),
    [
        ("task", "LastWorkflowTask"),
        ("task", "FirstWorkflowTask"),
        ("http", "LastWorkflowTask"),
        ("http", "FirstWorkflowTask"),
    ],
)
async def test_a_reset_of_a_jobs_open_run_the_reconciler_ended_publishes_the_jobs_end_once(
    env: Env, started: str, point: str
) -> None:
    """A job whose run could not go on — no worker took its workflow tasks (here every worker
    is gone; a workflow task failing after a bad deploy is the same) — is ended by the
    reconciler in the ledger (``expired``); its run stays open with the ``JobStatus`` it had.
    The operator's remedy once workers are back, ``temporal workflow reset`` of that run,
    terminates it and goes on in a new run, which finds the job ended. Before, that run took
    the terminated run for the one holding the job and only reported it: it published no
    ``JobStatus``, so the failed jobs' list named the expired job zero times. The run a
    reset replaced holds nothing: the new run publishes the job's end — once, nothing
    written or sent again."""
    failed_query = next(q for what, q in doc_list_queries().items() if "failed jobs" in what)
    env.replay.faults.slow_images_s = 60.0
    body = {**task(f"stuck-{started}-{short_id()}"), "deadline_ms": 6_000}
    if started == "task":
        job_id = (await start_job(env.client, body, task_queue=env.stack.task_queue)).id
    else:
        answer = await env.http.post("/jobs", json=body)
        assert answer.status_code == 202, answer.text
        job_id = str(answer.json()["job"]["job_id"])
    old = env.client.get_workflow_handle(job_id)

    async def published_running() -> bool:  # the step's progress is in: a workflow task after the step's start
        try:
            described = await old.describe()
        except RPCError as err:  # an HTTP job's run is started right after its admission
            if err.status == RPCStatusCode.NOT_FOUND:
                return False
            raise
        return described.typed_search_attributes.get(JOB_STATUS) == "running"

    await eventually(published_running, timeout_s=30, what="JobStatus running")
    old_run = (await old.describe()).run_id
    workers = [worker for worker in env.stack.workers if worker.alive()]
    for worker in workers:
        worker.kill()
    try:
        await env.stack.wait_terminal(job_id, 60)  # the reconciler: past its deadline, no worker
        before = await held(env, job_id)
        assert before.report["status"] == "expired", before.report
        done = await asyncio.to_thread(cli, env, "reset", "-w", job_id, "--type", point, "--reason", "operator: test")
        assert done.returncode == 0, done.stderr
    finally:
        env.replay.faults.slow_images_s = 0.0
        for _ in workers:
            await env.stack.start_worker()

    assert await closed_status(env.client, job_id, 60) == WorkflowExecutionStatus.FAILED
    if (started, point) == ("task", "FirstWorkflowTask"):
        record_history(env, job_id, "job_reset_open_run_ended_own_run_core_v3")
    latest = env.client.get_workflow_handle(job_id)
    described = await latest.describe()
    assert described.run_id != old_run
    with pytest.raises(WorkflowFailureError) as ended:
        await latest.result()
    state = state_of(ended.value)
    assert state is not None and (state.status, state.job_id) == ("expired", job_id)
    replaced = await env.client.get_workflow_handle(job_id, run_id=old_run).describe()
    assert replaced.status == WorkflowExecutionStatus.TERMINATED
    assert described.typed_search_attributes.get(JOB_STATUS) == "expired"

    async def listed_once() -> bool:
        return await runs_listed(env, failed_query, job_id) == [described.run_id]

    await eventually(listed_once, timeout_s=15, what="the new run, alone, in the failed jobs' list")
    # The ledger and the HTTP report: as the reconciler left them.
    await assert_held_as(env, before)


async def test_a_task_run_that_admits_after_the_reconciler_ended_its_job_publishes_the_jobs_end(env: Env) -> None:
    """A Task started with a ``--start-delay``; meanwhile ``POST /jobs`` with the same Task
    admits the job and its start attaches to the waiting run; the reconciler ends the job
    before the run admits its Task (its queued budget: here ended directly, as the test of
    a ``JobInput`` run above does). The run is the job's only run: admitting late, it must
    publish the job's end as the job's — before, admission's answer made it only report the
    job, and the failed jobs' list named the expired job zero times."""
    from curaflow.domain.verdicts import FinishCause
    from curaflow.ledger.reconciler import converge

    failed_query = next(q for what, q in doc_list_queries().items() if "failed jobs" in what)
    body = task(f"delayed-{short_id()}")
    job_id = job_id_of(body)
    started = await asyncio.to_thread(
        cli, env, "start", "--type", "JobWorkflow", "--task-queue", env.stack.task_queue, "--workflow-id", job_id,
        "--id-reuse-policy", "RejectDuplicate", "--start-delay", "6s", "--input", json.dumps(body),
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    answer = await env.http.post("/jobs", json=body)
    assert (answer.status_code, answer.json()["job"]["status"]) == (202, "queued"), answer.text
    pool = await env.stack.ledger()
    finished = await converge(pool, job_id, FinishCause.QUEUED_TOO_LONG)
    assert finished is not None and finished.outcome is not None
    before = await held(env, job_id)
    assert before.report["status"] == "expired", before.report

    assert await closed_status(env.client, job_id, 60) == WorkflowExecutionStatus.FAILED
    handle = env.client.get_workflow_handle(job_id)
    with pytest.raises(WorkflowFailureError) as ended:
        await handle.result()
    state = state_of(ended.value)
    assert state is not None and (state.status, state.job_id) == ("expired", job_id)
    described = await handle.describe()
    assert described.typed_search_attributes.get(JOB_STATUS) == "expired"

    async def listed_once() -> bool:
        return await runs_listed(env, failed_query, job_id) == [described.run_id]

    await eventually(listed_once, timeout_s=15, what="the job's run in the failed jobs' list")
    await assert_held_as(env, before)


# ---- the temporal CLI's plain start under a used key ---------------------------------------


@pytest.mark.parametrize("state", ["running", "succeeded", "failed"])
async def test_the_clis_plain_start_under_a_used_key_answers_the_existing_run_and_changes_nothing(
    env: Env, state: str
) -> None:
    """``temporal workflow start`` (a plain start, the Go SDK's) under a job id that has a
    run — open, whatever the conflict policy (``Fail`` included), or closed, with
    ``RejectDuplicate`` — is refused by Temporal, but the CLI says nothing of it: the Go
    SDK hands back the existing run (``WorkflowExecutionErrorWhenAlreadyStarted`` is false by
    default), so it exits 0 and prints "Running execution" with that run's id, whatever Task
    it carried; ``temporal workflow execute`` then prints that run's result. No run is
    added, nothing of the job changes — and nothing compared the Task (docs/temporal.md: the
    docs said the start was refused; only update-with-start and ``admission_answer`` answer
    another Task with ``idempotency_conflict``)."""
    key = f"plain-{state}-{short_id()}"
    body = task(key, query={"tags": NOTHING}) if state == "failed" else task(key)
    if state == "running":
        env.replay.faults.slow_images_s = 10.0
    handle = await start_job(env.client, body, task_queue=env.stack.task_queue)
    job_id, own = handle.id, handle.result_run_id
    if state == "running":
        await fetching(env, job_id)
    else:
        await env.stack.wait_terminal(job_id, 60)
    report = (await env.http.get(f"/jobs/{job_id}")).json()
    other = task(key, query={"tags": ["風景"]})
    policies = ["--id-conflict-policy", "Fail"] if state == "running" else ["--id-reuse-policy", "RejectDuplicate"]
    try:
        for sent in (body, other):
            started = await asyncio.to_thread(
                cli, env, "start", "--type", "JobWorkflow", "--task-queue", env.stack.task_queue,
                "--workflow-id", job_id, *policies, "--input", json.dumps(sent),
            )  # fmt: skip
            assert started.returncode == 0, started.stderr
            assert "Running execution" in started.stdout and own is not None and own in started.stdout, started.stdout
    finally:
        env.replay.faults.slow_images_s = 0.0
    if state == "succeeded":
        executed = await asyncio.to_thread(
            cli, env, "execute", "--type", "JobWorkflow", "--task-queue", env.stack.task_queue,
            "--workflow-id", job_id, "--id-reuse-policy", "RejectDuplicate", "--input", json.dumps(other), "-o", "json",
        )  # fmt: skip
        assert executed.returncode == 0, executed.stderr
        printed = json.loads(executed.stdout)
        assert (printed["runId"], printed["result"]["status"]) == (own, "succeeded"), printed
    else:
        await env.stack.wait_terminal(job_id, 60)
    runs = [w.run_id async for w in env.client.list_workflows(f"WorkflowId = {json.dumps(job_id)}")]
    assert runs == [own]
    if state != "running":
        assert (await env.http.get(f"/jobs/{job_id}")).json() == report

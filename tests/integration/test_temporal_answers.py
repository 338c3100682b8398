"""Temporal's own refusals, as curaflow's callers meet them: only Temporal's "not found" of an
execution is read as the execution being gone, and an outage is a retryable answer.

* A ``NOT_FOUND`` of the **namespace** (a process whose ``temporal.namespace`` is not the
  jobs', a namespace deleted) says nothing of a job's execution: an API configured so
  ends no job at a consumer's cancel (before: the cancel found "no execution" and ended a
  running job ``cancelled`` while its run went on in the jobs' namespace).
* ``UNAVAILABLE`` / ``RESOURCE_EXHAUSTED`` / ``DEADLINE_EXCEEDED`` under a cancel are the
  API's ``503 temporal_unavailable`` with ``Retry-After`` — never a ``404`` for a job
  Temporal could not be asked about, never a ``500``.

The faults are the real dev server's answers (a namespace that does not exist) or the
real client's service answering the status (:func:`refuse`), as
``tests/integration/test_admission_faults.py`` injects them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from google.protobuf.any_pb2 import Any as AnyDetail
from nexusrpc import HandlerError
from prometheus_client import REGISTRY
from temporalio.activity import ActivityCancellationDetails
from temporalio.api.common.v1 import GrpcStatus
from temporalio.api.errordetails.v1 import NamespaceNotFoundFailure, NotFoundFailure
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import ActivityEnvironment

from activities.follow import FollowActivity
from curaflow.domain.messages import FollowJob
from curaflow.jobs.nexus import StartJob
from curaflow.ledger.db import DB_NOW_MS
from curaflow.ledger.reconciler import run_forever, tick
from curaflow.observability.supervision import SupervisionPolicy, Supervisor
from curaflow.temporal.answers import execution_not_found, temporal_outage
from curaflow.temporal.connection import connect, connect_configured
from tests.conftest import StackFactory
from tests.support import eventually, short_id

pytestmark = pytest.mark.integration


def config(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    out = f"out-{short_id()}"
    return {
        "routes": {out: {"kind": "directory", "path": str(tmp_path / "out")}},
        "targets": [{"id": "demo", "routes": [out]}],
        **extra,
    }


def each_status(*codes: RPCStatusCode) -> pytest.MarkDecorator:
    """The test once per gRPC status of ``codes`` (its ``status`` argument), each named by its code."""
    return pytest.mark.parametrize("status", codes, ids=lambda v: v.name)


def rpc_error(status: RPCStatusCode, message: str, *details: Any) -> RPCError:
    """An ``RPCError`` as the client raises it, its gRPC status carrying ``details``."""
    packed = []
    for detail in details:
        each = AnyDetail()
        each.Pack(detail)
        packed.append(each)
    raw = GrpcStatus(code=int(status), message=message, details=packed).SerializeToString()
    return RPCError(message, status, raw)


def refuse(service: Any, method: str, error: RPCError, asked: list[Any] | None = None) -> Callable[[], None]:
    """Make ``service.<method>`` raise ``error`` (each request noted in ``asked``); returns the undo."""
    real: Callable[..., Awaitable[Any]] = getattr(service, method)

    async def refusing(req: Any, **kwargs: Any) -> Any:
        if asked is not None:
            asked.append(req)
        raise error

    setattr(service, method, refusing)
    return lambda: setattr(service, method, real)


async def api_client(stack: Any) -> Client:
    app = stack.api.app

    async def connected() -> bool:
        return app.state.admitter.client is not None

    await eventually(connected, timeout_s=30, what="the API's Temporal client")
    client: Client = app.state.client
    return client


async def test_the_real_servers_not_found_of_a_namespace_is_no_not_found_of_an_execution(
    temporal_address: str,
) -> None:
    present = await connect(temporal_address)
    absent = await connect(temporal_address, namespace=f"gone-{short_id()}")
    answers: dict[str, BaseException] = {}
    for name, client in (("execution", present), ("namespace", absent)):
        try:
            await client.get_workflow_handle(f"none-{short_id()}").describe()
        except RPCError as err:
            answers[name] = err
    assert execution_not_found(answers["execution"])
    assert not execution_not_found(answers["namespace"])
    assert not temporal_outage(answers["namespace"])
    # a NOT_FOUND with no detail of Temporal's (a proxy's) is not recognised either
    assert not execution_not_found(RPCError("not found", RPCStatusCode.NOT_FOUND, b""))


async def test_an_api_whose_namespace_is_not_the_jobs_ends_no_running_job_at_a_cancel(
    make_stack: StackFactory, tmp_path: Path, temporal_address: str
) -> None:
    """The API's ``temporal.namespace`` is not the one its jobs run in (mistyped, or the
    namespace deleted): Temporal answers every request ``NOT_FOUND`` of the namespace. A
    consumer's cancel of a job whose run is open in the jobs' namespace is recorded, and the
    job is answered as it is: its run (here, waiting for a worker) takes the cancel from the
    ledger. Before, the cancel read the namespace's "not found" as the execution's and
    ended the job ``cancelled`` at once."""
    stack = make_stack(config(tmp_path, api={"cancel_wait_ms": 1_000}))
    http = await stack.start_api()
    pool = await stack.ledger()
    client = await api_client(stack)
    admitted = await http.post("/jobs", json=stack.task(target_id="demo"))
    assert admitted.status_code == 202, admitted.text
    job_id = admitted.json()["job"]["job_id"]

    async def started() -> bool:
        return await pool.fetchval("SELECT workflow_started_at FROM jobs WHERE job_id = $1", job_id) is not None

    await eventually(started, timeout_s=30, what="the job's run started")
    app = stack.api.app  # type: ignore[union-attr]
    app.state.client = await connect(temporal_address, namespace=f"not-the-jobs-{short_id()}")
    try:
        answer = await http.post(f"/jobs/{job_id}/cancel")
    finally:
        app.state.client = client
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] != "cancelled", answer.json()
    assert await pool.fetchval("SELECT completed_at FROM jobs WHERE job_id = $1", job_id) is None
    assert await pool.fetchval("SELECT cancel_requested_at FROM jobs WHERE job_id = $1", job_id) is not None
    assert (await client.get_workflow_handle(job_id).describe()).status == WorkflowExecutionStatus.RUNNING


@each_status(RPCStatusCode.UNAVAILABLE, RPCStatusCode.RESOURCE_EXHAUSTED, RPCStatusCode.DEADLINE_EXCEEDED)
async def test_a_cancel_temporal_cannot_answer_is_a_retryable_503_never_an_unknown_job(
    make_stack: StackFactory, tmp_path: Path, status: RPCStatusCode
) -> None:
    """A cancel of a job id the ledger does not hold asks Temporal whether a run under it is
    still admitting its Task (a job a Temporal client just started). Temporal answering an
    outage is no "no": the consumer is told to retry (``503 temporal_unavailable``,
    ``Retry-After``) — before, ``404 unknown job``, for a job that may exist."""
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    client = await api_client(stack)
    undo = refuse(client.workflow_service, "describe_workflow_execution", rpc_error(status, f"injected {status.name}"))
    try:
        answer = await http.post(f"/jobs/demo@manual-{short_id()}/cancel")
    finally:
        undo()
    assert answer.status_code == 503, answer.text
    assert answer.headers["retry-after"] == "5"
    error = answer.json()["error"]
    assert (error["code"], error["retryable"], error["detail"]["reason"]) == (
        "internal_error",
        True,
        "temporal_unavailable",
    )
    # Temporal's own "not found" of the execution is still the unknown job
    not_found = rpc_error(RPCStatusCode.NOT_FOUND, "workflow not found for ID: x", NotFoundFailure())
    undo = refuse(client.workflow_service, "describe_workflow_execution", not_found)
    try:
        unknown = await http.post(f"/jobs/demo@manual-{short_id()}/cancel")
    finally:
        undo()
    assert unknown.status_code == 404, unknown.text


async def test_a_cancel_whose_describe_temporal_cannot_answer_is_a_retryable_503_not_a_500(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    """A job admitted whose run never started (its starts refused): the cancel asks Temporal
    whether any run could act on it. An outage there is the API's retryable 503 — before,
    the ``RPCError`` escaped as ``500 internal error``."""
    stack = make_stack(config(tmp_path, reconcile_interval_ms=3_600_000))
    http = await stack.start_api()
    pool = await stack.ledger()
    client = await api_client(stack)
    service = client.workflow_service
    starts: list[Any] = []
    refused_start = rpc_error(RPCStatusCode.UNAVAILABLE, "injected UNAVAILABLE")
    undo_start = refuse(service, "start_workflow_execution", refused_start, starts)
    try:
        admitted = await http.post("/jobs", json=stack.task(target_id="demo"))
        assert admitted.status_code == 202, admitted.text
        job_id = admitted.json()["job"]["job_id"]
        await eventually(lambda: len(starts) >= 1, timeout_s=30, what="the job's start refused")
        undo = refuse(
            service,
            "describe_workflow_execution",
            rpc_error(RPCStatusCode.RESOURCE_EXHAUSTED, "namespace rate limit exceeded"),
        )
        try:
            answer = await http.post(f"/jobs/{job_id}/cancel")
        finally:
            undo()
    finally:
        undo_start()
    assert answer.status_code == 503, answer.text
    assert answer.headers["retry-after"] == "5"
    assert answer.json()["error"]["detail"]["reason"] == "temporal_unavailable"
    assert await pool.fetchval("SELECT completed_at FROM jobs WHERE job_id = $1", job_id) is None
    # the cancel was recorded: the same cancel again, Temporal answering, ends the job
    again = await http.post(f"/jobs/{job_id}/cancel")
    assert again.status_code == 200 and again.json()["status"] == "cancelled", again.text


def test_a_namespace_not_found_detail_is_no_execution_not_found() -> None:
    namespace = rpc_error(RPCStatusCode.NOT_FOUND, "Namespace x is not found.", NamespaceNotFoundFailure(namespace="x"))
    execution = rpc_error(RPCStatusCode.NOT_FOUND, "workflow not found for ID: x", NotFoundFailure())
    assert not execution_not_found(namespace) and execution_not_found(execution)
    assert not execution_not_found(rpc_error(RPCStatusCode.UNAVAILABLE, "down", NotFoundFailure()))


async def test_a_follower_gone_whose_newer_run_temporal_cannot_say_leaves_its_job_running(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    """A ``follow_job`` attempt told its workflow's run is gone (``not_found``: terminated,
    or reset — a reset's newer run follows the job on) asks Temporal whether a newer run
    lives on. Temporal unable to answer says neither: the job runs on (the Task the
    consumer asked for), never cancelled on a guess — before, any refusal of that describe
    read as "gone" and cancelled the job a reset follower still waited for."""
    stack = make_stack(config(tmp_path))
    pool = await stack.ledger()
    client = await connect_configured(stack.settings.temporal)
    deps = SimpleNamespace(settings=stack.settings, pool=pool, client=client)
    body = stack.task(target_id="demo")
    environment = ActivityEnvironment()
    follow = asyncio.ensure_future(environment.run(FollowActivity(deps).follow_job, FollowJob(task=body)))  # type: ignore[arg-type]

    async def admitted() -> bool:
        return await pool.fetchval("SELECT count(*) FROM jobs WHERE idempotency_key = $1", body["idempotency_key"]) == 1

    await eventually(admitted, timeout_s=30, what="the followed job admitted")
    assert not follow.done()
    undo = refuse(
        client.workflow_service,
        "describe_workflow_execution",
        rpc_error(RPCStatusCode.UNAVAILABLE, "injected UNAVAILABLE"),
    )
    try:
        environment.cancel(ActivityCancellationDetails(not_found=True))
        with pytest.raises((asyncio.CancelledError, ApplicationError)):
            await asyncio.wait_for(follow, 30)
    finally:
        undo()
    job = await pool.fetchrow(
        "SELECT completed_at, cancel_requested_at FROM jobs WHERE idempotency_key = $1", body["idempotency_key"]
    )
    assert (job["completed_at"], job["cancel_requested_at"]) == (None, None), dict(job)


@each_status(RPCStatusCode.INVALID_ARGUMENT, RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION)
async def test_a_nexus_start_temporal_refuses_is_retried_by_the_caller_not_failed(
    make_stack: StackFactory, tmp_path: Path, status: RPCStatusCode
) -> None:
    """The Nexus ``start_job`` admitted the Task (durable: the reconciler starts its run), then
    Temporal refused the run's start — a search attribute the namespace does not define
    (``INVALID_ARGUMENT``), a namespace's ``NOT_FOUND``, a ``FAILED_PRECONDITION``. The SDK
    hands such an ``RPCError`` to the caller as a non-retryable error (``BAD_REQUEST``,
    ``NOT_FOUND``, ``INTERNAL`` not retryable): the caller's operation failed for good for a
    job that runs. It is a retryable handler error: the caller's next attempt answers the
    job — attached to its run, or from the ledger once it ended."""
    stack = make_stack(config(tmp_path))
    pool = await stack.ledger()
    client = await connect_configured(stack.settings.temporal)

    async def refused_start(*args: Any, **kwargs: Any) -> Any:
        raise rpc_error(status, f"injected {status.name}")

    caller = SimpleNamespace(client=client, start_workflow=refused_start)
    body = stack.task(target_id="demo")
    with pytest.raises(HandlerError) as raised:
        await StartJob(stack.settings, pool).start_operation(None, caller, body)  # type: ignore[arg-type]
    assert raised.value.retryable, raised.value
    job = await pool.fetchrow(
        "SELECT completed_at, workflow_started_at FROM jobs WHERE idempotency_key = $1", body["idempotency_key"]
    )
    assert job is not None and (job["completed_at"], job["workflow_started_at"]) == (None, None)  # admitted, to start


async def test_one_jobs_describe_temporal_refuses_costs_that_job_not_the_others_reconciliation(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    """Two jobs past their deadline, no worker: the reconciler asks Temporal about each. It
    refuses one job's describe with an error of that request (``INTERNAL``: an execution
    whose state it cannot read) for as long as it lasts. The other job still ends at its
    deadline; the refused one is left as it is (nothing inferred) and asked again next tick.
    Before, the refusal failed every tick: no job past its deadline, cancelled or deleted
    was ever reconciled again, and the loop's failure exited the process every
    ``supervision.fatal_after_ms``."""
    stack = make_stack(config(tmp_path))
    pool = await stack.ledger()
    refused_id = await stack.admit(stack.task(target_id="demo"))
    other_id = await stack.admit(stack.task(target_id="demo"))
    await pool.execute(
        f"UPDATE jobs SET deadline_at = {DB_NOW_MS} - 60000 WHERE job_id = ANY($1::text[])", [refused_id, other_id]
    )
    client = await connect_configured(stack.settings.temporal)
    service = client.workflow_service
    real = service.describe_workflow_execution
    asked: list[str] = []

    async def describe(req: Any, **kwargs: Any) -> Any:
        asked.append(req.execution.workflow_id)
        if req.execution.workflow_id == refused_id:
            raise rpc_error(RPCStatusCode.INTERNAL, "unable to read the execution's mutable state")
        return await real(req, **kwargs)

    service.describe_workflow_execution = describe  # type: ignore[method-assign]
    report = await tick(pool, None, client, task_queue=stack.task_queue)
    assert other_id in report.deadline, report
    assert refused_id in asked and refused_id not in report.deadline
    assert await pool.fetchval("SELECT completed_at FROM jobs WHERE job_id = $1", refused_id) is None
    # an outage is still the tick's failure: nothing is inferred, the loop retries
    service.describe_workflow_execution = real  # type: ignore[method-assign]
    undo = refuse(service, "describe_workflow_execution", rpc_error(RPCStatusCode.UNAVAILABLE, "down"))
    try:
        with pytest.raises(RPCError):
            await tick(pool, None, client, task_queue=stack.task_queue)
    finally:
        undo()


async def test_a_tick_whose_every_describe_temporal_refused_is_its_outage_paged_and_backed_off(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    """A proxy before Temporal (or a frontend failing on every read of the shard) answers
    ``INTERNAL`` to every ``DescribeWorkflowExecution`` and passes the lists: each refusal
    alone reads as one job's (:func:`curaflow.temporal.answers.refused_one_request`), and
    every job was skipped on every tick, the loop healthy, nothing counted — only
    ``CuraflowJobsStuck`` paged, once the jobs' deadlines had long passed. A tick in which
    every request about an execution (at least two executions) was refused, none answered, is
    Temporal's outage for the reconciler: the tick fails (the supervisor counts it in
    ``curaflow_background_errors_total{loop="reconciler"}`` and backs off), the process records
    ``curaflow_temporal_unavailable_last_seconds{where="reconciler"}`` (``CuraflowTemporalUnavailable``)
    and nothing is inferred for any job."""
    stack = make_stack(config(tmp_path))
    pool = await stack.ledger()
    jobs = [await stack.admit(stack.task(target_id="demo")) for _ in range(3)]
    await pool.execute(f"UPDATE jobs SET deadline_at = {DB_NOW_MS} - 60000 WHERE job_id = ANY($1::text[])", jobs)
    client = await connect_configured(stack.settings.temporal)
    asked: list[Any] = []
    undo = refuse(
        client.workflow_service,
        "describe_workflow_execution",
        rpc_error(RPCStatusCode.INTERNAL, "upstream connect error or disconnect/reset before headers"),
        asked,
    )
    try:
        with pytest.raises(Exception) as failed:
            await tick(pool, None, client, task_queue=stack.task_queue)
        assert temporal_outage(failed.value), repr(failed.value)
        assert {req.execution.workflow_id for req in asked} >= set(jobs)
        assert (
            await pool.fetchval(
                "SELECT count(*) FROM jobs WHERE job_id = ANY($1::text[]) AND completed_at IS NULL", jobs
            )
            == 3
        )

        def sample(name: str, labels: dict[str, str]) -> float:
            return REGISTRY.get_sample_value(name, labels) or 0.0

        errors_before = sample("curaflow_background_errors_total", {"loop": "reconciler"})
        failing_since_s = time.time()
        stop = asyncio.Event()
        supervisor = Supervisor(stop, SupervisionPolicy(initial_backoff_s=0.05, max_backoff_s=0.2, fatal_after_s=3600))
        loop = asyncio.create_task(
            run_forever(pool, None, 0.05, stop, client, supervisor=supervisor, task_queue=stack.task_queue)
        )
        try:
            state = await eventually(
                lambda: (s := supervisor.loops.get("reconciler")) is not None and s.failures >= 2 and s,
                timeout_s=30,
                what="the reconciler's ticks failing",
            )
        finally:
            stop.set()
            await loop
        assert state.last_error is not None and "refused" in state.last_error, state.last_error
        assert sample("curaflow_background_errors_total", {"loop": "reconciler"}) >= errors_before + 2
        assert sample("curaflow_temporal_unavailable_last_seconds", {"where": "reconciler"}) >= failing_since_s
    finally:
        undo()
    # Temporal answering again: one job's refusal among answered ones is that job's alone
    real = client.workflow_service.describe_workflow_execution

    async def describe(req: Any, **kwargs: Any) -> Any:
        if req.execution.workflow_id == jobs[0]:
            raise rpc_error(RPCStatusCode.INTERNAL, "unable to read the execution's mutable state")
        return await real(req, **kwargs)

    client.workflow_service.describe_workflow_execution = describe  # type: ignore[method-assign]
    report = await tick(pool, None, client, task_queue=stack.task_queue)
    assert set(report.deadline) == set(jobs[1:]), report

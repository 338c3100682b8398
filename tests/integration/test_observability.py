"""Metrics, logs and traces of real jobs: real dev server, PostgreSQL, worker processes, API."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client

from curaflow.devstack.ports import free_port
from curaflow.devstack.processes import WorkerProcess
from curaflow.process.httpserver import BackgroundServer
from curaflow.sources.pixiv.replay.app import create_replay_app
from tests.conftest import StackFactory
from tests.support import Stack, eventually, short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def directory_config(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    route = f"out-{short_id()}"
    return {
        "routes": {route: {"kind": "directory", "path": str(tmp_path / "delivered")}},
        "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [route]}],
        **extra,
    }


def sample(text: str, name: str, **labels: str) -> float:
    """The value of one sample of a Prometheus exposition (0 when absent)."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def test_metrics_move_on_the_api_and_the_worker(
    make_stack: StackFactory, tmp_path: Path, temporal_client: Client
) -> None:
    metrics_port, sdk_port = free_port(), free_port()
    stack: Stack = make_stack(
        directory_config(tmp_path, observability={"metrics_port": metrics_port, "temporal_metrics_port": sdk_port})
    )
    await stack.start_worker()
    http = await stack.start_api()
    before = (await http.get("/metrics")).text
    admitted_before = sample(before, "curaflow_jobs_admitted_total", trigger="protocol")

    resp = await http.post("/jobs", json=stack.task(query={"tags": ["オリジナル"]}))
    assert resp.status_code == 202, resp.text
    job_id = resp.json()["job"]["job_id"]
    await stack.wait_terminal(job_id)
    # the worker counts the finish after its commit (what wait_terminal sees): wait for
    # the workflow itself to end, which is after the finish activity returned
    await temporal_client.get_workflow_handle(job_id).result()

    api_metrics = await http.get("/metrics")
    assert api_metrics.status_code == 200
    assert api_metrics.headers["content-type"].startswith("text/plain")
    assert sample(api_metrics.text, "curaflow_jobs_admitted_total", trigger="protocol") == admitted_before + 1
    async with httpx.AsyncClient() as plain:
        worker = (await plain.get(f"http://127.0.0.1:{metrics_port}/metrics")).text
        sdk = (await plain.get(f"http://127.0.0.1:{sdk_port}/metrics")).text
    route = stack.settings.targets[0].routes[0]
    assert sample(worker, "curaflow_jobs_terminal_total", status="succeeded", business_status="success") == 1
    assert sample(worker, "curaflow_cells_terminal_total", state="submitted") == 1
    assert sample(worker, "curaflow_delivery_attempts_total", route=route, kind="directory") == 1
    assert sample(worker, "curaflow_delivery_results_total", route=route, result="delivered") == 1
    assert sample(worker, "curaflow_job_duration_seconds_count", business_status="success") == 1
    assert sample(worker, "curaflow_activity_queue_wait_seconds_count", activity="acquire") >= 1
    assert sample(worker, "curaflow_activity_attempts_total", activity="finish", result="ok") == 1
    assert "curaflow_heartbeat_timeouts_total" in worker
    assert sample(worker, "curaflow_worker_up") == 1
    # each process says its own role is up (CuraflowNoWorker / CuraflowNoApi read their absence)
    assert sample(api_metrics.text, "curaflow_api_up") == 1
    assert "curaflow_api_up" not in worker
    # the Temporal SDK runtime's own metrics, on their own port
    assert "temporal_activity_execution_latency" in sdk or "temporal_request" in sdk, sdk[:500]

    # event-stream lag is observed when a consumer reads a page of events
    from curaflow.ledger.events import read_events

    pool = await stack.ledger()
    async with pool.acquire() as conn:
        page = await read_events(conn, job_id, after_seq=None, from_ack=False, limit=10, correlation_id=None)
    assert page.events
    after = (await http.get("/metrics")).text
    assert sample(after, "curaflow_event_stream_lag_seconds_count") >= 1


async def test_logs_are_json_lines_with_context_and_never_a_secret(make_stack: StackFactory, tmp_path: Path) -> None:
    api_token = "api-token-SECRET-" + short_id()
    refresh = "pixiv-refresh-SECRET-" + short_id()
    replay = await BackgroundServer(create_replay_app()).start()
    try:
        stack = make_stack(
            directory_config(
                tmp_path,
                pixiv={
                    "api_url": replay.url,
                    "auth_url": replay.url,
                    "image_url": replay.url + "/i",  # the replay stands in for i.pximg.net too
                    "min_interval_ms": 0,
                },
                observability={"log_level": "DEBUG"},
            )
        )
        env = stack.worker_env()
        env.update(PIXIV_REFRESH_TOKEN=refresh, CURAFLOW_API_TOKEN=api_token)
        log_file = tmp_path / "worker-secrets.log"
        worker = WorkerProcess(env, log_file).start()
        stack.workers.append(worker)
        await eventually(
            lambda: log_file.exists() and "worker.started" in log_file.read_text(), timeout_s=30, what="worker started"
        )
        job_id = await stack.admit(stack.task(query={"tags": ["オリジナル"]}))
        record = await stack.wait_terminal(job_id)
        assert record.business_status == "success"  # the real client authenticated with the refresh token
        await asyncio.to_thread(worker.stop)
    finally:
        await replay.stop()
    text = log_file.read_text()
    assert refresh not in text and api_token not in text
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]  # every line is one JSON object
    assert all("event" in e and "timestamp" in e and "level" in e for e in lines)
    outcome = [e for e in lines if e["event"] == "schedule.outcome"]
    assert len(outcome) == 1 and outcome[0]["job_id"] == job_id
    # activity lines carry the job, the cell's target and the attempt
    attempts = [e for e in lines if e["event"] == "activity.attempt_done"]
    assert {e["activity"] for e in attempts} >= {"acquire", "deliver", "finish"}
    for e in attempts:
        assert e["job_id"] == job_id and e["attempt"] == 1
        if e["activity"] != "finish":
            assert e["target_id"] == "demo"
    assert not re.search(r"SECRET-[0-9a-f]{8}", text)


async def test_one_trace_from_post_jobs_through_the_workflows_activities(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from curaflow.observability import tracing
    from curaflow.process.worker import run_worker

    exporter = InMemorySpanExporter()
    stack = make_stack(directory_config(tmp_path, observability={"tracing": True}))
    assert tracing.setup_tracing("curaflow-test", enabled=True, exporter=exporter)
    expected = {
        "StartWorkflow:JobWorkflow",
        "RunWorkflow:JobWorkflow",
        "StartActivity:acquire",
        "RunActivity:acquire",
        "RunActivity:deliver",
        "RunActivity:finish",
    }

    def in_trace() -> set[str]:
        """Names of the spans in the trace of ``POST /jobs`` (none until that span ended)."""
        spans = exporter.get_finished_spans()
        root = [s for s in spans if s.name == "POST /jobs" and s.parent is None]
        assert len(root) <= 1, sorted({s.name for s in spans})
        return {s.name for s in spans if root and s.context.trace_id == root[0].context.trace_id}

    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(stack.settings, stop))  # in-process: spans land in the exporter
    try:
        # No wait for the worker: the workflow's first task waits in its queue until it polls.
        http = await stack.start_api()
        resp = await http.post("/jobs", json=stack.task(query={"tags": ["オリジナル"]}))
        assert resp.status_code == 202, resp.text
        job_id = resp.json()["job"]["job_id"]
        await stack.wait_terminal(job_id)
        # The workflow's own span ends when its execution closes, just after the ledger.
        await eventually(lambda: expected <= in_trace(), timeout_s=10, what=lambda: f"{expected} in {in_trace()}")
    finally:
        stop.set()
        await worker
        tracing._state["tracing"] = False  # later tests of this process run untraced


async def test_both_metrics_endpoints_of_a_worker_listen_on_metrics_host(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    """``observability.metrics_host`` binds curaflow's metrics and the Temporal SDK's alike."""
    import psutil

    metrics_port, sdk_port = free_port(), free_port()
    stack: Stack = make_stack(
        directory_config(
            tmp_path,
            observability={
                "metrics_port": metrics_port,
                "temporal_metrics_port": sdk_port,
                "metrics_host": "127.0.0.1",
            },
        )
    )
    worker = await stack.start_worker()
    assert worker.process is not None
    listening = {
        conn.laddr.port: conn.laddr.ip
        for conn in psutil.Process(worker.process.pid).net_connections(kind="inet")
        if conn.status == psutil.CONN_LISTEN
    }
    assert listening.get(metrics_port) == "127.0.0.1", listening
    assert listening.get(sdk_port) == "127.0.0.1", listening
    async with httpx.AsyncClient() as plain:
        assert (await plain.get(f"http://127.0.0.1:{sdk_port}/metrics")).status_code == 200

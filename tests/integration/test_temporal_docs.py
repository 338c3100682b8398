"""Every command of ``docs/temporal.md`` (Temporal clients and the UI), run as written.

The commands are read from the page itself, so the page cannot drift from what works:
only the address, the task queue and the idempotency keys are replaced by this test's
(a fresh key per run). A real worker process, the API, the Pixiv replay (its images
slowed down while a command needs a running job) and a directory route.
"""

from __future__ import annotations

import asyncio
import re
import shlex
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from curaflow.devstack.temporal import temporal_binary
from curaflow.domain.messages import JobState
from curaflow.jobs.submit import start_job
from tests.support import DemoStack, demo_stack, eventually, short_id

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "temporal.md"


def blocks(language: str) -> list[str]:
    """The fenced code blocks of ``language`` on the page, in order."""
    return re.findall(rf"```{language}\n(.*?)```", PAGE.read_text(), flags=re.S)


def commands(block: str) -> list[str]:
    """The shell commands of a block: continuation lines joined, comments dropped."""
    joined = block.replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


@dataclass
class Env(DemoStack):
    """The module's stack, with the page's commands made to run on it."""

    def localise(self, text: str, key: str) -> str:
        """The page's text with this test's address, task queue and idempotency key."""
        return (
            text.replace("127.0.0.1:7233", self.address)
            .replace("--task-queue curaflow", f"--task-queue {self.stack.task_queue}")
            .replace('task_queue="curaflow"', f'task_queue="{self.stack.task_queue}"')
            .replace("cli-1", key)
            .replace('"tc-1"', f'"{key}"')
        )

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        argv = shlex.split(command)
        assert argv[0] == "temporal", command
        return subprocess.run([temporal_binary(), *argv[1:]], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
async def env(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str, ledger_pool: Any
) -> AsyncIterator[Env]:
    async with demo_stack(tmp_path_factory.mktemp("tdocs"), temporal_address, database_url) as demo:
        yield Env(**vars(demo))


def test_the_page_has_the_commands_this_test_runs() -> None:
    python = blocks("python")
    assert len(python) == 3 and "start_job" in python[0]
    assert "run_job" in python[1] and "create_nexus_client" in python[2]  # the examples' shapes (examples/)
    starts, nexus, console = (commands(b) for b in blocks("bash"))
    assert [c.split()[2] for c in starts] == ["execute-update-with-start", "result", "query"]
    assert [c.split()[1:4] for c in nexus] == [["operator", "nexus", "endpoint"]]
    assert [c.split()[2] for c in console] == ["query", "list", "signal", "cancel", "list"]


async def test_the_python_start_runs_a_job_and_prints_its_live_and_final_state(env: Env) -> None:
    key = f"doc-py-{short_id()}"
    code = blocks("python")[0]
    result = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", env.localise(code, key)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[0] in ("queued", "running"), lines
    assert lines[-1] == "succeeded success", lines
    job = (await env.http.get(f"/jobs/demo@manual-{key}")).json()
    assert job["status"] == "succeeded"


async def test_the_cli_update_with_start_and_result_commands_run_a_job(env: Env) -> None:
    key = f"doc-cli-{short_id()}"
    start, result, answer = (env.localise(c, key) for c in commands(blocks("bash")[0]))
    started = await asyncio.to_thread(env.run, start)
    assert started.returncode == 0, started.stderr
    finished = await asyncio.to_thread(env.run, result)
    assert finished.returncode == 0, finished.stderr
    assert '"succeeded"' in finished.stdout or "succeeded" in finished.stdout, finished.stdout
    # Once the job ended, Temporal refuses any start under its id; the job answers the Task.
    again = await asyncio.to_thread(env.run, start)
    assert again.returncode != 0 and "already finished" in again.stdout + again.stderr
    answered = await asyncio.to_thread(env.run, answer)
    assert answered.returncode == 0, answered.stderr
    assert '"state"' in answered.stdout and '"succeeded"' in answered.stdout, answered.stdout
    other = answer.replace('"params":{"target_id":"demo"}', '"params":{"target_id":"demo","query":{"tags":["風景"]}}')
    conflict = await asyncio.to_thread(env.run, other)
    assert conflict.returncode == 0 and "idempotency_conflict" in conflict.stdout, conflict.stdout
    runs = [w async for w in env.client.list_workflows(f'WorkflowId = "demo@manual-{key}"')]
    assert len(runs) == 1  # nothing added a run
    job = (await env.http.get(f"/jobs/demo@manual-{key}")).json()
    assert job["status"] == "succeeded"


async def test_the_nexus_endpoint_command_creates_an_endpoint_to_curaflows_queue(env: Env) -> None:
    from temporalio.api.operatorservice.v1 import DeleteNexusEndpointRequest, ListNexusEndpointsRequest

    name = f"doc-endpoint-{short_id()}"
    [command] = [
        env.localise(c, "unused")
        .replace("--name curaflow-jobs", f"--name {name}")
        .replace("--target-task-queue curaflow", f"--target-task-queue {env.stack.task_queue}")
        for c in commands(blocks("bash")[1])
    ]
    created = await asyncio.to_thread(env.run, command)
    assert created.returncode == 0, created.stderr
    listed = await env.client.operator_service.list_nexus_endpoints(ListNexusEndpointsRequest(name=name))
    [endpoint] = listed.endpoints
    target = endpoint.spec.target.worker
    assert (target.namespace, target.task_queue) == ("default", env.stack.task_queue)
    await env.client.operator_service.delete_nexus_endpoint(
        DeleteNexusEndpointRequest(id=endpoint.id, version=endpoint.version)
    )


async def test_the_console_commands_query_list_and_cancel_running_jobs(env: Env) -> None:
    env.replay.faults.slow_images_s = 8.0  # keeps each job fetching while its commands run
    try:
        key = await running_job(env)
        for command in commands(blocks("bash")[2]):
            job_id = f"demo@manual-{key}"
            answer = await asyncio.to_thread(env.run, env.localise(command, key))
            assert answer.returncode == 0, (command, answer.stderr)
            verb = command.split()[2]
            if verb == "query":
                assert '"running"' in answer.stdout and '"fetching"' in answer.stdout, answer.stdout
            elif verb == "list" and "Running" in command:
                assert job_id in answer.stdout, answer.stdout
            elif verb in ("signal", "cancel"):
                record = await env.stack.wait_terminal(job_id, 30)
                assert record.cells[0].reason == "cancelled_by_consumer", record.cells[0]
                key = await running_job(env)
    finally:
        env.replay.faults.slow_images_s = 0.0


async def running_job(env: Env) -> str:
    """Start a job with ``start_job`` and wait until it fetches; returns its key."""
    key = f"doc-run-{short_id()}"
    task = {"protocol_version": "1", "job_type": "candidate_search", "idempotency_key": key,
            "params": {"target_id": "demo"}}  # fmt: skip
    handle = await start_job(env.client, task, task_queue=env.stack.task_queue)

    async def fetching() -> bool:
        job = (await env.http.get(f"/jobs/{handle.id}")).json()
        return bool(job.get("progress", {}).get("stage") == "fetching")

    async def shown_fetching() -> bool:
        # Temporal's live state follows the ledger by up to the cell_progress delay
        # (docs/temporal.md): a download still running after a second is signalled.
        state = await handle.query("status", result_type=JobState)
        return state.stage == "fetching"

    await eventually(fetching, timeout_s=30, what=f"{handle.id} fetching")
    await eventually(shown_fetching, timeout_s=30, what=f"{handle.id} shown fetching in Temporal")
    return key


async def test_the_shell_example_starts_a_job_and_prints_its_final_state(env: Env, tmp_path: Path) -> None:
    key = f"doc-sh-{short_id()}"
    script = tmp_path / "start_job.sh"
    script.write_text(env.localise((ROOT / "examples" / "start_job.sh").read_text(), key))
    path = f"{Path(temporal_binary()).parent}:/usr/bin:/bin"
    result = await asyncio.to_thread(
        subprocess.run, ["bash", str(script), key], capture_output=True, text=True, timeout=120, env={"PATH": path}
    )
    assert result.returncode == 0, result.stderr
    assert "succeeded" in result.stdout, result.stdout
    job = (await env.http.get(f"/jobs/demo@manual-{key}")).json()
    assert job["status"] == "succeeded"
    # Run again with the same key after the job ended: the job answers, no run is added
    # under its id (docs/temporal.md: always pass RejectDuplicate).
    again = await asyncio.to_thread(
        subprocess.run, ["bash", str(script), key], capture_output=True, text=True, timeout=120, env={"PATH": path}
    )
    assert again.returncode == 0, again.stderr
    assert "succeeded" in again.stdout, again.stdout
    runs = [w async for w in env.client.list_workflows(f'WorkflowId = "demo@manual-{key}"')]
    assert len(runs) == 1, [(w.run_id, w.status) for w in runs]

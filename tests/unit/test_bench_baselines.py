"""The benchmark's baselines run their workflows as curaflow's worker runs its own.

A baseline in the SDK's sandbox beside an unsandboxed curaflow worker (production's
default, ``temporal.workflow_sandbox = false``) paid the sandbox's re-import of its
workflow module on every run — ~8 ms of its worker's CPU a job that curaflow did not pay —
and the in-run ratios of issue 37 flattered curaflow by that much (docs/performance.md).
"""

from __future__ import annotations

import sys

import pytest
from temporalio.worker import UnsandboxedWorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from bench.scenarios.throughput import SOURCE_CONCURRENCY, baseline_command
from curaflow.config import Settings
from curaflow.process.worker import runner_for, workflow_runner


@pytest.mark.parametrize("sandbox", [False, True])
def test_a_baseline_worker_is_told_the_runner_curaflows_worker_uses(sandbox: bool) -> None:
    settings = Settings.model_validate({"temporal": {"workflow_sandbox": sandbox}})
    args = baseline_command("bench.bare_io", settings, "127.0.0.1:7233", "q", "q-source", ["--dir", "/d"])
    assert args[:3] == [sys.executable, "-m", "bench.bare_io"]
    assert args[args.index("--source-concurrency") + 1] == str(SOURCE_CONCURRENCY)
    assert args[args.index("--dir") + 1] == "/d"
    assert ("--workflow-sandbox" in args) is sandbox
    assert isinstance(workflow_runner(settings), SandboxedWorkflowRunner if sandbox else UnsandboxedWorkflowRunner)


def test_the_default_settings_run_every_engine_unsandboxed() -> None:
    """What `curaflow bench` runs: production's default for curaflow, the same for both baselines."""
    settings = Settings()
    assert "--workflow-sandbox" not in baseline_command("bench.bare", settings, "a", "q", "s", [])
    assert isinstance(workflow_runner(settings), UnsandboxedWorkflowRunner)


@pytest.mark.parametrize("module", ["bench.bare", "bench.bare_io"])
def test_each_baseline_takes_the_flag_to_its_runner(module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--workflow-sandbox`` reaches ``serve`` (and through :func:`runner_for`, the worker)."""
    import importlib

    mod = importlib.import_module(module)
    seen: list[bool] = []

    async def serve(*args: object) -> None:
        seen.append(bool(args[-1]))

    monkeypatch.setattr(mod, "serve", serve)
    base = ["x", "--address", "a", "--task-queue", "q", "--source-queue", "s"]
    if module == "bench.bare_io":
        base += ["--replay", "http://r", "--dir", "/d"]
    for argv, want in ((base, False), ([*base, "--workflow-sandbox"], True)):
        monkeypatch.setattr(sys, "argv", argv)
        mod.main()
        assert seen[-1] is want
    assert isinstance(runner_for(sandbox=True), SandboxedWorkflowRunner)
    assert isinstance(runner_for(sandbox=False), UnsandboxedWorkflowRunner)

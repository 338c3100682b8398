"""The ``curaflow`` command as an operator meets it.

Real ``curaflow`` subprocesses; the schedule test uses the session's Temporal dev server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from curaflow import schedules as plans
from curaflow.domain.occurrence import occurrence_job_id
from tests.conftest import StackFactory
from tests.integration.test_schedules import plan_config
from tests.support import short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXE = str(Path(sys.executable).parent / "curaflow")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CURAFLOW_", "TEMPORAL_", "PIXIV_"))}
    env.pop("DATABASE_URL", None)
    env.update(extra)
    return env


def curaflow(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, *args], cwd=cwd, env=env or clean_env(), capture_output=True, text=True, timeout=120)


def test_schedules_without_any_temporal_service_is_a_usage_error(tmp_path: Path) -> None:
    for verb in (["list"], ["trigger", "nightly"], ["sync", "--dry-run"]):
        result = curaflow("schedules", *verb, cwd=tmp_path)
        assert result.returncode == 2, (verb, result.stdout, result.stderr)
        assert "no Temporal service" in result.stderr
        assert "cannot reach Temporal" not in result.stderr


def test_schedules_with_temporal_unreachable_says_so(tmp_path: Path) -> None:
    from curaflow.devstack.temporal import free_port

    env = clean_env(TEMPORAL_ADDRESS=f"127.0.0.1:{free_port()}")
    result = curaflow("schedules", "list", cwd=tmp_path, env=env)
    assert result.returncode == 1, result.stderr
    assert "cannot reach Temporal" in result.stderr
    assert not re.search(r"cannot reach Temporal: \d+\s*$", result.stderr)  # never an exit code as the reason


def test_run_refuses_an_unknown_target_before_starting_anything(tmp_path: Path) -> None:
    started = time.monotonic()
    result = curaflow("run", "--target", "nosuch", cwd=tmp_path)
    elapsed = time.monotonic() - started

    assert result.returncode == 2, result.stderr
    assert "unknown target 'nosuch'" in result.stderr
    assert "unknown_target" in result.stderr
    assert "{" not in result.stderr and "'reason'" not in result.stderr  # not a Python dict
    assert not (tmp_path / ".curaflow" / "pg").exists()  # the embedded stack never started
    assert not (tmp_path / ".curaflow" / "temporal.db").exists()
    assert elapsed < 15


async def test_schedules_trigger_prints_the_job_id(
    make_stack: StackFactory, tmp_path: Path, temporal_client: object
) -> None:
    plan_id = f"plan-{short_id()}"
    stack = make_stack(plan_config(tmp_path, plan_id))
    client = temporal_client
    env = clean_env(CURAFLOW_CONFIG=str(stack.config_path))
    try:
        await plans.sync_schedules(client, stack.settings)  # type: ignore[arg-type]
        before = datetime.now(UTC)
        result = await asyncio.to_thread(curaflow, "schedules", "trigger", plan_id, cwd=tmp_path, env=env)
        after = datetime.now(UTC)
        assert result.returncode == 0, result.stderr
        expected = {occurrence_job_id(plan_id, t, "Asia/Tokyo")[0] for t in (before, after)}
        printed = set(re.findall(rf"{re.escape(plan_id)}@\d{{4}}-\d\d-\d\dT\d{{4}}[+-]\d{{4}}", result.stdout))
        assert printed and printed <= expected, result.stdout
    finally:
        with contextlib.suppress(Exception):
            await client.get_schedule_handle(plan_id).delete()  # type: ignore[attr-defined]

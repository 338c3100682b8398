"""The ``curaflow`` command as an operator meets it.

Real ``curaflow`` subprocesses; the schedule test uses the session's Temporal dev server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from curaflow import schedules as plans
from curaflow.domain.messages import JobInput, RouteRef, TargetSpec
from curaflow.domain.occurrence import occurrence_job_id
from curaflow.ledger.jobs import NewJob, insert_job
from tests.conftest import StackFactory
from tests.integration.test_schedules import plan_config
from tests.support import short_id
from tests.zygote import curaflow_command

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CURAFLOW_", "TEMPORAL_", "PIXIV_"))}
    env.pop("DATABASE_URL", None)
    env.update(extra)
    return env


def curaflow(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return curaflow_command(args, cwd=cwd, env=env or clean_env(), timeout=120)


def test_schedules_without_any_temporal_service_is_a_usage_error(tmp_path: Path) -> None:
    for verb in (["list"], ["trigger", "nightly"], ["sync", "--dry-run"]):
        result = curaflow("schedules", *verb, cwd=tmp_path)
        assert result.returncode == 2, (verb, result.stdout, result.stderr)
        assert "no Temporal service" in result.stderr
        assert "cannot reach Temporal" not in result.stderr


def test_schedules_with_temporal_unreachable_says_so(tmp_path: Path) -> None:
    from curaflow.devstack.ports import free_port

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


async def test_schedules_trigger_prints_the_job_the_occurrence_joined(
    make_stack: StackFactory, tmp_path: Path, temporal_client: object, ledger_pool: asyncpg.Pool
) -> None:
    """A trigger whose minute already has a job of the plan under another id — admitted in
    the plan's zone before a change of it (here UTC, the plan now Asia/Tokyo) — joins that
    job (``admit_occurrence``): the id printed is that job's. Until 2026-12-07 the trigger
    printed the id in the plan's current zone, a job that does not exist."""
    plan_id = f"plan-{short_id()}"
    stack = make_stack(plan_config(tmp_path, plan_id))
    client = temporal_client
    env = clean_env(CURAFLOW_CONFIG=str(stack.config_path))
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    old_ids = set()
    for minute in (now, now + timedelta(minutes=1)):  # the trigger may fall in the next minute
        old_id, date = occurrence_job_id(plan_id, minute, "UTC")
        old_ids.add(old_id)
        inp = JobInput(
            job_id=old_id,
            plan_id=plan_id,
            schedule_id=plan_id,
            trigger="schedule",
            created_at_ms=0,
            deadline_at_ms=0,
            targets=[TargetSpec(target_id="demo", routes=[RouteRef(name=f"r-{short_id()}", kind="directory")])],
        )
        async with ledger_pool.acquire() as conn:
            await insert_job(
                conn,
                NewJob(
                    job_input=inp,
                    occurrence_date=date,
                    occurrence_at=int(minute.timestamp() * 1000),
                    deadline_ms=3_600_000,
                ),
            )
    try:
        await plans.sync_schedules(client, stack.settings)  # type: ignore[arg-type]
        result = await asyncio.to_thread(curaflow, "schedules", "trigger", plan_id, cwd=tmp_path, env=env)
        assert result.returncode == 0, result.stderr
        printed = set(re.findall(rf"{re.escape(plan_id)}@\d{{4}}-\d\d-\d\dT\d{{4}}[+-]\d{{4}}", result.stdout))
        assert printed and printed <= old_ids, result.stdout
    finally:
        with contextlib.suppress(Exception):
            await client.get_schedule_handle(plan_id).delete()  # type: ignore[attr-defined]


# ---- every command that connects to Temporal: one clear line when it cannot ---------------

#: Each command that connects to Temporal, with what it needs to get that far.
TEMPORAL_COMMANDS = {
    "upgrade-check": ["upgrade-check"],
    "schedules-list": ["schedules", "list"],
    "temporal-setup": ["temporal-setup", "--timeout", "2"],
    "run": ["run", "--timeout", "5"],
}


def temporal_problem(problem: str, temporal_address: str) -> dict[str, str]:
    """The environment of a Temporal that cannot serve: unreachable, a namespace that does
    not exist, TLS asked of a plain server."""
    from curaflow.devstack.ports import free_port

    if problem == "unreachable":
        return {"TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}"}
    if problem == "unknown-namespace":
        return {"TEMPORAL_ADDRESS": temporal_address, "TEMPORAL_NAMESPACE": f"no-such-namespace-{short_id()}"}
    return {"TEMPORAL_ADDRESS": temporal_address, "TEMPORAL_TLS": "true"}


@pytest.mark.parametrize("problem", ["unreachable", "unknown-namespace", "tls-against-plain"])
@pytest.mark.parametrize("command", list(TEMPORAL_COMMANDS))
def test_a_command_that_cannot_use_temporal_says_so_in_one_line(
    tmp_path: Path, temporal_address: str, database_url: str, command: str, problem: str
) -> None:
    if command == "temporal-setup" and problem == "unknown-namespace":
        pytest.skip("temporal-setup registers a namespace that does not exist: that is its job")
    import tomli_w

    config = tmp_path / "curaflow.toml"
    config.write_text(
        tomli_w.dumps(
            {
                "state_dir": str(tmp_path / "state"),
                "routes": {"out": {"kind": "directory", "path": str(tmp_path / "out")}},
                "targets": [{"id": "demo", "query": {"tags": ["x"]}, "routes": ["out"]}],
            }
        )
    )
    env = clean_env(
        CURAFLOW_CONFIG=str(config), DATABASE_URL=database_url, **temporal_problem(problem, temporal_address)
    )
    result = curaflow(*TEMPORAL_COMMANDS[command], cwd=tmp_path, env=env)

    assert result.returncode in (1, 2), (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    # the last line says what is wrong with Temporal, whole (``run`` names its source first)
    assert "Temporal" in lines[-1] and lines[-1].rstrip().endswith((")", ".", "))")), lines
    assert [line for line in lines if "Temporal" in line] == [lines[-1]], result.stderr

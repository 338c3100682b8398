"""``curaflow.client`` and the CLI verbs (submit / status / cancel / events) against a real API.

The API runs in-process on a real worker, Temporal and PostgreSQL; the CLI runs as a
real ``curaflow`` subprocess, as a user would run it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from curaflow.client import (
    ApiUnreachable,
    CuraflowClient,
    IdempotencyConflictError,
    InvalidParamsError,
    NoCandidateError,
    ProtocolRefusal,
    UnauthorizedError,
    UnsupportedProtocolVersionError,
    candidate_search_task,
    job_error,
)
from curaflow.protocol import models
from tests.support import API_TOKEN, Stack, short_id
from tests.zygote import curaflow_command

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
async def stack(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str, ledger_pool: Any
) -> AsyncIterator[Stack]:
    tmp = tmp_path_factory.mktemp("client")
    out = f"out-{short_id()}"
    stack = Stack(
        tmp,
        temporal_address,
        database_url,
        {
            "routes": {out: {"kind": "directory", "path": str(tmp / "delivered")}},
            "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [out]}],
        },
    )
    await stack.start_worker()
    await stack.start_api()
    yield stack
    await stack.stop()


def api_url(stack: Stack) -> str:
    assert stack.api is not None
    return stack.api.url


async def test_client_returns_models_and_raises_one_class_per_code(stack: Stack) -> None:
    async with CuraflowClient(api_url(stack), API_TOKEN) as api:
        assert (await api.health()).status == "ok"
        caps = await api.capabilities()
        assert "target_selector" in caps.job_types[0].extended_features
        key = f"client-{short_id()}"
        first = await api.submit(candidate_search_task(key, tags=["オリジナル"], correlation_id="c-1"))
        assert isinstance(first.job, models.Job) and first.replayed is False
        again = await api.submit(candidate_search_task(key, tags=["オリジナル"]))
        assert again.replayed is True and again.job == first.job

        seen = [event async for event in api.follow(first.job.job_id, ack=True)]
        assert [e.type for e in seen][:2] == ["job.accepted", "job.started"] and seen[-1].type == "job.succeeded"
        assert all(isinstance(e, models.Event) for e in seen)
        assert (await api.events(first.job.job_id, unacked=True)).events == []
        # following a stream whose terminal event is behind the cursor ends at once
        assert [e async for e in api.follow(first.job.job_id, after=seen[-1].event_id, wait_ms=1000)] == []
        job = await api.wait(first.job.job_id)
        assert job.terminal and job.status == "succeeded" and job.result is not None
        assert (await api.find_job(key)) == await api.get_job(first.job.job_id)
        assert await api.find_job(key.upper()) is None
        assert (await api.cancel(job.job_id)).status == "succeeded"  # terminal: unchanged

        with pytest.raises(InvalidParamsError) as bad:
            await api.submit(candidate_search_task(f"client-{short_id()}", tags=[" "]))
        assert bad.value.http_status == 400 and bad.value.detail["field"] == "params.query.tags"
        assert bad.value.retryable is False
        with pytest.raises(UnsupportedProtocolVersionError):
            await api.submit({"protocol_version": "9", "job_type": "candidate_search"})
        with pytest.raises(IdempotencyConflictError) as conflict:
            await api.submit(candidate_search_task(key, tags=["風景"]))
        assert conflict.value.http_status == 409
        with pytest.raises(InvalidParamsError) as missing:
            await api.get_job("demo@manual-not-a-job")
        assert missing.value.http_status == 404
        with pytest.raises(InvalidParamsError) as unknown_target:
            await api.submit(candidate_search_task(f"client-{short_id()}", target_id="nope"))
        assert unknown_target.value.detail["reason"] == "unknown_target"

        failed = await api.submit(candidate_search_task(f"client-{short_id()}", tags=["zz-none"]))
        ended = await api.wait(failed.job.job_id)
        error = job_error(ended)
        assert isinstance(error, NoCandidateError) and isinstance(error, ProtocolRefusal)
        assert error.retryable is True and error.http_status is None

    async with CuraflowClient(api_url(stack), "wrong-token") as wrong:
        with pytest.raises(UnauthorizedError) as denied:
            await wrong.capabilities()
        assert denied.value.http_status == 401 and not denied.value.endpoint_disabled
    async with CuraflowClient("http://127.0.0.1:9", API_TOKEN, timeout_s=2) as nowhere:
        with pytest.raises(ApiUnreachable):
            await nowhere.health()


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CURAFLOW_", "TEMPORAL_", "PIXIV_"))}
    env.pop("DATABASE_URL", None)
    env.update(extra)
    return env


async def cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(curaflow_command, args, env=env, cwd=cwd, timeout=120)


async def test_cli_verbs(stack: Stack, tmp_path: Path) -> None:
    url = api_url(stack)
    env = cli_env(CURAFLOW_API_TOKEN=API_TOKEN, CURAFLOW_STATE_DIR=str(tmp_path / "nothing-here"))
    key = f"cli-{short_id()}"

    submitted = await cli(
        "submit", "-t", "オリジナル", "--key", key, "--follow", "--json", "--api-url", url, env=env, cwd=tmp_path
    )
    assert submitted.returncode == 0, submitted.stderr
    job = json.loads(submitted.stdout)
    assert job["status"] == "succeeded" and job["idempotency_key"] == key
    assert "accepted: job" in submitted.stderr
    assert "job.succeeded" in submitted.stderr  # the events streamed under the progress display
    job_id = job["job_id"]

    replay = await cli("submit", "-t", "オリジナル", "--key", key, "--api-url", url, env=env, cwd=tmp_path)
    assert replay.returncode == 0 and "replayed: job" in replay.stderr

    shown = await cli("status", job_id, "--json", "--api-url", url, env=env, cwd=tmp_path)
    assert shown.returncode == 0
    assert json.loads(shown.stdout) == (await stack.http.get(f"/jobs/{job_id}")).json()  # type: ignore[union-attr]
    table = await cli("status", job_id, "--api-url", url, env=env, cwd=tmp_path)
    assert "succeeded (done)" in table.stdout and "delivered" in table.stdout

    listed = await cli("events", job_id, "--json", "--ack", "--api-url", url, env=env, cwd=tmp_path)
    assert listed.returncode == 0
    events = [json.loads(line) for line in listed.stdout.splitlines()]
    assert events[0]["type"] == "job.accepted" and events[-1]["type"] == "job.succeeded"
    page = (await stack.http.get(f"/jobs/{job_id}/events")).json()  # type: ignore[union-attr]
    assert page["unacked"] == 0 and page["events"] == events
    human = await cli("events", job_id, "--follow", "--api-url", url, env=env, cwd=tmp_path)
    assert human.returncode == 0 and "stage=delivering" in human.stdout and "job.succeeded" in human.stdout

    unchanged = await cli("cancel", job_id, "--json", "--api-url", url, env=env, cwd=tmp_path)
    assert unchanged.returncode == 0 and json.loads(unchanged.stdout)["status"] == "succeeded"

    refused = await cli("submit", "--target", "nope", "--api-url", url, env=env, cwd=tmp_path)
    assert refused.returncode == 2 and "invalid_params" in refused.stderr and "unknown_target" in refused.stderr
    nothing = await cli("submit", "--key", f"cli-{short_id()}", "--api-url", url, env=env, cwd=tmp_path)
    assert nothing.returncode == 2 and "--tags" in nothing.stderr and "--target" in nothing.stderr
    missing = await cli("status", "demo@manual-none", "--api-url", url, env=env, cwd=tmp_path)
    assert missing.returncode == 2 and "404" in missing.stderr
    denied = await cli("status", job_id, "--api-url", url, env=dict(env, CURAFLOW_API_TOKEN="nope"), cwd=tmp_path)
    assert denied.returncode == 3 and "unauthorized" in denied.stderr
    down = await cli("status", job_id, "--api-url", "http://127.0.0.1:9", env=env, cwd=tmp_path)
    assert down.returncode == 3 and "cannot reach" in down.stderr
    assert "Traceback" not in refused.stderr + nothing.stderr + missing.stderr + denied.stderr + down.stderr


async def test_cli_finds_the_dev_stack_and_its_token(stack: Stack, tmp_path: Path) -> None:
    # what `curaflow dev` leaves in its state directory: stack.json and the generated token
    state = tmp_path / ".curaflow"
    state.mkdir()
    (state / "stack.json").write_text(
        json.dumps({"pid": os.getpid(), "temporal_address": "-", "database_url": "-", "api_url": api_url(stack)})
    )
    (state / "api-token").write_text(API_TOKEN + "\n")
    assert stack.http is not None
    job_id = (await stack.http.post("/jobs", json=stack.task(query={"tags": ["オリジナル"]}))).json()["job"]["job_id"]

    shown = await cli("status", job_id, "--json", env=cli_env(), cwd=tmp_path)

    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["job_id"] == job_id
    cancelled = await cli("cancel", job_id, "--json", env=cli_env(), cwd=tmp_path)
    assert cancelled.returncode == 0
    assert json.loads(cancelled.stdout)["status"] in ("cancelled", "succeeded")

"""A running stack an operator or a foreign Temporal client acts on, for the modules that
drive ``temporal activity …`` / ``temporal workflow …`` against real jobs.

One real worker process, the API in the test process, the Pixiv replay server, a signed
webhook receiver (its route posts to ``/slow``, scripted per test) and the fake Telegram
Bot API; three targets: ``dir`` (a directory route), ``hook`` (the webhook route) and
``tg`` (the Telegram route).

A module uses the stack by importing its fixtures — ``from tests.operator_support import
env, no_faults_left`` — each module gets its own stack (``env`` is module-scoped).
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from curaflow.devstack.temporal import temporal_binary
from tests.fakes.replay import ReplayServer
from tests.fakes.telegram import FakeTelegram
from tests.fakes.webhook import WebhookReceiver
from tests.jobs_support import telegram_route
from tests.support import Stack, short_id, whsec


@dataclass
class OperatorEnv:
    """The stack and the third parties of a module (see the module doc)."""

    stack: Stack
    http: httpx.AsyncClient
    replay: ReplayServer
    hook: WebhookReceiver
    telegram: FakeTelegram
    client: Client
    address: str


@contextlib.asynccontextmanager
async def operator_env(tmp: Path, temporal_address: str, database_url: str) -> AsyncIterator[OperatorEnv]:
    """Start the stack of the module doc in ``tmp``; stop everything at the exit."""
    replay = await ReplayServer().start()
    hook = await WebhookReceiver(whsec()).start()
    telegram = await FakeTelegram().start()
    out, web, tg = f"out-{short_id()}", f"hook-{short_id()}", f"tg-{short_id()}"
    stack = Stack(
        tmp,
        temporal_address,
        database_url,
        {
            "pixiv": {"api_url": replay.url},
            "routes": {
                out: {"kind": "directory", "path": str(tmp / "out")},
                web: {"kind": "webhook", "url": hook.url + "/slow", "secret": whsec()},
                tg: telegram_route(telegram),
            },
            "targets": [
                {"id": "dir", "query": {"tags": ["オリジナル"]}, "routes": [out]},
                {"id": "hook", "query": {"tags": ["風景"]}, "routes": [web]},
                {"id": "tg", "query": {"tags": ["オリジナル"]}, "routes": [tg]},
            ],
        },
    )
    try:
        await stack.start_worker()
        http = await stack.start_api()
        from curaflow.temporal.connection import connect

        client = await connect(temporal_address)
        yield OperatorEnv(stack, http, replay, hook, telegram, client, temporal_address)
    finally:
        await stack.stop()
        await replay.stop()
        await hook.stop()
        await telegram.stop()


def reset_faults(env: OperatorEnv) -> None:
    """No fault of a test before left for the next: the replay's delays, the receiver's
    script, the fake Telegram's requests and script."""
    env.replay.faults.search_delay_s = 0.0
    env.replay.faults.slow_images_s = 0.0
    env.hook.script.clear()
    env.telegram.reset()


async def submit(env: OperatorEnv, target: str) -> str:
    """``POST /jobs`` for ``target``; the job id (202)."""
    response = await env.http.post("/jobs", json=env.stack.task(target_id=target))
    assert response.status_code == 202, response.text
    return str(response.json()["job"]["job_id"])


async def running_step(env: OperatorEnv, job_id: str, activity_type: str) -> str:
    """The activity id of the job's pending ``activity_type`` step (:func:`pending_step`)."""
    return await pending_step(env.client, job_id, activity_type)


async def pending_step(client: Client, job_id: str, activity_type: str) -> str:
    """The activity id of the job's pending ``activity_type`` step (the API starts a job's
    execution in the background: it may not exist yet).

    Raises:
        TimeoutError: no such step pending within ~20 s.
    """
    for _ in range(200):
        try:
            described = await client.get_workflow_handle(job_id).describe()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            await asyncio.sleep(0.1)
            continue
        for pending in described.raw_description.pending_activities:
            if pending.activity_type.name == activity_type:
                return str(pending.activity_id)
        await asyncio.sleep(0.1)
    raise TimeoutError(f"no pending {activity_type} in {job_id}")


def cli(env: OperatorEnv, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``temporal`` CLI with ``args`` against the module's server (not checked)."""
    return subprocess.run(
        [temporal_binary(), *args, "--address", env.address],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
async def env(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    temporal_address: str,
    database_url: str,
    ledger_pool: Any,
) -> AsyncIterator[OperatorEnv]:
    """The module's own stack (module doc)."""
    tmp = tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])
    async with operator_env(tmp, temporal_address, database_url) as started:
        yield started


@pytest.fixture(autouse=True)
def no_faults_left(env: OperatorEnv) -> None:
    """Every test starts with no fault of the one before (:func:`reset_faults`)."""
    reset_faults(env)

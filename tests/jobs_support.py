"""Helpers for job-level tests of sources and routes.

* :class:`~tests.fakes.replay.ReplayServer` (re-exported): the Pixiv replay in scripted
  fault mode, served from the test process so that every worker process of a stack
  talks to the same one and the test sees every request;
* config builders for Telegram / Discord / webhook routes pointing at the fakes;
* :class:`Fakes` and :class:`SharedEnv`: the third parties and the one worker a job-level
  module shares among its tests (the fixtures are ``tests/integration/conftest.py``'s);
* :func:`start_scheduled`: start a ``JobWorkflow`` directly (as a schedule would) with
  fallback stages;
* ledger look-ups, and :func:`granted_slots`: the slots an account's rate gate handed out.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from temporalio.client import Client

from curaflow.domain.messages import JobInput, TargetSpec
from curaflow.domain.models import JobRecord
from curaflow.ledger.db import DB_NOW_MS, now_ms
from curaflow.ledger.jobs import NewJob, insert_job, mark_workflow_started
from curaflow.temporal.connection import connect, start_job_workflow
from tests.fakes.discord import FakeDiscord
from tests.fakes.replay import ReplayServer, ordered
from tests.fakes.telegram import FakeTelegram
from tests.fakes.webhook import WebhookReceiver
from tests.support import Stack, short_id, whsec
from tests.zygote import curaflow_command

__all__ = ["ReplayServer", "ordered"]

CHAT = "-1001234567890"


def telegram_route(fake: FakeTelegram, **extra: Any) -> dict[str, Any]:
    return {"kind": "telegram", "bot_token": fake.token, "chat_id": CHAT, "api_url": fake.url, **extra}


def discord_route(fake: FakeDiscord, **extra: Any) -> dict[str, Any]:
    return {"kind": "discord", "url": fake.url, **extra}


def webhook_route(receiver: WebhookReceiver, path: str = "/hook") -> dict[str, Any]:
    return {"kind": "webhook", "url": receiver.url + path, "secret": whsec()}


@dataclass
class Fakes:
    """The third parties of a job-level module, on 127.0.0.1: the Pixiv replay, the Telegram
    Bot API, a Discord webhook and a signed-webhook receiver."""

    replay: ReplayServer
    telegram: FakeTelegram
    discord: FakeDiscord
    webhook: WebhookReceiver

    @classmethod
    async def start(cls) -> Fakes:
        return cls(
            await ReplayServer().start(),
            await FakeTelegram().start(),
            await FakeDiscord().start(),
            await WebhookReceiver(whsec()).start(),
        )

    def reset(self) -> None:
        """Forget what each fake saw and drop its script and faults (before each test)."""
        for fake in (self.replay, self.telegram, self.discord, self.webhook):
            fake.reset()

    async def stop(self) -> None:
        for fake in (self.replay, self.telegram, self.discord, self.webhook):
            await fake.stop()


@dataclass
class SharedEnv:
    """One worker process and one set of :class:`Fakes` for a job-level module's tests.

    Each test runs on a *slot* of its own: a target whose id is the slot, its routes (named
    by :meth:`route`) and, where the module says so, a Pixiv account of the same name. The
    module builds the configuration from the slots (its ``shared_config(env)``); the
    fixtures that start and reset it are ``shared_env`` and ``env``
    (``tests/integration/conftest.py``).
    """

    fakes: Fakes
    root: Path
    suffix: str = field(default_factory=short_id)
    _stack: Stack | None = None

    @property
    def stack(self) -> Stack:
        assert self._stack is not None, "the shared worker starts after shared_config"
        return self._stack

    @property
    def replay(self) -> ReplayServer:
        return self.fakes.replay

    @property
    def telegram(self) -> FakeTelegram:
        return self.fakes.telegram

    @property
    def discord(self) -> FakeDiscord:
        return self.fakes.discord

    @property
    def webhook(self) -> WebhookReceiver:
        return self.fakes.webhook

    def route(self, slot: str, kind: str | None = None) -> str:
        """The name of the slot's route (of ``kind``, when the slot has several)."""
        return f"{slot}-{kind}-{self.suffix}" if kind else f"{slot}-{self.suffix}"

    def out(self, slot: str) -> Path:
        """Where a slot's directory route delivers, when the module gives it one there."""
        return self.root / slot / "delivered"

    def task(self, slot: str, tags: list[str] | None = None, **params: Any) -> dict[str, Any]:
        """A Task on the slot's target (the query's tags default to ``オリジナル``)."""
        return self.stack.task(target_id=slot, query={"tags": tags or ["オリジナル"]}, **params)

    async def run(self, slot: str, tags: list[str] | None = None, **params: Any) -> JobRecord:
        """Admit a job on the slot's target and wait for its end (at most 120 s)."""
        return await self.stack.wait_terminal(await self.stack.admit(self.task(slot, tags, **params)), timeout_s=120)


def spec_for(stack: Stack, target_id: str = "demo") -> TargetSpec:
    """The configured target of ``stack`` as a job runs it (no task overrides)."""
    t = stack.settings.target(target_id)
    assert t is not None
    return TargetSpec(
        target_id=t.id,
        account=t.account,
        work_type=t.work_type,
        query=t.query,
        filters=t.filters,
        limit=t.limit,
        scan_limit=t.scan_limit,
        storage_mode=t.storage_mode,
        routes=stack.settings.route_refs(t),
    )


async def start_scheduled(stack: Stack, *, stages: int, target_id: str = "demo") -> str:
    """Insert and start a job the way a schedule does: ``trigger=schedule`` with fallback stages."""
    created = now_ms()
    job_id = f"{target_id}@2025-02-04T{short_id()}"
    inp = JobInput(
        job_id=job_id,
        plan_id=target_id,
        schedule_id=target_id,
        trigger="schedule",
        created_at_ms=created,
        deadline_at_ms=created + stack.settings.budgets.default_deadline_ms,
        targets=[spec_for(stack, target_id)],
        budgets=stack.settings.budgets_model(),
        max_fallback_stages=stages,
        source_task_queues=stack.settings.source_task_queues(),
    )
    pool = await stack.ledger()
    async with pool.acquire() as conn:
        await insert_job(conn, NewJob(job_input=inp))
    assert stack.settings.temporal.address
    client = await connect(stack.settings.temporal.address)
    await start_job_workflow(client, inp, stack.settings.temporal.task_queue)
    async with pool.acquire() as conn:
        await mark_workflow_started(conn, job_id)
    return job_id


async def intents(pool: asyncpg.Pool, job_id: str) -> dict[str, asyncpg.Record]:
    """The job's delivery intents by route (released ones excluded)."""
    rows = await pool.fetch(
        """SELECT route, status, work_id, remote_id, remote_ids, attempts, idempotency_key, last_error
           FROM delivery_intents WHERE job_id = $1 AND status <> 'released'""",
        job_id,
    )
    return {r["route"]: r for r in rows}


def gaps(times: list[float]) -> list[float]:
    """Differences between consecutive times."""
    ordered_times = sorted(times)
    return [b - a for a, b in itertools.pairwise(ordered_times)]


@dataclass(frozen=True)
class GrantedSlot:
    """One slot an account's rate gate handed out: a reservation of its ``source_gates``
    row that counted a request (:func:`curaflow.ledger.gates.reserve`).

    Attributes:
        at_ms: when the request may leave — the later of the reservation's time and the
            row's next slot as it found it (what ``_RESERVE`` hands out, the mend of a
            next slot beyond the cap aside): epoch milliseconds, the database's clock.
        request: the row's request count after it (1, 2, …).
    """

    at_ms: int
    request: int


@contextlib.asynccontextmanager
async def granted_slots(pool: asyncpg.Pool, gate: str) -> AsyncIterator[Callable[[], Awaitable[list[GrantedSlot]]]]:
    """Record every slot the rate gate ``gate`` hands out while the block runs, from any
    worker process; yields ``slots()``: those granted so far, in the order granted.

    The times the gate itself decided, which a busy host does not skew — unlike a
    request's arrival at a fake, late by its transit (a fresh connection, a process not
    scheduled), which lengthens the gap before it and shortens the one after it. Recorded
    in the suite's real PostgreSQL by a trigger on ``source_gates`` for this gate's row only,
    into a table of its own (both dropped after): the product writes no statement for it.
    """
    name = f"gate_slots_{short_id()}".replace("-", "_").lower()
    key = gate.replace("'", "''")
    await pool.execute(
        f"""CREATE TABLE {name} (at_ms bigint NOT NULL, request bigint NOT NULL);
            CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              INSERT INTO {name} VALUES (
                CASE WHEN TG_OP = 'INSERT' THEN NEW.updated_at ELSE greatest(NEW.updated_at, OLD.next_at) END,
                NEW.requests);
              RETURN NULL;
            END $$;
            CREATE TRIGGER {name}_first AFTER INSERT ON source_gates FOR EACH ROW
              WHEN (NEW.gate = '{key}' AND NEW.requests > 0) EXECUTE FUNCTION {name}();
            CREATE TRIGGER {name}_next AFTER UPDATE ON source_gates FOR EACH ROW
              WHEN (NEW.gate = '{key}' AND NEW.requests > OLD.requests) EXECUTE FUNCTION {name}();"""
    )

    async def slots() -> list[GrantedSlot]:
        rows = await pool.fetch(f"SELECT at_ms, request FROM {name} ORDER BY request")
        return [GrantedSlot(at_ms=r["at_ms"], request=r["request"]) for r in rows]

    try:
        yield slots
    finally:
        await pool.execute(
            f"""DROP TRIGGER {name}_first ON source_gates; DROP TRIGGER {name}_next ON source_gates;
                DROP FUNCTION {name}(); DROP TABLE {name}"""
        )


async def db_clock_lead(pool: asyncpg.Pool) -> float:
    """How far at most the database's clock (:data:`~curaflow.ledger.db.DB_NOW_MS`) runs
    ahead of this process's ``time.time()``, in seconds (negative: behind): the database's
    reading less the local one taken before it was asked (each pair bounds the lead: the
    tightest of five), plus its half-millisecond rounding."""
    bounds = []
    for _ in range(5):
        before = time.time()
        db_s = int(await pool.fetchval(f"SELECT {DB_NOW_MS}")) / 1000
        bounds.append(db_s + 0.0005 - before)
    return min(bounds)


async def curaflow(*args: str, stack: Stack) -> subprocess.CompletedProcess[str]:
    """Run the ``curaflow`` command as an operator would, on the stack's configuration."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CURAFLOW_", "TEMPORAL_", "DATABASE_"))}
    env["CURAFLOW_CONFIG"] = str(stack.config_path)
    return await asyncio.to_thread(curaflow_command, args, env=env, cwd=stack.tmp, timeout=60)


async def scheduled_jobs(stack: Any, plan_id: str, *, order: str = "created_at") -> list[Any]:
    """The ledger's jobs of schedule ``plan_id`` (id, trigger, occurrence, times, the
    workflow input), ordered by ``order``: ``created_at`` (admission) or ``occurrence_at``
    (the nominal time)."""
    if order not in ("created_at", "occurrence_at"):
        raise ValueError(f"order by created_at or occurrence_at, not {order!r}")
    pool = await stack.ledger()
    return list(
        await pool.fetch(
            "SELECT job_id, trigger, schedule_id, occurrence_at, occurrence_date, created_at, completed_at, "
            f"workflow_input FROM jobs WHERE schedule_id = $1 ORDER BY {order}",
            plan_id,
        )
    )


@dataclass
class WebhookEnv:
    """A module's own stack (:func:`webhook_env`): the Pixiv replay, a signed-webhook
    receiver, a worker and the API on the session's Temporal and PostgreSQL, and a
    Temporal client of the session's server."""

    stack: Stack
    http: httpx.AsyncClient
    replay: ReplayServer
    hook: WebhookReceiver
    client: Client
    temporal_address: str


def one_hook(timeout_ms: int = 20_000) -> Callable[[WebhookReceiver], dict[str, Any]]:
    """A :func:`webhook_env` configuration: target ``demo`` (tags 風景) delivering to one
    signed webhook route, named ``hook-<short id>``, at the receiver's ``/hook``, each
    request bounded by ``timeout_ms`` (a receiver may hold a send that long)."""
    web = f"hook-{short_id()}"

    def config(hook: WebhookReceiver) -> dict[str, Any]:
        return {
            "routes": {web: {**webhook_route(hook), "timeout_ms": timeout_ms}},
            "targets": [{"id": "demo", "query": {"tags": ["風景"]}, "routes": [web]}],
        }

    return config


@contextlib.asynccontextmanager
async def webhook_env(
    tmp: Path,
    temporal_address: str,
    database_url: str,
    config: Callable[[WebhookReceiver], dict[str, Any]],
) -> AsyncIterator[WebhookEnv]:
    """Start a :class:`WebhookEnv` in ``tmp`` whose configuration is ``config(hook)`` (its
    routes and targets, with the hook's URL) over ``pixiv.api_url`` set to the replay's;
    everything it started is stopped on exit, a failed start included."""
    replay = await ReplayServer().start()
    hook = await WebhookReceiver(whsec()).start()
    stack = Stack(tmp, temporal_address, database_url, {"pixiv": {"api_url": replay.url}, **config(hook)})
    try:
        await stack.start_worker()
        http = await stack.start_api()
        client = await connect(temporal_address)
        yield WebhookEnv(stack, http, replay, hook, client, temporal_address)
    finally:
        await stack.stop()
        await replay.stop()
        await hook.stop()

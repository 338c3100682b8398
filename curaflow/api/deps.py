"""The API's dependencies (FastAPI ``Depends``): what a handler needs, named by type.

Every dependency is ``async def``: FastAPI runs a plain ``def`` dependency in its thread
pool, a thread hop per dependency per request (measured at a tenth of the API's CPU).

The application's lifespan (:func:`curaflow.api.app.create_app`) creates the process's
parts once and keeps them on ``app.state``; these providers are the only readers of it.
Handlers declare what they use — ``pool: LedgerPool``, ``settings: SettingsDep`` … — so a
handler's signature says what it touches, and a test can replace a part with
``app.dependency_overrides``.
"""

from __future__ import annotations

from typing import Annotated

import asyncpg
from fastapi import Depends, Request
from temporalio.client import Client

from curaflow.api.body import read_json
from curaflow.config import Settings
from curaflow.jobs.admission import Admitter
from curaflow.ledger.listen import EventNotifier
from curaflow.observability.supervision import Supervisor
from curaflow.protocol.task import ValidatedTask, validate_task


async def settings_of(request: Request) -> Settings:
    """The live configuration."""
    settings: Settings = request.app.state.settings
    return settings


async def pool_of(request: Request) -> asyncpg.Pool:
    """The ledger's connection pool."""
    pool: asyncpg.Pool = request.app.state.pool
    return pool


async def admitter_of(request: Request) -> Admitter:
    """The admission of ``POST /jobs`` and the legacy refetch."""
    admitter: Admitter = request.app.state.admitter
    return admitter


async def notifier_of(request: Request) -> EventNotifier:
    """The process's ``LISTEN`` connection waking long-polling event readers."""
    notifier: EventNotifier = request.app.state.notifier
    return notifier


async def temporal_of(request: Request) -> Client | None:
    """The Temporal client, or None while Temporal has not been reached yet."""
    return getattr(request.app.state, "client", None)


async def pool_if_open(request: Request) -> asyncpg.Pool | None:
    """The ledger pool, or None before the lifespan opened it (readiness answers anyway)."""
    return getattr(request.app.state, "pool", None)


async def supervisor_of(request: Request) -> Supervisor | None:
    """The process's supervisor of background loops (None before start-up)."""
    return getattr(request.app.state, "supervisor", None)


async def failure_of(request: Request) -> str | None:
    """Why the process failed (a background loop that could not recover), or None."""
    return getattr(request.app.state, "failure", None)


async def task_body(request: Request, settings: Annotated[Settings, Depends(settings_of)]) -> ValidatedTask:
    """The request body as a validated Task (:func:`curaflow.protocol.task.validate_task`).

    Raises:
        ProtocolError: 413 / 408 / 400 from :func:`curaflow.api.body.read_json`, then the
            first rule the Task breaks (400).
    """
    return validate_task(await read_json(request, settings.api.max_body_bytes, settings.api.body_timeout_ms))


SettingsDep = Annotated[Settings, Depends(settings_of)]
LedgerPool = Annotated[asyncpg.Pool, Depends(pool_of)]
AdmitterDep = Annotated[Admitter, Depends(admitter_of)]
NotifierDep = Annotated[EventNotifier, Depends(notifier_of)]
TemporalClient = Annotated[Client | None, Depends(temporal_of)]
TaskBody = Annotated[ValidatedTask, Depends(task_body)]

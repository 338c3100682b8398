"""What activities share in one worker process: the ledger pool, sources, routes.

Created once at worker start (:func:`open_deps`) and closed at shutdown. Nothing here is
imported by workflows.
"""

from __future__ import annotations

import asyncio
import os
import socket
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from temporalio import activity
from temporalio.client import Client

from curaflow.artifacts import ArtifactStore
from curaflow.config import Settings
from curaflow.ledger.db import create_pool
from curaflow.ledger.gates import LedgerGate
from curaflow.ledger.source_tokens import LedgerTokenStore
from curaflow.ledger.statements import BACKGROUND, StatementCounter
from curaflow.outbound import Destinations, Outbound, data, parse_networks
from curaflow.routes import Route, RouteContext, UnsupportedRoute, build_route
from curaflow.sources.base import Source
from curaflow.sources.decoding import DecodeBudget
from curaflow.sources.guard import guarded
from curaflow.sources.registry import SourceContext, UnsupportedSource, build_source


@dataclass
class ActivityDeps:
    """Shared resources of the activities of one worker process.

    Attributes:
        pool: the ledger pool.
        sources: what source factories share in this process (settings, pool, the
            clients of a kind: :class:`~curaflow.sources.registry.SourceContext`).
        client: the Temporal client (for ``request_cancel``).
        identity: ``host:pid``, recorded as a lease owner.

    Every exchange with a third party goes through an
    :class:`~curaflow.outbound.Outbound` (time, bytes, destination). Each route and the
    callback pushes get one of their own (their own connection pool): a destination
    that holds its connections open can never starve the source or another route.
    """

    settings: Settings
    pool: asyncpg.Pool
    client: Client | None
    store: ArtifactStore
    sources: SourceContext
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    _sources: dict[str, Source] = field(default_factory=dict)
    _routes: dict[str, Route] = field(default_factory=dict)
    _clients: dict[str, Outbound] = field(default_factory=dict)

    def client_for(self, purpose: str, destinations: Destinations | None = None) -> Outbound:
        """The outbound client of one route (``route:<name>``) or of event pushes (``pushes``).

        Args:
            destinations: what it may reach, when it is created (default: by purpose —
                a route's configured URL; the callback allow-list for ``pushes``).

        Pool size: ``delivery.max_connections`` per client.
        """
        if purpose not in self._clients:
            self._clients[purpose] = Outbound(
                destinations or self._destinations(purpose), max_connections=self.settings.delivery.max_connections
            )
        return self._clients[purpose]

    def _destinations(self, purpose: str) -> Destinations:
        """Who a purpose's client may reach (DESIGN "The outbound layer"): the callback
        allow-list for ``pushes``; for a route, what its config model declares
        (:meth:`~curaflow.routes.base.RouteSettings.destinations`)."""
        if purpose == "pushes":
            networks = parse_networks(self.settings.outbound.private_networks)
            return data(self.settings.api.callback_allowed_hosts, networks)
        config = self.settings.routes.get(purpose.removeprefix("route:"))
        return config.destinations() if config is not None else Destinations(origins=())

    def source(self, name: str) -> Source:
        """The source instance ``name`` — an entry of ``[sources]`` or an account of ``[pixiv]`` — one
        per process (:func:`~curaflow.sources.registry.build_source`), guarded
        (:func:`~curaflow.sources.guard.guarded`: any failure of its own is a
        ``SourceError``, its downloads bounded by ``outbound.download_*``).

        Raises:
            KeyError: no source of that name is configured.
            UnsupportedSource: its kind is not registered in this process.
        """
        if name not in self._sources:
            config = self.settings.source_configs()[name]
            limits = self.settings.outbound
            self._sources[name] = guarded(
                build_source(name, config, self.sources),
                download_max_bytes=limits.download_max_bytes,
                download_timeout_s=limits.download_timeout_ms / 1000,
            )
        return self._sources[name]

    def route(self, name: str, kind: str | None = None) -> Route:
        """The route ``name`` — as the job names it, when ``kind`` is given.

        Args:
            name: the route's configured name.
            kind: the kind the job's ``RouteRef`` gives it (fixed at admission from the
                admitting process's configuration), or None to take this process's.

        Raises:
            UnsupportedRoute: unknown name, a kind not registered in this process, or the
                name configured here as another kind than ``kind`` — a route whose kind
                changed, this process still on the configuration before: a delivery here
                would go where the job does not send it (2026-12-05).
        """
        config = self.settings.routes.get(name)
        if config is None:
            raise UnsupportedRoute(f"route {name!r} is not configured on this worker")
        if kind is not None and config.kind != kind:
            raise UnsupportedRoute(
                f"route {name!r} is a {config.kind} route on this worker, and the job names it as a {kind} route"
            )
        if name not in self._routes:
            context = RouteContext(http=self.client_for(f"route:{name}"))
            self._routes[name] = build_route(name, config, context)
        return self._routes[name]


async def open_deps(settings: Settings, client: Client | None, *, replay_url: str | None = None) -> ActivityDeps:
    """Open the pool and the artifact store for a worker process (sources are built on
    first use, :meth:`ActivityDeps.source`).

    Args:
        settings: the worker's settings (``database.url`` must be set).
        client: the worker's Temporal client.
        replay_url: base URL of the replay server this process started (recorded answers
            of a source, for a source kind that runs on them; handed to its factory).

    A source instance's own configuration is checked when it is built (first use):
    Pixiv's replay mode without ``pixiv.api_url`` or a replay server raises there.
    """
    assert settings.database.url, "database.url must be set for a worker"
    counter = StatementCounter(activity_step, export=True) if settings.observability.ledger_statement_metrics else None
    pool = await create_pool(
        settings.database.url,
        min_size=settings.database.pool_min_size,
        max_size=settings.database.pool_max_size,
        counter=counter,
        **settings.database.pool_bounds(),
    )
    assert settings.artifacts_dir is not None
    store = ArtifactStore(settings.artifacts_dir, budget=DecodeBudget.of(settings.outbound))
    store.identity()  # named once, at start (a small file in the directory): the fetch records it
    await asyncio.to_thread(store.sweep_transfers)
    return ActivityDeps(
        settings=settings,
        pool=pool,
        client=client,
        store=store,
        sources=source_context(settings, pool, replay_url=replay_url),
    )


def activity_step() -> str:
    """The step a ledger statement belongs to: the running activity's type (a local
    activity's too), else ``background`` (:mod:`curaflow.ledger.statements`)."""
    return activity.info().activity_type if activity.in_activity() else BACKGROUND


def source_context(settings: Settings, pool: asyncpg.Pool, *, replay_url: str | None = None) -> SourceContext:
    """What the process's sources are built with: the ``[outbound]`` limits, a
    :class:`~curaflow.ledger.gates.LedgerGate` per instance (keyed by its source task queue),
    the replay server's URL, a :class:`~curaflow.ledger.source_tokens.LedgerTokenStore` per
    instance (an account's rotated refresh token, kept across restarts)."""

    def gates(name: str, **policy: Any) -> LedgerGate:
        return LedgerGate(pool, settings.source_task_queue(name), **policy)

    def tokens(name: str) -> LedgerTokenStore:
        return LedgerTokenStore(pool, settings.source_task_queue(name))

    return SourceContext(settings.outbound, gates, replay_url=replay_url, tokens=tokens)


async def close_deps(deps: ActivityDeps) -> None:
    """Close the sources' and routes' outbound clients and the pool."""
    await deps.sources.aclose()
    for client in deps._clients.values():
        await client.aclose()
    await deps.pool.close()


__all__ = ["ActivityDeps", "UnsupportedRoute", "UnsupportedSource", "close_deps", "open_deps"]

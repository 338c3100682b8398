"""What activities share in one worker process: the ledger pool, source clients, routes.

Created once at worker start (:func:`open_deps`) and closed at shutdown. Nothing here is
imported by workflows.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field

import asyncpg
from temporalio.client import Client

from curaflow.artifacts import ArtifactStore
from curaflow.config import DirectoryRouteConfig, DiscordRouteConfig, Settings, TelegramRouteConfig, WebhookRouteConfig
from curaflow.ledger.db import create_pool
from curaflow.outbound import Destinations, Outbound, configured, data, parse_networks
from curaflow.routes import Route, UnsupportedRoute, build_route
from curaflow.sources.gate import LedgerGate
from curaflow.sources.pixiv import PIXIV_API_URL, PIXIV_AUTH_URL, PixivClient, image_destinations


@dataclass
class ActivityDeps:
    """Shared resources of the activities of one worker process.

    Attributes:
        pool: the ledger pool.
        http: the source's outbound client (Pixiv's API and auth).
        images: the image host's outbound client.
        client: the Temporal client (for ``request_cancel``).
        identity: ``host:pid``, recorded as a lease owner.

    Every exchange with a third party goes through an
    :class:`~curaflow.outbound.Outbound` (time, bytes, destination). Each route and the
    callback pushes get one of their own (their own connection pool): a destination
    that holds its connections open can never starve the source or another route.
    """

    settings: Settings
    pool: asyncpg.Pool
    http: Outbound
    client: Client | None
    store: ArtifactStore
    pixiv_api_url: str
    pixiv_auth_url: str
    pixiv_image_host: str | None = None
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    _pixiv: dict[str, PixivClient] = field(default_factory=dict)
    _routes: dict[str, Route] = field(default_factory=dict)
    images: Outbound | None = None
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
        """Who a purpose's client may reach (DESIGN "The outbound layer")."""
        if purpose == "pushes":
            networks = parse_networks(self.settings.outbound.private_networks)
            return data(self.settings.api.callback_allowed_hosts, networks)
        name = purpose.removeprefix("route:")
        config = self.settings.routes.get(name)
        if isinstance(config, WebhookRouteConfig):
            return configured(config.url)
        if isinstance(config, TelegramRouteConfig):
            return configured(config.api_url)
        if isinstance(config, DiscordRouteConfig):
            return configured(config.url.get_secret_value())
        assert config is None or isinstance(config, DirectoryRouteConfig)
        return Destinations(origins=())

    def pixiv(self, account: str) -> PixivClient:
        """The Pixiv client of ``account`` (one per process), behind the account's rate gate.

        The gate (:class:`~curaflow.sources.gate.LedgerGate`) lives in the ledger, keyed
        by the account's source task queue, so spacing and cooldown hold across worker
        processes and restarts.

        Raises:
            KeyError: the account is not configured.
        """
        if account not in self._pixiv:
            accounts = self.settings.accounts()
            acct = accounts[account]
            pixiv = self.settings.pixiv
            replay = pixiv.replay
            token = "replay" if replay else (acct.refresh_token.get_secret_value() if acct.refresh_token else "")
            interval = pixiv.replay_min_interval_ms if replay else acct.min_interval_ms
            gate = LedgerGate(
                self.pool,
                self.settings.source_task_queue(account),
                min_interval_ms=interval,
                base_ms=pixiv.rate_limit_base_ms,
                cap_ms=pixiv.rate_limit_cap_ms,
                decay_after=pixiv.rate_limit_decay_after,
                pause_ms=pixiv.restriction_pause_ms,
            )
            limits = self.settings.outbound
            self._pixiv[account] = PixivClient(
                self.http,
                images=self.images,
                request_timeout_s=pixiv.request_timeout_ms / 1000,
                page_max_bytes=limits.page_max_bytes,
                download_timeout_s=limits.download_timeout_ms / 1000,
                download_max_bytes=limits.download_max_bytes,
                refresh_token=token,
                api_url=self.pixiv_api_url,
                auth_url=self.pixiv_auth_url,
                image_referer=pixiv.image_referer,
                gate=gate,
                image_host=self.pixiv_image_host,
            )
        return self._pixiv[account]

    def route(self, name: str) -> Route:
        """The route ``name``.

        Raises:
            UnsupportedRoute: unknown name or unsupported kind.
        """
        if name not in self._routes:
            config = self.settings.routes.get(name)
            if config is None:
                raise UnsupportedRoute(f"route {name!r} is not configured on this worker")
            self._routes[name] = build_route(name, config, self.client_for(f"route:{name}"))
        return self._routes[name]


async def open_deps(settings: Settings, client: Client | None, *, replay_url: str | None = None) -> ActivityDeps:
    """Open the pool and HTTP client for a worker process.

    Args:
        settings: the worker's settings (``database.url`` must be set).
        client: the worker's Temporal client.
        replay_url: base URL of the replay server when the source runs in replay mode
            and ``pixiv.api_url`` is not configured.
    """
    assert settings.database.url, "database.url must be set for a worker"
    pool = await create_pool(
        settings.database.url,
        min_size=settings.database.pool_min_size,
        max_size=settings.database.pool_max_size,
    )
    pixiv = settings.pixiv
    if pixiv.replay:
        api = pixiv.api_url or replay_url
        auth = pixiv.auth_url or api
        if api is None:
            raise RuntimeError("replay mode needs pixiv.api_url or a running replay server")
    else:
        api = pixiv.api_url or PIXIV_API_URL
        auth = pixiv.auth_url or PIXIV_AUTH_URL
    assert settings.artifacts_dir is not None
    image_host = pixiv.image_url or (f"{api.rstrip('/')}/i" if pixiv.replay else None)
    networks = parse_networks(settings.outbound.private_networks)
    return ActivityDeps(
        settings=settings,
        pool=pool,
        http=Outbound(configured(api, auth or api)),
        images=Outbound(image_destinations(image_host, networks)),
        client=client,
        store=ArtifactStore(settings.artifacts_dir, max_pixels=settings.outbound.image_max_pixels),
        pixiv_api_url=api,
        pixiv_auth_url=auth or api,
        pixiv_image_host=image_host,
    )


async def close_deps(deps: ActivityDeps) -> None:
    """Close the outbound clients and the pool."""
    await deps.http.aclose()
    if deps.images is not None:
        await deps.images.aclose()
    for client in deps._clients.values():
        await client.aclose()
    await deps.pool.close()


__all__ = ["ActivityDeps", "UnsupportedRoute", "close_deps", "open_deps"]

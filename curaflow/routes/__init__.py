"""Delivery routes: directory, webhook, Telegram (Bot API) and Discord (webhook).

:func:`build_route` turns a configured route into a :class:`~curaflow.routes.base.Route`.
"""

from __future__ import annotations

import httpx

from curaflow.config import (
    DirectoryRouteConfig,
    DiscordRouteConfig,
    RouteConfig,
    TelegramRouteConfig,
    WebhookRouteConfig,
)
from curaflow.outbound import Outbound
from curaflow.routes.base import Route
from curaflow.routes.directory import DirectoryRoute
from curaflow.routes.discord import DiscordRoute
from curaflow.routes.telegram import TelegramRoute
from curaflow.routes.webhook import WebhookRoute


class UnsupportedRoute(Exception):
    """The configured route kind has no implementation in this build."""


def build_route(name: str, config: RouteConfig, http: httpx.AsyncClient | Outbound) -> Route:
    """Instantiate the route ``name`` from its configuration.

    Raises:
        UnsupportedRoute: for a kind this build cannot deliver to.
    """
    if isinstance(config, DirectoryRouteConfig):
        return DirectoryRoute(name, config.path)
    if isinstance(config, WebhookRouteConfig):
        return WebhookRoute(
            name,
            config.url,
            config.secret.get_secret_value(),
            http,
            timeout_s=config.timeout_ms / 1000,
            include_files=config.include_files,
        )
    if isinstance(config, TelegramRouteConfig):
        return TelegramRoute(name, config, http)
    if isinstance(config, DiscordRouteConfig):
        return DiscordRoute(name, config, http)
    raise UnsupportedRoute(f"route {name!r}: kind {config.kind!r} is not supported")

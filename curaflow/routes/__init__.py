"""Delivery routes: directory, webhook, Telegram (Bot API) and Discord (webhook).

:func:`build_route` turns a configured route into a :class:`~curaflow.routes.base.Route`;
each kind's config model lives next to its route, and :data:`RouteConfig` is their union
(what ``[routes.<name>]`` is validated with by :class:`curaflow.config.Settings`).
"""

from __future__ import annotations

from typing import Annotated

import httpx
from pydantic import Field

from curaflow.outbound import Outbound
from curaflow.routes.base import Route, RouteSettings
from curaflow.routes.directory import DirectoryRoute, DirectoryRouteConfig
from curaflow.routes.discord import DiscordRoute, DiscordRouteConfig
from curaflow.routes.telegram import TelegramRoute, TelegramRouteConfig
from curaflow.routes.webhook import WebhookRoute, WebhookRouteConfig

#: ``[routes.<name>]``: the config model of each kind, told apart by ``kind``. A new
#: route kind adds its model (next to its route) here and a branch to :func:`build_route`.
RouteConfig = Annotated[
    DirectoryRouteConfig | WebhookRouteConfig | TelegramRouteConfig | DiscordRouteConfig, Field(discriminator="kind")
]

__all__ = [
    "DirectoryRouteConfig",
    "DiscordRouteConfig",
    "Route",
    "RouteConfig",
    "RouteSettings",
    "TelegramRouteConfig",
    "UnsupportedRoute",
    "WebhookRouteConfig",
    "build_route",
]


class UnsupportedRoute(Exception):
    """The configured route kind has no implementation in this build."""


def build_route(name: str, config: RouteConfig, http: httpx.AsyncClient | Outbound) -> Route:
    """Instantiate the route ``name`` from its configuration.

    Raises:
        UnsupportedRoute: for a kind this build cannot deliver to.
    """
    if isinstance(config, DirectoryRouteConfig):
        return DirectoryRoute(name, config.path, file_mode=config.mode)
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

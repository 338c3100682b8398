"""Delivery routes: directory, webhook, Telegram (Bot API) and Discord (webhook), and the
registry of route kinds (:mod:`curaflow.routes.registry`).

Each kind is one module: its config model (a :class:`~curaflow.routes.base.RouteSettings`
that declares its destinations), its route and its registration
(:func:`~curaflow.routes.registry.register_route`). A kind kept outside curaflow is a
module named by the ``route_modules`` setting. :func:`build_route` turns a configured
route into a :class:`~curaflow.routes.base.Route`.
"""

from __future__ import annotations

from curaflow.routes.base import Route, RouteSettings
from curaflow.routes.directory import DirectoryRouteConfig
from curaflow.routes.discord import DiscordRouteConfig
from curaflow.routes.registry import (
    RouteContext,
    UnsupportedRoute,
    build_route,
    import_route_modules,
    parse_route_configs,
    register_route,
)
from curaflow.routes.telegram import TelegramRouteConfig
from curaflow.routes.webhook import WebhookRouteConfig

__all__ = [
    "DirectoryRouteConfig",
    "DiscordRouteConfig",
    "Route",
    "RouteContext",
    "RouteSettings",
    "TelegramRouteConfig",
    "UnsupportedRoute",
    "WebhookRouteConfig",
    "build_route",
    "import_route_modules",
    "parse_route_configs",
    "register_route",
]

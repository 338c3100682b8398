"""Route kinds by name: their config model and how to build them (mirrors :mod:`curaflow.sources.registry`).

A route kind is registered once, at import of its module, with :func:`register_route` —
its ``kind`` word, its config model (a :class:`~curaflow.routes.base.RouteSettings`
subclass that declares who the route may reach, :meth:`~curaflow.routes.base.RouteSettings.destinations`)
and a factory. The built-in kinds are the modules of :data:`BUILTIN_MODULES` (imported on
the first lookup); further modules are named by the ``route_modules`` setting and
imported when the settings load, before ``[routes]`` is validated (a test-only route
registers itself that way: ``tests/fakes/chat_route.py``).

:func:`parse_route_configs` validates the ``[routes]`` tables with the models registered
for their ``kind``; :func:`build_route` turns one configured route into a
:class:`~curaflow.routes.base.Route`. Nothing here reads the settings (the settings root
sits above the routes: DESIGN.md "Layers").
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import Field, TypeAdapter

from curaflow.outbound import Outbound
from curaflow.routes.base import Route, RouteSettings

#: Modules that register the built-in route kinds.
BUILTIN_MODULES = (
    "curaflow.routes.directory",
    "curaflow.routes.webhook",
    "curaflow.routes.telegram",
    "curaflow.routes.discord",
)


class UnsupportedRoute(Exception):
    """The route is not configured on this worker, or its kind is not registered in this process."""


@dataclass(frozen=True)
class RouteContext:
    """What a route factory gets from the worker process (never the settings).

    Attributes:
        http: the route's own outbound client (its own connection pool), limited to the
            destinations its config model declares
            (:meth:`~curaflow.routes.base.RouteSettings.destinations`).
    """

    http: Outbound


#: ``factory(name, config, context)`` → the route ``name``; ``config`` is an instance of
#: the model registered with it.
RouteFactory = Callable[[str, Any, RouteContext], Route]


@dataclass(frozen=True)
class RouteKind:
    """One registered kind.

    Attributes:
        kind: the ``kind`` word of its configuration.
        config: its config model.
        build: its factory.
    """

    kind: str
    config: type[RouteSettings]
    build: RouteFactory


_KINDS: dict[str, RouteKind] = {}
_loaded = False
_adapter: tuple[tuple[type[RouteSettings], ...], TypeAdapter[dict[str, RouteSettings]]] | None = None


def register_route(kind: str, config: type[RouteSettings], build: RouteFactory) -> None:
    """Register the route kind ``kind`` (idempotent for the same kind and model).

    The refusals happen here, when the kind's module is imported — for a module of
    ``route_modules`` that is when the settings load — never at a first delivery.

    Raises:
        ValueError: ``config`` is not a :class:`~curaflow.routes.base.RouteSettings`
            subclass; it declares no destinations (``destinations`` left abstract); its
            ``kind`` field is not ``Literal[kind]``; or another model is already
            registered under ``kind`` (a built-in one too: they are registered first).
    """
    if not (isinstance(config, type) and issubclass(config, RouteSettings)):
        raise ValueError(f"route kind {kind!r}: its config model must subclass curaflow.routes.base.RouteSettings")
    if inspect.isabstract(config):
        missing = ", ".join(sorted(getattr(config, "__abstractmethods__", ()))) or "destinations"
        raise ValueError(
            f"route kind {kind!r}: {_model_name(config)} does not implement {missing} "
            "(who the route's client may reach; Destinations(origins=()) for a route that reaches no one)"
        )
    annotation = config.model_fields["kind"].annotation
    if get_origin(annotation) is not Literal or get_args(annotation) != (kind,):
        raise ValueError(f"route kind {kind!r}: {_model_name(config)}.kind must be Literal[{kind!r}]")
    known = _KINDS.get(kind)
    if known is not None and _model_name(known.config) != _model_name(config):
        raise ValueError(f"route kind {kind!r} is already registered ({_model_name(known.config)})")
    _KINDS[kind] = RouteKind(kind, config, build)


def _model_name(config: type[RouteSettings]) -> str:
    return f"{config.__module__}.{config.__qualname__}"


def _load_builtin() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for module in BUILTIN_MODULES:
            importlib.import_module(module)


def import_route_modules(modules: Iterable[str]) -> None:
    """Import the modules that register further route kinds (the ``route_modules`` setting).

    Raises:
        ImportError: a module cannot be imported.
        ValueError: a module registers a kind already registered (a built-in one too:
            they are registered first, so a module cannot take their word), or a kind
            :func:`register_route` refuses.
    """
    _load_builtin()
    for module in modules:
        importlib.import_module(module)


def kinds() -> dict[str, RouteKind]:
    """Every registered kind by its word."""
    _load_builtin()
    return dict(_KINDS)


def route_kind(kind: str) -> RouteKind:
    """The registered kind ``kind``.

    Raises:
        UnsupportedRoute: no such kind is registered.
    """
    _load_builtin()
    if kind not in _KINDS:
        raise UnsupportedRoute(f"route kind {kind!r} is not registered (known: {sorted(_KINDS)})")
    return _KINDS[kind]


def _routes_adapter() -> TypeAdapter[dict[str, RouteSettings]]:
    """``dict[str, <the registered models, told apart by kind>]``, rebuilt when a kind is added."""
    global _adapter
    models = tuple(k.config for _, k in sorted(kinds().items()))
    if _adapter is None or _adapter[0] != models:
        member: Any = Annotated[Union[models], Field(discriminator="kind")] if len(models) > 1 else models[0]  # noqa: UP007 - a runtime tuple of types
        _adapter = (models, TypeAdapter(dict[str, member]))
    return _adapter[1]


def parse_route_configs(value: Mapping[str, Any]) -> dict[str, RouteSettings]:
    """Validate the ``[routes]`` tables, each with the model registered for its ``kind``.

    Errors read as they always did: an unknown ``kind`` lists the known ones ("Input tag
    'slack' found using 'kind' does not match any of the expected tags: 'directory', …"),
    a table without one says so, and a field error names the route and its kind
    (``x.webhook.secret``).

    Raises:
        pydantic.ValidationError: every problem of every table (each error's location
            starts with the route's name).
    """
    return _routes_adapter().validate_python(dict(value))


def build_route(name: str, config: RouteSettings, context: RouteContext) -> Route:
    """Instantiate the route ``name`` from its configuration (its kind's factory).

    Raises:
        UnsupportedRoute: its kind is not registered in this process.
    """
    return route_kind(config.kind).build(name, config, context)

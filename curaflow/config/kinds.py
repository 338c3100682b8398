"""Route and source kinds in the configuration: the ``route_modules`` / ``source_modules``
that register kinds from outside curaflow, and each ``[routes.<name>]`` /
``[sources.<name>]`` table validated by the model registered for its ``kind``."""

from __future__ import annotations

from typing import Any

from curaflow.config.base import SettingsProblem
from curaflow.routes import RouteSettings, import_route_modules, parse_route_configs
from curaflow.sources.registry import import_source_modules, parse_source_config


def import_kind_modules(data: Any) -> Any:
    """Import the ``route_modules`` and ``source_modules`` that ``data`` (the raw settings)
    names, so each registers its kinds before ``[routes]`` and ``[sources]`` are validated.

    Args:
        data: the settings' raw input (a dict; anything else is returned untouched).

    Returns:
        ``data``, unchanged.

    Raises:
        SettingsProblem: a module failed while it was imported
            (``route_modules: cannot import 'x' (ModuleNotFoundError: …)``).
    """
    if not isinstance(data, dict):
        return data
    for setting, register in (("route_modules", import_route_modules), ("source_modules", import_source_modules)):
        modules = data.get(setting)
        if not (isinstance(modules, list) and all(isinstance(m, str) for m in modules)):
            continue  # the field's own validation says what is wrong
        for module in modules:
            # Whatever the module raises while it is imported (a missing dependency, a
            # syntax error, a kind its registry refuses, its own failure) is a
            # configuration error naming it.
            try:
                register([module])
            except Exception as err:  # noqa: BLE001 - any failure of the module is reported, named
                raise SettingsProblem(
                    f"{setting}: cannot import {module!r} ({type(err).__name__}: {err})", [(setting,)]
                ) from None
    return data


def parse_routes(value: Any) -> Any:
    """Each ``[routes.<name>]`` table validated by the model registered for its ``kind``
    (:func:`curaflow.routes.registry.parse_route_configs`; an unknown kind lists the
    known ones). Route configs already built (the defaults) pass as they are."""
    if not isinstance(value, dict) or all(isinstance(v, RouteSettings) for v in value.values()):
        return value
    return parse_route_configs(value)


def parse_sources(value: Any) -> Any:
    """Each ``[sources.<name>]`` table validated by the model registered for its ``kind``
    (:func:`curaflow.sources.registry.parse_source_config`).

    Raises:
        SettingsProblem: an entry is invalid, prefixed with its name (``sources.<name>: …``;
            where: the entry, below ``sources``).
    """
    from pydantic import ValidationError

    if not isinstance(value, dict):
        return value
    parsed: dict[str, Any] = {}
    for name, entry in value.items():
        try:
            parsed[name] = parse_source_config(entry)
        except ValidationError as err:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors())
            raise SettingsProblem(f"sources.{name}: {problems}", [(name,)]) from None
        except ValueError as err:
            raise SettingsProblem(f"sources.{name}: {err}", [(name,)]) from None
    return parsed

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

    Every problem of every table is said at the setting it is about, below the table: a
    field the kind's model refuses at its own path (``sources.<name>.unavailable_ttl_ms``,
    ``sources.<name>.url`` missing), a table without a ``kind``, or of a kind not registered
    or not configurable here, at ``sources.<name>.kind`` — each with where its value came
    from, as every other section's fields are said. Until 2026-12-07 the first bad table
    was one line at ``sources``, after pydantic's "Value error,", with every field of it
    run together and the whole table's origin.

    Raises:
        pydantic.ValidationError: every such problem (each error's location starts with the
            table's name; pydantic puts it below ``sources``).
    """
    from pydantic import ValidationError
    from pydantic_core import InitErrorDetails, PydanticCustomError

    if not isinstance(value, dict):
        return value
    parsed: dict[str, Any] = {}
    problems: list[InitErrorDetails] = []
    for name, entry in value.items():
        try:
            parsed[name] = parse_source_config(entry)
        except ValidationError as err:  # the kind's model: each field at its own path
            for e in err.errors():
                problem = InitErrorDetails(type=e["type"], loc=(name, *e["loc"]), input=e["input"])
                if "ctx" in e:
                    problem["ctx"] = e["ctx"]
                problems.append(problem)
        except ValueError as err:  # no kind, or one this build cannot configure: its ``kind``
            table = isinstance(entry, dict)
            # A kind missing is said where it is missing (its origin: the table's).
            kind = "missing" if table and "kind" not in entry else "source_kind"
            problems.append(
                InitErrorDetails(
                    type=PydanticCustomError(kind, "{why}", {"why": str(err)}),
                    loc=(name, "kind") if table else (name,),
                    input=entry.get("kind") if table else entry,
                )
            )
    if problems:
        raise ValidationError.from_exception_data("sources", problems)
    return parsed

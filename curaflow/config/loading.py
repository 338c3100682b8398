"""Loading the settings: a TOML file (or none) under the environment, and an error that
names each bad field and where its value came from."""

from __future__ import annotations

import functools
import os
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic_core import ErrorDetails
from pydantic_settings import (
    DotEnvSettingsSource,
    EnvSettingsSource,
    InitSettingsSource,
    NestedSecretsSettingsSource,
    SecretsSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from curaflow.config.base import Loc, SettingsProblem, dotted
from curaflow.config.environment import SECRETS_DIR_ENV, ConventionalEnv, CuraflowEnv
from curaflow.config.settings import Settings, former_keys
from curaflow.observability.secrets import hold, hold_url_parts


@functools.lru_cache(maxsize=16)
def settings_class(toml_path: Path | None) -> type[Settings]:
    """:class:`Settings` reading ``toml_path`` as its lowest source (itself for None).

    The file is part of the class's ``model_config`` (what pydantic-settings' TOML source
    reads), so two loads of different files never share state.
    """
    if toml_path is None:
        return Settings
    return type(
        "Settings",
        (Settings,),
        {"model_config": SettingsConfigDict(toml_file=toml_path), "__module__": Settings.__module__},
    )


#: What a source holds nowhere at a key.
_ABSENT = object()
#: The key a tagged union of the settings tells its members apart by, whose value
#: pydantic puts in an error's location below the table: a route's ``kind``
#: (:func:`curaflow.routes.registry.parse_route_configs`).
TAG_FIELD = "kind"


def _child(node: Any, key: str | int) -> Any:
    """The value of ``node`` (a source's table or list) at ``key``, or :data:`_ABSENT`."""
    if isinstance(node, dict) and str(key) in node:
        return node[str(key)]
    if isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
        return node[key]
    return _ABSENT


def _merged(held: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Of the sources holding one key (highest precedence first, as ``(source, value)``),
    those whose values make the loaded one — as pydantic-settings merges them
    (``deep_update``): tables merge, any other value replaces what is below it."""
    if not held or not isinstance(held[0][1], dict):
        return held[:1]
    found = []
    for source, value in held:
        if not isinstance(value, dict):
            break
        found.append((source, value))
    return found


def _holders(sources: list[tuple[Any, Any]], loc: Loc) -> tuple[list[tuple[Any, Any]], Loc, bool]:
    """Which sources make the value at ``loc`` (pydantic's error location).

    Args:
        sources: ``(source, its data)``, highest precedence first.
        loc: the location; a key of it no source holds, followed by one they do, is a
            union's tag (a route's kind: ``routes.out.directory.bogus``) and is skipped;
            one that ends the location and is the table's :data:`TAG_FIELD` is a tag too,
            and the error is the whole table's (``routes.out.webhook``: a rule of the
            kind's model as a whole); keys left below a value that is no table are the
            names of a union's members.

    Returns:
        ``(sources, path, whole)``: the sources holding the deepest part of ``loc`` that
        any holds (with their values there), that part without the tags (``path``), and
        whether it is the whole of ``loc``.
    """
    live = _merged([(source, data) for source, data in sources if isinstance(data, dict) and data])
    path: list[str | int] = []
    for position, key in enumerate(loc):
        held = [(source, child) for source, node in live if (child := _child(node, key)) is not _ABSENT]
        if held:
            live = _merged(held)
            path.append(key)
            continue
        below = loc[position + 1 : position + 2]
        if below and any(_child(node, below[0]) is not _ABSENT for _, node in live):
            continue  # a tag
        if not below and any(_child(node, TAG_FIELD) == key for _, node in live):
            # The tag ends the location: the member's own rule, about its whole table
            # (a route's destination unreadable, ``routes.out.webhook``). Until 2026-12-07
            # it was named the default, whichever sources made the table.
            return live, tuple(path), True
        if live and not any(isinstance(node, dict | list) for _, node in live):
            return live, tuple(path), True  # member names below a value
        return live, tuple(path), False
    return live, tuple(path), True


def _variables(prefix: str, path: Loc, names: Iterable[str]) -> list[str]:
    """The names, as set, of the ``CURAFLOW_*`` variables (or secret files) that set the
    value at ``path``: the one of it or of a table above it, else those below it (a table
    they set key by key); the name of ``path`` itself when none is found."""
    fields = [str(k) for k in path if not isinstance(k, int)]
    names = list(names)
    for depth in range(len(fields), 0, -1):
        wanted = (prefix + "__".join(fields[:depth])).lower()
        for name in names:
            if name.lower() == wanted:
                return [name]
    full = (prefix + "__".join(fields)).lower()
    return sorted(name for name in names if name.lower().startswith(full + "__")) or [full.upper()]


def _named(source: Any, path: Loc, toml_path: Path | None) -> str:
    """How the report names ``source`` as the origin of the value at ``path``."""
    if isinstance(source, TomlConfigSettingsSource):  # an InitSettingsSource too
        return f"in {toml_path}"
    if isinstance(source, InitSettingsSource):
        return "given by the command"
    if isinstance(source, ConventionalEnv):
        names = [
            name
            for name, at in ConventionalEnv.MAP.items()
            if at[: len(path)] == path[:2] and (os.environ.get(name) or "").strip()
        ]
        return f"environment variable {', '.join(names)}"
    if isinstance(source, CuraflowEnv):
        names = _variables("CURAFLOW_", path, [k for k in os.environ if k.upper().startswith("CURAFLOW_")])
        return f"environment variable {', '.join(names)}"
    if isinstance(source, NestedSecretsSettingsSource):
        directory = Path(os.environ.get(SECRETS_DIR_ENV, "").strip())
        names = _variables("CURAFLOW_", path, [f.name for f in directory.iterdir()])
        return f"secret file {', '.join(str(directory / name) for name in names)}"
    raise TypeError(f"no name for the settings source {type(source).__name__}")


def origin_of(
    loc: Loc,
    toml_path: Path | None,
    overrides: dict[str, Any] | None = None,
    *,
    missing: bool = False,
) -> str:
    """Where the value at ``loc`` came from: ``environment variable
    CURAFLOW_RETENTION__DAYS``, ``environment variable DATABASE_URL``, ``secret file …``,
    ``in <file>``, ``given by the command``, or ``default`` — so an error names what the
    operator must change. Each source (:meth:`Settings.settings_customise_sources`, in its
    order) is read as it was loaded, and the value is the one of the source of highest
    precedence holding it; a table several sources merge names each of them (``…
    and in <file>``). A value no source holds is the default.

    Args:
        loc: pydantic's location of the error, or where a
            :class:`~curaflow.config.base.SettingsProblem` says a setting sits.
        missing: the error is that ``loc`` is missing: its origin is the table lacking it.
    """
    cls = settings_class(toml_path)
    sources = cls.settings_customise_sources(
        cls,
        InitSettingsSource(cls, init_kwargs=overrides or {}),
        EnvSettingsSource(cls),
        DotEnvSettingsSource(cls),
        SecretsSettingsSource(cls),
    )
    read = [(source, former_keys(source())) for source in sources]
    holders, path, whole = _holders(read, loc)
    if not path or not (whole or missing):
        return "default"
    return " and ".join(_named(source, path, toml_path) for source, _ in holders)


def _origins(
    locs: Iterable[Loc], toml_path: Path | None, overrides: dict[str, Any] | None, *, missing: bool = False
) -> str:
    """Where the values at ``locs`` came from: one origin when they share it, else each
    setting's (``supervision.initial_backoff_ms: in <file>; supervision.max_backoff_ms:
    default``); empty for none."""
    found = {dotted(loc): origin_of(loc, toml_path, overrides, missing=missing) for loc in locs}
    if len(set(found.values())) == 1:
        return next(iter(found.values()))
    return "; ".join(f"{name}: {origin}" for name, origin in found.items())


def _at_fault(error: ErrorDetails) -> tuple[Loc, bool]:
    """Where the value a pydantic error is about sits, and whether it is missing there: its
    location, but a union's tag for an error of the tag (a route's ``kind``: the table may
    merge several sources, the tag is one's)."""
    at = tuple(error["loc"])
    if error["type"] in ("union_tag_invalid", "union_tag_not_found"):
        tag = str((error.get("ctx") or {}).get("discriminator", ""))
        if len(tag) > 2 and tag[0] == tag[-1] == "'":  # a field's name (a callable's is not quoted)
            return (*at, tag[1:-1]), error["type"] == "union_tag_not_found"
    return at, error["type"] == "missing"


def _unreadable(err: OSError | ValueError, toml_path: Path | None) -> str:
    """What could not be read, said with why: the TOML file when the error is the file's
    (its syntax, its reading), else the configuration's other sources, which ``err`` names
    itself (``CURAFLOW_SECRETS_DIR=…: not a directory``, a variable's value). Until
    2026-12-07 every such error was ``cannot read config <file>``: ``None`` without a file,
    a good file blamed for a missing secrets directory (a newcomer's finding)."""
    files = isinstance(err, tomllib.TOMLDecodeError) or (
        isinstance(err, OSError) and err.filename is not None and Path(err.filename) == toml_path
    )
    if toml_path is not None and files:
        return f"cannot read config {toml_path}: {err}"
    return f"cannot read configuration: {err}"


class ConfigError(Exception):
    """The configuration file or environment is invalid; ``str()`` is a readable report."""


def load_settings(config: str | Path | None = None, **overrides: Any) -> Settings:
    """Load and validate settings.

    Args:
        config: TOML file path; defaults to ``$CURAFLOW_CONFIG``; None → defaults only.
        overrides: top-level fields taking precedence over every source.

    Returns:
        The validated :class:`Settings`. Its secrets are held by the process
        (:func:`curaflow.observability.secrets.hold`): masked in every failure handed to
        Temporal and every log line from then on.

    Raises:
        ConfigError: the file is missing or unreadable, or a value is invalid; the
            message names each offending field.
    """
    from pydantic import ValidationError

    path = config or os.environ.get("CURAFLOW_CONFIG") or None
    toml_path: Path | None = None
    if path:
        toml_path = Path(path).expanduser()
        if not toml_path.is_file():
            raise ConfigError(f"config file not found: {toml_path}")
    try:
        settings = settings_class(toml_path)(**overrides)
    except ValidationError as err:
        lines = ["invalid configuration:"]
        for e in err.errors():
            at = tuple(e["loc"])
            problem = (e.get("ctx") or {}).get("error")
            if isinstance(problem, SettingsProblem):
                origin = _origins([(*at, *loc) for loc in problem.settings], toml_path, overrides)
            elif at:
                fault, missing = _at_fault(e)
                origin = _origins([fault], toml_path, overrides, missing=missing)
            else:
                origin = ""
            label = ".".join(str(p) for p in at) or "(top level)"
            lines.append(f"  - {label}: {e['msg']}" + (f" ({origin})" if origin else ""))
        raise ConfigError("\n".join(lines)) from None
    except (OSError, ValueError) as err:
        raise ConfigError(_unreadable(err, toml_path)) from None
    settings._toml_path = toml_path
    # Every secret of a configuration this process loaded is masked wherever words curaflow
    # did not choose are written out (a library's exception in Temporal's history, a log line).
    hold(*(value for _, _, value in settings.secret_settings()))
    hold_url_parts(*(url for _, url in settings.url_settings()))
    return settings

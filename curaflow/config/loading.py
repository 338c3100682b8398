"""Loading the settings: a TOML file (or none) under the environment, and an error that
names each bad field and where its value came from."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic_settings import SettingsConfigDict

from curaflow.config.environment import SECRETS_DIR_ENV, ConventionalEnv, CuraflowEnv
from curaflow.config.settings import Settings


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


def _holds(data: Any, loc: tuple[Any, ...]) -> bool:
    """Whether nested ``data`` has a value at ``loc`` (pydantic's error location; a key of
    it that the data lacks — a union's tag — is skipped)."""
    for key in loc:
        if isinstance(data, dict) and str(key) in data:
            data = data[str(key)]
        elif isinstance(data, list) and isinstance(key, int) and key < len(data):
            data = data[key]
        elif not isinstance(data, dict | list):
            return False
    return True


def _variable(prefix: str, loc: tuple[Any, ...], names: Iterable[str]) -> str:
    """The name, as set, of the ``CURAFLOW_*`` variable (or secret file) of ``loc``."""
    fields = [str(k) for k in loc if not isinstance(k, int)]
    names = list(names)
    full = (prefix + "__".join(fields)).lower()
    below = sorted(name for name in names if name.lower().startswith(full + "__"))
    if below:  # the value at loc is a table the variables below it set (a route's kind …)
        return ", ".join(below)
    for depth in range(len(fields), 0, -1):
        wanted = (prefix + "__".join(fields[:depth])).lower()
        for name in names:
            if name.lower() == wanted:
                return name
    return full.upper()


def origin_of(loc: tuple[Any, ...], toml_path: Path | None, overrides: dict[str, Any] | None = None) -> str:
    """Where the value at ``loc`` came from, in the precedence order of the sources
    (:meth:`Settings.settings_customise_sources`): ``environment variable
    CURAFLOW_RETENTION__DAYS``, ``environment variable DATABASE_URL``, ``secret file …``,
    ``in <file>``, or ``default`` — so an error names what the operator must change."""
    if overrides and _holds(overrides, loc):
        return "given by the command"
    for name, (section, key) in ConventionalEnv.MAP.items():
        if loc[:2] == (section, key) and (os.environ.get(name) or "").strip():
            return f"environment variable {name}"
    prefixed = {k: v for k, v in os.environ.items() if k.upper().startswith("CURAFLOW_")}
    if prefixed and _holds(CuraflowEnv(Settings)(), loc):
        return f"environment variable {_variable('CURAFLOW_', loc, prefixed)}"
    directory = os.environ.get(SECRETS_DIR_ENV, "").strip()
    if directory and Path(directory).is_dir():
        files = [f.name for f in Path(directory).iterdir()]
        name = _variable("CURAFLOW_", loc, files)
        if name in files:
            return f"secret file {Path(directory) / name}"
    if toml_path is not None:
        return f"in {toml_path}"
    return "default"


class ConfigError(Exception):
    """The configuration file or environment is invalid; ``str()`` is a readable report."""


def load_settings(config: str | Path | None = None, **overrides: Any) -> Settings:
    """Load and validate settings.

    Args:
        config: TOML file path; defaults to ``$CURAFLOW_CONFIG``; None → defaults only.
        overrides: top-level fields taking precedence over every source.

    Returns:
        The validated :class:`Settings`.

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
            loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
            origin = f" ({origin_of(tuple(e['loc']), toml_path, overrides)})" if e["loc"] else ""
            lines.append(f"  - {loc}: {e['msg']}{origin}")
        raise ConfigError("\n".join(lines)) from None
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot read config {toml_path}: {err}") from None
    settings._toml_path = toml_path
    return settings

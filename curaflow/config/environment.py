"""Where settings come from besides the file: the conventional environment variables, the
``CURAFLOW_<SECTION>__<FIELD>`` variables and secret files, each a pydantic-settings source
(their order is :meth:`curaflow.config.settings.Settings.settings_customise_sources`)."""

from __future__ import annotations

import json
import os
import types
import typing
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_settings import EnvSettingsSource, NestedSecretsSettingsSource, PydanticBaseSettingsSource
from pydantic_settings.exceptions import SettingsError


class ConventionalEnv(PydanticBaseSettingsSource):
    """Map the conventional, un-prefixed environment variables onto settings fields."""

    MAP: ClassVar[dict[str, tuple[str, str]]] = {
        "TEMPORAL_ADDRESS": ("temporal", "address"),
        "TEMPORAL_NAMESPACE": ("temporal", "namespace"),
        "DATABASE_URL": ("database", "url"),
        "CURAFLOW_API_TOKEN": ("api", "token"),
        "PIXIV_REFRESH_TOKEN": ("pixiv", "refresh_token"),
    }

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:  # pragma: no cover
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for env, (section, key) in self.MAP.items():
            value = os.environ.get(env)
            if value is not None and value.strip():
                data.setdefault(section, {})[key] = value.strip()
        return data


def _numbers_where_any(model: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with the numbers the environment carries as text made numbers, for the
    fields typed ``Any`` (the budgets: resolved, not validated, reference §8).

    A typed field is converted by pydantic whatever the source; an ``Any`` field keeps
    what it is given, so ``"20000"`` from the environment would be "not a number" where
    ``20000`` in the TOML file is a budget. Text that is not a JSON number stays text.
    """
    out = dict(data)
    for key, value in data.items():
        info = model.model_fields.get(key)
        if info is None:
            continue
        annotation = info.annotation
        if isinstance(value, dict) and isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out[key] = _numbers_where_any(annotation, value)
        elif annotation is Any and isinstance(value, str):
            try:
                number = json.loads(value)
            except ValueError:
                continue
            if isinstance(number, int | float) and not isinstance(number, bool):
                out[key] = number
    return out


class UnreadableValue(ValueError):
    """A variable's (or a secret file's) value that is no JSON where its setting takes JSON
    (a list, a table); ``str()`` names the variable and what was expected, never the value
    (it may hold a secret)."""


def expected_json(annotation: Any) -> str:
    """What JSON a setting of type ``annotation`` takes from the environment: ``a JSON
    array`` (a list), ``a JSON object`` (a table: a section, a dict), both for a union of
    them, else ``JSON``."""
    found: set[str] = set()
    members = (
        typing.get_args(annotation)
        if typing.get_origin(annotation) in (typing.Union, types.UnionType)
        else (annotation,)
    )
    for member in members:
        origin = typing.get_origin(member) or member
        if typing.get_origin(member) is typing.Annotated:
            origin = typing.get_origin(typing.get_args(member)[0]) or typing.get_args(member)[0]
        if origin in (list, tuple, set, frozenset):
            found.add("array")
        elif origin is dict or (isinstance(origin, type) and issubclass(origin, BaseModel)):
            found.add("object")
    return {
        frozenset({"array"}): "a JSON array",
        frozenset({"object"}): "a JSON object",
        frozenset({"array", "object"}): "a JSON array or object",
    }.get(frozenset(found), "JSON")


class _NamesItsValues(EnvSettingsSource):
    """A source of ``CURAFLOW_*`` names whose value that is no JSON, where JSON is taken,
    names the variable as set and what was expected (:class:`UnreadableValue`).

    pydantic-settings said ``error parsing value for field "schedules" from source
    "CuraflowEnv"``: its own class, not the variable to fix (until 2026-12-07)."""

    def _origin(self, key: str) -> str:
        """How the report names the value of ``key`` (a name as this source read it)."""
        raise NotImplementedError

    def decode_complex_value(self, field_name: str, field: FieldInfo | None, value: Any) -> Any:  # type: ignore[override]
        try:
            return super().decode_complex_value(field_name, field, value)  # type: ignore[arg-type]
        except ValueError as err:
            wanted = expected_json(field.annotation) if field is not None else "JSON"
            ends = ("_" + field_name.lower(), self.env_prefix.lower() + field_name.lower())
            keys = [k for k, v in self.env_vars.items() if v == value and k.lower().endswith(ends)]
            where = self._origin(keys[0]) if keys else f"the value of {field_name!r}"
            raise UnreadableValue(f"{where}: not {wanted} ({err})") from None

    def __call__(self) -> dict[str, Any]:
        try:
            return _numbers_where_any(self.settings_cls, super().__call__())
        except SettingsError as err:
            if isinstance(err.__cause__, UnreadableValue):
                raise err.__cause__ from None
            raise


class CuraflowEnv(_NamesItsValues):
    """``CURAFLOW_<SECTION>__<FIELD>`` variables, with the same result as the TOML file's
    values (:func:`_numbers_where_any`); a value that is no JSON where JSON is taken names
    its variable (:class:`UnreadableValue`)."""

    def _origin(self, key: str) -> str:
        names = [name for name in os.environ if name.lower() == key.lower()]
        return f"environment variable {names[0] if names else key.upper()}"


#: The directory of secret files (``/run/secrets`` of Docker/Compose secrets, a mounted
#: Kubernetes Secret): one file per setting, named as its ``CURAFLOW_*`` variable.
SECRETS_DIR_ENV = "CURAFLOW_SECRETS_DIR"


def secret_files(file_secret_settings: PydanticBaseSettingsSource) -> tuple[PydanticBaseSettingsSource, ...]:
    """The secret-files source when ``CURAFLOW_SECRETS_DIR`` names a directory.

    A file ``CURAFLOW_ROUTES__TG__BOT_TOKEN`` holding the token sets ``routes.tg.bot_token``,
    exactly as the environment variable of that name would (trailing newline stripped);
    the environment wins over a file, a file over the TOML. A directory that does not
    exist is a configuration error.
    """
    directory = os.environ.get(SECRETS_DIR_ENV, "").strip()
    if not directory:
        return ()
    if not Path(directory).is_dir():
        raise ValueError(f"{SECRETS_DIR_ENV}={directory}: not a directory")

    class _Files(NestedSecretsSettingsSource, _NamesItsValues):
        def _origin(self, key: str) -> str:
            names = [f.name for f in Path(directory).iterdir() if f.name.lower() == key.lower()]
            return f"secret file {Path(directory) / (names[0] if names else key.upper())}"

        def __call__(self) -> dict[str, Any]:
            return _stripped(_NamesItsValues.__call__(self))

    return (_Files(file_secret_settings, secrets_dir=directory, secrets_dir_missing="error"),)


def _stripped(data: dict[str, Any]) -> dict[str, Any]:
    """Text values without the trailing newline an editor or ``echo`` leaves in a file."""
    return {
        k: _stripped(v) if isinstance(v, dict) else v.rstrip("\r\n") if isinstance(v, str) else v
        for k, v in data.items()
    }

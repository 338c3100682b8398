"""Where settings come from besides the file: the conventional environment variables, the
``CURAFLOW_<SECTION>__<FIELD>`` variables and secret files, each a pydantic-settings source
(their order is :meth:`curaflow.config.settings.Settings.settings_customise_sources`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel
from pydantic_settings import EnvSettingsSource, NestedSecretsSettingsSource, PydanticBaseSettingsSource


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


class CuraflowEnv(EnvSettingsSource):
    """``CURAFLOW_<SECTION>__<FIELD>`` variables, with the same result as the TOML file's
    values (:func:`_numbers_where_any`)."""

    def __call__(self) -> dict[str, Any]:
        return _numbers_where_any(self.settings_cls, super().__call__())


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

    class _Files(NestedSecretsSettingsSource):
        def __call__(self) -> dict[str, Any]:
            return _numbers_where_any(self.settings_cls, _stripped(super().__call__()))

    return (_Files(file_secret_settings, secrets_dir=directory, secrets_dir_missing="error"),)


def _stripped(data: dict[str, Any]) -> dict[str, Any]:
    """Text values without the trailing newline an editor or ``echo`` leaves in a file."""
    return {
        k: _stripped(v) if isinstance(v, dict) else v.rstrip("\r\n") if isinstance(v, str) else v
        for k, v in data.items()
    }
